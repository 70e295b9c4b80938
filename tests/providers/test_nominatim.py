import json
from pathlib import Path

import httpx
import pytest

from geotoolkit import (
    AuthenticationError,
    ConfigurationError,
    Failure,
    Match,
    NoMatch,
    ProviderUnavailableError,
    Query,
    QuotaExceededError,
    RateLimitError,
)
from geotoolkit.providers import Nominatim

from .nominatim_cases import CASES, Case, check_outcome, recorded

FIXTURES = Path(__file__).parent / "fixtures"
Q = Query(text="Städtle 38, 9490 Vaduz")


@pytest.fixture
def nominatim() -> Nominatim:
    return Nominatim("http://127.0.0.1:1", user_agent="geotoolkit-tests/1.0 (tests@example.org)")


def test_request_shape(nominatim: Nominatim) -> None:
    request = nominatim.build_request(Q)
    assert request.method == "GET" and request.url.path == "/search"
    assert dict(request.url.params) == {"format": "jsonv2", "addressdetails": "1", "limit": "1",
                                        "q": "Städtle 38, 9490 Vaduz"}
    assert request.headers["user-agent"] == "geotoolkit-tests/1.0 (tests@example.org)"


def test_structured_request() -> None:
    p = Nominatim("http://127.0.0.1:1", user_agent="t/1", country_codes=["LI", "ch"])
    q = Query(housenumber="38", street="Städtle", city="Vaduz", postalcode="9490", country="LI")
    params = dict(p.build_request(q).url.params)
    assert params["street"] == "38 Städtle" and params["city"] == "Vaduz"
    assert params["postalcode"] == "9490" and params["country"] == "LI"
    assert params["countrycodes"] == "li,ch" and "q" not in params


def test_api_key_is_a_query_parameter_and_secret() -> None:
    p = Nominatim("https://eu1.locationiq.example", user_agent="t/1", api_key="sk-SECRET-99")
    assert p.build_request(Q).url.params["key"] == "sk-SECRET-99"
    assert "sk-SECRET-99" not in repr(p) and "sk-SECRET-99" not in p.gate_key
    assert p.gate_key != Nominatim("https://eu1.locationiq.example", user_agent="t/1",
                                   api_key="other").gate_key


@pytest.mark.parametrize("agent", ["", "   ", None, "python-httpx/0.28.1", "python-requests/2.32",
                                   "Python-urllib/3.11", "curl/8.5.0", "aiohttp/3.9"])
def test_user_agent_is_required_and_not_a_library_default(agent: str | None) -> None:
    with pytest.raises(ConfigurationError):
        Nominatim(user_agent=agent)  # type: ignore[arg-type]


_BROWSERS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14.4; rv:125.0) Gecko/20100101 Firefox/125.0",
    "  mozilla/5.0 (X11; Linux x86_64)",
    "Opera/9.80 (Windows NT 6.1) Presto/2.12.388 Version/12.16",
]


@pytest.mark.parametrize("agent", _BROWSERS)
def test_the_public_instance_refuses_a_browsers_user_agent(agent: str) -> None:
    """The usage policy asks for a User-Agent that identifies the application: a browser's
    hides it as well as a library's. Refused before anything is sent, saying what to give."""
    with pytest.raises(ConfigurationError) as info:
        Nominatim(user_agent=agent)
    message = str(info.value)
    assert "browser" in message and "identif" in message
    assert "acme-geocoder/1.0 (ops@acme.example)" in message and "--user-agent" in message


@pytest.mark.parametrize("agent", _BROWSERS[:1])
def test_a_self_hosted_nominatim_takes_any_user_agent(agent: str) -> None:
    assert Nominatim("http://127.0.0.1:8080", user_agent=agent).user_agent == agent
    # An application that names itself and mentions a browser engine is not a browser.
    assert Nominatim(user_agent="acme-geocoder/1.0 (Mozilla-compatible; ops@acme.example)")


def test_public_instance_defaults_to_one_request_per_second() -> None:
    assert Nominatim(user_agent="t/1").default_rate == 1.0
    assert Nominatim("http://127.0.0.1:8080", user_agent="t/1").default_rate is None
    assert Nominatim("http://127.0.0.1:8080", user_agent="t/1", rate=5).default_rate == 5


def test_bad_base_url() -> None:
    with pytest.raises(ConfigurationError):
        Nominatim("ftp://example.org", user_agent="t/1")


def test_match_from_recorded_fixture(nominatim: Nominatim) -> None:
    body = json.loads((FIXTURES / "nominatim_match.json").read_text())
    outcome = nominatim.parse_response(Q, httpx.Response(200, json=body))
    assert isinstance(outcome, Match)
    assert (outcome.lon, outcome.lat) == (9.5227962, 47.1392862)  # lon first, from strings
    assert outcome.label.startswith("38, Städtle, Vaduz")
    assert outcome.raw["address"]["country_code"] == "li"


