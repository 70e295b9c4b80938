"""Reverse geocoding in every provider's documented form: the nearest known address within
200 m, else the nearest street, else the town; outside Liechtenstein, each provider's own
"nothing found". Where the reverse answer has the forward shape, geotoolkit's forward
parser reads it back at the intended precision."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from formats_support import FACTORIES, KEY

from geotoolkit.results import Match, NoMatch, Query
from geotoolkit.testing import ProviderSimulator

STAEDTLE = (9.5219500, 47.1397400)
NEAR_STAEDTLE = (9.52197, 47.13976)  # about 3 m away
NEAR_DUXWEG = (9.5125, 47.1705)  # 35 m from the street's centre, far from any known house
IN_THE_HILLS = (9.600, 47.200)  # far from every street: the nearest town
OUTSIDE = (10.0, 47.0)

Lon, Lat = float, float
#: provider -> (path, parameters for a point)
REQUESTS: dict[str, tuple[str, Callable[[Lon, Lat], dict[str, str]]]] = {
    "nominatim": ("/reverse", lambda x, y: {"lat": str(y), "lon": str(x), "format": "jsonv2",
                                            "key": KEY}),
    "locationiq": ("/v1/reverse", lambda x, y: {"lat": str(y), "lon": str(x), "format": "json",
                                                "key": KEY}),
    "photon": ("/reverse", lambda x, y: {"lon": str(x), "lat": str(y)}),
    "pelias": ("/v1/reverse", lambda x, y: {"point.lat": str(y), "point.lon": str(x),
                                            "api_key": KEY}),
    "opencage": ("/geocode/v1/json", lambda x, y: {"q": f"{y},{x}", "key": KEY}),
    "google": ("/maps/api/geocode/json", lambda x, y: {"latlng": f"{y},{x}", "key": KEY}),
    "mapbox": ("/search/geocode/v6/reverse", lambda x, y: {"longitude": str(x), "latitude": str(y),
                                                           "access_token": KEY}),
    "here": ("/v1/revgeocode", lambda x, y: {"at": f"{y},{x}", "apiKey": KEY}),
    "arcgis": ("/reverseGeocode", lambda x, y: {"location": f"{x},{y}", "f": "json", "token": KEY}),
    "geonorge": ("/punktsok", lambda x, y: {"lat": str(y), "lon": str(x), "radius": "500",
                                            "utkoordsys": "4258"}),
}


@pytest.fixture(scope="module")
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator(valid_keys={KEY}) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def client(sim: ProviderSimulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.url, timeout=5.0) as c:
        yield c


def reverse(client: httpx.Client, provider: str, point: tuple[float, float]) -> httpx.Response:
    path, params = REQUESTS[provider]
    return client.get(path, params=params(*point))


def read_back(sim: ProviderSimulator, provider: str, response: httpx.Response) -> Any:
    """The answer through geotoolkit's forward parser (a reverse answer has its shape)."""
    if provider == "arcgis":
        return response.json()
    if provider in ("nominatim", "locationiq"):  # one object, not a list
        body = response.json()
        if "error" not in body or provider == "nominatim":
            response = httpx.Response(200, json=[] if "error" in body else [body])
    return FACTORIES[provider](sim.url).parse_response(Query(text="reverse"), response)


def arcgis_outcome(body: dict[str, Any]) -> tuple[str, tuple[float, float]] | None:
    if "error" in body:
        assert body["error"]["details"] == ["Unable to find address for the specified location."]
        return None
    address, location = body["address"], body["location"]
    assert location["spatialReference"]["wkid"] == 4326
    kind = {"PointAddress": "address", "StreetName": "street", "Locality": "locality"}
    return kind[address["Addr_type"]], (location["x"], location["y"])


@pytest.mark.parametrize("provider", sorted(REQUESTS))
@pytest.mark.parametrize(("point", "level"), [(NEAR_STAEDTLE, "address"), (NEAR_DUXWEG, "street"),
                                              (IN_THE_HILLS, "locality"), (OUTSIDE, None)])
