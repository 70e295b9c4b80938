"""Which provider a request speaks to: its own paths on ``sim.url``, a mount per provider
(``sim.base_url(name)``), the shared paths decided by parameters; and the faults, which
follow each provider's format."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from formats_support import FACTORIES, KEY, geocode

from geotoolkit.results import Match, Query
from geotoolkit.testing import FORMATS, ProviderSimulator

ADDRESS = "Städtle 38, 9490 Vaduz"


@pytest.fixture(scope="module")
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator(trickle_interval_seconds=0.001, trickle_chunk_bytes=512) as simulator:
        yield simulator


@pytest.fixture(autouse=True)
def fresh(sim: ProviderSimulator) -> None:
    sim.configure(huge_body_bytes=50_000_000, fault=None)
    sim.reset()


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5.0) as c:
        yield c


@pytest.mark.parametrize("provider", FORMATS)
def test_each_provider_has_its_own_mount(sim: ProviderSimulator, client: httpx.Client,
                                         provider: str) -> None:
    outcome = geocode(client, FACTORIES[provider](sim.base_url(provider)), Query(text=ADDRESS))
    assert isinstance(outcome, Match)
    assert (outcome.lon, outcome.lat) == sim.expected(ADDRESS)
    (logged,) = sim.requests
    assert logged.provider == provider and logged.path.startswith(f"/{provider}/")


def test_base_url_names_a_provider(sim: ProviderSimulator) -> None:
    assert sim.base_url("locationiq") == f"{sim.url}/locationiq/v1"
    assert sim.base_url("google") == f"{sim.url}/google"
    with pytest.raises(ValueError, match="does not speak"):
        sim.base_url("bing")


@pytest.mark.parametrize(("provider", "base"), [
    ("locationiq", "/v1"), ("locationiq", ""), ("arcgis", "/arcgis/rest/services/World/GeocodeServer"),
    ("arcgis", "/any/GeocodeServer"), ("census", "/geocoder"), ("geonorge", "/adresser/v1")])
def test_real_base_paths_work_too(sim: ProviderSimulator, client: httpx.Client, provider: str,
                                  base: str) -> None:
    outcome = geocode(client, FACTORIES[provider](f"{sim.url}{base}"), Query(text=ADDRESS))
    assert isinstance(outcome, Match)
    assert sim.requests[-1].provider == provider


def test_shared_paths_are_decided_by_parameters(sim: ProviderSimulator, client: httpx.Client) -> None:
    client.get(f"{sim.url}/search", params={"q": ADDRESS})
    client.get(f"{sim.url}/search", params={"q": ADDRESS, "matchquality": "1", "format": "json"})
    client.get(f"{sim.url}/v1/search", params={"text": ADDRESS})
    client.get(f"{sim.url}/v1/search", params={"q": ADDRESS, "key": KEY, "format": "json"})
    client.get(f"{sim.url}/reverse", params={"lat": "47.14", "lon": "9.52"})
    client.get(f"{sim.url}/reverse", params={"lat": "47.14", "lon": "9.52", "format": "jsonv2"})
    nothing = client.get(f"{sim.url}/reverse", params={"lat": "40", "lon": "9", "format": "json",
                                                       "key": KEY})
    assert nothing.status_code == 404 and nothing.json() == {"error": "Unable to geocode"}
    assert [r.provider for r in sim.requests] == ["nominatim", "locationiq", "pelias", "locationiq",
                                                  "photon", "nominatim", "locationiq"]


def test_unknown_paths_and_methods(sim: ProviderSimulator, client: httpx.Client) -> None:
    missing = client.get(f"{sim.url}/geocode/v2/json")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == 404
    assert client.get(f"{sim.url}/google/nope").status_code == 404
    posted = client.post(f"{sim.url}/maps/api/geocode/json", params={"address": ADDRESS})
    assert posted.status_code == 405 and posted.json()["status"] == "UNKNOWN_ERROR"
    head = client.head(f"{sim.url}/v1/geocode", params={"q": ADDRESS})
    assert head.status_code == 200 and head.content == b""
    assert [(r.provider, r.outcome) for r in sim.requests] == [
        (None, "not_found"), (None, "not_found"), ("google", "method"), ("here", "ok")]


@pytest.mark.parametrize("provider", FORMATS)
def test_huge_inflates_each_providers_label(sim: ProviderSimulator, client: httpx.Client,
                                            provider: str) -> None:
    sim.huge_body_bytes = 200_000
    built = FACTORIES[provider](sim.url)
    response = client.send(built.build_request(Query(text=f"{ADDRESS} #huge")))
    assert 199_000 <= len(response.content) <= 201_000
    outcome = built.parse_response(Query(text=ADDRESS), response)
    assert isinstance(outcome, Match), outcome
    assert len(outcome.label) <= 1001 and outcome.label.startswith("x" * 100)
    assert (outcome.lon, outcome.lat) == sim.expected(ADDRESS)


@pytest.mark.parametrize("provider", FORMATS)
def test_an_error_inside_a_200_is_never_a_match(sim: ProviderSimulator, client: httpx.Client,
                                                provider: str) -> None:
    built = FACTORIES[provider](sim.url)
    try:
        outcome = geocode(client, built, Query(text=f"{ADDRESS} #error"))
    except Exception as exc:  # Google's UNKNOWN_ERROR, ArcGIS's error object: retriable
        assert getattr(exc, "retriable", False), exc
    else:
        assert not isinstance(outcome, Match), outcome
    assert sim.requests[-1].status == 200


@pytest.mark.parametrize("provider", ["google", "here", "census"])
def test_trickled_answers_parse_whole(sim: ProviderSimulator, client: httpx.Client,
                                      provider: str) -> None:
    sim.fault = "trickle"
    outcome = geocode(client, FACTORIES[provider](sim.url), Query(text=ADDRESS))
    assert isinstance(outcome, Match)
    assert sim.requests[-1].outcome == "fault"
