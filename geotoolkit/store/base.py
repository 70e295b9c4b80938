"""What every store shares: the protocol, the error, the row encoding and the expiry rule.

A row keeps everything a settled outcome needs to answer a later run without
sending anything: the point, the label, the provider, the attempts, and for a
match its ``precision``, ``score`` and structured ``place`` (stored as JSON).
Text that comes from a provider (labels, reasons, place fields) is cut to
``MAX_TEXT_CHARS``: a hostile 50 MB label never lands in the cache.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol, cast, runtime_checkable

from geotoolkit.clock import Clock, SystemClock
from geotoolkit.errors import ConfigurationError, GeotoolkitError
from geotoolkit.results import PRECISIONS, Failure, Match, NoMatch, Outcome, Place, Precision

__all__ = [
    "ATTEMPTS_TTL_SECONDS",
    "COLUMNS",
    "DEFAULT_NO_MATCH_TTL_SECONDS",
    "MAX_TEXT_CHARS",
    "AttemptLog",
    "Attempts",
    "Expiry",
    "ResultStore",
    "Row",
    "StoreError",
    "attempts_fresh",
    "check_timeout",
    "decode",
    "decode_place",
    "encode",
    "encode_place",
]

#: No-matches are asked again after a week: the map may have learnt the address.
DEFAULT_NO_MATCH_TTL_SECONDS = 7 * 86_400.0

#: The longest label, reason or place field stored (characters); longer ones are cut.
MAX_TEXT_CHARS = 2_000

#: The stored columns after the key, in order (schema v2 added the last three).
COLUMNS = ("status", "lon", "lat", "label", "reason", "provider", "attempts", "stored_at",
           "precision", "score", "place")

#: ``(status, lon, lat, label, reason, provider, attempts, stored_at, precision, score, place)``;
#: the last three are ``None`` in rows written before schema v2 and in no-match rows.
Row = tuple[str, float | None, float | None, str, str, str, int, float, str | None, float | None,
            str | None]


@runtime_checkable
class ResultStore(Protocol):
    """Where settled outcomes persist (cache and checkpoint), keyed by cache key.

    ``blocking`` tells the engine whether calls do I/O (then they run in a worker
    thread). Implementations: ``MemoryStore``, ``SQLiteStore``, ``PostgresStore``.
    """

    blocking: bool

    def get_many(self, keys: Sequence[str]) -> Mapping[str, Outcome]:
        """The fresh outcomes stored for ``keys`` (missing and expired keys are absent)."""
        ...

    def put(self, key: str, outcome: Outcome) -> None:
        """Store a match or no-match (a failure is ignored), committed at once."""
        ...


#: A row's attempts in an unfinished batch are forgotten after this long unchanged: a batch
#: given up for good (never run to its end) does not hold its rows' counts for ever. A
#: week, so that a daily cron that exits 75 and runs again the next day still finds them.
ATTEMPTS_TTL_SECONDS = 7 * 86_400.0


@dataclass(frozen=True)
class Attempts:
    """A row's attempts so far in a batch that has not run to its end (non-blocking reruns).

    ``attempts`` counted toward ``max_attempts`` (a 429 never counts), ``sent`` requests,
    ``not_before``: when the row's backoff ends (host clock, epoch seconds). ``error``
    (its class name) and ``reason`` are set once the row gave up: the batch's next run
    settles it as that failure without sending, until a run of the batch returns.
    ``updated_at`` is set by the store when it writes the row (for ``ATTEMPTS_TTL_SECONDS``).
    """

    attempts: int
    sent: int
    not_before: float = 0.0
    error: str = ""
    reason: str = ""
    updated_at: float = 0.0

    @property
    def gave_up(self) -> bool:
        return bool(self.error)

    def row(self, updated_at: float) -> tuple[int, int, float, str, str, float]:
        """The stored columns (text cut), stamped ``updated_at``."""
        return (self.attempts, self.sent, self.not_before, _cut(self.error), _cut(self.reason),
                updated_at)


@runtime_checkable
class AttemptLog(Protocol):
    """A store that also keeps rows' :class:`Attempts` across the runs of a batch, by cache
    key (``MemoryStore``, ``SQLiteStore``, ``PostgresStore``); a store without it keeps
    them in the run's memory only."""

    def get_attempts(self, keys: Sequence[str]) -> Mapping[str, Attempts]:
        """The attempts kept for ``keys`` (missing and expired ones are absent)."""
        ...

    def put_attempts(self, key: str, attempts: Attempts) -> None:
        """Keep ``key``'s attempts (replacing any), committed at once."""
        ...

    def clear_attempts(self, keys: Sequence[str]) -> None:
        """Forget the attempts of ``keys``: the batch ran to its end."""
        ...


def attempts_fresh(updated_at: float, now: float) -> bool:
    """Whether attempts written at ``updated_at`` still count at ``now``."""
    return now - updated_at < ATTEMPTS_TTL_SECONDS


