"""The fleet contract for every gate backend: stats, heartbeats, adaptive pacing, caps.

Same assertions on memory, SQLite, Redis and PostgreSQL (the ``store`` fixture).
Nothing waits on the wall clock: long calms are produced by moving a stored
instant into the past (``_backdate``), new periods by a FakeClock (host-clock
gates) or by ageing the stored period label (server gates).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from geotoolkit.clock import FakeClock
from geotoolkit.errors import QuotaExceededError
from geotoolkit.gate import Aimd, Cap, Gate, MemoryGate, Report, SQLiteGate, gate_key
from geotoolkit.gate.fleet import AIMD, WINDOW_SECONDS, AimdState, period_of
from geotoolkit.gate.primitives import AddCounters, ReadState
from geotoolkit.gate.strategy import fleet_key

TOL = 0.25


def throttle_twice(gate: Any, key: str, seconds: float = 0.0) -> None:
    """Two 429s in a row, nothing sent between: the first cuts the deepest (refused at once),
    the second falls within the hold after it (held long enough for it, however slow the
    machine is between the two calls)."""
    aimd = gate.aimd
    gate.pause(key, 0.0, rate_limited=True)
    gate.aimd = replace(aimd, hold_seconds=max(aimd.hold_seconds, 3600.0))
    try:
        gate.pause(key, seconds, rate_limited=True)
    finally:
        gate.aimd = aimd


def paced(gate: Any, key: str) -> None:
    """Tell ``gate`` the fleet sends at 1000/s on ``key``: the few successes of a test are
    then a negligible share of its pace, so the floors a cut keeps (the pace sustained over
    the window, the best two seconds) stay out of it whatever time passes between calls."""
    gate.reserve(key, 0.001)


# -- reservations and pauses -----------------------------------------------------------


def test_reserve_reports_the_slot_epoch_and_factor(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host)
    first = gate.reserve(key, 10.0, horizon=15.0)
    assert (first.reserved, first.epoch, first.rate_factor, first.usage) == (True, 0, 1.0, None)
    # Due at once: on the slot's own instant, which a store that reads its clock once per
    # statement (PostgreSQL) reached before it read the state (a wait just under 0).
    assert -TOL <= first.wait <= 1e-9
    assert first.now == pytest.approx(gate.state(key).now, abs=TOL)
    second = gate.reserve(key, 10.0, horizon=15.0)
    assert second.reserved and second.wait == pytest.approx(10.0, abs=TOL)
    beyond = gate.reserve(key, 10.0, horizon=15.0)
    assert not beyond.reserved and beyond.wait == pytest.approx(20.0, abs=TOL)
    gate.pause(key, 60.0)
    assert gate.reserve(key, 10.0).epoch == 1


def test_claims_space_sends_as_they_leave_and_read_the_pause(store: Any, host: str) -> None:
    one, two = store.open(), store.open()
    key = gate_key(host)
    slot = one.state(key)  # (no slot reserved: the gates do not know the fleet's pace, so
    first = one.claim(key, 10.0)  # the queue of claims below leaves the slots be)
    # Due at once: on the slot's own instant, which a store that reads its clock once per
    # statement (PostgreSQL) reached before it read the state (a wait just under 0).
    assert -TOL <= first.wait <= 1e-9
    assert (first.pause_remaining, first.epoch) == (0.0, slot.epoch)
    # Another worker's send leaving now (its slot was late, or early) waits for the spacing,
    # whatever the schedule of slots says; claims are never refused.
    assert two.claim(key, 10.0).wait == pytest.approx(10.0, abs=TOL)
    assert one.claim(key, 10.0).wait == pytest.approx(20.0, abs=TOL)
    state = one.state(key)
    assert state.tat <= state.now  # slots: their own state
    assert two.claim(key, 10.0).wait == pytest.approx(30.0, abs=TOL)  # claims queue: 40 s
    two.pause(key, 30.0, cause="Retry-After from api.example.com: 30 s")
    paused = one.claim(key, 10.0)
    assert paused.pause_remaining == pytest.approx(30.0, abs=TOL) and paused.epoch == slot.epoch + 1
    # The pause voids the queued claims: the spacing restarts at its end, not behind them.
    assert paused.wait == pytest.approx(30.0, abs=TOL)
    # The spacing state is not a gate key of its own.
    listed = list(one.keys())  # a gate's keys(), not a mapping's
    assert key in listed and not any(k.endswith("#sent") for k in listed)


def test_late_sends_count_how_far_they_pushed_the_claims(store: Any, host: str) -> None:
    """Each push adds its seconds to a count read with every claim and state: a send claimed
    before a push reads, before it leaves, how far the claims after it moved. The count is
    kept beside the spacing state, not as a gate key of its own."""
    one, two = store.open(), store.open()
    key = gate_key(host)
    assert one.state(key).pushed == 0.0
    assert -TOL <= one.claim(key, 10.0).wait <= 1e-9  # due at once (see above)
    claimed = two.claim(key, 10.0)  # due in 10 s, claimed before the pushes
    assert claimed.wait == pytest.approx(10.0, abs=TOL) and claimed.pushed == 0.0
    one.push(key, 0.0034)  # the first send left 3.4 ms late
    one.push(key, 0.0)  # (nothing to count)
    assert two.state(key).pushed == pytest.approx(0.0034, abs=1e-6)
    later = two.claim(key, 10.0)  # claimed after it: spaced by it, and knows it
    assert later.wait == pytest.approx(20.0034, abs=TOL) and later.pushed == pytest.approx(0.0034)
    one.push(key, 1.5)
    assert one.state(key).pushed - claimed.pushed == pytest.approx(1.5034, abs=1e-6)
    one.reserve(key, 10.0)  # a slot: the key has a pacing state of its own
    listed = list(one.keys(key))
    assert key in listed and not any(k.endswith("#sent") for k in listed)


def test_slots_are_moved_behind_a_queue_of_claims_once(store: Any, host: str) -> None:
    """Claims queued behind the slots (late sends' pushes add up, slots at a climb's target)
    hold every send back while the slots keep their pace: a claim that waits more than half
    a spacing moves the slots' state behind the queue, once for the slots reserved so far."""
    one, two = store.open(), store.open()
    key = gate_key(host)
    assert one.reserve(key, 10.0).wait == pytest.approx(0.0, abs=1e-9)  # the next slot: +10 s
    assert two.reserve(key, 10.0).wait == pytest.approx(10.0, abs=TOL)  # ... +20 s
    start = one.state(key).now
    assert one.claim(key, 3.0).wait == pytest.approx(0.0, abs=TOL)  # the next claim at +3 s
    assert two.claim(key, 10.0).wait == pytest.approx(3.0, abs=TOL)  # under half a spacing
    seen = one.store.run([ReadState(key)])[0]
    assert seen.tat == pytest.approx(start + 20.0, abs=TOL)  # the slots kept
    one.push(key, 11.0)  # that send left 11 s late: the next claim at +24 s
    # The next claim waits 24 s: the slots reserved from now on come due with their
    # claims (+41.5 s: the queue, less a quarter spacing)...
    assert one.claim(key, 10.0).wait == pytest.approx(24.0, abs=TOL)
    assert one.state(key).tat == pytest.approx(start + 41.5, abs=TOL)
    # ... once: a claim that saw the same queue at once moves nothing, and neither does the
    # claim of a slot reserved before (it came due before +41.5 s).
    two._realign(key, 24.0, seen, 1.0, None)
    assert two.claim(key, 10.0).wait == pytest.approx(34.0, abs=TOL)
    assert one.reserve(key, 10.0).wait == pytest.approx(41.5, abs=TOL)


