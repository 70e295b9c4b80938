"""A hostile world: nothing waits forever, nothing leaks.

A SQLite file locked by another process, a PostgreSQL row or table held by
another session, a hung (``SIGSTOP``) or restarted Redis: each gate call ends in
a ``GateError`` after its small deadline (never a hang), ``FallbackGate`` paces
locally meanwhile, and everything recovers when the obstacle goes. Passwords
appear in no error, repr, warning or log record; gate files are private.

Deadlines are small (0.2-0.3 s) so the tests are quick; outcomes are asserted,
never how long anything took.
"""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from geotoolkit.clock import FakeClock
from geotoolkit.errors import GateError
from geotoolkit.gate import Report, SQLiteGate, gate_key, open_gate
from geotoolkit.gate.fallback import FallbackGate, GateUnavailableWarning

#: Slack for the real time that passes between two calls of one test.
TOL = 0.25
SECRET = "hunter2-pw"

_HOLD = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("ROLLBACK")
"""


@contextmanager
def sqlite_locked(path: Path) -> Iterator[None]:
    """Another process holds ``BEGIN EXCLUSIVE`` on ``path`` until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "locked\n", proc.communicate()
        yield
    finally:
        proc.communicate("go\n", timeout=30)
        assert proc.returncode == 0


def _slot(reservation: Any) -> float:
    """A reservation's send slot on the store's clock."""
    return float(reservation.now + reservation.wait)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _writes(gate: Any, key: str) -> list[Callable[[], object]]:
    """Every gate call that writes the key's state or values."""
    return [
        lambda: gate.acquire(key, 1.0),
        lambda: gate.pause(key, 5.0),
        lambda: gate.record(key, Report(1, 1, 0)),
        lambda: gate.set_value(key, "lease", "me", ttl_seconds=60),
        lambda: gate.delete_value(key, "lease"),
    ]


# -- SQLite ------------------------------------------------------------------------------


def test_a_sqlite_gate_locked_by_another_process_is_a_gate_error(tmp_path: Path) -> None:
    path = tmp_path / "gate.sqlite"
    gate = open_gate(f"sqlite:///{path}", timeout_seconds=0.2)
    key = gate_key("api.example.com")
    try:
        first = gate.reserve(key, 60.0)
        gate.set_value(key, "lease", "them", ttl_seconds=60)
        with sqlite_locked(path):
            for call in _writes(gate, key):
                with pytest.raises(GateError, match="locked") as info:
                    call()
                assert info.value.backend == "sqlite"
                assert isinstance(info.value.__cause__, sqlite3.OperationalError)
            # Readers are not blocked by a writer (WAL): checks still answer.
            assert gate.state(key).tat > 0
            assert gate.values(key) == {"lease": "them"}
        # Released: the next slot is one interval on (nothing was reserved meanwhile).
        assert _slot(gate.reserve(key, 60.0)) == pytest.approx(_slot(first) + 60.0, abs=1e-3)
        assert gate.values(key) == {"lease": "them"}
    finally:
        gate.close()


def test_opening_a_locked_sqlite_file_is_a_gate_error(tmp_path: Path) -> None:
    path = tmp_path / "busy.sqlite"
    with sqlite3.connect(path) as db:  # a rollback-journal file: a lock blocks readers too
        db.execute("CREATE TABLE other (x)")
    db.close()
    with sqlite_locked(path), pytest.raises(GateError, match="cannot open") as info:
        SQLiteGate(path, timeout_seconds=0.2)
    assert info.value.backend == "sqlite"
    gate = SQLiteGate(path, timeout_seconds=0.2)  # released: it opens
    try:
        assert gate.acquire(gate_key("api.example.com"), 1.0) == pytest.approx(0.0, abs=TOL)
    finally:
        gate.close()


def test_the_sqlite_gate_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    before = _mode(tmp_path)
    path = tmp_path / "made" / "by" / "us" / "gate.sqlite"
    gate = SQLiteGate(path)
    try:
        gate.acquire(gate_key("api.example.com"), 1.0)  # the WAL and its index exist now
        files = {p.name: _mode(p) for p in path.parent.iterdir()}
        assert files == {"gate.sqlite": 0o600, "gate.sqlite-wal": 0o600, "gate.sqlite-shm": 0o600}
        assert [_mode(d) for d in (path.parent, path.parent.parent, tmp_path / "made")] == [0o700] * 3
        assert _mode(tmp_path) == before  # an existing directory keeps its mode
    finally:
        gate.close()


