"""The fleet strategy's pure decision steps.

Everything here is plain numbers in, plain numbers out (stdlib only), so the
strategy (``geotoolkit.gate.strategy.FleetGate``) is tested without a store:

- ``AimdState``: the adaptive factor and its instants, kept as one shared value
  (``AIMD``) updated by compare-and-set; ``credited`` (additive increase) and
  ``throttled`` (a 429 event: maybe a multiplicative cut).
- the stats window: one-second buckets of three counters each
  (``bucket_counts``, ``window_names``, ``window_totals``).
- caps: ``period_of`` (the day or month of an instant in a zone's calendar, from
  ``geotoolkit.periods``) and ``cap_reached``.
- ``StoreClock``: the store's clock as this host knows it, from stamped replies.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from geotoolkit.errors import QuotaExceededError
from geotoolkit.gate.base import Aimd, Cap, Report, Usage
from geotoolkit.periods import period_of, reset_text

__all__ = [
    "AIMD",
    "AIMD_TTL_SECONDS",
    "BUCKET_SECONDS",
    "CAP_KEEP_SECONDS",
    "CREDIT_SECONDS",
    "DISCOVERED",
    "DISCOVERED_TTL_SECONDS",
    "DISCOVER_HEADROOM",
    "DISCOVER_MAX_RATE",
    "OK",
    "SETTLE_SECONDS",
    "SLOTS",
    "WINDOW_SECONDS",
    "WINDOW_TTL_SECONDS",
    "WORKER",
    "AimdState",
    "StoreClock",
    "best_pace",
    "bucket_counts",
    "cap_reached",
    "period_of",
    "stamp_of",
    "successes_since",
    "window_full",
    "window_names",
    "window_totals",
]

#: The sliding window: ``SLOTS`` buckets of ``BUCKET_SECONDS``.
BUCKET_SECONDS = 1.0
SLOTS = 10
WINDOW_SECONDS = BUCKET_SECONDS * SLOTS
#: A bucket's counters outlive the window a little (a client's estimate of the store's clock).
WINDOW_TTL_SECONDS = WINDOW_SECONDS + 5.0

#: Sends made near an increase are credited at most this many seconds each.
CREDIT_SECONDS = 1.0
#: A climb back after a doubtful cut is over when its factor is, but the fleet's pace
#: follows a few seconds later (slots reserved at the lower pace go first): a 429 this
#: soon after the cut still counts as refused while climbing back.
SETTLE_SECONDS = 10.0

#: The shared value holding the AIMD state, and how long it outlives its last change.
AIMD = "aimd"
AIMD_TTL_SECONDS = 86_400.0
#: A counter of the key's successes, for as long as the fleet keeps sending (it lives as
#: long as the window's buckets after the last report): the evidence of a 429 is the
#: successes since the one before.
OK = "ok"

#: The shared value holding a discovered rate (an ``AimdState`` whose factor is requests
#: per second), kept long so that the next run on the key starts from it.
DISCOVERED = "rate"
DISCOVERED_TTL_SECONDS = 30 * 86_400.0
#: The highest rate discovery climbs to, requests per second.
DISCOVER_MAX_RATE = 1000.0
#: Discovering, the rate grows to at most this multiple of the best pace the fleet was
#: answered at (two whole seconds in the stats window): a fleet that cannot use a rate (a
#: server slower than it, too few workers) has not shown it is allowed, and grown on, the
#: gate would remember it and hand it to the next, bigger fleet on the key (measured: four
#: in flight on a real Nominatim answered 30/s while the rate grew to 324/s), as a
#: congestion window is not grown while the sender does not use it (RFC 7661). Four times,
#: not twice: a fleet that does keep up is answered well under its growing rate (slots are
#: reserved a few ahead at the pace before; four processes refused at 8.8/s were answered
#: at 4.6/s), and at twice the cap slowed its search (tests/engine/test_fleet.py).
DISCOVER_HEADROOM = 4.0
#: Heartbeats are shared values named ``WORKER + worker id``.
WORKER = "worker:"

#: Cap counters live this long after their period ends.
CAP_KEEP_SECONDS = 86_400.0

_KINDS = ("r", "s", "t")  # requests, successes, throttled


@dataclass(frozen=True)
class AimdState:
    """The fleet's adaptive factor and the instants that drive it (``None``: never).

    Stored as text in one shared value and changed only by compare-and-set, so a
    burst of 429s answered by many workers at once changes it once. ``target`` is
    the level successes climb back to quickly (just under the ceiling an isolated
    429 found); above it they only probe slowly (see ``Aimd``).

    >>> state = AimdState(0.5, 10.0, 10.0, 12.5, 0.7, 42, 0.5, 0.9, counted=True, resumes=2,
    ...                   resumed_at=11.0, stepped_from=0.4)
    >>> AimdState.from_text(state.to_text()) == state
    True
    >>> AimdState.from_text(None) == AimdState() == AimdState.from_text("garbage")
    True
    >>> AimdState.from_text("[0.5, null, null, null, 0.5, null, 0.5, Infinity]").ceiling is None
    True
    """

    factor: float = 1.0
    decreased_at: float | None = None
    throttled_at: float | None = None
    increased_at: float | None = None
    target: float | None = None
    ok_at: int | None = None  #: the key's ``OK`` counter at the last 429 event
    base: float | None = None  #: where a climb back after a doubtful cut started
    #: The lowest factor refused by 429 events since the last calm (``probe_after_seconds``
    #: without one): after a cut that stands, the fleet climbs toward it in steps.
    ceiling: float | None = None
    #: The highest factor shown to hold since the last calm: a climb refused above its
    #: ``base`` shows the base held. A cut that stands but is lifted above it (by what the
    #: fleet sustained) is not proven; refused there, the fleet goes halfway back to it.
    held: float | None = None
    #: Refused over ``held`` once since it was shown, and sent halfway back to it: refused
    #: over it again, the fleet goes back to it (the halves could close in on a level over
    #: the limit for ever).
    halved: bool = False
    #: The factor is a cut the count of an event set (not a return to where a climb began,
    #: nor lifted by what the fleet sustained, nor a cut under the level that held):
    #: refused at it again, the count misread.
    counted: bool = False
    #: 429s on the fleet's first send after a pause, in a row (no success seen since):
    #: the pause was not enough, so the next one backs off longer (see ``refused_resume``).
    resumes: int = 0
    #: When the last of them was counted (successes seen before it, reported late, do not
    #: end the row).
    resumed_at: float | None = None
    #: Where the climb to ``base`` began, when ``base`` is a step the fleet just reached (the
    #: level that held before it): a 429 before the next step's climb is that step's.
    stepped_from: float | None = None

    @property
    def slot_factor(self) -> float:
        """The factor slots are reserved at: while the factor climbs back to ``target``
        after a doubtful cut, the target. Each send's claim, as it leaves, spaces it at the
        factor itself; slots reserved at the lower pace would queue up and hold the climb
        back by the queue's length (one interval per worker).

        >>> AimdState(0.5, target=0.98, base=0.5).slot_factor, AimdState(0.5, target=0.5).slot_factor
        (0.98, 0.5)
        """
        if self.base is not None and self.target is not None and self.target > self.factor:
            return self.target
        return self.factor

    def to_text(self) -> str:
        return json.dumps([self.factor, self.decreased_at, self.throttled_at, self.increased_at,
                           self.target, self.ok_at, self.base, self.ceiling, self.held,
                           self.halved, self.counted, self.resumes, self.resumed_at,
                           self.stepped_from])

    @classmethod
    def from_text(cls, text: str | None) -> AimdState:
        try:
            factor, decreased, throttled, increased, *rest = json.loads(text or "null")
            target = _instant(rest[0]) if rest else None
            ok_at = rest[1] if len(rest) > 1 and isinstance(rest[1], int) else None
            base = _instant(rest[2]) if len(rest) > 2 else None
            ceiling = _factor(rest[3]) if len(rest) > 3 else None
            held = _factor(rest[4]) if len(rest) > 4 else None
            halved = len(rest) > 5 and rest[5] is True
            counted = len(rest) > 6 and rest[6] is True
            resumes = rest[7] if len(rest) > 7 and type(rest[7]) is int and rest[7] > 0 else 0
            resumed_at = _instant(rest[8]) if len(rest) > 8 else None
            stepped_from = _factor(rest[9]) if len(rest) > 9 else None
            if not (math.isfinite(float(factor)) and float(factor) > 0):
                raise ValueError("a factor must be positive")
            return cls(float(factor), _instant(decreased), _instant(throttled),
                       _instant(increased), target, ok_at, base, ceiling, held, halved, counted,
                       resumes, resumed_at, stepped_from)
        except (TypeError, ValueError):
            return cls()

    def credited(self, now: float, successes: int, aimd: Aimd,
                 max_factor: float = 1.0, seen_at: float | None = None) -> AimdState:
        """Successes raise the factor: fast back to ``target``, slowly above it.

        Successes seen (from ``seen_at`` on; ``None``: unknown, now) after the last refused
        first send after a pause end that row (``resumes``).

        Nothing to credit at ``max_factor`` (the configured rate), without successes,
        or during the pause that came with a cut (``now <= increased_at``). Each credit
        counts the time since the last one, at most ``CREDIT_SECONDS``.

        >>> a = Aimd(recover_seconds=2.0, increase_per_second=0.01, probe_after_seconds=0.0)
        >>> AimdState(0.5, increased_at=10.0, target=0.9).credited(11.0, 3, a).factor   # fast
        0.7
        >>> AimdState(0.7, increased_at=11.0, target=0.9, base=0.5).credited(12.0, 3, a).factor
        0.9
        >>> AimdState(0.5, increased_at=10.0).credited(10.5, 3, a).factor   # a slow probe
        0.5025
        >>> AimdState(0.5, increased_at=10.0).credited(99.0, 3, a).factor   # at most 1 s each
        0.505
        >>> row = AimdState(resumes=3, resumed_at=5.0)
        >>> row.credited(6.0, 1, a, seen_at=4.5).resumes, row.credited(6.0, 1, a, seen_at=5.2).resumes
        (3, 0)
        """
        after = seen_at is None or self.resumed_at is None or seen_at >= self.resumed_at
        if successes > 0 and self.resumes and after:  # the pause before them was enough
            return replace(self, resumes=0).credited(now, successes, aimd, max_factor)
        if successes <= 0 or self.factor >= max_factor:
            return self
        if self.increased_at is None:
            return replace(self, increased_at=now)
        if now <= self.increased_at:
            return self
        credit = min(now - self.increased_at, CREDIT_SECONDS)
        factor = self.factor
        if self.target is not None and factor < self.target:
            # Linear from where the climb began: back at the target within recover_seconds.
            share = min(1.0, credit / aimd.recover_seconds) if aimd.recover_seconds > 0 else 1.0
            start = self.base if self.base is not None and self.base < factor else factor
            factor = min(self.target, factor + (self.target - start) * share)
            if self.target - factor < 1e-3 * self.target:
                step = self._step(now, self.target, aimd)
                if step is not None:
                    return step
                if self._searched(now, aimd) is not None:
                    # The last step: no next one, but it is waited at as any step is (its
                    # sends catch up with it), and refused meanwhile, it goes back too.
                    return replace(self._at_step(now, self.target, self.target, aimd),
                                   counted=False)
                factor = self.target
        elif self.throttled_at is None and max_factor > 1.0:  # discovering: not throttled yet
            factor *= 1.0 + aimd.growth_per_second * credit
        elif self.throttled_at is None or now - self.throttled_at >= aimd.probe_after_seconds:
            factor *= 1.0 + aimd.increase_per_second * credit
        factor = min(max_factor, factor)
        return replace(self, factor=factor, increased_at=now,
                       counted=self.counted and factor == self.factor)

    def refused_resume(self, now: float, previous_until: float) -> AimdState:
        """A 429 at ``now`` on the fleet's first send after the pause that ran until
        ``previous_until``: one more in a row (``resumes``), and nothing else changes.

        One send tells nothing of the pace: the pause was not enough. Another client on
        the key took the quota as it reopened (measured: a plain loop sending every 250 ms
        beside the fleet on a leaky bucket without burst refused the fleet's first send
        after every 1 s pause, at the same phase each time, and each refusal cut the
        factor as if the pace were at fault, down to ``Aimd.min_factor`` in 13 s), or the
        server's ``Retry-After`` is too short. The pause it publishes backs off longer
        with each in a row, jittered (the engine's ``Backoff``), until a success. During a
        pause (the same burst, another worker first) nothing changes.

        >>> again = AimdState(0.6, throttled_at=10.0).refused_resume(12.0, 11.0)
        >>> again.factor, again.throttled_at, again.resumes
        (0.6, 10.0, 1)
        >>> AimdState(resumes=1).refused_resume(12.0, 13.0).resumes
        1
        """
        if now < previous_until:
            return self
        return replace(self, resumes=self.resumes + 1, resumed_at=now)

    def charged(self, refused: float | None) -> float:
        """The factor a 429 is charged to: the one its send was spaced at (``refused``, if
        known: while the factor climbs, a send's slot was reserved at a lower one), at most
        the factor now.

        >>> AimdState(0.8).charged(0.7), AimdState(0.8).charged(None), AimdState(0.8).charged(0.9)
        (0.7, 0.8, 0.8)
        """
        if refused is not None and math.isfinite(refused) and refused > 0:
            return min(self.factor, refused)
        return self.factor

    def refuses_step(self, now: float, refused: float) -> bool:
        """Whether a 429 at ``now`` on a send spaced at ``refused`` refuses the step just
        reached: before the next step's climb began (after the last step, within
        ``Aimd.step_after_seconds`` of reaching it), at or under the step (slots reserved at
        the pace before go first, so its sends lag the factor) and over the level it came
        from. That level held, and the fleet returns to it (measured, 2x on a sliding log:
        read by its count, such a 429 cut 3 % and stood over the limit; refused again there,
        the cycle cut it to 0.3 of the configured rate, the limit being 0.5; beside another
        client on a fixed window, a last step refused 1.1 s after it was reached was cut 2 %
        by its count, refused again 3 s later and sent back to the level before the first
        step, 0.83 of the share left, in three runs of three).

        >>> reached = AimdState(0.6, increased_at=13.0, base=0.6, stepped_from=0.5)
        >>> [reached.refuses_step(now, at) for now, at in ((12.0, 0.58), (12.0, 0.45), (14.0, 0.58))]
        [True, False, False]
        """
        return (self.stepped_from is not None and self.base is not None
                and self.increased_at is not None and now < self.increased_at
                and self.stepped_from * (1.0 + 1e-9) < refused <= self.base * (1.0 + 1e-9))

    def _searched(self, now: float, aimd: Aimd) -> float | None:
        """The ``ceiling`` the fleet searches for the limit under, in steps: one refused in
        the last ``probe_after_seconds`` (``None``: none, or steps are off)."""
        if (self.ceiling is None or self.throttled_at is None or aimd.step_share <= 0
                or now - self.throttled_at >= aimd.probe_after_seconds):
            return None
        return self.ceiling

    def _at_step(self, now: float, reached: float, target: float, aimd: Aimd) -> AimdState:
        """At ``reached``, a step of the search: ``step_after_seconds`` there before the climb
        to ``target`` (a 429 meanwhile refuses the step: ``refuses_step``)."""
        return replace(self, factor=reached, base=reached, target=target,
                       increased_at=now + aimd.step_after_seconds, stepped_from=self.base)

    def _step(self, now: float, reached: float, aimd: Aimd) -> AimdState | None:
        """At ``reached`` (the target of a climb) with a ``ceiling`` refused in the last
        ``probe_after_seconds``: the next step toward it, ``step_share`` of the way to just
        under it, after ``step_after_seconds`` at this level. ``None``: no room left (within
        ``step_until`` of just under it), or no ceiling to climb to.

        >>> a = Aimd(step_share=0.5, step_after_seconds=3.0, step_until=0.15)
        >>> step = AimdState(0.4, throttled_at=10.0, target=0.5, ceiling=0.8)._step(20.0, 0.5, a)
        >>> step.factor, step.base, round(step.target, 3), step.increased_at
        (0.5, 0.5, 0.642, 23.0)
        >>> AimdState(0.4, throttled_at=10.0, target=0.5, ceiling=0.58)._step(20.0, 0.5, a) is None
        True
        >>> AimdState(0.4, throttled_at=10.0, target=0.5, ceiling=0.8)._step(80.0, 0.5, a) is None
        True
        """
        ceiling = self._searched(now, aimd)
        if ceiling is None:
            return None
        top = ceiling * (1.0 - aimd.below_ceiling)
        if top <= reached * (1.0 + aimd.step_until):
            return None
        return self._at_step(now, reached, reached + (top - reached) * aimd.step_share, aimd)

    def throttled(self, now: float, previous_until: float, new_until: float, aimd: Aimd,
                  sends: float, discovering: bool = False, ok: int | None = None,
                  floor: float = 0.0, refused: float | None = None,
                  cycle: float | None = None, paced: float | None = None) -> AimdState:
        """A 429 at ``now`` while the pause before it ran until ``previous_until``.

        During a pause it is part of the burst that published it: nothing changes.
        Otherwise it is an event: a cut by ``Aimd.cut(sends)`` (``sends``: the
        successes since the fleet resumed; discovering, a first 429 cuts at least by
        ``Aimd.discover_cut``), at most one per ``hold_seconds``. After the first in a
        while, successes climb back to just under the factor of the event from
        ``new_until`` (the end of the pause it publishes) plus ``Aimd.climb_after_seconds``;
        after one that shows the limit is real, they climb in steps toward just under the
        lowest factor refused since then (``ceiling``), ``Aimd.step_share`` of the way each.
        ``ok`` (the key's ``OK`` counter now) is kept, so the next event counts the
        successes since this one.
        ``floor``: the share of the pace the fleet sustained with successes (over the
        recent window, or its best two seconds since the previous event); the limit is
        at least that, so no cut goes below it.
        ``refused``: the factor the refused send was spaced at, when the worker knows it
        (a send's slot is reserved up to one interval per worker ahead, so while the
        factor climbs the refused pace is lower than the factor now): the event is at that
        factor (at most the current one), the ceiling too.
        ``cycle``: the share of the pace at the event the fleet's successes kept up since
        the previous event, its pause included. Refused again at a cut that stood, the
        count read the limiter wrong: a token bucket or a window refills during the pause,
        and the burst it then lets through reads as a pace just over the limit (cuts of
        3-5 %, each a pause). Over a whole cycle, pause included, such a limiter passes
        exactly its rate, and one that stores nothing passes less: the cut goes at least
        as deep as the cycle reads (still at most ``Aimd.decrease``; the ``floor`` still
        holds it up where the fleet was answered at its pace).
        ``paced``: discovering, the share of the factor the fleet's successes kept up over
        its best two whole seconds. The growth runs ahead of the pace (slots are reserved a
        few ahead at the pace before: measured, four processes refused at a rate of 8.8/s
        were sending 4.6/s to a limit of 5/s), so the first 429 cuts to at most that pace,
        just under (and at most to ``Aimd.decrease``); the factor refused is the ceiling the
        fleet steps toward, as after a cut that stands.
        Its ``held`` is the level a climb refused above its base showed to hold: refused over
        it at a level nothing proved, the fleet goes at most halfway back to it, and refused
        over it again, back to it; refused at it, at most to ``Aimd.held_cut`` of it.

        >>> a = Aimd()
        >>> cut = AimdState().throttled(10.0, 0.0, 11.0, a, sends=2)   # refused at once
        >>> cut.factor, cut.target, cut.increased_at   # climbs back from 12 s to 0.98
        (0.5, 0.98, 12.0)
        >>> climbed = replace(cut, factor=0.8)                      # on its way back up
        >>> again = climbed.throttled(16.0, 11.0, 17.0, a, sends=20)   # refused again
        >>> again.factor, again.base, again.ceiling   # the limit is real: back where the
        (0.5, 0.5, 0.8)
        >>> round(again.target, 3), again.increased_at  # climb began, then 30 % up to 0.8
        (0.585, 18.0)
        >>> climbed.throttled(16.0, 11.0, 17.0, a, sends=20, refused=0.7).ceiling  # its send's
        0.7
        >>> near = replace(cut, factor=0.6).throttled(16.0, 11.0, 17.0, a, sends=20)
        >>> near.factor, near.target, near.ceiling   # 0.6 is within 30 %: no steps
        (0.5, 0.5, 0.6)
        >>> lone = AimdState(throttled_at=9.0).throttled(60.0, 10.0, 61.0, a, sends=500)
        >>> lone.factor, lone.target
        (0.98, 0.98)
        >>> AimdState(throttled_at=9.0).throttled(10.0, 11.0, 12.0, a, 5).throttled_at   # in a pause
        9.0
        >>> stood = AimdState(0.86, throttled_at=7.0, target=0.86, counted=True)  # a count's cut
        >>> round(stood.throttled(9.4, 8.0, 10.4, a, sends=23).factor, 3)      # the count: 4 %
        0.823
        >>> round(stood.throttled(9.4, 8.0, 10.4, a, sends=23, cycle=0.59).factor, 3)  # the cycle
        0.497
        >>> round(stood.throttled(9.4, 8.0, 10.4, a, 23, cycle=0.59, refused=0.8).factor, 3)
        0.497
        """
        if now < previous_until:
            return self
        state = replace(self, throttled_at=now, ok_at=ok, resumes=0, stepped_from=None)
        climb = new_until + aimd.climb_after_seconds
        if self.decreased_at is not None and now - self.decreased_at < aimd.hold_seconds:
            # No second cut so soon, but no climbing during this pause either.
            return replace(state, increased_at=max(self.increased_at or climb, climb))
        at = self.charged(refused)
        multiplier = aimd.cut(sends)
        if discovering and self.throttled_at is None:
            multiplier = _read(min(multiplier, aimd.discover_cut), paced, self.factor / at, aimd)
        # One 429 cannot tell a limit from jitter (a cold start's first sends bunch): after
        # the first in a while the fleet climbs back to just under where it came. Another
        # within ``probe_after_seconds`` (while climbing back, or after) shows the limit
        # is real, and so does one while discovering: then the cut stands.
        first = self.throttled_at is None or now - self.throttled_at >= aimd.probe_after_seconds
        if not first and self.counted and self.base is None and not discovering:
            # Refused again at a count's cut that stood: what the whole cycle passed (the
            # event is at ``at``, its refused send's pace).
            multiplier = _read(multiplier, cycle, self.factor / at, aimd)
        proposed = at * multiplier
        base = self.base
        stepped = self.refuses_step(now, at)
        if stepped:
            base = self.stepped_from
        climbing = stepped or (self.target is not None and self.factor < self.target)
        settling = self.decreased_at is not None and now - self.decreased_at < SETTLE_SECONDS
        # Refused at or under the level that held: it holds no more.
        held = self.held if self.held is not None and at > self.held * (1.0 + 1e-9) else None
        halved = self.halved and held is not None
        pinned: float | None = None  # a factor that no floor lifts
        above = base is not None and at > base * (1.0 + 1e-9)
        proven = above and (climbing or settling)  # refused above where it began: it held
        if base is not None and (climbing or settling):
            # Refused on the way up: back where the climb began, which held. Refused where it
            # began (or settling there): as far under as shown.
            proposed = base if climbing and above else min(proposed, base)
            if proven:
                shown = max(held or 0.0, base)
                held, halved = shown, halved and shown == held
        under_held = self.held is not None and held is None
        if under_held:
            # Refused at the level that held (at a limiter's very limit: its jitter): a
            # little under it, once; refused there again, the count decides.
            proposed = max(proposed, at * aimd.held_cut)
        elif held is not None and not proven and not halved:
            # Refused at a level nothing proved (a cut lifted by what the fleet sustained)
            # over one that held: halfway back to it, not as deep as a count still on its
            # way to the gate reads (another client's sends bunch with ours).
            proposed, halved = max(proposed, (held + at) / 2.0), True
        elif held is not None and not proven:
            pinned = held  # refused over it again: back to it
        sustained = self.factor * min(floor, 1.0 - aimd.below_ceiling)
        factor = pinned if pinned is not None else max(aimd.min_factor, proposed, sustained)
        doubt = first and not (discovering and self.throttled_at is None)
        # Refused at this factor: the ceiling, the lowest refused since the last calm.
        # (Discovering, the growth found it: the cut stands, and the fleet steps toward it.)
        ceiling = at if first or self.ceiling is None else min(self.ceiling, at)
        # A cut under the level that held is the margin of its jitter, not a count's reading
        # of a limit: refused at it, the count decides, not the cycle (measured: a cycle of
        # 4.2 s, its 1 s pause included, read 0.76 of a pace the limiter had answered).
        counted = pinned is None and not under_held and math.isclose(factor, at * multiplier)
        cut = replace(state, factor=factor, decreased_at=now, increased_at=climb, ceiling=ceiling,
                      held=held, halved=halved, counted=counted)
        if doubt:
            target = max(factor, at * (1.0 - aimd.below_ceiling))
            return replace(cut, target=target, base=factor, held=None, halved=False)
        # The cut stands, but the limit is somewhere between it and the ceiling: climb
        # there in steps (``_step``), each a share of the way, back here on a 429.
        stands = replace(cut, target=factor, base=None)
        step = stands._step(now, factor, aimd)
        return stands if step is None else replace(step, increased_at=climb)


def _read(multiplier: float, share: float | None, scale: float, aimd: Aimd) -> float:
    """``multiplier``, at most as deep as a reading of the limit: ``share`` of the pace at
    the factor, ``scale`` times the event's (just under it; a cut at most to
    ``Aimd.decrease``). No reading (``None``, zero, not finite): ``multiplier``.

    >>> a = Aimd()
    >>> round(_read(0.8, 0.6, 1.0, a), 3), _read(0.8, None, 1.0, a), _read(0.8, 0.1, 1.0, a)
    (0.588, 0.8, 0.5)
    >>> _read(0.8, 0.9, 1.0, a)   # a reading over the count's cut: the count
    0.8
    """
    if share is None or not math.isfinite(share) or share <= 0:
        return multiplier
    return min(multiplier, max(aimd.decrease, share * scale * (1.0 - aimd.below_ceiling)))


def _factor(value: object) -> float | None:
    """A stored factor, or ``None`` where it is not one (a value written by hand, a foreign
    writer)."""
    factor = _instant(value)
    return factor if factor is not None and math.isfinite(factor) and factor > 0 else None


def _instant(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("an instant must be a number")
    return float(value)


# -- the stats window ---------------------------------------------------------------------------


def stamp_of(now: float) -> int:
    """The one-second bucket of an instant."""
    return math.floor(now / BUCKET_SECONDS)


def _counter(stamp: int, kind: str) -> str:
    """The name of one bucket's counter: ``kind`` is ``r``, ``s`` or ``t``."""
    return f"win:{stamp}:{kind}"


def _successes(counters: Mapping[str, int], stamp: int) -> int:
    return counters.get(_counter(stamp, "s"), 0)


def bucket_counts(now: float, report: Report) -> dict[str, int]:
    """The counters a report adds to (zeros too: the bucket exists): in the bucket of its
    ``at``, when it was seen, else of ``now``. An instant after ``now`` (a worker's estimate
    of the store's clock is good to its round trip) counts now, and one older than the
    window at the window's start.

    >>> bucket_counts(1234.5, Report(requests=2, successes=1))
    {'win:1234:r': 2, 'win:1234:s': 1, 'win:1234:t': 0}
    >>> list(bucket_counts(1234.5, Report(1, 1, at=1232.9)))[0], list(bucket_counts(1234.5,
    ...     Report(1, 1, at=1236.0)))[0], list(bucket_counts(1234.5, Report(1, 1, at=0.0)))[0]
    ('win:1232:r', 'win:1234:r', 'win:1225:r')
    """
    seen = now
    if report.at is not None:
        oldest = now - WINDOW_SECONDS + BUCKET_SECONDS  # in the window's first bucket
        seen = min(now, max(oldest, report.at))
    stamp = stamp_of(seen)
    return {_counter(stamp, kind): count
            for kind, count in zip(_KINDS, (report.requests, report.successes, report.throttled),
                                   strict=True)}


def window_names(now: float) -> tuple[str, ...]:
    """The counters to read for the window around ``now`` (an estimate: one bucket to spare)."""
    stamp = stamp_of(now)
    return tuple(_counter(s, kind) for s in range(stamp - SLOTS, stamp + 2) for kind in _KINDS)


def window_totals(now: float, counters: Mapping[str, int]) -> tuple[float, int, int, int]:
    """``(window_seconds, requests, successes, throttled)`` over the window ending at ``now``.

    The window is shorter while the key is new (its oldest bucket is recent).

    >>> counts = {**bucket_counts(100.2, Report(3, 2, 1)), **bucket_counts(103.7, Report(1, 1, 0))}
    >>> window_totals(104.0, counts)
    (4.0, 4, 3, 1)
    >>> window_totals(200.0, counts)
    (10.0, 0, 0, 0)
    """
    stamp = stamp_of(now)
    totals, oldest = [0, 0, 0], None
    for s in range(stamp - SLOTS + 1, stamp + 1):
        names = [_counter(s, kind) for kind in _KINDS]
        if not any(name in counters for name in names):
            continue
        oldest = s if oldest is None else oldest
        for i, name in enumerate(names):
            totals[i] += counters.get(name, 0)
    window = WINDOW_SECONDS
    if oldest is not None:
        window = max(BUCKET_SECONDS, min(WINDOW_SECONDS, now - oldest * BUCKET_SECONDS))
    return window, totals[0], totals[1], totals[2]


def successes_since(now: float, since: float, counters: Mapping[str, int]) -> int:
    """The successes counted in the window's buckets from the one holding ``since`` to ``now``.

    >>> counts = {**bucket_counts(100.2, Report(3, 2, 1)), **bucket_counts(103.7, Report(4, 4, 0))}
    >>> successes_since(104.0, 103.1, counts), successes_since(104.0, 0.0, counts)
    (4, 6)
    """
    first = max(stamp_of(since), stamp_of(now) - SLOTS + 1)
    return sum(_successes(counters, s) for s in range(first, stamp_of(now) + 1))


def best_pace(now: float, since: float | None, counters: Mapping[str, int]) -> float:
    """The most successes per second the fleet kept up over two whole buckets in a row,
    both after the one holding ``since`` (``None``: anywhere in the window) and before the
    bucket of ``now`` (still filling): a limit it is not over.

    >>> counts = {**bucket_counts(101.5, Report(9, 9)), **bucket_counts(102.5, Report(10, 10)),
    ...           **bucket_counts(103.5, Report(4, 4)), **bucket_counts(104.5, Report(9, 9))}
    >>> best_pace(105.2, None, counts), best_pace(105.2, 102.0, counts), best_pace(104.2, 102.5, counts)
    (9.5, 6.5, 0.0)
    """
    stamp = stamp_of(now)
    first = stamp - SLOTS + 1 if since is None else max(stamp_of(since) + 1, stamp - SLOTS + 1)
    paces = [(_successes(counters, s) + _successes(counters, s + 1)) / (2 * BUCKET_SECONDS)
             for s in range(first, stamp - 1)]
    return max(paces, default=0.0)


def window_full(now: float, counters: Mapping[str, int]) -> bool:
    """Whether the fleet had successes in the window's oldest bucket (it has been sending
    for the whole window, and likely longer).

    >>> window_full(110.5, bucket_counts(101.2, Report(1, 1))), window_full(110.5, {})
    (True, False)
    """
    return _successes(counters, stamp_of(now) - SLOTS + 1) > 0


# -- caps -----------------------------------------------------------------------------------------


def cap_reached(cap: Cap, usage: Usage, now: float) -> QuotaExceededError:
    """The error for a reached cap (the provider name is added by the engine), at ``now``
    on the store's clock: its ``retry_after`` is the seconds to the period's end.

    >>> from geotoolkit.periods import period_of
    >>> label, resets = period_of(1_765_065_600.0, "day", "America/Los_Angeles")
    >>> error = cap_reached(Cap(10, tz="America/Los_Angeles"), Usage(label, 10, resets,
    ...                     "America/Los_Angeles"), 1_765_065_600.0)   # 2025-12-07 00:00Z
    >>> print(*str(error).split("; "), sep=";" + chr(10))
    the daily cap of 10 requests on this key is reached (10 sent on 2025-12-06, America/Los_Angeles);
    it resets at 2025-12-07 00:00 America/Los_Angeles (08:00 UTC)
    >>> error.retry_after / 3600
    8.0
    """
    word, on = ("daily", "on") if cap.period == "day" else ("monthly", "in")
    return QuotaExceededError(
        f"the {word} cap of {cap.limit} requests on this key is reached ({usage.used} sent "
        f"{on} {usage.label}, {cap.tz}); it resets at {reset_text(usage.resets_at, cap.tz)}",
        retry_after=max(0.0, usage.resets_at - now))


# -- the store's clock --------------------------------------------------------------------------


class StoreClock:
    """The store's clock as this host knows it: the offset of the last stamped reply.

    A reply stamped ``server`` between our ``start`` and ``end`` puts the store's
    clock at ``server`` around the middle of the round trip: good to the round
    trip, which is all the strategy needs (the bucket of a report, the period of
    a cap count; a cap's period is then confirmed by the store's own reply).

    >>> clock = StoreClock()
    >>> clock.now(100.0)                                     # nothing known yet: ours
    100.0
    >>> clock.observe(start=100.0, end=100.002, server=160.5)  # a store a minute ahead
    >>> round(clock.now(101.0), 3)
    161.499
    """

    def __init__(self) -> None:
        self.offset = 0.0

    def observe(self, start: float, end: float, server: float) -> None:
        self.offset = server - (start + end) / 2

    def now(self, local: float) -> float:
        """The store's clock when ours reads ``local``."""
        return local + self.offset
