"""The fleet-wide circuit breaker, on a fake clock: a provider that is down costs a few probes,
not six attempts a row; the batch recovers or ends clearly; every worker on the key sees it."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from geotoolkit import FakeClock, MemoryGate, ProviderUnavailableError, Query, RateLimitError
from geotoolkit.engine import Engine
from geotoolkit.engine.circuit import CIRCUIT_VALUE, CircuitState
from geotoolkit.policy import Backoff
from geotoolkit.progress import Event, FleetSampled, Throttled
from geotoolkit.providers import Nominatim
from geotoolkit.results import Failure, Match, Outcome

PROVIDER = Nominatim("http://sim.test", user_agent="geotoolkit-tests/1.0")
MATCH = [{"lat": "47.14", "lon": "9.52", "display_name": "Vaduz"}]


class Outage:
    """A provider down (connection refused) until ``up_at`` on the clock; logs every attempt."""

    def __init__(self, clock: FakeClock, up_at: float = float("inf"),
                 poison: str | None = None) -> None:
        self.clock, self.up_at, self.poison = clock, up_at, poison
        self.sent: list[tuple[float, str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        q = request.url.params.get("q", "")
        self.sent.append((self.clock.now(), q))
        if self.poison is not None and self.poison in q:
            return httpx.Response(500, text="internal error")
        if self.clock.now() < self.up_at:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json=MATCH)


def engine(clock: FakeClock, transport: Callable[[httpx.Request], httpx.Response],
           gate: MemoryGate, **kwargs: Any) -> Engine:
    options: dict[str, Any] = {
        "gate": gate, "rate": 10.0, "clock": clock, "transport": httpx.MockTransport(transport),
        "concurrency": 4, "rng": random.Random(0), "circuit_timeout_seconds": 600.0,
        "backoff": Backoff(initial_seconds=1.0, max_seconds=30.0)}
    options.update(kwargs)
    return Engine(PROVIDER, **options)


def poisoned(*prefixes: str) -> Callable[[httpx.Request], httpx.Response]:
    """A provider that answers 500 to the queries starting with ``prefixes``, else a match."""
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("q", "").startswith(prefixes):
            return httpx.Response(500, text="internal error")
        return httpx.Response(200, json=MATCH)

    return answer


def queries(n: int, prefix: str = "Street") -> list[Query | str]:
    return [Query(text=f"{prefix} {i}, Vaduz") for i in range(n)]


def test_a_provider_that_stays_down_costs_a_few_probes_then_ends_the_batch_clearly() -> None:
    clock = FakeClock(start=0.0)
    outage = Outage(clock)
    with pytest.raises(ProviderUnavailableError, match=r"unreachable for .* circuit_timeout_seconds"):
        asyncio.run(engine(clock, outage, MemoryGate(clock=clock)).run(queries(200)))
    # Without the circuit: 200 rows x 6 attempts = 1200 requests over hours of backoff.
    assert len(outage.sent) < 40
    assert 600 <= clock.now() < 700  # it gave up after circuit_timeout_seconds, not before
    probes = [t for t, _ in outage.sent if t > 5]
    gaps = [round(b - a) for a, b in itertools.pairwise(probes)]
    assert gaps[:4] == [8, 16, 32, 60] and set(gaps[4:]) == {60}  # growing, then capped


def test_a_provider_answering_5xx_is_said_to_answer_them_not_to_be_unreachable() -> None:
    """A provider answering HTTP 500 to every query is reachable and failing; the log, the
    fleet's pause cause, the widget's line and the final error all said "unreachable"."""
    from geotoolkit.display.model import _throttle_cause

    clock = FakeClock(start=0.0)
    events: list[Event] = []
    with pytest.raises(ProviderUnavailableError) as info:
        asyncio.run(engine(clock, poisoned(""), MemoryGate(clock=clock),
                           circuit_timeout_seconds=100.0).run(queries(20), events.append))
    assert str(info.value).startswith("sim.test has been answering HTTP 500 for ")
    assert "(HTTP 500): internal error)" in str(info.value)
    causes = {e.pause_cause for e in events if isinstance(e, FleetSampled) and e.pause_cause}
    assert causes and all(c.startswith("circuit open: sim.test answering HTTP 500 (") for c in causes)
    circuit = [e for e in events if isinstance(e, Throttled) and e.cause == "circuit"]
    assert circuit and {e.status_code for e in circuit} == {500}
    assert _throttle_cause(circuit[0]) == "circuit open: sim.test answering HTTP 500, probing"
    assert not any("unreachable" in text for text in [str(info.value), *causes])


def test_a_deferred_run_behind_an_open_circuit_says_it_waits_for_the_probe() -> None:
    """A non-blocking run meeting a circuit that another run left open said 'sim.test asks
    to wait 31.8 s', though the provider asked nothing: the wait is the circuit's."""
    clock = FakeClock(start=0.0)
    gate, outage = MemoryGate(clock=clock), Outage(clock)
    with pytest.raises(ProviderUnavailableError):
        asyncio.run(engine(clock, outage, gate, circuit_timeout_seconds=30.0).run(queries(10)))
    with pytest.raises(RateLimitError) as info:
        asyncio.run(engine(clock, outage, gate, max_wait_seconds=1.0).run(queries(3)))
    assert str(info.value).startswith(
        "sim.test is unreachable (nominatim connection failed (ConnectError: connection refused)): "
        "its circuit is open, and the next probe is ")
    assert str(info.value).endswith(" s away, more than max_wait_seconds=1")


def test_the_batch_recovers_when_the_provider_comes_back() -> None:
    clock = FakeClock(start=0.0)
    outage = Outage(clock, up_at=100.0)
    events: list[Event] = []
    outcomes = asyncio.run(engine(clock, outage, MemoryGate(clock=clock))
                           .run(queries(50), events.append))
    assert [o.status for o in outcomes] == ["matched"] * 50
    during = [t for t, _ in outage.sent if t < 100.0]
    assert len(during) < 20  # a few failures, then one probe at a time
    assert all(isinstance(o, Match) for o in outcomes)  # no row used up its attempts
    assert sum(o.attempts for o in outcomes) == len(outcome_sends := outage.sent) and outcome_sends
    causes = {e.pause_cause for e in events if isinstance(e, FleetSampled) and e.pause_cause}
    assert any(c.startswith("circuit open: sim.test unreachable") for c in causes)


def test_every_worker_on_the_key_waits_while_one_probes() -> None:
    clock = FakeClock(start=0.0)
    gate = MemoryGate(clock=clock)
    outage = Outage(clock, up_at=200.0)

    async def both() -> list[list[Outcome]]:
        runs = [engine(clock, outage, gate).run(queries(30, name)) for name in ("A", "B")]
        return list(await asyncio.gather(*runs))

    results = asyncio.run(both())
    assert all(o.status == "matched" for run in results for o in run)
    during = sorted(t for t, _ in outage.sent if 10.0 < t < 200.0)
    assert 3 <= len(during) <= 12  # probes of the fleet, not of each worker
    assert all(b - a >= 1.9 for a, b in itertools.pairwise(during))  # one at a time
    state = gate.values(PROVIDER.gate_key, "circuit")
    assert CIRCUIT_VALUE not in state  # closed again


def test_one_poisoned_row_does_not_open_the_circuit() -> None:
    clock = FakeClock(start=0.0)
    outage = Outage(clock, up_at=0.0, poison="Street 3,")
    outcomes = asyncio.run(engine(clock, outage, MemoryGate(clock=clock), concurrency=1)
                           .run(queries(8)))
    statuses = [o.status for o in outcomes]
    assert statuses == ["matched"] * 3 + ["failed"] + ["matched"] * 4
    poisoned = outcomes[3]
    assert isinstance(poisoned, Failure) and poisoned.attempts == 6
    assert "HTTP 500" in poisoned.reason


def test_two_poisoned_rows_that_open_the_circuit_do_not_hold_the_other_rows_for_ever() -> None:
    """Two rows the provider always answers 500 open the circuit once they are all that is
    left (failures=3). Its probes were theirs and cost them no attempt, so the circuit never
    closed and the run ended after circuit_timeout_seconds (600 s) with nothing to show: a
    failed probe is its row's attempt, and such rows end as failures."""
    clock = FakeClock(start=0.0)
    two_poisoned = poisoned("Street 1,", "Street 2,")

    outcomes = asyncio.run(engine(clock, two_poisoned, MemoryGate(clock=clock), circuit_failures=3)
                           .run(queries(60)))
    statuses = [o.status for o in outcomes]
    assert statuses == ["matched"] + ["failed"] * 2 + ["matched"] * 57
    assert all("HTTP 500" in o.reason for o in outcomes[1:3] if isinstance(o, Failure))
    assert clock.now() < 60  # not after circuit_timeout_seconds


