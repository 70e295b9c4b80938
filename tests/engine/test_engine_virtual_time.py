"""The engine on a fake clock: hours of throttling checked in milliseconds.

The HTTP side is an injected httpx transport (no network, no mock library): a
small handler that answers like Nominatim and records the virtual send times.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from geotoolkit import (
    AuthenticationError,
    Backoff,
    Failure,
    FakeClock,
    Match,
    MemoryGate,
    NoMatch,
    Query,
    RateLimitError,
    RatePolicy,
)
from geotoolkit.engine import Engine
from geotoolkit.progress import BatchFinished, Event, Throttled
from geotoolkit.providers import Nominatim
from geotoolkit.store.memory import MemoryStore

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """Answers each request with ``respond`` and logs (virtual time, q)."""

    def __init__(self, clock: FakeClock, respond: Handler | None = None) -> None:
        self.clock = clock
        self.sent: list[tuple[float, str]] = []
        self.respond = respond or self.match

    @staticmethod
    def match(request: httpx.Request) -> httpx.Response:
        q = request.url.params["q"]
        if "nowhere" in q:
            return httpx.Response(200, json=[])
        return httpx.Response(200, json=[{"lat": "47.1", "lon": f"9.{len(q)}", "display_name": q}])

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((self.clock.now(), request.url.params.get("q", "")))
        return self.respond(request)


def make_engine(clock: FakeClock, recorder: Recorder, **kwargs: object) -> Engine:
    provider = Nominatim("http://sim.test", user_agent="geotoolkit-tests/1.0")
    options: dict[str, object] = {
        "gate": MemoryGate(clock=clock), "rate": RatePolicy(rate=1.0, safety_margin=0.0),
        "clock": clock, "transport": httpx.MockTransport(recorder), "rng": random.Random(0),
        "concurrency": 4,
    }
    options.update(kwargs)
    return Engine(provider, **options)  # type: ignore[arg-type]


def run(engine: Engine, items: list[Query | str], progress: Any = None) -> list:  # type: ignore[type-arg]
    return asyncio.run(engine.run(items, progress))


def queries(n: int) -> list[Query | str]:
    return [Query(text=f"Street {i}, Vaduz") for i in range(n)]


def test_ten_queries_at_one_per_second_take_nine_virtual_seconds() -> None:
    clock = FakeClock(start=1000.0)
    recorder = Recorder(clock)
    outcomes = run(make_engine(clock, recorder), queries(10))
    times = sorted(t for t, _ in recorder.sent)
    assert len(outcomes) == 10 and all(isinstance(o, Match) for o in outcomes)
    assert times[-1] - times[0] == pytest.approx(9.0)
    assert all(b - a >= 1.0 - 1e-9 for a, b in itertools.pairwise(times))


def test_results_come_back_in_input_order_one_per_input() -> None:
    clock = FakeClock()
    items: list[Query | str] = [Query(text="A st"), "empty address", Query(text="nowhere 1"),
                                Query(text="a  ST"), Query(text="Bb st")]
    outcomes = run(make_engine(clock, Recorder(clock), concurrency=3), items)
    assert [o.status for o in outcomes] == ["matched", "failed", "no_match", "matched", "matched"]
    assert outcomes[0] == outcomes[3]  # the same address after normalisation
    assert outcomes[1].reason == "empty address" and outcomes[1].attempts == 0


def test_duplicates_are_sent_once() -> None:
    clock = FakeClock()
    recorder = Recorder(clock)
    run(make_engine(clock, recorder), [Query(text="Same St 1")] * 5 + [Query(text="same st 1 ")])
    assert len(recorder.sent) == 1


def test_retry_after_30_pauses_every_concurrent_task() -> None:
    clock = FakeClock(start=0.0)
    state = {"throttled": False}

    def respond(request: httpx.Request) -> httpx.Response:
        if request.url.params["q"] == "Street 2, Vaduz" and not state["throttled"]:
            state["throttled"] = True
            return httpx.Response(429, headers={"Retry-After": "30"})
        return Recorder.match(request)

    recorder = Recorder(clock, respond)
    events: list[Event] = []
    backoff = Backoff(initial_seconds=1.0, jitter=0.0)
    outcomes = run(make_engine(clock, recorder, backoff=backoff), queries(8), events.append)
    assert all(isinstance(o, Match) for o in outcomes)
    times = [t for t, _ in recorder.sent]
    throttled_at = times[2]
    after = [t for t in times if t > throttled_at]
    assert after and min(after) >= throttled_at + 30.0  # nobody sent during the pause
    assert all(b - a >= 1.0 - 1e-9 for a, b in zip(sorted(after), sorted(after)[1:], strict=False))
    throttles = [e for e in events if isinstance(e, Throttled)]
    assert len(throttles) == 1 and throttles[0].retry_after == 30.0
    assert throttles[0].cause == "retry-after" and throttles[0].wait_seconds == 30.0


def test_pause_is_published_before_sleeping() -> None:
    order: list[str] = []

    class LoggingClock(FakeClock):
        async def sleep(self, seconds: float) -> None:
            order.append(f"sleep {seconds:g}")
            await super().sleep(seconds)

    class LoggingGate(MemoryGate):
        def pause(self, key: str, seconds: float, **kwargs: Any) -> float:
            order.append(f"pause {seconds:g}")
            return super().pause(key, seconds, **kwargs)

    clock = LoggingClock(start=0.0)
    answers = iter([httpx.Response(429, headers={"Retry-After": "10"})])

    def respond(request: httpx.Request) -> httpx.Response:
        return next(answers, None) or Recorder.match(request)

    run(make_engine(clock, Recorder(clock, respond), gate=LoggingGate(clock=clock), concurrency=1,
                    backoff=Backoff(jitter=0.0, initial_seconds=0.1)), queries(1))
    paused = order.index("pause 10")
    sleeps = [i for i, entry in enumerate(order) if entry.startswith("sleep")]
    assert sleeps and paused < sleeps[0]  # published, then slept (in steps)
    assert sum(float(order[i].split()[1]) for i in sleeps) == pytest.approx(10.0)


def test_no_match_is_not_retried() -> None:
    clock = FakeClock()
    recorder = Recorder(clock)
    outcomes = run(make_engine(clock, recorder), [Query(text="nowhere street")])
    assert isinstance(outcomes[0], NoMatch) and len(recorder.sent) == 1


def test_server_that_keeps_saying_retry_after_1_gets_longer_waits_and_never_fails_the_row() -> None:
    clock = FakeClock(start=0.0)
    answers = iter([httpx.Response(429, headers={"Retry-After": "1"}) for _ in range(10)])
    recorder = Recorder(clock, lambda r: next(answers, None) or Recorder.match(r))
    outcomes = run(make_engine(clock, recorder, max_attempts=6, concurrency=1,
                               backoff=Backoff(initial_seconds=1.0, jitter=0.5)), queries(1))
    # Ten 429s in a row, more than max_attempts: throttling is a signal, not a verdict.
    assert isinstance(outcomes[0], Match) and outcomes[0].attempts == 11
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(recorder.sent)]
    assert len(gaps) == 10 and gaps[4] >= 8.0 and gaps[-1] > gaps[0]  # 429 number 5: [8, 16]


def test_a_key_throttled_for_good_waits_until_the_non_blocking_budget_runs_out() -> None:
    clock = FakeClock(start=0.0)
    recorder = Recorder(clock, lambda r: httpx.Response(429, headers={"Retry-After": "1"}))
    with pytest.raises(RateLimitError) as info:
        run(make_engine(clock, recorder, concurrency=1, max_wait_seconds=20.0,
                        backoff=Backoff(initial_seconds=1.0, jitter=0.0)), queries(1))
    assert info.value.retry_after is not None and info.value.retry_after > 20.0
    assert len(recorder.sent) == 6  # waits 1, 2, 4, 8, 16, then 32 > the budget


def test_a_budget_under_the_fleets_spacing_still_sends_a_row_each_rerun() -> None:
    """Non-blocking mode with a budget under the fleet's spacing (rate 1/s, 0.5 s): a run
    that raised had already reserved the slot it would not wait for, which pushed the next
    run's slot back by as much: rerun at its ``retry_after``, it met the same wait, reserved
    again, and raised again, sending nothing for ever (docs/orchestrators.md measured 60
    Prefect retries sending one request). A slot beyond the budget is no longer reserved:
    each rerun sends what is due, one spacing apart, and the batch ends."""
    clock = FakeClock(start=0.0)
    recorder, gate, store = Recorder(clock), MemoryGate(clock=clock), MemoryStore()
    runs = 0
    for runs in range(1, 11):  # noqa: B007 - the count is asserted
        engine = make_engine(clock, recorder, gate=gate, store=store, concurrency=1,
                             max_wait_seconds=0.5)
        try:
            outcomes = run(engine, queries(3))
            break
        except RateLimitError as exc:
            assert exc.retry_after is not None and exc.retry_after <= 1.0 + 1e-9
            clock.advance(exc.retry_after)
    else:
        pytest.fail(f"10 reruns sent {len(recorder.sent)} of 3 rows")
    assert [o.status for o in outcomes] == ["matched"] * 3
    times = [t for t, _ in recorder.sent]
    assert runs == 3 and len(times) == 3
    assert all(b - a >= 1.0 - 1e-9 for a, b in itertools.pairwise(times))


@pytest.mark.parametrize(("status", "headers", "said"), [
    (200, {}, "the next send to sim.test is 2.0 s away (the fleet's pacing, a pause on the gate, "
              "or a backoff after an error), more than max_wait_seconds=0.1"),
    (429, {"Retry-After": "120"}, "sim.test asks to wait 120.0 s (HTTP 429): the next try is "
                                  "120.0 s away, more than max_wait_seconds=0.1"),
    (503, {}, "sim.test refused a send (HTTP 503, no Retry-After): the backoff puts the next try "
              "1.0 s away, more than max_wait_seconds=0.1"),
    (500, {}, "the backoff after a failed attempt (HTTP 500) puts the next send to sim.test 1.0 s "
              "away, more than max_wait_seconds=0.1"),
])
def test_a_deferred_batch_says_what_the_wait_is_for(status: int, headers: dict[str, str],
                                                    said: str) -> None:
    """Non-blocking mode said '<host> asks to wait 2.0 s' for any wait over the budget, also
    for the fleet's own spacing at rate=0.5 (the provider had asked nothing) and for a
    backoff after a 503 without Retry-After; a backoff after a failed attempt was named
    among every possible cause. It now says the wait's cause."""
    clock = FakeClock(start=0.0)
    answered = {"n": 0}

    def respond(request: httpx.Request) -> httpx.Response:
        answered["n"] += 1
        if answered["n"] == 1 or status == 200:
            return Recorder.match(request)
        return httpx.Response(status, headers=headers)

    with pytest.raises(RateLimitError) as info:
        run(make_engine(clock, Recorder(clock, respond), concurrency=1, max_wait_seconds=0.1,
                        rate=RatePolicy(rate=0.5, safety_margin=0.0) if status == 200 else 50.0,
                        backoff=Backoff(initial_seconds=1.0, jitter=0.0)), queries(3))
    assert str(info.value) == said


