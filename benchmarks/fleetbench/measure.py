"""The figures of one cell, from the limiter's log and the workers' records (pure).

Utilisation is measured the same way for every limiter, on the limiter's side (the
arrival times it logged), over the sender's successes only, in a steady-state window:

    util = (S - 1) / (R' * (t_last - t_start))

The window starts at ``t_start``, the first success at least ``SETTLE_SECONDS`` (1 s)
after the fleet's first success, and ends at its last success ``t_last``; ``S``
successes arrived in it; ``R'`` is the rate the fleet may have: the limit R, less the
other client's share when there is one. A sender spaced exactly ``1/R'`` apart scores
1.0000 whatever the number of rows. The start: the first second of successes is left
out, so that one late first request (a cold process's lazy imports after its gate
check) neither flatters nor penalises the figure; the cold-start delay is reported on
its own (``cold s``), and ``e2e`` is the same ratio over every success from the
instant the workers were launched (what a stopwatch sees). The tail is included: a row
retried late moves ``t_last``. ``late`` is the same ratio over the steady window's
second half (``late_half``): where the fleet settled once it had found the rate, the
figure a long batch lives at (a 20 s cell's three 1 s pauses while it searches are 15 %
of its ``util``, and a few per mille of a day's run). A limiter that lets a burst
through (a calendar window's quota) can give more than 1 over a short span; ``win`` is
then the honest figure for the per-minute window: successes in the complete calendar
windows of the run over their quota.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetbench.spec import CellSpec, target_of
from fleetbench.target import Arrival

__all__ = ["Figures", "inside", "jitter", "late_half", "merged", "overlap", "refusals", "steady",
           "summarise", "utilisation", "why"]

#: A 429 this close to a calendar window's edge (either side) is part of a storm there.
EDGE_SECONDS = 1.0
#: A limiter's refusals: 429, or 503 where it answers so (nginx ``limit_req`` as it ships).
REFUSED = (429, 503)
#: The steady-state window starts this long after the first success.
SETTLE_SECONDS = 1.0


@dataclass
class Figures:
    limiter: str
    gate: str
    k: int
    rows: int
    rate: float
    configured: float
    other_share: float
    variant: str
    util: float = 0.0
    util_e2e: float = 0.0
    util_late: float = 0.0  #: over the steady window's second half (``late_half``)
    util_window: float | None = None
    per_ok: float = 0.0
    sent: int = 0
    successes: int = 0
    lost: int = 0
    failed: int = 0
    in_pause: int = 0
    arrived_in_pause: int = 0
    unused_slots: int = 0
    cold_start: float | None = None
    join_max: float | None = None
    edge_429: int | None = None
    other_sent: int = 0
    other_429: int = 0
    min_allowed: float | None = None
    #: The fleet's pauses (overlapping windows merged), their seconds inside the steady
    #: window, and the rate the fleet was allowed at the end (configured x last factor).
    pauses: int = 0
    paused_seconds: float = 0.0
    end_allowed: float | None = None
    workers_seen: int = 0
    span: float = 0.0
    jitter_ms: float | None = None
    load: float = 0.0
    cut: bool = False  #: stopped at the cell's deadline
    steady_from: float = 0.0  #: the steady window's first success (time.time seconds)
    target: str | None = None
    met: bool | None = None
    misses: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def utilisation(times: Sequence[float], rate: float) -> float:
    """``(S - 1) / (rate * span)`` over sorted success times; 0 for fewer than two.

    >>> utilisation([0.0, 0.1, 0.2, 0.3], 10.0)
    1.0
    >>> round(utilisation([0.0, 0.2, 0.4], 10.0), 4)
    0.5
    """
    if len(times) < 2 or times[-1] <= times[0]:
        return 0.0
    return (len(times) - 1) / (rate * (times[-1] - times[0]))


def steady(times: Sequence[float], settle: float = SETTLE_SECONDS) -> Sequence[float]:
    """The successes of the steady-state window: from the first at least ``settle`` seconds
    after the first success (all of them if that leaves fewer than two).

    >>> steady([0.0, 0.05, 1.0, 1.1, 1.2])
    [1.0, 1.1, 1.2]
    """
    if not times:
        return times
    start = next((i for i, t in enumerate(times) if t >= times[0] + settle - 1e-9), len(times))
    return times[start:] if len(times) - start >= 2 else times


def late_half(times: Sequence[float]) -> Sequence[float]:
    """The successes of the second half of ``times``' span (all of them if that leaves
    fewer than two).

    >>> late_half([0.0, 0.5, 1.0, 1.1, 1.2, 2.0])
    [1.0, 1.1, 1.2, 2.0]
    """
    if len(times) < 2:
        return times
    middle = (times[0] + times[-1]) / 2.0
    late = [t for t in times if t >= middle - 1e-9]
    return late if len(late) >= 2 else times


def inside(times: Iterable[float], windows: Sequence[tuple[float, float]]) -> int:
    """How many ``times`` fall strictly inside one of the ``(start, end)`` windows.

    >>> inside([1.0, 2.5, 4.0], [(2.0, 3.0), (3.5, 4.0)])
    1
    """
    ordered = sorted(windows)
    return sum(1 for t in times if any(start < t < end for start, end in ordered))


def merged(windows: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Overlapping or touching ``(start, end)`` windows merged, in order (each worker
    that saw the same 429s records the fleet's pause it published).

    >>> merged([(2.0, 3.0), (0.0, 1.0), (2.5, 3.5), (3.5, 4.0)])
    [(0.0, 1.0), (2.0, 4.0)]
    """
    out: list[tuple[float, float]] = []
    for start, end in sorted(windows):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def overlap(windows: Iterable[tuple[float, float]], start: float, end: float) -> float:
    """The seconds of ``windows`` (merged) between ``start`` and ``end``.

    >>> overlap([(0.0, 1.0), (2.0, 4.0)], 0.5, 3.0)
    1.5
    """
    return sum(max(0.0, min(e, end) - max(s, start)) for s, e in merged(windows))