def test_while_other_rows_wait_a_row_whose_send_just_failed_lets_them_probe_first() -> None:
    """At 1/s two poisoned rows open the circuit (failures=2) with 17 rows waiting. The tasks
    that failed first would claim every probe first (the probes at 2, 4, 8, 16 s all theirs:
    done at 82 s, measured); a waiting row whose last send did not fail probes first, and its
    answer closes the circuit (done at 50 s)."""
    clock = FakeClock(start=0.0)
    two_poisoned = poisoned("Street 1,", "Street 2,")

    outcomes = asyncio.run(engine(clock, two_poisoned, MemoryGate(clock=clock), rate=1.0,
                                  circuit_failures=2).run(queries(20)))
    assert [o.status for o in outcomes] == ["matched"] + ["failed"] * 2 + ["matched"] * 17
    assert clock.now() < 60


def test_non_blocking_mode_raises_with_the_time_to_the_next_probe() -> None:
    clock = FakeClock(start=0.0)
    outage = Outage(clock)
    with pytest.raises(RateLimitError) as info:
        asyncio.run(engine(clock, outage, MemoryGate(clock=clock), max_wait_seconds=1.0)
                    .run(queries(20)))
    assert info.value.retry_after is not None and info.value.retry_after > 1.0


def test_a_provider_that_answers_nothing_but_503_ends_the_batch_after_the_timeout() -> None:
    clock = FakeClock(start=0.0)
    sent: list[float] = []

    def down(request: httpx.Request) -> httpx.Response:
        sent.append(clock.now())
        if clock.now() < 20.0 or len(sent) > 300:  # up again after 300 requests: never hangs
            return httpx.Response(200, json=MATCH)
        return httpx.Response(503, headers={"Retry-After": "5"}, text="no server is available")

    with pytest.raises(ProviderUnavailableError, match=r"nothing but refusals \(HTTP 503\) for") as info:
        asyncio.run(engine(clock, down, MemoryGate(clock=clock), concurrency=1).run(queries(400)))
    refused = [t for t in sent if t >= 20.0]
    assert info.value.status_code == 503
    assert 600 <= refused[-1] - refused[0] < 650  # given up after circuit_timeout_seconds
    gaps = [b - a for a, b in itertools.pairwise(refused)]
    assert min(gaps) >= 5.0 and max(gaps) > 15.0  # Retry-After, then a growing backoff


