"""An in-process gate: for tests and single-process scripts."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from geotoolkit.clock import Clock, SystemClock
from geotoolkit.gate.base import (
    HEARTBEAT_SECONDS,
    Aimd,
    Cap,
    FleetStats,
    GateState,
    Period,
    Report,
    Reservation,
    Usage,
    check_value,
)
from geotoolkit.gate.fleet import Fleet, cap_reached, pause_step, period_of, reserve_step

__all__ = ["MemoryGate"]


@dataclass
class _Key:
    tat: float = 0.0
    until: float = 0.0
    fleet: Fleet = field(default_factory=Fleet)
    workers: dict[str, float] = field(default_factory=dict)  # worker -> heartbeat expiry


class MemoryGate:
    """Gate state in a dict, shared by the tasks and threads of one process."""

    backend = "memory"
    blocking = False

    def __init__(self, clock: Clock | None = None, *, aimd: Aimd | None = None) -> None:
        self._clock = clock or SystemClock()
        self.aimd = aimd or Aimd()
        self._lock = threading.Lock()
        self._state: dict[str, _Key] = {}
        self._usage: dict[tuple[str, str], int] = {}  # (key, period label) -> sends
        self._values: dict[str, dict[str, tuple[float, str]]] = {}  # key -> name -> (expiry, value)

    def _key(self, key: str) -> _Key:
        return self._state.setdefault(key, _Key())

    def reserve(self, key: str, interval: float, horizon: float = 60.0, *,
                report: Report | None = None, cap: Cap | None = None) -> Reservation:
        with self._lock:
            now, st = self._clock.now(), self._key(key)
            wait, tat, st.fleet = reserve_step(now, st.tat, st.until, st.fleet, interval, horizon,
                                               report, self.aimd)
            usage = None
            if cap is not None:
                usage = self._usage_at(key, cap.period, now)
                if usage.used >= cap.limit:
                    raise cap_reached(cap, usage)
            reserved = wait <= horizon
            if reserved:
                st.tat = tat
                if usage is not None:
                    usage = Usage(usage.period, usage.used + 1, usage.resets_at)
                    self._usage[(key, usage.period)] = usage.used
            return Reservation(wait, now, reserved, st.fleet.epoch, st.fleet.factor, usage)

    def acquire(self, key: str, interval: float, horizon: float = 60.0) -> float:
        return self.reserve(key, interval, horizon).wait

    def pause(self, key: str, seconds: float, *, cause: str = "", rate_limited: bool = False,
              report: Report | None = None) -> float:
        with self._lock:
            now, st = self._clock.now(), self._key(key)
            st.tat, st.until, st.fleet = pause_step(
                now, st.tat, st.until, st.fleet, seconds, cause=cause,
                rate_limited=rate_limited, report=report, aimd=self.aimd)
            return st.until - now

    def state(self, key: str) -> GateState:
        with self._lock:
            st = self._state.get(key) or _Key()
            return GateState(now=self._clock.now(), tat=st.tat, pause_until=st.until,
                             epoch=st.fleet.epoch)

    def record(self, key: str, report: Report, *, worker: str | None = None,
               leaving: bool = False) -> FleetStats:
        with self._lock:
            now, st = self._clock.now(), self._key(key)
            st.fleet = st.fleet.counted(now, report).succeeded(now, report.successes, self.aimd)
            if worker is not None:
                if leaving:
                    st.workers.pop(worker, None)
                else:
                    st.workers[worker] = now + HEARTBEAT_SECONDS
            st.workers = {w: t for w, t in st.workers.items() if t > now}
            return st.fleet.stats(now, st.until, len(st.workers))

    def stats(self, key: str) -> FleetStats:
        with self._lock:
            now, st = self._clock.now(), self._state.get(key) or _Key()
            active = sum(1 for t in st.workers.values() if t > now)
            return st.fleet.stats(now, st.until, active)

    def usage(self, key: str, period: Period = "day") -> Usage:
        with self._lock:
            return self._usage_at(key, period, self._clock.now())

    def _usage_at(self, key: str, period: Period, now: float) -> Usage:
        label, resets_at = period_of(now, period)
        return Usage(label, self._usage.get((key, label), 0), resets_at)

    def set_value(self, key: str, name: str, value: str, *, ttl_seconds: float,
                  only_if_absent: bool = False) -> bool:
        ttl = check_value(name, value, ttl_seconds)
        with self._lock:
            now = self._clock.now()
            live = self._live(key, now)
            if only_if_absent and name in live:
                return False
            live[name] = (now + ttl, value)
            self._values[key] = live
            return True

    def values(self, key: str, prefix: str = "") -> dict[str, str]:
        with self._lock:
            live = self._live(key, self._clock.now())
            return {n: v for n, (_, v) in live.items() if n.startswith(prefix)}

    def delete_value(self, key: str, name: str, *, only_if: str | None = None) -> bool:
        with self._lock:
            live = self._live(key, self._clock.now())
            if name not in live or (only_if is not None and live[name][1] != only_if):
                return False
            del live[name]
            return True

    def _live(self, key: str, now: float) -> dict[str, tuple[float, str]]:
        """The key's unexpired values (expired ones are dropped; an empty key is forgotten)."""
        live = {n: entry for n, entry in self._values.pop(key, {}).items() if entry[0] > now}
        if live:
            self._values[key] = live
        return live

    def seed_usage(self, key: str, usage: Usage) -> None:
        """Start counting from ``usage`` (a fallback seeds it with the store's last count)."""
        with self._lock:
            slot = (key, usage.period)
            self._usage[slot] = max(self._usage.get(slot, 0), usage.used)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._state)

    def close(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return "MemoryGate()"
