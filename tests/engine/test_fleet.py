"""The engine in a fleet, on a fake clock: adaptive pacing, fleet samples, caps.

The provider is an injected transport enforcing a sliding-window limit, as real
services (and our simulator) do: at most ``limit`` requests in any one-second
window, else 429 with ``Retry-After`` rounded up to whole seconds.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import pytest

from geotoolkit import ConfigurationError, FakeClock, MemoryGate, Query, QuotaExceededError, RatePolicy
from geotoolkit.engine import Engine
from geotoolkit.gate import Aimd, Cap
from geotoolkit.gate.fleet import AIMD, AimdState
from geotoolkit.gate.strategy import fleet_key
from geotoolkit.progress import BatchFinished, Event, FleetSampled
from geotoolkit.providers import Nominatim
from geotoolkit.results import Outcome
from geotoolkit.testing.limiters import Limiter, make_limiter

MATCH = [{"lat": "47.14", "lon": "9.52", "display_name": "Vaduz"}]


class LimitedProvider:
    """A sliding-window rate limit per key; logs (virtual time, status) for every request."""

    def __init__(self, clock: FakeClock, limit: int, window: float = 1.0) -> None:
        self.clock, self.limit, self.window = clock, limit, window
        self.admitted: deque[float] = deque()
        self.log: list[tuple[float, int]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        now = self.clock.now()
        while self.admitted and self.admitted[0] <= now - self.window:
            self.admitted.popleft()
        if len(self.admitted) >= self.limit:
            wait = self.admitted[-self.limit] + self.window - now
            self.log.append((now, 429))
            return httpx.Response(429, headers={"Retry-After": str(max(1, math.ceil(wait - 1e-9)))})
        self.admitted.append(now)
        self.log.append((now, 200))
        return httpx.Response(200, json=MATCH)

    def count(self, status: int) -> int:
        return sum(1 for _, s in self.log if s == status)


class DictStore:
    """A ResultStore in a dict."""

    blocking = False

    def __init__(self) -> None:
        self.data: dict[str, Outcome] = {}

    def get_many(self, keys: Sequence[str]) -> Mapping[str, Outcome]:
        return {k: self.data[k] for k in keys if k in self.data}

    def put(self, key: str, outcome: Outcome) -> None:
        self.data[key] = outcome


def engine(clock: FakeClock, transport: Any, gate: MemoryGate, **kwargs: Any) -> Engine:
    options: dict[str, Any] = {"gate": gate, "rate": RatePolicy(rate=10.0), "clock": clock,
                               "transport": httpx.MockTransport(transport), "concurrency": 4,
                               "rng": random.Random(0)}
    options.update(kwargs)
    return Engine(Nominatim("http://sim.test", user_agent="geotoolkit-tests/1.0"), **options)


def queries(n: int, prefix: str = "Street") -> list[Query | str]:
    return [Query(text=f"{prefix} {i}, Vaduz") for i in range(n)]


def test_adaptive_pacing_finds_a_limit_half_the_configured_rate() -> None:
    clock = FakeClock(start=1_000_000.0)
    provider = LimitedProvider(clock, limit=5)  # the real quota: 5/s; configured: 10/s
    events: list[Event] = []
    outcomes = asyncio.run(engine(clock, provider, MemoryGate(clock=clock))
                           .run(queries(300), events.append))
    assert len(outcomes) == 300 and all(o.status == "matched" for o in outcomes)
    # A handful of 429s to find the limit, not one per second of the run.
    assert provider.count(429) <= 6
    span = provider.log[-1][0] - provider.log[0][0]
    # And most of the quota is used. A sliding window refuses after its whole burst (5
    # sends, whatever the pace), which the cut reads as a larger overshoot than it is
    # (on a leaky bucket the evidence is exact): the cut stands under 4.5/s, and the fleet
    # climbs back in a step toward where it was refused, 30 % of the way: to 4.64/s (4.44/s
    # over the run, three 429s). One engine reports at once, so the ceiling here is exact
    # and the limit lies near it: half the way reached 4.87/s (4.66/s over the run); a
    # fleet's ceiling reads high (its reports lag), and there half the way overshot (see
    # ``Aimd.step_share``). Before the steps it stayed at 4.2/s, 4.1/s over the run.
    assert provider.count(200) / span / 5 >= 0.88
    allowed = [e.allowed_rate for e in events if isinstance(e, FleetSampled)]
    assert all(a is not None and a <= 10.0 for a in allowed)  # never above the configured rate
    low = allowed.index(min(allowed))  # type: ignore[type-var]
    assert min(allowed) <= 5.5  # type: ignore[type-var, operator]
    assert max(allowed[low:]) > min(allowed)  # type: ignore[type-var]  # then probes back up


def test_without_a_limit_the_configured_rate_is_kept() -> None:
    clock = FakeClock(start=0.0)
    provider = LimitedProvider(clock, limit=100)
    events: list[Event] = []
    asyncio.run(engine(clock, provider, MemoryGate(clock=clock)).run(queries(50), events.append))
    assert provider.count(429) == 0
    assert {e.allowed_rate for e in events if isinstance(e, FleetSampled)} == {10.0}


def test_fleet_samples_are_sane_and_at_most_two_per_second() -> None:
    clock = FakeClock(start=0.0)
    gate = MemoryGate(clock=clock)
    events: list[Event] = []
    provider = LimitedProvider(clock, limit=100)
    asyncio.run(engine(clock, provider, gate).run(queries(60), events.append))
    samples = [e for e in events if isinstance(e, FleetSampled)]
    assert len(samples) >= 10
    assert all(b.at - a.at >= 0.5 - 1e-9 for a, b in itertools.pairwise(samples))
    assert all(s.workers_active == 1 and 0 < s.window_seconds <= 10.0 for s in samples)
    assert all(s.successes <= s.requests and s.throttled == 0 for s in samples)
    steady = [s for s in samples if s.at >= 3.0]
    # Paced at 10/s less the 1 % safety margin.
    assert steady and all(s.pace == pytest.approx(9.9, abs=1.0) for s in steady)
    last = samples[-1]
    assert last.requests == last.successes
    assert abs(last.requests - min(60, last.window_seconds * 9.9 + 1)) <= 1
    assert gate.stats(Nominatim("http://sim.test", user_agent="x/1").gate_key).workers_active == 0


def test_two_runs_on_one_gate_are_two_workers_sharing_one_rate() -> None:
    clock = FakeClock(start=0.0)
    gate = MemoryGate(clock=clock)
    provider = LimitedProvider(clock, limit=100)
    events: list[Event] = []
    first = engine(clock, provider, gate)
    second = engine(clock, provider, gate)

    async def both() -> None:
        await asyncio.gather(first.run(queries(30, "A"), events.append), second.run(queries(30, "B")))

    asyncio.run(both())
    assert first.worker_id and second.worker_id and first.worker_id != second.worker_id
    samples = [e for e in events if isinstance(e, FleetSampled) and e.at >= 2.0]
    assert samples and max(s.workers_active for s in samples) == 2
    times = sorted(t for t, _ in provider.log)
    assert all(b - a >= 1 / 9.9 - 1e-9 for a, b in itertools.pairwise(times))  # one shared pace


def test_a_pause_shows_its_cause_in_the_samples() -> None:
    clock = FakeClock(start=0.0)
    answers = iter([httpx.Response(429, headers={"Retry-After": "30"})])

    def respond(request: httpx.Request) -> httpx.Response:
        return next(answers, None) or httpx.Response(200, json=MATCH)

    events: list[Event] = []
    asyncio.run(engine(clock, respond, MemoryGate(clock=clock), concurrency=1)
                .run(queries(3), events.append))
    paused = [e for e in events if isinstance(e, FleetSampled) and e.pause_remaining > 0]
    assert paused and paused[0].pause_cause == "Retry-After from sim.test: 30 s"
    assert paused[0].throttled == 1 and paused[0].pause_remaining <= 30.0
    assert [e for e in events if isinstance(e, FleetSampled)][-1].pause_cause == ""


def test_a_pause_cancels_reservations_made_before_it() -> None:
    """Slots reserved before a short pause must not be used after it: no double booking."""
    clock = FakeClock(start=0.0)
    sent: list[float] = []
    answers = iter([httpx.Response(200, json=MATCH),
                    httpx.Response(429, headers={"Retry-After": "2"})])

    def respond(request: httpx.Request) -> httpx.Response:
        sent.append(clock.now())
        return next(answers, None) or httpx.Response(200, json=MATCH)

    gate = MemoryGate(clock=clock, aimd=Aimd(decrease=1.0))  # keep the rate: test spacing only
    asyncio.run(engine(clock, respond, gate, rate=RatePolicy(rate=1.0, safety_margin=0.0),
                       concurrency=4).run(queries(8)))
    assert len(sent) == 9
    assert all(b - a >= 1.0 - 1e-9 for a, b in itertools.pairwise(sorted(sent)))


def test_outcomes_are_counted_on_the_gate() -> None:
    clock = FakeClock(start=0.0)
    answers = iter([httpx.Response(200, json=MATCH), httpx.Response(503)])

    def respond(request: httpx.Request) -> httpx.Response:
        return next(answers, None) or httpx.Response(200, json=MATCH)

    gate = MemoryGate(clock=clock, aimd=Aimd(decrease=1.0))  # keep the rate: test counts only
    asyncio.run(engine(clock, respond, gate, concurrency=1).run(queries(5)))
    stats = gate.stats(Nominatim("http://sim.test", user_agent="x/1").gate_key)
    assert (stats.requests, stats.successes, stats.throttled) == (6, 5, 1)


def test_an_outage_answering_503_cuts_the_pace_once_not_at_every_probe() -> None:
    """A 503 right after answers reads as a limiter's (nginx ``limit_req`` answers 503 as
    it ships): one cut, as a 429's. A backend down answers 503 to every send for a minute:
    those after the first, with nothing answered between, are the outage's, not the
    pace's; read as 429s, the fleet's sends after each pause would cut it again and again."""
    clock = FakeClock(start=0.0)
    gate = MemoryGate(clock=clock)
    key = Nominatim("http://sim.test", user_agent="x/1").gate_key
    factors: list[float] = []

    def down(request: httpx.Request) -> httpx.Response:
        if 5.0 <= clock.now() < 65.0:
            factors.append(gate.stats(key).rate_factor)
            return httpx.Response(503, headers={"Content-Type": "text/html"},
                                  text="<html><h1>503 Service Temporarily Unavailable</h1></html>")
        return httpx.Response(200, json=MATCH)

    outcomes = asyncio.run(engine(clock, down, gate).run(queries(200)))
    assert all(o.status == "matched" for o in outcomes)
    assert len(factors) > 10  # the fleet came back after each pause, refused each time
    assert min(factors) >= Aimd().decrease, sorted(set(factors))  # one cut at most


# -- caps ----------------------------------------------------------------------------------


def test_the_daily_cap_stops_the_batch_and_the_next_day_resumes() -> None:
    clock = FakeClock(start=1_709_200_000.0)  # 2024-02-29T09:46:40Z
    gate, store = MemoryGate(clock=clock), DictStore()
    provider = LimitedProvider(clock, limit=100)
    events: list[Event] = []
    items = queries(5)
    with pytest.raises(QuotaExceededError, match="daily cap of 3 requests") as info:
        asyncio.run(engine(clock, provider, gate, store=store, cap=3).run(items, events.append))
    assert info.value.provider == "nominatim"
    assert len(provider.log) == 3 and len(store.data) == 3  # finished work is kept
    finished = [e for e in events if isinstance(e, BatchFinished)]
    assert finished and finished[0].error and "QuotaExceededError" in finished[0].error
    clock.advance(86_400.0)  # the next UTC day
    outcomes = asyncio.run(engine(clock, provider, gate, store=store, cap=3).run(items))
    assert [o.status for o in outcomes] == ["matched"] * 5
    assert len(provider.log) == 5  # only the two that were left


def test_a_cap_in_the_providers_zone_stops_the_run_until_its_midnight() -> None:
    """A key whose quota resets at midnight Pacific Time: UTC midnight sends nothing more,
    and the error says when the cap resets, in seconds and in words."""
    clock = FakeClock(start=1_765_062_000.0)  # 2025-12-06T23:00Z, 15:00 PST
    gate = MemoryGate(clock=clock)
    provider = LimitedProvider(clock, limit=100)
    cap = Cap(3, tz="America/Los_Angeles")
    with pytest.raises(QuotaExceededError) as info:
        asyncio.run(engine(clock, provider, gate, cap=cap, max_wait_seconds=5.0).run(queries(5)))
    assert info.value.provider == "nominatim"
    waited = clock.now() - 1_765_062_000.0
    assert info.value.retry_after == pytest.approx(9 * 3600.0 - waited)
    assert "resets at 2025-12-07 00:00 America/Los_Angeles (08:00 UTC)" in str(info.value)
    clock.advance(3600.0)  # 00:00 UTC: the provider's day is not over
    with pytest.raises(QuotaExceededError):
        asyncio.run(engine(clock, provider, gate, cap=cap).run(queries(2)))
    assert len(provider.log) == 3
    clock.advance(8 * 3600.0)  # past 00:00 in Los Angeles
    outcomes = asyncio.run(engine(clock, provider, gate, cap=cap).run(queries(2)))
    assert [o.status for o in outcomes] == ["matched"] * 2


def test_the_cap_is_shared_by_the_fleet() -> None:
    clock = FakeClock(start=0.0)
    gate = MemoryGate(clock=clock)
    provider = LimitedProvider(clock, limit=100)

    async def both() -> list[BaseException | list[Outcome]]:
        runs = [engine(clock, provider, gate, cap=4).run(queries(3, name))
                for name in ("A", "B")]
        return await asyncio.gather(*runs, return_exceptions=True)

    results = asyncio.run(both())
    assert len(provider.log) == 4
    assert any(isinstance(r, QuotaExceededError) for r in results)


def test_a_monthly_cap_counts_per_month() -> None:
    clock = FakeClock(start=1_709_200_000.0)
    gate = MemoryGate(clock=clock)
    provider = LimitedProvider(clock, limit=100)
    run = engine(clock, provider, gate, cap=Cap(2, "month"))
    with pytest.raises(QuotaExceededError, match="monthly cap of 2"):
        asyncio.run(run.run(queries(3)))
    assert gate.usage(Nominatim("http://sim.test", user_agent="x/1").gate_key, "month").used == 2


@pytest.mark.parametrize("kwargs", [{"cap": -1}, {"cap": 1.5}, {"cap": "5/day"},
                                    {"sample_seconds": 0.0}])
def test_bad_fleet_settings_are_configuration_errors(kwargs: dict[str, Any]) -> None:
    clock = FakeClock()
    with pytest.raises(ConfigurationError):
        engine(clock, LimitedProvider(clock, 1), MemoryGate(clock=clock), **kwargs)


@pytest.mark.parametrize(("limit", "period"), [(3, "week"), (3, "year"), (-1, "day")])
def test_bad_caps_are_configuration_errors(limit: int, period: str) -> None:
    with pytest.raises(ConfigurationError):
        Cap(limit, period)  # type: ignore[arg-type]


class StallingClock(FakeClock):
    """Wakes ``stall`` seconds late from its ``stall_at``-th non-zero sleep (a GC pause)."""

    def __init__(self, stall_at: int, stall: float) -> None:
        super().__init__(start=0.0)
        self.stall_at, self.stall, self.sleeps = stall_at, stall, 0

    async def sleep(self, seconds: float) -> None:
        await super().sleep(seconds)
        if seconds > 0:
            self.sleeps += 1
            if self.sleeps == self.stall_at:
                self.advance(self.stall)


def serial(clock: FakeClock, gate: MemoryGate, rate: float = 1.0) -> tuple[Engine, list[float]]:
    """One query at a time, paced exactly at ``rate``; the list gets each send's instant."""
    sent: list[float] = []

    def respond(request: httpx.Request) -> httpx.Response:
        sent.append(clock.now())
        return httpx.Response(200, json=MATCH)

    return engine(clock, respond, gate, concurrency=1, rate=RatePolicy(rate=rate, safety_margin=0.0),
                  sample_seconds=1000.0), sent  # no sampler sleeps


