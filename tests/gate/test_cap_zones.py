"""Caps in a provider's own time zone: the period and its reset follow the zone's calendar.

On the host-clock gates (memory, SQLite) a FakeClock walks across UTC midnight, the
zone's midnight, DST changes (a day of 23 or 25 hours) and a month's end. The server
gates (Redis, PostgreSQL) read their own clock: see ``test_fleet_contract.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from geotoolkit.clock import FakeClock
from geotoolkit.errors import ConfigurationError, QuotaExceededError
from geotoolkit.gate import Cap, MemoryGate, SQLiteGate, gate_key
from geotoolkit.gate.fleet import period_of

LA, ZURICH = "America/Los_Angeles", "Europe/Zurich"
KEY = gate_key("maps.example.com", "k")


def at(tz: str, *when: int) -> float:
    """The instant of a local wall-clock time (its first occurrence)."""
    return datetime(*when, tzinfo=ZoneInfo(tz)).timestamp()  # type: ignore[misc]


@pytest.fixture(params=["memory", "sqlite"])
def gate_at(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """``gate_at(start)``: a host-clock gate on a FakeClock starting at ``start``."""
    opened: list[Any] = []

    def make(start: float) -> tuple[Any, FakeClock]:
        clock = FakeClock(start=start)
        gate = (MemoryGate(clock=clock) if request.param == "memory"
                else SQLiteGate(tmp_path / "gate.sqlite", clock=clock))
        opened.append(gate)
        return gate, clock

    yield make
    for gate in opened:
        gate.close()


def walk(clock: FakeClock, seconds: float) -> None:
    """Let ``seconds`` pass (``FakeClock.advance`` moves at most a day at a time)."""
    while seconds > 0:
        step = min(seconds, 3600.0)
        clock.advance(step)
        seconds -= step


def fill(gate: Any, cap: Cap) -> QuotaExceededError:
    """Use up ``cap``; the error of the send after it."""
    for _ in range(cap.limit):
        gate.reserve(KEY, 0.0, cap=cap)
    with pytest.raises(QuotaExceededError) as info:
        gate.reserve(KEY, 0.0, cap=cap)
    return info.value


def test_a_pacific_cap_holds_past_utc_midnight_and_resets_at_pacific_midnight(gate_at: Any) -> None:
    gate, clock = gate_at(at(LA, 2026, 12, 6, 15, 0))  # 23:00 UTC
    cap = Cap(2, tz=LA)
    error = fill(gate, cap)
    assert error.retry_after == 9 * 3600.0  # to 00:00 PST, 08:00 UTC, not 1 h to UTC midnight
    assert "resets at 2026-12-07 00:00 America/Los_Angeles (08:00 UTC)" in str(error)
    assert "2026-12-06, America/Los_Angeles" in str(error)
    clock.advance(3600.0)  # 00:00 UTC: a UTC cap would send again; the provider still refuses
    with pytest.raises(QuotaExceededError) as info:
        gate.reserve(KEY, 0.0, cap=cap)
    assert info.value.retry_after == 8 * 3600.0
    walk(clock, 8 * 3600.0 - 1.0)
    with pytest.raises(QuotaExceededError):
        gate.reserve(KEY, 0.0, cap=cap)
    clock.advance(1.0)  # 00:00 in Los Angeles
    usage = gate.reserve(KEY, 0.0, cap=cap).usage
    assert (usage.period, usage.used, usage.tz) == ("2026-12-07@America/Los_Angeles", 1, LA)
    assert usage.label == "2026-12-07"
    assert usage.resets_at == at(LA, 2026, 12, 8)


@pytest.mark.parametrize(("tz", "day", "hours"), [
    (LA, (2026, 3, 8), 23),      # PST -> PDT
    (LA, (2026, 11, 1), 25),     # PDT -> PST
    (ZURICH, (2026, 3, 29), 23),  # CET -> CEST
    (ZURICH, (2026, 10, 25), 25),  # CEST -> CET
])
def test_a_day_across_a_dst_change_ends_at_the_next_local_midnight(
    gate_at: Any, tz: str, day: tuple[int, int, int], hours: int
) -> None:
    gate, clock = gate_at(at(tz, *day) - 10.0)  # 10 s before the day begins
    cap = Cap(1, tz=tz)
    assert fill(gate, cap).retry_after == 10.0
    clock.advance(10.0)
    usage = gate.reserve(KEY, 0.0, cap=cap).usage
    assert usage.period == "{:04d}-{:02d}-{:02d}@{}".format(*day, tz)
    assert usage.resets_at - clock.now() == hours * 3600.0
    with pytest.raises(QuotaExceededError) as info:
        gate.reserve(KEY, 0.0, cap=cap)
    assert info.value.retry_after == hours * 3600.0
    walk(clock, hours * 3600.0 - 1.0)  # the last second of the long (or short) day
    with pytest.raises(QuotaExceededError):
        gate.reserve(KEY, 0.0, cap=cap)
    clock.advance(1.0)
    assert gate.reserve(KEY, 0.0, cap=cap).usage.used == 1


def test_a_monthly_cap_ends_at_the_zones_month_end(gate_at: Any) -> None:
    gate, clock = gate_at(at(LA, 2026, 11, 30, 23, 59, 59))  # 2026-12-01 07:59:59 UTC
    cap = Cap(1, "month", tz=LA)
    error = fill(gate, cap)
    assert error.retry_after == 1.0 and "2026-11, America/Los_Angeles" in str(error)
    assert gate.usage(KEY, "month", LA).period == "2026-11@America/Los_Angeles"
    clock.advance(1.0)
    usage = gate.reserve(KEY, 0.0, cap=cap).usage
    assert usage.period == "2026-12@America/Los_Angeles"
    assert usage.resets_at == at(LA, 2027, 1, 1)  # the year turns: January 1st, PST


def test_a_year_end_in_zurich_is_a_new_month_before_utcs() -> None:
    clock = FakeClock(start=at(ZURICH, 2026, 12, 31, 23, 59, 50))  # 22:59:50 UTC
    gate = MemoryGate(clock=clock)
    cap = Cap(1, "month", tz=ZURICH)
    fill(gate, cap)
    assert gate.reserve(KEY, 0.0, cap=Cap(1, "month")).usage.period == "2026-12"  # UTC: apart
    clock.advance(10.0)  # 2027-01-01 00:00 in Zurich, still 2026 in UTC
    assert gate.reserve(KEY, 0.0, cap=cap).usage.period == "2027-01@Europe/Zurich"
    with pytest.raises(QuotaExceededError):
        gate.reserve(KEY, 0.0, cap=Cap(1, "month"))  # UTC's December is still used up


def test_two_fleets_capping_one_key_in_two_zones_count_apart(gate_at: Any) -> None:
    gate, _ = gate_at(at("UTC", 2026, 12, 6, 12, 0))
    for tz, label in ((LA, "2026-12-06@America/Los_Angeles"), (ZURICH, "2026-12-06@Europe/Zurich"),
                      ("UTC", "2026-12-06")):
        usage = gate.reserve(KEY, 0.0, cap=Cap(5, tz=tz)).usage
        assert (usage.period, usage.used) == (label, 1)
    gate.reserve(KEY, 0.0, cap=Cap(5, tz=LA))
    assert [gate.usage(KEY, "day", tz).used for tz in (LA, ZURICH, "UTC")] == [2, 1, 1]
    assert gate.reserve(KEY, 0.0, cap=Cap(5, tz="Etc/UTC")).usage.used == 2  # UTC by any name


def test_a_zone_spelt_in_another_case_counts_with_the_database_spelling(gate_at: Any) -> None:
    """A case-insensitive file system (macOS, Windows) finds ``america/los_angeles`` too: it
    must not count apart from ``America/Los_Angeles``."""
    gate, _ = gate_at(at(LA, 2026, 12, 6, 12, 0))
    assert Cap(5, tz="america/los_angeles").tz == LA
    gate.reserve(KEY, 0.0, cap=Cap(5, tz=LA))
    assert gate.reserve(KEY, 0.0, cap=Cap(5, tz="AMERICA/LOS_ANGELES")).usage.used == 2
    assert gate.usage(KEY, "day", "america/los_angeles").used == 2


def test_a_misspelt_zone_is_refused_with_the_nearest_name() -> None:
    with pytest.raises(ConfigurationError, match=r"'America/Los_Angles' \(did you mean "
                                                 r"'America/Los_Angeles'\?\)"):
        Cap(10, tz="America/Los_Angles")


@pytest.mark.parametrize("tz", ["Pacific/Atlantis", "PST", "../../etc/passwd", "", 3, None])
def test_a_bad_zone_is_refused_naming_it(tz: Any) -> None:
    with pytest.raises(ConfigurationError, match="zone") as info:
        Cap(10, tz=tz)
    assert repr(tz) in str(info.value) or str(tz) in str(info.value)


def test_period_of_keeps_its_utc_answers() -> None:
    assert period_of(1_709_251_199.5, "day") == ("2024-02-29", 1709251200.0)
    assert period_of(1_709_251_200.0, "month") == ("2024-03", 1711929600.0)
    assert period_of(1_709_251_200.0, "day", "UTC") == ("2024-03-01", 1709337600.0)
