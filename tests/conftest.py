"""Shared fixtures: the URLs of the Redis and PostgreSQL servers used by integration tests.

``GEOTOOLKIT_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/15``) and
``GEOTOOLKIT_TEST_POSTGRES_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``).
An unreachable server skips its tests, except in CI (``CI=true``) where it fails them.
Mark such tests ``@pytest.mark.redis`` / ``@pytest.mark.postgres``.

``dml_only(dsn)`` gives ``dsn`` as a role of its own that may read and write the tables of
the DSN's schema but create nothing, as a team's workers often are. ``stalling_proxy`` is
a TCP proxy on 127.0.0.1 to the test PostgreSQL whose ``stall()`` makes the connections
open through it hang (a hung backend, a pooler holding the query); new ones go through.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"
DEFAULT_POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def _unavailable(what: str, exc: BaseException) -> None:
    message = f"{what} unreachable: {type(exc).__name__}: {exc}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A reachable Redis URL (a scratch database: tests delete what they write)."""
    url = os.environ.get("GEOTOOLKIT_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        _unavailable("Redis", exc)
    return url


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """A reachable PostgreSQL DSN (tests only touch their own rows)."""
    dsn = os.environ.get("GEOTOOLKIT_TEST_POSTGRES_DSN", DEFAULT_POSTGRES_DSN)
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=1) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        _unavailable("PostgreSQL", exc)
    return dsn


@pytest.fixture
def schema_dsn(postgres_dsn: str) -> Iterator[str]:
    """A DSN whose tables live in a schema of this test's own, dropped afterwards (a test
    may lock them whole, or drop them, without touching another's)."""
    import psycopg

    name = f"gt_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    try:
        yield psycopg.conninfo.make_conninfo(postgres_dsn, options=f"-c search_path={name}")
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE")


@contextmanager
def _dml_only(dsn: str) -> Iterator[str]:
    import psycopg

    role = f"gt_dml_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
        assert row is not None
        schema = row[0]
        conn.execute(f"CREATE ROLE {role}")
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}")
    try:
        # The role as a worker's login would have it (no password: pg_hba need not know it).
        yield psycopg.conninfo.make_conninfo(dsn, options=f"-c search_path={schema} -c role={role}")
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


@pytest.fixture
def dml_only() -> Callable[[str], AbstractContextManager[str]]:
    """``dml_only(dsn)``: a context giving ``dsn`` as a role that may not create anything."""
    return _dml_only


class StallingProxy:
    """Forwards 127.0.0.1:``port`` to ``target``; ``stall()`` freezes the open connections."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: list[tuple[socket.socket, threading.Event]] = []
        self._closing = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                return
            server.settimeout(None)
            stalled = threading.Event()
            self._open += [(client, stalled), (server, stalled)]
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst, stalled), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, stalled: threading.Event) -> None:
        try:
            while data := src.recv(65536):
                if stalled.is_set():
                    self._closing.wait()  # never forwarded: the other side hears nothing
                    return
                dst.sendall(data)
        except OSError:
            pass

    def stall(self) -> None:
        for _, stalled in self._open:
            stalled.set()

    def close(self) -> None:
        self._closing.set()
        self._listener.close()
        for sock, _ in self._open:
            sock.close()


@pytest.fixture
def stalling_proxy(postgres_dsn: str) -> Iterator[tuple[StallingProxy, str]]:
    """A stalling proxy to the test PostgreSQL and the DSN that goes through it."""
    import psycopg

    params = psycopg.conninfo.conninfo_to_dict(postgres_dsn)
    proxy = StallingProxy((str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432)))
    try:
        yield proxy, psycopg.conninfo.make_conninfo(postgres_dsn, host="127.0.0.1", port=proxy.port)
    finally:
        proxy.close()
