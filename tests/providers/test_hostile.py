"""A hostile world: queries that must not be sent, answers that must not crash or leak.

Every provider: ``build_request`` returns a request or raises ``QueryError`` for any
text or point; ``parse_response`` raises nothing but a ``ProviderError`` for any
response, to an address or to a point; text from a response passes the redaction
before it reaches a reason or an error.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geotoolkit.errors import ProviderError, ProviderResponseError, QueryError
from geotoolkit.providers import PROVIDERS, CensusBatch, Mapbox, Nominatim
from geotoolkit.providers.base import DEFAULT_MAX_QUERY_CHARS, decode_json
from geotoolkit.results import STRUCTURED_FIELDS, Failure, Match, Outcome, Query, ReverseQuery

from .provider_support import AGENT, KEYED, SECRET, cases, check_match_invariants, load, make

NAMES = sorted(PROVIDERS)
TEXT = Query(text="Karl Johans gate 1, 0154 Oslo")
POINT = ReverseQuery(10.75226, 59.9139)
REVERSE = [name for name in NAMES if name != "census"]
# Any code point, lone surrogates included (hypothesis leaves them out by default).
ANY_CHAR = st.characters(exclude_categories=())
HYPOTHESIS = settings(max_examples=40, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(params=NAMES)
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- requests ------------------------------------------------------------------------------


def test_every_provider_declares_its_secrets_and_longest_query(name: str) -> None:
    provider = make(name)
    assert provider.secrets == ((SECRET,) if name in KEYED else ())
    assert isinstance(provider.max_query_chars, int) and provider.max_query_chars > 0
    assert Mapbox(api_key=SECRET).max_query_chars == 256  # documented for Mapbox's q
    assert Nominatim(user_agent=AGENT).max_query_chars == DEFAULT_MAX_QUERY_CHARS


def test_too_long_a_query_is_refused_with_its_length(name: str) -> None:
    provider = make(name)
    limit = provider.max_query_chars
    assert provider.build_request(Query(text="x" * limit)).url.params  # at the limit: sent
    with pytest.raises(QueryError) as info:
        provider.build_request(Query(text="x" * 70_000))
    at_most = f"{limit:,}".replace(",", " ")
    assert str(info.value) == f"address too long for {name}: 70 000 characters, at most {at_most}"
    assert info.value.provider == name
    with pytest.raises(QueryError, match="too long"):  # the structured fields count together
        provider.build_request(Query(street="x" * limit, city="Oslo"))


def test_lone_surrogates_are_refused_with_their_position(name: str) -> None:
    provider = make(name)
    with pytest.raises(QueryError) as info:
        provider.build_request(Query(text="Vaduz" + chr(0xD800)))
    assert str(info.value) == "address is not valid text (lone surrogate U+D800 at position 5)"
    with pytest.raises(QueryError, match=r"^city is not valid text \(lone surrogate U\+DFFF"):
        provider.build_request(Query(street="Städtle", city=chr(0xDFFF) + "Vaduz"))


@given(text=st.text(alphabet=ANY_CHAR, max_size=300))
@HYPOTHESIS
def test_build_request_sends_or_refuses_any_free_text(text: str) -> None:
    for name in NAMES:
        assert_sent_or_refused(name, Query(text=text))


@given(fields=st.dictionaries(st.sampled_from(STRUCTURED_FIELDS),
                              st.text(alphabet=ANY_CHAR, min_size=1, max_size=60), min_size=1))
@HYPOTHESIS
def test_build_request_sends_or_refuses_any_structured_query(fields: dict[str, str]) -> None:
    for name in NAMES:
        assert_sent_or_refused(name, Query(**fields))


def assert_sent_or_refused(name: str, query: Query) -> None:
    """A request, or QueryError: never InvalidURL, UnicodeEncodeError or anything else."""
    provider = make(name)
    try:
        request = provider.build_request(query)
    except QueryError as exc:
        assert exc.provider == name and str(exc)
        return
    assert isinstance(request, httpx.Request) and request.url.host


NUMBERS = st.floats() | st.integers() | st.booleans() | st.none() | st.sampled_from([10**400, -(10**400)])


@given(lon=NUMBERS, lat=NUMBERS,
       decimals=st.integers(min_value=-5, max_value=400) | st.sampled_from([None, 2.5, True]))
@HYPOTHESIS
def test_build_request_sends_or_refuses_any_point(lon: Any, lat: Any, decimals: Any) -> None:
    """A real point is sent with both numbers in range; anything else is refused."""
    query = ReverseQuery(lon, lat, decimals)
    for name in NAMES:
        provider = make(name)
        try:
            request = provider.build_request(query)
        except QueryError as exc:
            assert exc.provider == name and str(exc)
            continue
        assert name != "census" and isinstance(request, httpx.Request) and request.url.host
        assert all(len(v) < 200 for v in request.url.params.values())


@pytest.mark.parametrize("huge", [10**400, -(10**400)])
def test_a_coordinate_too_large_for_a_float_is_refused(huge: int) -> None:
    with pytest.raises(QueryError, match="not usable numbers"):
        make("photon").build_request(ReverseQuery(huge, 0.0))  # type: ignore[arg-type]


def test_census_batch_refuses_a_record_it_cannot_send() -> None:
    queries = {"a": Query(text="4600 Silver Hill Rd"), "b7": Query(text="Silver" + chr(0xD83D))}
    with pytest.raises(QueryError, match=r"record 'b7': address is not valid text"):
        CensusBatch().build_batch_requests(queries)


# -- responses -----------------------------------------------------------------------------

LEAVES = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
          | st.sampled_from([10**400, -(10**400), "NaN", "1e999", "", "59.91", [], {}]))
# st.deferred, not st.recursive: hypothesis 6.15x sometimes mistakes st.recursive's extend
# for one that ignores its argument (HypothesisDeprecationWarning, an error here).
JSON: st.SearchStrategy[object] = st.deferred(
    lambda: LEAVES | st.lists(JSON, max_size=4) | st.dictionaries(st.text(max_size=12), JSON,
                                                                  max_size=4))
STATUSES = st.sampled_from([200, 200, 200, 400, 404, 408, 422])


def parse(name: str, status: int, content: bytes, headers: dict[str, str] | None = None,
          query: Query | ReverseQuery = TEXT) -> Outcome | ProviderError:
    """The outcome, or the ProviderError raised: anything else fails the test."""
    provider = make(name)
    try:
        outcome = provider.parse_response(query, httpx.Response(status, content=content,
                                                                headers=headers or {}))
    except ProviderError as exc:
        assert exc.provider == name
        return exc
    if isinstance(outcome, Match):
        check_match_invariants(outcome)
    return outcome


@given(body=JSON, status=STATUSES)
@HYPOTHESIS
def test_parse_response_survives_any_json_body(body: Any, status: int) -> None:
    content = json.dumps(body).encode()  # NaN and Infinity become JSON's unofficial literals
    for name in NAMES:
        parse(name, status, content)
        parse(name, status, content, query=POINT)


@pytest.mark.parametrize("name", NAMES)
@given(data=st.data())
@HYPOTHESIS
def test_parse_response_survives_a_match_with_any_value_replaced(name: str, data: st.DataObject) -> None:
    """The provider's own match fixtures, one value (or subtree) swapped for junk."""
    matches = [case for case in cases(name) if load(name, case)["expect"] == "Match"]
    body = copy.deepcopy(load(name, data.draw(st.sampled_from(matches)))["json"])
    paths = list(_paths(body))
    path = data.draw(st.sampled_from(paths))
    body = _replace(body, path, data.draw(JSON))
    parse(name, 200, json.dumps(body).encode())


