"""A store in a dict: for tests, benchmarks and runs that need no persistence."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence

from geotoolkit.clock import Clock
from geotoolkit.results import Outcome
from geotoolkit.store.base import (
    DEFAULT_NO_MATCH_TTL_SECONDS,
    Attempts,
    Expiry,
    Row,
    attempts_fresh,
    decode,
    encode,
)

__all__ = ["MemoryStore"]


class MemoryStore:
    """Settled outcomes in process memory, with the same expiry rule as the files.

    >>> from geotoolkit.results import Match
    >>> store = MemoryStore()
    >>> store.put("ns:vaduz", Match(lon=9.52, lat=47.14))
    >>> store.get_many(["ns:vaduz", "ns:other"])["ns:vaduz"].lon
    9.52
    """

    backend = "memory"
    blocking = False

    def __init__(self, *, clock: Clock | None = None,
                 no_match_ttl_seconds: float | None = DEFAULT_NO_MATCH_TTL_SECONDS) -> None:
        self._expiry = Expiry.build(no_match_ttl_seconds, clock)
        self._rows: dict[str, Row] = {}
        self._attempts: dict[str, Attempts] = {}
        self._lock = threading.Lock()

    def get_many(self, keys: Sequence[str]) -> Mapping[str, Outcome]:
        now = self._expiry.now()
        with self._lock:
            found = {k: row for k in keys if (row := self._rows.get(k)) is not None}
        return {k: decode(row) for k, row in found.items() if self._expiry.fresh(row, now)}

    def put(self, key: str, outcome: Outcome) -> None:
        self.put_many([(key, outcome)])

    def put_many(self, items: Iterable[tuple[str, Outcome]]) -> None:
        now = self._expiry.now()
        rows = [(k, row) for k, o in items if (row := encode(o, now)) is not None]
        with self._lock:
            self._rows.update(rows)

    def delete(self, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                self._rows.pop(key, None)

    def get_attempts(self, keys: Sequence[str]) -> Mapping[str, Attempts]:
        """The attempts kept for ``keys`` in this store's life (see ``AttemptLog``)."""
        now = self._expiry.now()
        with self._lock:
            found = {k: a for k in keys if (a := self._attempts.get(k)) is not None}
        return {k: a for k, a in found.items() if attempts_fresh(a.updated_at, now)}

    def put_attempts(self, key: str, attempts: Attempts) -> None:
        stamped = Attempts(*attempts.row(self._expiry.now()))  # text cut, as in the files
        with self._lock:
            self._attempts[key] = stamped

    def clear_attempts(self, keys: Sequence[str]) -> None:
        with self._lock:
            for key in keys:
                self._attempts.pop(key, None)

    def close(self) -> None:
        """Nothing to release."""

    def __len__(self) -> int:
        return len(self._rows)

    def __repr__(self) -> str:
        return f"MemoryStore(no_match_ttl_seconds={self._expiry.no_match_ttl_seconds!r})"
