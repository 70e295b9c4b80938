"""The US Census Bureau geocoder: one-line, structured and batch (CSV) lookups, no key."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpx

from geotoolkit.errors import ConfigurationError, ProviderResponseError, QueryError
from geotoolkit.providers import _fields as f
from geotoolkit.providers._common import DEFAULT_USER_AGENT, HTTPProvider, lonlat, parse_base_url
from geotoolkit.providers.base import (
    DEFAULT_MAX_QUERY_CHARS,
    check_query,
    check_user_agent,
    json_or_none,
    raise_for_status,
    safe_text,
)
from geotoolkit.providers.precision import precision_of
from geotoolkit.results import Failure, Match, NoMatch, Outcome, Place, Query

__all__ = ["BATCH_MAX_RECORDS", "CENSUS", "Census", "CensusBatch"]

CENSUS = "https://geocoding.geo.census.gov/geocoder"
#: The Census batch endpoint takes at most this many records per file.
BATCH_MAX_RECORDS = 10_000


class Census(HTTPProvider):
    """Census ``locations/onelineaddress`` and ``locations/address`` (``format=json``).

    ``result.addressMatches[].coordinates`` is ``{x: lon, y: lat}``. For volume,
    see ``CensusBatch`` (10,000 records per request).

    The Census places every match along a TIGER/Line address range: the precision
    is always ``interpolated``; it gives no score. The place id is the
    ``tigerLine.tigerLineId``, the components its ``addressComponents``.

    Parameters
    ----------
    benchmark
        The address-range benchmark, default ``Public_AR_Current``.
    base_url, user_agent, rate
        As for every provider; no key. No rate is published: the default is a
        conservative 5/s.

    Examples
    --------
    >>> Census().build_request(Query(text="4600 Silver Hill Rd, Washington, DC 20233")).url.path
    '/geocoder/locations/onelineaddress'
    """

    name = "census"
    default_base_url = CENSUS

    def __init__(self, base_url: str | None = None, *, benchmark: str = "Public_AR_Current",
                 user_agent: str | None = None, rate: float | None = None) -> None:
        super().__init__(base_url, user_agent=user_agent, rate=rate)
        self.benchmark = benchmark

    def _options(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark}

    def _build(self, query: Query) -> httpx.Request:
        params = {"benchmark": self.benchmark, "format": "json"}
        if query.text is not None:
            return self._get("/locations/onelineaddress", {"address": query.text, **params})
        street, city, state, zip_code = _columns(query)
        fields = {"street": street, "city": city, "state": state, "zip": zip_code}
        return self._get("/locations/address", {**{k: v for k, v in fields.items() if v}, **params})

    def _check(self, response: httpx.Response) -> Outcome | None:
        if 400 <= response.status_code < 500 and response.status_code not in (401, 402, 403, 429):
            errors = _errors(response)
            if errors:
                return Failure(reason=self._reason(f"census rejected the query (HTTP "
                                                   f"{response.status_code}): {'; '.join(errors)}"),
                               error="QueryError", provider=self.name)
        return None

    def _parse_body(self, body: Any) -> Outcome:
        result = body.get("result") if isinstance(body, Mapping) else None
        matches = result.get("addressMatches") if isinstance(result, Mapping) else None
        if not isinstance(matches, list):
            raise self._bad("answer without result.addressMatches", body)
        if not matches:
            return NoMatch(provider=self.name)
        first = matches[0]
        point = first.get("coordinates") if isinstance(first, Mapping) else None
        if not isinstance(point, Mapping):
            raise self._bad("match without coordinates", first)
        return self._match(point.get("x"), point.get("y"), first.get("matchedAddress"), first,
                           precision=precision_of(self.name, {"addressMatches[]": "match"}),
                           place=_place(first))


def _place(match: Mapping[str, Any]) -> Place:
    parts = match.get("addressComponents")
    street = " ".join(t for k in ("preQualifier", "preDirection", "preType", "streetName",
                                  "suffixType", "suffixDirection", "suffixQualifier")
                      if (t := f.text(f.dig(parts, k))))
    return f.place(place_id=f.dig(match, "tigerLine", "tigerLineId"),
                   housenumber=_house_number(match.get("matchedAddress")), street=street or None,
                   postcode=f.dig(parts, "zip"), locality=f.dig(parts, "city"),
                   region=f.dig(parts, "state"), country_code="US")


def _house_number(matched: object) -> str | None:
    """The leading number of a matched address (``4600 SILVER HILL RD, ...``)."""
    first = (f.text(matched) or "").split(" ", 1)[0]
    return first if any(c.isdigit() for c in first) else None


class CensusBatch:
    """Sans-I/O helpers for ``locations/addressbatch``: CSV in, CSV out.

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
        records = list(queries.items() if isinstance(queries, Mapping) else enumerate(queries))
        return [self._request(records[i:i + self.max_records])
                for i in range(0, len(records), self.max_records)]

    def _request(self, records: Iterable[tuple[object, Query]]) -> httpx.Request:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        for record_id, query in records:
            try:
                check_query(query, self.name, self.max_query_chars)
            except QueryError as exc:
                raise QueryError(f"record {safe_text(record_id, limit=100)!r}: {exc}",
                                 provider=self.name) from None
            writer.writerow([str(record_id), *_columns(query)])
        return httpx.Request(
            "POST", f"{self.base_url}/locations/addressbatch",
            data={"benchmark": self.benchmark},
            files={"addressFile": ("addresses.csv", buffer.getvalue().encode(), "text/csv")},
            headers={"User-Agent": self.user_agent})

    def parse_batch_response(self, response: httpx.Response) -> dict[str, Outcome]:
        """Outcomes by id from the CSV answer (``Match`` / ``No_Match`` / ``Tie``)."""
        raise_for_status(response, self.name)
        text = response.content.decode("utf-8", errors="replace")
        if response.status_code >= 400:
            raise QueryError(f"census refused the batch (HTTP {response.status_code}): "
                             f"{safe_text(text, limit=200)}", provider=self.name,
                             status_code=response.status_code)
        try:
            outcomes = {row[0]: self._outcome(row) for row in csv.reader(io.StringIO(text))
                        if len(row) >= 3}
        except csv.Error as exc:
            raise ProviderResponseError(f"census batch answer is not CSV ({exc})",
                                        raw=safe_text(text, limit=1000), provider=self.name,
                                        status_code=response.status_code) from exc
        if not outcomes and text.strip():
            raise ProviderResponseError("census batch answer has no CSV records",
                                        raw=safe_text(text, limit=1000), provider=self.name,
                                        status_code=200)
        return outcomes

    def _outcome(self, row: list[str]) -> Outcome:
        indicator = row[2].strip()
        if indicator == "No_Match":
            return NoMatch(provider=self.name)
        if indicator == "Tie":
            return NoMatch(reason="tie: several equally good candidates", provider=self.name)
        if indicator != "Match":
            return Failure(reason=f"census: unexpected match indicator {safe_text(indicator, limit=50)!r}",
                           error="ProviderResponseError", provider=self.name)
        raw = _raw(row)
        try:
            lon, lat = lonlat(*raw.get("coordinates", "").split(","))  # "lon,lat": x first
        except (TypeError, ValueError) as exc:
            return Failure(reason=f"census: unusable coordinates in record "
                                  f"{safe_text(row[0], limit=100)!r} ({safe_text(exc, limit=100)})",
                           error="ProviderResponseError", provider=self.name)
        return Match(lon=lon, lat=lat, label=f.label(raw.get("matched_address")),
                     provider=self.name, raw=raw,
                     precision=precision_of("census batch", {"match type": raw.get("match_type")}),
                     place=_batch_place(raw))

    def __repr__(self) -> str:
        return f"CensusBatch({self.base_url!r}, benchmark={self.benchmark!r})"