class RoundTripGate(MemoryGate):
    """A memory gate whose reservations and checks take virtual time; logs each check."""

    def __init__(self, clock: FakeClock, reserve_rtt: float, state_rtt: float) -> None:
        super().__init__(clock=clock)
        self.fake_clock, self.reserve_rtt, self.state_rtt = clock, reserve_rtt, state_rtt
        self.checks: list[float] = []

    def reserve(self, *args: Any, **kwargs: Any) -> Any:
        self.fake_clock.advance(self.reserve_rtt)  # the reply is stamped when it leaves
        return super().reserve(*args, **kwargs)

    def state(self, key: str) -> Any:
        self.checks.append(self.fake_clock.now())
        self.fake_clock.advance(self.state_rtt)
        return super().state(key)

    def claim(self, key: str, interval: float) -> Any:
        self.fake_clock.advance(self.state_rtt)  # the send leaves when its claim comes back
        return super().claim(key, interval)


def test_a_slot_woken_up_late_is_given_up_not_fired() -> None:
    """A stalled worker must not fire a stale slot next to the following ones."""

    clock = StallingClock(stall_at=2, stall=0.08)  # the 2nd wait for a slot wakes 80 ms late
    run, sent = serial(clock, MemoryGate(clock=clock))
    asyncio.run(run.run(queries(5)))
    assert len(sent) == 5
    # Fired on time or not at all: every send sits on the one-second grid.
    assert all(abs(t - round(t)) < 1e-6 for t in sent), sent
    assert sent == [0.0, 1.0, 3.0, 4.0, 5.0]  # the stale slot 2 was given up
    assert clock.sleeps == 5


