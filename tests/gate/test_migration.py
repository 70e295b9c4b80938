"""Gate files and tables of the previous version keep working: upgraded in place, cap counts
carried over, and the previous version's own writes still accepted (a fleet mid-upgrade)."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from geotoolkit.gate import Cap, Report, SQLiteGate, gate_key
from geotoolkit.gate.fleet import period_of

#: The previous version's SQLite schema (its file as it is on users' disks).
_OLD_SQLITE = [
    "CREATE TABLE gate (key TEXT PRIMARY KEY, tat REAL NOT NULL DEFAULT 0, "
    "pause_until REAL NOT NULL DEFAULT 0, fleet TEXT)",
    "CREATE TABLE gate_workers (key TEXT NOT NULL, worker TEXT NOT NULL, expires_at REAL NOT NULL, "
    "PRIMARY KEY (key, worker))",
    "CREATE TABLE gate_usage (key TEXT NOT NULL, period TEXT NOT NULL, used INTEGER NOT NULL, "
    "PRIMARY KEY (key, period))",
    "CREATE TABLE gate_values (key TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL, "
    "expires_at REAL NOT NULL, PRIMARY KEY (key, name))",
]

#: The previous version's PostgreSQL tables (its functions are not needed to read them).
_OLD_POSTGRES = [
    "CREATE UNLOGGED TABLE geotoolkit_gate (key text PRIMARY KEY, tat double precision NOT NULL "
    "DEFAULT 0, pause_until double precision NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL "
    "DEFAULT clock_timestamp(), epoch bigint NOT NULL DEFAULT 0, cause text NOT NULL DEFAULT '', "
    "factor double precision NOT NULL DEFAULT 1, decreased_at double precision, throttled_at "
    "double precision, increased_at double precision, b_stamp bigint[], b_counts integer[]) "
    "WITH (fillfactor = 50)",
    "CREATE UNLOGGED TABLE geotoolkit_gate_workers (key text NOT NULL, worker text NOT NULL, "
    "expires_at double precision NOT NULL, PRIMARY KEY (key, worker))",
    "CREATE TABLE geotoolkit_gate_usage (key text NOT NULL, period text NOT NULL, used bigint NOT "
    "NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT clock_timestamp(), "
    "PRIMARY KEY (key, period))",
    "CREATE UNLOGGED TABLE geotoolkit_gate_values (key text NOT NULL, name text NOT NULL, "
    "value text NOT NULL, expires_at double precision NOT NULL, PRIMARY KEY (key, name))",
]

KEY = gate_key("api.example.com", "sk-test")


def test_a_sqlite_gate_file_of_the_previous_version_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "gate.sqlite"
    today = period_of(time.time(), "day")[0]
    with sqlite3.connect(path) as db:
        for statement in _OLD_SQLITE:
            db.execute(statement)
        db.execute("INSERT INTO gate VALUES (?, 0, 0, '[3, \"\", 1.0, null, null, null, []]')", (KEY,))
        db.execute("INSERT INTO gate_usage VALUES (?, ?, 7)", (KEY, today))
        db.execute("INSERT INTO gate_values VALUES (?, 'lease', 'me', ?)", (KEY, time.time() + 60))
    db.close()
    gate = SQLiteGate(path)
    try:
        assert gate.usage(KEY).used in (7, 0)  # 0 only if midnight passed meanwhile
        reservation = gate.reserve(KEY, 1.0, cap=Cap(100), report=Report(1, 1, 0))
        assert reservation.reserved and reservation.usage is not None
        if reservation.usage.period == today:
            assert reservation.usage.used == 8  # the count carried over
        assert gate.values(KEY) == {"lease": "me"}
        assert gate.pause(KEY, 5.0) == pytest.approx(5.0, abs=0.25)
        assert gate.state(KEY).epoch == 1
        assert gate.keys() == [KEY]
        # The previous version's writes (a process not upgraded yet) are still accepted.
        raw = sqlite3.connect(path, isolation_level=None)
        try:
            raw.execute("INSERT INTO gate(key, tat, pause_until, fleet) VALUES (?, 1, 2, '[]') "
                        "ON CONFLICT(key) DO UPDATE SET tat = excluded.tat, "
                        "pause_until = excluded.pause_until, fleet = excluded.fleet", (KEY,))
            raw.execute("INSERT INTO gate_usage(key, period, used) VALUES (?, ?, 50) "
                        "ON CONFLICT(key, period) DO UPDATE SET used = excluded.used",
                        (KEY, reservation.usage.period))
        finally:
            raw.close()
        assert gate.usage(KEY).used in (50, 0)
        assert gate.state(KEY).epoch == 1  # the new columns kept their values
    finally:
        gate.close()


@pytest.fixture
def old_schema_dsn(postgres_dsn: str) -> Iterator[str]:
    """A DSN whose search path is a schema of this test's own, holding the previous tables."""
    import psycopg

    name = f"gt_old_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
        conn.execute(f"SET search_path = {name}")
        for statement in _OLD_POSTGRES:
            conn.execute(statement)
    try:
        yield psycopg.conninfo.make_conninfo(postgres_dsn, options=f"-c search_path={name}")
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE")


