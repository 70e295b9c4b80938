"""The single queries of a run, as the engine's workers take them: a row whose send failed
while the circuit is open gives way to rows not yet tried (see ``Engine._attempts``). Stdlib.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["RowQueue", "SetAside"]


class SetAside(Exception):
    """Internal: this row's send failed while the circuit is open and rows not yet tried
    wait: it gives way to them (the probe should not be a row the provider may always
    fail), carrying its ``attempt`` and ``sent`` counts to its next turn."""

    def __init__(self, attempt: int, sent: int) -> None:
        super().__init__()
        self.attempt, self.sent = attempt, sent


#: Queries known to be answered kept as probes (the latest ones).
_KNOWN = 8


class RowQueue:
    """The single queries of a run, in order, an iterator of one-query jobs. A row set
    aside goes back ``behind`` rows later (after the rows taken in its place, so that it
    is tried again among rows the provider answers, not last, alone with others like
    it); ``untried`` counts the rows not taken yet.

    It also keeps what the circuit's probes need: the rows whose sends ``failed`` in this
    run, the rows found ``suspect`` (they failed, and the provider answered others since:
    their failures are their own), and a few queries the provider answered (``known``,
    from the cache or this run), which a row that failed before probes with instead of
    itself.
    """

    def __init__(self, pending: Sequence[tuple[str, Any]], behind: int,
                 known: Sequence[tuple[str, Any]] = ()) -> None:
        self._items: deque[tuple[str, Any]] = deque(pending)
        self._behind = behind
        self.untried = len(pending)
        self.counts: dict[str, tuple[int, int]] = {}  # a set-aside row's (attempt, sent)
        self.failed: set[str] = set()
        self.suspects: set[str] = set()
        self._known: deque[tuple[str, Any]] = deque(known[-_KNOWN:], maxlen=_KNOWN)

    def answered(self, key: str, query: Any) -> None:
        """The provider answered ``query`` (a match): it may serve as a probe."""
        self._known.append((key, query))

    def probe_for(self, key: str) -> tuple[str, Any] | None:
        """The query to probe with instead of ``key``'s row, if that row failed before and
        no row is left untried (which would probe instead): it sends a query the cache
        may hold already, one request for each time the circuit closes so."""
        if key not in self.failed or self.untried:
            return None
        return next((item for item in reversed(self._known) if item[0] != key), None)

    def forget(self, key: str) -> None:
        """``key`` cannot serve as a probe (its request could not be built)."""
        self._known = deque((i for i in self._known if i[0] != key), maxlen=_KNOWN)

    def __iter__(self) -> Iterator[list[tuple[str, Any]]]:
        return self

    def __next__(self) -> list[tuple[str, Any]]:
        if not self._items:
            raise StopIteration
        item = self._items.popleft()
        if item[0] not in self.counts:
            self.untried -= 1
        return [item]

    def set_aside(self, item: tuple[str, Any], aside: SetAside) -> None:
        self.counts[item[0]] = (aside.attempt, aside.sent)
        self._items.insert(min(self._behind, len(self._items)), item)

    def tried(self, key: str) -> bool:
        """Whether ``key``'s row was set aside before (its sends failed)."""
        return key in self.counts

    def suspect(self, key: str) -> bool:
        """Whether ``key``'s failures are likely its own: it gave way to other rows, or a
        probe with a known query was answered after it failed."""
        return key in self.counts or key in self.suspects