@pytest.mark.parametrize(("rate", "fired"), [(1.0, True), (50.0, False)])
def test_how_late_a_slot_may_fire_grows_with_the_interval(rate: float, fired: bool) -> None:
    """18 ms late: fired at 1 req/s (a give-up would cost a whole second; the next send is
    held back as long, so that the two leave one interval apart), given up at 50/s."""
    clock = StallingClock(stall_at=2, stall=0.018)
    run, sent = serial(clock, MemoryGate(clock=clock), rate)
    assert run.pacer._tolerance == pytest.approx(0.015 + min(0.01, 0.05 / rate))
    asyncio.run(run.run(queries(4)))
    interval = 1.0 / rate
    if fired:
        expected = [0.0, interval, 2 * interval + 0.018, 3 * interval + 0.018]
    else:  # slot 2 stays empty: the next free slot is 3
        expected = [0.0, interval, 3 * interval, 4 * interval]
    assert sent == pytest.approx(expected, abs=1e-9)


def test_the_pause_check_overlaps_the_wait_and_the_send_keeps_its_slot() -> None:
    """The check before a send starts one gate round trip early, so the send is on time
    (not late by the round trip), and never before its slot; it leaves when its claim
    comes back, one round trip after the slot, every time."""
    clock, rtt = FakeClock(start=0.0), 0.004
    gate = RoundTripGate(clock, reserve_rtt=rtt, state_rtt=rtt)
    run, sent = serial(clock, gate)
    asyncio.run(run.run(queries(4)))
    first = sent[0]  # sent without waiting: its slot was free when reserved
    assert sent == pytest.approx([first + i for i in range(4)], abs=1e-9)
    assert gate.checks == pytest.approx([first + i - 2 * rtt for i in range(1, 4)], abs=1e-9)


