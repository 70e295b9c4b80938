"""Each provider's own ways of saying no, read back by geotoolkit's own provider: a missing
or wrong key, throttling (and its hints), a spent quota, a server error, a bad request."""

from __future__ import annotations

from collections.abc import Iterator
from email.utils import parsedate_to_datetime

import httpx
import pytest
from formats_support import FACTORIES, KEY, KEYED, geocode
from sim_support import FakeClock

from geotoolkit.errors import (
    AuthenticationError,
    ProviderUnavailableError,
    QuotaExceededError,
    RateLimitError,
)
from geotoolkit.results import Failure, Match, Query
from geotoolkit.testing import ProviderSimulator

ADDRESS = Query(text="Städtle 38, 9490 Vaduz")
#: The parameter that carries each provider's query text (blanked for a bad request).
TEXT_PARAM = {"nominatim": "q", "locationiq": "q", "photon": "q", "pelias": "text",
              "opencage": "q", "google": "address", "mapbox": "q", "here": "q",
              "arcgis": "SingleLine", "geonorge": "sok", "census": "address"}
#: The key parameter of each keyed provider.
KEY_PARAM = {"nominatim": "key", "locationiq": "key", "pelias": "api_key", "opencage": "key",
             "google": "key", "mapbox": "access_token", "here": "apiKey", "arcgis": "token"}
#: Who says no inside an HTTP 200.
IN_BODY = ("google", "arcgis")


@pytest.fixture(scope="module")
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator() as simulator:
        yield simulator


@pytest.fixture
def clock(sim: ProviderSimulator) -> FakeClock:
    fake = FakeClock()
    sim.configure(clock=fake, valid_keys=None, rate_limit=None, daily_cap=None, error_503_rate=0.0,
                  retry_after="auto", window_seconds=1.0, limiter="sliding-window")
    sim.reset()
    return fake


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5.0) as c:
        yield c


def send(client: httpx.Client, provider: object, request: httpx.Request) -> object:
    response = client.send(request)
    response.read()
    return provider.parse_response(ADDRESS, response)  # type: ignore[attr-defined]


@pytest.mark.usefixtures("clock")
@pytest.mark.parametrize("provider", KEYED)
def test_missing_and_wrong_keys_stop_the_batch(sim: ProviderSimulator, client: httpx.Client,
                                               provider: str) -> None:
    sim.valid_keys = {KEY}
    built = FACTORIES[provider](sim.url)
    keyless = built.build_request(ADDRESS)
    keyless.url = keyless.url.copy_remove_param(KEY_PARAM[provider])
    with pytest.raises(AuthenticationError):
        send(client, built, keyless)
    wrong = FACTORIES[provider](sim.url)
    wrong._api_key = "sk-wrong"
    with pytest.raises(AuthenticationError) as caught:
        geocode(client, wrong, ADDRESS)
    assert "sk-wrong" not in str(caught.value)
    assert isinstance(geocode(client, built, ADDRESS), Match)
    assert [r.outcome for r in sim.requests] == ["missing_key", "invalid_key", "ok"]
    assert [r.key for r in sim.requests] == [None, "sk-wrong", KEY]
    assert all(r.status == 200 for r in sim.requests) == (provider in IN_BODY)


@pytest.mark.usefixtures("clock")
@pytest.mark.parametrize("provider", ["photon", "geonorge", "census"])
def test_apis_without_keys_ignore_valid_keys(sim: ProviderSimulator, client: httpx.Client,
                                             provider: str) -> None:
    sim.valid_keys = {KEY}
    assert isinstance(geocode(client, FACTORIES[provider](sim.url), ADDRESS), Match)


@pytest.mark.parametrize("provider", sorted(FACTORIES))
def test_throttling_in_each_providers_form(sim: ProviderSimulator, client: httpx.Client,
                                           clock: FakeClock, provider: str) -> None:
    sim.configure(rate_limit=0.2, window_seconds=10.0)  # two per 10 s, per key
    built = FACTORIES[provider](sim.url)
    assert [isinstance(geocode(client, built, ADDRESS), Match) for _ in range(2)] == [True, True]
    clock.set(3.0)
    with pytest.raises(RateLimitError) as caught:
        geocode(client, built, ADDRESS)
    assert sim.count(outcome="rate_limited", provider=provider) == 1
    with pytest.raises(ValueError, match="outcome must be one of"):
        sim.count(outcome="throttled")
    error = caught.value
    if provider in IN_BODY:  # OVER_QUERY_LIMIT / error code 429 in a 200: no hint
        assert (sim.requests[-1].status, error.retry_after) == (200, None)
    else:
        assert sim.requests[-1].status == 429
        assert error.retry_after == 7.0  # the window frees at 10 s: 7 s from 3 s


