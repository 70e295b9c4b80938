"""The pacer's last word on a send, on a fake clock: sends stay spaced as they leave.

A limiter without burst (nginx ``limit_req`` without ``burst``) refuses two requests
closer than ``1/R``. Slots are scheduled ``1/R`` apart, but a worker starved between
its slot and its send leaves late, next to the following worker's on-time send: the
claim as a send enters the transport spaces it from the fleet's previous actual send.
"""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import httpx
import pytest

from geotoolkit import FakeClock, MemoryGate, Query, RatePolicy
from geotoolkit.engine import Engine, http
from geotoolkit.engine.pacer import Pacer
from geotoolkit.gate import Report, gate_key
from geotoolkit.gate.fleet import AIMD, AimdState
from geotoolkit.gate.strategy import fleet_key
from geotoolkit.providers import Nominatim
from geotoolkit.testing import ProviderSimulator

MATCH = [{"lat": "47.14", "lon": "9.52", "display_name": "Vaduz"}]

KEY = gate_key("api.example.com")


def pacers(clock: FakeClock, rate: float | None, n: int = 2, strict: bool = True) -> list[Pacer]:
    """``n`` workers on one gate; ``strict``: as after a first 429 (see
    ``Pacer.late_departure_seconds``)."""
    gate = MemoryGate(clock=clock)
    policy = RatePolicy(rate=rate, safety_margin=0.0)
    made = [Pacer(gate, KEY, policy, clock=clock) for _ in range(n)]
    for pacer in made:
        pacer._strict = strict
    return made


def test_a_late_send_holds_the_next_one_back_instead_of_landing_next_to_it() -> None:
    clock = FakeClock(start=100.0)
    late, next_one = pacers(clock, rate=10.0)
    sent: list[float] = []

    async def starved() -> None:
        epoch = await late.slot()
        checked = clock.now()
        await clock.sleep(0.03)  # starved 30 ms between its check and its send
        assert await late.departure(checked, epoch).check()
        sent.append(clock.now())

    async def on_time() -> None:
        await clock.sleep(0.001)  # asks for its slot just after
        epoch = await next_one.slot()
        assert clock.now() == pytest.approx(100.1)  # its slot: one interval after the first
        assert await next_one.departure(clock.now(), epoch).check()
        sent.append(clock.now())

    async def both() -> None:
        await asyncio.gather(starved(), on_time())

    asyncio.run(both())
    assert sent == pytest.approx([100.03, 100.13])  # spaced as they left, not as scheduled


def test_a_pause_published_while_a_send_waits_for_its_spacing_voids_it() -> None:
    clock = FakeClock(start=100.0)
    one, two = pacers(clock, rate=10.0)

    async def run() -> bool:
        epoch = await two.slot()
        assert await one.departure(clock.now(), epoch).check()  # another send leaves just now
        waiting = asyncio.ensure_future(two.departure(clock.now(), epoch).check())  # waits 100 ms
        await clock.sleep(0.05)
        await one.pause(30.0, cause="Retry-After from api.example.com: 30 s", rate_limited=True)
        return await waiting

    assert asyncio.run(run()) is False


@pytest.mark.parametrize("rate", [math.inf, 1_000_000.0])
def test_an_unpaced_or_fast_fleet_sends_at_once(rate: float) -> None:
    clock = FakeClock(start=100.0)
    one, two = pacers(clock, rate=rate)

    async def run() -> list[bool]:
        epoch = await one.slot()
        return [await one.departure(clock.now(), epoch).check(),
                await two.departure(clock.now(), epoch).check()]

    assert asyncio.run(run()) == [True, True]
    assert clock.now() == pytest.approx(100.0, abs=1e-5)


