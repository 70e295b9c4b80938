"""The fleet gate protocol: one shared pacing state per (provider host, hashed key).

The state lives on the store's own clock: ``tat`` (GCRA theoretical arrival
time: the earliest next send), ``pause_until`` (a published pause) and its
``epoch`` (how many pauses were published), plus the fleet's adaptive
``rate_factor``, sliding-window counts, worker heartbeats and cap counters.

``reserve`` (and its float shortcut ``acquire``) *reserves* a send slot
atomically in one round trip::

    slot = max(now, tat, pause_until)
    if slot - now <= horizon:  tat = slot + interval / rate_factor     (reserved)
    return slot - now                                                  (seconds to wait)

``pause`` publishes ``pause_until = max(pause_until, now + seconds)`` (never
shorter). A new pause (none was running) *cancels every outstanding
reservation*: ``tat`` restarts at ``pause_until`` (the fleet restarts one
interval apart) and ``epoch`` grows, so a worker that reserved before it must
reserve again (compare ``Reservation.epoch`` with ``GateState.epoch``).
Extending a running pause only pushes ``tat`` to its new end: a burst of 429s
answered at the same moment is one pause, one epoch.

Adaptive pacing (AIMD, see ``Aimd``): a 429 that keeps coming back although the
fleet paces at its allowed rate cuts ``rate_factor`` multiplicatively, at most
once per pause and once per ``hold_seconds``, so one burst of 429s from many
workers at the same moment cuts it once; successful answers raise it again
slowly (additively), never above 1 (the configured rate).

Shared values: a few named strings per key, each with its own time to live on
the store's clock, for strategies written once in Python over the gate (a
fleet-wide circuit breaker: its state, a half-open probe lease)::

    set_value(key, name, value, ttl_seconds=30)            # always stored -> True
    set_value(key, name, value, ttl_seconds=30,
              only_if_absent=True)                         # a lease: True for one claimant
    values(key, prefix="")                                 # {name: value}, live ones only
    delete_value(key, name, only_if=value)                 # release the lease you hold

A fleet stop (``geotoolkit.gate.stop``) is such a value, ``stop``: the provider said the
key's quota is spent. ``reserve``, ``claim`` and ``state`` read it in their own round
trip and return it (``Reservation.stop``, ``Claim.stop``, ``GateState.stop``).

Each call is atomic (one Lua script call, one SQL statement, one ``BEGIN IMMEDIATE``
transaction, one lock). An expired value is absent: ``only_if_absent`` takes it
over, ``values`` does not list it, ``delete_value`` answers False. Values never
cross gate keys. Store calls have a deadline (``timeout_seconds``): a store that
is down, slow or locked raises ``GateError``, never waits forever.

Every gate is ``geotoolkit.gate.strategy.FleetGate`` (the strategy above, written
once in Python) over a ``geotoolkit.gate.primitives.GateStore`` (the atomic
operations that must run on the store's clock).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from geotoolkit.errors import ConfigurationError
from geotoolkit.keys import gate_key  # re-exported: the key of a gate state
from geotoolkit.periods import Period, check_zone

__all__ = [
    "HEARTBEAT_SECONDS",
    "MAX_QUEUE_SPACINGS",
    "MAX_TTL_SECONDS",
    "Aimd",
    "Cap",
    "Claim",
    "FleetStats",
    "Gate",
    "GateState",
    "Period",
    "Report",
    "Reservation",
    "Usage",
    "check_timeout",
    "check_value",
    "gate_key",
    "gcra_acquire",
    "gcra_pause",
    "is_new_pause",
    "publish_pause",
    "pusher",
]


#: A worker that has not reported for this long no longer counts as active.
HEARTBEAT_SECONDS = 10.0
#: A claim asking a wait longer than this many of the fleet's spacings is not a queue of
#: sends (a few per worker at most) but a spacing state that is off (a store whose clock
#: stepped back): the engine does not wait for it, and the gate moves no slots behind it.
MAX_QUEUE_SPACINGS = 100


@dataclass(frozen=True)
class GateState:
    """A snapshot of one key's pacing state, times on the store's clock."""

    now: float
    tat: float
    pause_until: float
    #: How many pauses started so far (0 for a new key).
    epoch: int = 0
    #: The fleet's adaptive factor, read with the state (``None``: the gate keeps none).
    rate_factor: float | None = None
    #: The seconds late sends have pushed the fleet's claims back in all (see
    #: ``Gate.claim``); a count that restarts after an hour without a push.
    pushed: float = 0.0
    #: The key's fleet stop, read in the same round trip (see ``Reservation.stop``).
    stop: str | None = None

    @property
    def pause_remaining(self) -> float:
        return max(0.0, self.pause_until - self.now)


@dataclass(frozen=True)
class Report:
    """Counts a worker observed since its last report, flushed with its next gate call.

    ``requests`` sent, ``successes`` (answers that were not throttled or failed)
    and ``throttled`` answers (429/503). ``at``: when the first of them was seen, on the
    store's clock (``None``: when the report arrives). A worker's next gate call can come
    an interval per worker later (measured: 1.6 s at 10/s with 16 workers); counted then,
    its successes would bunch in the stats window's later buckets, and the fleet's best
    seconds read over the limit.
    """

    requests: int = 0
    successes: int = 0
    throttled: int = 0
    at: float | None = None

    def __post_init__(self) -> None:
        if min(self.requests, self.successes, self.throttled) < 0:
            raise ConfigurationError("report counts must be >= 0")
        if self.at is not None and not math.isfinite(self.at):
            raise ConfigurationError("a report's instant must be finite")

    def __bool__(self) -> bool:
        return bool(self.requests or self.successes or self.throttled)


@dataclass(frozen=True)
class Cap:
    """At most ``limit`` sends per ``period`` ("day" or "month") on a key, the period's
    calendar in the time zone ``tz`` (an IANA name: where the provider's quota resets at
    midnight, e.g. ``"America/Los_Angeles"``; default UTC).

    >>> Cap(25_000, tz="America/Los_Angeles")
    Cap(limit=25000, period='day', tz='America/Los_Angeles')
    """

    limit: int
    period: Period = "day"
    tz: str = "UTC"

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 0:
            raise ConfigurationError(f"a cap must be a whole number >= 0, got {self.limit!r}")
        if self.period not in ("day", "month"):
            raise ConfigurationError(f"cap period must be 'day' or 'month', got {self.period!r}")
        object.__setattr__(self, "tz", check_zone(self.tz))


@dataclass(frozen=True)
class Usage:
    """Sends counted against a cap in one period of ``tz``'s calendar.

    ``period`` is its label, the name of its counter: ``"2025-03-01"`` or ``"2025-03"``
    in UTC; in another zone, with the zone (``"2025-03-01@America/Los_Angeles"``), so
    fleets on one key with caps in different zones never mix their counts. ``resets_at``:
    the period's end (epoch seconds), the next midnight in ``tz``.
    """

    period: str
    used: int
    resets_at: float
    tz: str = "UTC"

    @property
    def label(self) -> str:
        """The period's label without the zone (``"2025-03-01"``, ``"2025-03"``)."""
        return self.period.partition("@")[0]


