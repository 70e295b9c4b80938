"""An in-process gate: for tests and single-process scripts."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from geotoolkit.clock import Clock, SystemClock
from geotoolkit.gate.base import Aimd, Usage
from geotoolkit.gate.fleet import CAP_KEEP_SECONDS
from geotoolkit.gate.primitives import (
    AddCounters,
    DeleteValue,
    Op,
    Pause,
    Paused,
    Primitives,
    ReadCounters,
    ReadState,
    ReadValues,
    Reserve,
    SetValue,
    Slot,
    StoreState,
    pause_step,
    reserve_step,
)
from geotoolkit.gate.strategy import FleetGate

__all__ = ["MemoryGate", "MemoryStore"]

_Entry = tuple[float, Any]  # (expires_at, value)


class MemoryStore(Primitives):
    """The primitives on dicts under one lock, on an injected clock (``SystemClock`` by default)."""

    backend = "memory"
    blocking = False

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self.pacing: dict[str, StoreState] = {}  # key -> tat, pause_until, epoch, cause
        self.counters: dict[tuple[str, bool], dict[str, _Entry]] = {}  # (key, durable) -> name
        self.shared: dict[str, dict[str, _Entry]] = {}  # key -> name -> (expires_at, value)

    def run(self, ops: Sequence[Op]) -> list[Any]:
        with self._lock:
            now = self.clock.now()
            return [self._apply(op, now) for op in ops]

    def _apply(self, op: Op, now: float) -> Any:
        if isinstance(op, Reserve | Pause | ReadState):
            return self._pacing(op, now)
        if isinstance(op, AddCounters | ReadCounters):
            return self._counting(op, now)
        return self._sharing(op, now)

    def _pacing(self, op: Reserve | Pause | ReadState, now: float) -> Any:
        st = self.pacing.get(op.key) or StoreState(now)
        if isinstance(op, ReadState):
            return StoreState(now, st.tat, st.pause_until, st.epoch, st.cause)
        if isinstance(op, Reserve):
            wait, tat, reserved = reserve_step(now, st.tat, st.pause_until, op)
            if reserved:
                self.pacing[op.key] = StoreState(now, tat, st.pause_until, st.epoch, st.cause)
            return Slot(wait, now, reserved, st.epoch)
        tat, until, epoch, cause = pause_step(now, st.tat, st.pause_until, st.epoch, st.cause, op)
        self.pacing[op.key] = StoreState(now, tat, until, epoch, cause)
        return Paused(now, until, st.pause_until, epoch)

    def _counting(self, op: AddCounters | ReadCounters, now: float) -> dict[str, int]:
        live = _live(self.counters, (op.key, op.durable), now)
        if isinstance(op, ReadCounters):
            return {name: live[name][1] for name in op.names if name in live}
        for name, delta in op.counts:
            live[name] = (now + op.ttl_seconds, live.get(name, (0.0, 0))[1] + delta)
        self.counters[(op.key, op.durable)] = live
        return {name: live[name][1] for name, _ in op.counts}

    def _sharing(self, op: SetValue | ReadValues | DeleteValue, now: float) -> Any:
        live = _live(self.shared, op.key, now)
        if isinstance(op, ReadValues):
            return {n: v for n, (_, v) in live.items() if n.startswith(op.prefix)}
        held = live.get(op.name)
        if isinstance(op, DeleteValue):
            if held is None or (op.only_if is not None and held[1] != op.only_if):
                return False
            del live[op.name]
            return True
        if (op.only_if_absent and held is not None) or (
                op.only_if is not None and (held is None or held[1] != op.only_if)):
            return False
        live[op.name] = (now + op.ttl_seconds, op.value)
        self.shared[op.key] = live
        return True

    def keys(self, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(k for k in self.pacing if k.startswith(prefix))

    def close(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return "MemoryStore()"


def _live(table: dict[Any, dict[str, _Entry]], key: Any, now: float) -> dict[str, _Entry]:
    """The unexpired entries of ``key`` (expired ones are dropped; an empty key is forgotten)."""
    live = {n: entry for n, entry in table.pop(key, {}).items() if entry[0] > now}
    if live:
        table[key] = live
    return live


class MemoryGate(FleetGate):
    """Gate state in a dict, shared by the tasks and threads of one process."""

    store: MemoryStore

    def __init__(self, clock: Clock | None = None, *, aimd: Aimd | None = None) -> None:
        super().__init__(MemoryStore(clock), aimd=aimd)

    def seed_usage(self, key: str, usage: Usage) -> None:
        """Start counting from ``usage`` (a fallback seeds it with the store's last count)."""
        used = self.store.read_counters(key, [usage.period], durable=True).get(usage.period, 0)
        if usage.used > used:
            ttl = max(1.0, usage.resets_at - self.store.clock.now()) + CAP_KEEP_SECONDS
            self.store.add_counters(key, {usage.period: usage.used - used}, ttl, durable=True)

    def close(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return "MemoryGate()"
