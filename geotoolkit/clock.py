"""Injected time: the engine, backoff and gates never call ``time`` directly."""

from __future__ import annotations

import asyncio
import heapq
import itertools
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
    """The real clock: ``time.time`` and ``asyncio.sleep``, ending on time.

    The event loop's timer alone ends a sleep 0.1-1.5 ms late, by a different amount each
    time: the selector rounds its timeout up to the millisecond (epoll) and the process
    wakes when it is scheduled. Two sends spaced at a limiter's exact interval then reach
    it up to a millisecond closer than that, which a limiter without burst refuses
    (measured in the fleet benchmark: a send's departure after its due instant spread
    from 0.27 to 1.81 ms, 5th to 95th percentile; 0.08 to 0.54 ms with the last
    ``spin_seconds`` of each sleep spent yielding to the loop, see
    docs/fleet-benchmark.md). So the loop's timer sleeps all but the last
    ``spin_seconds``, and the rest is spent yielding to the loop (other tasks run
    meanwhile) until the wall clock says the sleep is over: never before, even where
    the loop's monotonic clock and the wall clock drift apart.
    """

    #: The part of a sleep spent yielding to the loop rather than on its timer: at least
    #: the selector's rounding (1 ms), plus a little for a late wake-up.
    spin_seconds = 0.0015

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        seconds = clamp_wait(seconds)
        end = time.time() + seconds
        # A wall clock stepped back meanwhile (NTP) must not keep the loop spinning: the
        # spin ends at the latest one spin past the end on the monotonic clock.
        latest = time.monotonic() + seconds + self.spin_seconds
        if seconds > self.spin_seconds:
            await asyncio.sleep(seconds - self.spin_seconds)
        while True:
            await asyncio.sleep(0)
            if time.time() >= end or time.monotonic() >= latest:
                return

    def __repr__(self) -> str:
        return "SystemClock()"


class FakeClock:
    """Virtual time for tests: sleeping tasks wake in deadline order, instantly.

    ``sleep`` parks the task until the virtual clock reaches its deadline. When
    every task of the event loop is parked, the clock jumps to the earliest
    deadline and wakes that task, so tests of hours of throttling run in
    milliseconds and concurrent tasks interleave as they would in real time.
    It assumes the loop does no real I/O (use in-memory gates and transports).

    >>> clock = FakeClock(start=100.0)
    >>> async def two_sleepers():
    ...     await asyncio.gather(clock.sleep(2.5), clock.sleep(1.0))
    >>> asyncio.run(two_sleepers()); clock.now()
    102.5
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._waiters: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._advancer: asyncio.Task[None] | None = None
        self.slept: list[float] = []

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by hand (for code that only reads the clock)."""
        self._now += clamp_wait(seconds)

    async def sleep(self, seconds: float) -> None:
        seconds = clamp_wait(seconds)
        self.slept.append(seconds)
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._waiters, (self._now + seconds, next(self._seq), future))
        if self._advancer is None or self._advancer.done():
            self._advancer = loop.create_task(self._advance())
        await future

    async def _advance(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiters:
            await _until_idle(loop)
            if not self._waiters:
                return
            deadline, _, future = heapq.heappop(self._waiters)
            self._now = max(self._now, deadline)
            if not future.done():
                future.set_result(None)

    def __repr__(self) -> str:
        return f"FakeClock(now={self._now!r})"


async def _until_idle(loop: asyncio.AbstractEventLoop, max_yields: int = 10_000) -> None:
    """Yield until no other callback is ready to run (every task is parked)."""
    for _ in range(max_yields):
        await asyncio.sleep(0)
        ready = getattr(loop, "_ready", None)  # CPython's queue of runnable callbacks
        if ready is not None and len(ready) == 0:
            return