@dataclass(frozen=True)
class Reservation:
    """The answer of ``reserve``: wait ``wait`` seconds, then send (if ``reserved``).

    ``now`` is the store's clock, so the slot is ``now + wait``; ``epoch`` is the
    pause epoch the slot was reserved in; ``usage`` is set when a cap was given.
    """

    wait: float
    now: float
    reserved: bool
    epoch: int = 0
    rate_factor: float = 1.0
    usage: Usage | None = None
    #: The key's fleet stop, read in the same round trip (``geotoolkit.gate.stop``; the
    #: shared value's text, ``None``: none): the provider said the key's quota is spent.
    stop: str | None = None


@dataclass(frozen=True)
class Claim:
    """The answer of ``claim``: the fleet's last word on a send, as it leaves.

    Send after ``wait`` more seconds (the fleet's previous send went out late, and
    two sends must stay ``interval`` apart as they leave, not only as scheduled),
    unless a pause runs (``pause_until`` after ``now``, the store's clock) or the
    pause ``epoch`` moved since the slot was reserved. The slot is ``now + wait`` on the
    store's clock: ``wait`` is under 0 when the store read its state (``now``) after the
    slot had come (a store that reads its clock once per statement).
    """

    wait: float
    now: float
    pause_until: float
    epoch: int
    #: The fleet's adaptive factor, read in the same round trip (``None``: none kept).
    rate_factor: float | None = None
    #: ``GateState.pushed`` as the claim was spaced: the pushes since, by sends before
    #: this one that left late, hold it back as much (``GateState.pushed`` less this).
    pushed: float = 0.0
    #: 429s on the fleet's first send after a pause, in a row, so far (``AimdState.resumes``):
    #: if this send is the first after ``pause_until`` and is refused too, the pause it
    #: publishes backs off longer (``Gate.pause``'s ``resumed``).
    resumes: int = 0
    #: The key's fleet stop, read in the same round trip (see ``Reservation.stop``): the
    #: send must not go.
    stop: str | None = None

    @property
    def pause_remaining(self) -> float:
        return max(0.0, self.pause_until - self.now)