def jitter(times: Sequence[float], rate: float) -> float | None:
    """How far a loop scheduled at ``t0 + i / rate`` strays, as its limiter saw it: the
    99th percentile of each arrival's lateness less the smallest, in milliseconds.

    >>> jitter([0.0, 0.1, 0.2, 0.35], 10.0)
    50.0
    """
    if len(times) < 2:
        return None
    late = sorted(t - i / rate for i, t in enumerate(times))
    return round((late[min(len(late) - 1, int(0.99 * len(late)))] - late[0]) * 1000, 3)


def whole_windows(arrivals: Sequence[Arrival], window: float, quota: float) -> float | None:
    """Fleet successes in the complete calendar windows of the run, over their quota.

    The run's windows start with the window of its first arrival (any sender); a window
    is complete when the fleet's last success comes at or after its end.

    >>> a = [Arrival(t, t, 200, "fleet") for t in (0.0, 0.5, 1.0, 1.5, 2.0)]
    >>> whole_windows(a, 1.0, 2.0)
    1.0
    """
    ok = [a.window_time for a in arrivals if a.who == "fleet" and a.status == 200]
    if not ok or not arrivals:
        return None
    first = math.floor(arrivals[0].window_time / window + 1e-6)  # aligned: exactly on an edge
    complete = math.floor(ok[-1] / window) - first
    if complete < 1:
        return None
    end = (first + complete) * window
    counted = sum(1 for t in ok if t < end)
    return counted / (complete * quota)


def edge_429s(arrivals: Sequence[Arrival], window: float) -> int:
    """The fleet's 429s within ``EDGE_SECONDS`` of a calendar window edge."""
    count = 0
    for a in arrivals:
        if a.who == "fleet" and a.status in REFUSED:
            offset = a.window_time % window
            if min(offset, window - offset) <= EDGE_SECONDS:
                count += 1
    return count


def refusals(arrivals: Sequence[Arrival]) -> list[tuple[float, float | None]]:
    """Each 429: seconds since the first arrival, and the gap in ms since the last request
    let through before it (``None``: none yet).

    >>> a = [Arrival(t, t, s, "fleet") for t, s in ((10.0, 200), (10.099, 429), (10.2, 200))]
    >>> [(round(t, 3), round(g, 1)) for t, g in refusals(a)]
    [(0.099, 99.0)]
    """
    out: list[tuple[float, float | None]] = []
    last_ok: float | None = None
    for arrival in arrivals:
        if arrival.status == 200:
            last_ok = arrival.time
        elif arrival.status == 429:
            gap = None if last_ok is None else (arrival.time - last_ok) * 1000.0
            out.append((arrival.time - arrivals[0].time, gap))
    return out


def _fleet(figures: Figures, cell: CellSpec, arrivals: Sequence[Arrival], launched: float) -> None:
    mine = [a for a in arrivals if a.who == ("reference" if cell.reference else "fleet")]
    ok = [a.time for a in mine if a.status == 200]
    figures.sent, figures.successes = len(mine), len(ok)
    figures.per_ok = sum(1 for a in mine if a.status in REFUSED) / max(1, len(ok))
    settled = steady(ok)
    figures.util = utilisation(settled, cell.share_left)
    figures.util_late = utilisation(late_half(settled), cell.share_left)
    if ok:
        figures.span = settled[-1] - settled[0]
        figures.steady_from = settled[0]
        figures.util_e2e = utilisation([launched, *ok[1:]], cell.share_left)
    others = [a for a in arrivals if a.who == "other"]
    figures.other_sent = len(others)
    figures.other_429 = sum(1 for a in others if a.status in REFUSED)
    if cell.limiter.aligned:
        window = cell.limiter.window_seconds
        figures.util_window = whole_windows(arrivals, window, cell.share_left * window)
        figures.edge_429 = edge_429s(mine, window)


