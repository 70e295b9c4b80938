"""End to end: a batch through the engine survives its Redis gate dying and coming back.

A dedicated ``redis-server`` on a free port, the provider simulator on 127.0.0.1,
the engine in a background thread on the real clock. The test watches the
simulator's request log (bounded polling, never a fixed sleep) to stop Redis
while the batch is under way and to restart it once the fleet paces locally.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from geotoolkit.engine import Engine
from geotoolkit.engine.sync import BackgroundRun
from geotoolkit.gate import Report, gate_key, open_gate
from geotoolkit.gate.fallback import FallbackGate, GateUnavailableWarning
from geotoolkit.gate.redis import RedisGate
from geotoolkit.policy import RatePolicy
from geotoolkit.progress import Event, FleetSampled
from geotoolkit.providers import Nominatim
from geotoolkit.results import Query
from geotoolkit.testing import ProviderSimulator

UA = "geotoolkit-tests/1.0 (tests@example.org)"


class Events(list[Event]):
    """The engine's progress sink: collects events and wakes ``until`` on each one."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = threading.Condition()

    def __call__(self, event: Event) -> None:
        with self.arrived:
            self.append(event)
            self.arrived.notify_all()

    def until(self, condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        """Wait (bounded) for ``condition``, re-checked at every event of the running batch."""
        with self.arrived:
            if not self.arrived.wait_for(condition, timeout):
                pytest.fail(f"timed out waiting for {what}")


@pytest.mark.redis
def test_a_batch_survives_a_redis_outage_and_returns_to_the_shared_gate(
    redis_server: Any,
) -> None:
    redis_server.start()
    gate = open_gate(redis_server.url)
    assert isinstance(gate, FallbackGate)
    gate.retry_seconds = 0.2  # probe the store often: the test stays short
    events = Events()
    with ProviderSimulator() as sim, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        provider = Nominatim(sim.url, user_agent=UA)
        engine = Engine(provider, gate=gate, rate=RatePolicy(rate=100.0), concurrency=4)
        items: list[Query | str] = [Query(text=f"Landstrasse {i}, 9490 Vaduz") for i in range(300)]
        run = BackgroundRun(lambda: engine.run(items, events))
        try:
            assert sim.wait_for_requests(30, timeout=30), "the batch did not get going"
            redis_server.stop()
            events.until(lambda: isinstance(gate, FallbackGate) and gate.degraded, "the fallback")
            during = len(sim.requests)
            assert sim.wait_for_requests(during + 20, timeout=30), "no progress while degraded"
            redis_server.start()
            events.until(lambda: not gate.degraded, "the shared gate to be back")
            outcomes = run.result(timeout=120)
        finally:
            run.cancel()
    try:
        # Nothing lost: one settled outcome per input, none failed.
        assert len(outcomes) == len(items)
        assert all(o.status in ("matched", "no_match") for o in outcomes)
        assert len({r.query for r in sim.requests}) == len(items)
        unavailable = [w for w in caught if issubclass(w.category, GateUnavailableWarning)]
        assert len(unavailable) == 1, [str(w.message) for w in unavailable]
        # Back on the shared gate: the restarted (empty) Redis holds the fleet's counts.
        assert gate.backend == "redis"
        fresh = RedisGate(redis_server.url)
        try:
            shared = fresh.record(gate_key(provider.host), Report())
            assert shared.requests > 0
        finally:
            fresh.close()
        assert any(isinstance(e, FleetSampled) for e in events)
    finally:
        gate.close()