@dataclass(frozen=True)
class FleetStats:
    """The fleet on one key, as every worker (and the notebook panel) sees it.

    Counts cover the last ``window_seconds`` (a sliding window of one-second
    buckets, shorter while the key is new). ``workers_active`` counts the engine
    runs that reported within ``HEARTBEAT_SECONDS``.
    """

    now: float
    window_seconds: float
    requests: int
    successes: int
    throttled: int
    rate_factor: float = 1.0
    pause_until: float = 0.0
    pause_cause: str = ""
    workers_active: int = 0
    #: The rate the fleet discovered on the key (requests/s), if it ever had to.
    learned_rate: float | None = None

    @property
    def pause_remaining(self) -> float:
        return max(0.0, self.pause_until - self.now)

    @property
    def pace(self) -> float:
        """Requests per second over the window."""
        return self.requests / self.window_seconds if self.window_seconds > 0 else 0.0


@dataclass(frozen=True)
class Aimd:
    """Adaptive pacing: cut by what a 429 shows, then find the ceiling again.

    A throttle *event* is a 429 answered while no pause is active (429s that arrive
    during a pause belong to the burst that published it). An event cuts
    ``rate_factor`` by what it shows: ``n``, the successes since the fleet resumed
    after the previous event (or since it started), less the first (the limiter's burst
    drained during the pause: that answer was free). For the fleet's first 429 before a
    whole second of its answers was counted, ``n`` is 0: a cold start's answers are what
    a limiter lets through before its first period ends, not a pace. On a leaky bucket
    with a burst of one, the algorithm of most API gateways, a pace ``p`` over a limit ``L`` is then
    refused after ``n = 1 / (1 - L/p)`` sends, so the limit is about ``1 - 1/n`` of the pace;
    the cut is that, at least ``below_ceiling`` (a 429 after a long calm: the fleet is
    just over, or its sends jitter: the margin under the limit is learned this way, 2 %
    per such 429, instead of being fixed) and at most ``decrease`` (the deepest single
    cut). Nor does it go below what the fleet sustained: the gate passes the share of
    the pace its successes kept up over the recent window, or over its best two whole
    seconds since the previous event, as a floor (a 429 of jitter after seconds of
    clean answers is not a limit at half the pace). At most one cut
    per ``hold_seconds``. The count reads a limiter that stores nothing; one that refills
    during the pause (a token bucket, a window) lets a burst through after it, and the
    count reads that as a pace a few per cent over the limit. So a cut the count set that
    stood and is refused again at its own level (the count misread) goes at least as deep
    as the whole cycle since the previous event reads: the successes over its time,
    pause included, against the pace, ``below_ceiling`` under it (still at most
    ``decrease``; the floor still holds). Over a cycle such a limiter passes its rate.

    One 429 cannot tell a limit from jitter (a cold fleet's first sends bunch), so
    after the first 429 in ``probe_after_seconds`` the factor at the event is a
    *ceiling*: after the pause and ``climb_after_seconds`` more without a 429,
    successes climb back within ``recover_seconds`` to ``below_ceiling`` under it.
    Another 429 within ``probe_after_seconds`` shows the limit is real: that cut, and
    every one after it, stands (one that comes while climbing back returns the fleet to
    where the climb began, the last pace known to be clean; one at that level, within
    ``SETTLE_SECONDS`` of the cut while the fleet's pace catches up with its factor, cuts
    under it by what it shows). The
    limit then lies between the cut and the lowest factor refused since the last calm
    (the *ceiling*): the fleet climbs toward just under the ceiling in steps, each
    ``step_share`` of the way, ``step_after_seconds`` apart, while it is more than
    ``step_until`` under it (a step refused costs a pause of the fleet: closer, the slow
    probe takes over); a 429 on the way (or at a step just reached, before the next
    climb, or within ``step_after_seconds`` of the last: its sends lag the factor) is a
    new ceiling, and returns the fleet to the step it came from (a search, as TCP CUBIC
    climbs back toward the window where it last lost, instead of staying at a cut that
    thin evidence made deep: measured, a fleet cut to half of what was left stayed there
    for the rest of its run). A climb
    refused above where it began shows that level *held*; a cut that stands can still
    land above it (lifted by what the fleet sustained). Refused there, or at any level
    over the one that held, the fleet goes halfway back to it rather than as deep as the
    count reads: such a 429 comes soon after the pause, when the successes since are
    still on their way to the gate, and with another client on the key its sends bunch
    with the fleet's, so a 429 comes sooner than the overshoot alone would bring it
    (measured: the third 429 of such a run cut the fleet to 0.6 of the share left, and
    it climbed back for the rest of the run). Refused over it again, the fleet goes back
    to it (halves could close in for ever on a level over the limit). A 429 at the level
    that held (a limiter's very limit refuses its jitter) cuts at most to ``held_cut`` of
    it, once: it holds no more, and the next 429 is read by the count again.

    Above that level, once ``probe_after_seconds`` have passed since the last 429,
    every second of successes raises the factor by ``increase_per_second`` of itself
    (a slow probe: quotas grow, other clients leave), never above the configured rate.
    When no rate is configured (the fleet discovers it, see ``RatePolicy``), the
    factor is the rate itself in requests per second; until the first 429 it grows
    by ``growth_per_second`` of itself per second of successes, and that first 429
    cuts by at least ``discover_cut`` (back under the rate where 429s began), and to at
    most the pace the fleet was answered at over its best two seconds, just under it
    (the rate grows ahead of the pace: slots are reserved a few ahead at the pace
    before). The rate refused is then a ceiling the fleet steps toward, as above.
    """

    decrease: float = 0.5
    below_ceiling: float = 0.02
    climb_after_seconds: float = 1.0
    recover_seconds: float = 2.0
    increase_per_second: float = 0.002
    probe_after_seconds: float = 60.0
    growth_per_second: float = 0.25
    discover_cut: float = 0.8
    min_factor: float = 0.05
    hold_seconds: float = 1.0
    #: 30 % of the way, not half: the base a refused climb returns to is often 15-20 %
    #: under the limit (another client took 40 % of the key: base 0.5, limit 0.6) while the
    #: climb was refused far over it (0.76): half the way (0.62) overshot, drew a 429 and left
    #: the fleet at its base for the rest of the run; 30 % (0.57) held (see
    #: docs/fleet-benchmark.md, "Steps toward the ceiling 30 % of the way"). A fleet's
    #: ceiling reads high (its reports lag); where it is exact and the limit near it (one
    #: engine, tests/engine/test_fleet.py), half the way got closer: 0.93 of the limit
    #: over the run against 0.89.
    step_share: float = 0.3
    step_after_seconds: float = 3.0
    #: 30 %, not 25 %: a cut by clear evidence lands near the limit, and the climb that
    #: refuted a doubt is refused some way above it (at 2x, a cut to 0.5 and a climb refused
    #: at 0.64): at 25 % the fleet stepped there and drew another 429 (see
    #: docs/fleet-benchmark.md, "A 429 charged to its send's pace").
    step_until: float = 0.3
    #: Refused at the level that held, a cut to at most this share of it (at a limiter's
    #: very limit its jitter is refused, and the count soon after a pause reads as a cut
    #: to half: measured, a fleet configured at 2x cut to a quarter and climbing back).
    held_cut: float = 0.9

    def __post_init__(self) -> None:
        for name in ("decrease", "discover_cut", "min_factor", "held_cut"):
            if not 0 < getattr(self, name) <= 1:
                raise ConfigurationError(f"Aimd.{name} must be in (0, 1]")
        if not 0 <= self.below_ceiling < 1:
            raise ConfigurationError("Aimd.below_ceiling must be in [0, 1)")
        if not 0 <= self.step_share <= 1:
            raise ConfigurationError("Aimd.step_share must be in [0, 1]")
        if not (math.isfinite(self.step_until) and self.step_until >= 0):
            raise ConfigurationError("Aimd.step_until must be finite and >= 0")
        for name in ("increase_per_second", "growth_per_second", "hold_seconds",
                     "climb_after_seconds", "recover_seconds", "probe_after_seconds",
                     "step_after_seconds"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigurationError(f"Aimd.{name} must be finite and >= 0")

    def cut(self, sends: float) -> float:
        """The multiplier for an event after ``sends`` successes since the fleet resumed.

        >>> a = Aimd()
        >>> a.cut(0), a.cut(2), a.cut(5), a.cut(20), a.cut(1000)
        (0.5, 0.5, 0.8, 0.95, 0.98)
        """
        evidence = 1.0 - 1.0 / sends if sends > 1.0 else 0.0
        return min(1.0 - self.below_ceiling, max(self.decrease, evidence))


@runtime_checkable
class Gate(Protocol):
    """A shared pacing state. Implementations: Memory, SQLite, Redis, Postgres gates.

    Methods are synchronous and thread-safe; ``blocking`` tells the engine whether
    a call does I/O (then it runs in a worker thread) or is pure memory.
    """

    backend: str
    blocking: bool

    def reserve(
        self,
        key: str,
        interval: float,
        horizon: float = 60.0,
        *,
        report: Report | None = None,
        cap: Cap | None = None,
        cost: int = 1,
        spacing: float = 0.0,
        discover: bool = False,
    ) -> Reservation:
        """Reserve the next send slot, paced at ``interval / rate_factor + spacing``
        (while the factor climbs back after a doubtful cut, at the level it climbs back to:
        each send's ``claim`` spaces it at the factor itself; see ``Aimd``).

        ``spacing`` is this worker's own guard after its slot (the jitter of its
        sends); with ``discover`` the fleet has no configured rate: ``interval`` is
        one second and the factor the rate it has discovered (see ``Aimd``).

        A wait longer than ``horizon`` is returned without a reservation: sleep,
        then call again. ``report`` is counted in the same round trip (its
        successes drive the additive increase). With ``cap``, the period's
        counter grows by ``cost`` with each reservation (a batch the provider
        counts per query costs that many), atomically; a cap already reached
        raises ``QuotaExceededError`` without reserving.
        """
        ...

    def acquire(self, key: str, interval: float, horizon: float = 60.0) -> float:
        """``reserve(...).wait``: the seconds to wait before sending."""
        ...

    def claim(self, key: str, interval: float) -> Claim:
        """A reserved slot's send, as it leaves: space it ``interval`` from the fleet's
        previous *actual* send, and read the pause, in one round trip.

        Slots are scheduled ``interval`` apart, but a send can leave late (a starved
        process, a slow connection) and land next to the following one, which a
        limiter without burst refuses. Claims are spaced on the store's clock at the
        moment each send leaves, so lateness delays the next send instead.

        A gate may also offer ``push(key, seconds)``: a send left ``seconds`` late, space
        the fleet's next claim that much later, and add them to the count of seconds pushed
        (``pushed``, read with each claim and state): a send claimed before the push,
        spaced from the late one's due instant, reads how far the claims after it moved
        when it checks the pause again before it leaves, and leaves that much later. The
        engine claims ``seconds`` instead on a gate without ``push``.
        """
        ...

    def pause(
        self,
        key: str,
        seconds: float,
        *,
        cause: str = "",
        rate_limited: bool = False,
        report: Report | None = None,
        factor: float | None = None,
        resumed: bool = False,
    ) -> float:
        """Publish a fleet-wide pause (never shortening one); return its remaining seconds.

        ``cause`` is shown to every worker while the pause lasts. ``rate_limited``
        (the pause answers a 429) feeds adaptive pacing; ``factor`` is then the adaptive
        factor the refused send was spaced at, if known (the fleet's may have moved on
        since its slot was reserved: the refused pace is the one the limit lies under).
        ``resumed``: the refused send was the fleet's first after a pause; it says the
        pause was not enough, nothing of the pace: no cut, one more in a row
        (``Claim.resumes``; see ``AimdState.refused_resume``).
        """
        ...

    def state(self, key: str) -> GateState:
        """Read the key's pacing state without changing it."""
        ...

    def record(
        self, key: str, report: Report, *, worker: str | None = None, leaving: bool = False
    ) -> FleetStats:
        """Count ``report``, refresh (or, ``leaving``, drop) ``worker``'s heartbeat; return the stats."""
        ...

    def stats(self, key: str) -> FleetStats:
        """Read the fleet's stats without changing them."""
        ...

    def usage(self, key: str, period: Period = "day", tz: str = "UTC") -> Usage:
        """Sends counted against caps in the current ``period`` of ``tz``'s calendar."""
        ...

    def set_value(self, key: str, name: str, value: str, *, ttl_seconds: float,
                  only_if_absent: bool = False) -> bool:
        """Store ``value`` under (key, name) for ``ttl_seconds`` (store clock).

        With ``only_if_absent``, store it only if no live value exists (a
        lease/claim); return whether it was stored.
        """
        ...

    def values(self, key: str, prefix: str = "") -> dict[str, str]:
        """The live (unexpired) values of ``key`` whose names start with ``prefix``."""
        ...

    def delete_value(self, key: str, name: str, *, only_if: str | None = None) -> bool:
        """Delete (key, name); with ``only_if``, only if its value equals it (release a lease).

        Returns whether a live value was deleted.
        """
        ...

    def close(self) -> None: ...


#: The longest a shared value lives (ten years): longer times to live are cut to it.
MAX_TTL_SECONDS = 10 * 365 * 86_400.0


def check_value(name: str, value: str, ttl_seconds: float) -> float:
    """Validate ``set_value``'s arguments; return the time to live (cut to ``MAX_TTL_SECONDS``).

    >>> check_value("breaker:state", "open", 30), check_value("x", "y", 1e300) == MAX_TTL_SECONDS
    (30.0, True)
    """
    if not (isinstance(name, str) and isinstance(value, str)):
        raise ConfigurationError("a shared value's name and value must be strings")
    return min(_positive("ttl_seconds", ttl_seconds), MAX_TTL_SECONDS)


def check_timeout(timeout_seconds: float) -> float:
    """A store call's deadline, validated: finite and > 0.

    >>> check_timeout(0.3)
    0.3
    """
    return _positive("timeout_seconds", timeout_seconds)


def _positive(name: str, seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not (
            math.isfinite(seconds) and seconds > 0):
        raise ConfigurationError(f"{name} must be finite and > 0, got {seconds!r}")
    return float(seconds)


def _check(interval: float, seconds: float = 0.0) -> None:
    if not (math.isfinite(interval) and interval >= 0 and math.isfinite(seconds)):
        raise ConfigurationError("gate intervals and pauses must be finite and >= 0")


def gcra_acquire(
    now: float, tat: float, pause_until: float, interval: float, horizon: float
) -> tuple[float, float]:
    """Pure GCRA step: return ``(wait, new_tat)``; ``new_tat == tat`` when not reserved."""
    _check(interval)
    slot = max(now, tat, pause_until)
    wait = slot - now
    if wait > horizon:
        return wait, tat
    return wait, slot + interval


def gcra_pause(now: float, tat: float, pause_until: float, seconds: float) -> tuple[float, float]:
    """Pure pause step: return ``(new_tat, new_pause_until)``; never shortens a pause.

    A new pause (none was running) cancels the reservations: ``tat`` restarts at
    its end. Extending a running pause pushes ``tat`` to at least its new end
    (slots reserved during the pause keep their spacing); a shorter one changes
    nothing.
    """
    _check(0.0, seconds)
    until = max(pause_until, now + max(seconds, 0.0))
    if until <= pause_until:
        return tat, pause_until
    if now >= pause_until:
        return until, until
    return max(tat, until), until


def is_new_pause(now: float, pause_until: float, new_pause_until: float) -> bool:
    """A pause published while none was running: it starts a new epoch."""
    return new_pause_until > pause_until and now >= pause_until


def pusher(gate: Any) -> Callable[[str, float], object]:
    """How to push ``gate``'s next claim back by some seconds (a send left that late): its
    ``push``, or, on a gate without one, a claim of those seconds.

    >>> class Claims:
    ...     def claim(self, key, interval): return f"claimed {interval}"
    >>> pusher(Claims())("k", 0.003)
    'claimed 0.003'
    """
    push: Callable[[str, float], object] | None = getattr(gate, "push", None)
    return push if push is not None else gate.claim


def publish_pause(gate: Any, key: str, seconds: float, *, factor: float | None = None,
                  resumed: bool = False, **kwargs: Any) -> float:
    """``gate.pause(key, seconds, **kwargs)``, with the refused send's ``factor`` and
    ``resumed`` only on a gate whose ``pause`` takes them: one written before they were
    added would fail on the keyword, and a 429 must not end the batch.

    >>> class Old:
    ...     def pause(self, key, seconds, *, cause="", rate_limited=False, report=None):
    ...         return seconds
    >>> publish_pause(Old(), "k", 1.5, cause="429", rate_limited=True, factor=0.6, resumed=True)
    1.5
    """
    optional = {name: value for name, value in (("factor", factor), ("resumed", resumed))
                if value is not None and value is not False}
    if optional:
        try:
            parameters = list(inspect.signature(gate.pause).parameters.values())
        except (TypeError, ValueError):  # no signature to read (a builtin): keep the keywords
            parameters = None
        for name, value in optional.items():
            if parameters is None or any(p.name == name or p.kind is p.VAR_KEYWORD
                                         for p in parameters):
                kwargs[name] = value
    result: float = gate.pause(key, seconds, **kwargs)
    return result