def _workers(figures: Figures, workers: Sequence[dict[str, Any]], arrivals: Sequence[Arrival],
             launched: float) -> None:
    figures.lost = sum(w["inputs"] - w["matched"] - w["no_match"] for w in workers)
    figures.failed = sum(w["failed"] for w in workers)
    figures.unused_slots = sum(w["reserved"] - len(w["sends"]) for w in workers)
    windows = [tuple(p) for w in workers for p in w["pauses"]]
    sends = [t for w in workers for t in w["sends"]]
    figures.in_pause = inside(sends, windows)
    figures.pauses = len(merged(windows))
    start = figures.steady_from
    figures.paused_seconds = overlap(windows, start, start + figures.span)
    factors = sorted(f for w in workers for f in w["factors"])
    figures.end_allowed = factors[-1][1] * figures.configured if factors else None
    figures.arrived_in_pause = inside(
        [a.time for a in arrivals if a.who == "fleet"], windows)
    firsts = [(w["sends"][0], w["launched_at"] or launched) for w in workers if w["sends"]]
    if firsts:
        figures.cold_start = min(first for first, _ in firsts) - launched
        figures.join_max = max(first - start for first, start in firsts)
    allowed = [a for w in workers for a in w["allowed"]]
    figures.min_allowed = min(allowed) if allowed else None
    figures.workers_seen = max((w["workers_seen"] for w in workers), default=0)
    figures.errors = [f"worker {w['index']}: {w['error']}" for w in workers if w["error"]]
    figures.cut = any(str(w["error"]).startswith("Cut") for w in workers)
    figures.errors += [f"worker {w['index']}: failed row: {reason}"
                       for w in workers for reason in w["failures"][:1]]


def _judge(figures: Figures, cell: CellSpec) -> None:
    target = target_of(cell)
    if target is None:
        return
    misses = []
    if figures.util < target.util_min:
        misses.append("util")
    if target.per_ok_max is not None and figures.per_ok > target.per_ok_max:
        misses.append("429/ok")
    if target.edge_429_max is not None and (figures.edge_429 or 0) > target.edge_429_max:
        misses.append("edge")
    if figures.lost:
        misses.append("lost")
    if figures.in_pause:
        misses.append("in pause")
    figures.target, figures.met, figures.misses = target.describe(), not misses, misses


def why(f: Figures) -> str:
    """What a cell's utilisation went to, from its figures: the seconds its fleet stood
    paused in the steady window (each 429 pauses it for the Retry-After), how far its
    rate was cut, and where it ended, against the rate it may have.

    >>> f = Figures("fixed-1s", "redis", 16, 200, 10.0, 20.0, 0.0, "cold", pauses=3,
    ...             paused_seconds=2.0, span=20.0, min_allowed=10.0, end_allowed=10.0)
    >>> why(f)
    '3 pauses, 2.0 s of 20.0 (10 %); cut to 10.0/s (1.00 of 10.0), ended at 10.0/s (1.00)'
    """
    left = f.rate * (1.0 - f.other_share)
    parts = [f"{f.pauses} pause{'s' if f.pauses != 1 else ''}, {f.paused_seconds:.1f} s of "
             f"{f.span:.1f} ({100 * f.paused_seconds / f.span if f.span else 0:.0f} %)"]
    if f.min_allowed is not None and f.end_allowed is not None:
        parts.append(f"cut to {f.min_allowed:.1f}/s ({f.min_allowed / left:.2f} of {left:.1f}), "
                     f"ended at {f.end_allowed:.1f}/s ({f.end_allowed / left:.2f})")
    return "; ".join(parts)


def summarise(cell: CellSpec, arrivals: Sequence[Arrival], workers: Sequence[dict[str, Any]],
              launched: float, rows_done: int | None = None) -> Figures:
    """The figures of ``cell``: ``arrivals`` from the limiter, ``workers`` as recorded
    (``WorkerResult`` dicts; none for the reference, whose ``rows_done`` are given),
    ``launched`` the instant the workers were started (warm: released)."""
    figures = Figures(cell.limiter.name, "-" if cell.reference else cell.gate, cell.k, cell.rows,
                      cell.rate, cell.configured, cell.other_share, cell.variant)
    _fleet(figures, cell, arrivals, launched)
    if cell.reference:
        figures.lost = cell.rows - (figures.successes if rows_done is None else rows_done)
        times = [a.time for a in arrivals if a.who == "reference"]
        figures.cold_start = times[0] - launched if times else None
        figures.jitter_ms = jitter(times, cell.share_left)
    else:
        _workers(figures, workers, arrivals, launched)
    _judge(figures, cell)
    figures.load = round(os.getloadavg()[0], 1)
    return figures
