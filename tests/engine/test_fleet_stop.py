"""A fleet stop: one worker's "quota spent" stops every worker on the key (geotoolkit.gate.stop).

Two engines (two workers) on one gate, against the real provider simulator on loopback
with a daily cap, on one fake clock: the first meets the simulator's 402 and publishes
the stop; the other stops at its next reservation or claim without sending.
"""

from __future__ import annotations

import asyncio
import math
import random
from typing import Any

import pytest

from geotoolkit import FakeClock, MemoryGate, Query, QuotaExceededError, RatePolicy
from geotoolkit.engine import Engine
from geotoolkit.gate import Gate
from geotoolkit.gate.stop import DEFAULT_STOP_SECONDS, STOP_VALUE, FleetStop
from geotoolkit.providers import Nominatim
from geotoolkit.testing import ProviderSimulator

UA = "geotoolkit-tests/1.0 (tests@example.org)"
SECRET = "stop-s3cret-key"


def engine(sim: ProviderSimulator, clock: FakeClock, gate: Gate, *, api_key: str | None = SECRET,
           **kwargs: Any) -> Engine:
    options: dict[str, Any] = {"rate": RatePolicy(rate=2.0), "clock": clock, "concurrency": 2,
                               "rng": random.Random(5)}
    options.update(kwargs)
    return Engine(Nominatim(sim.url, user_agent=UA, api_key=api_key), gate=gate, **options)


def queries(prefix: str, n: int) -> list[Query]:
    return [Query(text=f"{prefix} {i}, 9490 Vaduz") for i in range(1, n + 1)]


def test_a_402_stops_the_other_worker_on_the_key_without_a_send(sim: ProviderSimulator,
                                                                 clock: FakeClock) -> None:
    sim.configure(daily_cap=2)
    gate = MemoryGate(clock=clock)
    first, second = engine(sim, clock, gate), engine(sim, clock, gate)
    with pytest.raises(QuotaExceededError, match="HTTP 402"):
        asyncio.run(first.run(queries("Landstrasse", 4)))
    sent = len(sim.requests)
    assert sim.count(status=402) >= 1
    with pytest.raises(QuotaExceededError) as info:
        asyncio.run(second.run(queries("Aeulestrasse", 3)))
    assert len(sim.requests) == sent  # stopped without sending
    message = str(info.value)
    assert "another worker on this API key" in message and "HTTP 402" in message
    assert "stated no reset" in message and SECRET not in message
    assert info.value.retry_after is None  # as the first worker's own 402 says
    assert info.value.provider == "nominatim" and info.value.status_code == 402
    stop = FleetStop.from_json(gate.values(first.pacer.key, STOP_VALUE)[STOP_VALUE])
    assert stop is not None and stop.remaining(clock.now()) <= DEFAULT_STOP_SECONDS
    assert stop.remaining(clock.now()) > DEFAULT_STOP_SECONDS - 60


def test_the_stop_ends_at_its_time_and_the_key_sends_again(sim: ProviderSimulator,
                                                           clock: FakeClock) -> None:
    sim.configure(daily_cap=1)
    gate = MemoryGate(clock=clock)
    with pytest.raises(QuotaExceededError):
        asyncio.run(engine(sim, clock, gate).run(queries("Landstrasse", 3)))
    sim.configure(daily_cap=None)  # the quota came back (a new day)
    with pytest.raises(QuotaExceededError, match="another worker"):
        asyncio.run(engine(sim, clock, gate).run(queries("Landstrasse", 3)))
    clock.advance(DEFAULT_STOP_SECONDS + 1)
    outcomes = asyncio.run(engine(sim, clock, gate).run(queries("Landstrasse", 3)))
    assert [o.status for o in outcomes] == ["matched"] * 3


