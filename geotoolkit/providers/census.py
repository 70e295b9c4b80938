"""The US Census Bureau geocoder: one-line, structured and batch (CSV) lookups, no key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from geotoolkit.providers import _fields as f
from geotoolkit.providers._batch import Item
from geotoolkit.providers._census_batch import (
    BATCH_MAX_RECORDS,
    CENSUS,
    CENSUS_BATCH,
    CensusBatch,
    batch_request,
    columns,
    house_number,
    outcome,
    records,
)
from geotoolkit.providers._common import HTTPProvider
from geotoolkit.providers.base import json_or_none
from geotoolkit.providers.precision import precision_of
from geotoolkit.results import Failure, NoMatch, Outcome, Place, Query

__all__ = ["BATCH_MAX_RECORDS", "CENSUS", "CENSUS_BATCH", "Census", "CensusBatch"]


class Census(HTTPProvider):
    """Census ``locations/onelineaddress`` and ``locations/address`` (``format=json``).

    ``result.addressMatches[].coordinates`` is ``{x: lon, y: lat}``.

    Batch (:data:`CENSUS_BATCH`): ``locations/addressbatch``, a multipart upload of a
    CSV file ``id, street, city, state, ZIP`` (10,000 records, under 5 MB); the id of a
    record is its position in the batch, and the CSV answer (in any order) is mapped
    back by it. The answer's coordinates field is ``"lon,lat"`` (x first).

    No reverse geocoding: the Census's only coordinate lookup,
    ``geographies/coordinates``, answers the census geographies (state, county,
    tract, block) containing a point, not an address. A ``ReverseQuery`` is refused
    (``QueryError``) and never sent.

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
    >>> from geotoolkit.results import ReverseQuery
    >>> Census().build_request(ReverseQuery(-76.93, 38.85))
    Traceback (most recent call last):
    ...
    geotoolkit.errors.QueryError: census has no reverse geocoding endpoint
    >>> Census().build_batch_request([Query(text="4600 Silver Hill Rd")] * 2).url.path
    '/geocoder/locations/addressbatch'
    """

    name = "census"
    default_base_url = CENSUS
    supports_reverse = False
    batch = CENSUS_BATCH

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
        street, city, state, zip_code = columns(query)
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

    def _build_batch(self, items: list[Item]) -> httpx.Request:
        rows = [(position, query) for position, query in items if isinstance(query, Query)]
        return batch_request(self.base_url, self.benchmark, self.user_agent, rows)

    def _parse_batch(self, response: httpx.Response, items: list[Item]) -> Mapping[int, Outcome]:
        """CSV records keyed by id (our position); unknown ids and repeats are ignored."""
        sent = {str(position): position for position, _ in items}
        found: dict[int, Outcome] = {}
        for row in records(response, self.name):
            position = sent.get(row[0].strip())
            if position is not None and position not in found:
                found[position] = outcome(row, self.name)
        return found


def _place(match: Mapping[str, Any]) -> Place:
    parts = match.get("addressComponents")
    street = " ".join(t for k in ("preQualifier", "preDirection", "preType", "streetName",
                                  "suffixType", "suffixDirection", "suffixQualifier")
                      if (t := f.text(f.dig(parts, k))))
    return f.place(place_id=f.dig(match, "tigerLine", "tigerLineId"),
                   housenumber=house_number(match.get("matchedAddress")), street=street or None,
                   postcode=f.dig(parts, "zip"), locality=f.dig(parts, "city"),
                   region=f.dig(parts, "state"), country_code="US")


def _errors(response: httpx.Response) -> list[str]:
    errors = f.dig(json_or_none(response), "errors")
    return [str(e)[:500] for e in errors[:10]] if isinstance(errors, list) else []
