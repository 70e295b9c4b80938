"""The embedded default gate: one SQLite file shared by every process on a machine."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from geotoolkit.clock import Clock, SystemClock
from geotoolkit.errors import GateError
from geotoolkit.gate.base import GateState, gcra_acquire, gcra_pause

__all__ = ["SQLiteGate", "default_gate_path"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS gate (
    key TEXT PRIMARY KEY,
    tat REAL NOT NULL DEFAULT 0,
    pause_until REAL NOT NULL DEFAULT 0
)
"""


def default_gate_path() -> Path:
    """``gate.sqlite`` in the user's cache directory (created on first use)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("geotoolkit")) / "gate.sqlite"


class SQLiteGate:
    """Gate state in a SQLite file (WAL mode, ``BEGIN IMMEDIATE`` transactions).

    Every process and notebook kernel on the machine that opens the same file
    shares one pace. Times are on the host clock (the file is single-host; it
    must live on a local filesystem, not NFS).
    """

    backend = "sqlite"
    blocking = True

    def __init__(self, path: str | Path | None = None, *, clock: Clock | None = None,
                 timeout_seconds: float = 30.0) -> None:
        self.path = Path(path) if path is not None else default_gate_path()
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=timeout_seconds,
                                       isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise GateError(f"cannot open the SQLite gate at {self.path}: {exc}",
                            backend="sqlite") from exc

    def _transaction(self, body: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    result = body(self._db)
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                raise GateError(f"SQLite gate failed: {exc}", backend="sqlite") from exc

    @staticmethod
    def _read(db: sqlite3.Connection, key: str) -> tuple[float, float]:
        row = db.execute("SELECT tat, pause_until FROM gate WHERE key = ?", (key,)).fetchone()
        return (float(row[0]), float(row[1])) if row else (0.0, 0.0)

    @staticmethod
    def _write(db: sqlite3.Connection, key: str, tat: float, until: float) -> None:
        db.execute("INSERT INTO gate(key, tat, pause_until) VALUES (?, ?, ?) "
                   "ON CONFLICT(key) DO UPDATE SET tat = excluded.tat, "
                   "pause_until = excluded.pause_until", (key, tat, until))

    def acquire(self, key: str, interval: float, horizon: float = 60.0) -> float:
        def body(db: sqlite3.Connection) -> float:
            now = self._clock.now()
            tat, until = self._read(db, key)
            wait, new_tat = gcra_acquire(now, tat, until, interval, horizon)
            if new_tat != tat:
                self._write(db, key, new_tat, until)
            return wait

        return self._transaction(body)

    def pause(self, key: str, seconds: float) -> float:
        def body(db: sqlite3.Connection) -> float:
            now = self._clock.now()
            tat, until = gcra_pause(now, *self._read(db, key), seconds)
            self._write(db, key, tat, until)
            return until - now

        return self._transaction(body)

    def state(self, key: str) -> GateState:
        with self._lock:
            try:
                tat, until = self._read(self._db, key)
            except sqlite3.Error as exc:
                raise GateError(f"SQLite gate failed: {exc}", backend="sqlite") from exc
            return GateState(now=self._clock.now(), tat=tat, pause_until=until)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"SQLiteGate({str(self.path)!r})"
