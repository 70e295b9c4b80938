"""One contract over every result store (memory, SQLite, PostgreSQL), plus their edges."""

from __future__ import annotations

import struct
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from geotoolkit import ConfigurationError, Failure, FakeClock, GeotoolkitError, Match, NoMatch
from geotoolkit.store import (
    DEFAULT_NO_MATCH_TTL_SECONDS,
    MemoryStore,
    SQLiteStore,
    StoreError,
    default_store_path,
    open_store,
)


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def test_matches_round_trip_exactly(make: Any, prefix: str) -> None:
    store = make()
    match = Match(lon=9.521950000000001, lat=-47.13974 + 1e-13, label="Städtle 38, Vaduz ✓",
                  provider="nominatim", raw={"big": "payload"}, attempts=3)
    store.put(prefix + "a", match)
    got = store.get_many([prefix + "a"])[prefix + "a"]
    assert isinstance(got, Match)
    assert (_bits(got.lon), _bits(got.lat)) == (_bits(match.lon), _bits(match.lat))
    assert (got.label, got.provider, got.attempts) == (match.label, "nominatim", 3)
    assert got.raw == {}  # provider payloads are not cached
    store.close()


def test_no_matches_are_kept_and_failures_never(make: Any, prefix: str) -> None:
    store = make()
    store.put(prefix + "n", NoMatch(reason="nothing here", provider="p", attempts=2))
    store.put(prefix + "f", Failure(reason="gave up", error="RateLimitError", attempts=6))
    found = store.get_many([prefix + "n", prefix + "f", prefix + "missing"])
    assert set(found) == {prefix + "n"}
    assert found[prefix + "n"] == NoMatch(reason="nothing here", provider="p", attempts=2)
    store.close()


def test_put_overwrites_and_get_many_handles_duplicates(make: Any, prefix: str) -> None:
    store = make()
    store.put(prefix + "k", NoMatch(provider="p"))
    store.put(prefix + "k", Match(lon=1.0, lat=2.0, provider="p"))
    found = store.get_many([prefix + "k", prefix + "k"])
    assert list(found) == [prefix + "k"] and isinstance(found[prefix + "k"], Match)
    assert store.get_many([]) == {}
    store.close()


def test_many_keys_across_query_chunks(backend: str, make: Any, prefix: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import geotoolkit.store.sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module, "_CHUNK", 7)
    if backend == "postgres":
        import geotoolkit.store.postgres as pg_module

        monkeypatch.setattr(pg_module, "_CHUNK", 7)
    store = make()
    keys = [f"{prefix}{i}" for i in range(60)]
    store.put_many((k, Match(lon=float(i), lat=1.0)) for i, k in enumerate(keys) if i % 3)
    found = store.get_many([*keys, prefix + "absent"])
    assert set(found) == {k for i, k in enumerate(keys) if i % 3}
    assert all(found[k].lon == float(i) for i, k in enumerate(keys) if i % 3)  # type: ignore[union-attr]
    store.delete(keys[:30])
    assert set(store.get_many(keys)) == {k for i, k in enumerate(keys) if i % 3 and i >= 30}
    store.close()


def test_no_matches_expire_matches_do_not(make: Any, prefix: str) -> None:
    clock = FakeClock(start=1_000.0)
    store = make(clock=clock, no_match_ttl_seconds=100.0)
    store.put(prefix + "n", NoMatch())
    store.put(prefix + "m", Match(lon=1.0, lat=2.0))
    clock.advance(99.0)
    assert set(store.get_many([prefix + "n", prefix + "m"])) == {prefix + "n", prefix + "m"}
    clock.advance(2.0)
    assert set(store.get_many([prefix + "n", prefix + "m"])) == {prefix + "m"}
    clock.advance(10 * 365 * 86_400.0)
    assert set(store.get_many([prefix + "m"])) == {prefix + "m"}
    store.close()


