"""The embedded default gate: one SQLite file shared by every process on a machine."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from geotoolkit.clock import Clock, SystemClock
from geotoolkit.errors import GateError, QuotaExceededError
from geotoolkit.files import private_file
from geotoolkit.gate.base import (
    HEARTBEAT_SECONDS,
    Aimd,
    Cap,
    FleetStats,
    GateState,
    Period,
    Report,
    Reservation,
    Usage,
    check_timeout,
    check_value,
)
from geotoolkit.gate.fleet import Fleet, cap_reached, pause_step, period_of, reserve_step

__all__ = ["SQLiteGate", "default_gate_path"]

T = TypeVar("T")

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS gate (
        key TEXT PRIMARY KEY,
        tat REAL NOT NULL DEFAULT 0,
        pause_until REAL NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE IF NOT EXISTS gate_workers (
        key TEXT NOT NULL, worker TEXT NOT NULL, expires_at REAL NOT NULL,
        PRIMARY KEY (key, worker)
    )""",
    """CREATE TABLE IF NOT EXISTS gate_usage (
        key TEXT NOT NULL, period TEXT NOT NULL, used INTEGER NOT NULL,
        PRIMARY KEY (key, period)
    )""",
    """CREATE TABLE IF NOT EXISTS gate_values (
        key TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL, expires_at REAL NOT NULL,
        PRIMARY KEY (key, name)
    )""",
]

#: Cap counters are kept this long (two months) after their period.
_KEEP_USAGE_SECONDS = 62 * 86_400.0

#: Columns added after the first release (a gate file from then is upgraded in place).
_FLEET_COLUMN = "ALTER TABLE gate ADD COLUMN fleet TEXT"