def test_empty_list_is_no_match(nominatim: Nominatim) -> None:
    assert isinstance(nominatim.parse_response(Q, httpx.Response(200, json=[])), NoMatch)


def test_error_object_is_a_failure(nominatim: Nominatim) -> None:
    outcome = nominatim.parse_response(Q, httpx.Response(200, json={"error": "Unable to geocode"}))
    assert isinstance(outcome, Failure) and "Unable to geocode" in outcome.reason


@pytest.mark.parametrize("body", [b"<html>oops</html>", b'{"unexpected": 1}', b'[{"lat": "x"}]',
                                  b'[{"display_name": "no coords"}]'])
def test_malformed_bodies_are_failures(nominatim: Nominatim, body: bytes) -> None:
    outcome = nominatim.parse_response(Q, httpx.Response(200, content=body))
    assert isinstance(outcome, Failure) and outcome.error == "ProviderResponseError"


@pytest.mark.parametrize("status", [401, 403])
def test_auth_errors_raise(nominatim: Nominatim, status: int) -> None:
    with pytest.raises(AuthenticationError) as info:
        nominatim.parse_response(Q, httpx.Response(status, json={"error": "bad key"}))
    assert info.value.status_code == status


def test_402_is_quota(nominatim: Nominatim) -> None:
    with pytest.raises(QuotaExceededError):
        nominatim.parse_response(Q, httpx.Response(402))


@pytest.mark.parametrize(
    ("status", "headers", "hint"),
    [(429, {"Retry-After": "30"}, 30.0), (503, {"Retry-After": "2"}, 2.0), (429, {}, None),
     (429, {"Retry-After": "Sun, 06 Nov 1994 08:49:37 GMT",
            "Date": "Sun, 06 Nov 1994 08:49:07 GMT"}, 30.0)],
)
def test_throttling_raises_with_hint(nominatim: Nominatim, status: int,
                                     headers: dict[str, str], hint: float | None) -> None:
    with pytest.raises(RateLimitError) as info:
        nominatim.parse_response(Q, httpx.Response(status, headers=headers))
    assert info.value.retry_after == hint and info.value.retriable


@pytest.mark.parametrize("status", [500, 502, 504])
def test_other_5xx_are_retriable(nominatim: Nominatim, status: int) -> None:
    with pytest.raises(ProviderUnavailableError):
        nominatim.parse_response(Q, httpx.Response(status))


@pytest.mark.parametrize("status", [400, 404, 422])
def test_other_4xx_are_failures_not_retried(nominatim: Nominatim, status: int) -> None:
    body = {"error": {"code": status, "message": "Nothing to search for."}}
    outcome = nominatim.parse_response(Q, httpx.Response(status, json=body))
    assert isinstance(outcome, Failure) and outcome.error == "QueryError"
    assert "Nothing to search for." in outcome.reason


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_answers_recorded_from_a_real_nominatim(nominatim: Nominatim, case: Case) -> None:
    """What a real Nominatim 5.3.3 answered (fixtures/nominatim_lab/recorded/), as parsed."""
    check_outcome(nominatim, case, recorded(case.name))


@pytest.mark.parametrize("codes", [["uk"], ["Liechtenstein"], ["li", "xx"], [""], [7]])
def test_country_codes_that_are_no_iso_code_are_refused(codes: list[object]) -> None:
    """A real Nominatim answers countrycodes=uk with nothing (every row no match) and ignores
    countrycodes=Liechtenstein (no filter): neither is what was asked."""
    with pytest.raises(ConfigurationError, match="ISO 3166-1 alpha-2") as info:
        Nominatim("http://127.0.0.1:1", user_agent="t/1", country_codes=codes)  # type: ignore[arg-type]
    assert repr(codes[-1]) in str(info.value)


@pytest.mark.parametrize(("codes", "sent"), [(["LI", "ch"], "li,ch"), ("li", "li"), ("li, ch", "li,ch"),
                                             (["LIE"], "li"), (None, None), ([], None)])
def test_country_codes_are_sent_as_alpha_2(codes: object, sent: str | None) -> None:
    """A string is one list of codes (not its letters: "li" was sent as "l,i", which
    Nominatim ignores); alpha-3 codes are sent as the alpha-2 Nominatim reads."""
    p = Nominatim("http://127.0.0.1:1", user_agent="t/1", country_codes=codes)  # type: ignore[arg-type]
    assert p.build_request(Q).url.params.get("countrycodes") == sent
