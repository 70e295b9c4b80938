"""One contract for every gate backend: memory, SQLite, Redis and PostgreSQL.

The same assertions run against each store (see the ``store`` fixture). Waits are
checked as returned values, never by sleeping: with an interval of 10 s the second
acquire *returns* ~10 s.
"""

from __future__ import annotations

import inspect
import itertools
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from geotoolkit.errors import ConfigurationError, GateError
from geotoolkit.gate import Gate, gate_key
from geotoolkit.gate.fleet import OK

#: Slack for the real time that passes between two calls of one test.
TOL = 0.25

REPO_ROOT = Path(__file__).resolve().parents[2]


def protocol_mismatches(obj: object, protocol: type) -> list[str]:
    """Where ``obj`` differs from ``protocol``: a missing attribute, a method without one of
    the protocol's parameters (or of another kind). ``isinstance`` against a runtime-checkable
    protocol only sees that the names exist; this reads the signatures."""
    problems = [f"no attribute {name}" for name in getattr(protocol, "__annotations__", {})
                if not hasattr(obj, name)]
    for name, member in vars(protocol).items():
        if name.startswith("_") or not callable(member):
            continue
        method = getattr(obj, name, None)
        if method is None:
            problems.append(f"no method {name}")
            continue
        have = inspect.signature(method).parameters  # bound: no self
        for param in list(inspect.signature(member).parameters.values())[1:]:
            found = have.get(param.name)
            if found is None or found.kind != param.kind:
                problems.append(f"{name}(): parameter {param.name} missing or of another kind")
    return problems


def test_instances_are_gates(store: Any) -> None:
    gate = store.open()
    assert protocol_mismatches(gate, Gate) == []
    assert gate.backend == store.name


def test_a_method_without_a_protocol_parameter_is_a_mismatch() -> None:
    class Partial:
        backend, blocking = "partial", False

        def acquire(self, key: str, interval: float) -> float:  # no horizon
            return 0.0

    problems = protocol_mismatches(Partial(), Gate)
    assert "acquire(): parameter horizon missing or of another kind" in problems
    assert "no method reserve" in problems and "no method pause" in problems


def test_first_acquire_does_not_wait(store: Any, host: str) -> None:
    gate = store.open()
    assert gate.acquire(gate_key(host), 10.0) == pytest.approx(0.0, abs=1e-9)


def test_consecutive_acquires_are_spaced_by_the_interval(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host)
    waits = [gate.acquire(key, 10.0) for _ in range(3)]
    assert waits == [
        pytest.approx(0.0, abs=TOL),
        pytest.approx(10.0, abs=TOL),
        pytest.approx(20.0, abs=TOL),
    ]
    state = gate.state(key)
    assert state.tat - state.now == pytest.approx(30.0, abs=TOL)
    assert state.pause_until == 0.0


def test_keys_are_independent(store: Any, host: str) -> None:
    gate = store.open()
    assert gate.acquire(gate_key(host, "a"), 10.0) == pytest.approx(0.0, abs=1e-9)
    assert gate.acquire(gate_key(host, "b"), 10.0) == pytest.approx(0.0, abs=1e-9)


def test_no_reservation_beyond_the_horizon(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host)
    assert gate.acquire(key, 10.0, horizon=15.0) == pytest.approx(0.0, abs=TOL)
    assert gate.acquire(key, 10.0, horizon=15.0) == pytest.approx(10.0, abs=TOL)
    before = gate.state(key)
    # The next slot is ~20 s away, beyond the horizon: reported, not reserved.
    assert gate.acquire(key, 10.0, horizon=15.0) == pytest.approx(20.0, abs=TOL)
    assert gate.acquire(key, 10.0, horizon=15.0) == pytest.approx(20.0, abs=TOL)
    after = gate.state(key)
    assert after.tat == before.tat
    # A larger horizon reserves it.
    assert gate.acquire(key, 10.0, horizon=60.0) == pytest.approx(20.0, abs=TOL)
    assert gate.state(key).tat == pytest.approx(before.tat + 10.0, abs=1e-3)


