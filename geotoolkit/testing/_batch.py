"""Batch endpoints: the US Census CSV upload and Mapbox v6 batch geocoding.

- Census ``POST /locations/addressbatch``: ``multipart/form-data`` with ``addressFile``
  (CSV records ``id, street, city, state, zip``; a record with only the street column is
  read as one line of text) and ``benchmark``; at most 10,000 records. The answer is CSV,
  one record per line in id order (not the upload's): ``id, input, Match, Exact|Non_Exact,
  matched address, "lon,lat", TIGER line id, side``, or ``id, input, No_Match`` / ``Tie``.
- Mapbox ``POST /search/geocode/v6/batch?access_token=``: a JSON array of at most 1,000
  query objects (forward ``q`` or structured input, reverse ``longitude``/``latitude``);
  the answer is ``{"batch": [FeatureCollection, ...]}``, one per query, in order.

Row tokens: ``#badrow`` makes that record malformed in an otherwise good answer;
``#tie`` (Census) answers ``Tie``; ``#absent`` (Census) leaves the record out. Whole-batch
failures are decided in ``_decide``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import replace
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any, ClassVar, Final

from geotoolkit.testing._dialect import FALLBACK, BadRequest, Endpoint, Incoming, Lookup, Row, countries
from geotoolkit.testing._geojson import Mapbox, mapbox_collection, mapbox_feature, parse_mapbox
from geotoolkit.testing._places import Hit
from geotoolkit.testing._reply import Answer, Marks
from geotoolkit.testing._services import Census, census_match
from geotoolkit.testing._tokens import find_tokens

__all__ = ["CENSUS_MAX_RECORDS", "MAPBOX_MAX_QUERIES", "CensusBatch", "MapboxBatch", "row_tokens"]

CENSUS_MAX_RECORDS: Final = 10_000
MAPBOX_MAX_QUERIES: Final = 1_000
CSV: Final = "text/csv; charset=utf-8"


def row_tokens(row: Row) -> frozenset[str]:
    """The names of the magic tokens in one record (``badrow``, ``tie``, ``poison``...)."""
    return frozenset(token.name for token in find_tokens(row.raw))


def _form_parts(request: Incoming) -> dict[str, bytes]:
    """The fields of a ``multipart/form-data`` body by name."""
    if not request.content_type.casefold().startswith("multipart/form-data"):
        raise BadRequest("expected a multipart/form-data upload with addressFile and benchmark")
    head = f"Content-Type: {request.content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    message = BytesParser(policy=HTTP).parsebytes(head + request.body)
    parts: dict[str, bytes] = {}
    for part in message.iter_parts() if message.is_multipart() else ():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            parts[name] = payload
    return parts


class CensusBatch(Census):
    """The Census geocoder with its batch endpoint."""

    paths: ClassVar[Mapping[str, Endpoint]] = {**Census.paths, "/locations/addressbatch": "batch"}

    def parse(self, endpoint: Endpoint, request: Incoming) -> Lookup:
        if endpoint != "batch":
            return super().parse(endpoint, request)
        parts = _form_parts(request)
        if "addressFile" not in parts:
            raise BadRequest("addressFile is required")
        if not parts.get("benchmark", b"").strip():
            raise BadRequest("Benchmark must be provided")
        text = parts["addressFile"].decode("utf-8", errors="replace")
        rows = tuple(_census_row(record) for record in csv.reader(io.StringIO(text)) if any(
            cell.strip() for cell in record))
        if not rows:
            raise BadRequest("the address file has no records")
        if len(rows) > CENSUS_MAX_RECORDS:
            raise BadRequest(f"{len(rows)} records: at most {CENSUS_MAX_RECORDS} per batch")
        return Lookup("batch", rows=rows)

    def answer(self, lookup: Lookup, hits: tuple[Hit | None, ...]) -> Answer:
        if lookup.endpoint != "batch":
            return super().answer(lookup, hits)
        order = sorted(range(len(lookup.rows)), key=lambda i: lookup.rows[i].id)

        def build(marks: Marks) -> bytes:
            marked = _marked_index(hits) if marks else None
            out = io.StringIO()
            writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
            for i in order:
                if "absent" in row_tokens(lookup.rows[i]):
                    continue
                hit = FALLBACK if marked == i and hits[i] is None else hits[i]
                writer.writerow(_census_record(lookup.rows[i], hit, marks if marked == i else {}))
            return out.getvalue().encode("utf-8")

        return Answer(build, content_type=CSV, json_values=False)


def _census_row(record: list[str]) -> Row:
    cells = [c.strip() for c in record] + [""] * 5
    record_id, street, city, state, zip_code = cells[:5]
    shown = ", ".join((street, city, state, zip_code))
    if not (city or state or zip_code):  # one line of text in the street column
        return Row(record_id, text=street, extra={"input": shown})
    fields = {"street": street, "city": city, "state": state, "postalcode": zip_code}
    return Row(record_id, fields={k: v for k, v in fields.items() if v}, extra={"input": shown})


def _marked_index(hits: tuple[Hit | None, ...]) -> int:
    """The record that carries the fault placeholders: the first match, else the first."""
    return next((i for i, hit in enumerate(hits) if hit is not None), 0)


def _census_record(row: Row, hit: Hit | None, marks: Marks) -> list[str]:
    tokens = row_tokens(row)
    shown = row.extra.get("input", "")
    if "tie" in tokens:
        return [row.id, shown, "Tie"]
    if hit is None:
        return [row.id, shown, "No_Match"]
    matched, tiger = census_match(hit)
    point = f"{hit.lon},{hit.lat}"
    if marks:
        matched = marks.get("label", matched)
        point = f"{marks.get('lon', hit.lon)},{marks.get('lat', hit.lat)}"
    if "badrow" in tokens:
        point = "not-a-point"
    return [row.id, shown, "Match", "Non_Exact" if hit.hashed else "Exact", matched, point, tiger,
            "L"]


class MapboxBatch(Mapbox):
    """Mapbox v6 with its batch endpoint."""

    paths: ClassVar[Mapping[str, Endpoint]] = {**Mapbox.paths, "/search/geocode/v6/batch": "batch"}

    def parse(self, endpoint: Endpoint, request: Incoming) -> Lookup:
        if endpoint != "batch":
            return super().parse(endpoint, request)
        try:
            queries = json.loads(request.body or b"null")
        except (ValueError, UnicodeError):
            raise BadRequest("the batch body is not JSON") from None
        if not isinstance(queries, list) or not queries:
            raise BadRequest("the batch body must be a non-empty JSON array of queries")
        if len(queries) > MAPBOX_MAX_QUERIES:
            raise BadRequest(f"Batch size {len(queries)} exceeds the limit of {MAPBOX_MAX_QUERIES}")
        return Lookup("batch", rows=tuple(_mapbox_row(i, q) for i, q in enumerate(queries)))

    def find_all(self, lookup: Lookup) -> tuple[Hit | None, ...]:
        if lookup.endpoint != "batch":
            return super().find_all(lookup)
        return tuple(self.find(Lookup("forward", text=row.text, fields=row.fields, point=row.point,
                                      countries=countries(row.extra.get("country"))))
                     for row in lookup.rows)

    def answer(self, lookup: Lookup, hits: tuple[Hit | None, ...]) -> Answer:
        if lookup.endpoint != "batch":
            return super().answer(lookup, hits)

        def build(marks: Marks) -> bytes:
            marked = _marked_index(hits) if marks else None
            batch = []
            for i, (row, hit) in enumerate(zip(lookup.rows, hits, strict=True)):
                chosen = FALLBACK if marked == i and hit is None else hit
                items = [] if chosen is None else [mapbox_feature(chosen)]
                if marked == i and items:
                    self.mark(items[0], marks)
                if "badrow" in row_tokens(row):
                    items = [{"type": "Feature", "geometry": None, "properties": {}}]
                batch.append(mapbox_collection(items))
            return json.dumps({"batch": batch}, ensure_ascii=False).encode("utf-8")

        return Answer(build)


def _mapbox_row(index: int, query: object) -> Row:
    if not isinstance(query, dict):
        raise BadRequest(f"query {index} is not an object")
    try:
        found = parse_mapbox("forward", query)
    except BadRequest as exc:
        raise BadRequest(f"query {index}: {exc}") from None
    extra: dict[str, Any] = {"country": str(query.get("country") or "")}
    return replace(found.row, id=str(index), extra=extra)