def test_a_claim_beyond_any_queue_moves_no_slots(store: Any, host: str) -> None:
    """A claim asking more than a hundred spacings is not a queue of sends (a spacing state
    that is off: a store whose clock stepped back): the engine does not wait for it, and the
    slots are not moved behind it (the fleet would be parked for as long)."""
    gate = store.open()
    key = gate_key(host)
    assert gate.reserve(key, 1.0).wait == pytest.approx(0.0, abs=1e-9)  # the next slot: +1 s
    start = gate.state(key).now
    gate.push(key, 3600.0)
    assert gate.claim(key, 1.0).wait == pytest.approx(3600.0, abs=TOL)
    assert gate.state(key).tat == pytest.approx(start + 1.0, abs=TOL)  # the slots kept


def test_the_pause_cause_is_shown_while_the_pause_runs(store: Any, host: str) -> None:
    one, two = store.open(), store.open()
    key = gate_key(host)
    assert one.stats(key).pause_cause == ""
    one.pause(key, 30.0, cause="Retry-After from api.example.com: 30 s")
    stats = two.stats(key)
    assert stats.pause_cause == "Retry-After from api.example.com: 30 s"
    assert stats.pause_remaining == pytest.approx(30.0, abs=TOL)
    # A shorter pause does not replace the cause of the one that holds the fleet back.
    two.pause(key, 5.0, cause="backoff after HTTP 503 from api.example.com: 5.0 s")
    assert one.stats(key).pause_cause == "Retry-After from api.example.com: 30 s"
    one.pause(key, 90.0, cause="Retry-After from api.example.com: 90 s")
    assert two.stats(key).pause_cause == "Retry-After from api.example.com: 90 s"


