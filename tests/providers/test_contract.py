"""One contract, every provider: requests from each query shape, secrets kept, fixtures parsed."""

from __future__ import annotations

import json

import httpx
import pytest

from geotoolkit import errors
from geotoolkit.errors import ConfigurationError, ProviderError
from geotoolkit.providers import POLICIES, PROVIDERS, Provider, get_provider
from geotoolkit.results import PRECISIONS, Failure, Match, NoMatch, Query

from .provider_support import (
    AGENT,
    EXPECTED_POINT,
    KEYED,
    SECRET,
    cases,
    check_match,
    load,
    make,
    response_of,
)

NAMES = sorted(PROVIDERS)
TEXT = Query(text="Karl Johans gate 1, 0154 Oslo")
STRUCTURED = Query(housenumber="1", street="Karl Johans gate", city="Oslo", postalcode="0154",
                   country="NO")
FIXTURE_CASES = [(name, case) for name in NAMES for case in cases(name)]
#: Providers whose API answers only addresses (no street, postcode or town results).
ADDRESS_ONLY = frozenset({"geonorge", "census"})
#: Providers that say when they placed a house number by interpolation.
INTERPOLATING = frozenset({"nominatim", "locationiq", "pelias", "google", "mapbox", "here",
                           "arcgis", "census"})


@pytest.fixture(params=NAMES)
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_every_provider_is_registered_with_a_policy_and_is_a_provider(name: str) -> None:
    assert name in POLICIES
    assert isinstance(make(name), Provider)


def test_every_provider_has_the_four_core_fixtures(name: str) -> None:
    assert {"match", "no_match", "rate_limited", "error"} <= set(cases(name))


def test_every_provider_has_match_fixtures_at_several_precisions(name: str) -> None:
    """An address (or interpolated) match, a street, a postcode or town, an interpolated one."""
    envelopes = [load(name, case) for case in cases(name)]
    matches = [e for e in envelopes if e["expect"] == "Match"]
    assert all("precision" in e and "place" in e for e in matches), name
    precisions = {e["precision"] for e in matches}
    assert precisions <= set(PRECISIONS)
    assert precisions & {"address", "interpolated"}
    if name not in ADDRESS_ONLY:
        assert "street" in precisions and precisions & {"postcode", "locality"}, precisions
    if name in INTERPOLATING:
        assert "interpolated" in precisions


def test_free_text_request(name: str) -> None:
    provider = make(name)
    request = provider.build_request(TEXT)
    assert request.method == "GET" and request.url.scheme == "https"
    assert request.url.netloc.decode() == provider.host
    assert TEXT.text in request.url.params.values()
    assert request.headers["user-agent"] == AGENT


def test_structured_request_carries_every_field_it_can(name: str) -> None:
    request = make(name).build_request(STRUCTURED)
    values = " | ".join(request.url.params.values())
    for value in ("Karl Johans gate", "Oslo", "0154"):
        assert value in values, (name, value, dict(request.url.params))
    assert "1" in values


@pytest.mark.parametrize("name", sorted(KEYED))
def test_key_is_sent_but_never_shown(name: str) -> None:
    provider = make(name)
    assert SECRET in request_params(provider)
    for shown in (repr(provider), str(provider), provider.gate_key, provider.cache_namespace()):
        assert SECRET not in shown
    assert "***" in repr(provider)
    assert provider.gate_key != make(name, api_key="another-key").gate_key


def request_params(provider: Provider) -> list[str]:
    return list(provider.build_request(TEXT).url.params.values())


def test_missing_key_is_a_configuration_error(name: str) -> None:
    if name not in KEYED:
        assert make(name).gate_key.endswith(":anonymous")
        return
    for blank in (None, "", "   "):
        with pytest.raises(ConfigurationError, match="api_key"):
            get_provider(name, api_key=blank, user_agent=AGENT)


