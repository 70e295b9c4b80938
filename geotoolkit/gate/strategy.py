"""The fleet strategy, written once in Python over the primitives of any ``GateStore``.

``FleetGate`` implements the ``Gate`` protocol the engine uses (reserve, pause,
state, record, stats, usage, shared values) with the store doing only what must
run on its clock (``geotoolkit.gate.primitives``). What a client can decide is
decided here, once, for memory, SQLite, Redis and PostgreSQL alike:

- **adaptive pacing** (``Aimd``): the factor lives in one shared value of the
  key's fleet namespace (``<key>#fleet``, name ``aimd``; a rate the fleet
  discovers because none is configured: name ``rate``, kept 30 days so the next
  run starts from it; see ``RatePolicy``), changed only by
  compare-and-set. Each worker paces its reservations at ``interval / factor``
  with the factor it read last (every reservation reads it again in the same
  round trip; a first reservation reads it before). A 429 reads the state and
  the factor, and publishes its cut and its pause in one batch: among many
  workers throttled at once, one compare-and-set wins, so one burst cuts once.
- **stats**: three counters (requests, successes, 429s) per one-second bucket,
  summed over the last ``WINDOW_SECONDS``.
- **heartbeats**: shared values ``worker:<id>`` living ``HEARTBEAT_SECONDS``;
  the workers active are the live ones.
- **caps**: one durable counter per period label of the cap's time zone
  (``2025-03-01``, ``2025-03`` in UTC; ``2025-03-01@America/Los_Angeles`` in another
  zone: see ``geotoolkit.periods``), incremented *before* reserving; over the cap the
  increment is undone and ``QuotaExceededError`` raised without reserving (its
  ``retry_after``: the seconds to the period's end, the zone's next midnight).

- **a fleet stop** (``geotoolkit.gate.stop``): the shared value ``stop`` of the key,
  read in the round trip of every ``reserve``, ``claim`` and ``state`` and returned
  with them.

Round trips per call (each a ``store.run`` batch; see docs/fleet-gate.md):
``claim`` 1 (2 when it realigns the slots), ``push`` 1, ``reserve`` 1 (2 with a cap;
+1 for a key's first reservation on this instance; +1 to give back a cap count when the
wait is beyond the horizon), ``pause`` 1 (2 for a 429), ``state``/``record``/``stats``/
``usage`` and each shared-value call 1.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from geotoolkit.clock import Clock, SystemClock
from geotoolkit.errors import GateError
from geotoolkit.gate.base import (
    HEARTBEAT_SECONDS,
    MAX_QUEUE_SPACINGS,
    Aimd,
    Cap,
    Claim,
    FleetStats,
    GateState,
    Report,
    Reservation,
    Usage,
)
from geotoolkit.gate.fleet import (
    AIMD,
    AIMD_TTL_SECONDS,
    BUCKET_SECONDS,
    CAP_KEEP_SECONDS,
    DISCOVER_HEADROOM,
    DISCOVER_MAX_RATE,
    DISCOVERED,
    DISCOVERED_TTL_SECONDS,
    OK,
    WINDOW_SECONDS,
    WINDOW_TTL_SECONDS,
    WORKER,
    AimdState,
    StoreClock,
    best_pace,
    bucket_counts,
    cap_reached,
    successes_since,
    window_full,
    window_names,
    window_totals,
)
from geotoolkit.gate.primitives import (
    FAR,
    AddCounters,
    DeleteValue,
    GateStore,
    Op,
    Pause,
    Paused,
    ReadCounters,
    ReadState,
    ReadValues,
    Reserve,
    SetValue,
    Slot,
    StoreState,
)
from geotoolkit.gate.stop import STOP_VALUE
from geotoolkit.periods import Period, check_zone, period_of

__all__ = ["FleetGate", "fleet_key", "sent_key"]

#: Each 429 event's reading and the factor it set, at DEBUG (why the fleet slowed down).
log = logging.getLogger("geotoolkit.gate")

#: The fleet's sustained success rate bounds a cut from below once the window spans this.
MIN_SUSTAINED_SECONDS = 2.0
#: The best two seconds since the previous 429 bound a cut from below at this share of
#: their pace: two buckets can hold a limiter's burst, and a report lands in the bucket of
#: when it was flushed (up to half a second late). Measured: at their whole pace, a 2x
#: overclaim on a burst-1 bucket settled just over the limit and was refused again.
BEST_PACE_SHARE = 0.9

#: A claim that waits more than this many of the fleet's spacings moves the slots behind
#: the claims' queue (see ``FleetGate._realign``). A send claimed as its slot comes due
#: should find its claim due at once; one that waits more was claimed before the send
#: ahead of it left, and that send's push (if it leaves late) reaches only later claims.
#: Measured: at 1.5 spacings the queue crept up to it with the pushes between two
#: realignments, and a send 17 ms late still drew a 429 at the end of a run.
REALIGN_SPACINGS = 0.5
#: The shared value (after the adaptive state's name) holding where the slots start after
#: the last realignment, on the store's clock, and how long it is kept.
_ALIGNED = ":aligned"
ALIGNED_TTL_SECONDS = 3600.0

_Known = tuple[str | None, AimdState]  # the stored text (None: absent) and what it says


def _number(text: str | None) -> float:
    """A stored instant (``-inf``: none, or not a finite number).

    >>> _number("12.5"), _number(None), _number("nan"), _number("inf"), _number("x")
    (12.5, -inf, -inf, -inf, -inf)
    """
    try:
        value = float(text) if text is not None else -math.inf
    except ValueError:
        return -math.inf
    return value if math.isfinite(value) else -math.inf


def fleet_key(key: str) -> str:
    """The namespace of a gate key's own shared values (AIMD state, heartbeats).

    >>> fleet_key("geotoolkit:api.example.com:anonymous")
    'geotoolkit:api.example.com:anonymous#fleet'
    """
    return f"{key}#fleet"


def sent_key(key: str) -> str:
    """The pacing state spacing the fleet's sends as they leave (see ``FleetGate.claim``).

    >>> sent_key("geotoolkit:api.example.com:anonymous")
    'geotoolkit:api.example.com:anonymous#sent'
    """
    return f"{key}{_SENT}"


_SENT = "#sent"
#: The count of microseconds late sends pushed the claims back (on ``sent_key``), and how
#: long it lives after its last push (longer than any claim waits).
_PUSHED = "pushed_us"
PUSHED_TTL_SECONDS = 3600.0


def _pushed(counters: Mapping[str, int]) -> float:
    """The seconds pushed in all, from the counters read."""
    return counters.get(_PUSHED, 0) / 1e6


class FleetGate:
    """A ``Gate`` over any ``GateStore``: the fleet strategy, in Python, once.

    ``aimd`` tunes adaptive pacing (``Aimd()`` by default); ``clock`` is this
    host's clock, used with the ``now`` of the store's replies to estimate the
    store's clock (for a server store; a host-clock store's own clock is used
    as is). Thread-safe when its store is.
    """

    def __init__(self, store: GateStore, *, aimd: Aimd | None = None,
                 clock: Clock | None = None) -> None:
        self.store = store
        self.backend: str = store.backend
        self.blocking: bool = store.blocking
        self.aimd = aimd or Aimd()
        self._clock: Clock = store.clock or clock or SystemClock()
        self._store_clock = StoreClock()
        self._lock = threading.RLock()
        self._known: dict[tuple[str, str], _Known] = {}
        #: Per key, the interval last reserved with and whether the fleet discovers its rate.
        self._paces: dict[str, tuple[float, bool]] = {}
        #: Per key, the best pace the fleet was answered at, successes/s (``best_pace``),
        #: as the last stats read showed it.
        self._answered: dict[str, float] = {}
        #: Whether its 429 events are logged (``geotoolkit.gate`` at DEBUG): not while it
        #: only shadows another gate (``FallbackGate``'s local one while the store is up).
        self.log_events = True

    # -- the store's clock, and batches ------------------------------------------------------------

    def _now(self) -> float:
        """The store's clock, as well as this host knows it."""
        if self.store.clock is not None:
            return self.store.clock.now()
        return self._store_clock.now(self._clock.now())

    def _run(self, ops: Sequence[Op]) -> list[Any]:
        """One round trip; a reply stamped with the store's clock refines the estimate."""
        start = self._clock.now()
        results = self.store.run(ops)
        if self.store.clock is None:
            stamps = [r.now for r in results if isinstance(r, Slot | Paused | StoreState)]
            if stamps:
                with self._lock:
                    self._store_clock.observe(start, self._clock.now(), stamps[0])
        return results

    # -- the adaptive factor -----------------------------------------------------------------------

    def _discovering(self, key: str) -> bool:
        with self._lock:
            return self._paces.get(key, (0.0, False))[1]

    def _name(self, key: str) -> str:
        """The shared value of ``key``'s adaptive state: a factor, or a discovered rate."""
        return DISCOVERED if self._discovering(key) else AIMD

    def _read_state_value(self, key: str, name: str | None = None) -> ReadValues:
        """The op reading ``key``'s adaptive state (a factor, or a discovered rate)."""
        return ReadValues(fleet_key(key), name or self._name(key))

    def _learn(self, key: str, values: Mapping[str, str], name: str | None = None) -> _Known:
        name = name or self._name(key)
        text = values.get(name)
        known = (text, AimdState.from_text(text))
        with self._lock:
            self._known[(key, name)] = known
        return known

    def _factor(self, key: str) -> _Known:
        """The adaptive state last seen for ``key`` (read from the store the first time)."""
        name = self._name(key)
        with self._lock:
            known = self._known.get((key, name))
        if known is None:
            known = self._learn(key, self._run([self._read_state_value(key, name)])[0], name)
        return known

    def _swap(self, key: str, text: str | None, new: AimdState) -> SetValue:
        """Compare-and-set of the adaptive state: it applies only if nobody changed it meanwhile."""
        name = self._name(key)
        ttl = DISCOVERED_TTL_SECONDS if name == DISCOVERED else AIMD_TTL_SECONDS
        return SetValue(fleet_key(key), name, new.to_text(), ttl,
                        only_if_absent=text is None, only_if=text)

    def _credit(self, key: str, known: _Known | None, report: Report | None) -> list[Op]:
        if known is None or report is None or report.successes <= 0:
            return []
        text, state = known
        top = 1.0
        if self._discovering(key):
            with self._lock:
                answered = self._answered.get(key, 0.0)
            # No further than twice what the fleet was answered at (none yet: no reading).
            top = DISCOVER_MAX_RATE
            if answered > 0:
                top = min(top, max(state.factor, DISCOVER_HEADROOM * answered))
        new = state.credited(self._now(), report.successes, self.aimd, top, seen_at=report.at)
        return [] if new == state else [self._swap(key, text, new)]

    def _counted(self, key: str, report: Report | None) -> list[Op]:
        if not report:
            return []
        counts = {**bucket_counts(self._now(), report), OK: report.successes}
        return [AddCounters.of(key, counts, WINDOW_TTL_SECONDS)]

    # -- reservations ------------------------------------------------------------------------------

    def reserve(self, key: str, interval: float, horizon: float = 60.0, *,
                report: Report | None = None, cap: Cap | None = None, cost: int = 1,
                spacing: float = 0.0, discover: bool = False) -> Reservation:
        Reserve(key, interval + spacing, horizon)  # bad arguments fail before anything is sent
        with self._lock:
            self._paces[key] = (interval, discover)
        known = self._factor(key)
        factor, said = known[1].slot_factor, known[1].factor
        credit, counted = self._credit(key, known, report), self._counted(key, report)
        name = self._name(key)
        usage: Usage | None = None
        if cap is not None:
            usage = self._count_cap(key, cap, credit, counted, cost)
            aimd = self._factor(key)[1]  # as read with the count, just now
            factor, said = aimd.slot_factor, aimd.factor
            try:
                stopped, slot = self._run([ReadValues(key, STOP_VALUE),
                                           Reserve(key, interval / factor + spacing, horizon)])
            except GateError:
                with contextlib.suppress(GateError):  # best effort: the store may be down
                    self._uncount(key, usage, cost)
                raise
            if not slot.reserved or STOP_VALUE in stopped:  # stopped: nothing will be sent
                usage = self._uncount(key, usage, cost)
        else:
            *_, values, stopped, slot = self._run([
                *credit, *counted, self._read_state_value(key, name), ReadValues(key, STOP_VALUE),
                Reserve(key, interval / factor + spacing, horizon)])
            fresh = self._learn(key, values)[1].slot_factor
            if slot.reserved and fresh < factor * (1 - 1e-9):
                self._respace(key, interval, factor, fresh)
        return Reservation(slot.wait, slot.now, slot.reserved, slot.epoch, said, usage,
                           stop=stopped.get(STOP_VALUE))

    def _respace(self, key: str, interval: float, used: float, fresh: float) -> None:
        """Paced at a factor another worker has just cut: reserve the missing spacing too."""
        self._run([Reserve(key, interval / fresh - interval / used, FAR)])

    def acquire(self, key: str, interval: float, horizon: float = 60.0) -> float:
        return self.reserve(key, interval, horizon).wait

    def claim(self, key: str, interval: float) -> Claim:
        """Space a send ``interval`` from the fleet's previous one as it leaves (a GCRA
        slot on ``sent_key(key)``, never refused) and read ``key``'s pause: one round trip
        (two when it moves the slots behind a queue of claims, see ``_realign``)."""
        slot, state, values, pushed, stopped = self._run([
            Reserve(sent_key(key), interval, FAR), ReadState(key), self._read_state_value(key),
            ReadCounters(sent_key(key), (_PUSHED,)), ReadValues(key, STOP_VALUE)])
        aimd = self._learn(key, values)[1]
        factor = aimd.factor
        # The wait to the slot's own instant from the state's reading: a store that runs
        # the operations one statement after another (PostgreSQL) reads its clock for each,
        # and a state read a few milliseconds after the slot must not make the send that
        # much later than the slot the next claim is spaced from (0.3 ms apart on an idle
        # server; most likely why a send left 4.1 ms after its slot under load, and the next
        # one reached a limiter without burst 96.9 ms after it at 101 ms spacing).
        wait = slot.now + slot.wait - state.now
        self._realign(key, wait, state, factor, values.get(self._name(key) + _ALIGNED))
        return Claim(wait, state.now, state.pause_until, state.epoch, factor, pushed=_pushed(pushed),
                     resumes=aimd.resumes, stop=stopped.get(STOP_VALUE))

    def push(self, key: str, seconds: float) -> None:
        """A send left ``seconds`` late: space the fleet's next claim that much later, and
        count them (``GateState.pushed``: sends claimed before, read it before they leave)."""
        micros = round(seconds * 1e6) if math.isfinite(seconds) and seconds > 0 else 0
        ops: list[Op] = [Reserve(sent_key(key), seconds, FAR)]
        if micros > 0:
            ops.append(AddCounters.of(sent_key(key), {_PUSHED: micros}, PUSHED_TTL_SECONDS))
        self._run(ops)

    def _realign(self, key: str, wait: float, state: StoreState, factor: float,
                 aligned: str | None) -> None:
        """A send whose claim waits ``wait`` behind a queue of claims: move the slots behind it.

        Each worker holds one slot at a time, so the fleet's sends wait about one spacing
        per worker between reserving and leaving, in two queues: the slots' and the claims'.
        Slots and claims keep the same pace, so a lag of the claims behind the slots (slots
        reserved at the target while the factor climbs back, late sends' pushes adding up)
        stays until the next pause: every send then waits in the claims' queue (1.6 s for 16
        workers at 10/s, measured), and a late send's push reaches only the claims made after
        the queue's last, not the send right behind it, which a limiter without burst
        refuses. A claim that waits more than ``REALIGN_SPACINGS`` of the fleet's spacing
        (half; and at most ``MAX_QUEUE_SPACINGS``: longer is not a queue) pushes the slots'
        state back by its wait (less a quarter spacing), so that the slots reserved from now
        on come due when their claims do; the claims of slots reserved
        before are still queued, so it records where the slots then start (``aligned``, a
        shared value) and claims whose slots came due before that move nothing (while the
        slots' state is still past it: a pause restarts it earlier, and a value no slot
        reached is not one). The push applies only if the next slot is still where this
        claim saw it (the reservation's horizon): of claims that saw the same queue at
        once, one moves the slots.
        """
        with self._lock:
            interval = self._paces.get(key, (0.0, False))[0]
        spacing = interval / factor
        if interval <= 0 or state.pause_until > state.now or wait <= REALIGN_SPACINGS * spacing:
            return  # the pace is not known here; a pause restarts both at its end; no queue
        if wait > MAX_QUEUE_SPACINGS * spacing:
            return  # not a queue: the spacing state is off (the engine does not wait for it)
        if state.now < _number(aligned) - spacing / 2 <= state.tat:
            return  # this send's slot was reserved before the last realignment
        slot_wait = max(0.0, state.tat - state.now)
        shift = wait - spacing / 4
        start = state.now + slot_wait + shift
        # Best effort: the claim stands without it (the next claim that waits realigns).
        with contextlib.suppress(GateError):
            self._run([SetValue(fleet_key(key), self._name(key) + _ALIGNED, repr(start),
                                ALIGNED_TTL_SECONDS),
                       Reserve(key, shift, slot_wait + spacing / 2)])

    # -- caps --------------------------------------------------------------------------------------

    def _cap_op(self, key: str, counts: Mapping[str, int], resets_at: float) -> AddCounters:
        ttl = max(1.0, resets_at - self._now()) + CAP_KEEP_SECONDS
        return AddCounters.of(key, counts, ttl, durable=True)

    def _count_cap(self, key: str, cap: Cap, credit: list[Op], counted: list[Op],
                   cost: int = 1) -> Usage:
        """Count ``cost`` sends against the cap (with the report): increment, then check."""
        label, resets = period_of(self._now(), cap.period, cap.tz)
        results = self._run([*credit, self._cap_op(key, {label: cost}, resets), *counted,
                             self._read_state_value(key), ReadState(key)])
        added, values, state = results[len(credit)], results[-2], results[-1]
        self._learn(key, values)
        used = added[label]
        true_label, true_resets = period_of(state.now, cap.period, cap.tz)
        if true_label != label:  # the store's calendar says otherwise (midnight, a skewed clock)
            moved = self._run([self._cap_op(key, {label: -cost, true_label: cost},
                                            max(resets, true_resets))])
            label, resets, used = true_label, true_resets, moved[0][true_label]
        usage = Usage(label, used, resets, cap.tz)
        if used > cap.limit:
            raise cap_reached(cap, self._uncount(key, usage, cost), state.now)
        return usage

    def _uncount(self, key: str, usage: Usage, cost: int = 1) -> Usage:
        """Give back the ``cost`` sends counted against a cap (refused, or not reserved)."""
        self._run([self._cap_op(key, {usage.period: -cost}, usage.resets_at)])
        return replace(usage, used=usage.used - cost)

    def usage(self, key: str, period: Period = "day", tz: str = "UTC") -> Usage:
        tz = check_zone(tz)
        asked = self._read_caps(key, (period,), tz)
        state, counters = self._run([ReadState(key), asked])
        return self._usages(key, state.now, (period,), tz, asked.names, counters)[0]

    def _read_caps(self, key: str, periods: Sequence[Period], tz: str) -> ReadCounters:
        now = self._now()
        return ReadCounters(key, tuple(period_of(now, p, tz)[0] for p in periods), durable=True)

    def _usages(self, key: str, now: float, periods: Sequence[Period], tz: str,
                asked: Sequence[str], counters: Mapping[str, int]) -> list[Usage]:
        """The usages in the store's periods at ``now`` (asked again if the estimate was off)."""
        labels = [period_of(now, p, tz) for p in periods]
        missed = tuple(label for label, _ in labels if label not in asked)
        if missed:  # the store's calendar says otherwise (midnight, a skewed clock)
            counters = {**counters, **self._run([ReadCounters(key, missed, durable=True)])[0]}
        return [Usage(label, counters.get(label, 0), resets, tz) for label, resets in labels]

    # -- pauses ------------------------------------------------------------------------------------

    def pause(self, key: str, seconds: float, *, cause: str = "", rate_limited: bool = False,
              report: Report | None = None, factor: float | None = None,
              resumed: bool = False) -> float:
        # The same pause on the sends' spacing: a new one restarts it at the pause's end, so
        # claims that waited there and were voided by the pause do not hold the fleet back.
        op, sent = Pause(key, seconds, cause), Pause(sent_key(key), seconds)
        counted = self._counted(key, report)
        if not rate_limited:
            paused: Paused = self._run([*counted, sent, op])[-1]
            return paused.remaining
        # The factor before the state: read apart (PostgreSQL statements, each its own
        # snapshot), a factor older than the state is safe, a newer one could cut twice.
        values, state, counters = self._run([self._read_state_value(key),
                                             ReadState(key),
                                             ReadCounters(key, (*window_names(self._now()), OK))])
        text, aimd = self._learn(key, values)
        if resumed:  # the pause was not enough: not the pace (a count lost to a racing
            event = aimd.refused_resume(state.now, state.pause_until)  # credit: a shorter pause)
            reading = f"the first send after a pause, {event.resumes} in a row"
        else:
            event, reading = self._event(key, aimd, state, seconds, counters, factor)
        swap = [] if event == aimd else [self._swap(key, text, event)]
        results = self._run([*swap, *counted, sent, op])
        paused = results[-1]
        if swap and results[0]:
            with self._lock:
                self._known[(key, self._name(key))] = (event.to_text(), event)
            self._log_event(key, aimd, event, reading)
        elif swap and paused.started and not resumed:  # our 429 opened the pause, but the
            self._throttle_again(key, state, seconds, counters, factor)  # factor moved meanwhile
        return paused.remaining

    def _event(self, key: str, aimd: AimdState, state: StoreState, seconds: float,
               counters: Mapping[str, int],
               refused: float | None = None) -> tuple[AimdState, str]:
        """The 429 event on ``aimd``: the successes since the fleet resumed are its evidence
        (counted in the stats window; beyond it, the calm times the pace); ``refused``: the
        factor the refused send was spaced at, if known. With what it was read from, in words."""
        until = max(state.pause_until, state.now + max(seconds, 0.0))
        with self._lock:
            interval, discovering = self._paces.get(key, (0.0, False))
        resumed = max(state.pause_until, aimd.throttled_at or 0.0)
        ok = counters.get(OK)
        # The successes counted since the last event (None: the first event, or the fleet
        # stopped meanwhile and its counter expired).
        since = (ok - aimd.ok_at if ok is not None and aimd.ok_at is not None
                 and ok >= aimd.ok_at else None)
        sends = float(since if since is not None  # else what the window shows
                      else successes_since(state.now, resumed, counters))
        # A limiter with a burst drained it during the pause (or before the start): the
        # first answer after it was free, not evidence of the pace it admits.
        sends = max(0.0, sends - 1.0)
        window, requests, successes, throttled = window_totals(state.now, counters)
        # The fleet's first 429 before a whole second of its answers was counted: they are
        # what a limiter lets through before its first period ends (a window's count, a
        # bucket's burst; some still on their way to the gate), not evidence of the pace.
        # (Nothing counted at all, the window of an empty record reads whole.)
        cold = (aimd.throttled_at is None and not discovering
                and (window < 2 * BUCKET_SECONDS or not (requests or successes or throttled)))
        counted = sends  # what the log shows, read or not
        if cold:
            sends = 0.0
        calm = state.now - resumed
        per_second = aimd.factor / interval if interval > 0 else 1.0  # unknown: 1/s
        calmed = calm >= WINDOW_SECONDS and window_full(state.now, counters)
        if calmed:
            # Sending since before the window began: the calm, at the pace, says more.
            sends = max(sends, calm * per_second)
        # The limit is at least what the fleet sustained over the window (pauses included,
        # so a lower bound): a 429 soon after the last one cannot cut below that.
        sustained = successes / window / per_second if window >= MIN_SUSTAINED_SECONDS else 0.0
        # And at least its best two seconds since the previous event: a 429 of jitter soon
        # after a cut, once the fleet has been answered at nearly its pace for a while, is
        # not a limit at the cut's level. (Since the previous event only: a limit that fell
        # meanwhile is found by the next 429.)
        fastest = best_pace(state.now, aimd.throttled_at, counters) / per_second
        sustained = max(sustained, fastest * BEST_PACE_SHARE)
        # What the fleet got over the cycle since the previous event, its pause included.
        cycle: float | None = None
        if since is not None and aimd.throttled_at is not None and state.now > aimd.throttled_at:
            cycle = since / (state.now - aimd.throttled_at) / per_second
        # Discovering, the pace the fleet was answered at before its first 429 (the growth
        # of the factor runs ahead of it): with no event before, the same best two seconds.
        paced = fastest if discovering and aimd.throttled_at is None else None
        event = aimd.throttled(state.now, state.pause_until, until, self.aimd, sends=sends,
                               discovering=discovering, ok=ok, floor=sustained, refused=refused,
                               cycle=cycle, paced=paced)
        # (A calm that began before anything on record, no pause and no event, is no count.)
        reading = _reading(counted if cold else sends, sustained, refused, cycle, paced,
                           endless=calmed and resumed <= 0.0)
        if cold:
            reading += ", in the fleet's first second: its count not read"
        if aimd.refuses_step(state.now, aimd.charged(refused)):
            reading += f", the step from {aimd.stepped_from:.3g} refused"
        return event, reading

    def _throttle_again(self, key: str, state: StoreState, seconds: float,
                        counters: Mapping[str, int], refused: float | None = None,
                        tries: int = 3) -> None:
        """Apply a 429 event on a fresher AIMD state (a success credit raced with it)."""
        for _ in range(tries):
            name = self._name(key)
            text, aimd = self._learn(key, self._run([self._read_state_value(key, name)])[0], name)
            if (aimd.throttled_at or float("-inf")) >= state.now:
                return  # a later 429 was counted meanwhile: its cut stands for ours
            event, reading = self._event(key, aimd, state, seconds, counters, refused)
            if event == aimd:
                return
            if self._run([self._swap(key, text, event)])[0]:
                self._log_event(key, aimd, event, reading)
                return

    def _log_event(self, key: str, before: AimdState, after: AimdState, reading: str) -> None:
        """One line per 429 event that changed the fleet's state (the gate key: a hash of
        the API key, never the key)."""
        if self.log_events and log.isEnabledFor(logging.DEBUG):
            log.debug("429 event on %s (%s gate): factor %.4g -> %.4g, target %s, ceiling %s (%s)",
                      key, self.backend, before.factor, after.factor, _short(after.target),
                      _short(after.ceiling), reading)

    def state(self, key: str) -> GateState:
        """The key's pacing state and the fleet's adaptive factor, in one round trip."""
        current: StoreState
        current, values, pushed, stopped = self._run([
            ReadState(key), self._read_state_value(key), ReadCounters(sent_key(key), (_PUSHED,)),
            ReadValues(key, STOP_VALUE)])
        return replace(current.gate_state(rate_factor=self._learn(key, values)[1].factor,
                                          pushed=_pushed(pushed)), stop=stopped.get(STOP_VALUE))

    # -- stats and heartbeats ----------------------------------------------------------------------

    def record(self, key: str, report: Report, *, worker: str | None = None,
               leaving: bool = False) -> FleetStats:
        with self._lock:
            known = self._known.get((key, self._name(key)))
        ops = [*self._credit(key, known, report), *self._counted(key, report)]
        if worker is not None:
            name = WORKER + worker
            ops.append(DeleteValue(fleet_key(key), name) if leaving
                       else SetValue(fleet_key(key), name, "", HEARTBEAT_SECONDS))
        return self._stats_of(key, self._run([*ops, *self._stats_ops(key)])[-3:])

    def stats(self, key: str) -> FleetStats:
        return self._stats_of(key, self._run(self._stats_ops(key)))

    def snapshot(self, key: str, tz: str = "UTC") -> tuple[FleetStats, Usage, Usage]:
        """The stats and the day's and month's cap counts (of ``tz``'s calendar), in one
        round trip."""
        tz = check_zone(tz)
        asked = self._read_caps(key, ("day", "month"), tz)
        results = self._run([*self._stats_ops(key), asked])
        stats = self._stats_of(key, results[:3])
        day, month = self._usages(key, stats.now, ("day", "month"), tz, asked.names, results[3])
        return stats, day, month

    def _stats_ops(self, key: str) -> list[Op]:
        return [ReadState(key), ReadCounters(key, window_names(self._now())),
                ReadValues(fleet_key(key))]

    def _stats_of(self, key: str, results: Sequence[Any]) -> FleetStats:
        state, counters, values = results
        factor = self._learn(key, values, AIMD)[1].factor
        learned = self._learn(key, values, DISCOVERED)[1].factor if DISCOVERED in values else None
        window, requests, successes, throttled = window_totals(state.now, counters)
        with self._lock:
            self._answered[key] = best_pace(state.now, None, counters)
        running = state.pause_until > state.now
        return FleetStats(
            now=state.now, window_seconds=window, requests=requests, successes=successes,
            throttled=throttled, rate_factor=factor, pause_until=state.pause_until,
            pause_cause=state.cause if running else "",
            workers_active=sum(1 for name in values if name.startswith(WORKER)),
            learned_rate=learned)

    # -- shared values -----------------------------------------------------------------------------

    def set_value(self, key: str, name: str, value: str, *, ttl_seconds: float,
                  only_if_absent: bool = False) -> bool:
        return bool(self._run([SetValue(key, name, value, ttl_seconds, only_if_absent)])[0])

    def values(self, key: str, prefix: str = "") -> dict[str, str]:
        found: dict[str, str] = self._run([ReadValues(key, prefix)])[0]
        return found

    def delete_value(self, key: str, name: str, *, only_if: str | None = None) -> bool:
        return bool(self._run([DeleteValue(key, name, only_if)])[0])

    # -- the store ---------------------------------------------------------------------------------

    def keys(self, prefix: str = "") -> list[str]:
        """The gate keys with a pacing state on the store whose names start with ``prefix``."""
        return [key for key in self.store.keys(prefix) if not key.endswith(_SENT)]

    def close(self) -> None:
        self.store.close()

    def __repr__(self) -> str:
        return f"FleetGate({self.store!r})"


def _reading(sends: float, floor: float, refused: float | None, cycle: float | None,
             paced: float | None, *, endless: bool = False) -> str:
    """What a 429 event was read from, in words (shares are of the pace at the factor).
    ``endless``: the successes are a calm's that began before anything on record (no
    pause, no event on the key): not a count.

    >>> _reading(9.0, 0.2273, 1.0, None, None)
    '9 successes since the last event, refused at 1, floor 0.227'
    >>> _reading(0.0, 0.0, None, 0.4391, 0.5)
    '0 successes since the last event, floor 0, cycle 0.439, paced 0.5'
    >>> _reading(1.78e10, 0.909, 1.0, None, None, endless=True)
    'a calm since before anything on record, refused at 1, floor 0.909'
    """
    parts = ["a calm since before anything on record" if endless
             else f"{sends:.3g} successes since the last event"]
    if refused is not None:
        parts.append(f"refused at {refused:.3g}")
    parts.append(f"floor {floor:.3g}")
    parts.extend(f"{name} {value:.3g}" for name, value in (("cycle", cycle), ("paced", paced))
                 if value is not None)
    return ", ".join(parts)


def _short(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"