def test_pause_is_visible_to_every_instance(store: Any, host: str) -> None:
    one, two = store.open(), store.open()
    key = gate_key(host)
    assert one.pause(key, 30.0) == pytest.approx(30.0, abs=TOL)
    state = two.state(key)
    assert state.pause_remaining == pytest.approx(30.0, abs=TOL)
    assert state.tat >= state.pause_until
    assert two.acquire(key, 1.0) == pytest.approx(30.0, abs=TOL)


def test_a_pause_is_never_shortened(store: Any, host: str) -> None:
    one, two = store.open(), store.open()
    key = gate_key(host)
    one.pause(key, 30.0)
    assert two.pause(key, 5.0) == pytest.approx(30.0, abs=TOL)
    assert one.state(key).pause_remaining == pytest.approx(30.0, abs=TOL)
    # A longer one extends it.
    assert two.pause(key, 40.0) == pytest.approx(40.0, abs=TOL)
    assert one.state(key).pause_remaining == pytest.approx(40.0, abs=TOL)


def test_after_a_pause_the_fleet_restarts_one_interval_apart(store: Any, host: str) -> None:
    one, two = store.open(), store.open()
    key = gate_key(host)
    one.pause(key, 20.0)
    waits = [one.acquire(key, 2.0), two.acquire(key, 2.0), one.acquire(key, 2.0)]
    assert waits == [
        pytest.approx(20.0, abs=TOL),
        pytest.approx(22.0, abs=TOL),
        pytest.approx(24.0, abs=TOL),
    ]


def test_a_pause_cancels_outstanding_reservations(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host)
    for _ in range(5):
        gate.acquire(key, 10.0)  # reserved up to ~50 s ahead
    before = gate.state(key)
    assert before.epoch == 0
    gate.pause(key, 5.0)
    after = gate.state(key)
    # The fleet restarts at the end of the pause; holders of older slots see a new epoch.
    assert after.epoch == 1
    assert after.tat == pytest.approx(after.pause_until, abs=1e-6)
    assert gate.acquire(key, 10.0) == pytest.approx(5.0, abs=TOL)
    assert gate.acquire(key, 10.0) == pytest.approx(15.0, abs=TOL)


def test_a_pause_that_does_not_extend_changes_nothing(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host)
    gate.pause(key, 30.0)
    gate.acquire(key, 10.0)
    before = gate.state(key)
    gate.pause(key, 5.0)
    after = gate.state(key)
    assert (after.epoch, after.tat, after.pause_until) == (before.epoch, before.tat, before.pause_until)


def test_the_api_key_never_reaches_the_store(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host, "sk-SECRET-123")
    gate.acquire(key, 1.0)
    gate.pause(key, 5.0)
    gate.acquire(key, 1.0)
    dumped = store.dump()
    assert key in dumped  # the scan sees what was stored...
    assert "sk-SECRET-123" not in dumped  # ...and the secret is not in it
    assert "sk-SECRET-123" not in repr(gate)


def test_bad_intervals_are_configuration_errors(store: Any, host: str) -> None:
    gate = store.open()
    with pytest.raises(ConfigurationError):
        gate.acquire(gate_key(host), float("nan"))
    with pytest.raises(ConfigurationError):
        gate.acquire(gate_key(host), -1.0)
    with pytest.raises(ConfigurationError):
        gate.pause(gate_key(host), float("inf"))


def test_threads_share_one_instance(store: Any, host: str) -> None:
    gate = store.open()
    key = gate_key(host)
    waits: list[float] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(5):
            wait = gate.acquire(key, 1.0)
            with lock:
                waits.append(wait)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 20 reservations, one second apart: waits ~0, 1, ..., 19 (in some order).
    assert sorted(round(w) for w in waits) == list(range(20))