def test_default_rate_comes_from_the_registry_for_the_public_host(name: str) -> None:
    provider = make(name)
    assert provider.host in POLICIES[name].hosts
    assert provider.default_rate == POLICIES[name].rate_per_second
    assert make(name, rate=7).default_rate == 7.0
    own = make(name, base_url="http://127.0.0.1:8080")
    assert own.default_rate is None and own.host == "127.0.0.1:8080"


@pytest.mark.parametrize("rate", [0, -1, float("nan"), float("-inf"), True, "2"])
def test_bad_rate_is_refused(name: str, rate: float) -> None:
    with pytest.raises(ConfigurationError):
        make(name, rate=rate)


def test_an_unlimited_rate_is_a_provider_s_own_choice(name: str) -> None:
    assert make(name, base_url="http://127.0.0.1:8080", rate=float("inf")).default_rate == float("inf")


def test_bad_base_url_is_refused(name: str) -> None:
    with pytest.raises(ConfigurationError):
        make(name, base_url="ftp://example.org")


def test_cache_namespace_is_stable_and_distinct(name: str) -> None:
    assert make(name).cache_namespace() == make(name).cache_namespace()
    others = {make(other).cache_namespace() for other in NAMES if other != name}
    assert make(name).cache_namespace() not in others


@pytest.mark.parametrize(("provider_name", "case"), FIXTURE_CASES)
def test_fixture_parses_to_the_documented_outcome(provider_name: str, case: str) -> None:
    provider = make(provider_name)
    envelope = load(provider_name, case)
    response = response_of(envelope, provider.build_request(TEXT))
    expect = envelope["expect"]
    if expect in ("Match", "NoMatch", "Failure"):
        outcome = provider.parse_response(TEXT, response)
        assert type(outcome).__name__ == expect, outcome
        assert outcome.provider == provider_name and SECRET not in repr(outcome)
        if isinstance(outcome, Match):
            point = envelope.get("point", EXPECTED_POINT[provider_name])
            assert (outcome.lon, outcome.lat) == pytest.approx(tuple(point))
            assert outcome.label and outcome.raw
            check_match(outcome, envelope)
        if "reason_contains" in envelope:
            assert isinstance(outcome, Failure | NoMatch)
            assert envelope["reason_contains"] in outcome.reason
        return
    with pytest.raises(getattr(errors, expect)) as info:
        provider.parse_response(TEXT, response)
    assert isinstance(info.value, ProviderError) and info.value.provider == provider_name
    assert SECRET not in str(info.value)
    if "retry_after" in envelope:
        assert info.value.retry_after == envelope["retry_after"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("body", [b"<html>upstream glitch</html>", b'{"unexpected": 1}', b"[1, 2]",
                                  b"null", b'"text"'])
def test_malformed_bodies_are_failures_not_crashes(name: str, body: bytes) -> None:
    outcome = make(name).parse_response(TEXT, httpx.Response(200, content=body))
    assert isinstance(outcome, Failure) and outcome.error == "ProviderResponseError"


def test_swapped_or_impossible_coordinates_are_refused(name: str) -> None:
    """A latitude of 200 cannot be a point: the parser says so instead of returning it."""
    envelope = load(name, "match")
    text = json.dumps(envelope["json"]).replace("59.9138688", "200.5").replace("38.845985", "200.5")
    envelope["json"] = json.loads(text)  # the same answer with an impossible latitude
    outcome = make(name).parse_response(TEXT, response_of(envelope))
    assert isinstance(outcome, Failure) and outcome.error == "ProviderResponseError"


@pytest.mark.parametrize("status", [500, 502, 504])
def test_server_errors_are_retriable(name: str, status: int) -> None:
    with pytest.raises(errors.ProviderUnavailableError) as info:
        make(name).parse_response(TEXT, httpx.Response(status, text="oops"))
    assert info.value.retriable


def test_http_401_stops_the_batch(name: str) -> None:
    with pytest.raises(errors.AuthenticationError):
        make(name).parse_response(TEXT, httpx.Response(401, json={"message": "no"}))
