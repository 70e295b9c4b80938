"""Rows' attempts across the runs of one batch (see ``AttemptLog``): what non-blocking mode
needs to end.

A non-blocking run raises instead of sleeping a backoff longer than its budget, and its
rerun starts again. Failures are not cached, so a row the provider always fails would
start from attempt 0 on every rerun, meet its backoff again, and the batch would never
end. So a row's attempts are kept in the result store by cache key, written after every
failed attempt *before* the run may raise (a kill loses at most the attempt in flight):
the next run goes on from there, first waiting out the backoff the last one left
(``not_before``), and a row that gave up is settled as that failure without sending.
When a run of the batch returns (the batch ran to its end), its rows' attempts are
forgotten: the next, fresh run tries a failed row from attempt 0 again, as a failure is
not a verdict for ever. Attempts a batch never finished expire after
``ATTEMPTS_TTL_SECONDS``.

The log is bookkeeping: a store without it (a custom one), or one that fails (read-only,
unreachable), leaves the counts in the run's memory as before, with one warning; it never
stops the run nor costs it a settled row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from geotoolkit.engine.pacer import call_gate
from geotoolkit.results import Failure
from geotoolkit.store.base import AttemptLog, Attempts, ResultStore, StoreError

__all__ = ["Tally"]

log = logging.getLogger("geotoolkit.engine")


class Tally:
    """One engine's view of the attempt log of its ``store`` (``None``: none kept)."""

    def __init__(self, store: ResultStore | None) -> None:
        self._log: AttemptLog | None = store if isinstance(store, AttemptLog) else None
        self._blocking = bool(getattr(store, "blocking", False))
        self.kept: dict[str, Attempts] = {}
        self._written: set[str] = set()

    async def recall(self, keys: Iterable[str]) -> None:
        """Read the attempts kept for ``keys`` (a run's pending rows)."""
        self.kept, self._written = {}, set()
        wanted = list(keys)
        if self._log is not None and wanted:
            found = await self._call("read", {}, self._log.get_attempts, wanted)
            self.kept = dict(found)

    async def fetch(self, key: str) -> None:
        """Read ``key``'s attempts, unless this run has: a batch's part, known only once
        it is sent (see ``batching.part_key``)."""
        if key not in self.kept and self._log is not None:
            found = await self._call("read", {}, self._log.get_attempts, [key])
            if key in found:
                self.kept[key] = found[key]

    def start(self, key: str) -> tuple[int, int]:
        """``(attempts, sent)`` the row had in earlier runs of the batch."""
        kept = self.kept.get(key)
        return (kept.attempts, kept.sent) if kept is not None else (0, 0)

    def not_before(self, key: str) -> float:
        """When the backoff an earlier run left the row ends (0: none)."""
        kept = self.kept.get(key)
        return kept.not_before if kept is not None else 0.0

    def verdicts(self, provider: str) -> dict[str, Failure]:
        """The rows that gave up in an earlier run of the batch, as their failures."""
        return {key: Failure(reason=kept.reason, error=kept.error, provider=provider,
                             attempts=kept.sent)
                for key, kept in self.kept.items() if kept.gave_up}

    async def note(self, key: str, attempts: Attempts) -> None:
        """Keep ``key``'s attempts (after a failed attempt, or as it gives up)."""
        self.kept[key] = attempts
        if self._log is not None:
            self._written.add(key)
            await self._call("write", None, self._log.put_attempts, key, attempts)

    async def forget(self) -> None:
        """The batch ran to its end: forget the attempts of its rows."""
        keys = sorted(self._written | set(self.kept))
        self.kept, self._written = {}, set()
        if self._log is not None and keys:
            await self._call("clear", None, self._log.clear_attempts, keys)

    async def _call(self, what: str, default: Any, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await call_gate(self._blocking, fn, *args)
        except StoreError as exc:
            log.warning("cannot %s rows' attempts in the cache (%s): they are counted in this "
                        "run only, so a non-blocking rerun starts them again", what, exc)
            self._log = None  # once: the rest of the run does without
            return default
