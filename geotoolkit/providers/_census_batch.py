"""The US Census batch geocoder (``locations/addressbatch``): CSV in, CSV out, sans-I/O.

One multipart upload of up to 10,000 records ``Unique ID, Street address, City,
State, ZIP``; the answer is CSV records keyed by the id, in any order. ``Census``
implements the provider batch protocol over these helpers (the id of a record is
its position in the batch); ``CensusBatch`` is the older, standalone interface
(ids of your choosing, chunking, outcomes by id).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence

import httpx

from geotoolkit.errors import ConfigurationError, ProviderResponseError, QueryError
from geotoolkit.providers import _fields as f
from geotoolkit.providers._common import DEFAULT_USER_AGENT, lonlat, parse_base_url
from geotoolkit.providers.base import (
    DEFAULT_MAX_QUERY_CHARS,
    BatchPolicy,
    check_query,
    check_user_agent,
    raise_for_status,
    redirected,
    safe_text,
)
from geotoolkit.providers.precision import precision_of
from geotoolkit.results import Failure, Match, NoMatch, Outcome, Place, Query

__all__ = ["BATCH_MAX_RECORDS", "CENSUS", "CENSUS_BATCH", "CensusBatch", "batch_request", "columns",
           "house_number", "outcome", "records"]

CENSUS = "https://geocoding.geo.census.gov/geocoder"
#: The Census batch endpoint takes at most this many records per file.
BATCH_MAX_RECORDS = 10_000
#: ``locations/addressbatch``: 10,000 records in a file under 5 MB; the Census publishes
#: no rate, and an upload is one request whatever it holds.
CENSUS_BATCH = BatchPolicy(max_queries=BATCH_MAX_RECORDS, cost="request", max_bytes=5_000_000)


def batch_request(base_url: str, benchmark: str, user_agent: str,
                  rows: Iterable[tuple[object, Query]]) -> httpx.Request:
    """The multipart POST of ``rows`` (id, query): ``benchmark`` and the ``addressFile`` CSV."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for record_id, query in rows:
        writer.writerow([str(record_id), *columns(query)])
    return httpx.Request(
        "POST", f"{base_url}/locations/addressbatch",
        data={"benchmark": benchmark},
        files={"addressFile": ("addresses.csv", buffer.getvalue().encode(), "text/csv")},
        headers={"User-Agent": user_agent})


def records(response: httpx.Response, provider: str) -> list[list[str]]:
    """The CSV records (of at least three fields) of a 2xx answer.

    ``ProviderResponseError`` for text that is not CSV, or not empty and without a record.
    A NUL is read as U+FFFD, as in a JSON answer: PostgreSQL refuses it in text (the cache
    error ended the batch) and GDAL cuts the text there.
    """
    text = response.content.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
    try:
        rows = [row for row in csv.reader(io.StringIO(text)) if len(row) >= 3]
    except csv.Error as exc:
        raise ProviderResponseError(f"census batch answer is not CSV ({exc})",
                                    raw=safe_text(text, limit=1000), provider=provider,
                                    status_code=response.status_code) from exc
    if not rows and text.strip():
        raise ProviderResponseError("census batch answer has no CSV records",
                                    raw=safe_text(text, limit=1000), provider=provider,
                                    status_code=response.status_code)
    return rows


def outcome(row: list[str], provider: str) -> Outcome:
    """One record: ``Match`` (``lon,lat`` in one field, x first), ``No_Match``, ``Tie``."""
    indicator = row[2].strip()
    if indicator == "No_Match":
        return NoMatch(provider=provider)
    if indicator == "Tie":
        return NoMatch(reason="tie: several equally good candidates", provider=provider)
    if indicator != "Match":
        return Failure(reason=f"census: unexpected match indicator {safe_text(indicator, limit=50)!r}",
                       error="ProviderResponseError", provider=provider)
    raw = _raw(row)
    point = raw.get("coordinates", "")
    try:
        lon, lat = _point(point)
    except (TypeError, ValueError) as exc:
        return Failure(reason=f"census: unusable coordinates {safe_text(point, limit=100)!r} "
                              f"({safe_text(exc, limit=100)})",
                       error="ProviderResponseError", provider=provider)
    return Match(lon=lon, lat=lat, label=f.label(raw.get("matched_address")), provider=provider,
                 raw=raw, precision=precision_of("census batch", {"match type": raw.get("match_type")}),
                 place=_batch_place(raw))


