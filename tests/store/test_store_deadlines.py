"""A hostile world for the result stores: locks end in a StoreError, secrets and files stay private.

A SQLite file locked by another process, a PostgreSQL row or table held by
another session: each store call ends in a ``StoreError`` after its small
deadline, never a hang, and works again once the lock is gone. Outcomes are
asserted, never how long anything took.
"""

from __future__ import annotations

import logging
import sqlite3
import stat
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from geotoolkit.errors import ConfigurationError
from geotoolkit.results import Match
from geotoolkit.store import SQLiteStore, StoreError, open_store

SECRET = "hunter2-pw"
Locker = Callable[[Path], AbstractContextManager[None]]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_sqlite_cache_locked_by_another_process_is_a_store_error(
    tmp_path: Path, sqlite_locked: Locker
) -> None:
    path = tmp_path / "cache.sqlite"
    store = SQLiteStore(path, timeout_seconds=0.2)
    try:
        store.put("kept", Match(lon=1.0, lat=2.0))
        with sqlite_locked(path):
            for call in (lambda: store.put("new", Match(lon=3.0, lat=4.0)),
                         lambda: store.put_many([("new", Match(lon=3.0, lat=4.0))]),
                         lambda: store.delete(["kept"])):
                with pytest.raises(StoreError, match="locked") as info:
                    call()
                assert info.value.backend == "sqlite"
                assert isinstance(info.value.__cause__, sqlite3.OperationalError)
                assert info.value.retriable and not info.value.permanent  # a wait, not a setting
            assert set(store.get_many(["kept", "new"])) == {"kept"}  # reads go on (WAL)
        store.put("new", Match(lon=3.0, lat=4.0))  # released
        assert set(store.get_many(["kept", "new"])) == {"kept", "new"}
    finally:
        store.close()


def test_opening_a_locked_v1_cache_is_a_store_error(tmp_path: Path, sqlite_locked: Locker) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:  # an old file, to be upgraded: the upgrade needs the lock
        db.execute("CREATE TABLE results (key TEXT PRIMARY KEY, status TEXT NOT NULL, lon REAL, "
                   "lat REAL, label TEXT, reason TEXT, provider TEXT, attempts INTEGER, "
                   "stored_at REAL NOT NULL)")
        db.execute("PRAGMA user_version = 1")
    db.close()
    with sqlite_locked(path), pytest.raises(StoreError, match="locked"):
        SQLiteStore(path, timeout_seconds=0.2)
    store = SQLiteStore(path, timeout_seconds=0.2)  # released: it opens and upgrades
    store.close()


def test_the_sqlite_cache_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    before = _mode(tmp_path)
    path = tmp_path / "made" / "by" / "us" / "cache.sqlite"
    store = open_store(f"sqlite:///{path}")
    assert isinstance(store, SQLiteStore)
    try:
        store.put("k", Match(lon=1.0, lat=2.0))  # the WAL and its index exist now
        files = {p.name: _mode(p) for p in path.parent.iterdir()}
        assert files == {"cache.sqlite": 0o600, "cache.sqlite-wal": 0o600, "cache.sqlite-shm": 0o600}
        assert [_mode(d) for d in (path.parent, path.parent.parent, tmp_path / "made")] == [0o700] * 3
        assert _mode(tmp_path) == before
    finally:
        store.close()


def test_an_existing_cache_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "team-cache.sqlite"
    path.touch()
    path.chmod(0o640)
    store = SQLiteStore(path)
    try:
        store.put("k", Match(lon=1.0, lat=2.0))
        assert _mode(path) == 0o640
    finally:
        store.close()


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_bad_deadlines_are_configuration_errors(tmp_path: Path, bad: float) -> None:
    from geotoolkit.store.postgres import PostgresStore

    with pytest.raises(ConfigurationError, match="timeout_seconds"):
        SQLiteStore(tmp_path / "c.sqlite", timeout_seconds=bad)
    with pytest.raises(ConfigurationError, match="timeout_seconds"):
        PostgresStore("postgresql://127.0.0.1:1/x", timeout_seconds=bad)


# -- PostgreSQL ------------------------------------------------------------------------------


@pytest.mark.postgres
def test_a_held_postgres_row_is_a_store_error(postgres_dsn: str) -> None:
    import uuid

    import psycopg
    from psycopg import errors as pg_errors

    from geotoolkit.store.postgres import PostgresStore

    key = f"test-{uuid.uuid4().hex}:held"
    store = PostgresStore(postgres_dsn, timeout_seconds=0.3)
    try:
        store.put(key, Match(lon=1.0, lat=2.0))
        with psycopg.connect(postgres_dsn) as holder:  # a transaction left open
            holder.execute("SELECT 1 FROM geotoolkit_results WHERE key = %s FOR UPDATE", (key,))
            for call in (lambda: store.put(key, Match(lon=3.0, lat=4.0)),
                         lambda: store.delete([key])):
                with pytest.raises(StoreError, match="lock timeout") as info:
                    call()
                assert info.value.backend == "postgres"
                assert isinstance(info.value.__cause__, pg_errors.LockNotAvailable)
                assert info.value.retriable and not info.value.permanent  # a wait, not a setting
            assert store.get_many([key]) == {key: Match(lon=1.0, lat=2.0)}  # reads never wait
            holder.rollback()
        store.put(key, Match(lon=3.0, lat=4.0))
        assert store.get_many([key]) == {key: Match(lon=3.0, lat=4.0)}
    finally:
        store.delete([key])
        store.close()


