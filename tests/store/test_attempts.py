"""The attempt log (``AttemptLog``): rows' attempts across the runs of an unfinished batch,
on every store backend, and the upgrade of caches written before it (schema v3).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from geotoolkit import FakeClock
from geotoolkit.results import Match, NoMatch
from geotoolkit.store import SQLiteStore, StoreError
from geotoolkit.store.base import ATTEMPTS_TTL_SECONDS, MAX_TEXT_CHARS, AttemptLog, Attempts


def test_attempts_round_trip_are_replaced_and_cleared(make: Any, prefix: str) -> None:
    clock = FakeClock(start=1_790_000_000.0)
    store = make(clock=clock)
    assert isinstance(store, AttemptLog)
    a, b = prefix + "a", prefix + "b"
    store.put_attempts(a, Attempts(2, 3, not_before=1_790_000_004.5))
    store.put_attempts(b, Attempts(6, 6, error="ProviderUnavailableError", reason="gave up: 500"))
    got = store.get_attempts([a, b, prefix + "none"])
    assert set(got) == {a, b}
    assert (got[a].attempts, got[a].sent, got[a].not_before, got[a].gave_up) == (2, 3, 1_790_000_004.5,
                                                                                  False)
    assert got[b].gave_up and got[b].reason == "gave up: 500" and got[b].updated_at == clock.now()
    store.put_attempts(a, Attempts(3, 4))  # the next attempt replaces the row
    assert store.get_attempts([a])[a].attempts == 3
    store.clear_attempts([a])
    assert set(store.get_attempts([a, b])) == {b}
    store.clear_attempts([b, prefix + "never-kept"])
    assert store.get_attempts([a, b]) == {}


def _later(clock: FakeClock, seconds: float) -> None:
    while seconds > 0:  # advance() moves at most a day at a time
        step = min(seconds, 3600.0)
        clock.advance(step)
        seconds -= step


def test_attempts_expire_and_do_not_touch_results(make: Any, prefix: str) -> None:
    clock = FakeClock(start=1_790_000_000.0)
    store = make(clock=clock)
    key = prefix + "k"
    store.put(key, Match(lon=9.52, lat=47.14))
    store.put_attempts(key, Attempts(1, 1, reason="x" * 50_000, error="E"))
    assert len(store.get_attempts([key])[key].reason) == MAX_TEXT_CHARS  # cut, as results are
    _later(clock, ATTEMPTS_TTL_SECONDS - 1)
    assert key in store.get_attempts([key])
    _later(clock, 2)
    assert store.get_attempts([key]) == {}  # a batch never finished: its counts expire
    store.clear_attempts([])
    assert store.get_many([key])[key] == Match(lon=9.52, lat=47.14)  # the result stays


#: A file as schema v2 left it (the results table only), with a row in it.
_V2_SQLITE = """
CREATE TABLE results (
    key TEXT PRIMARY KEY NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('matched', 'no_match')),
    lon REAL, lat REAL,
    label TEXT NOT NULL DEFAULT '', reason TEXT NOT NULL DEFAULT '',
    provider TEXT NOT NULL DEFAULT '', attempts INTEGER NOT NULL DEFAULT 1,
    stored_at REAL NOT NULL, precision TEXT, score REAL, place TEXT
) WITHOUT ROWID
"""


def test_a_sqlite_file_from_before_gains_the_attempt_log_on_first_use(tmp_path: Path) -> None:
    """The results table and the file's version stay as they were: a version that does not
    know the log still opens the file."""
    path = tmp_path / "v2.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(_V2_SQLITE)
        db.execute("INSERT INTO results VALUES ('old', 'no_match', NULL, NULL, '', 'none', "
                   "'nominatim', 1, 1700000000.0, NULL, NULL, NULL)")
        db.execute("PRAGMA user_version = 2")
    db.close()
    store = SQLiteStore(path, no_match_ttl_seconds=None)
    try:
        assert store.get_many(["old"])["old"] == NoMatch(reason="none", provider="nominatim")
        assert store.get_attempts(["new"]) == {}
        store.put_attempts("new", Attempts(1, 1))
        assert store.get_attempts(["new"])["new"].attempts == 1
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    db.close()
    assert tables == {"results", "attempts"}


def _v2_cache(dsn: str) -> None:
    """The cache table as the version before the attempt log made it (marked by it)."""
    import psycopg

    from geotoolkit.pgschema import schema_mark
    from geotoolkit.store import postgres

    v2_mark = schema_mark("geotoolkit cache schema", (postgres._SCHEMA, postgres._MIGRATE))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(postgres._SCHEMA)
        conn.execute(f"COMMENT ON TABLE {postgres.TABLE} IS '{v2_mark}'")
        conn.execute(f"INSERT INTO {postgres.TABLE} (key, status, reason, stored_at) "
                     "VALUES ('old', 'no_match', 'none', 1700000000.0)")


@pytest.mark.postgres
def test_a_postgres_cache_from_before_gains_the_attempt_log_on_first_use(schema_dsn: str) -> None:
    """The results table, marked by an earlier version, is left as it is."""
    import psycopg

    from geotoolkit.store import postgres

    _v2_cache(schema_dsn)
    store = postgres.PostgresStore(schema_dsn, no_match_ttl_seconds=None)
    try:
        assert store.get_many(["old"])["old"] == NoMatch(reason="none")
        store.put_attempts("new", Attempts(2, 2, not_before=5.0))
        assert store.get_attempts(["new"])["new"].not_before == 5.0
    finally:
        store.close()
    with psycopg.connect(schema_dsn, autocommit=True) as conn:
        marks = dict(conn.execute(
            "SELECT relname, obj_description(oid, 'pg_class') FROM pg_class "
            "WHERE relname IN (%s, %s) AND relnamespace = current_schema()::regnamespace",
            (postgres.TABLE, postgres.ATTEMPTS_TABLE)).fetchall())
    assert marks == {postgres.TABLE: postgres._MARK, postgres.ATTEMPTS_TABLE: postgres._ATTEMPTS_MARK}


@pytest.mark.postgres
def test_a_worker_who_may_not_create_keeps_its_results_when_the_log_is_missing(
        schema_dsn: str, dml_only: Callable[[str], AbstractContextManager[str]]) -> None:
    """A team's cache made by an earlier version, workers who may only read and write: the
    results work as before; the attempt log fails alone until the owner has used it."""
    from geotoolkit.store.postgres import PostgresStore

    _v2_cache(schema_dsn)
    owner = PostgresStore(schema_dsn)
    try:
        with dml_only(schema_dsn) as dsn:
            worker = PostgresStore(dsn, timeout_seconds=2.0)
            try:
                worker.put("k", Match(lon=1.0, lat=2.0))
                assert worker.get_many(["k"]) == {"k": Match(lon=1.0, lat=2.0)}
                with pytest.raises(StoreError, match="permission denied"):
                    worker.put_attempts("k", Attempts(1, 1))
                assert owner.get_attempts(["k"]) == {}  # the owner makes the table
            finally:
                worker.close()
        with dml_only(schema_dsn) as dsn:  # a role granted on the tables now in place
            worker = PostgresStore(dsn, timeout_seconds=2.0)
            try:
                worker.put_attempts("k", Attempts(1, 1))
                assert worker.get_attempts(["k"])["k"].attempts == 1
            finally:
                worker.close()
    finally:
        owner.close()
