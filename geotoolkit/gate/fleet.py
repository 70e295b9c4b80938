"""Pure fleet-state steps shared by the host-clock gates (memory, SQLite).

The Redis Lua scripts and the PostgreSQL functions implement the same steps on
the server; the contract suite checks that every backend agrees. Stdlib only.

``Fleet`` holds what a key needs beyond the GCRA pair: the pause epoch and cause,
the AIMD state and a ring of one-second buckets counting requests, successes
and throttled answers.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from geotoolkit.errors import QuotaExceededError
from geotoolkit.gate.base import (
    Aimd,
    Cap,
    FleetStats,
    Period,
    Report,
    Usage,
    gcra_acquire,
    gcra_pause,
    is_new_pause,
)

__all__ = [
    "BUCKET_SECONDS",
    "CREDIT_SECONDS",
    "SLOTS",
    "WINDOW_SECONDS",
    "Fleet",
    "cap_reached",
    "pause_step",
    "period_of",
    "reserve_step",
]

#: The sliding window: ``SLOTS`` buckets of ``BUCKET_SECONDS``.
BUCKET_SECONDS = 1.0
SLOTS = 10
WINDOW_SECONDS = BUCKET_SECONDS * SLOTS

#: Sends made near an increase are credited at most this many seconds each.
CREDIT_SECONDS = 1.0

Bucket = tuple[int, int, int, int]  # (stamp, requests, successes, throttled)


@dataclass(frozen=True)
class Fleet:
    """Per-key state beyond ``tat``/``pause_until``; ``None`` times mean "never"."""

    epoch: int = 0
    cause: str = ""
    factor: float = 1.0
    decreased_at: float | None = None
    throttled_at: float | None = None
    increased_at: float | None = None
    ring: tuple[Bucket, ...] = ()

    # -- AIMD ------------------------------------------------------------------

    def succeeded(self, now: float, successes: int, aimd: Aimd) -> Fleet:
        """Additive increase: credit the time since the last credit, if answers succeeded."""
        if successes <= 0:
            return self
        if self.increased_at is None:
            return replace(self, increased_at=now)
        if now <= self.increased_at:  # still inside the pause that came with a cut
            return self
        credit = min(now - self.increased_at, CREDIT_SECONDS)
        factor = min(1.0, self.factor + aimd.increase_per_second * credit)
        return replace(self, factor=factor, increased_at=now)

    def throttled(self, now: float, pause_until: float, aimd: Aimd) -> Fleet:
        """A 429 at ``now`` (``pause_until``: the pause before it); maybe cut the factor."""
        if now < pause_until:
            return self  # part of the burst that published the running pause
        fleet = replace(self, throttled_at=now)
        if self.decreased_at is not None and now - self.decreased_at < aimd.hold_seconds:
            return fleet
        multiplier = aimd.cut(now, self.throttled_at)
        if multiplier >= 1.0:
            return fleet
        factor = max(aimd.min_factor, self.factor * multiplier)
        return replace(fleet, factor=factor, decreased_at=now)

    # -- counts ----------------------------------------------------------------

    def counted(self, now: float, report: Report | None) -> Fleet:
        """Add ``report`` to the current one-second bucket."""
        if not report:
            return self
        stamp = math.floor(now / BUCKET_SECONDS)
        ring = [b for b in self.ring if stamp - SLOTS < b[0] <= stamp and b[0] != stamp]
        current = next((b for b in self.ring if b[0] == stamp), (stamp, 0, 0, 0))
        ring.append((stamp, current[1] + report.requests, current[2] + report.successes,
                     current[3] + report.throttled))
        return replace(self, ring=tuple(sorted(ring)))

    def stats(self, now: float, pause_until: float, workers: int) -> FleetStats:
        """The window's totals; the window is shorter while the key is new."""
        stamp = math.floor(now / BUCKET_SECONDS)
        live = [b for b in self.ring if stamp - SLOTS < b[0] <= stamp]
        window = WINDOW_SECONDS
        if live:
            oldest = min(b[0] for b in live) * BUCKET_SECONDS
            window = max(BUCKET_SECONDS, min(WINDOW_SECONDS, now - oldest))
        return FleetStats(
            now=now, window_seconds=window,
            requests=sum(b[1] for b in live), successes=sum(b[2] for b in live),
            throttled=sum(b[3] for b in live), rate_factor=self.factor,
            pause_until=pause_until, pause_cause=self.cause if pause_until > now else "",
            workers_active=workers)

    # -- storage ---------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps([self.epoch, self.cause, self.factor, self.decreased_at,
                           self.throttled_at, self.increased_at, [list(b) for b in self.ring]])

    @classmethod
    def from_json(cls, text: str | None) -> Fleet:
        if not text:
            return cls()
        epoch, cause, factor, decreased, throttled, increased, ring = json.loads(text)
        return cls(int(epoch), str(cause), float(factor), decreased, throttled, increased,
                   tuple((int(s), int(r), int(k), int(t)) for s, r, k, t in ring))


def reserve_step(
    now: float, tat: float, until: float, fleet: Fleet, interval: float, horizon: float,
    report: Report | None, aimd: Aimd,
) -> tuple[float, float, Fleet]:
    """Count the report, credit successes, then the GCRA step at ``interval / factor``.

    Returns ``(wait, new_tat, new_fleet)``; ``new_tat == tat`` when not reserved.
    """
    fleet = fleet.counted(now, report)
    fleet = fleet.succeeded(now, report.successes if report else 0, aimd)
    wait, tat = gcra_acquire(now, tat, until, interval / fleet.factor, horizon)
    return wait, tat, fleet


def pause_step(
    now: float, tat: float, until: float, fleet: Fleet, seconds: float, *, cause: str,
    rate_limited: bool, report: Report | None, aimd: Aimd,
) -> tuple[float, float, Fleet]:
    """Publish a pause: ``(new_tat, new_until, new_fleet)``; see ``Gate.pause``."""
    new_tat, new_until = gcra_pause(now, tat, until, seconds)
    if rate_limited:
        cut = fleet.throttled(now, until, aimd)
        if cut.decreased_at != fleet.decreased_at:
            cut = replace(cut, increased_at=new_until)  # probe up only after the pause
        fleet = cut
    if is_new_pause(now, until, new_until):
        fleet = replace(fleet, epoch=fleet.epoch + 1, cause=cause)
    elif new_until > until:
        fleet = replace(fleet, cause=cause)
    return new_tat, new_until, fleet.counted(now, report)


def period_of(now: float, period: Period) -> tuple[str, float]:
    """The UTC period containing ``now``: ``(label, resets_at)``.

    >>> period_of(1_709_251_199.5, "day")      # 2024-02-29T23:59:59.5Z
    ('2024-02-29', 1709251200.0)
    >>> period_of(1_709_251_200.0, "month")
    ('2024-03', 1711929600.0)
    """
    when = datetime.fromtimestamp(now, UTC)
    if period == "month":
        start = when.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        following = start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
        return start.strftime("%Y-%m"), following.timestamp()
    start = when.replace(hour=0, minute=0, second=0, microsecond=0)
    return start.strftime("%Y-%m-%d"), start.timestamp() + 86_400.0


def cap_reached(cap: Cap, usage: Usage) -> QuotaExceededError:
    """The error for a reached cap (the provider name is added by the engine)."""
    reset = datetime.fromtimestamp(usage.resets_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    word = "daily" if cap.period == "day" else "monthly"
    return QuotaExceededError(
        f"the {word} cap of {cap.limit} requests on this key is reached ({usage.used} sent in "
        f"{usage.period} UTC); it resets at {reset}")
