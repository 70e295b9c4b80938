"""A fleet stop on every gate backend (``geotoolkit.gate.stop``): stored, read with every
reservation, claim and state in their own round trip, the same on memory, SQLite, Redis and
PostgreSQL, per gate key, until it expires on the store's clock, or is deleted.
"""

from __future__ import annotations

from typing import Any

import pytest

from geotoolkit.errors import QuotaExceededError
from geotoolkit.gate import Cap, gate_key
from geotoolkit.gate.stop import STOP_VALUE, FleetStop

SECRET = "gate-stop-s3cret"


def _stop(now: float) -> FleetStop:
    error = QuotaExceededError(f"x quota exhausted (HTTP 402) for {SECRET}: Crédits épuisés ✓",
                               retry_after=60.0,
                               status_code=402)
    return FleetStop.of(error, now, (SECRET,))


def test_a_stop_reaches_every_instance_with_each_call(store: Any, host: str) -> None:
    one, two = store.open(), store.open()
    key, other = gate_key(host, SECRET), gate_key(host, "another-key")
    assert one.reserve(key, 0.1).stop is None and one.claim(key, 0.1).stop is None
    assert one.state(key).stop is None
    text = _stop(one.state(key).now).to_json()
    assert one.set_value(key, STOP_VALUE, text, ttl_seconds=60) is True
    assert two.reserve(key, 0.1).stop == text
    assert two.claim(key, 0.1).stop == text
    assert two.state(key).stop == text
    assert two.reserve(other, 0.1).stop is None  # never crosses keys
    stop = FleetStop.from_json(two.state(key).stop)
    assert stop is not None and stop.status == 402 and stop.stated
    assert stop.reason.endswith("Crédits épuisés ✓") and SECRET not in stop.reason


def test_a_stop_expires_on_the_store_clock(store: Any, host: str) -> None:
    gate, advance = store.timeline()
    key = gate_key(host, SECRET)
    text = _stop(gate.state(key).now).to_json()
    gate.set_value(key, STOP_VALUE, text, ttl_seconds=60)
    advance(key, 59.0)
    assert gate.state(key).stop == text
    advance(key, 2.0)
    assert gate.state(key).stop is None and gate.reserve(key, 0.1).stop is None


def test_a_deleted_stop_is_gone_for_every_instance(store: Any, host: str) -> None:
    one, two = store.open(), store.open()
    key = gate_key(host, SECRET)
    one.set_value(key, STOP_VALUE, _stop(one.state(key).now).to_json(), ttl_seconds=3600)
    assert two.delete_value(key, STOP_VALUE) is True
    assert one.claim(key, 0.1).stop is None


def test_a_reservation_under_a_stop_counts_nothing_against_the_cap(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host, SECRET)
    cap = Cap(5)
    gate.reserve(key, 0.1, cap=cap)
    gate.set_value(key, STOP_VALUE, _stop(gate.state(key).now).to_json(), ttl_seconds=60)
    stopped = gate.reserve(key, 0.1, cap=cap)
    assert stopped.stop is not None and stopped.usage is not None
    assert gate.usage(key).used == 1 == stopped.usage.used


def test_the_stop_holds_no_secret(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host, SECRET)
    gate.set_value(key, STOP_VALUE, _stop(gate.state(key).now).to_json(), ttl_seconds=60)
    assert SECRET not in store.dump()


@pytest.mark.parametrize("text", ["", "junk", "[1, 2]", '["nan", "r", null, false]'])
def test_an_unreadable_stop_is_none(text: str) -> None:
    assert FleetStop.from_json(text) is None