def test_an_existing_sqlite_gate_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "team-gate.sqlite"
    path.touch()
    path.chmod(0o664)
    gate = SQLiteGate(path)
    try:
        gate.acquire(gate_key("api.example.com"), 1.0)
        assert _mode(path) == 0o664
    finally:
        gate.close()


def test_bad_deadlines_are_configuration_errors(tmp_path: Path) -> None:
    from geotoolkit.errors import ConfigurationError
    from geotoolkit.gate.postgres import PostgresGate
    from geotoolkit.gate.redis import RedisGate

    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigurationError, match="timeout_seconds"):
            SQLiteGate(tmp_path / "g.sqlite", timeout_seconds=bad)
        with pytest.raises(ConfigurationError, match="timeout_seconds"):
            RedisGate("redis://127.0.0.1:1/0", timeout_seconds=bad)
        with pytest.raises(ConfigurationError, match="timeout_seconds"):
            PostgresGate("postgresql://127.0.0.1:1/x", timeout_seconds=bad)


# -- Redis: hung, restarted ------------------------------------------------------------------


@contextmanager
def stopped(server: Any) -> Iterator[None]:
    """The throwaway redis-server is frozen (SIGSTOP) until the block ends."""
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


@pytest.mark.redis
def test_a_hung_redis_is_a_gate_error_and_the_fallback_paces_locally(redis_server: Any) -> None:
    import redis

    from geotoolkit.gate.redis import RedisGate

    redis_server.start()
    key = gate_key("api.example.com", "sk-test")
    clock = FakeClock()
    gate = RedisGate(redis_server.url, timeout_seconds=0.3)
    fallback = open_gate(redis_server.url, clock=clock, timeout_seconds=0.3)
    assert isinstance(fallback, FallbackGate)
    try:
        assert gate.acquire(key, 1.0) == pytest.approx(0.0, abs=TOL)
        fallback.state(key)
        with stopped(redis_server):
            reads = [lambda: gate.state(key), lambda: gate.stats(key), lambda: gate.usage(key),
                     lambda: gate.values(key)]
            for call in [*_writes(gate, key), *reads]:  # every call of the protocol
                with pytest.raises(GateError, match="Timeout") as info:
                    call()
                assert info.value.backend == "redis"
                assert isinstance(info.value.__cause__, redis.TimeoutError)
            with pytest.warns(GateUnavailableWarning, match="redis"):
                reservation = fallback.reserve(key, 1.0)
            assert reservation.reserved and fallback.degraded
        # SIGCONT: the server answers again, and the fallback returns to it.
        assert gate.state(key).tat > 0
        clock.advance(fallback.retry_seconds)
        assert fallback.reserve(key, 1.0).reserved
        assert not fallback.degraded and fallback.backend == "redis"
    finally:
        gate.close()
        fallback.close()


@pytest.mark.redis
def test_a_restarted_redis_loses_its_state_and_nothing_crashes(redis_server: Any) -> None:
    import redis

    from geotoolkit.gate.redis import RedisGate

    redis_server.start()
    key = gate_key("api.example.com", "sk-test")
    gate = RedisGate(redis_server.url)
    try:
        gate.acquire(key, 10.0)
        assert gate.acquire(key, 10.0) == pytest.approx(10.0, abs=TOL)
        assert gate.set_value(key, "lease", "me", ttl_seconds=60)
        redis_server.stop()
        redis_server.start()  # same port, empty: no state, no scripts
        # The broken pooled connection is re-dialled, every script loaded again (NOSCRIPT).
        assert gate.acquire(key, 10.0) == pytest.approx(0.0, abs=TOL)
        assert gate.values(key) == {}
        assert gate.set_value(key, "lease", "again", ttl_seconds=60, only_if_absent=True)
        assert gate.pause(key, 5.0) == pytest.approx(5.0, abs=TOL)
        assert gate.record(key, Report(1, 1, 0), worker="w").requests == 1
        assert gate.stats(key).workers_active == 1 and gate.usage(key).used == 0
        assert gate.delete_value(key, "lease", only_if="again")
        # Scripts flushed on a live server: NOSCRIPT once more, handled.
        client = redis.Redis.from_url(redis_server.url)
        try:
            client.script_flush()
        finally:
            client.close()
        assert gate.state(key).pause_remaining == pytest.approx(5.0, abs=TOL)
        assert gate.set_value(key, "lease", "third", ttl_seconds=60)
        assert gate.values(key) == {"lease": "third"}
    finally:
        gate.close()


