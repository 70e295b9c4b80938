"""CensusBatch: chunked multipart CSV requests and the CSV answer, sans-I/O."""

from __future__ import annotations

import csv
import io

import httpx
import pytest

from geotoolkit import ConfigurationError, Failure, Match, NoMatch, Query
from geotoolkit.errors import ProviderResponseError, QueryError, RateLimitError
from geotoolkit.providers import BATCH_MAX_RECORDS, CensusBatch

from .provider_support import FIXTURES

BATCH = CensusBatch()
SILVER_HILL = Query(housenumber="4600", street="Silver Hill Rd", city="Washington", state="DC",
                    postalcode="20233")


def records(request: httpx.Request) -> list[list[str]]:
    """The CSV records inside a multipart request, read back with the csv module."""
    body = request.read().decode()
    start = body.index("Content-Type: text/csv\r\n\r\n") + len("Content-Type: text/csv\r\n\r\n")
    end = body.index("\r\n--", start)
    return list(csv.reader(io.StringIO(body[start:end])))


def test_one_request_per_ten_thousand_records() -> None:
    requests = BATCH.build_batch_requests([SILVER_HILL] * (2 * BATCH_MAX_RECORDS + 1))
    assert [len(records(r)) for r in requests] == [BATCH_MAX_RECORDS, BATCH_MAX_RECORDS, 1]
    assert records(requests[1])[0][0] == str(BATCH_MAX_RECORDS)  # ids are global positions
    assert records(requests[2])[0][0] == str(2 * BATCH_MAX_RECORDS)


def test_request_shape() -> None:
    (request,) = BATCH.build_batch_requests({"a-1": SILVER_HILL,
                                             "b,2": Query(text="1600 Pennsylvania Ave NW, DC")})
    assert request.method == "POST"
    assert str(request.url) == "https://geocoding.geo.census.gov/geocoder/locations/addressbatch"
    assert request.headers["content-type"].startswith("multipart/form-data")
    body = request.read().decode()
    assert 'name="benchmark"\r\n\r\nPublic_AR_Current' in body
    assert 'name="addressFile"; filename="addresses.csv"' in body
    assert records(request) == [["a-1", "4600 Silver Hill Rd", "Washington", "DC", "20233"],
                                ["b,2", "1600 Pennsylvania Ave NW, DC", "", "", ""]]


def test_no_queries_no_requests() -> None:
    assert BATCH.build_batch_requests([]) == []


def test_smaller_chunks_on_request() -> None:
    assert len(CensusBatch(max_records=2).build_batch_requests([SILVER_HILL] * 5)) == 3


@pytest.mark.parametrize("bad", [0, -1, BATCH_MAX_RECORDS + 1, 2.5, True])
def test_chunk_size_is_bounded_by_the_service_limit(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        CensusBatch(max_records=bad)  # type: ignore[arg-type]


def test_parse_the_documented_csv_answer() -> None:
    text = (FIXTURES / "census_batch_response.csv").read_text()
    outcomes = BATCH.parse_batch_response(httpx.Response(200, text=text))
    assert set(outcomes) == {"1", "2", "3", "4"}
    first = outcomes["1"]
    assert isinstance(first, Match)
    assert (first.lon, first.lat) == (-76.92744, 38.845985)  # the "lon,lat" field, x first
    assert first.label == "4600 SILVER HILL RD, WASHINGTON, DC, 20233"
    assert first.raw["match_type"] == "Exact" and first.raw["tiger_line_id"] == "76355984"
    assert isinstance(outcomes["3"], NoMatch) and outcomes["3"].reason == "no match"
    assert isinstance(outcomes["2"], NoMatch) and "tie" in outcomes["2"].reason
    assert (outcomes["4"].lon, outcomes["4"].lat) == (-77.03535, 38.898754)  # type: ignore[union-attr]


@pytest.mark.parametrize("row", ['"9","x","Match","Exact","X","","1","L"',
                                 '"9","x","Match","Exact","X","38.8,-200.1","1","L"',
                                 '"9","x","Match"', '"9","x","Maybe"'])
def test_unusable_records_are_failures(row: str) -> None:
    outcome = BATCH.parse_batch_response(httpx.Response(200, text=row + "\n"))["9"]
    assert isinstance(outcome, Failure) and outcome.error == "ProviderResponseError"


@pytest.mark.parametrize(("point", "why"), [
    ("not-a-point", 'not two numbers "lon,lat"'), ("1,2,3", 'not two numbers "lon,lat"'),
    ("", 'not two numbers "lon,lat"'), ("-76.9,abc", "'abc'")])
def test_unusable_coordinates_say_what_they_were(point: str, why: str) -> None:
    row = f'"9","x","Match","Exact","X","{point}","1","L"\n'
    outcome = BATCH.parse_batch_response(httpx.Response(200, text=row))["9"]
    assert isinstance(outcome, Failure)
    assert outcome.reason.startswith(f"census: unusable coordinates {point!r} (")
    assert why in outcome.reason and "positional argument" not in outcome.reason


def test_an_html_page_is_not_an_answer() -> None:
    with pytest.raises(ProviderResponseError):
        BATCH.parse_batch_response(httpx.Response(200, text="<html><body>Oops</body></html>"))


def test_an_empty_answer_is_empty() -> None:
    assert BATCH.parse_batch_response(httpx.Response(200, text="")) == {}


def test_a_refused_batch_raises() -> None:
    with pytest.raises(QueryError, match="more than 10000"):
        BATCH.parse_batch_response(httpx.Response(400, text="File has more than 10000 records"))
    with pytest.raises(RateLimitError):
        BATCH.parse_batch_response(httpx.Response(503, headers={"Retry-After": "10"}))


def test_a_redirect_is_not_the_answer_whatever_its_body() -> None:
    moved = httpx.Response(301, headers={"Location": "https://geo.example/batch?key=k"},
                           text='"1","x","No_Match"\n')
    with pytest.raises(QueryError, match=r"redirect \(HTTP 301\) to https://geo.example/batch,"):
        BATCH.parse_batch_response(moved)
