"""The fleet strategy on its own: pure steps with plain numbers, and ``FleetGate`` over a
scripted store (a memory store that hides its clock, as a server does, and can
interleave another worker's writes between two round trips)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest

from geotoolkit.clock import FakeClock
from geotoolkit.errors import ConfigurationError, GateError
from geotoolkit.gate import Aimd, Cap, Report, gate_key
from geotoolkit.gate.fleet import (
    AIMD,
    OK,
    SETTLE_SECONDS,
    SLOTS,
    WINDOW_SECONDS,
    AimdState,
    bucket_counts,
    period_of,
    window_names,
    window_totals,
)
from geotoolkit.gate.memory import MemoryStore
from geotoolkit.gate.primitives import Op, ReadCounters
from geotoolkit.gate.strategy import BEST_PACE_SHARE, FleetGate, fleet_key

KEY = gate_key("api.example.com", "sk-test")
MIDNIGHT = 1_709_251_200.0  # 2024-03-01T00:00:00Z


class ServerLike:
    """A memory store on its own clock that, like a server, does not share it (``clock``
    is None); ``before[n]`` runs just before its n-th round trip (another worker)."""

    backend, blocking, clock = "server-like", False, None

    def __init__(self, server_clock: FakeClock) -> None:
        self.inner = MemoryStore(server_clock)
        self.rounds = 0
        self.before: dict[int, Callable[[], object]] = {}

    def run(self, ops: Sequence[Op]) -> list[Any]:
        self.rounds += 1
        if self.rounds in self.before:
            self.before.pop(self.rounds)()
        return self.inner.run(ops)

    def keys(self, prefix: str = "") -> list[str]:
        return self.inner.keys(prefix)

    def close(self) -> None:
        self.inner.close()


def _gate(server: ServerLike, local: FakeClock | None = None, **aimd: float) -> FleetGate:
    return FleetGate(server, aimd=Aimd(**aimd), clock=local or FakeClock(start=0.0))  # type: ignore[arg-type]


# -- pure steps ---------------------------------------------------------------------------------


def test_the_aimd_steps_with_plain_numbers() -> None:
    a = Aimd(decrease=0.5, hold_seconds=1.0, climb_after_seconds=3.0, recover_seconds=2.0,
             increase_per_second=0.1, probe_after_seconds=0.0, below_ceiling=0.01)
    deep = AimdState().throttled(100.0, 0.0, 101.0, a, sends=5)  # refused after 5 successes
    # ~4/5, or jitter
    assert deep == AimdState(0.8, 100.0, 100.0, 104.0, 0.99, base=0.8, ceiling=1.0, counted=True)
    again = deep.throttled(110.0, 101.0, 111.0, Aimd(decrease=0.5), sends=10)  # within a minute:
    assert (again.factor, again.target) == (pytest.approx(0.72), pytest.approx(0.72))  # stands
    assert again.ceiling == 0.8  # (within 15 % of where it was refused: no steps up to it)
    # Refused after 20: just over (or jitter): back to just under 1.0 from 101 + 3 s.
    cut = AimdState(1.0).throttled(100.0, 0.0, 101.0, a, sends=20)
    assert cut == AimdState(0.95, 100.0, 100.0, 104.0, 0.99, base=0.95, ceiling=1.0,
                           counted=True)
    held = cut.throttled(100.5, 100.4, 103.0, a, 0)  # within the hold: no cut, no climb yet
    assert held == AimdState(0.95, 100.0, 100.5, 106.0, 0.99, base=0.95, ceiling=1.0,
                            counted=True)
    assert cut.throttled(101.0, 101.5, 103.0, a, 0) is cut  # during a pause: the same burst
    assert cut.credited(103.0, 5, a) is cut  # not yet: the pause, then the climb's hold
    up = cut.credited(105.0, 5, a)  # one second of climbing: half the way (2 s)
    assert up.factor == pytest.approx(0.95 + (0.99 - 0.95) / 2) and up.increased_at == 105.0
    # Linear from where the climb began: the other half in the next second, then there.
    assert up.credited(200.0, 5, a).factor == pytest.approx(0.99)
    assert up.credited(200.0, 0, a) is up  # no success, no credit
    at = AimdState(0.99, increased_at=0.0, throttled_at=0.0, target=0.99)
    assert at.credited(0.1, 1, a).factor == pytest.approx(0.99 * 1.01)  # above it: probing
    assert AimdState().credited(5.0, 3, a) == AimdState()  # at the configured rate: nothing
    lone = AimdState(0.9, throttled_at=0.0).throttled(200.0, 10.0, 201.0, a, sends=1000)
    assert (lone.factor, lone.target) == (pytest.approx(0.9 * 0.99), pytest.approx(0.9 * 0.99))


def test_a_cut_that_stands_climbs_in_steps_toward_the_lowest_factor_refused() -> None:
    """Configured at twice the limit, a cold burst refused at 1.0 (cut to half), then the
    climb back refused at 0.8: the fleet returns to where the climb began, and the limit
    lies between there and 0.8. It climbs toward just under 0.8 in steps, each half of
    the way: a step refused is a new ceiling and the fleet returns to the step it came
    from; none is taken within ``step_until`` of just under the ceiling."""
    a = Aimd(decrease=0.5, below_ceiling=0.02, climb_after_seconds=1.0, recover_seconds=2.0,
             step_share=0.5, step_after_seconds=3.0, step_until=0.15, probe_after_seconds=60.0)
    first = AimdState().throttled(0.0, 0.0, 1.0, a, sends=0)
    assert (first.factor, first.target, first.ceiling) == (0.5, 0.98, 1.0)
    climbing = replace(first, factor=0.8, increased_at=3.0)
    stands = climbing.throttled(3.0, 1.0, 4.0, a, sends=0)  # refused at once on the way up
    assert (stands.factor, stands.base, stands.ceiling, stands.increased_at) == (0.5, 0.5, 0.8, 5.0)
    assert stands.target == pytest.approx(0.5 + (0.784 - 0.5) / 2)  # halfway to 0.8 * 0.98
    assert stands.credited(4.5, 3, a) is stands  # the pause, then the climb's hold
    reached = stands.credited(6.0, 3, a).credited(7.0, 3, a)  # two seconds: there
    assert reached.factor == reached.base == pytest.approx(0.642)
    assert reached.increased_at == 10.0  # three seconds at this step before the next
    assert reached.target == pytest.approx(0.642 + (0.784 - 0.642) / 2)
    assert reached.credited(9.0, 3, a) is reached
    last = reached.credited(11.0, 3, a).credited(12.0, 3, a)  # the second step: 0.713
    assert last.factor == last.target == pytest.approx(0.713)  # within 15 % of 0.784: the last
    assert last.credited(20.0, 3, a).factor == last.factor
    # A minute after the last 429 the ceiling is forgotten: a slow probe above the level.
    assert last.credited(63.0, 3, a).factor == pytest.approx(last.factor * 1.002)
    # Refused on the way to the second step, at 0.7: back to the step it came from, and
    # 0.7 is the new ceiling, within 15 % of it: no more steps.
    refused = replace(reached, factor=0.7).throttled(12.0, 4.0, 13.0, a, sends=30)
    assert (refused.factor, refused.ceiling) == (pytest.approx(0.642), 0.7)
    assert refused.target == refused.factor
    # Refused again where the climb began, before it climbed: the level that held is not
    # clean either (at a limiter's very limit, its jitter): a little under it, once
    # (``held_cut``, not the evidence's deepest cut to half), and 0.5 is the ceiling.
    under = stands.throttled(6.0, 4.0, 7.0, a, sends=0)
    assert (under.factor, under.ceiling, under.held) == (0.45, 0.5, None)
    assert under.target == under.factor  # within step_until of just under 0.5: no steps
    # Refused there too: the count decides, and the fleet steps back toward just under 0.45.
    deeper = under.throttled(9.0, 7.0, 10.0, a, sends=0)
    assert (deeper.factor, deeper.ceiling) == (0.225, 0.45)
    assert deeper.target == pytest.approx(0.225 + (0.441 - 0.225) / 2)
    # Discovering too: the cut stands, and the rate refused is the ceiling it steps toward.
    discovered = replace(first, throttled_at=None).throttled(2.0, 1.0, 3.0, a, 0, discovering=True)
    assert (discovered.factor, discovered.base, discovered.ceiling) == (0.25, 0.25, 0.5)
    assert discovered.target == pytest.approx(0.25 + (0.49 - 0.25) / 2)


def test_refused_at_a_step_just_reached_the_fleet_returns_to_the_step_it_came_from() -> None:
    """A step reached, and a 429 before the next step's climb began, on a send spaced at
    or under the step (slots reserved at the pace before go first): that step was refused,
    the level it came from held. Measured (2x on a sliding log): such a 429, read by its
    count, cut 3 % and stood over the limit; refused again, the cycle cut it to 0.3."""
    a = Aimd(decrease=0.5, below_ceiling=0.02, climb_after_seconds=1.0, recover_seconds=2.0,
             step_share=0.5, step_after_seconds=3.0, step_until=0.15, probe_after_seconds=60.0)
    stands = replace(AimdState().throttled(0.0, 0.0, 1.0, a, sends=0), factor=0.8,
                     increased_at=3.0).throttled(3.0, 1.0, 4.0, a, sends=0)
    reached = stands.credited(6.0, 3, a).credited(7.0, 3, a)
    assert (reached.factor, reached.base, reached.stepped_from) == (pytest.approx(0.642), reached.factor, 0.5)
    assert AimdState.from_text(reached.to_text()) == reached
    for refused in (0.62, reached.factor):  # under the step, or at it
        back = reached.throttled(9.0, 4.0, 10.0, a, sends=30, refused=refused)
        assert (back.factor, back.held, back.ceiling) == (0.5, 0.5, refused)
        assert back.stepped_from is None
        assert AimdState.from_text(back.to_text()) == back
        # Refused again at the level that held, on thin evidence (2 sends, which alone
        # would halve it): a little under that level (a limiter's jitter at its limit).
        again = back.throttled(12.0, 10.0, 13.0, a, sends=2)
        assert 0.5 * a.held_cut <= again.factor < 0.5
    # Under the level it came from, the step is not what was refused: the count reads it.
    assert reached.throttled(9.0, 4.0, 10.0, a, sends=30, refused=0.45).factor < 0.45
    # Once the next climb began, a 429 is on its way up: back to the step just reached.
    climbing = replace(reached, factor=0.66, increased_at=10.5)
    assert climbing.throttled(11.0, 4.0, 12.0, a, sends=30).factor == pytest.approx(0.642)
    # The last step (0.713, within 15 % of just under 0.8: no next one) is refused too
    # while its sends catch up with it: back to the step it came from, which held.
    last = reached.credited(11.0, 3, a).credited(12.0, 3, a)
    assert (last.factor, last.base, last.stepped_from) == (pytest.approx(0.713), last.factor,
                                                           pytest.approx(0.642))
    assert last.increased_at == 15.0
    assert AimdState.from_text(last.to_text()) == last
    back = last.throttled(13.1, 4.0, 14.1, a, sends=40)  # a count alone: a 2.5 % cut
    assert (back.factor, back.held) == (pytest.approx(0.642), pytest.approx(0.642))
    assert back.ceiling == pytest.approx(0.713) and back.target == back.factor
    # Past that, a 429 at it is read by the count (the step held for a while).
    assert last.throttled(16.0, 4.0, 17.0, a, sends=40).factor == pytest.approx(0.713 * 0.975)


def test_refused_at_a_lifted_cut_the_fleet_goes_halfway_back_to_the_level_that_held() -> None:
    """Another client on the key, outside the gate, takes 40 %: the cold burst is cut to
    half (doubted), the climb back refused at 0.98 returns the fleet to that half, which
    held, but what the fleet sustained lifts it to 0.63, 5 % over the 0.6 left. Refused
    there 2 s later with a count still on its way to the gate (three successes read as a
    cut to half), the fleet goes halfway back to the level that held, not to 0.32; refused
    over it again, back to it; refused at it, a little under it."""
    a = Aimd()
    cold = AimdState().throttled(1.0, 0.0, 2.0, a, sends=1)
    assert (cold.factor, cold.held) == (0.5, None)  # one 429: a doubt, nothing proven yet
    climbed = replace(cold, factor=0.98, increased_at=5.0)  # back at 0.98 by 5 s
    lifted = climbed.throttled(7.0, 2.0, 8.0, a, sends=2, floor=0.646)
    assert lifted.factor == pytest.approx(0.98 * 0.646)  # what it sustained, over the 0.5
    assert (lifted.held, lifted.base, lifted.ceiling) == (0.5, lifted.factor, 0.98)
    refused = lifted.throttled(9.0, 8.0, 10.0, a, sends=3)
    assert refused.factor == pytest.approx((0.5 + 0.98 * 0.646) / 2)  # not 0.63 * 2/3
    assert (refused.held, refused.ceiling) == (0.5, pytest.approx(0.98 * 0.646))
    assert refused.target == refused.factor  # within step_until of the ceiling: no steps
    assert refused.halved
    # Refused there too: back to the level that held, whatever the fleet sustained (halves
    # could close in for ever on a level over the limit: measured, twelve 429s in 28 s).
    again = refused.throttled(12.0, 10.0, 13.0, a, sends=3, floor=0.98)
    assert (again.factor, again.held) == (0.5, 0.5)
    # Refused at the level that held: it holds no more; a little under it, once.
    under = again.throttled(15.0, 13.0, 16.0, a, sends=3)
    assert (under.held, under.halved) == (None, False)
    assert under.factor == pytest.approx(0.5 * a.held_cut)
    assert under.throttled(18.0, 16.0, 19.0, a, sends=3).factor == pytest.approx(0.45 * 2 / 3)
    # A calm later the next 429 is a doubt again, with nothing proven.
    calm = replace(refused, target=0.8).throttled(200.0, 13.0, 201.0, a, sends=900)
    assert (calm.held, calm.halved) == (None, False) and calm.base == calm.factor
    assert AimdState.from_text(refused.to_text()) == refused
    assert AimdState.from_text("[0.5, null, null, null, 0.5, null, 0.5, 0.8, -1]").held is None


def test_discovery_grows_until_the_first_429_then_settles_under_it() -> None:
    a = Aimd(growth_per_second=0.25, discover_cut=0.8, probe_after_seconds=60.0,
             climb_after_seconds=0.0)
    state = AimdState(1.0, increased_at=0.0)  # one request per second to start with
    for second in range(1, 11):
        state = state.credited(float(second), 1, a, max_factor=1000.0)
    assert state.factor == pytest.approx(1.25 ** 10)  # ~9.3/s after ten clean seconds
    throttled = state.throttled(10.5, 0.0, 11.5, a, sends=60, discovering=True)
    assert throttled.factor == pytest.approx(0.8 * 1.25 ** 10)  # under where 429s began
    # After it: no fast growth any more, and no probe before a minute has passed.
    settled = throttled.credited(12.5, 1, a, max_factor=1000.0)
    assert settled.factor == throttled.factor
    assert settled.credited(80.0, 1, a, max_factor=1000.0).factor > settled.factor


def test_discovering_the_first_429_cuts_to_the_pace_the_fleet_kept_not_the_rate_it_grew_to() -> None:
    """The discovered rate grows ahead of the fleet's pace (slots are reserved a few ahead
    at the pace before): four processes were refused at 8.8/s while sending 4.6/s to a
    real nginx limiting to 5/s, and a cut by 0.8 left them at 7.0/s, over the limit. The
    cut goes to the pace they kept, just under, and the rate refused is the ceiling."""
    a = Aimd(discover_cut=0.8, step_share=0.3, step_until=0.3, below_ceiling=0.02)
    grown = AimdState(9.1, increased_at=17.0)
    # Its best two seconds: 4.6/s, a share 0.505 of the rate it grew to.
    cut = grown.throttled(17.7, 0.0, 18.7, a, sends=50, discovering=True, refused=8.79,
                          paced=4.6 / 9.1)
    assert cut.factor == pytest.approx(4.6 * 0.98)
    assert cut.ceiling == 8.79 and cut.base == cut.factor
    assert cut.target == pytest.approx(cut.factor + (8.79 * 0.98 - cut.factor) * 0.3)
    # Without the pace, a cut by 0.8 of the rate refused (the old reading).
    assert grown.throttled(17.7, 0.0, 18.7, a, sends=50, discovering=True,
                           refused=8.79).factor == pytest.approx(0.8 * 8.79)
    # A pace that says more than the 0.8 cut changes nothing; one that says almost
    # nothing (no whole seconds counted yet) cuts at most to ``decrease``.
    fast = AimdState(5.2, increased_at=17.0)
    assert fast.throttled(17.7, 0.0, 18.7, a, sends=50, discovering=True,
                          paced=0.99).factor == pytest.approx(0.8 * 5.2)
    assert grown.throttled(17.7, 0.0, 18.7, a, sends=50, discovering=True,
                           paced=0.01).factor == pytest.approx(0.5 * 9.1)
    # Not discovering, or not the first 429: the pace is not read.
    assert grown.throttled(17.7, 0.0, 18.7, a, sends=50, paced=0.5).factor == pytest.approx(
        grown.throttled(17.7, 0.0, 18.7, a, sends=50).factor)


def test_the_window_counts_one_second_buckets() -> None:
    counts: dict[str, int] = {}
    for at, report in [(95.5, Report(9, 9, 0)), (100.1, Report(2, 1, 1)), (104.9, Report(3, 3, 0))]:
        for name, n in bucket_counts(at, report).items():
            counts[name] = counts.get(name, 0) + n
    assert window_totals(104.0, counts) == (9.0, 14, 13, 1)  # buckets 95 to 104
    assert window_totals(105.0, counts) == (5.0, 5, 4, 1)  # the 95 s bucket has left
    assert window_totals(111.0, counts) == (7.0, 3, 3, 0)  # only the 104 s bucket is left
    assert window_totals(120.0, counts) == (WINDOW_SECONDS, 0, 0, 0)
    assert len(window_names(105.0)) == 3 * (SLOTS + 2)
    assert set(bucket_counts(104.9, Report(1))) <= set(window_names(105.0))


def test_a_report_counts_in_the_second_its_answers_came_not_when_it_is_flushed() -> None:
    """A worker flushes its counts with its next gate call, up to an interval per worker
    later; stamped with when they were seen, two seconds answered at 9/s and flushed late
    stay two seconds at 9/s (counted at the flush, a lump of 18 in one second read as a
    best pace over the limit)."""
    server = ServerLike(FakeClock(start=MIDNIGHT + 0.5))
    clock = server.inner.clock
    gate = _gate(server, local=clock)  # type: ignore[arg-type]
    gate.state(KEY)
    clock.advance(2.0)  # type: ignore[attr-defined]
    gate.record(KEY, Report(9, 9, at=MIDNIGHT + 0.6))
    gate.record(KEY, Report(9, 9, at=MIDNIGHT + 1.6))
    gate.record(KEY, Report(1, 1, at=MIDNIGHT + 9.0))  # a stamp after now counts now
    seen = server.inner.read_counters(KEY, list(window_names(clock.now())))
    successes = {name: n for name, n in seen.items() if name.endswith(":s")}
    first = int(MIDNIGHT)
    assert successes == {f"win:{first}:s": 9, f"win:{first + 1}:s": 9, f"win:{first + 2}:s": 1}
    assert gate.stats(KEY).successes == 19


# -- a store that does not share its clock ---------------------------------------------------------


def test_cap_periods_follow_the_store_calendar_not_this_host() -> None:
    server = ServerLike(FakeClock(start=MIDNIGHT - 0.5))  # 23:59:59.5 on 2024-02-29
    gate = _gate(server, FakeClock(start=0.0))  # this host believes it is 1970
    first = gate.reserve(KEY, 0.0, cap=Cap(5))
    assert first.usage is not None and first.usage.period == "2024-02-29"  # corrected
    assert gate.usage(KEY).period == "2024-02-29" and gate.usage(KEY).used == 1
    assert server.inner.read_counters(KEY, ["1970-01-01"], durable=True) in ({}, {"1970-01-01": 0})
    server.inner.clock.advance(1.0)  # type: ignore[attr-defined]  # midnight on the store
    assert gate.usage(KEY) == gate.usage(KEY, "day")
    assert gate.usage(KEY).period == "2024-03-01" and gate.usage(KEY).used == 0
    assert gate.usage(KEY, "month").period == "2024-03"
    assert gate.reserve(KEY, 0.0, cap=Cap(5)).usage.period == "2024-03-01"  # type: ignore[union-attr]


def test_the_stats_window_follows_the_store_clock_once_it_is_known() -> None:
    server = ServerLike(FakeClock(start=MIDNIGHT))
    gate = _gate(server, FakeClock(start=5_000.0))  # far behind the store
    gate.state(KEY)  # one stamped reply: the offset is known
    stats = gate.record(KEY, Report(3, 2, 1), worker="w")
    assert (stats.requests, stats.successes, stats.throttled, stats.workers_active) == (3, 2, 1, 1)
    assert stats.now == MIDNIGHT


def test_a_reservation_at_a_factor_cut_meanwhile_reserves_the_missing_spacing() -> None:
    server_clock = FakeClock(start=MIDNIGHT)
    server = ServerLike(server_clock)
    one, two = _gate(server, decrease=0.5), _gate(server, decrease=0.5)
    one.reserve(KEY, 10.0)  # one knows the factor: 1.0
    two.pause(KEY, 0.0, rate_limited=True)
    two.pause(KEY, 0.0, rate_limited=True)  # two 429s in a row: cut to 0.5
    stale = one.reserve(KEY, 10.0)  # paced at 1.0, learns 0.5 in the same round trip
    assert stale.rate_factor == 1.0
    after = one.reserve(KEY, 10.0)
    assert after.rate_factor == 0.5
    # 20 s after the stale slot, as if it had been reserved at 0.5: the spacing was added.
    assert after.now + after.wait == pytest.approx(stale.now + stale.wait + 20.0)


def test_a_429_racing_a_success_credit_still_cuts() -> None:
    server = ServerLike(FakeClock(start=MIDNIGHT))
    gate = _gate(server, decrease=0.5, hold_seconds=0.0)
    gate.pause(KEY, 0.0, rate_limited=True)  # a first 429: throttled_at recorded
    text = server.inner.values(fleet_key(KEY), AIMD)[AIMD]
    credited = AimdState.from_text(text)

    def another_worker_credits() -> None:  # between our read and our compare-and-set
        moved = AimdState(0.9, credited.decreased_at, credited.throttled_at, MIDNIGHT)
        assert server.inner.set_value(fleet_key(KEY), AIMD, moved.to_text(), ttl_seconds=60,
                                      only_if=text)

    server.before[server.rounds + 2] = another_worker_credits
    server.inner.clock.advance(1.0)  # type: ignore[attr-defined]
    gate.pause(KEY, 0.0, rate_limited=True)  # our 429 opens the pause; our swap fails, then retries
    assert gate.stats(KEY).rate_factor == pytest.approx(0.45)  # the credited 0.9, cut once


def test_a_429_of_a_burst_that_another_worker_published_does_not_cut_again() -> None:
    server = ServerLike(FakeClock(start=MIDNIGHT))
    one, two = _gate(server, decrease=0.5, hold_seconds=0.0), _gate(server, decrease=0.5,
                                                                      hold_seconds=0.0)
    one.pause(KEY, 0.0, rate_limited=True)
    server.inner.clock.advance(1.0)  # type: ignore[attr-defined]
    # two's 429 lands between one's read and one's publication: one is part of two's burst.
    server.before[server.rounds + 2] = lambda: two.pause(KEY, 30.0, rate_limited=True)
    one.pause(KEY, 30.0, rate_limited=True)
    # The first 429 cut to 0.5, two's to 0.25; one's was part of two's burst: no third cut.
    assert one.stats(KEY).rate_factor == 0.25 and one.state(KEY).epoch == 2


def test_a_first_reservation_reads_the_factor_before_reserving() -> None:
    server = ServerLike(FakeClock(start=MIDNIGHT))
    cut = AimdState(0.25, MIDNIGHT, MIDNIGHT, MIDNIGHT).to_text()
    server.inner.set_value(fleet_key(KEY), AIMD, cut, ttl_seconds=60)
    gate = _gate(server)
    first, second = gate.reserve(KEY, 1.0), gate.reserve(KEY, 1.0)
    assert (first.rate_factor, second.wait) == (0.25, pytest.approx(4.0))
    assert server.rounds == 3


def test_periods_used_by_the_strategy_are_utc() -> None:
    assert period_of(MIDNIGHT - 0.001, "day") == ("2024-02-29", MIDNIGHT)
    assert period_of(MIDNIGHT, "month")[0] == "2024-03"


def test_a_429_soon_after_a_climb_back_returns_to_where_the_climb_began() -> None:
    """The factor is back at its ceiling within seconds, the fleet's pace a little later
    (slots reserved at the lower pace go first): a 429 then, whatever the answers counted
    during the climb, shows the climb went too far. Later, it is evidence like any other."""
    a = Aimd()
    cut = AimdState(1.0).throttled(100.0, 0.0, 101.0, a, sends=1)  # refused at once
    assert (cut.factor, cut.base) == (0.5, 0.5)
    back = replace(cut, factor=cut.target)  # climbed back to 0.98 by 104 s
    soon = back.throttled(100.0 + SETTLE_SECONDS - 1.0, 101.0, 110.0, a, sends=50)
    assert soon.factor == pytest.approx(0.5)
    later = back.throttled(100.0 + SETTLE_SECONDS + 1.0, 101.0, 112.0, a, sends=50)
    assert later.factor == pytest.approx(0.98 * (1 - 1 / 50))


def test_a_429_soon_after_a_cold_cut_does_not_undo_seconds_answered_near_the_pace() -> None:
    """A cold start's 429 cuts to half; the fleet climbs back and is answered at 8/s for
    two whole seconds; then a 429 of jitter, within the seconds after the cut that would
    send it back to where its climb began. The limit is not under what was just answered:
    the cut stops at the best two seconds since the first 429 (measured on nginx without
    burst: this 429 used to hold a cold fleet at half its pace for the rest of its run)."""
    server = ServerLike(FakeClock(start=MIDNIGHT + 0.5))
    clock = server.inner.clock
    gate = _gate(server, local=clock)  # type: ignore[arg-type]
    gate.reserve(KEY, 0.1)  # 10/s
    gate.pause(KEY, 1.0, rate_limited=True)  # refused at once: cut to half
    assert gate.stats(KEY).rate_factor == pytest.approx(0.5)
    for answered in (0, 3, 8, 8):  # the pause, the climb, then two seconds answered at 8/s
        clock.advance(1.0)  # type: ignore[attr-defined]
        gate.record(KEY, Report(answered, answered))
    clock.advance(1.0)  # type: ignore[attr-defined]
    back = gate.stats(KEY).rate_factor
    assert back == pytest.approx(0.98)  # climbed back
    gate.pause(KEY, 1.0, rate_limited=True)  # 5 s after the cut: would return to 0.5
    assert gate.stats(KEY).rate_factor == pytest.approx(back * 8 * BEST_PACE_SHARE / (10 * back))


def test_refused_again_at_a_cut_that_stood_the_cut_reads_the_whole_cycle() -> None:
    """A token bucket (10 tokens, 10/s) under a fleet configured at 20/s: each 1 s pause
    refills the bucket, the fleet spends it at 17/s and is refused 1.4 s later, after 24
    successes. Counted, that reads as a pace 4 % over the limit, and every cycle cut 4 %
    (measured: seven 429s a run). Over the whole cycle, pause included, the bucket passed
    10/s: refused again at a cut that stood, the fleet goes there."""
    server = ServerLike(FakeClock(start=MIDNIGHT + 0.5))
    clock = server.inner.clock
    gate = _gate(server, local=clock)  # type: ignore[arg-type]
    gate.reserve(KEY, 0.05)  # configured at 20/s
    gate.record(KEY, Report(20, 20))  # answers long ago: the window holds only the cycle
    clock.advance(WINDOW_SECONDS + 1.0)  # type: ignore[attr-defined]
    ok = int(server.inner.run([ReadCounters(KEY, (OK,))])[0][OK])
    now = clock.now()  # type: ignore[attr-defined]
    stood = AimdState(0.86, now, now, now + 2.0, target=0.86, ok_at=ok, ceiling=0.88,
                      counted=True)
    server.inner.set_value(fleet_key(KEY), AIMD, stood.to_text(), ttl_seconds=60)
    clock.advance(1.0)  # type: ignore[attr-defined]  # the pause
    for answered in (12, 12):  # the refilled bucket, spent at 17/s
        clock.advance(0.7)  # type: ignore[attr-defined]
        gate.record(KEY, Report(answered, answered))
    gate.pause(KEY, 1.0, rate_limited=True)
    factor = gate.stats(KEY).rate_factor
    assert Aimd().cut(23) * 0.86 > 0.82  # what the count alone reads
    # 24 successes in 2.4 s: 10/s, 0.58 of the 17.2/s the fleet was paced at, 2 % under.
    assert factor == pytest.approx(0.86 * 24 / 2.4 / 17.2 * 0.98, rel=0.02)
    assert factor * 20 < 10.0  # under the bucket's rate
    # A level the count did not set (a climb's start, a step's return) says nothing of the
    # count when it is refused: the count decides (measured: another client's 40 % on a
    # 1 s window, a step's return cut to 0.73 of itself by the cycle, its pause included).
    returned = replace(stood, counted=False)
    again = returned.throttled(now + 3.4, now + 1.0, now + 4.4, Aimd(), sends=23, cycle=0.5)
    assert again.factor == pytest.approx(0.86 * Aimd().cut(23))


def test_each_429_event_logs_its_reading_and_cut_at_debug_without_the_api_key(
        caplog: pytest.LogCaptureFixture) -> None:
    """Why the fleet slowed down, one line per event: the factor before and after and what
    the event was read from; a 429 of the same burst (inside the pause) changes nothing and
    logs nothing, and the API key behind the gate key never appears."""
    server = ServerLike(FakeClock(start=MIDNIGHT + 0.5))
    clock = server.inner.clock
    gate = _gate(server, local=clock)  # type: ignore[arg-type]
    gate.reserve(KEY, 0.05)
    clock.advance(2.0)  # type: ignore[attr-defined]
    gate.record(KEY, Report(10, 10))
    with caplog.at_level("DEBUG", logger="geotoolkit.gate"):
        gate.pause(KEY, 1.0, rate_limited=True)
        clock.advance(0.2)  # type: ignore[attr-defined]
        gate.pause(KEY, 1.0, rate_limited=True)  # the same burst
    lines = [r.getMessage() for r in caplog.records if r.name == "geotoolkit.gate"]
    assert len(lines) == 1
    factor = gate.stats(KEY).rate_factor
    assert factor < 1.0
    assert f"factor 1 -> {factor:.4g}" in lines[0]
    assert "successes since the last event" in lines[0] and KEY in lines[0]
    assert "sk-test" not in caplog.text


def test_a_claim_stands_when_its_realignment_fails() -> None:
    """Moving the slots behind a queue of claims is a second round trip: if the store fails
    it, the claim (already spaced on the store) is still answered, and the next claim that
    waits realigns."""
    server = ServerLike(FakeClock(start=1000.0))
    gate = _gate(server)
    gate.reserve(KEY, 10.0)  # the next slot: +10 s
    gate.push(KEY, 30.0)  # the next claim: +30 s
    failed: list[str] = []

    def store_down() -> None:
        failed.append("realign")
        raise GateError("the store is down", backend="server-like")

    server.before[server.rounds + 2] = store_down  # the claim's second round trip
    assert gate.claim(KEY, 10.0).wait == pytest.approx(30.0)
    assert failed == ["realign"] and gate.state(KEY).tat == pytest.approx(1010.0)
    assert gate.claim(KEY, 10.0).wait == pytest.approx(40.0)  # and now it moves them
    assert gate.state(KEY).tat == pytest.approx(1000.0 + 10.0 + 40.0 - 2.5)


class PerStatementClock(ServerLike):
    """A store that reads its clock once per operation (PostgreSQL's ``clock_timestamp()``
    in one statement each), ``step`` seconds passing between two."""

    def __init__(self, server_clock: FakeClock, step: float) -> None:
        super().__init__(server_clock)
        self.server_clock, self.step = server_clock, step

    def run(self, ops: Sequence[Op]) -> list[Any]:
        results = []
        for op in ops:
            results += self.inner.run([op])
            self.server_clock.advance(self.step)
        return results


def test_a_claim_is_due_at_its_slot_not_when_the_store_read_its_state() -> None:
    """The claim's slot is read first, the pause after it: on a store that reads its clock
    per statement, 4 ms later. The send is due at the slot (the instant the next claim is
    spaced from), not 4 ms after it: then the next send would land 4 ms closer than the
    spacing, which a limiter without burst refuses."""
    server_clock = FakeClock(start=1000.0)
    gate = _gate(PerStatementClock(server_clock, step=0.004))  # type: ignore[arg-type]
    first = gate.claim(KEY, 0.1)  # due at once: at its slot, 1000.0
    assert first.now + first.wait == pytest.approx(1000.0)
    assert first.wait == pytest.approx(-0.004)  # the state was read 4 ms after the slot
    second = gate.claim(KEY, 0.1)  # spaced 100 ms from the first's slot
    assert second.now + second.wait == pytest.approx(1000.1)


@pytest.mark.parametrize("bad", [{"held_cut": 0.0}, {"held_cut": 1.5}, {"decrease": 0.0},
                                 {"step_share": -0.1}, {"hold_seconds": float("nan")}])
def test_aimd_settings_out_of_range_are_configuration_errors(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError, match=next(iter(bad))):
        Aimd(**bad)


def test_the_fleets_first_429_in_its_first_second_is_not_read_from_its_count(
        caplog: pytest.LogCaptureFixture) -> None:
    """Configured at 20/s on a limit of 10/s, a cold fleet is refused 0.6 s after its first
    send, with 5 successes counted. Counted, that reads as a pace a fifth over the limit: a
    cut to 0.8, still over it, refused again at once and cut by its count again (measured:
    a 1 s window at 2x, three to four 1 s pauses in a 20 s run). Before a whole second of
    answers, the count reads what a limiter lets through before its first period ends (a
    window's count, a bucket's burst), not the pace: the cut is ``Aimd.decrease``. The
    same count after two whole seconds of answers is read."""
    server = ServerLike(FakeClock(start=MIDNIGHT + 0.2))
    clock = server.inner.clock
    gate = _gate(server, local=clock)  # type: ignore[arg-type]
    gate.reserve(KEY, 0.05)  # configured at 20/s
    clock.advance(0.3)  # type: ignore[attr-defined]
    gate.record(KEY, Report(6, 6))
    clock.advance(0.3)  # type: ignore[attr-defined]
    with caplog.at_level("DEBUG", logger="geotoolkit.gate"):
        gate.pause(KEY, 1.0, rate_limited=True)
    assert gate.stats(KEY).rate_factor == pytest.approx(Aimd().decrease)
    assert Aimd().cut(5) == pytest.approx(0.8)  # what the count alone reads
    # The log shows the count that was not read, and why.
    assert "(5 successes since the last event" in caplog.text
    assert "in the fleet's first second: its count not read" in caplog.text

    warm = ServerLike(FakeClock(start=MIDNIGHT + 0.2))
    clock = warm.inner.clock
    gate = _gate(warm, local=clock)  # type: ignore[arg-type]
    gate.reserve(KEY, 0.05)
    gate.record(KEY, Report(1, 1))
    clock.advance(2.1)  # type: ignore[attr-defined]  # answered since two seconds ago
    gate.record(KEY, Report(5, 5))
    clock.advance(0.1)  # type: ignore[attr-defined]
    gate.pause(KEY, 1.0, rate_limited=True)
    assert gate.stats(KEY).rate_factor == pytest.approx(Aimd().cut(5))


def test_a_first_429_before_any_answer_is_reported_is_read_as_the_first_second(
        caplog: pytest.LogCaptureFixture) -> None:
    """A cold fleet at 2x on a leaky bucket without burst is refused on its second send,
    60 ms after its first, whose answer has not reached the gate yet: nothing is counted.
    The window of an empty record reads whole (10 s), and the first-second rule did not
    apply (measured: in 1 of 3 such runs the event's reading lacked it). The cut was the
    same (no count, half), but the reading said nothing of why."""
    server = ServerLike(FakeClock(start=MIDNIGHT + 0.2))
    clock = server.inner.clock
    gate = _gate(server, local=clock)  # type: ignore[arg-type]
    gate.reserve(KEY, 0.05)  # configured at 20/s
    clock.advance(0.06)  # type: ignore[attr-defined]
    with caplog.at_level("DEBUG", logger="geotoolkit.gate"):
        gate.pause(KEY, 1.0, rate_limited=True)
    assert gate.stats(KEY).rate_factor == pytest.approx(Aimd().decrease)
    assert "in the fleet's first second: its count not read" in caplog.text


def test_a_429_after_a_calm_with_nothing_on_record_logs_the_calm_not_a_count(
        caplog: pytest.LogCaptureFixture) -> None:
    """A fleet answered for 12 s at 10/s, never paused, then refused once: the calm began
    before anything on record, so its length is unknown (measured: the DEBUG line read
    "1.78e+10 successes since the last event", the calm since 1970 at the pace). The cut
    is the least one; the line says what it was read from."""
    server = ServerLike(FakeClock(start=MIDNIGHT + 0.2))
    clock = server.inner.clock
    gate = _gate(server, local=clock)  # type: ignore[arg-type]
    gate.reserve(KEY, 0.1)
    for _ in range(12):
        gate.record(KEY, Report(10, 10))
        clock.advance(1.0)  # type: ignore[attr-defined]
    with caplog.at_level("DEBUG", logger="geotoolkit.gate"):
        gate.pause(KEY, 1.0, rate_limited=True)
    assert gate.stats(KEY).rate_factor == pytest.approx(1.0 - Aimd().below_ceiling)
    assert "(a calm since before anything on record" in caplog.text
    assert "e+" not in caplog.text


def test_refused_again_under_the_level_that_held_the_count_decides_not_the_cycle() -> None:
    """2x on a leaky bucket with no burst, 1 200 rows (docs/fleet-benchmark.md, "Beyond the
    targets"): the climb refused just over 0.5 showed 0.5 held; a jitter 429 there after
    110 successes was cut by its count to 0.49; another at 0.49, 30 successes later, was
    read by the cycle rule (4.2 s, its 1 s pause included: 0.756 of the pace) and cut to
    0.363, 27 % under the limit for the next minute. The cut under the level that held is
    the margin of its jitter, not a count's reading of a limit: refused at it, the count
    decides (as ``Aimd.held_cut`` says), and only a cut the count set after that is
    checked against the cycle."""
    a = Aimd()
    cold = AimdState().throttled(0.0, 0.0, 1.0, a, sends=0)
    climbing = replace(cold, factor=0.78, increased_at=2.0)
    back = climbing.throttled(3.3, 1.0, 4.3, a, sends=17, refused=0.532, floor=0.466)
    assert (back.factor, back.held, back.ceiling) == (0.5, 0.5, 0.532)
    jitter = back.throttled(15.4, 4.3, 16.4, a, sends=110, refused=0.5, floor=0.909,
                            cycle=0.811)
    assert jitter.factor == pytest.approx(0.49) and jitter.held is None
    again = jitter.throttled(19.7, 16.4, 20.7, a, sends=30, refused=0.49, floor=0.741,
                             cycle=0.756)
    assert again.factor == pytest.approx(0.49 * a.cut(30))  # the count: 3 %, not 26 %
    assert AimdState.from_text(again.to_text()) == again
    # Refused at that count's cut too: now the count may have misread, the cycle decides.
    third = again.throttled(24.0, 20.7, 25.0, a, sends=30, refused=again.factor, floor=0.5,
                            cycle=0.7)
    assert third.factor == pytest.approx(again.factor * 0.7 * (1 - a.below_ceiling))
