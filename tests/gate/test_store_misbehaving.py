"""The gate's store misconfigured or misbehaving, through the real front ends.

``df.geocode.run`` against the provider simulator on 127.0.0.1, the gate given by URL:
what a user types by mistake is refused before anything is sent, with an error that
names the gate and shows no secret.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytest

from geotoolkit.errors import ConfigurationError
from geotoolkit.providers import OpenCage
from geotoolkit.testing import ProviderSimulator

SECRET = "sk-gate-misbehaving-0123456789"


def _run(sim: ProviderSimulator, gate: str) -> pd.DataFrame:
    frame = pd.DataFrame({"address": ["Städtle 1, Vaduz", "Nowhere Street 999"]})
    result = frame.geocode.run("address", provider=OpenCage(base_url=sim.url, api_key=SECRET),
                               rate=50, gate=gate, cache=False, progress=False)
    assert isinstance(result, pd.DataFrame)
    return result


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite://:memory:"])
def test_a_sqlite_gate_in_memory_is_refused_naming_memory_url(
        url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``sqlite:///:memory:`` (SQLAlchemy's in-memory database) opened two private
    databases, one per connection: the run failed with "no such table: gate_values" and
    left an empty file named ``:memory:`` in the working directory (found by running with
    it). It is refused before anything is sent, pointing at ``memory://``."""
    monkeypatch.chdir(tmp_path)
    with ProviderSimulator() as sim:
        with pytest.raises(ConfigurationError, match="memory://"):
            _run(sim, url)
        assert sim.count() == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("path", ["/gate", "/O", "/1/2", "/0x1"])
def test_a_redis_url_whose_path_is_no_db_index_is_refused(path: str, redis_url: str) -> None:
    """redis-py reads the path as the db index with ``int()`` and ignores one it cannot
    read: ``redis://host:6379/gate`` (a namespace, say) or ``/O`` (a letter) silently used
    db 0, and ``/1/2`` db 12 (found by running with them). Refused, naming the path and not
    the password, before anything is sent."""
    from urllib.parse import urlsplit

    netloc = urlsplit(redis_url).netloc.rsplit("@", 1)[-1]
    with ProviderSimulator() as sim:
        with pytest.raises(ConfigurationError, match="db index") as info:
            _run(sim, f"redis://:{SECRET}@{netloc}{path}")
        assert sim.count() == 0
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_sqlite_gate_file_deleted_or_replaced_mid_run_is_followed(how: str, tmp_path: Path) -> None:
    """A gate file deleted mid-run (a cache directory cleaned: the default gate lives in
    one) or replaced: the running worker kept pacing on the file it had open, gone from
    the directory, while every worker started afterwards paced on a new file, so the
    fleet paced as two, silently (found by deleting the file under a run). A worker
    follows the path now: its next call opens the file there, as a restarted Redis is
    used empty."""
    from geotoolkit.clock import FakeClock
    from geotoolkit.gate import SQLiteGate, gate_key

    clock = FakeClock()
    path = tmp_path / "gate.sqlite"
    key = gate_key("api.example.com", SECRET)
    running = SQLiteGate(path, clock=clock)
    try:
        assert running.acquire(key, 10.0) == 0.0
        clock.advance(20.0)
        for name in ("gate.sqlite", "gate.sqlite-wal", "gate.sqlite-shm"):
            (tmp_path / name).unlink(missing_ok=True)
        if how == "replaced":
            other = tmp_path / "other.sqlite"
            SQLiteGate(other, clock=clock).close()
            other.rename(path)
        late = SQLiteGate(path, clock=clock)
        try:
            assert late.acquire(key, 10.0) == 0.0
            assert running.acquire(key, 10.0) == 10.0  # after the late worker's slot
            assert late.acquire(key, 10.0) == 20.0
        finally:
            late.close()
    finally:
        running.close()


