"""Provider dialects: how each provider's API asks and answers, around one shared world.

A :class:`Dialect` knows one provider's paths, its key parameter, how its requests name
an address or a point (:meth:`Dialect.parse` -> :class:`Lookup`), how it renders what the
simulator found (:meth:`Dialect.answer`) and how it says no (:meth:`Dialect.error`:
missing or wrong key, throttled, quota spent, unavailable, bad request). Everything here
is pure and stdlib only: the decisions (limits, faults) stay in ``_decide``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Final, Literal

from geotoolkit.testing._nearest import nearest
from geotoolkit.testing._places import KNOWN_ADDRESSES, Hit, query_repr, resolve
from geotoolkit.testing._reply import Answer, Marks, Reply, json_reply

__all__ = [
    "FALLBACK",
    "BadRequest",
    "Dialect",
    "Endpoint",
    "ErrorKind",
    "Incoming",
    "Lookup",
    "Row",
    "coordinate",
    "countries",
    "point_pair",
    "set_path",
]

#: What a path serves.
Endpoint = Literal["forward", "reverse", "batch", "status"]

#: The ways a provider says no, each in its own form.
ErrorKind = Literal["missing_key", "invalid_key", "rate_limited", "quota", "unavailable",
                    "bad_request", "not_found", "method", "status"]

#: The usual HTTP status of each kind (a dialect may answer differently: Google says 200).
_STATUS: Final[Mapping[str, int]] = {
    "missing_key": 401, "invalid_key": 403, "rate_limited": 429, "quota": 402,
    "unavailable": 503, "bad_request": 400, "not_found": 404, "method": 405, "status": 500}

#: A known place that stands in when a fault needs a result and nothing was found.
FALLBACK: Final = resolve(KNOWN_ADDRESSES[0].address)


class BadRequest(Exception):
    """A request the provider refuses as malformed (answered 400, in its own form)."""


@dataclass(frozen=True)
class Incoming:
    """One HTTP request as a dialect sees it (the path relative to its mount)."""

    method: str
    path: str
    params: Mapping[str, str]
    body: bytes = b""
    content_type: str = ""


@dataclass(frozen=True)
class Row:
    """One record of a batch: an address (text or fields) or a point, with its id."""

    id: str
    text: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    point: tuple[float, float] | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def query(self) -> str | None:
        if self.point is not None:
            return f"reverse:{self.point[0]:.6f},{self.point[1]:.6f}"
        return query_repr(self.text, self.fields)

    @property
    def raw(self) -> str:
        """The text magic tokens are looked for in."""
        return self.text if self.text and self.text.strip() else " ".join(self.fields.values())


@dataclass(frozen=True)
class Lookup:
    """What one request asks, in the simulator's words.

    ``fields`` use Nominatim's names (``street``, ``city``, ``postalcode``, ...; a
    ``housenumber`` joins the street); ``point`` is ``(lon, lat)``; ``countries`` (lower-
    case alpha-2) limits the answer; ``options`` keeps what a renderer needs (a format).
    """

    endpoint: Endpoint
    text: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    point: tuple[float, float] | None = None
    radius_m: float | None = None
    countries: frozenset[str] | None = None
    rows: tuple[Row, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)

    @property
    def row(self) -> Row:
        """The request as one record (a single lookup is a batch of one)."""
        return Row("", self.text, self.fields, self.point)

    @property
    def query(self) -> str | None:
        """The query as logged and as counted by magic tokens (``None`` for a batch)."""
        return None if self.endpoint == "batch" else self.row.query


def set_path(target: Any, path: Sequence[str | int], value: object) -> None:
    """``target[path[0]][path[1]]... = value`` (dicts and lists, created as needed)."""
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


def countries(value: str | None) -> frozenset[str] | None:
    """A country filter from ``"li,ch"`` (lower case); ``None`` when absent or blank."""
    if value is None or not value.strip():
        return None
    return frozenset(c.strip().casefold() for c in value.split(",") if c.strip())


def coordinate(value: str | None, name: str, limit: float) -> float:
    """A finite number in ``[-limit, limit]`` from a parameter, else :class:`BadRequest`."""
    try:
        number = float((value or "").strip())
    except ValueError:
        raise BadRequest(f"parameter '{name}' must be a number, got {value!r}") from None
    if not (math.isfinite(number) and -limit <= number <= limit):
        raise BadRequest(f"parameter '{name}' out of range: {value!r}")
    return number


def point_pair(value: str | None, name: str, *, lon_first: bool, separators: str = ",") -> tuple[
        float, float]:
    """``(lon, lat)`` from ``"lat,lon"`` (or ``"lon,lat"`` with ``lon_first``)."""
    text = (value or "").strip()
    for separator in separators:
        first, sep, second = text.partition(separator)
        if sep:
            break
    else:
        raise BadRequest(f"parameter '{name}' must be two numbers, got {value!r}")
    if lon_first:
        return coordinate(first, name, 180.0), coordinate(second, name, 90.0)
    return coordinate(second, name, 180.0), coordinate(first, name, 90.0)


class Dialect:
    """One provider's API: subclasses set the class attributes and the renderers."""

    name: ClassVar[str]
    #: The query parameter carrying the API key (``None``: the API has no keys).
    key_param: ClassVar[str | None] = None
    #: Paths relative to the provider's base URL, and what each serves.
    paths: ClassVar[Mapping[str, Endpoint]] = {}
    #: Match paths by their ending (servers with arbitrary prefixes, e.g. ArcGIS).
    suffix_paths: ClassVar[bool] = False
    #: Appended to the mount for :meth:`ProviderSimulator.base_url` (LocationIQ's ``/v1``).
    base_suffix: ClassVar[str] = ""
    #: Where the label and the coordinates sit in one rendered result (for faults).
    mark_paths: ClassVar[Mapping[str, tuple[str | int, ...]]] = {}

    # ------------------------------------------------------------------ requests

    def endpoint(self, path: str) -> Endpoint | None:
        """What ``path`` serves here, or ``None``."""
        if self.suffix_paths:
            return next((e for p, e in self.paths.items() if path.endswith(p)), None)
        return self.paths.get(path)

    def claims(self, path: str, params: Mapping[str, str]) -> bool:
        """On a bare path several providers share: is this request for this provider?"""
        return True

    def methods(self, endpoint: Endpoint) -> frozenset[str]:
        return frozenset({"POST"}) if endpoint == "batch" else frozenset({"GET", "HEAD"})

    def key(self, params: Mapping[str, str]) -> str | None:
        """The API key as sent (``None`` when absent or when the API has no keys)."""
        return params.get(self.key_param) if self.key_param else None

    def parse(self, endpoint: Endpoint, request: Incoming) -> Lookup:
        """The request in the simulator's words; :class:`BadRequest` when malformed."""
        raise NotImplementedError

    # ------------------------------------------------------------------ answers

    def find(self, lookup: Lookup) -> Hit | None:
        """What the simulator's world holds for a single lookup (filters applied)."""
        hit = nearest(*lookup.point) if lookup.point is not None else resolve(lookup.text, lookup.fields)
        if hit is not None and lookup.countries is not None and not {"li", "lie"} & lookup.countries:
            return None
        return hit

    def find_all(self, lookup: Lookup) -> tuple[Hit | None, ...]:
        """One hit (or none) per record: the single lookup, or each row of a batch."""
        if lookup.endpoint != "batch":
            return (self.find(lookup),)
        return tuple(self.find(replace(lookup, endpoint="forward", text=row.text,
                                       fields=row.fields, point=row.point)) for row in lookup.rows)

    def item(self, lookup: Lookup, hit: Hit) -> dict[str, Any]:
        """One result in this provider's JSON."""
        raise NotImplementedError

    def document(self, lookup: Lookup, items: list[dict[str, Any]]) -> object:
        """The whole answer around the rendered results (none: nothing found)."""
        raise NotImplementedError

    def answer_status(self, lookup: Lookup, hits: tuple[Hit | None, ...]) -> int:
        """The HTTP status of a normal answer (LocationIQ says 404 for no match)."""
        return 200

    def answer(self, lookup: Lookup, hits: tuple[Hit | None, ...]) -> Answer:
        """The normal answer for ``lookup``, whose records found ``hits``."""
        hit = hits[0] if hits else None

        def build(marks: Marks) -> bytes:
            chosen = FALLBACK if marks and hit is None else hit
            items = [] if chosen is None else [self.item(lookup, chosen)]
            if marks and items:
                self.mark(items[0], marks)
            return _dumps(self.document(lookup, items))

        return Answer(build, status=self.answer_status(lookup, hits))

    def mark(self, item: dict[str, Any], marks: Marks) -> None:
        """Put the placeholders where the label and the coordinates are."""
        for name, value in marks.items():
            set_path(item, self.mark_paths[name], value)

    # ------------------------------------------------------------------ refusals

    def status_of(self, kind: ErrorKind) -> int:
        """The HTTP status this provider uses for ``kind``."""
        return _STATUS[kind]

    def error_body(self, kind: ErrorKind, status: int, message: str) -> object:
        """The JSON body of a refusal (default: Nominatim's ``{"error": {...}}``)."""
        return {"error": {"code": status, "message": message}}

    def error(self, kind: ErrorKind, message: str, status: int | None = None) -> Reply:
        """A refusal in this provider's form; ``status`` overrides (scripted faults)."""
        code = self.status_of(kind) if status is None else status
        return json_reply(code, self.error_body(kind, code, message))

    def throttle(self, reply: Reply, retry_after: str | None, *, now: float, seconds: int,
                 limit: int | None, window_seconds: float, auto: bool) -> Reply:
        """A 429/503 with its hints: ``Retry-After`` by default (Mapbox has its own headers).

        ``retry_after`` is the header the simulator's ``retry_after`` setting asks for
        (``None``: send none); ``seconds`` what the limiter says; ``auto``: the setting
        is ``"auto"`` (the provider's own habit).
        """
        if reply.status not in (429, 503):
            return reply
        return replace(reply, retry_after=retry_after)

    def in_body_error(self) -> Reply:
        """A 200 whose body says the lookup failed (the ``#error`` fault)."""
        return json_reply(200, {"error": "Unable to geocode"})


def _dumps(document: object) -> bytes:
    if isinstance(document, bytes):
        return document
    return json.dumps(document, ensure_ascii=False).encode("utf-8")

