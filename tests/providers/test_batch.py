"""Batch endpoints: the Census CSV upload, Mapbox v6 batch and ArcGIS geocodeAddresses.

One contract: a request carries the sendable queries in a way their answers map
back (ids, positions, ``ResultID``); the answer is exactly one outcome per query,
in order, whatever the provider sent; a whole-batch failure raises what
``parse_response`` raises; nothing else escapes.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geotoolkit.errors import (
    AuthenticationError,
    ConfigurationError,
    ProviderError,
    ProviderUnavailableError,
    QueryError,
    RateLimitError,
)
from geotoolkit.providers import PROVIDERS, BatchPolicy, Census, Mapbox, batch_policy
from geotoolkit.results import Failure, Match, NoMatch, Outcome, Query, ReverseQuery

from .provider_support import AGENT, SECRET, check_match_invariants, load, make, response_of

BATCHING = ["arcgis", "census", "mapbox"]
TEXT = Query(text="Karl Johans gate 1, 0154 Oslo")
STRUCTURED = Query(housenumber="1", street="Karl Johans gate", city="Oslo", postalcode="0154",
                   country="NO")
POINT = ReverseQuery(10.75226, 59.9139)
UNSENDABLE = Query(text="Oslo" + chr(0xD800))
HYPOTHESIS = settings(max_examples=60, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(params=BATCHING)
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def queries(count: int) -> list[Query]:
    return [Query(text=f"Karl Johans gate {n}, 0154 Oslo") for n in range(1, count + 1)]


# -- the policy ---------------------------------------------------------------------------


def test_which_providers_batch_and_how_they_count() -> None:
    policies = {n: batch_policy(make(n)) for n in sorted(PROVIDERS)}
    assert {n for n, p in policies.items() if p is not None} == set(BATCHING)
    assert policies["census"] == BatchPolicy(max_queries=10_000, cost="request", max_bytes=5_000_000)
    assert policies["mapbox"] == BatchPolicy(max_queries=1000, cost="query", reverse=True)
    assert policies["arcgis"] == BatchPolicy(max_queries=1000, cost="query")
    assert [policies[n].slots(400) for n in BATCHING] == [400, 1, 400]  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [{"max_queries": 0}, {"max_queries": True}, {"cost": "row"},
                                 {"max_bytes": 0}, {"max_bytes": 1.5}])
def test_a_policy_is_checked(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        BatchPolicy(**{"max_queries": 10, "cost": "query", **bad})


def test_a_provider_without_a_batch_endpoint_says_so() -> None:
    for name in sorted(set(PROVIDERS) - set(BATCHING)):
        provider = make(name)
        assert provider.batch is None and batch_policy(provider) is None
        with pytest.raises(ConfigurationError, match="has no batch endpoint"):
            provider.build_batch_request([TEXT])
        outcomes = provider.parse_batch_response([TEXT, TEXT], httpx.Response(200, json={}))
        assert [o.status for o in outcomes] == ["failed", "failed"]


def test_batch_sizes_are_bounded(name: str) -> None:
    provider = make(name)
    policy = batch_policy(provider)
    assert policy is not None
    with pytest.raises(ConfigurationError, match=f"takes 1 to {policy.max_queries}"):
        provider.build_batch_request([])
    with pytest.raises(ConfigurationError, match=f"got {policy.max_queries + 1}"):
        provider.build_batch_request([TEXT] * (policy.max_queries + 1))
    assert provider.build_batch_request([TEXT] * policy.max_queries).method == "POST"


def test_a_batch_of_unsendable_queries_is_refused(name: str) -> None:
    with pytest.raises(QueryError, match="no query of this batch can be sent") as info:
        make(name).build_batch_request([UNSENDABLE, UNSENDABLE])
    assert "lone surrogate" in str(info.value)


def test_census_refuses_a_batch_over_its_size_limit() -> None:
    big = [Query(text="4600 Silver Hill Rd " + "x" * 600)] * 9000  # about 5.6 MB of CSV
    with pytest.raises(QueryError, match="over the 5,000,000-byte limit: send fewer queries"):
        make("census").build_batch_request(big)
    assert make("census").build_batch_request(big[:5000]).method == "POST"


# -- requests ---------------------------------------------------------------------------------


def census_records(request: httpx.Request) -> list[list[str]]:
    body = request.read().decode()
    marker = "Content-Type: text/csv\r\n\r\n"
    start = body.index(marker) + len(marker)
    return list(csv.reader(io.StringIO(body[start:body.index("\r\n--", start)])))


def test_census_request_is_a_csv_upload_with_positions_for_ids() -> None:
    request = make("census").build_batch_request([TEXT, UNSENDABLE, STRUCTURED, POINT])
    assert request.method == "POST"
    assert str(request.url) == "https://geocoding.geo.census.gov/geocoder/locations/addressbatch"
    assert request.headers["user-agent"] == AGENT
    body = request.read().decode()
    assert 'name="benchmark"\r\n\r\nPublic_AR_Current' in body
    assert 'name="addressFile"; filename="addresses.csv"' in body
    assert census_records(request) == [  # the unsendable address and the point are left out
        ["0", "Karl Johans gate 1, 0154 Oslo", "", "", ""],
        ["2", "1 Karl Johans gate", "Oslo", "", "0154"]]


def test_mapbox_request_is_a_json_array_in_order() -> None:
    request = make("mapbox", country_codes=["no"]).build_batch_request(
        [TEXT, UNSENDABLE, STRUCTURED, POINT])
    assert request.method == "POST" and request.url.path == "/search/geocode/v6/batch"
    assert dict(request.url.params) == {"permanent": "false", "access_token": SECRET}
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.read()) == [
        {"q": TEXT.text, "limit": 1, "country": "no"},
        {"address_number": "1", "street": "Karl Johans gate", "place": "Oslo", "postcode": "0154",
         "country": "NO", "limit": 1},
        {"longitude": 10.75226, "latitude": 59.9139, "country": "no"},  # named: lon and lat
    ]


def test_mapbox_batch_refuses_long_text_row_by_row() -> None:
    long = Query(text="x" * 300)  # over Mapbox's 256 characters
    mapbox = make("mapbox")
    assert len(json.loads(mapbox.build_batch_request([TEXT, long]).read())) == 1
    outcomes = mapbox.parse_batch_response([TEXT, long], httpx.Response(200, json={"batch": [
        {"type": "FeatureCollection", "features": []}]}))
    assert isinstance(outcomes[0], NoMatch)
    assert isinstance(outcomes[1], Failure) and outcomes[1].error == "QueryError"
    assert "too long for mapbox" in outcomes[1].reason


def test_arcgis_request_is_a_record_set_with_positions_for_object_ids() -> None:
    request = make("arcgis").build_batch_request([TEXT, UNSENDABLE, STRUCTURED])
    assert request.method == "POST" and request.url.path.endswith("/World/GeocodeServer/geocodeAddresses")
    assert dict(request.url.params) == {"token": SECRET}
    form = dict(httpx.QueryParams(request.read().decode()))
    assert (form["f"], form["outSR"]) == ("json", "4326") and "Addr_type" in form["outFields"]
    assert json.loads(form["addresses"]) == {"records": [
        {"attributes": {"OBJECTID": 0, "SingleLine": TEXT.text}},
        {"attributes": {"OBJECTID": 2, "Address": "1 Karl Johans gate", "City": "Oslo", "Postal": "0154",
                        "CountryCode": "NO"}}]}


def test_points_are_refused_where_the_batch_takes_addresses_only() -> None:
    for name in ("census", "arcgis"):
        provider = make(name)
        outcomes = provider.parse_batch_response([POINT], httpx.Response(200, text=""))
        assert isinstance(outcomes[0], Failure) and outcomes[0].error == "QueryError"
        assert "takes addresses, not points" in outcomes[0].reason
        with pytest.raises(QueryError, match="no query of this batch can be sent"):
            provider.build_batch_request([POINT])


# -- answers ----------------------------------------------------------------------------------


def test_a_partial_answer_is_one_outcome_per_query_in_order(name: str) -> None:
    envelope = load(name, "partial", "batch")
    sent = queries(envelope["queries"])
    provider = make(name)
    outcomes = provider.parse_batch_response(sent, response_of(envelope, provider.build_batch_request(sent)))
    assert [type(o).__name__ for o in outcomes] == envelope["expect"]
    for position, point in envelope["points"].items():
        match = outcomes[int(position)]
        assert isinstance(match, Match) and (match.lon, match.lat) == pytest.approx(tuple(point))
        assert match.provider == name and match.label
        check_match_invariants(match)
    for position, words in envelope["reasons"].items():
        outcome = outcomes[int(position)]
        assert isinstance(outcome, Failure | NoMatch) and words in outcome.reason, outcome
    assert all(o.provider == name for o in outcomes)


def test_an_empty_answer_leaves_every_query_missing(name: str) -> None:
    bodies = {"census": b"", "mapbox": b'{"batch": []}',
              "arcgis": b'{"spatialReference": {"wkid": 4326}, "locations": []}'}
    outcomes = make(name).parse_batch_response(queries(3), httpx.Response(200, content=bodies[name]))
    assert [(o.status, getattr(o, "reason", "")) for o in outcomes] == [
        ("failed", "missing from the batch answer")] * 3


def test_a_bigger_answer_than_the_batch_is_read_as_far_as_it_goes() -> None:
    answer = {"batch": [{"type": "FeatureCollection", "features": []}] * 5}
    outcomes = make("mapbox").parse_batch_response(queries(2), httpx.Response(200, json=answer))
    assert [o.status for o in outcomes] == ["no_match", "no_match"]


@pytest.mark.parametrize(("status", "headers", "error"), [
    (429, {"Retry-After": "7"}, RateLimitError),
    (503, {"Retry-After": "7"}, RateLimitError),
    (500, {}, ProviderUnavailableError),
    (502, {}, ProviderUnavailableError),
    (401, {}, AuthenticationError),
    (403, {}, AuthenticationError),
])
def test_whole_batch_failures_raise_as_parse_response_does(name: str, status: int,
                                                           headers: dict[str, str],
                                                           error: type[ProviderError]) -> None:
    with pytest.raises(error) as info:
        make(name).parse_batch_response(queries(3), httpx.Response(status, headers=headers,
                                                                   text="stop"))
    assert info.value.provider == name
    if error is RateLimitError:
        assert info.value.retry_after == 7.0  # type: ignore[attr-defined]


def test_a_refused_batch_is_every_sent_query_failing_with_the_reason(name: str) -> None:
    answer = httpx.Response(400, text="File has more than 10000 records")
    outcomes = make(name).parse_batch_response([TEXT, UNSENDABLE, TEXT], answer)
    assert [o.error for o in outcomes] == ["QueryError"] * 3  # type: ignore[union-attr]
    assert "more than 10000" in outcomes[0].reason  # type: ignore[union-attr]
    assert "lone surrogate" in outcomes[1].reason  # type: ignore[union-attr]


def test_a_body_that_does_not_parse_fails_every_sent_query(name: str) -> None:
    outcomes = make(name).parse_batch_response([TEXT, TEXT], httpx.Response(
        200, text="<html><body>" + "x" * 200_000 + "</body></html>"))
    assert [o.error for o in outcomes] == ["ProviderResponseError"] * 2  # type: ignore[union-attr]


def test_arcgis_errors_in_a_200_answer_the_whole_batch() -> None:
    arcgis = make("arcgis")
    with pytest.raises(AuthenticationError):
        arcgis.parse_batch_response([TEXT], httpx.Response(200, json={
            "error": {"code": 498, "message": "Invalid token."}}))
    with pytest.raises(RateLimitError):
        arcgis.parse_batch_response([TEXT], httpx.Response(200, json={"error": {"code": 429}}))
    outcomes = arcgis.parse_batch_response([TEXT, TEXT], httpx.Response(200, json={
        "error": {"code": 400, "message": "Invalid addresses", "details": []}}))
    assert [o.status for o in outcomes] == ["failed", "failed"]
    web_mercator = {"spatialReference": {"wkid": 102100, "latestWkid": 3857}, "locations": []}
    outcomes = arcgis.parse_batch_response([TEXT], httpx.Response(200, json=web_mercator))
    assert "not WGS84" in outcomes[0].reason  # type: ignore[union-attr]


def test_mapbox_throttling_without_retry_after_takes_the_reset_header() -> None:
    headers = {"Date": "Sun, 02 Jun 2024 10:00:00 GMT", "X-Rate-Limit-Reset": "1717322430"}
    with pytest.raises(RateLimitError) as info:
        make("mapbox").parse_batch_response([TEXT], httpx.Response(429, headers=headers))
    assert info.value.retry_after == 30.0


def test_the_key_never_reaches_an_outcome_or_an_error() -> None:
    echo = f"bad request /batch?access_token={SECRET}&token={SECRET}"
    for name in ("mapbox", "arcgis"):
        provider = make(name)
        for status, body in ((200, {"batch": [{"message": echo}]}), (400, {"message": echo}),
                             (200, {"error": {"code": 400, "message": echo, "details": [echo]}}),
                             (200, {"error": {"code": 498, "message": echo}})):
            try:
                shown = repr(provider.parse_batch_response([TEXT], httpx.Response(status, json=body)))
            except ProviderError as exc:
                shown = str(exc)
            assert SECRET not in shown


def test_census_batch_outcomes_match_the_standalone_helper() -> None:
    """``Census`` and the older ``CensusBatch`` read one answer alike (positions vs ids)."""
    from geotoolkit.providers import CensusBatch

    answer = response_of(load("census", "partial", "batch"))
    by_id = CensusBatch().parse_batch_response(answer)
    in_order = Census().parse_batch_response(queries(3), answer)
    assert [by_id[str(n)] for n in range(3)] == in_order


# -- anything the provider sends ---------------------------------------------------------------

LEAVES = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
          | st.sampled_from([10**400, "NaN", "1e999", "", "M", "U", "T", 0, 1, 2, [], {}]))
# st.deferred, not st.recursive (see test_hostile.py).
JSON: st.SearchStrategy[object] = st.deferred(
    lambda: LEAVES | st.lists(JSON, max_size=4) | st.dictionaries(st.text(max_size=12), JSON,
                                                                  max_size=4))
ROW = st.dictionaries(st.sampled_from(["ResultID", "Status", "Addr_type"]), LEAVES)
SHAPED = (st.builds(lambda b: {"batch": b}, st.lists(JSON, max_size=6))
          | st.builds(lambda locs: {"spatialReference": {"wkid": 4326}, "locations": locs},
                      st.lists(st.builds(lambda a, loc: {"attributes": a, "location": loc}, ROW, JSON),
                               max_size=6)))
CSV_FIELD = st.sampled_from(["0", "1", "2", "3", "99", "Match", "No_Match", "Tie", "Exact",
                             "-76.9,38.8", "1e999,0", "", "x"]) | st.text(max_size=8)
CSV = st.lists(st.lists(CSV_FIELD, max_size=9), max_size=8).map(
    lambda rows: "\n".join(",".join(f'"{c}"' for c in row) for row in rows))
STATUSES = st.sampled_from([200, 200, 200, 400, 404, 413, 422, 429, 500, 503])


def settle(name: str, count: int, status: int, content: bytes) -> list[Outcome] | ProviderError:
    """The outcomes (exactly ``count``) or the ProviderError raised: anything else fails."""
    sent = [TEXT, POINT, STRUCTURED, UNSENDABLE, TEXT][:count]
    try:
        outcomes = make(name).parse_batch_response(sent, httpx.Response(status, content=content))
    except ProviderError as exc:
        assert exc.provider == name and SECRET not in str(exc)
        return exc
    assert len(outcomes) == count
    for outcome in outcomes:
        if isinstance(outcome, Match):
            check_match_invariants(outcome)
        assert SECRET not in repr(outcome)
    return outcomes


@given(body=JSON | SHAPED, status=STATUSES, count=st.integers(min_value=1, max_value=5))
@HYPOTHESIS
def test_any_json_batch_answer_gives_one_outcome_per_query_or_a_provider_error(
        body: Any, status: int, count: int) -> None:
    content = json.dumps(body).encode()
    for name in BATCHING:
        settle(name, count, status, content)


@given(text=CSV | st.text(max_size=300), status=STATUSES, count=st.integers(min_value=1, max_value=5))
@HYPOTHESIS
def test_any_text_batch_answer_gives_one_outcome_per_query_or_a_provider_error(
        text: str, status: int, count: int) -> None:
    for name in BATCHING:
        settle(name, count, status, text.encode("utf-8", errors="surrogatepass"))


@given(content=st.binary(max_size=300), count=st.integers(min_value=1, max_value=5))
@HYPOTHESIS
def test_any_bytes_give_one_outcome_per_query_or_a_provider_error(content: bytes, count: int) -> None:
    for name in BATCHING:
        settle(name, count, 200, content)


@pytest.mark.parametrize("content", [b"[" * 100_000 + b"]" * 100_000, b"1" * 5000, b"\xff\xfe\x00",
                                     b'"' + b"x" * 200_000])
def test_hostile_batch_bodies_fail_every_query(name: str, content: bytes) -> None:
    outcomes = settle(name, 2, 200, content)
    assert isinstance(outcomes, list) and all(isinstance(o, Failure) for o in outcomes)


def test_mapbox_batch_keeps_structured_and_point_order_through_a_real_answer() -> None:
    """The position, not the content, maps an answer back: a point answered in place."""
    mapbox = Mapbox(api_key=SECRET)
    oslo = load("mapbox", "match", "reverse")["json"]
    outcomes = mapbox.parse_batch_response([POINT, TEXT], httpx.Response(200, json={"batch": [
        oslo, {"type": "FeatureCollection", "features": []}]}))
    assert isinstance(outcomes[0], Match) and outcomes[0].precision == "address"
    assert isinstance(outcomes[1], NoMatch)
