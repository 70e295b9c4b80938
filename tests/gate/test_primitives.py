"""The primitive store contract: the same assertions on memory, SQLite, Redis and PostgreSQL.

Each gate's ``store`` (``GateStore``) is driven directly: reserve, pause, read the
state, add to and read counters, shared values with compare-and-set, list the
keys, several primitives in one batch. Waits are returned values, never slept.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from geotoolkit.errors import ConfigurationError
from geotoolkit.gate import gate_key
from geotoolkit.gate.primitives import (
    AddCounters,
    GateStore,
    Pause,
    ReadCounters,
    ReadState,
    ReadValues,
    Reserve,
    SetValue,
    StoreState,
)

TOL = 0.25


def _store(store: Any) -> Any:
    held = store.open().store
    assert isinstance(held, GateStore)
    return held


def test_a_new_key_has_an_empty_state(store: Any, host: str) -> None:
    held = _store(store)
    state = held.read_state(gate_key(host))
    assert isinstance(state, StoreState)
    assert (state.tat, state.pause_until, state.epoch, state.cause) == (0.0, 0.0, 0, "")
    assert state.now > 1e9  # the store's clock: seconds since the epoch


def test_reserve_is_gcra_within_the_horizon(store: Any, host: str) -> None:
    held, key = _store(store), gate_key(host)
    first = held.reserve(key, 10.0, 15.0)
    assert (first.wait, first.reserved, first.epoch) == (pytest.approx(0.0, abs=1e-9), True, 0)
    second = held.reserve(key, 10.0, 15.0)
    assert second.reserved and second.wait == pytest.approx(10.0, abs=TOL)
    beyond = held.reserve(key, 10.0, 15.0)
    assert not beyond.reserved and beyond.wait == pytest.approx(20.0, abs=TOL)
    state = held.read_state(key)
    assert state.tat == pytest.approx(first.now + 20.0, abs=1e-3)  # nothing reserved beyond


def test_a_pause_opens_an_epoch_and_restarts_the_slots_at_its_end(store: Any, host: str) -> None:
    held, key = _store(store), gate_key(host)
    for _ in range(3):
        held.reserve(key, 10.0)
    paused = held.pause(key, 5.0, "Retry-After: 5 s")
    assert paused.started and paused.epoch == 1 and paused.previous_until == 0.0
    assert paused.remaining == pytest.approx(5.0, abs=1e-9)
    state = held.read_state(key)
    assert (state.epoch, state.cause) == (1, "Retry-After: 5 s")
    assert state.tat == pytest.approx(state.pause_until, abs=1e-6)
    slot = held.reserve(key, 10.0)
    assert slot.epoch == 1 and slot.wait == pytest.approx(5.0, abs=TOL)


def test_a_pause_is_never_shortened_and_an_extension_pushes_tat(store: Any, host: str) -> None:
    held, key = _store(store), gate_key(host)
    first = held.pause(key, 30.0, "first")
    shorter = held.pause(key, 5.0, "shorter")
    assert not shorter.started and shorter.pause_until == first.pause_until
    assert shorter.previous_until == first.pause_until
    assert held.read_state(key).cause == "first"  # the cause of the pause that holds
    held.reserve(key, 100.0)  # a slot at the end of the pause, tat 100 s after it
    longer = held.pause(key, 60.0, "longer")
    assert not longer.started and longer.epoch == 1  # extended, not a new epoch
    state = held.read_state(key)
    assert state.cause == "longer" and state.pause_until == pytest.approx(longer.pause_until)
    assert state.tat == pytest.approx(first.pause_until + 100.0, abs=1e-3)  # already beyond
    held.pause(key, 200.0, "longest")
    assert held.read_state(key).tat == pytest.approx(held.read_state(key).pause_until, abs=1e-6)


def test_counters_add_several_at_once_and_read_back(store: Any, host: str) -> None:
    held, key = _store(store), gate_key(host)
    assert held.add_counters(key, {"b": 2, "a": 1, "c": 0}, 60) == {"a": 1, "b": 2, "c": 0}
    assert held.add_counters(key, {"a": 5, "b": -1}, 60) == {"a": 6, "b": 1}
    assert held.read_counters(key, ["a", "b", "c", "never"]) == {"a": 6, "b": 1, "c": 0}
    assert held.read_counters(key, []) == {}
    # Durable counters are a namespace of their own; keys never share counters.
    assert held.read_counters(key, ["a"], durable=True) == {}
    assert held.add_counters(key, {"a": 3}, 60, durable=True) == {"a": 3}
    assert held.read_counters(key, ["a"]) == {"a": 6}
    assert held.read_counters(gate_key(host, "other"), ["a"]) == {}


def test_counters_expire_and_restart_at_zero(store: Any, host: str) -> None:
    gate, advance = store.timeline()
    held, key = gate.store, gate_key(host)
    held.add_counters(key, {"short": 1}, 10)
    held.add_counters(key, {"long": 1}, 100)
    held.add_counters(key, {"cap": 7}, 10, durable=True)
    advance(key, 11.0)
    assert held.read_counters(key, ["short", "long"]) == {"long": 1}
    assert held.read_counters(key, ["cap"], durable=True) == {}
    assert held.add_counters(key, {"short": 2}, 10) == {"short": 2}  # not 3: it had expired
    assert held.add_counters(key, {"long": 1}, 100) == {"long": 2}


def test_concurrent_additions_are_atomic(store: Any, host: str) -> None:
    stores = [store.open().store for _ in range(4)]
    key = gate_key(host)
    seen: list[int] = []
    lock = threading.Lock()

    def work(held: Any) -> None:
        for _ in range(10):
            value = held.add_counters(key, {"n": 1, "m": 2}, 60)
            with lock:
                seen.append(value["n"])

    threads = [threading.Thread(target=work, args=(stores[i % 4],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == list(range(1, 81))  # every addition saw its own total
    assert stores[0].read_counters(key, ["n", "m"]) == {"n": 80, "m": 160}


def test_compare_and_set_applies_only_to_the_expected_value(store: Any, host: str) -> None:
    held, key = _store(store), gate_key(host)
    assert not held.set_value(key, "v", "x", ttl_seconds=60, only_if="old")  # absent
    assert held.set_value(key, "v", "old", ttl_seconds=60, only_if_absent=True)
    assert not held.set_value(key, "v", "x", ttl_seconds=60, only_if="other")
    assert held.values(key) == {"v": "old"}
    assert held.set_value(key, "v", "new", ttl_seconds=60, only_if="old")
    assert not held.set_value(key, "v", "newer", ttl_seconds=60, only_if="old")  # once
    assert held.values(key) == {"v": "new"}
    with pytest.raises(ConfigurationError):
        SetValue(key, "v", "x", 60, only_if_absent=True, only_if="new")


def test_compare_and_set_sees_an_expired_value_as_absent(store: Any, host: str) -> None:
    gate, advance = store.timeline()
    held, key = gate.store, gate_key(host)
    held.set_value(key, "v", "old", ttl_seconds=5)
    advance(key, 6.0)
    assert not held.set_value(key, "v", "new", ttl_seconds=5, only_if="old")
    assert held.values(key) == {}


def test_exactly_one_compare_and_set_wins_a_race(store: Any, host: str) -> None:
    stores = [store.open().store for _ in range(8)]
    key = gate_key(host)
    stores[0].set_value(key, "aimd", "v0", ttl_seconds=60)
    start, won = threading.Barrier(8), []

    def swap(held: Any, me: str) -> None:
        start.wait(timeout=30)
        if held.set_value(key, "aimd", me, ttl_seconds=60, only_if="v0"):
            won.append(me)

    threads = [threading.Thread(target=swap, args=(s, f"w{i}")) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(won) == 1 and stores[0].values(key) == {"aimd": won[0]}


def test_keys_lists_the_keys_with_a_pacing_state(store: Any, host: str) -> None:
    held = _store(store)
    a, b, c = gate_key(host, "a"), gate_key(host, "b"), gate_key(host, "c")
    held.reserve(a, 1.0)
    held.pause(b, 1.0)
    held.set_value(c, "only", "values", ttl_seconds=60)  # no pacing state: not listed
    held.add_counters(c, {"n": 1}, 60)
    assert held.keys(f"geotoolkit:{host}:") == sorted([a, b])
    assert set(held.keys()) >= {a, b}
    assert held.keys(f"geotoolkit:{host}:*") == []  # a prefix, never a pattern
    assert held.keys(f"geotoolkit:{host}:_") == [] and held.keys(f"geotoolkit:{host}%") == []


def test_a_batch_runs_in_one_call_in_order(store: Any, host: str) -> None:
    held, key = _store(store), gate_key(host)
    assert held.run([]) == []
    results = held.run([
        SetValue(key, "aimd", "1", 60), AddCounters.of(key, {"n": 2}, 60), Reserve(key, 5.0),
        Pause(key, 0.0, "p"), ReadState(key), ReadCounters(key, ("n",)), ReadValues(key),
    ])
    stored, counted, slot, paused, state, counters, values = results
    assert stored is True and counted == {"n": 2} and counters == {"n": 2}
    assert slot.reserved and slot.epoch == 0
    assert paused.epoch == 1 and state.epoch == 1 and state.cause == "p"
    assert values == {"aimd": "1"}
    assert slot.now <= paused.now <= state.now


@pytest.mark.parametrize("bad", [
    lambda: Reserve("k", float("nan")), lambda: Reserve("k", -1.0),
    lambda: Reserve("k", 1.0, float("nan")), lambda: Pause("k", float("inf")),
    lambda: AddCounters.of("k", {"n": 1}, 0), lambda: AddCounters.of("k", {"n": 1.5}, 10),  # type: ignore[dict-item]
    lambda: AddCounters("k", (("n", 1), ("n", 2)), 10), lambda: SetValue("k", "n", 1, 10),  # type: ignore[arg-type]
])
def test_bad_operations_fail_before_anything_is_sent(bad: Any) -> None:
    with pytest.raises(ConfigurationError):
        bad()


def test_an_infinite_horizon_is_a_far_one() -> None:
    assert Reserve("k", 1.0, float("inf")).horizon == 1e15
