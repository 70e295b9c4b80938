"""The embedded default gate: one SQLite file shared by every process on a machine.

``SQLiteStore`` runs the primitives (``geotoolkit.gate.primitives``) in the file,
a batch in one ``BEGIN IMMEDIATE`` transaction (reads alone on a second
connection, never behind a writer), on the host clock. Tables: ``gate`` (key,
tat, pause_until, epoch, cause), ``gate_counters`` (ephemeral counters),
``gate_usage`` (durable counters: a counter's name is its ``period`` column,
as the cap counters of earlier versions were) and ``gate_values``.

A file from an earlier version is upgraded in place (columns added; its cap
counts go on counting); tables only earlier versions use (``gate_workers``, the
``fleet`` column) are left alone, so an older process on the same file keeps
working, sharing the pace and the cap counts.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from geotoolkit.clock import Clock, SystemClock
from geotoolkit.errors import ConfigurationError, GateError
from geotoolkit.files import private_file
from geotoolkit.gate.base import Aimd, check_timeout
from geotoolkit.gate.fleet import period_of
from geotoolkit.gate.primitives import (
    AddCounters,
    Op,
    Pause,
    Paused,
    Primitives,
    ReadCounters,
    ReadState,
    ReadValues,
    Reserve,
    SetValue,
    Slot,
    StoreState,
    pause_step,
    reserve_step,
)
from geotoolkit.gate.strategy import FleetGate

__all__ = ["SQLiteGate", "SQLiteStore", "default_gate_path"]

T = TypeVar("T")

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS gate (
        key TEXT PRIMARY KEY,
        tat REAL NOT NULL DEFAULT 0,
        pause_until REAL NOT NULL DEFAULT 0,
        epoch INTEGER NOT NULL DEFAULT 0,
        cause TEXT NOT NULL DEFAULT ''
    )""",
    """CREATE TABLE IF NOT EXISTS gate_counters (
        key TEXT NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL, expires_at REAL NOT NULL,
        PRIMARY KEY (key, name)
    )""",
    """CREATE TABLE IF NOT EXISTS gate_usage (
        key TEXT NOT NULL, period TEXT NOT NULL, used INTEGER NOT NULL, expires_at REAL,
        PRIMARY KEY (key, period)
    )""",
    """CREATE TABLE IF NOT EXISTS gate_values (
        key TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL, expires_at REAL NOT NULL,
        PRIMARY KEY (key, name)
    )""",
]

#: Columns added since the first release: a gate file from then is upgraded in place.
_COLUMNS = [("gate", "epoch", "INTEGER NOT NULL DEFAULT 0"),
            ("gate", "cause", "TEXT NOT NULL DEFAULT ''"),
            ("gate_usage", "expires_at", "REAL")]

#: Counter tables: durable -> (table, name column, value column).
_COUNTERS = {False: ("gate_counters", "name", "value"), True: ("gate_usage", "period", "used")}

#: Cap counters of earlier versions (no expiry) are kept this long after their period.
_KEEP_LEGACY_SECONDS = 62 * 86_400.0

#: How often (seconds, per store instance) expired rows are swept.
_SWEEP_EVERY = 600.0