def test_a_stop_never_crosses_api_keys(sim: ProviderSimulator, clock: FakeClock) -> None:
    sim.configure(daily_cap=1)
    gate = MemoryGate(clock=clock)
    with pytest.raises(QuotaExceededError):
        asyncio.run(engine(sim, clock, gate).run(queries("Landstrasse", 3)))
    sim.configure(daily_cap=None)
    outcomes = asyncio.run(engine(sim, clock, gate, api_key="another-key").run(queries("A", 2)))
    assert [o.status for o in outcomes] == ["matched"] * 2


def test_the_gates_cap_publishes_no_stop(sim: ProviderSimulator, clock: FakeClock) -> None:
    """The gate's own cap already stops the fleet: it stays as it is (no stop value)."""
    gate = MemoryGate(clock=clock)
    first = engine(sim, clock, gate, cap=2)
    with pytest.raises(QuotaExceededError, match="cap"):
        asyncio.run(first.run(queries("Landstrasse", 4)))
    assert gate.values(first.pacer.key, STOP_VALUE) == {}
    assert sim.count(status=402) == 0


def test_an_unpaced_worker_stops_at_its_reservation(sim: ProviderSimulator,
                                                     clock: FakeClock) -> None:
    """Without pacing (no claims), the reservation before each send carries the stop."""
    sim.configure(daily_cap=1)
    gate = MemoryGate(clock=clock)
    unpaced = {"rate": RatePolicy(rate=math.inf)}
    with pytest.raises(QuotaExceededError):
        asyncio.run(engine(sim, clock, gate, **unpaced).run(queries("Landstrasse", 3)))
    sent = len(sim.requests)
    with pytest.raises(QuotaExceededError, match="another worker"):
        asyncio.run(engine(sim, clock, gate, **unpaced).run(queries("Aeulestrasse", 3)))
    assert len(sim.requests) == sent


def test_a_402_says_its_reset_where_the_provider_states_it() -> None:
    """Pure parsing: the 402's ``Retry-After``/``X-RateLimit-Reset``, or OpenCage's body
    ``rate.reset``, is the error's ``retry_after``, the fleet stop's end."""
    import httpx

    from geotoolkit.providers import OpenCage
    from geotoolkit.providers.base import raise_for_status

    with pytest.raises(QuotaExceededError) as info:
        raise_for_status(httpx.Response(402, headers={"Retry-After": "120"}), "x")
    assert info.value.retry_after == 120.0
    with pytest.raises(QuotaExceededError) as info:
        raise_for_status(httpx.Response(402), "x")
    assert info.value.retry_after is None
    date = {"Date": "Tue, 14 Nov 2023 22:13:20 GMT"}  # 1_700_000_000
    body = {"status": {"code": 402, "message": "quota exceeded"},
            "rate": {"limit": 2500, "remaining": 0, "reset": 1_700_007_200}}
    with pytest.raises(QuotaExceededError) as info:
        OpenCage(api_key="k" * 32).parse_response(Query(text="x"), httpx.Response(402, headers=date,
                                                                               json=body))
    assert info.value.retry_after == 7200.0


def test_non_blocking_a_stop_is_the_quota_error_not_a_wait(sim: ProviderSimulator,
                                                           clock: FakeClock) -> None:
    """Orchestrator mode (``max_wait_seconds``): the stop is what the worker's own 402 is, a
    ``QuotaExceededError`` (not retried), never a ``RateLimitError`` to wait out."""
    from geotoolkit.frontends.orchestrators import retry_delay

    sim.configure(daily_cap=1)
    gate = MemoryGate(clock=clock)
    with pytest.raises(QuotaExceededError):
        asyncio.run(engine(sim, clock, gate, max_wait_seconds=1.0).run(queries("L", 3)))
    with pytest.raises(QuotaExceededError, match="another worker") as info:
        asyncio.run(engine(sim, clock, gate, max_wait_seconds=1.0).run(queries("A", 3)))
    assert retry_delay(info.value) is None


# -- the pacer's checks: a stop voids a send whose last check finds it ---------------------------