def default_gate_path() -> Path:
    """``gate.sqlite`` in the user's cache directory (created on first use)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("geotoolkit")) / "gate.sqlite"


class SQLiteGate:
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
    The file (and the directories it needs) is created readable by its owner only.
    """

    backend = "sqlite"
    blocking = True

    def __init__(self, path: str | Path | None = None, *, clock: Clock | None = None,
                 timeout_seconds: float = 30.0, aimd: Aimd | None = None) -> None:
        self.path = Path(path) if path is not None else default_gate_path()
        self._clock = clock or SystemClock()
        self.aimd = aimd or Aimd()
        self._timeout = timeout_seconds = check_timeout(timeout_seconds)
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()
        try:
            private_file(self.path)
            self._db = sqlite3.connect(self.path, timeout=0.0, isolation_level=None,
                                       check_same_thread=False)
            self._retry(lambda: self._db.execute("PRAGMA journal_mode=WAL"))
            self._retry(lambda: self._db.execute("PRAGMA synchronous=NORMAL"))
            self._transaction(self._create_schema)
            self._reader = sqlite3.connect(self.path, timeout=timeout_seconds,
                                           isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise GateError(f"cannot open the SQLite gate at {self.path}: {exc}",
                            backend="sqlite") from exc

    @staticmethod
    def _create_schema(db: sqlite3.Connection) -> None:
        for statement in _SCHEMA:
            db.execute(statement)
        columns = {row[1] for row in db.execute("PRAGMA table_info(gate)")}
        if "fleet" not in columns:
            db.execute(_FLEET_COLUMN)

    def _retry(self, step: Callable[[], T]) -> T:
        """Run ``step``, retrying while another connection holds the lock."""
        deadline, delay = time.monotonic() + self._timeout, 0.0002
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
        with self._lock:
            try:
                self._retry(lambda: self._db.execute("BEGIN IMMEDIATE"))
                try:
                    result = body(self._db)
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._retry(lambda: self._db.execute("COMMIT"))
                return result
            except sqlite3.Error as exc:
                raise GateError(f"SQLite gate {self.path} failed: {exc}", backend="sqlite") from exc

    @staticmethod
    def _read(db: sqlite3.Connection, key: str) -> tuple[float, float, Fleet]:
        row = db.execute("SELECT tat, pause_until, fleet FROM gate WHERE key = ?", (key,)).fetchone()
        if row is None:
            return 0.0, 0.0, Fleet()
        return float(row[0]), float(row[1]), Fleet.from_json(row[2])

    @staticmethod
    def _write(db: sqlite3.Connection, key: str, tat: float, until: float, fleet: Fleet) -> None:
        db.execute("INSERT INTO gate(key, tat, pause_until, fleet) VALUES (?, ?, ?, ?) "
                   "ON CONFLICT(key) DO UPDATE SET tat = excluded.tat, "
                   "pause_until = excluded.pause_until, fleet = excluded.fleet",
                   (key, tat, until, fleet.to_json()))

    @staticmethod
    def _usage_at(db: sqlite3.Connection, key: str, period: Period, now: float) -> Usage:
        label, resets_at = period_of(now, period)
        row = db.execute("SELECT used FROM gate_usage WHERE key = ? AND period = ?",
                         (key, label)).fetchone()
        return Usage(label, int(row[0]) if row else 0, resets_at)

    @staticmethod
    def _workers(db: sqlite3.Connection, key: str, now: float) -> int:
        row = db.execute("SELECT count(*) FROM gate_workers WHERE key = ? AND expires_at > ?",
                         (key, now)).fetchone()
        return int(row[0])

    # -- the Gate protocol --------------------------------------------------------

    def reserve(self, key: str, interval: float, horizon: float = 60.0, *,
                report: Report | None = None, cap: Cap | None = None) -> Reservation:
        def body(db: sqlite3.Connection) -> Reservation | QuotaExceededError:
            now = self._clock.now()
            tat, until, fleet = self._read(db, key)
            wait, new_tat, fleet = reserve_step(now, tat, until, fleet, interval, horizon,
                                                report, self.aimd)
            usage = self._usage_at(db, key, cap.period, now) if cap is not None else None
            capped = cap is not None and usage is not None and usage.used >= cap.limit
            reserved = wait <= horizon and not capped
            self._write(db, key, new_tat if reserved else tat, until, fleet)
            if capped:
                assert cap is not None and usage is not None
                return cap_reached(cap, usage)  # raised after the report is committed
            if reserved and usage is not None:
                usage = Usage(usage.period, usage.used + 1, usage.resets_at)
                db.execute("INSERT INTO gate_usage(key, period, used) VALUES (?, ?, ?) "
                           "ON CONFLICT(key, period) DO UPDATE SET used = excluded.used",
                           (key, usage.period, usage.used))
            return Reservation(wait, now, reserved, fleet.epoch, fleet.factor, usage)

        result = self._transaction(body)
        if isinstance(result, QuotaExceededError):
            raise result
        return result

    def acquire(self, key: str, interval: float, horizon: float = 60.0) -> float:
        return self.reserve(key, interval, horizon).wait

    def pause(self, key: str, seconds: float, *, cause: str = "", rate_limited: bool = False,
              report: Report | None = None) -> float:
        def body(db: sqlite3.Connection) -> float:
            now = self._clock.now()
            tat, until, fleet = pause_step(now, *self._read(db, key), seconds, cause=cause,
                                           rate_limited=rate_limited, report=report,
                                           aimd=self.aimd)
            self._write(db, key, tat, until, fleet)
            return until - now

        return self._transaction(body)

    def state(self, key: str) -> GateState:
        def body(db: sqlite3.Connection) -> GateState:
            tat, until, fleet = self._read(db, key)
            return GateState(now=self._clock.now(), tat=tat, pause_until=until, epoch=fleet.epoch)

        return self._read_only(body)

    def record(self, key: str, report: Report, *, worker: str | None = None,
               leaving: bool = False) -> FleetStats:
        if not report and worker is None:
            return self.stats(key)  # nothing to write

        def body(db: sqlite3.Connection) -> FleetStats:
            now = self._clock.now()
            tat, until, fleet = self._read(db, key)
            if report:
                fleet = fleet.counted(now, report).succeeded(now, report.successes, self.aimd)
                self._write(db, key, tat, until, fleet)
            if worker is not None and leaving:
                db.execute("DELETE FROM gate_workers WHERE key = ? AND worker = ?", (key, worker))
                # Cap counters of periods long gone (labels sort by date).
                db.execute("DELETE FROM gate_usage WHERE period < ?",
                           (period_of(now - _KEEP_USAGE_SECONDS, "day")[0],))
                db.execute("DELETE FROM gate_values WHERE expires_at <= ?", (now,))
            elif worker is not None:
                db.execute("INSERT INTO gate_workers(key, worker, expires_at) VALUES (?, ?, ?) "
                           "ON CONFLICT(key, worker) DO UPDATE SET expires_at = excluded.expires_at",
                           (key, worker, now + HEARTBEAT_SECONDS))
            db.execute("DELETE FROM gate_workers WHERE expires_at <= ?", (now,))
            return fleet.stats(now, until, self._workers(db, key, now))

        return self._transaction(body)

    def stats(self, key: str) -> FleetStats:
        def body(db: sqlite3.Connection) -> FleetStats:
            now = self._clock.now()
            _tat, until, fleet = self._read(db, key)
            return fleet.stats(now, until, self._workers(db, key, now))

        return self._read_only(body)

    def usage(self, key: str, period: Period = "day") -> Usage:
        return self._read_only(lambda db: self._usage_at(db, key, period, self._clock.now()))

    def set_value(self, key: str, name: str, value: str, *, ttl_seconds: float,
                  only_if_absent: bool = False) -> bool:
        ttl = check_value(name, value, ttl_seconds)

        def body(db: sqlite3.Connection) -> bool:
            now = self._clock.now()
            db.execute("DELETE FROM gate_values WHERE key = ? AND expires_at <= ?", (key, now))
            conflict = "NOTHING" if only_if_absent else (
                "UPDATE SET value = excluded.value, expires_at = excluded.expires_at")
            db.execute("INSERT INTO gate_values(key, name, value, expires_at) VALUES (?, ?, ?, ?) "
                       f"ON CONFLICT(key, name) DO {conflict}", (key, name, value, now + ttl))
            return bool(db.execute("SELECT changes()").fetchone()[0])

        return self._transaction(body)

    def values(self, key: str, prefix: str = "") -> dict[str, str]:
        def body(db: sqlite3.Connection) -> dict[str, str]:
            rows = db.execute("SELECT name, value FROM gate_values WHERE key = ? AND expires_at > ?",
                              (key, self._clock.now()))
            return {str(n): str(v) for n, v in rows if str(n).startswith(prefix)}

        return self._read_only(body)

    def delete_value(self, key: str, name: str, *, only_if: str | None = None) -> bool:
        def body(db: sqlite3.Connection) -> bool:
            db.execute("DELETE FROM gate_values WHERE key = ? AND name = ? AND expires_at > ? "
                       "AND (? IS NULL OR value = ?)",
                       (key, name, self._clock.now(), only_if, only_if))
            return bool(db.execute("SELECT changes()").fetchone()[0])

        return self._transaction(body)

    def _read_only(self, body: Callable[[sqlite3.Connection], T]) -> T:
        with self._read_lock:
            try:
                return body(self._reader)
            except sqlite3.Error as exc:
                raise GateError(f"SQLite gate {self.path} failed: {exc}", backend="sqlite") from exc

    def close(self) -> None:
        with self._lock, self._read_lock:
            self._db.close()
            self._reader.close()

    def __repr__(self) -> str:
        return f"SQLiteGate({str(self.path)!r})"