# -- stats and heartbeats -----------------------------------------------------------------


def test_reports_are_counted_in_a_sliding_window(store: Any, host: str) -> None:
    one, two = store.open(), store.open()
    key = gate_key(host)
    empty = one.stats(key)
    assert (empty.requests, empty.successes, empty.throttled, empty.workers_active) == (0, 0, 0, 0)
    assert empty.window_seconds == WINDOW_SECONDS and empty.pace == 0.0
    one.reserve(key, 0.0, report=Report(requests=1, successes=1))
    two.pause(key, 0.0, report=Report(requests=1, throttled=1))
    recorded = one.record(key, Report(requests=2, successes=2))
    stats = two.stats(key)
    assert (stats.requests, stats.successes, stats.throttled) == (4, 3, 1)
    assert (recorded.requests, recorded.successes, recorded.throttled) == (4, 3, 1)
    assert 1.0 <= stats.window_seconds <= WINDOW_SECONDS
    assert stats.pace == pytest.approx(4 / stats.window_seconds)
    assert stats.rate_factor == 1.0


def test_workers_are_counted_by_heartbeat(store: Any, host: str) -> None:
    one, two = store.open(), store.open()
    key = gate_key(host)
    assert one.record(key, Report(), worker="a1").workers_active == 1
    assert two.record(key, Report(), worker="b2").workers_active == 2
    assert one.record(key, Report(), worker="a1").workers_active == 2  # a refresh, not a third
    assert one.stats(key).workers_active == 2
    assert two.record(key, Report(), worker="b2", leaving=True).workers_active == 1
    assert one.stats(key).workers_active == 1
    assert one.stats(gate_key(host, "other-key")).workers_active == 0


# -- adaptive pacing ------------------------------------------------------------------------


