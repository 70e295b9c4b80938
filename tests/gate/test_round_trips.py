"""Round trips per ``Gate`` call, counted on every backend (the table in docs/fleet-gate.md).

A ``CountingStore`` wraps a gate's primitive store and counts its batches: each
``run`` is one round trip (one Lua script call, one PostgreSQL pipeline, one
SQLite transaction, one lock). The engine calls ``reserve`` once per send: in the
common case (the factor known, no cap) it stays one round trip, report or not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from geotoolkit.errors import QuotaExceededError
from geotoolkit.gate import Aimd, Cap, Report, gate_key
from geotoolkit.gate.primitives import Op

#: The measured round trips (the docs/fleet-gate.md table): before this version every
#: call was one round trip (one Lua script, one plpgsql function, one transaction).
EXPECTED = {
    "reserve, first on this instance for the key": 2,
    "reserve": 1,
    "reserve with a report": 1,
    "reserve with a report, recovering (a credit)": 1,
    "reserve with a cap": 2,
    "reserve with a cap, beyond the horizon": 3,
    "reserve with a cap, over it": 2,
    "claim (a send as it leaves: spaced, and the pause read)": 1,
    "pause": 1,
    "pause after a 429": 2,
    "state": 1,
    "record with a report and a heartbeat": 1,
    "stats": 1,
    "usage": 1,
    "snapshot (stats and both caps, for gate status)": 1,
    "set_value": 1,
    "values": 1,
    "delete_value": 1,
}


class CountingStore:
    """A ``GateStore`` that counts its round trips (batches) and the primitives in them."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.backend, self.blocking, self.clock = inner.backend, inner.blocking, inner.clock
        self.rounds, self.ops = 0, 0

    def run(self, ops: Sequence[Op]) -> list[Any]:
        self.rounds, self.ops = self.rounds + 1, self.ops + len(ops)
        return list(self.inner.run(ops))

    def keys(self, prefix: str = "") -> list[str]:
        self.rounds += 1
        return list(self.inner.keys(prefix))

    def close(self) -> None:
        self.inner.close()


def _scenarios(gate: Any, host: str) -> list[tuple[str, Callable[[], object]]]:
    key, capped, recovering = gate_key(host), gate_key(host, "capped"), gate_key(host, "slow")
    far = gate_key(host, "far")

    def over_the_cap() -> None:
        with pytest.raises(QuotaExceededError):
            gate.reserve(capped, 0.0, cap=Cap(2))

    return [
        ("reserve, first on this instance for the key", lambda: gate.reserve(key, 0.001)),
        ("reserve", lambda: gate.reserve(key, 0.001)),
        ("reserve with a report", lambda: gate.reserve(key, 0.001, report=Report(1, 1, 0))),
        ("reserve with a report, recovering (a credit)",
         lambda: gate.reserve(recovering, 0.001, report=Report(1, 1, 0))),
        ("reserve with a cap", lambda: gate.reserve(capped, 0.0, cap=Cap(2))),
        ("reserve with a cap, beyond the horizon",
         lambda: gate.reserve(far, 600.0, horizon=60.0, cap=Cap(100))),
        ("reserve with a cap, over it", over_the_cap),
        ("claim (a send as it leaves: spaced, and the pause read)",
         lambda: gate.claim(key, 0.001)),
        ("pause", lambda: gate.pause(key, 0.0, cause="503")),
        ("pause after a 429", lambda: gate.pause(key, 0.0, rate_limited=True, report=Report(1, 0, 1))),
        ("state", lambda: gate.state(key)),
        ("record with a report and a heartbeat", lambda: gate.record(key, Report(2, 2, 0), worker="w")),
        ("stats", lambda: gate.stats(key)),
        ("usage", lambda: gate.usage(key)),
        ("snapshot (stats and both caps, for gate status)", lambda: gate.snapshot(key)),
        ("set_value", lambda: gate.set_value(key, "x", "y", ttl_seconds=5)),
        ("values", lambda: gate.values(key)),
        ("delete_value", lambda: gate.delete_value(key, "x")),
    ]


def _prepare(gate: Any, host: str) -> None:
    """A capped key one send below its cap; a key whose next slot is 10 minutes away; a key
    whose factor was cut and now recovers."""
    gate.reserve(gate_key(host, "capped"), 0.0, cap=Cap(2))
    gate.reserve(gate_key(host, "far"), 600.0)
    slow = gate_key(host, "slow")
    gate.pause(slow, 0.0, rate_limited=True)
    gate.pause(slow, 0.0, rate_limited=True)  # the second 429 in a row: a cut, no pause left
    assert gate.stats(slow).rate_factor < 1.0


def test_round_trips_per_gate_call(store: Any, host: str) -> None:
    gate = store.open()
    gate.aimd = Aimd(decrease=0.5, increase_per_second=1e-6, probe_after_seconds=0.0,
                     climb_after_seconds=0.0)
    _prepare(gate, host)
    counting = CountingStore(gate.store)
    gate.store = counting
    measured: dict[str, int] = {}
    try:
        for name, call in _scenarios(gate, host):
            before = counting.rounds
            call()
            measured[name] = counting.rounds - before
    finally:
        gate.store = counting.inner
    assert measured == EXPECTED
    assert gate.stats(gate_key(host, "slow")).rate_factor > 0.5  # the credit was applied


def test_the_engine_s_common_reservation_is_one_batch_of_few_primitives(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host)
    gate.reserve(key, 0.001)
    counting = CountingStore(gate.store)
    gate.store = counting
    try:
        gate.reserve(key, 0.001, report=Report(1, 1, 0))
    finally:
        gate.store = counting.inner
    # Count the report, read the factor and the fleet stop, reserve: four primitives, one
    # round trip.
    assert (counting.rounds, counting.ops) == (1, 4)