def test_reverse_levels(sim: ProviderSimulator, client: httpx.Client, provider: str,
                        point: tuple[float, float], level: str | None) -> None:
    response = reverse(client, provider, point)
    assert sim.requests[-1].provider == provider
    assert sim.requests[-1].query == f"reverse:{point[0]:.6f},{point[1]:.6f}"
    outcome = read_back(sim, provider, response)
    if provider == "geonorge" and level not in ("address", None):  # address points only
        level = None
    if provider == "arcgis":
        found = arcgis_outcome(outcome)
        assert (found[0] if found else None) == level
        return
    if level is None:
        assert isinstance(outcome, NoMatch), outcome
        assert response.status_code == (404 if provider == "locationiq" else 200)
        return
    assert isinstance(outcome, Match), outcome
    assert outcome.precision == level
    if level == "address":
        assert (outcome.lon, outcome.lat) == STAEDTLE
        assert outcome.place.housenumber == "38"


def test_distances_are_reported_where_the_api_does(client: httpx.Client) -> None:
    pelias = reverse(client, "pelias", NEAR_DUXWEG).json()["features"][0]["properties"]
    assert 0.02 < pelias["distance"] < 0.05  # kilometres
    here = reverse(client, "here", NEAR_DUXWEG).json()["items"][0]
    assert 20 < here["distance"] < 50 and here["resultType"] == "street"  # metres
    norway = reverse(client, "geonorge", NEAR_STAEDTLE).json()["adresser"][0]
    assert 0 < norway["meterDistanseTilPunkt"] < 10


def test_coordinate_order_is_each_apis_own(client: httpx.Client) -> None:
    """Swapped coordinates land outside the world: each API reads its own order only."""
    for provider in ("opencage", "google", "here", "arcgis", "mapbox", "pelias"):
        swapped = reverse(client, provider, (NEAR_STAEDTLE[1], NEAR_STAEDTLE[0]))
        assert swapped.status_code in (200, 400, 422), provider
        assert "Städtle" not in swapped.text, provider


def test_geonorge_radius_is_in_metres(client: httpx.Client) -> None:
    near = client.get("/punktsok", params={"lat": "47.1400", "lon": "9.5220", "radius": "10"})
    assert near.json()["adresser"] == []  # Städtle 38 is about 30 m away
    wider = client.get("/punktsok", params={"lat": "47.1400", "lon": "9.5220", "radius": "50"})
    assert wider.json()["adresser"][0]["adressetekst"] == "Städtle 38"


@pytest.mark.parametrize(("provider", "params", "status"), [
    ("nominatim", {"lat": "47.1"}, 400), ("pelias", {"point.lat": "47.1"}, 400),
    ("mapbox", {"longitude": "east"}, 422), ("here", {}, 400), ("geonorge", {"lat": "47.1"}, 400),
    ("google", {"latlng": "47.1"}, 200), ("arcgis", {"location": "9.5", "f": "json"}, 200)])
def test_malformed_points_are_refused(client: httpx.Client, provider: str, params: dict[str, str],
                                      status: int) -> None:
    path = REQUESTS[provider][0]
    key = {"google": "key", "arcgis": "token", "pelias": "api_key", "mapbox": "access_token",
           "here": "apiKey", "nominatim": "key"}.get(provider)
    response = client.get(path, params={**params, **({key: KEY} if key else {})})
    assert response.status_code == status
    assert response.json()  # in the provider's own error form


def test_nominatim_reverse_needs_a_json_format(client: httpx.Client) -> None:
    """Without ``format``, ``/reverse`` is Photon's (Nominatim's default is XML)."""
    mounted = client.get("/nominatim/reverse", params={"lat": "47.14", "lon": "9.52", "key": KEY})
    assert mounted.status_code == 400
    bare = client.get("/reverse", params={"lat": "47.13976", "lon": "9.52197"})
    assert bare.json()["type"] == "FeatureCollection"  # Photon's answer