class StoreError(GeotoolkitError):
    """The result store (cache) failed; ``backend`` names it (sqlite, postgres).

    ``permanent``: the cache's setting is refused (credentials, a role or a database that
    does not exist, a path that is a directory or may not be written, a damaged file),
    which no retry heals, unlike an outage or a lock wait: such an error is not
    ``retriable``.
    """

    retriable = True

    def __init__(self, message: str, *, backend: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.backend = backend
        self.permanent = permanent
        self.retriable = not permanent


def check_timeout(timeout_seconds: float) -> float:
    """A store call's deadline, validated: finite and > 0."""
    if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, int | float) or not (
            math.isfinite(timeout_seconds) and timeout_seconds > 0):
        raise ConfigurationError(f"timeout_seconds must be finite and > 0, got {timeout_seconds!r}")
    return float(timeout_seconds)


def _cut(text: str) -> str:
    return text[:MAX_TEXT_CHARS]


def encode_place(place: Place) -> str | None:
    """The JSON of a place's set fields (strings cut); ``None`` for an empty place.

    >>> encode_place(Place(locality="Vaduz", bbox=(9.5, 47.1, 9.6, 47.2)))
    '{"locality":"Vaduz","bbox":[9.5,47.1,9.6,47.2]}'
    """
    data: dict[str, Any] = {}
    for f in fields(Place):
        value = getattr(place, f.name)
        if value is not None:
            data[f.name] = _cut(value) if isinstance(value, str) else value
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")) if data else None


def _place_field(name: str, value: Any) -> Any:
    """A decoded place field, or ``None`` when it does not have the field's type."""
    if name == "osm_id":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if name == "bbox":
        if isinstance(value, list) and len(value) == 4 and all(
                isinstance(x, int | float) and not isinstance(x, bool) for x in value):
            return tuple(float(x) for x in value)
        return None
    return _cut(value) if isinstance(value, str) else None


def decode_place(text: str | None) -> Place:
    """The place a stored JSON text stands for; an empty ``Place`` for none or garbage.

    >>> decode_place('{"locality":"Vaduz","bbox":[9.5,47.1,9.6,47.2]}').bbox
    (9.5, 47.1, 9.6, 47.2)
    >>> decode_place(None) == decode_place("not json") == Place()
    True
    """
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return Place()
    if not isinstance(data, dict):
        return Place()
    return Place(**{f.name: _place_field(f.name, data.get(f.name)) for f in fields(Place)})


def _score(score: float | None) -> float | None:
    return float(score) if score is not None and math.isfinite(score) else None


def encode(outcome: Outcome, stored_at: float) -> Row | None:
    """The row for a settled outcome; ``None`` for a failure, which is never stored.

    Provider payloads (``Match.raw``) are not stored: a cached match has ``raw == {}``.
    """
    if isinstance(outcome, Match):
        return ("matched", outcome.lon, outcome.lat, _cut(outcome.label), "", _cut(outcome.provider),
                outcome.attempts, stored_at, _precision(outcome.precision), _score(outcome.score),
                encode_place(outcome.place))
    if isinstance(outcome, NoMatch):
        return ("no_match", None, None, "", _cut(outcome.reason), _cut(outcome.provider),
                outcome.attempts, stored_at, None, None, None)
    if isinstance(outcome, Failure):
        return None
    raise TypeError(f"not an outcome: {outcome!r}")


def _precision(value: str | None) -> Precision:
    # A word this version does not know (or none: a row from before v2) reads as "unknown".
    return cast(Precision, value) if value in PRECISIONS else "unknown"


def decode(row: Row) -> Outcome:
    """The outcome a row stands for (rows from before schema v2 included)."""
    status, lon, lat, label, reason, provider, attempts, _, precision, score, place = row
    if status == "matched" and lon is not None and lat is not None:
        return Match(lon=float(lon), lat=float(lat), label=label, provider=provider,
                     attempts=int(attempts), precision=_precision(precision),
                     score=None if score is None else float(score), place=decode_place(place))
    return NoMatch(reason=reason or "no match", provider=provider, attempts=int(attempts))


@dataclass(frozen=True)
class Expiry:
    """When stored rows stop counting: no-matches after ``no_match_ttl_seconds``.

    ``None`` keeps no-matches for ever; matches never expire.
    """

    no_match_ttl_seconds: float | None
    clock: Clock

    @classmethod
    def build(cls, no_match_ttl_seconds: float | None, clock: Clock | None) -> Expiry:
        ttl = no_match_ttl_seconds
        if ttl is not None and (isinstance(ttl, bool) or not (math.isfinite(ttl) and ttl >= 0)):
            raise ConfigurationError(f"no_match_ttl_seconds must be >= 0 or None, got {ttl!r}")
        return cls(None if ttl is None else float(ttl), clock or SystemClock())

    def now(self) -> float:
        return self.clock.now()

    def fresh(self, row: Row, now: float) -> bool:
        """Whether ``row`` still settles its query at ``now``."""
        if row[0] != "no_match" or self.no_match_ttl_seconds is None:
            return True
        return now - row[7] < self.no_match_ttl_seconds