# -- PostgreSQL: held rows and tables ---------------------------------------------------------


@pytest.mark.postgres
def test_a_held_postgres_row_is_a_gate_error_then_local_pacing(postgres_dsn: str, host: str) -> None:
    import psycopg
    from psycopg import errors as pg_errors

    from geotoolkit.gate.postgres import PostgresGate

    key, clock = gate_key(host), FakeClock()
    gate = PostgresGate(postgres_dsn, timeout_seconds=0.3)
    fallback = open_gate(postgres_dsn, clock=clock, timeout_seconds=0.3)
    assert isinstance(fallback, FallbackGate)
    try:
        first = gate.reserve(key, 60.0)
        gate.set_value(key, "lease", "them", ttl_seconds=60)
        with psycopg.connect(postgres_dsn) as holder:  # a transaction left open
            holder.execute("SELECT 1 FROM geotoolkit_gate WHERE key = %s FOR UPDATE", (key,))
            holder.execute("SELECT 1 FROM geotoolkit_gate_values WHERE key = %s FOR UPDATE", (key,))
            writes = _writes(gate, key)
            record = writes.pop(2)
            for call in writes:
                with pytest.raises(GateError, match="lock timeout") as info:
                    call()
                assert info.value.backend == "postgres"
                assert isinstance(info.value.__cause__, pg_errors.LockNotAvailable)
            # Plain reads never wait for a row lock; counting stats does not take the
            # pacing row (the counters have rows of their own).
            assert gate.state(key).tat > 0 and gate.values(key) == {"lease": "them"}
            assert record() is not None
            with pytest.warns(GateUnavailableWarning, match="lock timeout"):
                reservation = fallback.reserve(key, 1.0)
            assert reservation.reserved and fallback.degraded
            holder.rollback()
        # Released: the next slot is one interval on (nothing was reserved meanwhile).
        assert _slot(gate.reserve(key, 60.0)) == pytest.approx(_slot(first) + 60.0, abs=1e-3)
        clock.advance(fallback.retry_seconds)
        assert fallback.reserve(key, 1.0, horizon=3600.0).reserved  # on the shared state again
        assert not fallback.degraded and fallback.backend == "postgres"
    finally:
        gate.close()
        fallback.close()
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            for table in ("geotoolkit_gate", "geotoolkit_gate_values", "geotoolkit_gate_counters"):
                conn.execute(f"DELETE FROM {table} WHERE key LIKE %s || '%%'", (key,))


@pytest.mark.postgres
@pytest.mark.parametrize("statement", [
    "LOCK TABLE geotoolkit_gate IN ACCESS EXCLUSIVE MODE",  # what VACUUM FULL takes
    "ALTER TABLE geotoolkit_gate ADD COLUMN extra integer",
])
def test_a_locked_postgres_table_is_a_gate_error(schema_dsn: str, statement: str) -> None:
    import psycopg

    from geotoolkit.gate.postgres import PostgresGate

    key = gate_key("api.example.com")
    gate = PostgresGate(schema_dsn, timeout_seconds=0.3)
    try:
        first = gate.reserve(key, 60.0)  # creates the schema
        with psycopg.connect(schema_dsn) as holder:
            holder.execute(statement)
            for call in (lambda: gate.acquire(key, 1.0), lambda: gate.state(key),
                         lambda: gate.stats(key), lambda: gate.pause(key, 1.0)):
                with pytest.raises(GateError, match="lock timeout"):
                    call()
            holder.rollback()
        assert _slot(gate.reserve(key, 60.0)) == pytest.approx(_slot(first) + 60.0, abs=1e-3)
    finally:
        gate.close()


@pytest.mark.postgres
def test_every_postgres_statement_has_a_deadline(postgres_dsn: str, host: str) -> None:
    from psycopg import errors as pg_errors

    from geotoolkit.gate.postgres import PostgresGate

    gate = PostgresGate(postgres_dsn, timeout_seconds=0.3)
    try:
        settings = gate.store._call("read the settings", lambda conn: conn.execute(
            "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')"
        ).fetchone())
        assert settings == ("270ms", "300ms")
        with pytest.raises(GateError, match="statement timeout") as info:
            gate.store._call("sleep", lambda conn: conn.execute("SELECT pg_sleep(30)"))
        assert isinstance(info.value.__cause__, pg_errors.QueryCanceled)
        assert gate.state(gate_key(host)).epoch == 0  # the session survives a timed-out statement
    finally:
        gate.close()


