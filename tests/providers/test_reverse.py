"""Reverse geocoding, one contract over every provider with a reverse endpoint.

A ``ReverseQuery`` is ``lon, lat``; each provider turns it into its API's own order
once, in ``build_request``. These tests pin that order in every URL (with a point
whose two numbers cannot be mistaken for each other), parse each provider's
documented reverse answers, and check the shared error answers read the same for a
point as for an address.
"""

from __future__ import annotations

import json
import math

import httpx
import pytest

from geotoolkit import errors
from geotoolkit.errors import ProviderError, QueryError
from geotoolkit.providers import PROVIDERS, can_reverse
from geotoolkit.results import Failure, Match, NoMatch, ReverseQuery

from .provider_support import (
    AGENT,
    KEYED,
    OSLO,
    SECRET,
    cases,
    check_match,
    load,
    make,
    response_of,
)

#: Every provider but the Census, whose coordinates lookup answers geographies, not addresses.
REVERSE = sorted(set(PROVIDERS) - {"census"})
LON, LAT = "10.752260", "59.913900"
POINT = ReverseQuery(10.75226, 59.9139)
#: Where each API takes the point: the path, and the parameters holding lon and lat.
EXPECTED = {
    "nominatim": ("/reverse", {"lat": LAT, "lon": LON}),
    "locationiq": ("/v1/reverse", {"lat": LAT, "lon": LON}),
    "opencage": ("/geocode/v1/json", {"q": f"{LAT},{LON}"}),
    "google": ("/maps/api/geocode/json", {"latlng": f"{LAT},{LON}"}),
    "mapbox": ("/search/geocode/v6/reverse", {"longitude": LON, "latitude": LAT}),
    "here": ("/v1/revgeocode", {"at": f"{LAT},{LON}"}),
    "arcgis": ("/World/GeocodeServer/reverseGeocode", {"location": f"{LON},{LAT}"}),
    "photon": ("/reverse", {"lon": LON, "lat": LAT}),
    "pelias": ("/v1/reverse", {"point.lat": LAT, "point.lon": LON}),
    "geonorge": ("/adresser/v1/punktsok", {"lat": LAT, "lon": LON}),
}
REVERSE_CASES = [(name, case) for name in REVERSE for case in cases(name, "reverse")]
#: The forward fixtures that are errors: a point gets the same answer the same way.
ERROR_CASES = [(name, case) for name in REVERSE for case in cases(name)
               if load(name, case)["expect"] not in ("Match", "NoMatch")]


@pytest.fixture(params=REVERSE)
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_which_providers_geocode_points() -> None:
    assert sorted(EXPECTED) == REVERSE
    assert [n for n in sorted(PROVIDERS) if make(n).supports_reverse] == REVERSE
    assert all(can_reverse(make(n)) == (n in REVERSE) for n in PROVIDERS)


def test_every_reverse_provider_has_a_match_and_a_nothing_here_fixture(name: str) -> None:
    assert {"match", "no_match"} <= set(cases(name, "reverse"))
    assert load(name, "reverse/match")["expect"] == "Match"
    assert load(name, "reverse/no_match")["expect"] == "NoMatch"


def test_the_point_is_sent_in_the_order_the_api_takes(name: str) -> None:
    provider = make(name)
    request = provider.build_request(POINT)
    path, expected = EXPECTED[name]
    assert request.method == "GET" and request.url.scheme == "https"
    assert request.url.path.endswith(path), request.url
    params = dict(request.url.params)
    assert {k: params.get(k) for k in expected} == expected, params
    assert request.headers["user-agent"] == AGENT
    if name in KEYED:
        assert SECRET in params.values()
    expected_host = "revgeocode.search.hereapi.com" if name == "here" else provider.host
    assert request.url.host == expected_host


@pytest.mark.parametrize(("lon", "lat", "sent"), [
    (10.7522604999, 59.91389999, (LON, LAT)),       # what is sent is what the cache key says
    (-0.0000001, 0.0000004, ("0.000000", "0.000000")),  # never "-0.000000" nor "1e-07"
    (-180.0, -90.0, ("-180.000000", "-90.000000")),
    (179.9999999, 89.99999949, ("180.000000", "89.999999")),
])
def test_the_point_is_sent_rounded_as_its_cache_key(lon: float, lat: float,
                                                    sent: tuple[str, str]) -> None:
    query = ReverseQuery(lon, lat)
    assert query.key() == f"reverse:{sent[0]},{sent[1]}"
    params = dict(make("photon").build_request(query).url.params)
    assert (params["lon"], params["lat"]) == sent


@pytest.mark.parametrize(("lon", "lat", "message"), [
    (200.0, 59.9, "longitude 200.0 out of range [-180, 180]"),
    (10.75, 95.0, "latitude 95.0 out of range [-90, 90]"),
    (math.nan, 59.9, "missing coordinates"),                # NaN is a missing value
    (10.75, math.inf, "coordinates are not finite (10.75, inf)"),
    (0.0, -0.0, "null island (0, 0)"),                      # a missing fix written as zeros
    (True, 59.9, "coordinates are not numbers"),
    ("10.75", 59.9, "coordinates are not numbers"),
])
def test_a_point_that_is_not_one_is_never_sent(name: str, lon: object, lat: object,
                                                message: str) -> None:
    with pytest.raises(QueryError) as info:
        make(name).build_request(ReverseQuery(lon, lat))  # type: ignore[arg-type]
    assert str(info.value) == message and info.value.provider == name