def test_mapbox_says_x_rate_limit_reset_not_retry_after(
        sim: ProviderSimulator, client: httpx.Client, clock: FakeClock) -> None:
    sim.configure(rate_limit=0.2, window_seconds=10.0)
    built = FACTORIES["mapbox"](sim.url)
    for _ in range(2):
        geocode(client, built, ADDRESS)
    response = client.send(built.build_request(ADDRESS))
    assert response.status_code == 429 and "retry-after" not in response.headers
    date = parsedate_to_datetime(response.headers["date"]).timestamp()
    assert int(response.headers["x-rate-limit-reset"]) - date == 10.0
    assert response.headers["x-rate-limit-limit"] == "2"
    assert response.headers["x-rate-limit-interval"] == "10"
    sim.retry_after = 5
    assert client.send(built.build_request(ADDRESS)).headers["retry-after"] == "5"


@pytest.mark.usefixtures("clock")
@pytest.mark.parametrize("provider", sorted(FACTORIES))
def test_a_spent_quota_stops_the_batch(sim: ProviderSimulator, client: httpx.Client,
                                       provider: str) -> None:
    sim.daily_cap = 1
    built = FACTORIES[provider](sim.url)
    assert isinstance(geocode(client, built, ADDRESS), Match)
    with pytest.raises(QuotaExceededError):
        geocode(client, built, ADDRESS)
    assert sim.requests[-1].outcome == "quota"


@pytest.mark.usefixtures("clock")
@pytest.mark.parametrize("provider", sorted(FACTORIES))
def test_server_errors_are_retriable(sim: ProviderSimulator, client: httpx.Client,
                                     provider: str) -> None:
    built = FACTORIES[provider](sim.url)
    with pytest.raises(ProviderUnavailableError):
        geocode(client, built, Query(text="Städtle 38, 9490 Vaduz #500"))
    sim.error_503_rate = 1.0
    expected = ProviderUnavailableError if provider in IN_BODY else RateLimitError
    with pytest.raises(expected) as caught:
        geocode(client, built, ADDRESS)
    assert caught.value.retriable
    assert sim.requests[-1].outcome == "unavailable"


@pytest.mark.usefixtures("clock")
@pytest.mark.parametrize("provider", sorted(FACTORIES))
def test_a_bad_request_fails_the_row_only(sim: ProviderSimulator, client: httpx.Client,
                                          provider: str) -> None:
    built = FACTORIES[provider](sim.url)
    request = built.build_request(ADDRESS)
    request.url = request.url.copy_set_param(TEXT_PARAM[provider], "")
    outcome = send(client, built, request)
    assert isinstance(outcome, Failure), outcome
    assert outcome.error == "QueryError"
    assert sim.requests[-1].outcome == "bad_request"


@pytest.mark.usefixtures("clock")
@pytest.mark.parametrize("provider", sorted(FACTORIES))
def test_scripted_faults_speak_the_dialect(sim: ProviderSimulator, client: httpx.Client,
                                           provider: str) -> None:
    built = FACTORIES[provider](sim.url)
    with pytest.raises(RateLimitError):
        geocode(client, built, Query(text="Städtle 38, 9490 Vaduz #429x1"))
    assert isinstance(geocode(client, built, Query(text="Städtle 38, 9490 Vaduz #429x1")), Match)
    echoed = geocode(client, built, Query(text="Städtle 38 #echo400"))
    assert isinstance(echoed, Failure) and echoed.error == "QueryError"
    huge = geocode(client, built, Query(text="Städtle 38, 9490 Vaduz #overflow"))
    assert isinstance(huge, Failure) and huge.error == "ProviderResponseError", huge