class _StopAfterClaim:
    """A memory gate on which another worker's stop lands right after this worker's claim
    (while the claimed send waits for its instant)."""

    def __init__(self, gate: MemoryGate, error: QuotaExceededError) -> None:
        self.gate, self.error = gate, error
        self.backend, self.blocking = gate.backend, gate.blocking

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gate, name)

    def claim(self, key: str, interval: float) -> Any:
        claimed = self.gate.claim(key, interval)
        stop = FleetStop.of(self.error, claimed.now)
        self.gate.set_value(key, STOP_VALUE, stop.to_json(), ttl_seconds=60)
        return claimed


def test_a_slot_reserved_before_the_stop_is_not_sent_and_the_next_raises() -> None:
    from geotoolkit.engine.pacer import Pacer
    from geotoolkit.gate import gate_key

    clock = FakeClock(start=1_790_000_000.0)
    gate = MemoryGate(clock=clock)
    key = gate_key("api.example.com", SECRET)
    first, second = (Pacer(gate, key, RatePolicy(rate=1.0), clock=clock, host="api.example.com",
                           provider="x") for _ in range(2))
    epoch = asyncio.run(second.slot())
    error = QuotaExceededError("x quota exhausted (HTTP 402)", retry_after=600.0, status_code=402)
    asyncio.run(first.stop_fleet(error))
    assert asyncio.run(second.clearance(clock.now(), epoch)) is None
    with pytest.raises(QuotaExceededError, match="another worker") as info:
        asyncio.run(second.slot())
    assert info.value.retry_after == pytest.approx(600.0)  # the provider stated it


def test_a_claimed_send_waiting_for_its_instant_checks_again_and_does_not_go() -> None:
    from geotoolkit.engine.pacer import Pacer
    from geotoolkit.gate import gate_key

    clock = FakeClock(start=1_790_000_000.0)
    error = QuotaExceededError("x quota exhausted (HTTP 402)", status_code=402)
    gate = _StopAfterClaim(MemoryGate(clock=clock), error)
    key = gate_key("api.example.com", SECRET)
    pacer = Pacer(gate, key, RatePolicy(rate=1.0), clock=clock)  # type: ignore[arg-type]
    epoch = asyncio.run(pacer.slot())
    gate.gate.claim(key, 1.0)  # another worker's send: this one's claim waits a second
    assert asyncio.run(pacer.clearance(clock.now(), epoch)) is None


def test_a_keyless_hosts_402_stops_only_the_worker_that_met_it(sim: ProviderSimulator,
                                                                clock: FakeClock) -> None:
    """A gate key without an API key (``...:anonymous``) is shared by every user agent and
    address on the gate: no fleet stop is published on it."""
    sim.configure(daily_cap=1)
    gate = MemoryGate(clock=clock)
    first = engine(sim, clock, gate, api_key=None)
    with pytest.raises(QuotaExceededError):
        asyncio.run(first.run(queries("Landstrasse", 3)))
    assert gate.values(first.pacer.key, STOP_VALUE) == {}
    sent = len(sim.requests)
    with pytest.raises(QuotaExceededError, match="HTTP 402"):
        asyncio.run(engine(sim, clock, gate, api_key=None).run(queries("Aeulestrasse", 3)))
    assert len(sim.requests) > sent  # its own 402s, as before


def test_an_unreadable_stop_value_stops_nothing() -> None:
    """A value no version of geotoolkit wrote voids no send (it would void them all, and the
    reservation, which raises only for a readable stop, would never end the run)."""
    from geotoolkit.engine.pacer import Pacer
    from geotoolkit.gate import gate_key

    clock = FakeClock(start=1_790_000_000.0)
    gate = MemoryGate(clock=clock)
    key = gate_key("api.example.com", SECRET)
    pacer = Pacer(gate, key, RatePolicy(rate=1.0), clock=clock)
    gate.set_value(key, STOP_VALUE, "junk", ttl_seconds=60)
    epoch = asyncio.run(pacer.slot())
    assert asyncio.run(pacer.clearance(clock.now(), epoch)) is not None