@pytest.mark.postgres
@pytest.mark.parametrize("statement", [
    "LOCK TABLE geotoolkit_results IN ACCESS EXCLUSIVE MODE",  # what VACUUM FULL takes
    "ALTER TABLE geotoolkit_results ADD COLUMN extra integer",
])
def test_a_locked_postgres_table_is_a_store_error(schema_dsn: str, statement: str) -> None:
    import psycopg

    from geotoolkit.store.postgres import PostgresStore

    store = PostgresStore(schema_dsn, timeout_seconds=0.3)
    try:
        store.put("k", Match(lon=1.0, lat=2.0))  # creates the table
        with psycopg.connect(schema_dsn) as holder:
            holder.execute(statement)
            for call in (lambda: store.get_many(["k"]), lambda: store.put("j", Match(lon=0, lat=0))):
                with pytest.raises(StoreError, match="lock timeout"):
                    call()
            holder.rollback()
        assert store.get_many(["k"]) == {"k": Match(lon=1.0, lat=2.0)}
        settings = store._call(lambda conn: conn.execute(
            "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')").fetchone())
        assert settings == ("270ms", "300ms")
    finally:
        store.close()


_UNREACHABLE = [
    "postgresql://postgres:hunter2-pw@127.0.0.1:1/test",
    "postgresql://postgres@127.0.0.1:1/test?password=hunter2-pw",
    "host=127.0.0.1 port=1 user=postgres password=hunter2-pw",
]


