"""What every store shares: the error, the row encoding and the expiry rule."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from geotoolkit.clock import Clock, SystemClock
from geotoolkit.errors import ConfigurationError, GeotoolkitError
from geotoolkit.results import Failure, Match, NoMatch, Outcome

__all__ = ["COLUMNS", "DEFAULT_NO_MATCH_TTL_SECONDS", "Expiry", "ResultStore", "Row", "StoreError",
           "decode", "encode"]

#: No-matches are asked again after a week: the map may have learnt the address.
DEFAULT_NO_MATCH_TTL_SECONDS = 7 * 86_400.0

#: The stored columns after the key, in order.
COLUMNS = ("status", "lon", "lat", "label", "reason", "provider", "attempts", "stored_at")

#: ``(status, lon, lat, label, reason, provider, attempts, stored_at)``.
Row = tuple[str, float | None, float | None, str, str, str, int, float]


class ResultStore(Protocol):
    """Where settled outcomes persist (cache and checkpoint), keyed by cache key.

    ``blocking`` tells the engine whether a call does I/O (then it runs in a worker
    thread) or is pure memory.
    """

    blocking: bool

    def get_many(self, keys: Sequence[str]) -> Mapping[str, Outcome]: ...

    def put(self, key: str, outcome: Outcome) -> None: ...


class StoreError(GeotoolkitError):
    """The result store (cache) failed; ``backend`` names it (sqlite, postgres)."""

    retriable = True

    def __init__(self, message: str, *, backend: str) -> None:
        super().__init__(message)
        self.backend = backend


def encode(outcome: Outcome, stored_at: float) -> Row | None:
    """The row for a settled outcome; ``None`` for a failure, which is never stored.

    Provider payloads (``Match.raw``) are not stored: a cached match has ``raw == {}``.
    """
    if isinstance(outcome, Match):
        return ("matched", outcome.lon, outcome.lat, outcome.label, "", outcome.provider,
                outcome.attempts, stored_at)
    if isinstance(outcome, NoMatch):
        return ("no_match", None, None, "", outcome.reason, outcome.provider, outcome.attempts,
                stored_at)
    if isinstance(outcome, Failure):
        return None
    raise TypeError(f"not an outcome: {outcome!r}")


def decode(row: Row) -> Outcome:
    """The outcome a row stands for."""
    status, lon, lat, label, reason, provider, attempts, _ = row
    if status == "matched" and lon is not None and lat is not None:
        return Match(lon=float(lon), lat=float(lat), label=label, provider=provider,
                     attempts=int(attempts))
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