def test_a_provider_down_from_the_first_send_with_503_teaches_the_gate_no_rate() -> None:
    """A self-hosted instance whose backend is down answers every send 503 (nginx's page,
    no Retry-After), and no rate was given. Read as a limiter's 503s, the fleet cut the
    rate it was discovering at each (measured with the CLI: 0.125/s when it gave up), and
    the gate kept that as the rate learned for the next runs on the key. Nothing was
    answered: the run gives up, the gate learned nothing."""
    clock = FakeClock(start=0.0)
    gate = MemoryGate(clock=clock)

    def down(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, headers={"Content-Type": "text/html"},
                              text="<html><h1>503 Service Temporarily Unavailable</h1></html>")

    with pytest.raises(ProviderUnavailableError, match=r"nothing but refusals \(HTTP 503\)"):
        asyncio.run(engine(clock, down, gate, rate=None, circuit_timeout_seconds=30.0)
                    .run(queries(20)))
    stats = gate.stats(PROVIDER.gate_key)
    assert stats.learned_rate is None and stats.rate_factor == 1.0


def test_at_a_configured_rate_a_503_before_any_answer_paces_down() -> None:
    """A cold fleet configured over nginx's ``limit_req`` (503 as it ships): each worker's
    first answer may be the refusal. Read as an outage's (no cut until the worker had
    an answer), 16 workers at twice the limit met 9 pauses in their first seconds, one
    per worker, and got 0.90 of it. At a configured rate it is a 429's reading: the
    first cuts (a cold cut climbs back as answers come)."""
    clock = FakeClock(start=0.0)
    gate = MemoryGate(clock=clock)
    sent = itertools.count()
    factors: list[float] = []

    def cold(request: httpx.Request) -> httpx.Response:
        factors.append(gate.stats(PROVIDER.gate_key).rate_factor)
        if next(sent) == 0:
            return httpx.Response(503, headers={"Content-Type": "text/html"},
                                  text="<html><h1>503 Service Temporarily Unavailable</h1></html>")
        return httpx.Response(200, json=MATCH)

    outcomes = asyncio.run(engine(clock, cold, gate, concurrency=1).run(queries(3)))
    assert [o.status for o in outcomes] == ["matched"] * 3
    assert factors[1] < 1.0  # the send after the refusal went at the cut pace


def test_refusals_between_answers_never_end_the_batch() -> None:
    clock = FakeClock(start=0.0)
    refusals = itertools.count()

    def busy(request: httpx.Request) -> httpx.Response:  # a 503 at every other request
        if next(refusals) % 2:
            return httpx.Response(503, headers={"Retry-After": "30"})
        return httpx.Response(200, json=MATCH)

    outcomes = asyncio.run(engine(clock, busy, MemoryGate(clock=clock), concurrency=1,
                                  circuit_timeout_seconds=60.0).run(queries(40)))
    assert [o.status for o in outcomes] == ["matched"] * 40
    assert clock.now() > 600  # far longer than the timeout in all, each refusal answered