def test_the_census_has_no_reverse_endpoint() -> None:
    census = make("census")
    assert census.supports_reverse is False
    with pytest.raises(QueryError, match=r"^census has no reverse geocoding endpoint$"):
        census.build_request(POINT)
    outcome = census.parse_response(POINT, httpx.Response(200, json={"result": {}}))
    assert isinstance(outcome, Failure) and outcome.error == "QueryError"


@pytest.mark.parametrize(("provider_name", "case"), REVERSE_CASES)
def test_reverse_fixture_parses_to_the_documented_outcome(provider_name: str, case: str) -> None:
    provider = make(provider_name)
    envelope = load(provider_name, case, "reverse")
    outcome = provider.parse_response(POINT, response_of(envelope, provider.build_request(POINT)))
    assert type(outcome).__name__ == envelope["expect"], outcome
    assert outcome.provider == provider_name and SECRET not in repr(outcome)
    if isinstance(outcome, Match):
        assert (outcome.lon, outcome.lat) == pytest.approx(tuple(envelope.get("point", OSLO)))
        assert outcome.label and outcome.raw
        check_match(outcome, envelope)
    if "reason_contains" in envelope:
        assert isinstance(outcome, Failure | NoMatch)
        assert envelope["reason_contains"] in outcome.reason


def test_a_forward_answer_is_not_a_reverse_one_for_nominatim() -> None:
    """Nominatim's /search answers a list, /reverse one object: each parser reads its own."""
    forward = response_of(load("nominatim", "match"))
    outcome = make("nominatim").parse_response(POINT, forward)
    assert isinstance(outcome, Failure) and outcome.error == "ProviderResponseError"


def test_geonorge_takes_the_nearest_address() -> None:
    envelope = load("geonorge", "match", "reverse")
    nearest = min(envelope["json"]["adresser"], key=lambda a: a["meterDistanseTilPunkt"])
    outcome = make("geonorge").parse_response(POINT, response_of(envelope))
    assert isinstance(outcome, Match) and outcome.label.startswith(nearest["adressetekst"])
    assert envelope["json"]["adresser"][0] is not nearest  # the fixture lists it second


@pytest.mark.parametrize(("provider_name", "case"), ERROR_CASES)
def test_error_answers_read_the_same_for_a_point(provider_name: str, case: str) -> None:
    provider = make(provider_name)
    envelope = load(provider_name, case)
    response = response_of(envelope)
    expect = envelope["expect"]
    if expect == "Failure":
        outcome = provider.parse_response(POINT, response)
        assert isinstance(outcome, Failure) and SECRET not in repr(outcome)
        return
    with pytest.raises(getattr(errors, expect)) as info:
        provider.parse_response(POINT, response)
    assert isinstance(info.value, ProviderError) and info.value.provider == provider_name
    if "retry_after" in envelope:
        assert info.value.retry_after == envelope["retry_after"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("body", [b"<html>upstream glitch</html>", b'{"unexpected": 1}', b"[1, 2]",
                                  b"null", b'"text"'])
def test_malformed_reverse_bodies_are_failures(name: str, body: bytes) -> None:
    outcome = make(name).parse_response(POINT, httpx.Response(200, content=body))
    assert isinstance(outcome, Failure) and outcome.error == "ProviderResponseError"


def test_an_impossible_point_in_the_answer_is_refused(name: str) -> None:
    envelope = load(name, "match", "reverse")
    envelope["json"] = json.loads(json.dumps(envelope["json"]).replace("59.9138688", "200.5"))
    outcome = make(name).parse_response(POINT, response_of(envelope))
    assert isinstance(outcome, Failure) and outcome.error == "ProviderResponseError"


@pytest.mark.parametrize("status", [500, 502, 504])
def test_server_errors_are_retriable_for_a_point(name: str, status: int) -> None:
    with pytest.raises(errors.ProviderUnavailableError):
        make(name).parse_response(POINT, httpx.Response(status, text="oops"))


def test_http_401_stops_the_batch_for_a_point(name: str) -> None:
    with pytest.raises(errors.AuthenticationError):
        make(name).parse_response(POINT, httpx.Response(401, json={"message": "no"}))


def test_geonorge_radius_is_an_option_that_changes_the_cache_only_when_set() -> None:
    from geotoolkit.errors import ConfigurationError
    from geotoolkit.providers import Geonorge

    assert Geonorge().cache_namespace() == Geonorge(radius=100).cache_namespace()
    assert Geonorge(radius=25).cache_namespace() != Geonorge().cache_namespace()
    assert dict(Geonorge(radius=25).build_request(POINT).url.params)["radius"] == "25"
    for bad in (0, -5, 20_000, True, "100"):
        with pytest.raises(ConfigurationError):
            Geonorge(radius=bad)  # type: ignore[arg-type]


def test_here_sends_points_to_its_reverse_host_or_to_a_given_one() -> None:
    from geotoolkit.providers import Here

    assert Here(api_key=SECRET).build_request(POINT).url.host == "revgeocode.search.hereapi.com"
    local = Here("http://127.0.0.1:9000", api_key=SECRET).build_request(POINT).url
    assert (local.host, local.port, local.path) == ("127.0.0.1", 9000, "/v1/revgeocode")
    split = Here(api_key=SECRET, reverse_base_url="https://rev.example/here")
    assert str(split.build_request(POINT).url).startswith("https://rev.example/here/v1/revgeocode?")
    assert split.cache_namespace() != Here(api_key=SECRET).cache_namespace()
    assert SECRET not in repr(split)
