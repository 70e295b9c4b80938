"""The engine against the real provider simulator on 127.0.0.1.

The simulator and the engine share one FakeClock, so Retry-After waits of
seconds or minutes pass in virtual time: nothing here sleeps on the wall clock.
With real sockets, virtual time can also move on while a request is in flight
(the engine's fleet sampler sleeps too), so times are asserted as lower bounds.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
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
    RatePolicy,
    geocode,
)
from geotoolkit.engine import Engine
from geotoolkit.progress import Event, Throttled
from geotoolkit.providers import Nominatim
from geotoolkit.testing import ProviderSimulator

UA = "geotoolkit-tests/1.0 (tests@example.org)"




def run(sim: ProviderSimulator, clock: FakeClock, addresses: list[str], *,
        api_key: str | None = None, **kwargs: Any) -> tuple[list[Any], list[Event]]:
    events: list[Event] = []
    options: dict[str, Any] = {
        "gate": MemoryGate(clock=clock), "rate": RatePolicy(rate=math.inf), "clock": clock,
        "concurrency": 2, "rng": random.Random(3),
        "backoff": Backoff(initial_seconds=0.5, jitter=1.0),
    }
    options.update(kwargs)
    engine = Engine(Nominatim(sim.url, user_agent=UA, api_key=api_key), **options)
    outcomes = asyncio.run(engine.run([Query(text=a) for a in addresses], events.append))
    return outcomes, events


def assert_no_send_during_pauses(sim: ProviderSimulator, events: list[Event]) -> None:
    pauses = [(e.at, e.at + e.wait_seconds) for e in events if isinstance(e, Throttled)]
    assert pauses, "the scenario should have throttled"
    for start, end in pauses:
        inside = [r for r in sim.requests if start < r.time < end - 1e-9]
        assert inside == [], f"sent during the pause {start}..{end}: {inside}"


ADDRESSES = [f"Landstrasse {n}, 9490 Vaduz" for n in range(1, 7)]
# the simulator answers the first request for these with a 429 (then normally)
THROTTLED = [a if n % 3 else f"{a} #429x1" for n, a in enumerate(ADDRESSES)]


@pytest.mark.parametrize("form", ["auto", "http-date"])
def test_429_in_both_header_forms_pauses_the_fleet(sim: ProviderSimulator, clock: FakeClock,
                                                    form: str) -> None:
    sim.retry_after = form  # type: ignore[assignment]
    outcomes, events = run(sim, clock, THROTTLED)
    assert all(isinstance(o, Match) for o in outcomes)
    assert [(o.lon, o.lat) for o in outcomes] == [sim.expected(a) for a in ADDRESSES]
    throttles = [e for e in events if isinstance(e, Throttled)]
    assert sim.count(status=429) == len(throttles) == 2
    assert all(t.retry_after is not None and t.retry_after >= 1.0 for t in throttles)
    assert all(t.wait_seconds >= t.retry_after for t in throttles)  # type: ignore[operator]
    assert_no_send_during_pauses(sim, events)


def test_429_saying_its_reset_in_rate_limit_headers_pauses_the_fleet_until_then(
        sim: ProviderSimulator, clock: FakeClock) -> None:
    """No Retry-After, the reset in ``RateLimit`` / ``X-RateLimit-Reset`` (as GitHub,
    OpenCage and the IETF draft say it): honoured as Retry-After is, not a bare backoff."""
    sim.retry_after = "reset-headers"
    outcomes, events = run(sim, clock, THROTTLED)
    assert all(isinstance(o, Match) for o in outcomes)
    throttles = [e for e in events if isinstance(e, Throttled)]
    assert sim.count(status=429) == len(throttles) == 2
    assert all(t.cause == "retry-after" and t.retry_after == 1.0 for t in throttles)
    assert all(t.wait_seconds >= 1.0 for t in throttles)
    assert_no_send_during_pauses(sim, events)


def test_missing_retry_after_falls_back_to_backoff(sim: ProviderSimulator, clock: FakeClock) -> None:
    sim.retry_after = "missing"
    outcomes, events = run(sim, clock, THROTTLED[:3])
    assert all(isinstance(o, Match) for o in outcomes)
    throttles = [e for e in events if isinstance(e, Throttled)]
    assert throttles and all(t.cause == "backoff" and t.retry_after is None for t in throttles)


def test_day_long_retry_after_is_clamped(sim: ProviderSimulator, clock: FakeClock) -> None:
    sim.retry_after = 86_400
    outcomes, events = run(sim, clock, THROTTLED[:1], concurrency=1,
                           backoff=Backoff(retry_after_cap_seconds=300.0, jitter=0.0))
    assert all(isinstance(o, Match) for o in outcomes)
    throttle = next(e for e in events if isinstance(e, Throttled))
    assert throttle.retry_after == 86_400 and throttle.wait_seconds == 300.0
    retry = sim.requests[-1]
    assert retry.status == 200 and retry.time >= throttle.at + 300.0


def test_503_then_success(sim: ProviderSimulator, clock: FakeClock) -> None:
    outcomes, events = run(sim, clock, ["Städtle 38, 9490 Vaduz #503x2"])
    assert isinstance(outcomes[0], Match) and outcomes[0].attempts == 3
    assert [r.status for r in sim.requests] == [503, 503, 200]
    assert sum(isinstance(e, Throttled) for e in events) == 2


def test_timeouts_are_retried_then_fail_with_reason(sim: ProviderSimulator,
                                                    clock: FakeClock) -> None:
    outcomes, _ = run(sim, clock, ["Städtle 38 #timeout"], max_attempts=2,
                      timeout=httpx.Timeout(0.2, connect=2.0))
    assert isinstance(outcomes[0], Failure) and outcomes[0].attempts == 2
    assert "did not answer in time (ReadTimeout)" in outcomes[0].reason
    assert len(sim.requests) == 2


def test_connection_reset_is_retried_then_fails(sim: ProviderSimulator, clock: FakeClock) -> None:
    outcomes, _ = run(sim, clock, ["Städtle 38 #reset"], max_attempts=3)
    assert isinstance(outcomes[0], Failure) and outcomes[0].error == "ProviderUnavailableError"
    assert "connection failed" in outcomes[0].reason and len(sim.requests) == 3


def test_malformed_body_is_a_dead_letter_not_retried(sim: ProviderSimulator,
                                                     clock: FakeClock) -> None:
    outcomes, _ = run(sim, clock, ["Städtle 38 #malformed"])
    assert isinstance(outcomes[0], Failure) and outcomes[0].error == "ProviderResponseError"
    assert len(sim.requests) == 1


def test_no_match_is_not_retried(sim: ProviderSimulator, clock: FakeClock) -> None:
    outcomes, _ = run(sim, clock, ["Nowhere Street 999, 0000 Atlantis"])
    assert isinstance(outcomes[0], NoMatch) and len(sim.requests) == 1


def test_auth_error_stops_the_batch_and_hides_the_key(sim: ProviderSimulator, clock: FakeClock,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    sim.valid_keys = {"the-good-key"}
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AuthenticationError) as info:
        run(sim, clock, ADDRESSES, api_key="sk-SECRET-0042", concurrency=1)
    assert len(sim.requests) == 1 and sim.requests[0].status == 403
    assert sim.requests[0].key == "sk-SECRET-0042"  # it was sent ...
    assert "sk-SECRET-0042" not in str(info.value) + repr(info.value)  # ... and never shown
    assert "sk-SECRET-0042" not in caplog.text
    assert "key=***" in caplog.text  # httpx's request log line, redacted


def test_geocode_facade_inside_a_running_event_loop(sim: ProviderSimulator) -> None:
    """Jupyter runs an event loop in the main thread; geocode() must still work there."""
    provider = Nominatim(sim.url, user_agent=UA)

    async def notebook_cell() -> list[Any]:
        return geocode(["Städtle 38, 9490 Vaduz", "", None], provider=provider,
                       gate="memory://", rate=100)

    outcomes = asyncio.run(notebook_cell())
    assert [o.status for o in outcomes] == ["matched", "failed", "failed"]
    assert (outcomes[0].lon, outcomes[0].lat) == sim.expected("Städtle 38, 9490 Vaduz")
