"""The attempt log (``AttemptLog``): rows' attempts across the runs of an unfinished batch,
on every store backend, and the upgrade of caches written before it (schema v3).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from geotoolkit import FakeClock
from geotoolkit.results import Match, NoMatch
from geotoolkit.store import SQLiteStore
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


def test_a_v2_sqlite_file_gains_the_attempt_log_and_keeps_its_rows(tmp_path: Path) -> None:
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
        store.put_attempts("new", Attempts(1, 1))
        assert store.get_attempts(["new"])["new"].attempts == 1
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3
    db.close()


@pytest.mark.postgres
def test_a_postgres_cache_marked_by_schema_v2_gains_the_attempt_log(schema_dsn: str) -> None:
    """A table in place at v2 (its comment the v2 mark) is brought up to date once."""
    import psycopg

    from geotoolkit.pgschema import schema_mark
    from geotoolkit.store import postgres

    v2_mark = schema_mark("geotoolkit cache schema", (postgres._SCHEMA, postgres._MIGRATE))
    with psycopg.connect(schema_dsn, autocommit=True) as conn:
        conn.execute(postgres._SCHEMA)
        conn.execute(f"COMMENT ON TABLE {postgres.TABLE} IS '{v2_mark}'")
        conn.execute(f"INSERT INTO {postgres.TABLE} (key, status, reason, stored_at) "
                     "VALUES ('old', 'no_match', 'none', 1700000000.0)")
    store = postgres.PostgresStore(schema_dsn, no_match_ttl_seconds=None)
    try:
        assert store.get_many(["old"])["old"] == NoMatch(reason="none")
        store.put_attempts("new", Attempts(2, 2, not_before=5.0))
        assert store.get_attempts(["new"])["new"].not_before == 5.0
    finally:
        store.close()
    with psycopg.connect(schema_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT obj_description(%s::regclass, 'pg_class')",
                           (postgres.TABLE,)).fetchone()
    assert row is not None and row[0] == postgres._MARK != v2_mark