def test_a_burst_of_429s_cuts_the_rate_once(store: Any, host: str) -> None:
    gates = [store.open() for _ in range(4)]
    for gate in gates:
        gate.aimd = Aimd(decrease=0.5, hold_seconds=0.0)  # the pause alone must group the burst
    key = gate_key(host)
    gates[0].pause(key, 0.0, rate_limited=True)  # an earlier 429, refused at once: the deepest cut
    assert gates[0].stats(key).rate_factor == pytest.approx(0.5)
    barrier = threading.Barrier(16)

    def throttled(gate: Gate) -> None:
        barrier.wait()
        gate.pause(key, 30.0, rate_limited=True, report=Report(throttled=1))

    threads = [threading.Thread(target=throttled, args=(gates[i % 4],)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = gates[0].stats(key)
    assert stats.rate_factor == pytest.approx(0.25)  # one more cut for sixteen 429s
    assert stats.throttled == 16
    assert gates[1].state(key).epoch == 2  # the earlier pause, then the burst's


def test_the_factor_paces_every_instance(store: Any, host: str) -> None:
    one, two = store.open(), store.open()
    key = gate_key(host)
    assert one.set_value(fleet_key(key), AIMD, AimdState(0.5).to_text(), ttl_seconds=60.0)
    reservation = two.reserve(key, 10.0)
    assert reservation.rate_factor == pytest.approx(0.5)
    assert one.acquire(key, 10.0) == pytest.approx(reservation.wait + 20.0, abs=TOL)
    assert one.state(key).rate_factor == two.claim(key, 1.0).rate_factor == pytest.approx(0.5)


def test_slots_climb_back_at_the_target_and_claims_at_the_factor(store: Any, host: str) -> None:
    """After a doubtful cut (the first 429 in a while), slots are spaced at the level the
    factor climbs back to, so that no queue of slots at the cut pace holds the climb back;
    each send's claim, as it leaves, spaces it at the factor itself."""
    one, two = store.open(), store.open()
    one.aimd = Aimd(decrease=0.5)
    key = gate_key(host)
    throttle_twice(one, key)  # refused at once: cut to half, climbing back to 0.98
    reservation = two.reserve(key, 10.0)
    assert reservation.rate_factor == pytest.approx(0.5)  # what the claims space sends at
    assert one.acquire(key, 10.0) == pytest.approx(reservation.wait + 10.0 / 0.98, abs=TOL)
    assert two.state(key).rate_factor == one.claim(key, 1.0).rate_factor == pytest.approx(0.5)


def test_no_second_cut_within_the_hold(store: Any, host: str) -> None:
    gate = store.open()
    gate.aimd = Aimd(decrease=0.5, hold_seconds=60.0)
    key = gate_key(host)
    throttle_twice(gate, key)
    assert gate.stats(key).rate_factor == pytest.approx(0.5)
    gate.pause(key, 0.0, rate_limited=True)  # the pause is over, but the hold is not
    assert gate.stats(key).rate_factor == pytest.approx(0.5)
    gate.pause(key, 0.0)  # not a 429 (a 503): never cuts
    assert gate.stats(key).rate_factor == pytest.approx(0.5)


def test_a_429_cuts_by_what_the_successes_since_the_fleet_resumed_show(store: Any, host: str) -> None:
    gate = store.open()
    gate.aimd = Aimd(decrease=0.5, hold_seconds=0.0)
    calm, busy = gate_key(host), gate_key(host, "other")
    # Answers seen since the window began: a fleet past its first second, whose count is
    # read (see test_strategy for the first second). Seen half a window ago on the store's
    # clock (the real one here), not at the window's first bucket: a second that ends
    # between this call and the 429 would drop that bucket, and the fleet would read cold.
    earlier = time.time() - WINDOW_SECONDS / 2
    gate.record(calm, Report(200, 200, at=earlier))  # 200 since it resumed: just over, or jitter
    gate.pause(calm, 0.0, rate_limited=True)
    assert gate.stats(calm).rate_factor == pytest.approx(0.98)  # the least cut: 2 %
    # Refused after 5, the first of them the burst's (it drained before): the limit is
    # about 3/4 of the pace.
    paced(gate, busy)
    gate.record(busy, Report(1, at=earlier))  # sent since the window began: past its first second
    gate.record(busy, Report(5, 5))
    gate.pause(busy, 0.0, rate_limited=True)
    assert gate.stats(busy).rate_factor == pytest.approx(0.75)
    gate.pause(busy, 0.0, rate_limited=True)  # and again at once: the deepest cut
    assert gate.stats(busy).rate_factor == pytest.approx(0.375)


def test_a_refused_first_send_after_a_pause_counts_in_a_row_and_cuts_nothing(
        store: Any, host: str) -> None:
    """A 429 on the fleet's first send after a pause (``resumed``): the pause was not
    enough, nothing is known of the pace. It counts one more in a row, read with every
    claim (the next such send's worker backs off longer); a burst's other 429s during its
    pause count nothing; a success resets the count."""
    one, two = store.open(), store.open()
    one.aimd = two.aimd = Aimd(decrease=0.5, hold_seconds=0.0)
    key = gate_key(host)
    paced(one, key)
    one.pause(key, 0.0, rate_limited=True)  # a 429 with nothing sent before: cut to half
    assert one.claim(key, 0.001).resumes == 0
    two.pause(key, 0.0, rate_limited=True, resumed=True)
    two.pause(key, 0.0, rate_limited=True, resumed=True)
    claim = one.claim(key, 0.001)
    assert (claim.resumes, claim.rate_factor) == (2, pytest.approx(0.5))
    assert one.stats(key).throttled == 0  # counted by the workers' reports, as any 429
    two.pause(key, 30.0, rate_limited=True, resumed=True)  # a pause of its own, then
    one.pause(key, 30.0, rate_limited=True, resumed=True)  # its burst: nothing more
    assert two.claim(key, 0.001).resumes == 3
    assert one.state(key).rate_factor == pytest.approx(0.5)
    one.record(key, Report(requests=1, successes=1))
    assert two.claim(key, 0.001).resumes == 0


def test_successes_probe_back_up_after_the_pause_never_above_one(store: Any, host: str) -> None:
    gate = store.open()
    gate.aimd = Aimd(decrease=0.5, recover_seconds=0.0, increase_per_second=1e6,
                     probe_after_seconds=0.0, climb_after_seconds=0.0)
    key = gate_key(host)
    throttle_twice(gate, key, 30.0)
    # During the pause that came with the cut, successes do not raise the factor...
    gate.reserve(key, 1.0, report=Report(requests=1, successes=1))
    assert gate.stats(key).rate_factor == pytest.approx(0.5)
    other = gate_key(host, "other")
    throttle_twice(gate, other)
    assert gate.stats(other).rate_factor == pytest.approx(0.5)
    # ...after it, they do: back to just under where the 429 came (one 429 may be jitter),
    # then probing up to the configured rate and no further.
    assert gate.record(other, Report(requests=1, successes=1)).rate_factor == pytest.approx(0.98)
    assert gate.record(other, Report(requests=1, successes=1)).rate_factor == 1.0
    assert gate.reserve(other, 1.0, report=Report(successes=5)).rate_factor == 1.0


# -- caps -------------------------------------------------------------------------------------


def test_a_cap_counts_reservations_per_period(store: Any, host: str) -> None:
    one, two = store.open(), store.open()
    key = gate_key(host)
    cap = Cap(3)
    started = time.time()
    used = [g.reserve(key, 1.0, cap=cap).usage for g in (one, two, one)]
    assert [u.used for u in used if u is not None] == [1, 2, 3]
    before = one.state(key)
    with pytest.raises(QuotaExceededError, match="daily cap of 3 requests") as info:
        two.reserve(key, 1.0, cap=cap)
    assert "resets at" in str(info.value)
    assert two.state(key).tat == before.tat  # refused: nothing reserved
    usage = one.usage(key)
    assert usage.used == 3
    # The period follows the store's clock (UTC calendar), here the host's.
    assert usage.period in {period_of(started, "day")[0], period_of(time.time(), "day")[0]}
    assert usage.resets_at == period_of(usage.resets_at - 1, "day")[1]
    assert one.usage(key, "month").used == 0
    assert one.reserve(key, 1.0, cap=Cap(3, "month")).usage.used == 1  # type: ignore[union-attr]
    assert one.reserve(gate_key(host, "other"), 1.0, cap=cap).usage.used == 1  # type: ignore[union-attr]


def test_a_cap_in_a_zone_counts_on_the_zones_calendar_of_the_store_clock(
    store: Any, host: str
) -> None:
    """Two zones 25 hours apart (UTC+14, UTC-11) are never on the same date: each counts
    its own day, on the store's clock, apart from UTC's, and resets at its own midnight."""
    gate, other = store.open(), store.open()
    key = gate_key(host)
    east, west = Cap(2, tz="Pacific/Kiritimati"), Cap(2, tz="Pacific/Pago_Pago")
    for g in (gate, other):
        g.reserve(key, 0.0, cap=east)
    with pytest.raises(QuotaExceededError, match="Pacific/Kiritimati") as info:
        other.reserve(key, 0.0, cap=east)
    now = gate.state(key).now
    east_label, east_resets = period_of(now, "day", east.tz)
    assert info.value.retry_after == pytest.approx(east_resets - now, abs=2.0)
    assert east_resets != period_of(now, "day")[1]  # not UTC's midnight
    assert "resets at " + datetime.fromtimestamp(east_resets, ZoneInfo(east.tz)).strftime(
        "%Y-%m-%d 00:00 Pacific/Kiritimati") in str(info.value)
    usage = gate.usage(key, "day", east.tz)
    assert (usage.period, usage.used, usage.resets_at) == (east_label, 2, east_resets)
    # The other zone and UTC count apart on the same key.
    assert other.reserve(key, 0.0, cap=west).usage.period == period_of(now, "day", west.tz)[0]
    assert [gate.usage(key, "day", tz).used for tz in (west.tz, "UTC")] == [1, 0]
    assert gate.reserve(key, 0.0, cap=Cap(2)).usage.used == 1  # type: ignore[union-attr]
    # When the zone's day is over, its count is the previous day's: the cap sends again.
    yesterday = period_of(east_resets - 2 * 86_400.0, "day", east.tz)[0]
    gate.store.run([AddCounters.of(key, {east_label: -2, yesterday: 2}, 86_400.0, durable=True)])
    assert gate.reserve(key, 0.0, cap=east).usage.used == 1  # type: ignore[union-attr]
    assert gate.usage(key, "day", "UTC").used == 1  # UTC's count untouched


def test_a_wait_beyond_the_horizon_does_not_count(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host)
    gate.pause(key, 100.0)
    reservation = gate.reserve(key, 1.0, horizon=10.0, cap=Cap(5))
    assert not reservation.reserved
    assert reservation.usage is not None and reservation.usage.used == 0


def test_concurrent_reservations_never_exceed_the_cap(store: Any, host: str) -> None:
    gates = [store.open() for _ in range(4)]
    key = gate_key(host)
    granted: list[int] = []
    refused: list[int] = []
    lock = threading.Lock()

    def work(gate: Gate) -> None:
        for _ in range(5):
            try:
                gate.reserve(key, 0.0, cap=Cap(12))
                outcome = granted
            except QuotaExceededError:
                outcome = refused
            with lock:
                outcome.append(1)

    threads = [threading.Thread(target=work, args=(gates[i % 4],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(granted), len(refused)) == (12, 28)
    assert gates[0].usage(key).used == 12


def test_the_secret_never_reaches_the_store_nor_the_fleet_state(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host, "sk-SECRET-123")
    gate.reserve(key, 1.0, report=Report(1, 1, 0), cap=Cap(10))
    gate.pause(key, 5.0, cause="Retry-After from api.example.com: 5 s", rate_limited=True)
    gate.record(key, Report(1, 0, 1), worker="0123abcd")
    dumped = store.dump()
    assert key in dumped and "0123abcd" in dumped
    assert "sk-SECRET-123" not in dumped


# -- periods roll over ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_host_clock_caps_reset_in_the_next_period(backend: str, tmp_path: Path) -> None:
    clock = FakeClock(start=1_709_251_190.0)  # 2024-02-29T23:59:50Z
    gate: Any = (MemoryGate(clock=clock) if backend == "memory"
                 else SQLiteGate(tmp_path / "gate.sqlite", clock=clock))
    key = gate_key("api.example.com", "k")
    try:
        for _ in range(3):
            gate.reserve(key, 0.0, cap=Cap(3))
            gate.reserve(key, 0.0, cap=Cap(4, "month"))
        with pytest.raises(QuotaExceededError):
            gate.reserve(key, 0.0, cap=Cap(3))
        clock.advance(10.0)  # 2024-03-01: a new day and a new month
        assert gate.usage(key).period == "2024-03-01" and gate.usage(key).used == 0
        assert gate.reserve(key, 0.0, cap=Cap(3)).usage.used == 1
        month = gate.usage(key, "month")
        assert (month.period, month.used) == ("2024-03", 0)
    finally:
        gate.close()


@pytest.mark.parametrize("name", [pytest.param("redis", marks=pytest.mark.redis),
                                  pytest.param("postgres", marks=pytest.mark.postgres)])
def test_server_caps_follow_the_server_calendar(
    name: str, request: pytest.FixtureRequest, host: str
) -> None:
    """Cap periods are the server's UTC days, even for a client whose clock is decades off."""
    key = gate_key(host)
    skewed = FakeClock(start=0.0)  # this host believes it is 1970-01-01
    gate: Any
    if name == "redis":
        from geotoolkit.gate.redis import RedisGate

        gate = RedisGate(request.getfixturevalue("redis_url"), clock=skewed)
        client = gate.store._client

        def age(label: str) -> None:
            client.rename(gate.counter_key(key, label, True), gate.counter_key(key, "2000-01-01", True))

        def clean() -> None:
            stale = list(client.scan_iter(match=f"{key}*"))
            if stale:
                client.delete(*stale)
    else:
        import psycopg

        from geotoolkit.gate.postgres import PostgresGate

        dsn = request.getfixturevalue("postgres_dsn")
        gate = PostgresGate(dsn, clock=skewed)

        def sql(statement: str, *args: str) -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(statement, (*args, key))

        def age(label: str) -> None:
            sql("UPDATE geotoolkit_gate_usage SET period = '2000-01-01' WHERE period = %s "
                "AND key = %s", label)

        def clean() -> None:
            for table in ("geotoolkit_gate_usage", "geotoolkit_gate_counters", "geotoolkit_gate",
                          "geotoolkit_gate_values"):
                sql(f"DELETE FROM {table} WHERE key LIKE %s || '%%'")
    try:
        today = {period_of(time.time(), "day")[0]}
        for _ in range(3):
            usage = gate.reserve(key, 0.0, cap=Cap(3)).usage
            today.add(period_of(time.time(), "day")[0])
            assert usage.period in today  # the server's day, not 1970-01-01
        with pytest.raises(QuotaExceededError):
            gate.reserve(key, 0.0, cap=Cap(3))
        assert gate.usage(key).used == 3 and gate.usage(key).period == usage.period
        assert gate.usage(key, "month").period == usage.period[:7]
        age(usage.period)  # the counter now belongs to a past period
        assert gate.usage(key).used == 0
        assert gate.reserve(key, 0.0, cap=Cap(3)).usage.used == 1
    finally:
        clean()
        gate.close()


def test_many_instances_open_a_fresh_sqlite_file_at_once(tmp_path: Path) -> None:
    """Opening a new WAL file together hits SQLITE_BUSY_RECOVERY: it must be waited out."""
    errors: list[BaseException] = []

    def work(path: Path, barrier: threading.Barrier) -> None:
        try:
            barrier.wait()
            gate = SQLiteGate(path)
            try:
                for _ in range(20):
                    gate.reserve(gate_key("api.example.com"), 0.0, report=Report(1, 1, 0))
                    gate.record(gate_key("api.example.com"), Report(), worker="w")
            finally:
                gate.close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    for trial in range(10):
        barrier = threading.Barrier(8)
        threads = [threading.Thread(target=work, args=(tmp_path / f"gate-{trial}.sqlite", barrier))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
