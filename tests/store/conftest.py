"""Store fixtures: each backend in turn, a key prefix of the test's own, and hostile helpers.

``make(**options)`` opens a store of the current ``backend`` (closed at teardown);
``schema_dsn`` is a PostgreSQL DSN whose tables live in a schema of the test's own
(it may lock or alter them whole without touching anyone else's);
``sqlite_locked(path)`` makes another process hold ``BEGIN EXCLUSIVE`` on a file.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from geotoolkit.store import MemoryStore, SQLiteStore

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

_HOLD = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("ROLLBACK")
"""


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Open a store of ``backend`` with the given options (closed at teardown)."""
    opened: list[Any] = []

    def open_store(**options: Any) -> Any:
        if backend == "memory":
            store: Any = MemoryStore(**options)
        elif backend == "sqlite":
            store = SQLiteStore(tmp_path / "cache.sqlite", **options)
        else:
            from geotoolkit.store.postgres import PostgresStore

            store = PostgresStore(request.getfixturevalue("postgres_dsn"), **options)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


@pytest.fixture
def prefix(backend: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A key prefix of this test's own; its rows are deleted afterwards (shared PostgreSQL)."""
    value = f"test-{uuid.uuid4().hex}:"
    yield value
    if backend == "postgres":
        import psycopg

        with psycopg.connect(request.getfixturevalue("postgres_dsn"), autocommit=True) as conn:
            conn.execute("DELETE FROM geotoolkit_results WHERE key LIKE %s", (value + "%",))


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "locked\n", proc.communicate()
        yield
    finally:
        proc.communicate("go\n", timeout=30)
        assert proc.returncode == 0


@pytest.fixture
def sqlite_locked() -> Callable[[Path], AbstractContextManager[None]]:
    """``with sqlite_locked(path):`` another process holds ``BEGIN EXCLUSIVE`` on ``path``."""
    return _locked