@pytest.mark.postgres
def test_postgres_tables_of_the_previous_version_are_upgraded_in_place(old_schema_dsn: str) -> None:
    import psycopg

    from geotoolkit.gate.postgres import PostgresGate

    today = period_of(time.time(), "day")[0]
    with psycopg.connect(old_schema_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO geotoolkit_gate (key, epoch, factor, b_counts) "
                     "VALUES (%s, 4, 0.5, '{1,2,3}')", (KEY,))
        conn.execute("INSERT INTO geotoolkit_gate_usage (key, period, used) VALUES (%s, %s, 7)",
                     (KEY, today))
    gate = PostgresGate(old_schema_dsn)
    try:
        assert gate.state(KEY).epoch == 4  # the pacing row is read as it is
        reservation = gate.reserve(KEY, 1.0, cap=Cap(100), report=Report(1, 1, 0))
        assert reservation.reserved and reservation.usage is not None
        if reservation.usage.period == today:
            assert reservation.usage.used == 8  # the count carried over
        assert gate.pause(KEY, 5.0) == pytest.approx(5.0, abs=0.25)
        assert gate.state(KEY).epoch == 5
        assert gate.keys() == [KEY]
        with psycopg.connect(old_schema_dsn, autocommit=True) as conn:
            # The previous version's cap write (a process not upgraded yet) is still accepted.
            conn.execute("INSERT INTO geotoolkit_gate_usage AS u (key, period, used) "
                         "VALUES (%s, %s, 50) ON CONFLICT (key, period) "
                         "DO UPDATE SET used = excluded.used, updated_at = clock_timestamp()",
                         (KEY, reservation.usage.period))
            columns = {row[0] for row in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                "current_schema() AND table_name = 'geotoolkit_gate_usage'")}
        assert gate.usage(KEY).used in (50, 0)
        assert "expires_at" in columns
    finally:
        gate.close()


@pytest.mark.postgres
def test_postgres_tables_of_the_first_release_are_upgraded_too(postgres_dsn: str) -> None:
    import psycopg

    from geotoolkit.gate.postgres import PostgresGate

    name = f"gt_first_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
        conn.execute(f"CREATE UNLOGGED TABLE {name}.geotoolkit_gate (key text PRIMARY KEY, "
                     "tat double precision NOT NULL DEFAULT 0, pause_until double precision NOT "
                     "NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT clock_timestamp())")
    gate = PostgresGate(psycopg.conninfo.make_conninfo(postgres_dsn, options=f"-c search_path={name}"))
    try:
        assert gate.acquire(KEY, 1.0) == pytest.approx(0.0, abs=0.25)
        assert gate.pause(KEY, 5.0, cause="503") == pytest.approx(5.0, abs=0.25)
        assert gate.state(KEY).epoch == 1 and gate.stats(KEY).pause_cause == "503"
    finally:
        gate.close()
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE")