class QueueGate(MemoryGate):
    """Logs, at each reservation, how many reserved slots are still ahead on the clock."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.fake_clock = clock
        self.slots: list[float] = []
        self.ahead: list[int] = []

    def reserve(self, *args: Any, **kwargs: Any) -> Any:
        reservation = super().reserve(*args, **kwargs)
        if reservation.reserved:
            now = self.fake_clock.now()
            self.ahead.append(sum(1 for slot in self.slots if slot > now))
            self.slots.append(now + reservation.wait)
        return reservation


@pytest.mark.parametrize(("rate", "queued"), [(10.0, 1), (1000.0, 4)])
def test_a_worker_holds_one_reservation_at_a_time_unless_the_pace_is_fast(
        rate: float, queued: int) -> None:
    """Slots keep the spacing they were reserved at: a worker's concurrent requests each
    holding one would delay a rise of the pace by the whole queue. At 10/s they take turns
    (one slot ahead at most); at 1000/s (1 ms apart) the queue is short anyway."""
    clock = FakeClock(start=100.0)
    gate = QueueGate(clock)
    run = Engine(Nominatim("http://sim.test", user_agent="geotoolkit-tests/1.0"), gate=gate,
                 rate=RatePolicy(rate=rate), clock=clock, concurrency=4,
                 transport=httpx.MockTransport(lambda request: httpx.Response(200, json=MATCH)))
    outcomes = asyncio.run(run.run([Query(text=f"Street {i}, Vaduz") for i in range(40)]))
    assert [o.status for o in outcomes] == ["matched"] * 40
    assert max(gate.ahead) == queued - 1  # the slots already reserved, still ahead


def test_a_send_whose_bytes_leave_late_pushes_the_next_claim_back() -> None:
    """Its first connection is opened after the claim: its headers leave 20 ms later, and
    the fleet's next send is held back as much (httpcore's trace tells)."""
    clock = FakeClock(start=100.0)
    first, second = pacers(clock, rate=10.0)

    async def run() -> float:
        epoch = await first.slot()
        departure = first.departure(clock.now(), epoch)
        assert await departure.check()
        await clock.sleep(0.02)  # connecting
        await departure.trace("connection.connect_tcp.complete", {})
        await departure.trace("http11.send_request_headers.started", {})
        await departure.trace("http11.send_request_headers.complete", {})  # they have left
        await departure.trace("http11.send_request_body.complete", {})  # once per send
        await asyncio.gather(*first._pushes)
        on_time = second.departure(clock.now(), epoch)
        await clock.sleep(0.1 - 0.02)  # the next slot, one interval after the first claim
        assert await on_time.check()
        return clock.now()

    assert asyncio.run(run()) == pytest.approx(100.12)  # 100 ms after the bytes left


@pytest.mark.parametrize("strict", [True, False])
def test_a_send_claimed_before_a_late_one_left_is_held_back_as_much(strict: bool) -> None:
    """The next send was claimed (due 100 ms after the first's due instant) before the first
    left 20 ms late: the push comes too late for its claim, but when it checks the pause
    again before it is due it reads how far the push moved the claims, and leaves 100 ms
    after the late one did (before: at 100.1, 80 ms after it, which a limiter without burst
    refuses). Due then, it pushes nothing more: the claims after it moved already."""
    clock = FakeClock(start=100.0)
    first, second = pacers(clock, rate=10.0, strict=strict)

    async def run() -> tuple[float | None, float, int]:
        epoch = await first.slot()
        departure = first.departure(clock.now(), epoch)
        assert await departure.check()  # due at once
        behind = second.departure(clock.now(), epoch)
        leaving = asyncio.ensure_future(behind.check())  # claimed now: due at 100.1
        await clock.sleep(0.02)  # the first's headers leave 20 ms late
        await departure.trace("http11.send_request_headers.complete", {})
        await asyncio.gather(*first._pushes)
        assert await leaving
        due, left = behind.due, clock.now()
        await behind.trace("http11.send_request_headers.complete", {})
        return due, left, len(second._pushes)

    due, left, pushes = asyncio.run(run())
    assert left == pytest.approx(100.12)  # one spacing after the late send left
    assert due == pytest.approx(100.12) and pushes == 0


@pytest.mark.parametrize(("throttled", "rate", "late", "pushed"), [
    (False, 10.0, 0.0004, None), (False, 10.0, 0.0006, 0.0006),  # half the 1 % margin: 0.5 ms
    (False, 10.0, 0.0008, 0.0008),  # let go until 2026-12-06: the network had nothing left
    (False, 1.0, 0.0019, None), (False, 1.0, 0.0021, 0.0021),  # 10 ms of margin: 2 ms at most
    (True, 10.0, 0.0004, None), (True, 10.0, 0.0006, 0.0006),  # after a 429: half the margin
    (True, 1.0, 0.0049, None), (True, 1.0, 0.0055, 0.0055),  # half of it, past 2 ms
])
def test_how_late_a_send_may_leave_before_it_pushes_the_next(
        throttled: bool, rate: float, late: float, pushed: float | None) -> None:
    """Each push slows the fleet by its length: a send may leave as much later than usual
    as half the safety margin absorbs (0.5 ms at 10/s: the other half is the network's
    between two sends), at most 2 ms while the fleet paces at its configured rate (a
    limiter with a burst absorbs that); later, all of it is pushed (a limiter without one
    refuses the next send landing closer). Once its factor falls under it (a 429: the
    limiter may be stricter than the sends' jitter), all that half absorbs is let go, and
    no more. (With the whole margin let go, a send 0.8 ms late pushed nothing, the next one
    left 100.2 ms after it, and a transit 0.4 ms shorter than the late one's reached a
    limiter without burst 99.8 ms after it: a 429. The fleet benchmark's cell without burst
    had a 429 in 4 of 5 runs before, in 2 of 9 after.)"""
    clock = FakeClock(start=100.0)
    gate = MemoryGate(clock=clock)
    pacer = Pacer(gate, KEY, RatePolicy(rate=rate), clock=clock)
    if throttled:
        assert gate.set_value(fleet_key(KEY), AIMD, AimdState(0.98).to_text(), ttl_seconds=60)
    pushes: list[float] = []
    pacer.push = lambda seconds, cost=1: pushes.append(seconds)  # type: ignore[method-assign]

    async def run() -> None:
        assert await pacer.departure(clock.now(), await pacer.slot()).check()  # its first
        departure = pacer.departure(clock.now(), await pacer.slot())
        assert await departure.check()
        await clock.sleep(late)
        await departure.trace("http11.send_request_headers.complete", {})

    asyncio.run(run())
    assert pacer.strict is throttled
    assert pushes == ([] if pushed is None else [pytest.approx(pushed)])


@pytest.mark.parametrize(("connect", "pushed"), [(0.0004, None), (0.004, 0.004), (0.06, 0.06)])
def test_a_first_send_whose_connection_is_slow_pushes_the_next_by_all_of_it(
        connect: float, pushed: float | None) -> None:
    """A worker's first claim is followed by its guard, which covers what follows its
    headers (the server accepting a new connection). A connection that holds the headers
    back (a TLS handshake far away, a cold process) pushes the next send by all of it,
    beyond what is let go (``late_departure_seconds``): the guard is left whole for what
    follows. (Subtracted from the push, a connection slower than the guard left nothing for
    it: the next worker's send reached a limiter without burst 97-100 ms after the first at
    101 ms spacing.)"""
    clock = FakeClock(start=100.0)
    gate = MemoryGate(clock=clock)
    pacer = Pacer(gate, KEY, RatePolicy(rate=10.0), clock=clock)
    pushes: list[float] = []
    pacer.push = lambda seconds, cost=1: pushes.append(seconds)  # type: ignore[method-assign]

    async def run() -> float:
        departure = pacer.departure(clock.now(), await pacer.slot())
        assert await departure.check()
        await clock.sleep(connect)  # the first connection, opened after the claim
        await departure.trace("http11.send_request_headers.complete", {})
        return departure.guard

    guard = asyncio.run(run())
    assert guard == pytest.approx(pacer.first_send_seconds) and 0 < guard < 0.06
    assert pushes == ([] if pushed is None else [pytest.approx(pushed)])


def test_a_claim_that_wakes_late_counts_its_sleep_as_lateness() -> None:
    """The claim said "leave in 100 ms"; the process woke 3 ms after that: the headers left
    3 ms late, though only just after the check returned. The next send is pushed back."""
    clock = FakeClock(start=100.0)
    first, second = pacers(clock, rate=10.0)

    async def run() -> float:
        assert await second.departure(clock.now(), 0).check()  # the fleet's previous send
        departure = first.departure(clock.now(), 0)
        oversleep = clock.sleep

        async def late_wake(seconds: float) -> None:
            await oversleep(seconds + 0.003)

        clock.sleep = late_wake  # type: ignore[method-assign]
        assert await departure.check()  # waited for its spacing, and 3 ms more
        clock.sleep = oversleep  # type: ignore[method-assign]
        await departure.trace("http11.send_request_headers.complete", {})
        await asyncio.gather(*first._pushes)
        start = clock.now()
        assert await second.departure(start, 0).check()
        return clock.now() - start

    # 100 ms after the bytes left (without counting the sleep: 97 ms, too close).
    assert asyncio.run(run()) == pytest.approx(0.1)


def test_a_claim_that_wakes_late_checks_the_pause_again() -> None:
    """The claim said "leave in 5 ms" (too short to check again before it is due); the
    process woke 20 ms late, and another worker published a pause 10 ms after the claim:
    checked again as it wakes, the send is voided and not counted."""
    clock = FakeClock(start=100.0)
    first, second = pacers(clock, rate=10.0)
    real_sleep = clock.sleep

    async def starved(seconds: float) -> None:  # the next sleep wakes 20 ms late
        clock.sleep = real_sleep  # type: ignore[method-assign]
        await real_sleep(seconds + 0.02)

    async def run() -> bool:
        assert await second.departure(clock.now(), 0).check()  # the fleet's previous send
        await real_sleep(0.095)
        clock.sleep = starved  # type: ignore[method-assign]
        waiting = asyncio.ensure_future(first.departure(clock.now(), 0).check())
        await asyncio.sleep(0)  # it claims, and sleeps 5 ms for its spacing
        assert clock.sleep is real_sleep
        await real_sleep(0.01)
        await second.pause(30.0, cause="Retry-After from api.example.com: 30 s",
                           rate_limited=True)
        return await waiting

    assert asyncio.run(run()) is False
    assert first.counts.requests == 0


class StaleClaim(MemoryGate):
    """A store over a connection (``blocking``: calls run in threads) whose claim reply,
    read before a pause landed, reaches the worker only after that pause was published."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.blocking = True
        self.claimed, self.pausing = threading.Event(), threading.Event()
        self.claims = 0

    def claim(self, key: str, interval: float) -> Any:
        reply = super().claim(key, interval)  # clear: the pause has not landed yet
        self.claims += 1
        self.claimed.set()
        assert self.pausing.wait(5.0)
        return reply

    def pause(self, *args: Any, **kwargs: Any) -> Any:
        self.pausing.set()
        assert self.claimed.wait(5.0)  # lands after the claim was read
        return super().pause(*args, **kwargs)


@pytest.mark.parametrize("when", ["during the check", "before the check"])
def test_a_pause_of_the_workers_own_voids_a_send_whose_check_may_not_have_seen_it(
        when: str) -> None:
    """One worker, two requests: the first was refused and its worker publishes the pause
    while the second's claim is on its way (the store answers "clear": the pause has not
    landed), or the check starts while that publishing is still on its way (then without
    a round trip to the store). Either way the send is voided (measured: such a send left
    2 ms after its own worker's pause had been published). A pause published and returned
    before the check starts is seen by it."""
    clock = FakeClock(start=100.0)
    gate = StaleClaim(clock)
    pacer = Pacer(gate, KEY, RatePolicy(rate=10.0, safety_margin=0.0), clock=clock)

    async def run() -> bool:
        if when == "during the check":
            waiting = asyncio.ensure_future(pacer.departure(clock.now(), 0).check())
            await asyncio.to_thread(gate.claimed.wait, 5.0)
            await pacer.pause(1.0, cause="Retry-After from api.example.com: 1 s",
                              rate_limited=True)
            return await waiting
        gate.claimed.set()  # (the pause lands whenever its thread runs)
        pausing = asyncio.ensure_future(pacer.pause(1.0, cause="test", rate_limited=True))
        await asyncio.sleep(0)  # begun: its call is in a thread, not back yet
        went = await pacer.departure(clock.now(), 0).check()
        await pausing
        assert gate.claims == 0  # voided without asking the store
        return went

    assert asyncio.run(run()) is False
    assert pacer.counts.requests == 0


def test_a_pause_published_before_a_check_does_not_void_the_sends_after_it() -> None:
    clock = FakeClock(start=100.0)
    pacer = pacers(clock, rate=10.0, n=1)[0]

    async def run() -> bool:
        await pacer.pause(1.0, cause="test", rate_limited=True)
        clock.advance(1.0)
        return await pacer.departure(clock.now(), 1).check()

    assert asyncio.run(run()) is True


class ClaimLog(MemoryGate):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.claims: list[float] = []
        self.pushes: list[float] = []

    def claim(self, key: str, interval: float) -> Any:
        self.claims.append(interval)
        return super().claim(key, interval)

    def push(self, key: str, seconds: float) -> None:
        self.pushes.append(seconds)
        super().push(key, seconds)


def test_httpx_tells_when_the_bytes_leave(sim: ProviderSimulator, clock: FakeClock) -> None:
    """Wired for real (httpx, httpcore, a socket on loopback): each send is claimed once as
    it enters the transport and, with every departure counted late, pushed once more. The
    first claim is spaced by the first connection's guard too."""
    gate = ClaimLog(clock)
    run = Engine(Nominatim(sim.url, user_agent="geotoolkit-tests/1.0"), gate=gate,
                 rate=RatePolicy(rate=10.0), clock=clock, concurrency=2)
    run.pacer.departure_allowance = lambda cost=1: -1.0  # type: ignore[method-assign]
    outcomes = asyncio.run(run.run([Query(text=f"Street {i}, Vaduz") for i in range(3)]))
    assert len(outcomes) == 3 and len(sim.requests) == 3
    spacing, guard = run.pacer.spacing(), run.pacer.first_send_seconds
    # Three claims of one spacing (the first with its first connection's guard), three
    # pushes of at most one spacing each.
    assert gate.claims == [pytest.approx(spacing + guard), pytest.approx(spacing),
                           pytest.approx(spacing)]
    assert len(gate.pushes) == 3 and all(0 <= p <= spacing + 1e-9 for p in gate.pushes)


def test_a_push_is_at_most_one_spacing() -> None:
    """A laptop suspended between a claim and its headers must not hold the fleet back for
    the hours it slept: past one spacing, the next send has claimed already."""
    clock = FakeClock(start=100.0)
    first, second = pacers(clock, rate=10.0)

    async def run() -> float:
        departure = first.departure(clock.now(), await first.slot())
        assert await departure.check()
        await clock.sleep(3600.0)
        await departure.trace("http11.send_request_headers.complete", {})
        await asyncio.gather(*first._pushes)
        start = clock.now()
        assert await second.departure(start, 0).check()
        return clock.now() - start

    assert asyncio.run(run()) == pytest.approx(0.1)  # the one spacing pushed, no more


class SteppedLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock a test moves forward (``step``): timers and deadlines
    (``asyncio.timeout``) fall due without waiting on the wall clock."""

    offset = 0.0

    def time(self) -> float:
        return super().time() + self.offset

    def step(self, seconds: float) -> None:
        self.offset += seconds


def test_the_last_check_is_outside_the_request_deadline() -> None:
    """A send waiting for its spacing is pacing, not a slow server: it never times out."""

    async def spaced() -> bool:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, SteppedLoop)
        loop.step(0.2)  # waited longer than the whole exchange may take...
        for _ in range(2):  # ... and the loop runs what fell due meanwhile (a deadline's
            await asyncio.sleep(0)  # cancellation lands at the await after it ran)
        return True

    async def run() -> int:
        transport = httpx.MockTransport(lambda request: httpx.Response(200, json=MATCH))
        async with http.make_client(concurrency=1, transport=transport) as client:
            request = client.build_request("GET", "http://sim.test/search")
            request.extensions[http.BEFORE_SEND] = spaced
            response = await http.send(client, request, "sim", deadline_seconds=0.05)
            return response.status_code

    with asyncio.Runner(loop_factory=SteppedLoop) as runner:
        assert runner.run(run()) == 200


def test_a_last_check_that_says_no_sends_nothing() -> None:
    sent: list[httpx.Request] = []

    async def paused() -> bool:
        return False

    async def run() -> None:
        transport = httpx.MockTransport(lambda request: sent.append(request) or httpx.Response(200))
        async with http.make_client(concurrency=1, transport=transport) as client:
            request = client.build_request("GET", "http://sim.test/search")
            request.extensions[http.BEFORE_SEND] = paused
            with pytest.raises(http.SendVoided):
                await http.send(client, request, "sim")

    asyncio.run(run())
    assert sent == []


def test_a_send_is_counted_as_it_goes_not_before_its_claim() -> None:
    """The counts are flushed with any gate call, also while a send waits in its claim:
    a send voided there was never counted (a negative count would be refused), and one
    that goes is counted once."""
    clock = FakeClock(start=100.0)
    first, second = pacers(clock, rate=10.0)

    async def run() -> tuple[bool, bool]:
        assert await first.departure(clock.now(), 0).check()  # the fleet's previous send
        waiting = asyncio.ensure_future(second.departure(clock.now(), 0).check())  # 100 ms
        await clock.sleep(0.05)
        assert second.counts.take() == Report()  # flushed while it waits: nothing counted
        await first.pause(1.0, cause="test")  # a pause comes meanwhile: voided
        voided = not await waiting
        assert second.counts.take() == Report()
        clock.advance(1.0)
        went = await second.departure(clock.now(), 1).check()
        # Counted when it went, on the store's clock (the fake store shares the fake clock).
        return voided, went and second.counts.take() == Report(requests=1, at=clock.now())

    assert asyncio.run(run()) == (True, True)


class SlowReply(MemoryGate):
    """A gate whose claim replies reach the worker ``delay`` seconds after the store
    answered them (a starved process, a busy connection to the store)."""

    def __init__(self, clock: FakeClock, delay: float) -> None:
        super().__init__(clock=clock)
        self.fake, self.delay = clock, delay

    def claim(self, key: str, interval: float) -> Any:
        claimed = super().claim(key, interval)
        self.fake.advance(self.delay)
        return claimed


class PausedWhileReplying(SlowReply):
    """A claim reply that comes back late, after another worker published a pause."""

    def claim(self, key: str, interval: float) -> Any:
        claimed = super().claim(key, interval)
        self.pause(key, 30.0, cause="Retry-After from api.example.com: 30 s", rate_limited=True)
        return claimed


class StateLog(SlowReply):
    """Counts the state checks besides the claims."""

    states = 0

    def state(self, key: str) -> Any:
        self.states += 1
        return super().state(key)


def test_a_claim_reply_that_comes_back_late_checks_the_pause_again() -> None:
    """The store said "now", but the reply reached the worker 20 ms later (its loop busy with
    another answer), after another worker's 429 had paused the fleet: checked again, the
    send is voided and not counted. A reply on time is not checked twice."""
    clock = FakeClock(start=100.0)
    gate = PausedWhileReplying(clock, delay=0.02)
    pacer = Pacer(gate, KEY, RatePolicy(rate=10.0, safety_margin=0.0), clock=clock)
    assert asyncio.run(pacer.departure(clock.now(), 0).check()) is False
    assert pacer.counts.requests == 0

    on_time = StateLog(FakeClock(start=100.0), delay=0.002)
    pacer = Pacer(on_time, KEY, RatePolicy(rate=10.0, safety_margin=0.0), clock=on_time.fake)
    assert asyncio.run(pacer.departure(on_time.fake.now(), 0).check()) is True
    assert on_time.states == 0


def test_a_claim_reply_that_comes_back_late_counts_as_lateness() -> None:
    """The store said "now" and the reply reached the worker 30 ms later: the send leaves
    30 ms after it was due, and the fleet's next send is held back as much."""
    clock = FakeClock(start=100.0)
    gate = SlowReply(clock, delay=0.03)
    policy = RatePolicy(rate=10.0, safety_margin=0.0)
    late, next_one = (Pacer(gate, KEY, policy, clock=clock) for _ in range(2))
    late._strict = True  # as after a first 429

    async def run() -> float:
        departure = late.departure(clock.now(), 0)
        assert await departure.check()
        left = clock.now()
        await departure.trace("http11.send_request_headers.complete", {})
        await asyncio.gather(*late._pushes)
        gate.delay = 0.0
        assert await next_one.departure(clock.now(), 0).check()
        return clock.now() - left

    assert asyncio.run(run()) == pytest.approx(0.1)  # 100 ms after the late one left


def pushes_of_sends_leaving(*lateness: float) -> list[float]:
    """One worker (strict, at 10/s) whose claimed sends' headers leave ``lateness`` seconds
    after they were due, one after the other: the pushes of the fleet's next claim."""
    clock = FakeClock(start=100.0)
    (pacer,) = pacers(clock, rate=10.0, n=1)
    pushes: list[float] = []
    pacer.push = lambda seconds, cost=1: pushes.append(seconds)  # type: ignore[method-assign]

    async def run() -> None:
        for late in lateness:
            departure = pacer.departure(clock.now(), 0)
            assert await departure.check()
            await clock.sleep(late)
            await departure.trace("http11.send_request_headers.complete", {})

    asyncio.run(run())
    return pushes


def test_what_every_send_pays_is_not_pushed_only_what_one_pays_more() -> None:
    """Every send of this worker leaves 0.8 ms after it was due (its claim's round trip, the
    client's own work): two of them are still an interval apart, and pushing each would slow
    the fleet by 0.8 %. Only a send later than usual pushes the next, by what it was late more."""
    pushes = pushes_of_sends_leaving(0.0008, 0.0008, 0.0009, 0.0008, 0.009, 0.0008)
    assert pushes == pytest.approx([0.0008, 0.0082])  # the first (nothing known yet), the 9 ms


def test_a_cold_worker_whose_sends_all_leave_late_pushes_all_but_what_every_send_pays() -> None:
    """A cold worker's first sends all leave late (its first connections, a process not yet
    warm): their lateness is not what every send pays, and the next worker's send, on time,
    would land that much less than an interval behind. At most 1 ms counts as usual."""
    assert Pacer.usual_departure_seconds == 0.001
    pushes = pushes_of_sends_leaving(0.005, 0.005, 0.007, 0.0005)
    assert pushes == pytest.approx([0.005, 0.004, 0.006])  # the last, on time: nothing


def test_a_claim_asking_an_hour_goes_on_its_slot_instead(caplog: pytest.LogCaptureFixture) -> None:
    """A store whose clock stepped back an hour holds the sends' spacing an hour ahead: no
    queue of sends is that long. The send goes on its slot (spaced already), said in the
    log, instead of waiting an hour."""
    clock = FakeClock(start=100.0)
    (pacer,) = pacers(clock, rate=10.0, n=1)
    assert pacer.gate.claim(KEY, 3600.0).wait == 0.0  # the spacing now an hour ahead

    async def run() -> float:
        start = clock.now()
        assert await pacer.departure(start, 0).check()
        return clock.now() - start

    with caplog.at_level("WARNING", logger="geotoolkit.engine"):
        assert asyncio.run(run()) == 0.0
    assert "stepped back" in caplog.text


class RoundTrip(MemoryGate):
    """Every call takes ``rtt`` on the fake clock, the store reading halfway (a store
    across a network: what it says of a pause is a round trip old when the worker acts)."""

    def __init__(self, clock: FakeClock, rtt: float) -> None:
        super().__init__(clock=clock)
        self.fake, self.half = clock, rtt / 2
        self.sends_at: list[float] = []

    def _trip(self, call: Any) -> Any:
        self.fake.advance(self.half)
        reply = call()
        self.fake.advance(self.half)
        return reply

    def reserve(self, *args: Any, **kwargs: Any) -> Any:
        return self._trip(lambda: super(RoundTrip, self).reserve(*args, **kwargs))

    def state(self, key: str) -> Any:
        return self._trip(lambda: super(RoundTrip, self).state(key))

    def claim(self, key: str, interval: float) -> Any:
        return self._trip(lambda: super(RoundTrip, self).claim(key, interval))


@pytest.mark.parametrize("rtt", [0.002, 0.008])
def test_a_slot_at_the_end_of_a_pause_is_used_though_checked_before_it_ends(rtt: float) -> None:
    """A worker reserves during a pause: its slot is the pause's very end. Its check comes a
    round trip before the slot, so the store still reads the pause: the slot stands (the
    claim holds the send until the pause is over), instead of going to the end of the
    queue, one spacing of the fleet lost per pause (measured: the fleet's first send after
    a pause went 105-117 ms after its end, at 10/s). Nothing leaves inside the pause."""
    clock = FakeClock(start=100.0)
    gate = RoundTrip(clock, rtt)
    policy = RatePolicy(rate=10.0, safety_margin=0.0)
    thrower, waiting = (Pacer(gate, KEY, policy, clock=clock) for _ in range(2))

    async def run() -> tuple[float, float]:
        for _ in range(3):  # the worker learns its round trip (its lead)
            assert await waiting.departure(clock.now(), await waiting.slot()).check()
            await clock.sleep(0.2)
        await thrower.pause(1.0, cause="Retry-After from api.example.com: 1 s", rate_limited=True)
        until = MemoryGate.state(gate, KEY).pause_until
        while True:
            epoch = await waiting.slot()
            if await waiting.departure(clock.now(), epoch).check():
                return until, clock.now()

    until, sent = asyncio.run(run())
    assert until <= sent < until + 3 * rtt  # at the pause's end (a claim), not 0.1 later


class LongerOnCheck(RoundTrip):
    """The running pause is made longer (another 429, a longer Retry-After) just before the
    first check of a slot."""

    reservations = 0
    longer = False

    def reserve(self, *args: Any, **kwargs: Any) -> Any:
        self.reservations += 1
        return super().reserve(*args, **kwargs)

    def state(self, key: str) -> Any:
        if not self.longer:
            self.longer = True
            MemoryGate.pause(self, key, 2.0, cause="test", rate_limited=True)
        return super().state(key)


def test_a_slot_at_the_end_of_a_pause_made_longer_meanwhile_is_voided() -> None:
    clock = FakeClock(start=100.0)
    gate = LongerOnCheck(clock, 0.004)
    pacer = Pacer(gate, KEY, RatePolicy(rate=10.0, safety_margin=0.0), clock=clock)

    async def run() -> None:
        await pacer.pause(1.0, cause="test", rate_limited=True)
        await pacer.slot()

    asyncio.run(run())
    assert gate.longer and gate.reservations == 2  # the first slot was voided
    assert clock.now() >= MemoryGate.state(gate, KEY).pause_until