def _a_503_second() -> Handler:
    """A provider that answers its second request 503 (``Retry-After: 1``), never a 429,
    and matches every other."""
    answered = {"n": 0}

    def respond(request: httpx.Request) -> httpx.Response:
        answered["n"] += 1
        if answered["n"] == 2:
            return httpx.Response(503, headers={"Retry-After": "1"})
        return Recorder.match(request)

    return respond


def test_the_progress_line_names_503_refusals_throttled_not_429s() -> None:
    """A provider that answered only 503s (never a 429) showed '429s 25%' on the progress
    line: the share counts every refusal that slows the fleet, 429 and 503 alike."""
    from geotoolkit.display.model import ProgressModel, fleet_text

    clock = FakeClock(start=0.0)
    respond = _a_503_second()

    model = ProgressModel(time_fn=clock.now)
    run(make_engine(clock, Recorder(clock, respond), concurrency=1), queries(3), model.update)
    view = model.view()
    assert view.throttles == 1 and view.throttle_ratio == pytest.approx(0.25)
    assert ", throttled 25%" in fleet_text(view) and "429" not in fleet_text(view)


def test_the_fleet_status_names_503_refusals_throttled_not_429s() -> None:
    """The fleet's stats count every refusal that slows it (429 and 503 alike), and the
    fleet panel and `geotoolkit gate status` said '429s per success 1 (1 per 1 ...)' for a
    provider that had answered one 503 and never a 429."""
    from geotoolkit.display.fleet_text import status_text
    from geotoolkit.gate.status import fleet_status

    clock = FakeClock(start=0.0)
    gate = MemoryGate(clock=clock)
    respond = _a_503_second()

    run(make_engine(clock, Recorder(clock, respond), gate=gate, concurrency=1), queries(3))
    text = status_text([s.as_dict() for s in fleet_status(gate, hosts=["sim.test"])])
    assert "throttled per success 0.333 (1 per 3 over " in text and "429" not in text


