"""An in-process gate: for tests and single-process scripts."""

from __future__ import annotations

import threading

from geotoolkit.clock import Clock, SystemClock
from geotoolkit.gate.base import GateState, gcra_acquire, gcra_pause

__all__ = ["MemoryGate"]


class MemoryGate:
    """Gate state in a dict, shared by the tasks and threads of one process."""

    backend = "memory"
    blocking = False

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._state: dict[str, tuple[float, float]] = {}

    def acquire(self, key: str, interval: float, horizon: float = 60.0) -> float:
        with self._lock:
            now = self._clock.now()
            tat, until = self._state.get(key, (0.0, 0.0))
            wait, tat = gcra_acquire(now, tat, until, interval, horizon)
            self._state[key] = (tat, until)
            return wait

    def pause(self, key: str, seconds: float) -> float:
        with self._lock:
            now = self._clock.now()
            tat, until = self._state.get(key, (0.0, 0.0))
            tat, until = gcra_pause(now, tat, until, seconds)
            self._state[key] = (tat, until)
            return until - now

    def state(self, key: str) -> GateState:
        with self._lock:
            tat, until = self._state.get(key, (0.0, 0.0))
            return GateState(now=self._clock.now(), tat=tat, pause_until=until)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._state)

    def close(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return "MemoryGate()"