HOSTILE_VALUES = [None, True, -1, 10**400, float("nan"), float("-inf"), "1e999", "x" * 70, "",
                  [], {}, [[["deep"]]], {"a": {"b": [1]}}, [1, 2, 3, 4, 5]]


@pytest.mark.parametrize("value", HOSTILE_VALUES, ids=lambda v: repr(v)[:20])
def test_parse_response_survives_each_value_of_each_match_replaced(name: str, value: Any) -> None:
    """Exhaustive: every node of every match fixture, replaced by each hostile value."""
    for case in cases(name):
        envelope = load(name, case)
        if envelope["expect"] != "Match":
            continue
        for path in _paths(envelope["json"]):
            body = _replace(copy.deepcopy(envelope["json"]), path, value)
            parse(name, 200, json.dumps(body).encode())


@pytest.mark.parametrize("name", REVERSE)
@pytest.mark.parametrize("value", HOSTILE_VALUES, ids=lambda v: repr(v)[:20])
def test_parse_reverse_survives_each_value_of_its_match_replaced(name: str, value: Any) -> None:
    envelope = load(name, "match", "reverse")
    for path in _paths(envelope["json"]):
        body = _replace(copy.deepcopy(envelope["json"]), path, value)
        parse(name, 200, json.dumps(body).encode(), query=POINT)