def test_ttl_none_keeps_no_matches_and_zero_drops_them(tmp_path: Path) -> None:
    clock = FakeClock()
    keep = MemoryStore(clock=clock, no_match_ttl_seconds=None)
    drop = SQLiteStore(tmp_path / "c.sqlite", clock=clock, no_match_ttl_seconds=0)
    for store in (keep, drop):
        store.put("k", NoMatch())
    clock.advance(10 * DEFAULT_NO_MATCH_TTL_SECONDS)
    assert list(keep.get_many(["k"])) == ["k"]
    assert drop.get_many(["k"]) == {}


@pytest.mark.parametrize("ttl", [-1.0, float("nan"), float("inf"), True])
def test_bad_ttl_is_a_configuration_error(ttl: Any) -> None:
    with pytest.raises(ConfigurationError, match="no_match_ttl_seconds"):
        MemoryStore(no_match_ttl_seconds=ttl)


def test_sqlite_survives_reopening_and_concurrent_threads(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "cache.sqlite"
    store = SQLiteStore(path)
    assert store.blocking is True

    def writer(t: int) -> None:
        for i in range(40):
            store.put(f"{t}:{i}", Match(lon=t, lat=i))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()  # no explicit flush: every put was committed
    again = SQLiteStore(path)
    assert len(again.get_many([f"{t}:{i}" for t in range(6) for i in range(40)])) == 240
    again.close()


def test_sqlite_errors_are_store_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="cannot open") as info:
        SQLiteStore(blocker / "cache.sqlite")
    assert info.value.backend == "sqlite" and isinstance(info.value, GeotoolkitError)
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a SQLite database" * 100)
    with pytest.raises(StoreError, match=r"garbage\.sqlite"):
        SQLiteStore(garbage)


