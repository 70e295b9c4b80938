"""The pacer: when one worker may send, on the fleet's shared gate.

A :class:`Pacer` serves one engine run (one worker of the fleet) on one gate key.
It reserves send slots on the gate and waits for them on this worker's clock (the
slot is on the store's clock: :class:`~geotoolkit.engine.timing.SlotTiming` converts
it, learns the usual gate round trip and how late this worker usually fires), checks
the pause epoch right before every send, publishes pauses, counts what the worker
saw (flushed with its next gate call) and samples the fleet for the progress
display. The engine keeps the batch, the retries and the outcomes.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import math
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar

from geotoolkit.clock import Clock
from geotoolkit.engine.timing import Counts, SlotTiming
from geotoolkit.errors import GeotoolkitError, QuotaExceededError, RateLimitError
from geotoolkit.gate.base import (
    HEARTBEAT_SECONDS,
    MAX_QUEUE_SPACINGS,
    Cap,
    Claim,
    FleetStats,
    Gate,
    GateState,
    Reservation,
    publish_pause,
    pusher,
)
from geotoolkit.gate.stop import STOP_VALUE, FleetStop
from geotoolkit.keys import is_keyed
from geotoolkit.policy import RatePolicy
from geotoolkit.progress import Event, FleetSampled, Throttled

__all__ = ["Departure", "Pacer", "Stopped", "call_gate"]

log = logging.getLogger("geotoolkit.engine")

#: Waits longer than this are cut in steps (samples and heartbeats go on meanwhile).
LONG_WAIT_SECONDS = HEARTBEAT_SECONDS / 4
#: A wait for a slot shorter than this is not used to sample the fleet.
_SAMPLE_MARGIN_SECONDS = 0.1

T = TypeVar("T")


class _Stamped(Protocol):
    @property
    def now(self) -> float: ...


R = TypeVar("R", bound=_Stamped)


class Stopped(Exception):
    """Internal: the run is stopping (another worker hit an error that ends the batch)."""


async def call_gate(blocking: bool, fn: Callable[..., T], *args: Any) -> T:
    """Call a gate or store method: in a worker thread when it does I/O."""
    if blocking:
        return await asyncio.to_thread(fn, *args)
    return fn(*args)


class Departure:
    """One send's last steps, as httpx runs them (see ``Engine._arm``).

    ``check`` is the ``BEFORE_SEND`` check that ``http.send`` asks right before the
    request enters the client: the claim (``Pacer.clearance``). ``trace`` is
    httpcore's ``trace`` extension: when the request's headers have left later than
    ``Pacer.departure_allowance`` after they were due (a first connection is opened in
    between, a starved process resumes late), the fleet's next claim is pushed back by
    that lateness, so that it does not land next to this one.
    """

    def __init__(self, pacer: Pacer, checked_at: float, epoch: int, cost: int) -> None:
        self.pacer, self.checked_at, self.epoch, self.cost = pacer, checked_at, epoch, cost
        self.due: float | None = None
        self.guard = 0.0
        #: The fleet's factor this send was spaced at (None: not checked yet).
        self.factor: float | None = None
        #: This send is the fleet's first after a pause: the 429s on such sends in a row
        #: before it (``Claim.resumes``); ``None``: it is not.
        self.resumes: int | None = None

    async def check(self) -> bool:
        self.guard = self.pacer.departure_guard()
        self.factor = self.pacer.factor
        self.due = await self.pacer.clearance(self.checked_at, self.epoch, self.cost, self.guard,
                                              resumed=self._resumed)
        return self.due is not None

    def _resumed(self, resumes: int) -> None:
        self.resumes = resumes

    async def trace(self, name: str, info: Mapping[str, Any]) -> None:
        if self.due is None or not name.endswith("send_request_headers.complete"):
            return
        # All of it: the guard after a first send is for what follows its headers (the
        # server accepting the new connection), not for what held them back.
        late = self.pacer.late_over_usual(self.pacer.clock.now() - self.due)
        self.due = None
        if late > self.pacer.departure_allowance(self.cost):
            # By all of it, at most one spacing: later than that, the next send has claimed
            # already (a suspended laptop must not hold the fleet back for the hours it
            # slept). Sends claimed before the push whose claims wait (more than
            # ``recheck_after_seconds``) read it when they check again before they leave.
            self.pacer.push(min(late, self.pacer.spacing(self.cost)))


class Pacer:
    """Send slots for one worker on one gate key; see the module docstring.

    Parameters
    ----------
    gate, key
        The fleet gate and this provider's key on it.
    rate
        The fleet's rate policy (its interval is the spacing of the whole fleet).
    clock
        This worker's clock (injected in tests).
    cap
        A daily or monthly cap counted on the gate, if any.
    max_wait_seconds
        Non-blocking mode: a wait longer than this raises ``RateLimitError`` (and a slot
        further away is not reserved: it would push the rerun's back).
    host, provider
        Named in causes and errors.
    emit
        Receives ``Throttled`` and ``FleetSampled`` events.
    stopping
        Tells the pacer the run is ending (it raises ``Stopped`` instead of waiting).
    """

    #: A worker's first send opens its first connection after its claim: its first slot
    #: and its first claim are followed by this much more spacing (at most
    #: ``first_send_interval_share`` of the interval), so the next worker's send does not
    #: land too close behind it. What the connection costs up to the request's headers (a
    #: slow connect, a TLS handshake) is timed with the departure and pushes the next claim
    #: (``late_departure_seconds``) by all of it; the guard covers what follows the
    #: headers, and is sized to that. Measured on loopback (fleet benchmark, 16 cold
    #: workers): a worker's first request reached the limiter 2.2 ms (median; 3.8 ms p90)
    #: after it entered the transport, its later ones 0.8 ms, and a first request held back
    #: by its connection reached it 1.6-4.7 ms after its headers left. The guard (8 ms then)
    #: used to be subtracted from the push: a connection slower than it left nothing for
    #: what follows, and the next worker's send reached a limiter without burst 97.3-99.7 ms
    #: after it at 101 ms spacing (four 429s in the dumps of 2026-12-03).
    first_send_seconds = 0.005
    first_send_interval_share = 0.25
    #: A reserved slot fired this much later than usual is given up (see ``slot``)...
    late_send_seconds = 0.015
    #: ... plus this share of the interval between two sends of the fleet, up to 10 ms more.
    #: Giving up a slot costs one interval; the longer it is, the more lateness is worth
    #: the risk of a 429 (which costs a pause of the whole fleet).
    late_send_interval_share = 0.05
    #: A send checked longer ago than this before it enters the transport is checked again
    #: (a worker starved of CPU between its check and its send must not send into a pause).
    recheck_after_seconds = 0.01
    #: ... and so is a claimed send that goes more than this after it was due (its claim's
    #: reply, or the wait after it, came late: a starved process, a loop busy with another
    #: answer): its claim's check is then older than it planned. Measured in the fleet
    #: benchmark: a cold worker claimed with 7 ms to wait, woke 9 ms late and sent 10 ms into
    #: a pause another worker had published meanwhile; one whose claim said "now" resumed
    #: 17 ms later, after its other request's 429 had paused the fleet.
    overslept_seconds = 0.005
    #: While the fleet's sends are at least this far apart, a worker holds one reservation
    #: at a time (its concurrent requests take turns for slots; their exchanges overlap).
    #: Reservations are spaced at the pace they were made at, so a queue of them delays a
    #: rise of the pace by its length: with one each, by at most one interval per worker.
    one_slot_min_interval = 0.005
    #: A claimed send whose headers leave later than it was due (its first connection, a
    #: starved process, a sleep that overran) *than this worker's sends usually do* (the
    #: least of its last ``departures_remembered``, at most ``usual_departure_seconds``:
    #: every send pays the round trip of its claim and the client's own work, and two sends
    #: equally late are still an interval apart) by more than half the safety margin's
    #: share of the spacing (``departure_margin_share``: 0.5 ms at 10/s, the other half left
    #: for the network between two sends; at least
    #: ``strict_departure_seconds``) pushes the fleet's next claim back by all of it (a
    #: limiter without burst refuses a send that lands less than its interval after a late
    #: one; with the clock's sleeps on time, 0.5-1.1 % of sends were over 1 ms late, so the
    #: pushes cost little), and smaller lateness is let go. Until the run is ``strict`` (the
    #: fleet's factor fell under its configured rate: a 429, the limiter may be stricter
    #: than the sends' jitter; or the rate is unknown), at most ``late_departure_seconds``
    #: is let go even where the margin is wider (a slow rate's). (Measured: 2 ms let go at
    #: 10/s, twice the margin, sends 1.3-1.9 ms late pushed nothing and the next ones, on
    #: time, reached a limiter without burst 98.9-99.8 ms after them: five 429s; the margin
    #: instead cost a limiter with a burst 0.07 % of its rate. Strict from the start, on a
    #: noisier machine, cost such limiters 2 % when a sleep ended 0.3-2 ms late, and
    #: 0.4-0.7 % with sleeps on time; see docs/fleet-benchmark.md.)
    late_departure_seconds = 0.002
    #: The share of the safety margin a late send may spend before it pushes the next one:
    #: the rest is left for the network between the two sends (see above). Measured (fleet
    #: benchmark, K = 16, no burst): with all of it let go, a send 0.8 ms late pushed
    #: nothing, the next left 100.2 ms after it, and a transit 0.4 ms shorter than the late
    #: one's reached the limiter 99.8 ms after it: 429s in 4 of 5 runs, 2 of 9 with half;
    #: the pushes cost a limiter with a burst 0.2 % of its rate (0.985 against 0.987).
    departure_margin_share = 0.5
    strict_departure_seconds = 0.0002
    departures_remembered = 10
    #: What every send pays counts up to this much as a worker's usual lateness. Measured
    #: (fleet benchmark, cold workers): the least lateness of each worker over a whole run
    #: was 0.5-1.7 ms, but a cold worker's first sends all leave late (its first
    #: connections, its process not yet warm), and the least of them read 2.8-16 ms: sends
    #: 3.1, 4.5 and 10.7 ms late then pushed nothing, and the next worker's, on time,
    #: reached a limiter without burst 98.4-99.9 ms after them at 101 ms spacing. (On a
    #: machine where every send pays more, the excess is pushed each time, once the run is
    #: strict: the fleet is that much slower, and no send lands closer than its interval.)
    usual_departure_seconds = 0.001

    def __init__(self, gate: Gate, key: str, rate: RatePolicy, *, clock: Clock,
                 cap: Cap | None = None, max_wait_seconds: float | None = None,
                 host: str = "", provider: str = "", sample_seconds: float = 0.5,
                 emit: Callable[[Event], None] = lambda event: None,
                 stopping: Callable[[], bool] = lambda: False) -> None:
        self.gate, self.key, self.rate, self.clock = gate, key, rate, clock
        self.cap, self.max_wait_seconds = cap, max_wait_seconds
        self.host, self.provider = host, provider
        self.sample_seconds, self.emit, self._stopping = sample_seconds, emit, stopping
        #: What this worker saw since its last gate call (flushed with the next one).
        self.counts = Counts()
        #: This run's id on the gate (random, new for every run).
        self.worker_id = ""
        self._timing = SlotTiming()
        self._factor = 1.0  # the adaptive factor (or discovered rate) the gate said last
        self._sent = 0  # slots this worker has used
        self._departed = False  # a send of this worker's has been cleared to leave
        self._strict = False  # the fleet's factor fell under the configured rate this run
        self._sampling = False
        self._one_slot: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._pushes: set[asyncio.Task[None]] = set()
        #: Pauses this worker began to publish, and those whose publishing returned: a
        #: send whose check started while one was on its way may not have seen it.
        self._pauses_begun = self._pauses_published = 0
        self._departures: collections.deque[float] = collections.deque(
            maxlen=self.departures_remembered)  # how late this worker's last sends left
        self._next_sample = self._last_beat = -math.inf

    # -- slots ---------------------------------------------------------------------------

    async def slot(self, cost: int = 1) -> int:
        """Reserve a send slot on the gate and wait for it; return its pause epoch.

        One reservation at a time per worker (see ``one_slot_min_interval``).
        """
        if self.spacing(cost) < self.one_slot_min_interval:
            return await self._slot(cost)
        loop = asyncio.get_running_loop()
        if self._one_slot is None or self._one_slot[0] is not loop:
            self._one_slot = (loop, asyncio.Lock())
        async with self._one_slot[1]:
            return await self._slot(cost)

    async def _slot(self, cost: int = 1) -> int:
        """Reserve a send slot on the gate and wait for it; return its pause epoch.

        ``cost`` slots are taken at once (a batch that the provider counts per query):
        the fleet's next send is ``cost`` intervals later.

        After waiting, the reservation stands only if no pause was published meanwhile
        (a pause cancels every outstanding reservation: same epoch) and the running one
        (the slot was reserved in it, at its end) is over by the slot (see ``_clear``).
        That check starts one usual gate round trip before the slot, so the send is not
        late by the round trip; a check back before the slot is repeated at the slot, so a
        send always follows its check at once and never goes before its slot. A slot fired
        later than this worker's usual lateness by more than the tolerance would land next
        to the following slots and break the fleet's spacing (a stalled process, a slow
        gate call), so it is given up, once per request, and a new one reserved.
        """
        given_up = False
        while True:
            if self._stopping():
                raise Stopped
            slot = await self._timed(functools.partial(self._reserve, cost))
            if slot.wait <= 0:
                self._sent += 1
                return slot.epoch
            self.check_budget(slot.wait)
            deadline = self._timing.local(slot.now + slot.wait)
            # Sample only when there is time for it: never between a slot and its send.
            await self.sleep_until(deadline - self._timing.lead,
                                   sample=slot.wait > _SAMPLE_MARGIN_SECONDS)
            if not slot.reserved:
                continue  # nothing was reserved: ask again
            state = await self._timed(self.state)
            if self.clock.now() < deadline:  # back before the slot: check again at it, so
                await self.clock.sleep(deadline - self.clock.now())  # the send follows a check
                state = await self._timed(self.state)  # at once (a pause may come meanwhile)
            if self._cleared(state, slot.epoch, self._slot_instant(slot)) is None:
                continue
            on_time = self._timing.on_time(self.clock.now() - deadline, self._tolerance)
            if given_up or on_time:
                self._sent += 1
                return slot.epoch
            given_up = True

    def store_now(self) -> float:
        """The store's clock now, as far as this worker's gate calls tell (shared times)."""
        return self.clock.now() + self._timing.sync.offset

    @property
    def _tolerance(self) -> float:
        """How much later than usual a send may fire before its slot is given up."""
        extra = min(0.01, self.late_send_interval_share * self.spacing())
        return self.late_send_seconds + extra

    @property
    def interval(self) -> float:
        """The fleet's configured spacing; when discovering, one second (the factor is the
        rate) less the safety margin."""
        if self.rate.discovering:
            return 1.0 / (1.0 - self.rate.safety_margin)
        return self.rate.interval

    def _first_send_guard(self, first: bool) -> float:
        """Extra spacing after this worker's next slot or claim: after its ``first`` only
        (its first connection), and none when the policy asks for no margin
        (``safety_margin=0``)."""
        if not first or (self.rate.safety_margin == 0 and not self.rate.discovering):
            return 0.0
        return min(self.first_send_seconds,
                   self.first_send_interval_share * self.spacing())

    def departure_guard(self) -> float:
        """Extra spacing after this worker's next claim: its first send's guard, until one
        has left."""
        return self._first_send_guard(not self._departed)

    async def clearance(self, checked_at: float, epoch: int, cost: int = 1,
                        guard: float = 0.0, *,
                        resumed: Callable[[int], None] | None = None) -> float | None:
        """Right before a send enters the client: still clear to send (and when)? The
        instant it was due to leave (on this worker's clock), or ``None``: not at all.
        A send cleared is counted then, not before: the counts may be flushed while it
        waits here, and one voided here was never sent.

        Paced, the send is *claimed* on the gate (``Gate.claim``) in one round trip: it
        leaves ``interval`` after the fleet's previous send as it actually left (a send
        that left late holds the next one back by the few milliseconds it asks, instead
        of landing next to it, which a limiter without burst refuses), unless a pause (or
        a new epoch) was published since its slot's check (at ``checked_at``, in
        ``epoch``): then no. ``guard``: more spacing after this send (see
        ``departure_guard``). A claim that waits longer than ``recheck_after_seconds``
        checks the pause once more, one usual round trip before it is due, and with it
        the seconds the fleet's claims were pushed back since its own (``GateState.pushed``
        against ``Claim.pushed``): a send before it left late after it was claimed, so it
        leaves that much later too, as the sends claimed after the push do. One whose wait
        goes late (by ``overslept_seconds``, its check older than ``recheck_after_seconds``:
        its reply came late, or its wait overran) checks it again. Unpaced (or on
        a gate without ``claim``), the gate is asked
        again only when the send was held up for longer than ``recheck_after_seconds``
        (a starved process, a busy connection pool).

        ``resumed`` is called with ``Claim.resumes`` when the claim shows this send to be
        the fleet's first after a pause (due less than half a spacing after its end).
        """
        due = await self._due(checked_at, epoch, cost, guard, resumed)
        if due is not None:
            self._departed = True
            self.count(requests=1)
        return due

    def count(self, *, requests: int = 0, successes: int = 0, throttled: int = 0) -> None:
        """Count what this worker saw, stamped with when (on the store's clock); reported
        with its next gate call."""
        self.counts.add(at=self.store_now(), requests=requests,
                        successes=successes, throttled=throttled)

    async def _due(self, checked_at: float, epoch: int, cost: int, guard: float,
                   resumed: Callable[[int], None] | None = None) -> float | None:
        """``clearance``, before it is counted. Voided too when this worker began to publish
        a pause (another of its requests was refused) that the send's last check may not
        have seen: one begun since the check started, or still on its way to the store then
        (measured: a claim answered "clear" 3 ms before the pause of the worker's own 429
        landed, and its send left 2 ms after that pause was published)."""
        published = self._pauses_published
        if self._pauses_begun > published:
            return None  # on its way now: no round trip to learn it
        due = await self._last_check(checked_at, epoch, cost, guard, resumed)
        return None if self._pauses_begun > published else due

    async def _last_check(self, checked_at: float, epoch: int, cost: int, guard: float,
                          resumed: Callable[[int], None] | None = None) -> float | None:
        """``_due``, on what the gate said."""
        claim = self._claim()
        if claim is None:
            return self.clock.now() if await self._still_clear(checked_at, epoch) else None
        claimed = await self._timed(functools.partial(
            call_gate, self.gate.blocking, claim, self.key, self.spacing(cost) + guard))
        wait = max(0.0, claimed.wait)
        if wait > self._claim_wait_limit(cost):
            # Not a queue of sends (a few intervals at most): the spacing state is off (a
            # store whose clock stepped back). The slot was spaced already: go on it.
            log.warning("the gate spaces the next send %.0f s ahead, more than any queue of "
                        "sends: sending on its slot (has the store's clock stepped back?)", wait)
            wait = 0.0
        # Due when the store said (a reply that came back late, a sleep that overran: the
        # send is late by as much, and the next one is pushed back by it). A slot the store
        # had already reached when it read the state (``wait`` under 0) was due then.
        instant = claimed.now + min(wait, claimed.wait)  # on the store's clock
        due = self._timing.local(instant)
        self._learn(claimed.rate_factor)
        if not self._clear(claimed, epoch, instant):
            return None
        after = instant - claimed.pause_until  # a key never paused is in epoch 0
        if resumed is not None and claimed.epoch > 0 and 0.0 <= after < self.spacing(cost) / 2:
            resumed(claimed.resumes)  # the first send after a pause: the next is a spacing on
        checked = self._timing.local(claimed.now)  # when the store read the pause
        shift = 0.0
        if wait > self.recheck_after_seconds:  # a long wait: check the pause again,
            await self.clock.sleep(max(0.0, due - self._timing.lead - self.clock.now()))
            state = await self._timed(self.state)  # a round trip before it is due, so that
            if self._cleared(state, epoch, instant) is None:  # the send is not late by it
                return None
            checked = self.clock.now()
            # Sends before this one that left late since its claim: as far behind as the
            # claims after them (at most one spacing in all; none if the count restarted).
            shift = min(max(0.0, state.pushed - claimed.pushed), self.spacing(cost))
            due += shift
        if wait > 0:
            await self.clock.sleep(max(0.0, due - self.clock.now()))
        if shift > 0 or self.clock.now() - due > self.overslept_seconds:
            # Held back, or late (the reply, or the sleep): its check may be old by now.
            return due if await self._still_clear(checked, epoch) else None
        return due

    async def _still_clear(self, checked: float, epoch: int) -> bool:
        """A send last checked at ``checked`` (this worker's clock) is still clear: at once
        if that is at most ``recheck_after_seconds`` ago, else asked of the gate again."""
        if self.clock.now() - checked <= self.recheck_after_seconds:
            return True
        return self._cleared(await self._timed(self.state), epoch) is not None

    def _claim_wait_limit(self, cost: int = 1) -> float:
        """The longest wait a claim may ask: the slot's horizon, or a hundred spacings."""
        return max(self.rate.horizon_seconds, MAX_QUEUE_SPACINGS * self.spacing(cost))

    def _cleared(self, state: GateState, epoch: int, at: float | None = None) -> float | None:
        """A state check before a send (due ``at``, see ``_clear``): clear from now, or
        ``None``."""
        self._learn(state.rate_factor)
        return self.clock.now() if self._clear(state, epoch, at) else None

    def _learn(self, factor: float | None) -> None:
        """The fleet's factor as the gate said last (with a check or a claim): the next
        claims space sends at it at once, not one reservation of this worker later."""
        if factor is not None and factor > 0:
            self._factor = factor
            self._strict = self._strict or factor < 1.0 - 1e-9

    @property
    def factor(self) -> float:
        """The fleet's adaptive factor (discovering: its rate) as the gate said last."""
        return self._factor

    @property
    def strict(self) -> bool:
        """Whether a send may leave as late as the whole safety margin absorbs, even past
        ``late_departure_seconds`` (see there): after a 429, or discovering the rate."""
        return self._strict or self.rate.discovering

    def departure_allowance(self, cost: int = 1) -> float:
        """How late a send may leave before it pushes the next one (see
        ``late_departure_seconds``)."""
        margin = max(self.strict_departure_seconds,
                     self.spacing(cost) * self.rate.safety_margin * self.departure_margin_share)
        if not self.strict:
            return min(self.late_departure_seconds, margin)
        return margin

    def _claim(self) -> Callable[[str, float], Claim] | None:
        """The gate's ``claim``, when sends are paced and the gate has one."""
        claim: Callable[[str, float], Claim] | None = getattr(self.gate, "claim", None)
        if self.rate.interval <= 0 and not self.rate.discovering:
            return None
        return claim

    def spacing(self, cost: int = 1) -> float:
        """The fleet's spacing after a send of ``cost`` slots, at the factor read last."""
        return self.interval * cost / self._factor

    def departure(self, checked_at: float, epoch: int, cost: int = 1) -> Departure:
        """The last steps of one send whose slot was checked at ``checked_at`` in ``epoch``."""
        return Departure(self, checked_at, epoch, cost)

    def late_over_usual(self, late: float) -> float:
        """A send's headers left ``late`` seconds after it was due: how much later than
        this worker's sends usually leave (the least of the last few, at most
        ``usual_departure_seconds``; 0 for the first)."""
        usual = min(min(self._departures, default=0.0), self.usual_departure_seconds)
        self._departures.append(max(0.0, late))
        return max(0.0, late - usual)

    def push(self, seconds: float) -> None:
        """A claimed send left ``seconds`` late: push the fleet's next claim back as much
        (in the background: this send is late enough; errors are only logged). With the
        gate's ``push``, or a claim of ``seconds`` on a gate without one."""
        if self._claim() is None:
            return
        gate_push = pusher(self.gate)

        async def push() -> None:
            try:
                await call_gate(self.gate.blocking, gate_push, self.key, seconds)
            except GeotoolkitError as exc:
                log.debug("could not push the fleet's next send back: %s", exc)

        task = asyncio.ensure_future(push())
        self._pushes.add(task)
        task.add_done_callback(self._pushes.discard)

    @staticmethod
    def _clear(state: GateState | Claim, epoch: int, at: float | None = None) -> bool:
        """No pause runs, and none was published since ``epoch``. ``at``: the instant the
        send is due (the store's clock), when it is later than the check: a pause that has
        ended by then does not void it (a check a round trip before a slot reserved at the
        very end of the pause it was reserved in still sees that pause)."""
        instant = state.now if at is None else max(state.now, at)
        # A fleet stop: no send goes (one the reservation raises for: readable, as there).
        stopped = FleetStop.from_json(state.stop) is not None
        return state.pause_until <= instant and state.epoch == epoch and not stopped

    def _slot_instant(self, slot: Reservation) -> float | None:
        """The instant a slot is due on the store's clock, when its send will be claimed
        (the claim holds it there until a pause on the sends' spacing ends, or voids it);
        ``None`` without a claim: the slot's check is the send's last word, so no pause may
        run at it."""
        return slot.now + max(0.0, slot.wait) if self._claim() is not None else None

    async def _timed(self, call: Callable[[], Awaitable[R]]) -> R:
        """A gate call whose reply (``.now``: the store's clock) also times the next sends."""
        start = self.clock.now()
        reply = await call()
        self._timing.observe(start, self.clock.now(), reply.now)
        return reply

    async def state(self) -> GateState:
        """The key's pacing state (pause, epoch) on the gate."""
        return await call_gate(self.gate.blocking, self.gate.state, self.key)

    async def _reserve(self, cost: int = 1) -> Reservation:
        pace: dict[str, Any] = {"spacing": self._first_send_guard(not self._sent),
                                "discover": self.rate.discovering}
        if cost != 1:
            pace["cost"] = cost  # a cap counts a batch by the provider's cost rule
        # Non-blocking, a slot further away than the budget is not reserved: this run will
        # not wait for it, and a slot reserved unused would push every later send (the
        # rerun's too) back by a spacing, so reruns under the spacing would never send.
        horizon = self.rate.horizon_seconds
        if self.max_wait_seconds is not None:
            horizon = min(horizon, self.max_wait_seconds)
        reserve = functools.partial(self.gate.reserve, self.key, self.interval * cost, horizon,
                                    report=self.counts.take(), cap=self.cap, **pace)
        try:
            reservation = await call_gate(self.gate.blocking, reserve)
        except QuotaExceededError as exc:
            exc.provider = exc.provider or self.provider
            raise
        stop = FleetStop.from_json(reservation.stop)
        if stop is not None:  # another worker's provider said the key's quota is spent
            raise stop.error(reservation.now, host=self.host, provider=self.provider)
        self._learn(reservation.rate_factor)
        return reservation

    async def stop_fleet(self, error: QuotaExceededError, secrets: tuple[str, ...] = ()) -> None:
        """The provider said the key's quota is spent (``error``): publish a fleet stop
        on the gate (``geotoolkit.gate.stop``), so every worker on the key stops at its
        next claim or reservation instead of meeting its own. Never fails the batch: the
        worker raises ``error`` either way. Only on a gate key of one API key
        (``keys.is_keyed``): a keyless host's key is shared by every user agent and address
        on the gate, and whatever quota such a host keeps is theirs, not the key's."""
        if not is_keyed(self.key):
            return
        stop = FleetStop.of(error, self.store_now(), secrets)
        publish = functools.partial(self.gate.set_value, self.key, STOP_VALUE, stop.to_json(),
                                    ttl_seconds=max(1.0, stop.remaining(self.store_now())))
        try:
            await call_gate(self.gate.blocking, publish)
        except GeotoolkitError as exc:
            log.warning("could not publish the fleet stop on %s: %s", self.host, exc)
            return
        log.warning("%s: %s", self.host, stop.cause(self.store_now()))

    def check_budget(self, wait: float, *, refusal: RateLimitError | None = None,
                     after: str | None = None) -> None:
        """Non-blocking mode: refuse to wait longer than ``max_wait_seconds``.

        The error says what the wait is for, as the caller knows it: ``refusal``, the
        provider's 429 or 503 the engine backs off after; ``after``, what else a backoff
        follows (a failed attempt); neither, the fleet's own spacing or a pause on the gate
        (the provider asked nothing)."""
        budget = self.max_wait_seconds
        if budget is not None and wait > budget:
            raise RateLimitError(f"{self._waiting_for(wait, refusal, after)}, more than "
                                 f"max_wait_seconds={budget:g}",
                                 retry_after=wait, provider=self.provider)

    def _waiting_for(self, wait: float, refusal: RateLimitError | None, after: str | None) -> str:
        if after is not None:
            return f"the backoff after {after} puts the next send to {self.host} {wait:.1f} s away"
        if refusal is None or refusal.status_code is None:
            return (f"the next send to {self.host} is {wait:.1f} s away (the fleet's pacing, a "
                    "pause on the gate, or a backoff after an error)")
        hint = refusal.retry_after
        if hint is None or not math.isfinite(hint):
            return (f"{self.host} refused a send (HTTP {refusal.status_code}, no Retry-After): "
                    f"the backoff puts the next try {wait:.1f} s away")
        return (f"{self.host} asks to wait {hint:.1f} s (HTTP {refusal.status_code}): the next "
                f"try is {wait:.1f} s away")

    # -- pauses --------------------------------------------------------------------------

    async def pause(self, seconds: float, *, cause: str, rate_limited: bool = False,
                    factor: float | None = None, resumed: bool = False) -> None:
        """Publish a fleet-wide pause on the gate (call it *before* sleeping locally);
        ``factor``: the one the refused send was spaced at, if known; ``resumed``: the
        refused send was the fleet's first after a pause (see ``Gate.pause``)."""
        publish = functools.partial(publish_pause, self.gate, self.key, seconds, cause=cause,
                                    rate_limited=rate_limited, report=self.counts.take(),
                                    factor=factor, resumed=resumed)
        self._pauses_begun += 1
        try:
            await call_gate(self.gate.blocking, publish)
        finally:
            self._pauses_published += 1

    async def throttled(self, exc: RateLimitError, wait: float, *, rate_limited: bool,
                        factor: float | None = None, resumed: bool = False) -> None:
        """A 429/503: publish the pause (before sleeping), then tell the listeners.
        ``rate_limited``: the answer says the pace is too fast (the engine decides: a 429,
        or a limiter's 503); ``factor``: the fleet's factor the refused send was spaced at;
        ``resumed``: the refused send was the fleet's first after a pause (see
        ``Gate.pause``)."""
        host = self.host
        if resumed:
            cause = (f"backoff after HTTP {exc.status_code} from {host} on the first send after a "
                     f"pause: {wait:.1f} s")
        elif exc.retry_after is not None:
            cause = f"Retry-After from {host}: {wait:.0f} s"
        else:
            cause = f"backoff after HTTP {exc.status_code} from {host}: {wait:.1f} s"
        await self.pause(wait, cause=cause, rate_limited=rate_limited, factor=factor,
                         resumed=resumed)
        self.emit(Throttled(
            wait_seconds=wait, host=host, status_code=exc.status_code,
            cause="retry-after" if exc.retry_after is not None else "backoff",
            retry_after=exc.retry_after, at=self.clock.now()))

    async def sleep_until(self, deadline: float, *, sample: bool = True) -> None:
        """Sleep until ``deadline`` on the clock; a long wait (a pause) is cut in steps so
        the fleet stays sampled and this worker's heartbeat alive."""
        while True:
            if sample:
                await self.sample()
            remaining = deadline - self.clock.now()
            if remaining <= LONG_WAIT_SECONDS:
                await self.clock.sleep(remaining)
                return
            await self.clock.sleep(LONG_WAIT_SECONDS)

    # -- the fleet -----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def joined(self) -> AsyncIterator[None]:
        """Join the fleet for the block (a first sample), then leave it (a last one, if due)."""
        self.worker_id = secrets.token_hex(8)
        self._next_sample, self._last_beat = -math.inf, -math.inf
        await self.sample()
        try:
            yield
        finally:
            if self._pushes:  # a push still on its way: let it land before leaving
                await asyncio.gather(*self._pushes, return_exceptions=True)
            await self.sample()
            await self._record(leaving=True)

    async def sample(self) -> None:
        """Sample the fleet if ``sample_seconds`` have passed since the last sample.

        Workers call this at natural points (after a query settles, before a wait); no
        task of its own sleeps on the clock. The heartbeat is refreshed every quarter of
        its lifetime; the samples between are reads.
        """
        now = self.clock.now()
        if self._sampling or now < self._next_sample:
            return
        self._sampling, self._next_sample = True, now + self.sample_seconds
        try:
            beat = now - self._last_beat >= HEARTBEAT_SECONDS / 4
            if beat:
                self._last_beat = now
            stats = await self._record(heartbeat=beat)
            if stats is not None:
                self.emit(self._sampled(stats))
        finally:
            self._sampling = False

    async def _record(self, *, heartbeat: bool = True, leaving: bool = False) -> FleetStats | None:
        """Flush the counts and refresh (or drop) the heartbeat; never fails the batch."""
        record = functools.partial(self.gate.record, self.key, self.counts.take(),
                                   worker=self.worker_id if heartbeat or leaving else None,
                                   leaving=leaving)
        try:
            return await call_gate(self.gate.blocking, record)
        except GeotoolkitError as exc:
            log.debug("could not record fleet stats: %s", exc)
            return None

    def _sampled(self, stats: FleetStats) -> FleetSampled:
        rate = self.rate.rate
        if rate is None:
            allowed = stats.learned_rate
        else:
            allowed = None if math.isinf(rate) else rate * stats.rate_factor
        return FleetSampled(
            pace=stats.pace, allowed_rate=allowed,
            requests=stats.requests, successes=stats.successes, throttled=stats.throttled,
            window_seconds=stats.window_seconds, pause_remaining=stats.pause_remaining,
            pause_cause=stats.pause_cause, workers_active=stats.workers_active,
            at=self.clock.now())