def test_circuit_state_survives_junk_on_the_gate() -> None:
    assert CircuitState.from_json('[1, 2, "x", "y"]') is None
    assert CircuitState.from_json('[1, 2, NaN, "y"]') is None
    assert CircuitState.from_json(None) is None


def given_up() -> tuple[FakeClock, MemoryGate, Outage]:
    """A run that gave up on a provider that stays down, and the circuit it left open."""
    clock = FakeClock(start=0.0)
    gate = MemoryGate(clock=clock)
    outage = Outage(clock)
    with pytest.raises(ProviderUnavailableError):
        asyncio.run(engine(clock, outage, gate).run(queries(20)))
    return clock, gate, outage


def test_a_rerun_after_a_run_gave_up_probes_before_giving_up_in_turn() -> None:
    """'Run again to resume': the circuit the last run left open on the gate (for up to its
    TTL) is probed by the next run, not taken as an outage this run already waited out."""
    clock, gate, outage = given_up()
    gave_up_at, sent = clock.now(), len(outage.sent)
    outage.up_at = gave_up_at  # the network is mended; the rerun comes at once
    outcomes = asyncio.run(engine(clock, outage, gate).run(queries(20)))
    assert [o.status for o in outcomes] == ["matched"] * 20
    assert len(outage.sent) > sent and clock.now() - gave_up_at < 120


def test_a_rerun_while_the_provider_is_still_down_waits_its_own_timeout() -> None:
    clock, gate, outage = given_up()
    gave_up_at, sent = clock.now(), len(outage.sent)
    with pytest.raises(ProviderUnavailableError, match="circuit_timeout_seconds"):
        asyncio.run(engine(clock, outage, gate).run(queries(20)))
    assert 600 <= clock.now() - gave_up_at < 700 and len(outage.sent) > sent


def test_failing_rows_at_the_head_of_a_batch_do_not_hold_back_the_rows_behind_them() -> None:
    """A rerun sends first the rows that failed before (failures are not cached): six rows
    the provider always answers 500, then 94 good ones, at concurrency 4. The four workers
    took four failing rows, opened the circuit, and every probe was one of them (each
    failed, the interval doubled to 60 s): the run gave up after circuit_timeout_seconds
    (602 s, measured) with the 94 good rows never sent, and so did every rerun. A row whose
    own send failed while the circuit is open now steps aside for a row not yet tried, and
    is tried again after them."""
    clock = FakeClock(start=0.0)
    six_poisoned = poisoned(*(f"Street {i}," for i in range(6)))

    outcomes = asyncio.run(engine(clock, six_poisoned, MemoryGate(clock=clock)).run(queries(100)))
    assert [o.status for o in outcomes] == ["failed"] * 6 + ["matched"] * 94
    assert all("HTTP 500" in o.reason for o in outcomes[:6] if isinstance(o, Failure))
    assert clock.now() < 300  # not after circuit_timeout_seconds


def test_a_rerun_of_only_the_rows_that_failed_settles_them_instead_of_giving_up() -> None:
    """A rerun after a run that ended well: the cache holds every row but eight the provider
    always answers 500, which are all that is sent. They opened the circuit, every probe was
    one of them and failed, the interval grew to 60 s, and the run gave up after
    circuit_timeout_seconds (600 s) without an output, every time. Now a row that failed
    before probes with a query the provider answered (from the cache): its answer closes
    the circuit, and the failing rows' failures are their own (they end failed)."""
    from geotoolkit.store import MemoryStore

    clock = FakeClock(start=0.0)
    store = MemoryStore()
    good = queries(20, "Good")
    for query in good:
        assert isinstance(query, Query)
        store.put(f"{PROVIDER.cache_namespace()}:{query.key()}",
                  Match(lon=9.52, lat=47.14, label="Vaduz", provider="nominatim"))
    bad = queries(8, "Bad")
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.params.get("q", ""))
        return poisoned("Bad")(request)

    outcomes = asyncio.run(engine(clock, answer, MemoryGate(clock=clock), store=store)
                           .run([*good, *bad]))
    assert [o.status for o in outcomes] == ["matched"] * 20 + ["failed"] * 8
    assert all(isinstance(o, Failure) and 6 <= o.attempts <= 7 for o in outcomes[20:])
    assert clock.now() < 200  # not after circuit_timeout_seconds
    assert sum(q.startswith("Good") for q in sent) <= 3  # a probe or so, not a second run
