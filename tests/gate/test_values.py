"""Shared values on every gate backend: set, read, expire, claim, release.

The same assertions run on memory, SQLite, Redis and PostgreSQL (the ``store``
fixture). Time passes without waiting (``store.timeline()``): a FakeClock for
the host-clock gates, stored expiries moved into the past for the server gates.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from geotoolkit.errors import ConfigurationError
from geotoolkit.gate import gate_key
from geotoolkit.gate.base import MAX_TTL_SECONDS

#: Claimants racing for one lease.
PARTIES = 8


def test_values_are_set_read_and_replaced(store: Any, host: str) -> None:
    one, two = store.open(), store.open()
    key = gate_key(host)
    assert one.values(key) == {}
    assert one.set_value(key, "breaker:state", "open", ttl_seconds=60) is True
    assert one.set_value(key, "note", "a|b|c ✓", ttl_seconds=60) is True
    assert one.set_value(key, "empty", "", ttl_seconds=60) is True
    assert two.values(key) == {"breaker:state": "open", "note": "a|b|c ✓", "empty": ""}
    # A plain set replaces the value, whoever holds it.
    assert two.set_value(key, "breaker:state", "closed", ttl_seconds=60) is True
    assert one.values(key)["breaker:state"] == "closed"


def test_values_are_filtered_by_name_prefix(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host)
    for name in ("breaker:state", "breaker:probe", "breaker", "stats:window", "Breaker:x"):
        gate.set_value(key, name, name.upper(), ttl_seconds=60)
    assert gate.values(key, "breaker:") == {"breaker:state": "BREAKER:STATE",
                                            "breaker:probe": "BREAKER:PROBE"}
    assert set(gate.values(key, "breaker")) == {"breaker:state", "breaker:probe", "breaker"}
    assert set(gate.values(key)) == set(gate.values(key, "")) and len(gate.values(key)) == 5
    assert gate.values(key, "nothing") == {}
    assert gate.values(key, "%") == {} and gate.values(key, "_") == {}  # no LIKE patterns


def test_values_never_cross_gate_keys(store: Any, host: str) -> None:
    gate = store.open()
    a, b = gate_key(host, "key-a"), gate_key(host, "key-b")
    gate.set_value(a, "lease", "worker-a", ttl_seconds=60)
    assert gate.values(b) == {}
    assert gate.set_value(b, "lease", "worker-b", ttl_seconds=60, only_if_absent=True) is True
    assert gate.delete_value(b, "lease", only_if="worker-a") is False
    assert (gate.values(a), gate.values(b)) == ({"lease": "worker-a"}, {"lease": "worker-b"})
    # Pacing a key leaves its values alone, and values leave the pacing alone.
    gate.acquire(a, 10.0)
    gate.pause(a, 30.0)
    assert gate.values(a) == {"lease": "worker-a"}
    assert gate.state(b).pause_until == 0.0


def test_values_expire_on_the_store_clock(store: Any, host: str) -> None:
    gate, advance = store.timeline()
    key = gate_key(host)
    gate.set_value(key, "short", "s", ttl_seconds=10)
    gate.set_value(key, "long", "l", ttl_seconds=100)
    advance(key, 9.0)
    assert gate.values(key) == {"short": "s", "long": "l"}
    advance(key, 2.0)  # 11 s later: "short" is gone, "long" lives on
    assert gate.values(key) == {"long": "l"}
    assert gate.delete_value(key, "short") is False  # an expired value is absent
    advance(key, 90.0)
    assert gate.values(key) == {}


def test_an_expired_lease_can_be_claimed_again(store: Any, host: str) -> None:
    gate, advance = store.timeline()
    key = gate_key(host)
    assert gate.set_value(key, "probe", "worker-1", ttl_seconds=5, only_if_absent=True)
    assert not gate.set_value(key, "probe", "worker-2", ttl_seconds=5, only_if_absent=True)
    advance(key, 6.0)  # worker-1 died holding it
    assert gate.set_value(key, "probe", "worker-2", ttl_seconds=5, only_if_absent=True)
    assert gate.values(key) == {"probe": "worker-2"}
    assert gate.delete_value(key, "probe", only_if="worker-1") is False


def test_only_if_absent_is_a_lease_released_by_its_holder(store: Any, host: str) -> None:
    one, two = store.open(), store.open()
    key = gate_key(host)
    assert one.set_value(key, "probe", "worker-1", ttl_seconds=60, only_if_absent=True) is True
    assert two.set_value(key, "probe", "worker-2", ttl_seconds=60, only_if_absent=True) is False
    assert two.values(key) == {"probe": "worker-1"}  # the loser changed nothing
    assert two.delete_value(key, "probe", only_if="worker-2") is False  # not its lease
    assert one.values(key) == {"probe": "worker-1"}
    assert one.delete_value(key, "probe", only_if="worker-1") is True  # released
    assert one.delete_value(key, "probe", only_if="worker-1") is False  # once
    assert two.set_value(key, "probe", "worker-2", ttl_seconds=60, only_if_absent=True) is True
    assert one.delete_value(key, "probe") is True  # unconditional
    assert one.delete_value(key, "never-set") is False
    assert two.values(key) == {}


def test_exactly_one_claimant_wins_a_race(store: Any, host: str) -> None:
    key = gate_key(host)
    gates = [store.open() for _ in range(PARTIES)]  # one connection each (memory: one gate)
    for gate in gates:
        gate.values(key)  # connected before the race
    for round_ in range(5):
        name = f"lease-{round_}"
        start = threading.Barrier(PARTIES)
        won: list[str] = []
        errors: list[BaseException] = []

        def claim(gate: Any, me: str, name: str = name, start: threading.Barrier = start,
                  won: list[str] = won, errors: list[BaseException] = errors) -> None:
            try:
                start.wait(timeout=30)
                if gate.set_value(key, name, me, ttl_seconds=60, only_if_absent=True):
                    won.append(me)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=claim, args=(g, f"w{i}")) for i, g in enumerate(gates)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == []
        assert len(won) == 1, won
        assert gates[0].values(key, name) == {name: won[0]}


@pytest.mark.parametrize("ttl", [0, -1.0, float("nan"), float("inf"), True, "60"])
def test_bad_times_to_live_are_configuration_errors(store: Any, host: str, ttl: Any) -> None:
    gate = store.open()
    with pytest.raises(ConfigurationError, match="ttl_seconds"):
        gate.set_value(gate_key(host), "x", "y", ttl_seconds=ttl)
    assert gate.values(gate_key(host)) == {}


def test_names_and_values_must_be_text(store: Any, host: str) -> None:
    gate = store.open()
    with pytest.raises(ConfigurationError):
        gate.set_value(gate_key(host), "x", 1, ttl_seconds=10)
    with pytest.raises(ConfigurationError):
        gate.set_value(gate_key(host), None, "y", ttl_seconds=10)


def test_a_huge_time_to_live_is_cut_to_the_maximum(store: Any, host: str) -> None:
    gate, advance = store.timeline()
    key = gate_key(host)
    assert gate.set_value(key, "forever", "f", ttl_seconds=1e300) is True
    advance(key, MAX_TTL_SECONDS - 60)
    assert gate.values(key) == {"forever": "f"}
    advance(key, 120)
    assert gate.values(key) == {}


def test_values_hold_no_secret(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host, "sk-SECRET-456")
    gate.set_value(key, "lease", "w1", ttl_seconds=60)
    dumped = store.dump()
    assert key in dumped and "w1" in dumped
    assert "sk-SECRET-456" not in dumped


# -- backend specifics ------------------------------------------------------------------


@pytest.mark.redis
def test_redis_values_hash_lives_as_long_as_its_longest_value(redis_url: str, host: str) -> None:
    import redis

    from geotoolkit.gate.redis import RedisGate

    gate = RedisGate(redis_url)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    key = gate_key(host)
    name = RedisGate.values_key(key)
    try:
        gate.set_value(key, "long", "l", ttl_seconds=100)
        gate.set_value(key, "short", "s", ttl_seconds=5)
        assert 95_000 < client.pttl(name) <= 100_000  # pushed to the longest, not the last
        gate.set_value(key, "longer", "x", ttl_seconds=200)
        assert 195_000 < client.pttl(name) <= 200_000
        # A write prunes what expired (here: "short", moved into the past).
        expires_at, _, value = client.hget(name, "short").partition("|")
        client.hset(name, "short", f"{float(expires_at) - 10:.6f}|{value}")
        client.hset(name, "garbage", "not an entry")
        gate.set_value(key, "other", "o", ttl_seconds=10)
        assert sorted(client.hkeys(name)) == ["long", "longer", "other"]
        assert client.keys(f"geotoolkit:{host}:*") == [name]  # no pacing keys were created
    finally:
        client.delete(*client.keys(f"geotoolkit:{host}:*"))
        client.close()
        gate.close()


@pytest.mark.postgres
def test_postgres_expired_values_are_swept(postgres_dsn: str, host: str) -> None:
    import psycopg

    from geotoolkit.gate.postgres import PostgresGate, init_schema

    gate = PostgresGate(postgres_dsn)
    key = gate_key(host)
    try:
        gate.set_value(key, "old", "o", ttl_seconds=60)
        gate.set_value(key, "live", "l", ttl_seconds=60)
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("UPDATE geotoolkit_gate_values SET expires_at = expires_at - 120 "
                         "WHERE key = %s AND name = 'old'", (key,))
            init_schema(postgres_dsn)  # sweeps
            names = [r[0] for r in conn.execute(
                "SELECT name FROM geotoolkit_gate_values WHERE key = %s", (key,))]
        assert names == ["live"]
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM geotoolkit_gate_values WHERE key = %s", (key,))
        gate.close()
