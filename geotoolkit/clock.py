"""Injected time: the engine, backoff and gates never call ``time`` directly."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Protocol, runtime_checkable

__all__ = ["MAX_SLEEP_SECONDS", "Clock", "FakeClock", "SystemClock", "clamp_wait"]

#: No single sleep is longer than this (a day); larger or non-finite values are clamped.
MAX_SLEEP_SECONDS = 86_400.0


def clamp_wait(seconds: float, upper: float = MAX_SLEEP_SECONDS) -> float:
    """Return ``seconds`` as a safe argument for ``sleep``: finite, in ``[0, upper]``.

    >>> clamp_wait(float("nan")), clamp_wait(-3.0), clamp_wait(1e308, 10.0)
    (0.0, 0.0, 10.0)
    """
    if math.isnan(seconds) or seconds <= 0:
        return 0.0
    return min(seconds, upper)


@runtime_checkable
class Clock(Protocol):
    """Wall-clock seconds since the epoch and an awaitable sleep."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock: ``time.time`` and ``asyncio.sleep``."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(clamp_wait(seconds))

    def __repr__(self) -> str:
        return "SystemClock()"


class FakeClock:
    """Virtual time for tests: ``sleep`` advances the clock instead of waiting.

    Sleeping moves ``now`` to at least ``now + seconds`` and yields to the event
    loop once, so concurrent tasks interleave as they would in real time while a
    test of hours of throttling runs in milliseconds.

    >>> clock = FakeClock(start=100.0)
    >>> asyncio.run(clock.sleep(2.5)); clock.now()
    102.5
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self.slept: list[float] = []

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += clamp_wait(seconds)

    async def sleep(self, seconds: float) -> None:
        seconds = clamp_wait(seconds)
        self.slept.append(seconds)
        self._now += seconds
        await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"FakeClock(now={self._now!r})"