# -- passwords -----------------------------------------------------------------------------

_UNREACHABLE = [
    "redis://:hunter2-pw@127.0.0.1:1/0",
    "redis://someone:hunter2-pw@127.0.0.1:1/0",
    "redis://127.0.0.1:1/0?password=hunter2-pw",
    "postgresql://postgres:hunter2-pw@127.0.0.1:1/test",
    "postgresql://postgres@127.0.0.1:1/test?password=hunter2-pw",
    "host=127.0.0.1 port=1 user=postgres password=hunter2-pw",
]


def _server_gate(url: str) -> Any:
    if "://" in url:
        return open_gate(url, fallback=False, timeout_seconds=1.0)
    from geotoolkit.gate.postgres import PostgresGate

    return PostgresGate(url, timeout_seconds=1.0)


@pytest.mark.parametrize("url", _UNREACHABLE)
def test_a_password_appears_in_no_error_repr_warning_or_log(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    gate = _server_gate(url)
    wrapped = FallbackGate(_server_gate(url), clock=FakeClock(), retry_seconds=0.0)
    texts = [repr(gate), gate.url if hasattr(gate, "url") else gate.dsn, repr(wrapped)]
    try:
        for call in (*_writes(gate, "geotoolkit:x:anonymous"), lambda: gate.state("k"),
                     lambda: gate.values("k")):
            with pytest.raises(GateError) as info:
                call()
            texts += [str(info.value), repr(info.value), str(info.value.__cause__)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for call in _writes(wrapped, "geotoolkit:x:anonymous"):
                call()  # served locally, the store retried (and failing) every time
        assert any(issubclass(w.category, GateUnavailableWarning) for w in caught)
        texts += [str(w.message) for w in caught]
    finally:
        gate.close()
        wrapped.close()
    texts.append(caplog.text)
    assert "***" in texts[0]  # hidden, not dropped
    assert all(SECRET not in text for text in texts), [t for t in texts if SECRET in t]


@pytest.mark.postgres
def test_a_postgres_session_ended_by_the_server_is_dialled_again(
    postgres_dsn: str, host: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A session ended by the server's side (an admin, a restart, a failover) while the
    gate was idle: the next call dials again, the fleet stays on the shared state."""
    import psycopg

    caplog.set_level(logging.WARNING)
    key, clock = gate_key(host), FakeClock()
    gate = open_gate(postgres_dsn, clock=clock, timeout_seconds=2.0)
    assert isinstance(gate, FallbackGate)
    store: Any = gate.inner.store  # type: ignore[attr-defined]
    try:
        first = gate.reserve(key, 60.0)
        for call in (lambda: gate.reserve(key, 60.0), lambda: gate.state(key),
                     lambda: gate.record(key, Report(1, 1, 0), worker="w1")):
            with psycopg.connect(postgres_dsn, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (store._conn.info.backend_pid,))
            call()  # no GateUnavailableWarning (an error here)
            assert not gate.degraded
        assert _slot(gate.reserve(key, 60.0)) == pytest.approx(_slot(first) + 120.0, abs=1e-3)
    finally:
        gate.close()
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            for table in ("geotoolkit_gate", "geotoolkit_gate_values", "geotoolkit_gate_counters"):
                conn.execute(f"DELETE FROM {table} WHERE key LIKE %s || '%%'", (key,))
    assert not [r for r in caplog.records if r.name.startswith("geotoolkit")]


# -- PostgreSQL: a user who may not create -------------------------------------------------------


@pytest.mark.postgres
def test_a_user_who_may_not_create_uses_a_gate_initialised_ahead_of_time(
        schema_dsn: str, host: str, dml_only: Callable[[str], Any]) -> None:
    from geotoolkit.gate.postgres import PostgresGate, init_schema

    init_schema(schema_dsn)  # `geotoolkit gate init URL`, as the schema's owner
    key = gate_key(host)
    with dml_only(schema_dsn) as dsn:
        gate = PostgresGate(dsn, timeout_seconds=2.0)
        try:
            first = gate.reserve(key, 60.0)
            assert first.reserved
            assert gate.record(key, Report(1, 1, 0), worker="w1").workers_active == 1
            assert gate.set_value(key, "lease", "me", ttl_seconds=60)
            assert _slot(gate.reserve(key, 60.0)) == pytest.approx(_slot(first) + 60.0, abs=1e-3)
        finally:
            gate.close()


@pytest.mark.postgres
def test_a_user_who_may_not_create_is_told_to_initialise_the_gate(
        schema_dsn: str, dml_only: Callable[[str], Any]) -> None:
    from geotoolkit.gate.postgres import PostgresGate

    with dml_only(schema_dsn) as dsn:  # nothing created yet
        gate = PostgresGate(dsn, timeout_seconds=2.0)
        try:
            with pytest.raises(GateError, match=r"(?s)permission denied.*geotoolkit gate init"):
                gate.reserve(gate_key("api.example.com"), 1.0)
        finally:
            gate.close()


@pytest.mark.postgres
def test_a_postgres_that_never_answers_is_a_gate_error_then_local_pacing(
        stalling_proxy: Any, host: str) -> None:
    """The session hangs (a stopped backend, a pooler holding the query): the server's own
    deadlines never fire, the gate's does; a new session goes through again."""
    from geotoolkit.gate.postgres import PostgresGate

    proxy, dsn = stalling_proxy
    key, clock = gate_key(host), FakeClock()
    gate = FallbackGate(PostgresGate(dsn, timeout_seconds=0.3), clock=clock)
    try:
        first = gate.reserve(key, 60.0)
        proxy.stall()
        with pytest.warns(GateUnavailableWarning, match="no answer within"):
            assert gate.reserve(key, 1.0).reserved  # paced locally
        assert gate.degraded
        clock.advance(gate.retry_seconds)
        assert _slot(gate.reserve(key, 60.0)) == pytest.approx(_slot(first) + 60.0, abs=1e-3)
        assert not gate.degraded
    finally:
        gate.close()


# A password pasted into a URL as it is: '/' (for redis-py '?' and '#' too) ends the host part
# early, a second '@' is split at differently by each library (libpq looked up the host
# 'pw99@127.0.0.1': a DNS query holding the password's tail). libpq reads '?' and '#' right.
_UNENCODED = [
    "redis://:hunter2/pw99@127.0.0.1:1/0",
    "redis://someone:hunter2#pw99@127.0.0.1:1/0",
    "rediss://:hunter2?pw99@127.0.0.1:1/0",
    "redis://:hunter2@pw99@127.0.0.1:1/0",
    "postgresql://postgres:hunter2@pw99@127.0.0.1:1/test",
    "postgresql://postgres:hunter2/pw99@127.0.0.1:1/test",
    "postgres://:hunter2/pw99@127.0.0.1:1/test",
]


@pytest.mark.parametrize("url", _UNENCODED)
def test_a_password_that_is_not_percent_encoded_is_refused_before_any_connection(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from geotoolkit.errors import ConfigurationError
    from geotoolkit.frontends.cli import main

    for fallback in (False, True):
        with pytest.raises(ConfigurationError, match="percent-encode") as info:
            open_gate(url, fallback=fallback)
        assert info.value.__cause__ is None and info.value.__context__ is None
        assert "hunter2" not in str(info.value) and "pw99" not in str(info.value)
    for argv in (["gate", "status", url], ["gate", "status", url, "--json"], ["gate", "init", url]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert "percent-encode" in err and "hunter2" not in out + err and "pw99" not in out + err


@pytest.mark.parametrize("url", ["postgresql://postgres:hunter2#pw99@127.0.0.1:1/test",
                                 "postgresql://postgres:hunter2?pw99@127.0.0.1:1/test"])
def test_a_postgres_password_with_a_hash_or_question_mark_is_read_as_libpq_reads_it(url: str) -> None:
    gate = open_gate(url, fallback=False, timeout_seconds=1.0)
    try:
        with pytest.raises(GateError) as info:  # port 1: nothing listens
            gate.state("k")
        texts = [repr(gate), str(info.value), str(info.value.__cause__)]
        assert all("hunter2" not in t and "pw99" not in t for t in texts), texts
    finally:
        gate.close()


def test_a_dsn_with_an_unquoted_password_with_a_space_hides_both_halves() -> None:
    from geotoolkit.errors import ConfigurationError
    from geotoolkit.gate.postgres import PostgresGate

    with pytest.raises(ConfigurationError, match="quote") as info:
        PostgresGate("host=127.0.0.1 password=hunter2 pw99 dbname=test")
    shown = "".join(str(e) for e in (info.value, info.value.__cause__, info.value.__context__))
    assert "hunter2" not in shown and "pw99" not in shown
