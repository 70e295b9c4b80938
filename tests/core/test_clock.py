"""SystemClock's sleeps end on time: never before, and not on the loop's timer alone."""

from __future__ import annotations

import asyncio
import time

import pytest

from geotoolkit import clock as clock_module
from geotoolkit.clock import SystemClock


@pytest.mark.parametrize("seconds", [0.0, 0.0004, 0.0015, 0.0031, 0.012])
def test_a_sleep_never_ends_before_its_time(seconds: float) -> None:
    async def sleep() -> tuple[float, float]:
        start = time.time()
        await SystemClock().sleep(seconds)
        return start, time.time()

    start, end = asyncio.run(sleep())
    assert end >= start + seconds


def test_a_timer_that_wakes_early_does_not_end_the_sleep_early(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop's timer is asked for all but the spin; if it wakes at once (its clock and
    the wall clock drift apart), the rest is still waited for, yielding to the loop."""
    asked: list[float] = []
    real_sleep = asyncio.sleep

    async def early(seconds: float) -> None:
        asked.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(clock_module.asyncio, "sleep", early)
    clock = SystemClock()

    async def sleep() -> tuple[float, float]:
        start = time.time()
        await clock.sleep(0.02)
        return start, time.time()

    start, end = asyncio.run(sleep())
    assert end >= start + 0.02
    assert asked[0] == pytest.approx(0.02 - clock.spin_seconds)
    assert all(seconds == 0 for seconds in asked[1:]) and len(asked) > 1


def test_other_tasks_run_while_a_sleep_spins() -> None:
    clock = SystemClock()
    ticks: list[float] = []

    async def ticker(stop: asyncio.Event) -> None:
        while not stop.is_set():
            ticks.append(time.time())
            await asyncio.sleep(0)

    async def run() -> tuple[float, float]:
        stop = asyncio.Event()
        task = asyncio.create_task(ticker(stop))
        await asyncio.sleep(0)
        ticks.clear()
        start = time.time()
        await clock.sleep(clock.spin_seconds / 2)  # all of it spun
        end = time.time()
        stop.set()
        await task
        return start, end

    start, end = asyncio.run(run())
    assert any(start <= tick <= end for tick in ticks)


def test_a_wall_clock_stepped_back_does_not_keep_the_sleep_spinning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The wall clock steps back an hour during the sleep (NTP): the sleep ends on the
    monotonic clock, at most one spin past its end, instead of spinning for the hour."""
    real_time = time.time
    stepped: list[bool] = []

    def wall() -> float:
        return real_time() - (3600.0 if stepped else 0.0)

    real_sleep = asyncio.sleep

    async def timer(seconds: float) -> None:
        await real_sleep(seconds)
        stepped.append(True)  # the step happens while the timer sleeps

    monkeypatch.setattr(clock_module.time, "time", wall)
    monkeypatch.setattr(clock_module.asyncio, "sleep", timer)
    clock = SystemClock()

    async def sleep() -> tuple[float, float]:
        start = wall()
        await clock.sleep(0.01)
        return start, wall()

    start, end = asyncio.run(sleep())
    assert end < start + 0.01  # over, though the wall clock says an hour is left