def test_a_truncated_sqlite_cache_says_it_is_damaged_and_what_to_do(tmp_path: Path) -> None:
    """A cache file cut short (a full disk, a copy interrupted): a rerun stopped with
    'StoreError: SQLite cache ... failed: database disk image is malformed' and no word of
    what to do; now it says the file is damaged and how to go on."""
    import os

    path = tmp_path / "cache.sqlite"
    store = SQLiteStore(path)
    store.put_many([(f"k{i}", Match(lon=9.5, lat=47.1, label="x" * 200, provider="p"))
                    for i in range(2000)])
    store.close()
    os.truncate(path, path.stat().st_size // 2)
    with pytest.raises(StoreError, match=r"damaged.*move .*cache\.sqlite aside") as info:
        SQLiteStore(path).get_many([f"k{i}" for i in range(2000)])
    assert "malformed" in str(info.value)


def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "new.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreError, match="newer"):
        SQLiteStore(path)


@pytest.mark.postgres
def test_postgres_errors_hide_the_password(postgres_dsn: str) -> None:
    from geotoolkit.store.postgres import PostgresStore

    store = PostgresStore("postgresql://someone:hunter2-secret@127.0.0.1:1/nothing",
                          timeout_seconds=1)
    with pytest.raises(StoreError) as info:
        store.get_many(["k"])
    assert "hunter2-secret" not in str(info.value) and "***" in str(info.value)
    assert "hunter2-secret" not in repr(store)
    with pytest.raises(ConfigurationError):
        PostgresStore("host=db port=5432 =broken")


def test_a_sqlite_cache_path_refused_for_good_is_not_retriable(tmp_path: Path) -> None:
    """A cache path that is a directory, under a file, a damaged file or a newer schema: no
    retry heals it, yet StoreError was always retriable, so the orchestrator helpers retried
    such a run for ever. Now the error says it is permanent."""
    from geotoolkit.frontends.orchestrators import not_retried, retry_delay

    directory = tmp_path / "a-directory"
    directory.mkdir()
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a SQLite database" * 100)
    import sqlite3

    newer = tmp_path / "new.sqlite"
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version = 99")
    for path in (directory, blocker / "cache.sqlite", garbage, newer):
        with pytest.raises(StoreError) as info:
            SQLiteStore(path)
        assert info.value.permanent and not info.value.retriable, path
        assert retry_delay(info.value) is None
        assert "the cache refused its setting" in (not_retried(info.value) or "")


@pytest.mark.postgres
def test_a_postgres_cache_setting_refused_is_not_retriable_an_outage_is(postgres_dsn: str) -> None:
    """A database or a role the server does not have is refused for good (it was retriable,
    retried for ever by the orchestrator helpers); a server not answering stays retriable."""
    from urllib.parse import urlsplit, urlunsplit

    from geotoolkit.store.postgres import PostgresStore

    if "://" not in postgres_dsn:
        pytest.skip("a key=value DSN")
    parts = urlsplit(postgres_dsn)
    host = parts.netloc.rsplit("@", 1)[-1]
    refused = [urlunsplit(parts._replace(path="/geotoolkit_no_such_database")),
               urlunsplit(parts._replace(netloc=f"geotoolkit_nobody:pw@{host}"))]
    for dsn in refused:
        store = PostgresStore(dsn, timeout_seconds=2)
        try:
            with pytest.raises(StoreError, match=r"does not exist|authentication failed") as info:
                store.get_many(["k"])
        finally:
            store.close()
        assert info.value.permanent and not info.value.retriable, str(info.value)
    down = PostgresStore("postgresql://someone@127.0.0.1:1/nothing", timeout_seconds=1)
    with pytest.raises(StoreError, match="refused") as info:
        down.get_many(["k"])
    assert info.value.retriable and not info.value.permanent


@pytest.mark.postgres
def test_postgres_is_shared_between_connections(postgres_dsn: str) -> None:
    from geotoolkit.store.postgres import PostgresStore

    key = f"test-{uuid.uuid4().hex}:shared"
    one, two = PostgresStore(postgres_dsn), PostgresStore(postgres_dsn)
    try:
        one.put(key, Match(lon=3.5, lat=4.5))
        assert two.get_many([key])[key] == Match(lon=3.5, lat=4.5)
    finally:
        one.delete([key])
        one.close()
        two.close()


def test_open_store_by_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    default = open_store(None)
    assert isinstance(default, SQLiteStore) and default.path == default_store_path()
    assert str(default.path).startswith(str(tmp_path / "xdg"))
    default.close()
    assert open_store(False) is None and open_store("none") is None and open_store("NONE") is None
    assert isinstance(open_store("memory://"), MemoryStore)
    by_url = open_store(f"sqlite:///{tmp_path}/by-url.sqlite")
    assert isinstance(by_url, SQLiteStore) and by_url.path == tmp_path / "by-url.sqlite"
    by_path = open_store(tmp_path / "by-path.sqlite")
    assert isinstance(by_path, SQLiteStore) and by_path.path == tmp_path / "by-path.sqlite"
    mine = MemoryStore()
    assert open_store(mine) is mine


@pytest.mark.parametrize("bad", ["redis://:pw-secret@127.0.0.1/0", 42, ["sqlite:///x"]])
def test_open_store_refuses_unknown_caches(bad: object) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_store(bad)
    assert "pw-secret" not in str(info.value)


def test_a_postgres_cache_error_shows_no_sql_of_the_caches_own(postgres_dsn: str) -> None:
    """As the gate's (tests/gate/test_store_misbehaving.py): a cache whose ``search_path``
    names no schema failed with PostgreSQL's position lines after the reason ("LINE 1:
    CREATE TABLE IF NOT EXISTS ... ^"), which the command line printed. The two now share
    one ``pgschema.error_text``."""
    from urllib.parse import urlencode

    from geotoolkit.store.postgres import PostgresStore

    if "://" not in postgres_dsn:
        pytest.skip("a key=value DSN")
    setting = urlencode({"options": "-csearch_path=geotoolkit_no_such_schema"})
    store = PostgresStore(f"{postgres_dsn}{'&' if '?' in postgres_dsn else '?'}{setting}")
    try:
        with pytest.raises(StoreError, match="no schema has been selected") as info:
            store.get_many(["nominatim|Städtle 38, Vaduz"])
    finally:
        store.close()
    assert "LINE" not in str(info.value) and "CREATE" not in str(info.value)