@pytest.mark.parametrize("dsn", _UNREACHABLE)
def test_a_postgres_password_appears_in_no_error_repr_or_log(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    from geotoolkit.store.postgres import PostgresStore

    caplog.set_level(logging.DEBUG)
    store = open_store(dsn) if "://" in dsn else PostgresStore(dsn)
    assert isinstance(store, PostgresStore)
    texts = [repr(store), store.dsn]
    for call in (lambda: store.get_many(["k"]), lambda: store.put("k", Match(lon=1.0, lat=2.0)),
                 lambda: store.delete(["k"])):
        with pytest.raises(StoreError) as info:
            call()
        texts += [str(info.value), repr(info.value), str(info.value.__cause__)]
    store.close()
    texts.append(caplog.text)
    assert "***" in texts[0]  # hidden, not dropped
    assert all(SECRET not in text for text in texts), [t for t in texts if SECRET in t]


def test_a_bad_dsn_hides_its_password() -> None:
    from geotoolkit.store.postgres import PostgresStore

    with pytest.raises(ConfigurationError) as info:
        PostgresStore(f"host=db password={SECRET} =broken")
    assert SECRET not in str(info.value)


def test_open_store_hides_passwords_of_unknown_urls() -> None:
    for url in (f"redis://:{SECRET}@127.0.0.1/0", f"ftp://x@127.0.0.1/?password={SECRET}"):
        with pytest.raises(ConfigurationError) as info:
            open_store(url)
        assert SECRET not in str(info.value)



def _terminate(dsn: str, pid: int) -> None:
    """End a session from the server's side, as an admin, a restart or a failover does."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)


@pytest.mark.postgres
def test_a_postgres_session_ended_by_the_server_is_dialled_again(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    import uuid

    from geotoolkit.store.postgres import PostgresStore

    caplog.set_level(logging.WARNING)
    key = f"test-{uuid.uuid4().hex}:"
    store = PostgresStore(postgres_dsn, timeout_seconds=2.0)
    try:
        store.put(key + "a", Match(lon=1.0, lat=2.0))
        for call in (lambda: store.put(key + "b", Match(lon=3.0, lat=4.0)),  # a run goes on
                     lambda: store.get_many([key + "a"]),
                     lambda: store.delete([key + "none"])):
            assert store._conn is not None
            _terminate(postgres_dsn, store._conn.info.backend_pid)
            call()
        assert store.get_many([key + "a", key + "b"]) == {
            key + "a": Match(lon=1.0, lat=2.0), key + "b": Match(lon=3.0, lat=4.0)}
    finally:
        store.delete([key + "a", key + "b"])
        store.close()
    assert not [r for r in caplog.records if r.name.startswith("geotoolkit")]


@pytest.mark.postgres
def test_a_user_who_may_not_create_uses_a_cache_created_ahead_of_time(
        schema_dsn: str, dml_only: Callable[[str], AbstractContextManager[str]]) -> None:
    from geotoolkit.store.postgres import PostgresStore

    owner = PostgresStore(schema_dsn)
    assert owner.get_many(["k"]) == {}  # used once by the table's owner: created
    with dml_only(schema_dsn) as dsn:
        store = PostgresStore(dsn, timeout_seconds=2.0)
        try:
            store.put("k", Match(lon=1.0, lat=2.0))
            assert store.get_many(["k"]) == {"k": Match(lon=1.0, lat=2.0)}
            assert owner.get_many(["k"]) == {"k": Match(lon=1.0, lat=2.0)}
        finally:
            store.close()
            owner.close()


@pytest.mark.postgres
def test_a_user_who_may_not_create_is_told_who_may(
        schema_dsn: str, dml_only: Callable[[str], AbstractContextManager[str]]) -> None:
    from geotoolkit.store.postgres import PostgresStore

    with dml_only(schema_dsn) as dsn:  # no table yet
        store = PostgresStore(dsn, timeout_seconds=2.0)
        try:
            with pytest.raises(StoreError, match=r"(?s)permission denied.*as a user who may"):
                store.get_many(["k"])
        finally:
            store.close()


@pytest.mark.postgres
def test_a_postgres_that_never_answers_is_a_store_error(stalling_proxy: Any) -> None:
    """The session hangs (a stopped backend, a pooler holding the query): the server's own
    deadlines never fire, the store's does; the next call dials a new session."""
    import uuid

    from geotoolkit.store.postgres import PostgresStore

    proxy, dsn = stalling_proxy
    key = f"test-{uuid.uuid4().hex}:stalled"
    store = PostgresStore(dsn, timeout_seconds=0.3)
    try:
        store.put(key, Match(lon=1.0, lat=2.0))
        proxy.stall()
        with pytest.raises(StoreError, match="no answer within"):
            store.put(key, Match(lon=3.0, lat=4.0))
        assert store.get_many([key]) in ({key: Match(lon=1.0, lat=2.0)}, {key: Match(lon=3.0, lat=4.0)})
    finally:
        store.delete([key])
        store.close()


@pytest.mark.parametrize("url", [
    "postgresql://postgres:hunter2@pw99@127.0.0.1:1/test",
    "postgresql://postgres:hunter2/pw99@127.0.0.1:1/test",
    "postgres://:hunter2/pw99@127.0.0.1:1/test",
])
def test_a_password_that_is_not_percent_encoded_is_refused_before_any_connection(url: str) -> None:
    with pytest.raises(ConfigurationError, match="percent-encode") as info:
        open_store(url)
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert "hunter2" not in str(info.value) and "pw99" not in str(info.value)


def test_a_url_of_no_cache_with_a_password_that_is_not_percent_encoded_is_not_shown() -> None:
    with pytest.raises(ConfigurationError, match="percent-encode") as info:
        open_store("redis://:hunter2@pw99@127.0.0.1:6379/0")
    assert "hunter2" not in str(info.value) and "pw99" not in str(info.value)


def test_a_dsn_with_an_unquoted_password_with_a_space_hides_both_halves() -> None:
    from geotoolkit.store.postgres import PostgresStore

    with pytest.raises(ConfigurationError, match="quote") as info:
        PostgresStore("host=127.0.0.1 password=hunter2 pw99 dbname=test")
    shown = "".join(str(e) for e in (info.value, info.value.__cause__, info.value.__context__))
    assert "hunter2" not in shown and "pw99" not in shown


@pytest.mark.postgres
def test_a_user_who_may_create_but_does_not_own_an_unmarked_table_uses_it(schema_dsn: str) -> None:
    """A table an earlier version made (no mark), owned by someone else: a user with CREATE
    on the schema ran its CREATE ... IF NOT EXISTS before; marking it is its owner's to do."""
    import psycopg

    from geotoolkit.store.postgres import _SCHEMA, PostgresStore

    role = f"gt_user_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(schema_dsn, autocommit=True) as conn:
        conn.execute(_SCHEMA)  # as an earlier version left it: no mark
        schema = conn.execute("SELECT current_schema()").fetchone()[0]  # type: ignore[index]
        conn.execute(f"CREATE ROLE {role}")
        conn.execute(f"GRANT USAGE, CREATE ON SCHEMA {schema} TO {role}")
        conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}")
    store = PostgresStore(psycopg.conninfo.make_conninfo(schema_dsn, options=f"-c search_path={schema} "
                                                         f"-c role={role}"), timeout_seconds=2.0)
    try:
        store.put("k", Match(lon=1.0, lat=2.0))
        assert store.get_many(["k"]) == {"k": Match(lon=1.0, lat=2.0)}
    finally:
        store.close()
        with psycopg.connect(schema_dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")