def test_a_check_back_before_the_slot_is_repeated_at_the_slot() -> None:
    """A send always follows a pause check at once: never a check, a wait, then a send."""
    clock = FakeClock(start=0.0)
    gate = RoundTripGate(clock, reserve_rtt=0.008, state_rtt=0.0)  # slow reservations
    run, sent = serial(clock, gate)
    asyncio.run(run.run(queries(3)))
    checks = gate.checks
    first = sent[0]
    assert sent == pytest.approx([first, first + 1, first + 2], abs=1e-9)
    # Each waited slot: one check started early (it came back early), one at the slot.
    assert len(checks) == 4
    assert checks[1::2] == pytest.approx(sent[1:], abs=1e-9)
    assert all(early < at for early, at in zip(checks[0::2], checks[1::2], strict=True))


class Limited:
    """A transport in front of one of the simulator's limiters (``geotoolkit.testing.limiters``)
    on the fake clock: a 429 with its ``Retry-After``; logs (virtual time, status)."""

    def __init__(self, clock: FakeClock, limiter: Limiter) -> None:
        self.clock, self.limiter = clock, limiter
        self.log: list[tuple[float, int]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        now = self.clock.now()
        verdict = self.limiter.admit(None, now)
        self.log.append((now, 200 if verdict.admitted else 429))
        if not verdict.admitted:
            return httpx.Response(429, headers={"Retry-After": str(verdict.retry_after)})
        return httpx.Response(200, json=MATCH)

    def count(self, status: int) -> int:
        return sum(1 for _, s in self.log if s == status)


def test_configured_at_twice_a_token_bucket_the_fleet_finds_its_rate_in_a_few_429s() -> None:
    """Each 1 s pause refills the bucket, and the burst it lets through after the pause
    reads, counted, as a pace a few per cent over the limit: every 429 cut 4-5 %
    (measured: 13 429s in this run, 22 over 2000 rows). Refused again at a count's cut
    that stood, the fleet reads the whole cycle since the 429 before instead: 7 (9 over
    2000 rows; the rest are steps back toward the ceiling, and the floor of what the
    fleet sustained, which the bucket's first ten tokens lift over its rate)."""
    clock = FakeClock(start=1_000_000.0)
    bucket = Limited(clock, make_limiter("token-bucket", 10.0, burst=10))
    outcomes = asyncio.run(engine(clock, bucket, MemoryGate(clock=clock),
                                  rate=RatePolicy(rate=20.0)).run(queries(400)))
    assert all(o.status == "matched" for o in outcomes)
    assert bucket.count(429) <= 8
    ok = [t for t, s in bucket.log if s == 200]
    assert (len(ok) - 1) / (ok[-1] - ok[0]) / 10.0 >= 0.9  # most of the bucket's rate


def test_with_no_rate_the_fleet_discovers_it_and_the_next_run_starts_there() -> None:
    clock = FakeClock(start=1_000_000.0)
    limiter = Limited(clock, make_limiter("gcra", 5.0, burst=1))  # self-hosted: nobody says 5/s
    gate = MemoryGate(clock=clock)
    events: list[Event] = []
    outcomes = asyncio.run(engine(clock, limiter, gate, rate=None).run(queries(300), events.append))
    assert all(o.status == "matched" for o in outcomes)  # a 429 never fails a row
    assert limiter.count(429) <= 4  # found with a few 429s, not one per row
    allowed = [e.allowed_rate for e in events if isinstance(e, FleetSampled) and e.allowed_rate]
    assert allowed[0] == pytest.approx(1.0, abs=0.3)  # it started modestly
    learned = gate.stats(Nominatim("http://sim.test", user_agent="x/1").gate_key).learned_rate
    # Settled at the real rate (the fleet paces 1 % under what it learned).
    assert learned is not None and 4.5 <= learned <= 5.05
    first_run = [t for t, s in limiter.log if s == 200]
    # The next run on the key starts at the learned rate, not at 1/s again.
    limiter.log.clear()
    clock.advance(60.0)
    asyncio.run(engine(clock, limiter, gate, rate=None).run(queries(40, "Next")))
    again = [t for t, s in limiter.log if s == 200]
    assert len(again) == 40 and limiter.count(429) == 0
    assert (again[-1] - again[0]) < 40 / 3.0  # paced near the learned rate at once
    assert (first_run[40] - first_run[0]) > (again[-1] - again[0])  # the first 40 were slower


def test_a_fleet_discovering_the_rate_settles_at_the_pace_it_kept_not_under_it() -> None:
    """Four engines on one gate, no rate given: the discovered rate grows ahead of the
    fleet's pace (each engine's slot is reserved at the pace before), so the rate refused
    says little. The first 429 cuts to the pace the fleet was answered at; the refused
    rate is a ceiling to step toward. Measured on a real Nominatim behind a real nginx at
    5/s (benchmarks/nominatim_fleet.py): 4.9-5.0/s after the 429s, where a cut by 0.8 of
    the refused rate then the count left 3.5-4.6/s."""
    clock = FakeClock(start=1_000_000.0)
    limiter = Limited(clock, make_limiter("gcra", 5.0, burst=1))  # nginx limit_req burst=1
    gate = MemoryGate(clock=clock)
    runs = [engine(clock, limiter, gate, rate=None) for _ in range(4)]

    async def fleet() -> list[list[Outcome]]:
        return await asyncio.gather(*(run.run(queries(100, f"W{i}")) for i, run in enumerate(runs)))

    outcomes = [o for run in asyncio.run(fleet()) for o in run]
    assert len(outcomes) == 400 and all(o.status == "matched" for o in outcomes)
    assert limiter.count(429) <= 4
    ok = [t for t, s in limiter.log if s == 200]
    half = ok[len(ok) // 2:]
    # Settled at the limit: the second half of the run at over 0.95 of it (0.90 before).
    assert (len(half) - 1) / (half[-1] - half[0]) / 5.0 >= 0.95


def run_fleet(clock: FakeClock, gate: MemoryGate, transport: Any, state: AimdState, *,
              rows: int, workers: int = 8) -> None:
    """``workers`` engine runs of ``rows`` queries each on ``gate``, the fleet's adaptive
    state set to ``state`` first."""
    key = Nominatim("http://sim.test", user_agent="x/1").gate_key
    assert gate.set_value(fleet_key(key), AIMD, state.to_text(), ttl_seconds=3600.0)
    runs = [engine(clock, transport, gate) for _ in range(workers)]

    async def fleet() -> None:
        await asyncio.gather(*(run.run(queries(rows, f"W{i}")) for i, run in enumerate(runs)))

    asyncio.run(fleet())


class ClaimWaits(MemoryGate):
    """Records the wait of every claim (the queue a send found as it was about to leave)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.waits: list[tuple[float, float]] = []

    def claim(self, key: str, interval: float) -> Any:
        claimed = super().claim(key, interval)
        self.waits.append((claimed.now, claimed.wait))
        return claimed


def test_after_a_climb_the_sends_do_not_wait_in_a_queue_of_claims() -> None:
    """Eight workers climb back from half the rate (slots at the target, claims at the factor
    as it climbs): the claims fall behind the slots, by up to one spacing per worker. Once
    a claim finds such a queue, the slots are moved behind it: the sends that follow find
    their claim due at once (a late send's push then reaches the send right behind it)."""
    clock = FakeClock(start=1_000_000.0)
    gate = ClaimWaits(clock)
    provider = LimitedProvider(clock, limit=100)
    climbing = AimdState(0.5, decreased_at=clock.now(), throttled_at=clock.now(),
                         increased_at=clock.now(), target=0.98, base=0.5)
    run_fleet(clock, gate, provider, climbing, rows=25)
    assert provider.count(200) == 200
    spacing = 0.1 / 0.98
    start = gate.waits[0][0]
    queued = [wait for at, wait in gate.waits if at - start < 2.0]  # the climb is over by then
    assert max(queued) > 2 * spacing  # the climb built a queue of claims...
    # ... which the slots were moved behind: once the claims of the slots reserved before
    # have drained (a fleet cycle or two), each claim waits a quarter spacing.
    settled = [wait for at, wait in gate.waits if at - start >= 4.0]
    assert len(settled) > 100 and all(wait <= 0.5 * spacing for wait in settled)
    times = sorted(t for t, _ in provider.log)
    assert all(b - a >= 0.1 - 1e-9 for a, b in itertools.pairwise(times))  # never over the rate


class Refusals(MemoryGate):
    """Records every 429's pause: the factor its send was spaced at, the fleet's AIMD state
    before and after."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.events: list[tuple[float | None, AimdState, AimdState]] = []

    def _aimd(self, key: str) -> AimdState:
        return AimdState.from_text(self.values(fleet_key(key)).get(AIMD))

    def pause(self, key: str, seconds: float, **kwargs: Any) -> float:
        before = self._aimd(key)
        remaining = super().pause(key, seconds, **kwargs)
        if kwargs.get("rate_limited"):
            self.events.append((kwargs.get("factor"), before, self._aimd(key)))
        return remaining


def test_a_429_is_charged_to_the_pace_its_send_was_spaced_at() -> None:
    """While the factor climbs, a send's spacing was set a slot earlier: the 429 it draws
    says the limit is under *that* pace, not under the factor when the 429 comes back
    (higher by then). The event's ceiling is the refused send's factor."""
    clock = FakeClock(start=1_000_000.0)
    gate = Refusals(clock)
    provider = LimitedProvider(clock, limit=7)

    async def respond(request: httpx.Request) -> httpx.Response:
        response = provider(request)
        await clock.sleep(0.05)  # answered 50 ms later
        return response

    climbing = AimdState(0.5, decreased_at=clock.now() - 60, throttled_at=clock.now() - 60,
                         increased_at=clock.now(), target=0.98, base=0.5, ceiling=1.0)
    run_fleet(clock, gate, respond, climbing, rows=15)
    assert provider.count(200) == 120
    events = [(refused, before, after) for refused, before, after in gate.events
              if after.throttled_at != before.throttled_at]  # the 429s that were events
    assert events
    refused, before, after = events[0]
    assert refused is not None and refused < before.factor  # the climb went on meanwhile
    assert after.ceiling == refused


class OldPause(MemoryGate):
    """A gate written before ``pause`` took the refused send's factor."""

    def pause(self, key: str, seconds: float, *, cause: str = "", rate_limited: bool = False,
              report: Any = None) -> float:
        return super().pause(key, seconds, cause=cause, rate_limited=rate_limited, report=report)


def test_a_gate_whose_pause_predates_the_factor_still_pauses_the_fleet() -> None:
    clock = FakeClock(start=0.0)
    answers = iter([httpx.Response(429, headers={"Retry-After": "2"})])

    def respond(request: httpx.Request) -> httpx.Response:
        return next(answers, None) or httpx.Response(200, json=MATCH)

    gate = OldPause(clock=clock)
    outcomes = asyncio.run(engine(clock, respond, gate).run(queries(5)))
    assert [o.status for o in outcomes] == ["matched"] * 5
    key = Nominatim("http://sim.test", user_agent="x/1").gate_key
    assert AimdState.from_text(gate.values(fleet_key(key)).get(AIMD)).throttled_at == 0.0



def test_a_server_that_keeps_refusing_with_retry_after_1_gets_fleet_pauses_that_grow() -> None:
    """A key refused for 30 s (its quota held elsewhere) with `Retry-After: 1` each time:
    every first send after a pause is refused. Before, each pause was the 1 s the server
    asked (the rows that met the 429s were new ones, each at its first backoff) and each
    refusal cut the pace as if it were at fault: 16 429s in the 30 s, the factor at its
    floor (0.5/s of 10/s) when the server answered again, 100 rows in 222 s. Now the
    fleet's pauses are the hint and a backoff more (jittered, doubling) while its first
    sends are refused, and the pace is not cut for them: 7 429s, 100 rows in 49 s."""
    clock = FakeClock(start=1_000_000.0)
    start, log = clock.now(), []

    def respond(request: httpx.Request) -> httpx.Response:
        log.append(clock.now() - start)
        if clock.now() < start + 30.0:
            return httpx.Response(429, headers={"Retry-After": "1"})
        return httpx.Response(200, json=MATCH)

    rates: list[tuple[float, float]] = []

    def sample(event: Event) -> None:
        if isinstance(event, FleetSampled) and event.allowed_rate is not None:
            rates.append((event.at - start, event.allowed_rate))

    outcomes = asyncio.run(engine(clock, respond, MemoryGate(clock=clock)).run(queries(100), sample))
    assert all(o.status == "matched" for o in outcomes)
    refused = [t for t in log if t < 30.0]
    assert len(refused) <= 8  # 7 (jittered: the seed's draws)
    gaps = [b - a for a, b in itertools.pairwise(refused)]
    assert min(gaps[1:]) > 1.0 and max(gaps) >= 4.0  # never the bare hint again; backed off
    # Only the first 429 (no pause before it: the pace's evidence) cut: to half, which the
    # fleet climbs back from once the server answers.
    assert min(rate for _, rate in rates) >= 5.0
    assert log[-1] < 60.0



def test_discovering_a_server_slower_than_the_rate_the_rate_grows_no_further_than_4x_its_pace(
) -> None:
    """No rate given, a server with no limit that answers each request in 0.5 s: four in
    flight are 8 answers a second, whatever the rate allowed. The discovered rate grows
    while the fleet keeps up with it, and no further than four times the pace it is
    answered at (``DISCOVER_HEADROOM``; before, it grew to 1000/s): a fleet that cannot use
    a rate has not shown it is allowed, and grown on, the gate would remember it and hand
    it to the next, bigger fleet on the key."""
    clock = FakeClock(start=1_000_000.0)
    seen: list[float] = []

    async def slow(request: httpx.Request) -> httpx.Response:
        seen.append(clock.now())
        await clock.sleep(0.5)
        return httpx.Response(200, json=MATCH)

    gate = MemoryGate(clock=clock)
    outcomes = asyncio.run(engine(clock, slow, gate, rate=None).run(queries(600)))
    assert all(o.status == "matched" for o in outcomes)
    pace = (len(seen) - 1) / (seen[-1] - seen[0])
    assert 7.0 <= pace <= 8.0  # four in flight, 0.5 s each: the server's pace, not the gate's
    learned = gate.stats(Nominatim("http://sim.test", user_agent="x/1").gate_key).learned_rate
    assert learned is not None and 8.0 <= learned <= 4.0 * 8.0