class CensusBatch:
    """Sans-I/O helpers for ``locations/addressbatch``: CSV in, CSV out, ids of your choosing.

    ``Census().build_batch_request`` / ``parse_batch_response`` are the provider batch
    protocol over the same endpoint (positions for ids, one outcome per query).

    Each record is ``Unique ID, Street address, City, State, ZIP``; free text goes
    whole into the street column. Requests are chunked at ``max_records``
    (at most 10,000, the service's limit). Answers come back in any order and
    are keyed by the id: a sequence's ids are the positions as strings. A record whose
    text cannot be encoded or is too long is refused (``QueryError`` naming its id).
    Matches are ``interpolated`` (TIGER address ranges, ``Exact`` or not).

    Examples
    --------
    >>> batch = CensusBatch()
    >>> requests = batch.build_batch_requests([Query(text="4600 Silver Hill Rd")] * 10_001)
    >>> [r.method for r in requests]
    ['POST', 'POST']
    >>> answer = httpx.Response(200, text='"0","x","No_Match"\\n')
    >>> batch.parse_batch_response(answer)["0"].status
    'no_match'
    """

    name = "census"
    max_query_chars = DEFAULT_MAX_QUERY_CHARS
    secrets: tuple[str, ...] = ()

    def __init__(self, base_url: str | None = None, *, benchmark: str = "Public_AR_Current",
                 user_agent: str | None = None, max_records: int = BATCH_MAX_RECORDS) -> None:
        self.base_url, self.host = parse_base_url(base_url or CENSUS)
        self.benchmark = benchmark
        self.user_agent = DEFAULT_USER_AGENT if user_agent is None else check_user_agent(
            user_agent, self.name)
        if isinstance(max_records, bool) or not isinstance(max_records, int) or not (
                0 < max_records <= BATCH_MAX_RECORDS):
            raise ConfigurationError(
                f"max_records must be between 1 and {BATCH_MAX_RECORDS}, got {max_records!r}")
        self.max_records = max_records

    def build_batch_requests(
        self, queries: Sequence[Query] | Mapping[str, Query]
    ) -> list[httpx.Request]:
        """One multipart POST per chunk of at most ``max_records`` queries."""
        rows = list(queries.items() if isinstance(queries, Mapping) else enumerate(queries))
        return [self._request(rows[i:i + self.max_records])
                for i in range(0, len(rows), self.max_records)]

    def _request(self, rows: list[tuple[object, Query]]) -> httpx.Request:
        for record_id, query in rows:
            try:
                check_query(query, self.name, self.max_query_chars)
            except QueryError as exc:
                raise QueryError(f"record {safe_text(record_id, limit=100)!r}: {exc}",
                                 provider=self.name) from None
        return batch_request(self.base_url, self.benchmark, self.user_agent, rows)

    def parse_batch_response(self, response: httpx.Response) -> dict[str, Outcome]:
        """Outcomes by id from the CSV answer (``Match`` / ``No_Match`` / ``Tie``)."""
        raise_for_status(response, self.name)
        if 300 <= response.status_code < 400:  # not the answer, whatever its body holds
            raise QueryError(redirected(response, self.name).reason, provider=self.name,
                             status_code=response.status_code)
        if response.status_code >= 400:
            text = response.content.decode("utf-8", errors="replace")
            raise QueryError(f"census refused the batch (HTTP {response.status_code}): "
                             f"{safe_text(text, limit=200)}", provider=self.name,
                             status_code=response.status_code)
        found: dict[str, Outcome] = {}
        for row in records(response, self.name):
            if row[0] not in found:  # a repeated id: the first record counts
                found[row[0]] = outcome(row, self.name)
        return found

    def __repr__(self) -> str:
        return f"CensusBatch({self.base_url!r}, benchmark={self.benchmark!r})"


def _batch_place(raw: Mapping[str, str]) -> Place:
    """The place from a batch record: ``4600 SILVER HILL RD, WASHINGTON, DC, 20233``."""
    parts = [p.strip() for p in raw.get("matched_address", "").split(",")]
    street, city, state, zip_code = parts if len(parts) == 4 else ("", "", "", "")
    number = house_number(street)
    return f.place(place_id=raw.get("tiger_line_id"), housenumber=number,
                   street=street[len(number):] if number else street, postcode=zip_code,
                   locality=city, region=state, country_code="US")


def columns(query: Query) -> tuple[str, str, str, str]:
    """Street address, city, state, ZIP: free text goes whole into the street column."""
    if query.text is not None:
        return query.text, "", "", ""
    street = " ".join(v for v in (query.housenumber, query.street) if v)
    return street, query.city or "", query.state or "", query.postalcode or ""


def _point(text: str) -> tuple[float, float]:
    """``lon,lat`` (x first) of a match record, as two checked numbers.

    >>> _point("-76.92744,38.845985")
    (-76.92744, 38.845985)
    >>> _point("not-a-point")
    Traceback (most recent call last):
    ...
    ValueError: not two numbers "lon,lat"
    """
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError('not two numbers "lon,lat"')
    return lonlat(*parts)


def _raw(row: list[str]) -> dict[str, str]:
    names = ("id", "input", "match", "match_type", "matched_address", "coordinates",
             "tiger_line_id", "side")
    return dict(zip(names, row, strict=False))


def house_number(matched: object) -> str | None:
    """The leading number of a matched address (``4600 SILVER HILL RD, ...``)."""
    first = (f.text(matched) or "").split(" ", 1)[0]
    return first if any(c.isdigit() for c in first) else None