def default_gate_path() -> Path:
    """``gate.sqlite`` in the user's cache directory (created on first use)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("geotoolkit")) / "gate.sqlite"


class SQLiteStore(Primitives):
    """The primitives in a SQLite file (WAL mode); see ``SQLiteGate`` for its behaviour."""

    backend = "sqlite"
    blocking = True

    def __init__(self, path: str | Path | None = None, *, clock: Clock | None = None,
                 timeout_seconds: float = 30.0) -> None:
        if path is not None and str(path).strip() in (":memory:", ""):
            # SQLite gives each connection its own database there: the writer's and the
            # reader's would differ (and ":memory:" became a file of that name, made 0600).
            raise ConfigurationError(f"a SQLite gate needs a file ({str(path)!r} is a database "
                                     "private to one connection): give a file path, or memory:// "
                                     "for a gate of this process alone")
        # "~/x" is in the home directory, not in a directory "~" made in the working one.
        self.path = Path(path).expanduser() if path is not None else default_gate_path()
        self.clock: Clock = clock or SystemClock()
        self._timeout = timeout_seconds = check_timeout(timeout_seconds)
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._last_sweep = -_SWEEP_EVERY
        with self._lock, self._read_lock:
            self._open()

    def _open(self) -> None:
        """Open (or create) the file at ``path``: the writer, the schema, the reader (the
        caller holds both locks)."""
        try:
            private_file(self.path)
            self._db = sqlite3.connect(self.path, timeout=0.0, isolation_level=None,
                                       check_same_thread=False)
            self._identity = _identity(self.path)
            self._retry(lambda: self._db.execute("PRAGMA journal_mode=WAL"))
            self._retry(lambda: self._db.execute("PRAGMA synchronous=NORMAL"))
            self._immediate(self._create_schema)
            self._reader = sqlite3.connect(self.path, timeout=self._timeout,
                                           isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise GateError(f"cannot open the SQLite gate at {self.path}: {exc}",
                            backend="sqlite") from exc

    def _follow(self) -> None:
        """Reopen the file at ``path`` when the one open is no longer there (deleted, say by
        a cache directory's cleaning, or replaced): workers started since pace on the file
        at the path, and this one must pace with them. Its state is lost, as a restarted
        Redis's: the next reservation starts afresh."""
        if _identity(self.path) == self._identity:
            return
        with self._lock, self._read_lock:
            if _identity(self.path) == self._identity:  # another thread reopened it
                return
            self._db.close()
            self._reader.close()
            self._open()

    @staticmethod
    def _create_schema(db: sqlite3.Connection) -> None:
        for statement in _SCHEMA:
            db.execute(statement)
        for table, column, definition in _COLUMNS:
            if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")

    def _retry(self, step: Callable[[], T], deadline: float | None = None) -> T:
        """Run ``step``, retrying while another connection holds the lock, until ``deadline``
        (``time.monotonic()``; default: ``timeout_seconds`` from now)."""
        deadline = time.monotonic() + self._timeout if deadline is None else deadline
        delay = 0.0002
        while True:
            try:
                return step()
            except sqlite3.OperationalError as exc:
                # The primary code: extended ones (SQLITE_BUSY_RECOVERY while another
                # connection recovers the WAL, ...) are busy too.
                code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
                busy = code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
                if not busy or time.monotonic() > deadline:
                    raise
            time.sleep(delay)  # a lock wait on the host, not a pacing wait
            delay = min(delay * 1.5, 0.002)

    def _transaction(self, body: Callable[[sqlite3.Connection], T]) -> T:
        # The deadline covers the wait behind this process's other calls too: each of them
        # may wait up to the deadline on a file another process holds.
        deadline = time.monotonic() + self._timeout
        if not self._lock.acquire(timeout=min(self._timeout, threading.TIMEOUT_MAX)):
            raise GateError(f"SQLite gate {self.path} failed: database is locked (this process's "
                            f"other calls held it for {self._timeout:g} s)", backend="sqlite")
        try:
            return self._immediate(body, deadline)
        except sqlite3.Error as exc:
            raise GateError(f"SQLite gate {self.path} failed: {exc}", backend="sqlite") from exc
        finally:
            self._lock.release()

    def _immediate(self, body: Callable[[sqlite3.Connection], T],
                   deadline: float | None = None) -> T:
        """``body`` in one ``BEGIN IMMEDIATE`` transaction (the caller holds the lock)."""
        self._retry(lambda: self._db.execute("BEGIN IMMEDIATE"), deadline)
        try:
            result = body(self._db)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._retry(lambda: self._db.execute("COMMIT"))
        return result

    def _read_only(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Reads in one snapshot, on the second connection (WAL: never behind a writer)."""
        with self._read_lock:
            try:
                self._reader.execute("BEGIN")
                try:
                    return body(self._reader)
                finally:
                    self._reader.execute("COMMIT")
            except sqlite3.Error as exc:
                raise GateError(f"SQLite gate {self.path} failed: {exc}", backend="sqlite") from exc

    # -- the primitives --------------------------------------------------------------------------

    def run(self, ops: Sequence[Op]) -> list[Any]:
        if not ops:
            return []
        self._follow()
        if not any(op.writes for op in ops):
            return self._read_only(lambda db: self._apply_all(db, ops))
        return self._transaction(lambda db: self._apply_all(db, ops, sweep=True))

    def _apply_all(self, db: sqlite3.Connection, ops: Sequence[Op], sweep: bool = False) -> list[Any]:
        now = self.clock.now()  # once the file is ours
        if sweep and time.monotonic() - self._last_sweep >= _SWEEP_EVERY:
            self._last_sweep = time.monotonic()
            self._sweep(db, now)
        return [self._apply(db, op, now) for op in ops]

    def _apply(self, db: sqlite3.Connection, op: Op, now: float) -> Any:
        if isinstance(op, Reserve | Pause | ReadState):
            return self._pacing(db, op, now)
        if isinstance(op, AddCounters):
            return self._add(db, op, now)
        if isinstance(op, ReadCounters):
            return self._counters(db, op.key, op.names, op.durable, now)
        if isinstance(op, SetValue):
            return self._set_value(db, op, now)
        if isinstance(op, ReadValues):
            rows = db.execute("SELECT name, value FROM gate_values WHERE key = ? AND expires_at > ?",
                              (op.key, now))
            return {str(n): str(v) for n, v in rows if str(n).startswith(op.prefix)}
        db.execute("DELETE FROM gate_values WHERE key = ? AND name = ? AND expires_at > ? "
                   "AND (? IS NULL OR value = ?)", (op.key, op.name, now, op.only_if, op.only_if))
        return _changed(db)

    @staticmethod
    def _pacing(db: sqlite3.Connection, op: Reserve | Pause | ReadState, now: float) -> Any:
        row = db.execute("SELECT tat, pause_until, epoch, cause FROM gate WHERE key = ?",
                         (op.key,)).fetchone()
        st = StoreState(now) if row is None else StoreState(
            now, float(row[0]), float(row[1]), int(row[2]), str(row[3]))
        if isinstance(op, ReadState):
            return st
        if isinstance(op, Reserve):
            wait, tat, reserved = reserve_step(now, st.tat, st.pause_until, op)
            if reserved:
                _write(db, op.key, StoreState(now, tat, st.pause_until, st.epoch, st.cause))
            return Slot(wait, now, reserved, st.epoch)
        tat, until, epoch, cause = pause_step(now, st.tat, st.pause_until, st.epoch, st.cause, op)
        _write(db, op.key, StoreState(now, tat, until, epoch, cause))
        return Paused(now, until, st.pause_until, epoch)

    def _add(self, db: sqlite3.Connection, op: AddCounters, now: float) -> dict[str, int]:
        table, name, value = _COUNTERS[op.durable]
        db.executemany(
            f"INSERT INTO {table}(key, {name}, {value}, expires_at) VALUES (?, ?, ?, ?) "
            f"ON CONFLICT(key, {name}) DO UPDATE SET {value} = CASE WHEN expires_at <= ? "
            f"THEN excluded.{value} ELSE {value} + excluded.{value} END, "
            "expires_at = excluded.expires_at",
            [(op.key, n, d, now + op.ttl_seconds, now) for n, d in op.counts])
        return self._counters(db, op.key, [n for n, _ in op.counts], op.durable, now)

    @staticmethod
    def _counters(db: sqlite3.Connection, key: str, names: Sequence[str], durable: bool,
                  now: float) -> dict[str, int]:
        if not names:
            return {}
        table, name, value = _COUNTERS[durable]
        marks = ", ".join("?" * len(names))
        rows = db.execute(f"SELECT {name}, {value} FROM {table} WHERE key = ? AND {name} IN ({marks}) "
                          "AND (expires_at IS NULL OR expires_at > ?)", (key, *names, now))
        return {str(n): int(v) for n, v in rows}

    @staticmethod
    def _set_value(db: sqlite3.Connection, op: SetValue, now: float) -> bool:
        expires = now + op.ttl_seconds
        if op.only_if is not None:
            db.execute("UPDATE gate_values SET value = ?, expires_at = ? WHERE key = ? AND name = ? "
                       "AND value = ? AND expires_at > ?",
                       (op.value, expires, op.key, op.name, op.only_if, now))
            return _changed(db)
        db.execute("DELETE FROM gate_values WHERE key = ? AND expires_at <= ?", (op.key, now))
        conflict = "NOTHING" if op.only_if_absent else (
            "UPDATE SET value = excluded.value, expires_at = excluded.expires_at")
        db.execute("INSERT INTO gate_values(key, name, value, expires_at) VALUES (?, ?, ?, ?) "
                   f"ON CONFLICT(key, name) DO {conflict}", (op.key, op.name, op.value, expires))
        return _changed(db)

    @staticmethod
    def _sweep(db: sqlite3.Connection, now: float) -> None:
        """Housekeeping: expired counters and values, cap counts of long-gone periods."""
        db.execute("DELETE FROM gate_counters WHERE expires_at <= ?", (now,))
        db.execute("DELETE FROM gate_values WHERE expires_at <= ?", (now,))
        db.execute("DELETE FROM gate_usage WHERE expires_at <= ? OR (expires_at IS NULL AND "
                   "period < ?)", (now, period_of(now - _KEEP_LEGACY_SECONDS, "day")[0]))

    def keys(self, prefix: str = "") -> list[str]:
        self._follow()
        rows = self._read_only(lambda db: db.execute(
            "SELECT DISTINCT key FROM gate WHERE substr(key, 1, ?) = ? ORDER BY key",
            (len(prefix), prefix)).fetchall())
        return [str(row[0]) for row in rows]

    def close(self) -> None:
        with self._lock, self._read_lock:
            self._db.close()
            self._reader.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"


def _identity(path: Path) -> tuple[int, int] | None:
    """Which file ``path`` names (device, inode); ``None`` when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _write(db: sqlite3.Connection, key: str, st: StoreState) -> None:
    db.execute("INSERT INTO gate(key, tat, pause_until, epoch, cause) VALUES (?, ?, ?, ?, ?) "
               "ON CONFLICT(key) DO UPDATE SET tat = excluded.tat, pause_until = excluded.pause_until, "
               "epoch = excluded.epoch, cause = excluded.cause",
               (key, st.tat, st.pause_until, st.epoch, st.cause))


def _changed(db: sqlite3.Connection) -> bool:
    return bool(db.execute("SELECT changes()").fetchone()[0])


class SQLiteGate(FleetGate):
    """Gate state in a SQLite file (WAL mode, ``BEGIN IMMEDIATE`` transactions).

    Every process and notebook kernel on the machine that opens the same file
    shares one pace. Times are on the host clock (the file is single-host; it
    must live on a local filesystem, not NFS). Writes go through one connection,
    retrying a busy lock every few hundred microseconds (SQLite's own busy
    handler sleeps in steps of up to 100 ms: a fleet starting at once would queue
    for seconds); reads go through a second one, so checking a pause never waits
    behind this process's own writes (WAL readers do not block).

    A file locked by another connection for longer than ``timeout_seconds`` (a
    ``BEGIN EXCLUSIVE`` left open) turns a call into a ``GateError``, never a hang.
    The file (and the directories it needs) is created readable by its owner only. A file
    deleted or replaced under a running worker (a cache directory cleaned) is reopened at
    its path by the next call, so the worker paces with those started since; its pacing
    state starts afresh, as a restarted Redis's does.
    """

    store: SQLiteStore

    def __init__(self, path: str | Path | None = None, *, clock: Clock | None = None,
                 timeout_seconds: float = 30.0, aimd: Aimd | None = None) -> None:
        super().__init__(SQLiteStore(path, clock=clock, timeout_seconds=timeout_seconds), aimd=aimd)
        self.path = self.store.path

    def __repr__(self) -> str:
        return f"SQLiteGate({str(self.path)!r})"