def test_a_failed_postgres_batch_logs_nothing_of_the_drivers_own(
        postgres_dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    """A batch of primitives refused by the server (here in a read-only session) printed
    psycopg's "error ignored terminating <psycopg.Pipeline ...>: pipeline aborted" on
    stderr next to the gate's own error, in most failed calls (found in the command
    line's output; it depends on when the server's answer arrives, hence several calls).
    The gate's error says it all; the driver says nothing."""
    from urllib.parse import urlencode

    from geotoolkit.errors import GateError
    from geotoolkit.gate import gate_key
    from geotoolkit.gate.postgres import PostgresStore
    from geotoolkit.gate.primitives import ReadState, ReadValues, Reserve, SetValue

    if "://" not in postgres_dsn:
        pytest.skip("a key=value DSN")
    setting = urlencode({"options": "-cdefault_transaction_read_only=on"})
    store = PostgresStore(f"{postgres_dsn}{'&' if '?' in postgres_dsn else '?'}{setting}")
    key = gate_key("api.example.com", SECRET)
    batch = [SetValue(key, "lease", "me", 5.0), ReadState(key), ReadValues(key, ""),
             Reserve(key, 0.1)]
    try:
        with caplog.at_level(logging.WARNING):
            for _ in range(20):
                with pytest.raises(GateError, match="read-only"):
                    store.run(batch)
    finally:
        store.close()
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")] == []


def test_a_postgres_error_shows_no_sql_of_the_gates_own(postgres_dsn: str) -> None:
    """A gate whose ``search_path`` names no schema failed with PostgreSQL's position
    lines after the reason ("LINE 2:     CREATE UNLOGGED TABLE IF NOT EXISTS ... ^"),
    which the command line and the warning printed (found by running with it). The
    reason stands alone now, as the CONTEXT lines already were cut."""
    from urllib.parse import urlencode

    from geotoolkit.errors import GateError
    from geotoolkit.gate import gate_key
    from geotoolkit.gate.postgres import PostgresGate

    if "://" not in postgres_dsn:
        pytest.skip("a key=value DSN")
    setting = urlencode({"options": "-csearch_path=geotoolkit_no_such_schema"})
    gate = PostgresGate(f"{postgres_dsn}{'&' if '?' in postgres_dsn else '?'}{setting}")
    try:
        with pytest.raises(GateError, match="no schema has been selected") as info:
            gate.reserve(gate_key("api.example.com", SECRET), 0.1)
    finally:
        gate.close()
    assert "LINE" not in str(info.value) and "CREATE" not in str(info.value)


def test_a_sqlite_gate_call_behind_another_of_its_process_keeps_its_deadline(tmp_path: Path) -> None:
    """A gate call waits for the file's lock at most ``timeout_seconds``, but it first
    waited, without a deadline, for the calls of its own process ahead of it (each one up
    to ``timeout_seconds`` on a file held by another process): with the file held and 8
    rows in flight, a run stopped after 5 deadlines, 2.5 minutes at the default 30 s
    (found by holding a write transaction on the gate file under a run). Here another
    call holds the process's side: the call gives up within its own deadline (a hang
    would fail the join below), with a GateError saying the gate is locked."""
    import threading

    from geotoolkit.errors import GateError
    from geotoolkit.gate import SQLiteGate, gate_key

    gate = SQLiteGate(tmp_path / "gate.sqlite", timeout_seconds=0.05)
    key = gate_key("api.example.com", SECRET)
    outcome: list[BaseException | float] = []

    def call() -> None:
        try:
            outcome.append(gate.acquire(key, 1.0))
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)

    try:
        with gate.store._lock:  # a call of this process, stuck on the file
            worker = threading.Thread(target=call, daemon=True)
            worker.start()
            worker.join(30.0)
            assert not worker.is_alive(), "the call waited past its deadline"
    finally:
        gate.close()
    assert len(outcome) == 1 and isinstance(outcome[0], GateError)
    assert "locked" in str(outcome[0]) and outcome[0].backend == "sqlite"