@pytest.mark.parametrize("name", REVERSE)
@given(data=st.data())
@HYPOTHESIS
def test_parse_reverse_survives_its_match_with_any_value_replaced(name: str, data: st.DataObject) -> None:
    body = copy.deepcopy(load(name, "match", "reverse")["json"])
    path = data.draw(st.sampled_from(list(_paths(body))))
    parse(name, 200, json.dumps(_replace(body, path, data.draw(JSON))).encode(), query=POINT)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Any:
    yield prefix
    children = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for key, child in children:
        yield from _paths(child, (*prefix, key))


def _replace(node: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node[path[0]] = _replace(node[path[0]], path[1:], value)
    return node


LAT = {"census": "38.845985"}


@pytest.mark.parametrize(("case", "replacement"), [
    ("huge integer", "1" + "0" * 400),          # float() overflows
    ("5000 digits", "7" * 5000),                 # json refuses ints over 4300 digits
    ("NaN literal", "NaN"),
    ("Infinity literal", "-Infinity"),
    ("string", '"59.9x"'),
    ("digit separators", '"5_9.9"'),             # float() reads 59.9
    ("other digits", '"\u0665\u0669.\u0669"'),   # Arabic-Indic: float() reads 59.9
    ("NaN string", '"nan"'),
    ("nested junk", "[" * 50 + "]" * 50),
])
def test_hostile_coordinates_are_failures(name: str, case: str, replacement: str) -> None:
    text = json.dumps(load(name, "match")["json"]).replace(LAT.get(name, "59.9138688"), replacement)
    outcome = parse(name, 200, text.encode())
    assert isinstance(outcome, Failure) and outcome.error == "ProviderResponseError", (case, outcome)


@pytest.mark.parametrize("content", [
    b"[" * 100_000 + b"]" * 100_000,             # deeper than Python's JSON parser goes
    b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    b"\xff\xfe\x00garbage",                      # not UTF-8
    b"",
    b"1" * 5000,
])
def test_bodies_that_do_not_parse_are_failures(name: str, content: bytes) -> None:
    outcome = parse(name, 200, content)
    assert isinstance(outcome, Failure) and outcome.error == "ProviderResponseError"


PORTAL = (b"<!DOCTYPE html><html><head><title>Sign in</title><script>var s = 1;</script></head>"
          b"<body><h1>Welcome to Hotel WiFi</h1><p>Accept the terms to continue.</p></body></html>")


@pytest.mark.parametrize("content", [
    PORTAL,  # a captive portal, a proxy's block page: in a 200, no JSON at all
    json.dumps({"error": "Welcome to Hotel WiFi. Accept the terms to continue."}).encode(),
    json.dumps({"error": {"message": "Welcome to Hotel WiFi. Accept the terms to continue."}}).encode(),
], ids=["html", "error", "error-object"])
@pytest.mark.parametrize("query", [TEXT, POINT], ids=["forward", "reverse"])
def test_a_200_that_is_no_answer_fails_the_row_saying_what_it_says(
        name: str, content: bytes, query: Query | ReverseQuery) -> None:
    """A reason such as "answer without a results list" or "a body that is not JSON" did
    not tell that the network asked to sign in (or what error the provider gave)."""
    if name == "census" and query is POINT:
        pytest.skip("census has no reverse endpoint")
    outcome = parse(name, 200, content, {"Content-Type": "text/html"}, query=query)
    if isinstance(outcome, ProviderError):  # an error object read as the provider's own error
        assert "Welcome to Hotel WiFi" in str(outcome)
        return
    assert isinstance(outcome, Failure), outcome
    assert "Welcome to Hotel WiFi" in outcome.reason
    assert "var s" not in outcome.reason and "<" not in outcome.reason


@pytest.mark.parametrize(("status", "content", "headers", "said"), [
    (204, b"", {}, "sent an empty body (HTTP 204)"),
    (200, b" \r\n", {"Content-Type": "application/json"}, "sent an empty body (HTTP 200, application/json)"),
    (200, PORTAL, {"Content-Type": "text/html; charset=utf-8"}, "not JSON (HTTP 200, text/html)"),
])
def test_a_body_that_is_empty_or_of_another_type_is_said_to_be(
        name: str, status: int, content: bytes, headers: dict[str, str], said: str) -> None:
    """"a body that is not JSON (HTTP 204)" for no body at all, and no word of the HTML."""
    outcome = parse(name, status, content, headers)
    assert isinstance(outcome, Failure) and said in outcome.reason, outcome


def test_a_bogus_charset_does_not_crash(name: str) -> None:
    headers = {"Content-Type": "application/json; charset=no-such-codec"}
    content = json.dumps(load(name, "match")["json"]).encode()
    assert isinstance(parse(name, 200, content, headers), Match)
    assert isinstance(parse(name, 400, b"\xff not json", headers), Failure)


def test_labels_and_place_fields_are_capped(name: str) -> None:
    long = "K" * 1_000_000
    text = json.dumps(load(name, "match")["json"])
    text = text.replace("SILVER HILL", long) if name == "census" else text.replace("Karl Johans", long)
    outcome = parse(name, 200, text.encode())
    assert isinstance(outcome, Match)
    assert 0 < len(outcome.label) <= 1000
    assert all(len(v) <= 1000 for v in vars(outcome.place).values() if isinstance(v, str))


# -- secrets -------------------------------------------------------------------------------

ECHO = f"invalid request https://geo.example/search?q=Oslo&key={SECRET}&apiKey={SECRET}"
ECHOING_BODIES = [
    {"error": {"code": 400, "message": ECHO, "details": [ECHO]}, "message": ECHO, "title": ECHO,
     "errors": [ECHO], "geocoding": {"errors": [ECHO]}, "status": {"code": 400, "message": ECHO}},
    {"error": ECHO},
    {"status": "REQUEST_DENIED", "error_message": ECHO},
    {"status": "INVALID_REQUEST", "error_message": ECHO},
    {"status": f"NEW_{SECRET}"},
    {"error": {"code": 498, "message": ECHO}},
    {"error": {"code": 400, "message": ECHO}},
    {"status": {"code": 403, "message": ECHO}, "results": []},
    {"features": ECHO, "items": ECHO, "results": ECHO, "candidates": ECHO, "adresser": ECHO},
]


@pytest.mark.parametrize("name", sorted(KEYED))
@pytest.mark.parametrize("status", [200, 400, 404, 422, 429])
@pytest.mark.parametrize("body", ECHOING_BODIES)
def test_answers_that_echo_the_key_do_not_carry_it(name: str, status: int, body: Any) -> None:
    for query in (TEXT, POINT):
        result = parse(name, status, json.dumps(body).encode(), query=query)
        shown = (f"{result} {getattr(result, 'raw', '')}" if isinstance(result, Exception)
                 else repr(result))
        assert SECRET not in shown


@pytest.mark.parametrize("name", sorted(KEYED))
def test_text_bodies_that_echo_the_key_do_not_carry_it(name: str) -> None:
    content = f"<html>bad gateway for /search?key={SECRET}</html>".encode()
    for status in (200, 400, 404):
        assert SECRET not in repr(parse(name, status, content))
    with pytest.raises(ProviderResponseError) as info:
        decode_json(httpx.Response(200, content=content), name, (SECRET,))
    assert SECRET not in info.value.raw and "key=***" in info.value.raw


def test_locationiq_daily_quota_message_is_redacted() -> None:
    result = parse("locationiq", 429, json.dumps({"error": f"Rate Limited Day {SECRET}"}).encode())
    assert isinstance(result, ProviderError) and SECRET not in str(result)
    assert "Rate Limited Day ***" in str(result)


def test_census_batch_answers_that_do_not_parse_are_response_errors() -> None:
    with pytest.raises(ProviderResponseError, match="not CSV"):
        CensusBatch().parse_batch_response(httpx.Response(200, text='"1","' + "x" * 200_000))