def test_day_long_retry_after_is_clamped_to_the_cap() -> None:
    clock = FakeClock(start=0.0)
    first = {"done": False}

    def respond(request: httpx.Request) -> httpx.Response:
        if not first["done"]:
            first["done"] = True
            return httpx.Response(429, headers={"Retry-After": "86400"})
        return Recorder.match(request)

    recorder = Recorder(clock, respond)
    run(make_engine(clock, recorder, concurrency=1,
                    backoff=Backoff(retry_after_cap_seconds=300, jitter=0.0)), queries(1))
    assert recorder.sent[1][0] - recorder.sent[0][0] == pytest.approx(300.0)


def test_authentication_error_stops_the_batch() -> None:
    clock = FakeClock()
    recorder = Recorder(clock, lambda r: httpx.Response(403, json={"error": "bad key"}))
    events: list[Event] = []
    with pytest.raises(AuthenticationError):
        run(make_engine(clock, recorder), queries(20), events.append)
    assert len(recorder.sent) <= 4  # only the requests already in flight
    finished = [e for e in events if isinstance(e, BatchFinished)]
    assert finished and finished[0].error and "AuthenticationError" in finished[0].error


def test_transport_errors_are_retried_then_fail_with_reason() -> None:
    clock = FakeClock()

    def respond(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    recorder = Recorder(clock, respond)
    outcomes = run(make_engine(clock, recorder, max_attempts=3), queries(1))
    assert isinstance(outcomes[0], Failure) and outcomes[0].error == "ProviderUnavailableError"
    assert len(recorder.sent) == 3 and "ConnectError" in outcomes[0].reason


def test_non_blocking_mode_raises_with_retry_after_instead_of_sleeping() -> None:
    clock = FakeClock(start=0.0)
    recorder = Recorder(clock, lambda r: httpx.Response(429, headers={"Retry-After": "120"}))
    with pytest.raises(RateLimitError) as info:
        run(make_engine(clock, recorder, max_wait_seconds=10.0,
                        backoff=Backoff(jitter=0.0)), queries(3))
    assert info.value.retry_after == pytest.approx(120.0)
    assert max(clock.slept, default=0.0) <= 10.0


def test_bad_configuration() -> None:
    clock = FakeClock()
    for kwargs in ({"concurrency": 0}, {"max_attempts": 0}, {"max_wait_seconds": -1.0}):
        with pytest.raises(ValueError):
            make_engine(clock, Recorder(clock), **kwargs)