@pytest.mark.parametrize("url", ["sqlite:///{path}\n", " sqlite:///{path} ", "sqlite:///~/gate.sqlite"])
def test_a_sqlite_gate_url_is_read_as_the_file_every_worker_means(
        url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gate URL with a newline or spaces around it (an environment variable filled from
    a file) named another file than the same URL without them (``gate.sqlite\\n``), and
    ``~/gate.sqlite`` a directory named ``~`` in the working directory: workers configured
    alike paced as separate fleets, silently (found by running with them). The URL is
    read without the whitespace around it, and ``~`` is the home directory."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    path = home / "gate.sqlite"
    with ProviderSimulator() as sim:
        result = _run(sim, url.format(path=path))
    assert list(result["geocode_status"]) == ["matched", "no_match"]
    assert path.exists()
    assert sorted(p.name for p in home.iterdir() if not p.name.startswith("gate.sqlite-")) == [
        "gate.sqlite"]
    assert list(work.iterdir()) == []


def test_a_redis_gate_url_with_whitespace_around_it_is_read_without_it(redis_url: str) -> None:
    """`` redis://...`` (an environment variable filled from a file) passed the URL
    checks, which strip it, then redis-py refused it: "Redis URL must specify one of the
    following schemes" (found by running with it). It is read without the whitespace."""
    from geotoolkit.gate import gate_key, open_gate

    gate = open_gate(f" {redis_url}\n", fallback=False)
    key = gate_key(f"gate-misbehaving-{id(gate)}.example", SECRET)
    try:
        assert gate.acquire(key, 1.0) == 0.0  # a key of its own: no wait
    finally:
        for name in list(gate.store._client.scan_iter(match=key + "*")):  # type: ignore[attr-defined]
            gate.store._client.delete(name)  # type: ignore[attr-defined]
        gate.close()


def test_a_postgres_gate_and_cache_url_with_whitespace_around_it_is_read_without_it(
        postgres_dsn: str) -> None:
    """As for Redis, but the URL went whole to libpq, which refused it: "bad PostgreSQL
    gate DSN ...: missing "=" after ..." (found in the review: the audit stripped the URL in
    the Redis and SQLite adapters only). ``open_gate`` and ``open_store`` strip it once."""
    from geotoolkit.gate import gate_key, open_gate
    from geotoolkit.store import open_store

    if "://" not in postgres_dsn:
        pytest.skip("a key=value DSN")
    gate = open_gate(f" {postgres_dsn}\n", fallback=False)
    try:
        assert gate.state(gate_key(f"gate-misbehaving-{id(gate)}.example", SECRET)).pause_remaining == 0
    finally:
        gate.close()
    store = open_store(f" {postgres_dsn}\n")
    assert store is not None
    try:
        assert store.get_many([f"nominatim|whitespace {id(store)}"]) == {}
    finally:
        store.close()  # type: ignore[attr-defined]


def test_a_postgres_worker_with_a_schema_of_its_own_uses_the_gate_on_its_search_path(
        postgres_dsn: str) -> None:
    """The gate initialised in the team's schema (``geotoolkit gate init``), a worker's
    role with a schema of its own first on its ``search_path`` (``"$user", public``, with
    a personal schema: a common setup): the gate looked for its tables in the first
    schema only, did not find them there, and created a second set in the worker's own
    schema, where that worker then paced alone, silently (found with two roles on the
    shared server). The tables the ``search_path`` finds are used."""
    import uuid

    import psycopg

    from geotoolkit.gate import gate_key
    from geotoolkit.gate.postgres import PostgresGate, init_schema

    tag = uuid.uuid4().hex[:10]
    team, role = f"gt_team_{tag}", f"gt_worker_{tag}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {team}")
        conn.execute(f"CREATE ROLE {role}")
        conn.execute(f"CREATE SCHEMA AUTHORIZATION {role}")  # the worker's own, named after it
    owner = psycopg.conninfo.make_conninfo(postgres_dsn, options=f"-c search_path={team}")
    try:
        init_schema(owner)
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"GRANT USAGE ON SCHEMA {team} TO {role}")
            conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {team} "
                         f"TO {role}")
        worker = psycopg.conninfo.make_conninfo(
            postgres_dsn, options=f"-c role={role} -c search_path={role},{team}")
        key = gate_key(f"{tag}.example", SECRET)
        first, second = PostgresGate(owner), PostgresGate(worker)
        try:
            assert first.acquire(key, 600.0) == 0.0
            assert second.acquire(key, 600.0) > 60.0  # behind the first worker's slot
        finally:
            first.close()
            second.close()
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            made = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s",
                                (role,)).fetchone()
        assert made == (0,)
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {team} CASCADE")
            conn.execute(f"DROP SCHEMA IF EXISTS {role} CASCADE")
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def test_a_sqlite_gate_with_a_huge_deadline_still_answers(tmp_path: Path) -> None:
    """A deadline is any finite number of seconds; a lock's wait takes at most
    ``threading.TIMEOUT_MAX`` (the deadline of a call behind this process's others must
    not overflow it)."""
    from geotoolkit.gate import SQLiteGate, gate_key

    gate = SQLiteGate(tmp_path / "gate.sqlite", timeout_seconds=1e12)
    try:
        assert gate.acquire(gate_key("api.example.com", SECRET), 1.0) == 0.0
    finally:
        gate.close()