# -- spacing across processes -------------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import json, os, sys, types

    # Only the gate modules are needed: skip the package __init__ (pandas & co., seconds).
    package = types.ModuleType("geotoolkit")
    package.__path__ = [os.path.join(sys.argv[5], "geotoolkit")]
    sys.modules["geotoolkit"] = package
    from geotoolkit.gate import open_gate

    url, key, n, interval = sys.argv[1:5]
    n, interval = int(n), float(interval)

    gate = open_gate(url, fallback=False)
    try:
        gate.state(key)  # connect before the start line
        print("ready", flush=True)
        sys.stdin.readline()  # the start line: the parent answers once every worker is ready
        slots = []
        for _ in range(n):
            r = gate.reserve(key, interval, 60.0)  # r.now: the gate's clock at the reservation
            slots.append(r.now + r.wait)
    finally:
        gate.close()
    print(json.dumps(slots))
    """
)


def test_slots_are_spaced_across_processes(store: Any, host: str) -> None:
    if store.url is None:
        pytest.skip(f"the {store.name} gate lives in one process")
    store.open().state(gate_key(host))  # create the store (file, schema) up front
    key, interval, parties, n = gate_key(host), 0.05, 4, 10
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p),
    }
    args = [store.url, key, str(n), str(interval), str(REPO_ROOT)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(parties)
    ]
    for proc in procs:  # every worker connected ...
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n", proc.communicate()
    for proc in procs:  # ... then all go at once
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    slots: list[float] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        slots.extend(json.loads(out))
    assert len(slots) == parties * n
    slots.sort()
    gaps = [b - a for a, b in itertools.pairwise(slots)]
    # Sorted neighbours at least one interval apart <=> every pair is.
    assert min(gaps) >= interval - 1e-6, gaps


# -- server gates specifics ------------------------------------------------------------


@pytest.mark.redis
def test_redis_keys_expire(redis_url: str, host: str) -> None:
    import redis

    from geotoolkit.gate.redis import RedisGate
    from geotoolkit.gate.strategy import sent_key

    gate = RedisGate(redis_url, key_ttl_seconds=5)
    client = redis.Redis.from_url(redis_url)
    try:
        key = gate_key(host)
        gate.acquire(key, 1.0)
        ttl = client.pttl(RedisGate.storage_key(key))
        assert 0 < ttl <= 6_000
        # Never expires while a pause is still running.
        gate.pause(key, 100.0)  # on the sends' spacing state too (see FleetGate.pause)
        for stored in (RedisGate.storage_key(key), RedisGate.storage_key(sent_key(key))):
            assert 100_000 < client.pttl(stored) <= 106_000
        assert sorted(client.scan_iter(match=f"geotoolkit:{host}:*")) == sorted(
            RedisGate.storage_key(k).encode() for k in (key, sent_key(key)))
    finally:
        client.delete(*client.scan_iter(match=f"geotoolkit:{host}:*"))
        client.close()
        gate.close()


@pytest.mark.redis
def test_redis_heartbeats_and_counters_expire(redis_url: str, host: str) -> None:
    import redis

    from geotoolkit.gate import Cap, Report
    from geotoolkit.gate.fleet import WINDOW_TTL_SECONDS
    from geotoolkit.gate.redis import RedisGate
    from geotoolkit.gate.strategy import fleet_key

    gate = RedisGate(redis_url, key_ttl_seconds=5)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    key = gate_key(host)
    try:
        gate.record(key, Report(1, 1, 0), worker="w1")
        fleet = RedisGate.values_key(fleet_key(key))
        assert 0 < client.pttl(fleet) <= 10_000  # a heartbeat period
        buckets = list(client.scan_iter(match=f"{key}:n:win:*"))
        assert len(buckets) == 3  # requests, successes, 429s of one second
        assert all(0 < client.pttl(b) <= WINDOW_TTL_SECONDS * 1000 for b in buckets)
        reservation = gate.reserve(key, 1.0, cap=Cap(10))
        assert reservation.usage is not None
        # A day's counter lives until a day after its period ends.
        counter = RedisGate.counter_key(key, reservation.usage.period, durable=True)
        ttl = client.pttl(counter) / 1000
        expected = reservation.usage.resets_at - reservation.now + 86_400
        assert expected - 5 < ttl <= expected + 1
        assert sorted(client.scan_iter(match=f"geotoolkit:{host}:*")) == sorted(
            [RedisGate.storage_key(key), fleet, counter, *buckets,
             RedisGate.counter_key(key, OK)])
        assert gate.keys(f"geotoolkit:{host}:") == [key]  # a SCAN for the state hashes
    finally:
        client.delete(*client.scan_iter(match=f"geotoolkit:{host}:*"))
        client.close()
        gate.close()


@pytest.mark.postgres
def test_postgres_schema_init_is_idempotent_and_concurrent(postgres_dsn: str) -> None:
    from geotoolkit.gate.postgres import init_schema

    errors: list[BaseException] = []

    def work() -> None:
        try:
            init_schema(postgres_dsn)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.postgres
def test_postgres_table_is_unlogged_and_old_rows_are_swept(postgres_dsn: str, host: str) -> None:
    import psycopg

    from geotoolkit.gate.postgres import init_schema

    init_schema(postgres_dsn)
    old, paused = gate_key(host, "old"), gate_key(host, "paused")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        persistence = dict(conn.execute(
            "SELECT relname, relpersistence FROM pg_class WHERE relname IN "
            "('geotoolkit_gate', 'geotoolkit_gate_counters', 'geotoolkit_gate_usage', "
            "'geotoolkit_gate_values')"
        ).fetchall())
        # Pacing, stats and values are ephemeral; cap counters must survive a crash.
        assert persistence == {"geotoolkit_gate": "u", "geotoolkit_gate_counters": "u",
                               "geotoolkit_gate_usage": "p", "geotoolkit_gate_values": "u"}
        options = conn.execute(
            "SELECT reloptions FROM pg_class WHERE relname = 'geotoolkit_gate'").fetchone()
        assert options is not None and "fillfactor=50" in options[0]
        conn.execute(
            "INSERT INTO geotoolkit_gate (key, tat, pause_until, updated_at) VALUES "
            "(%s, 0, 0, clock_timestamp() - interval '2 hours'), "
            "(%s, 0, extract(epoch FROM clock_timestamp()) + 600, "
            " clock_timestamp() - interval '2 hours')",
            (old, paused),
        )
        try:
            init_schema(postgres_dsn)
            keys = {
                row[0]
                for row in conn.execute(
                    "SELECT key FROM geotoolkit_gate WHERE key IN (%s, %s)", (old, paused)
                )
            }
            assert keys == {paused}  # idle rows go; a running pause stays
        finally:
            conn.execute("DELETE FROM geotoolkit_gate WHERE key IN (%s, %s)", (old, paused))


@pytest.mark.postgres
def test_postgres_recreates_a_dropped_schema(postgres_dsn: str, host: str) -> None:
    import psycopg

    from geotoolkit.gate.postgres import PostgresGate

    gate = PostgresGate(postgres_dsn)
    try:
        key = gate_key(host)
        assert gate.acquire(key, 1.0) == pytest.approx(0.0, abs=1e-9)
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("DROP FUNCTION geotoolkit_gate_publish_pause(text, double precision, text)")
        assert gate.pause(key, 5.0) == pytest.approx(5.0, abs=TOL)
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM geotoolkit_gate WHERE key LIKE %s", (f"geotoolkit:{host}:%",))
        gate.close()


@pytest.mark.parametrize(
    ("module", "url", "backend"),
    [
        ("redis", "redis://:hunter2@127.0.0.1:1/0", "redis"),
        ("psycopg", "postgresql://postgres:hunter2@127.0.0.1:1/test", "postgres"),
        ("psycopg", "host=127.0.0.1 port=1 user=postgres password=hunter2", "postgres"),
    ],
)
def test_unreachable_server_raises_gate_error_without_the_password(
    module: str, url: str, backend: str
) -> None:
    from geotoolkit.gate import open_gate

    gate = open_gate(url, fallback=False) if "://" in url else _postgres_gate(url)
    try:
        assert "hunter2" not in repr(gate)
        for call in (
            lambda: gate.acquire("geotoolkit:x:anonymous", 1.0),
            lambda: gate.pause("geotoolkit:x:anonymous", 1.0),
            lambda: gate.state("geotoolkit:x:anonymous"),
        ):
            with pytest.raises(GateError) as info:
                call()
            assert info.value.backend == backend
            assert info.value.__cause__ is not None
            assert "hunter2" not in str(info.value)
            assert module in type(info.value.__cause__).__module__
    finally:
        gate.close()


def _postgres_gate(dsn: str) -> Gate:
    from geotoolkit.gate.postgres import PostgresGate

    return PostgresGate(dsn)
