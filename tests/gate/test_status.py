"""``fleet_status``: what ``geotoolkit gate status URL --json`` prints, on every backend."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from geotoolkit.clock import FakeClock
from geotoolkit.errors import ConfigurationError
from geotoolkit.gate import Cap, Report, gate_key
from geotoolkit.gate.fallback import FallbackGate, GateUnavailableWarning
from geotoolkit.gate.status import KeyStatus, fleet_status


def test_every_key_on_the_store_with_its_fleet(store: Any, host: str) -> None:
    gate = store.open()
    busy, quiet = gate_key(host, "sk-SECRET-busy"), gate_key(host, "sk-SECRET-quiet")
    gate.reserve(busy, 0.0, report=Report(4, 3, 1), cap=Cap(100))
    gate.reserve(busy, 0.0, cap=Cap(100, "month"))
    gate.record(busy, Report(), worker="w1")
    gate.record(busy, Report(), worker="w2")
    gate.pause(busy, 30.0, cause="Retry-After from api.example.com: 30 s")
    gate.reserve(quiet, 1.0)
    statuses = {s.key: s for s in fleet_status(gate) if s.key in (busy, quiet)}
    assert set(statuses) == {busy, quiet}
    status = statuses[busy]
    assert (status.requests, status.successes, status.throttled) == (4, 3, 1)
    assert status.pace == pytest.approx(4 / status.window_seconds)
    assert status.throttled_per_success == pytest.approx(1 / 3)
    assert status.rate_factor == 1.0 and status.workers_active == 2
    assert status.pause_remaining == pytest.approx(30.0, abs=0.25)
    assert status.pause_cause == "Retry-After from api.example.com: 30 s"
    assert (status.day.used, status.month.used) == (1, 1)
    assert status.month.period == status.day.period[:7]
    assert statuses[quiet].throttled_per_success == 0.0 and statuses[quiet].workers_active == 0
    assert fleet_status(gate, quiet) == [statuses[quiet]]
    text = json.dumps([s.as_dict() for s in statuses.values()])
    assert "SECRET" not in text and "SECRET" not in status.to_json()
    assert json.loads(status.to_json())["day"] == {"period": status.day.period, "used": 1,
                                                   "resets_at": status.day.resets_at, "tz": "UTC"}


def test_no_success_means_no_ratio() -> None:
    from geotoolkit.gate import FleetStats, Usage

    only_429s = KeyStatus.of("k", FleetStats(0.0, 10.0, 2, 0, 2), Usage("d", 0, 1.0), Usage("m", 0, 1.0))
    assert only_429s.throttled_per_success is None
    assert json.loads(only_429s.to_json())["throttled_per_success"] is None


def test_a_gate_that_cannot_list_its_keys_needs_the_key(store: Any, host: str) -> None:
    class Plain:  # a Gate without keys() nor snapshot()
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def stats(self, key: str) -> Any:
            return self.inner.stats(key)

        def usage(self, key: str, period: str = "day") -> Any:
            return self.inner.usage(key, period)

    gate = Plain(store.open())
    with pytest.raises(ConfigurationError, match="give the key"):
        fleet_status(gate)  # type: ignore[arg-type]
    [status] = fleet_status(gate, gate_key(host))  # type: ignore[arg-type]
    assert status.requests == 0 and status.day.used == 0


@pytest.mark.redis
def test_a_degraded_fallback_reports_this_process(redis_url: str, host: str) -> None:
    from geotoolkit.gate.redis import RedisGate

    clock = FakeClock()
    gate = FallbackGate(RedisGate("redis://127.0.0.1:1/0", timeout_seconds=0.5), clock=clock)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GateUnavailableWarning)
            gate.reserve(gate_key(host), 1.0, report=Report(2, 2, 0))
            [status] = fleet_status(gate)
        assert status.key == gate_key(host) and status.requests == 2 and gate.degraded
    finally:
        gate.close()
    healthy = FallbackGate(RedisGate(redis_url), clock=clock)
    try:
        healthy.reserve(gate_key(host), 1.0)
        assert gate_key(host) in [s.key for s in fleet_status(healthy)]
    finally:
        healthy.inner.store._client.delete(*healthy.inner.store._client.scan_iter(  # type: ignore[attr-defined]
            match=f"geotoolkit:{host}:*"))
        healthy.close()