def _batch_place(raw: Mapping[str, str]) -> Place:
    """The place from a batch record: ``4600 SILVER HILL RD, WASHINGTON, DC, 20233``."""
    parts = [p.strip() for p in raw.get("matched_address", "").split(",")]
    street, city, state, zip_code = parts if len(parts) == 4 else ("", "", "", "")
    number = _house_number(street)
    return f.place(place_id=raw.get("tiger_line_id"), housenumber=number,
                   street=street[len(number):] if number else street, postcode=zip_code,
                   locality=city, region=state, country_code="US")


def _columns(query: Query) -> tuple[str, str, str, str]:
    """Street address, city, state, ZIP: free text goes whole into the street column."""
    if query.text is not None:
        return query.text, "", "", ""
    street = " ".join(v for v in (query.housenumber, query.street) if v)
    return street, query.city or "", query.state or "", query.postalcode or ""


def _raw(row: list[str]) -> dict[str, str]:
    names = ("id", "input", "match", "match_type", "matched_address", "coordinates",
             "tiger_line_id", "side")
    return dict(zip(names, row, strict=False))


def _errors(response: httpx.Response) -> list[str]:
    errors = f.dig(json_or_none(response), "errors")
    return [str(e)[:500] for e in errors[:10]] if isinstance(errors, list) else []
