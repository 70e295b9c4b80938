"""The default result store: one SQLite file (WAL), committed on every put.

Schema versions (``PRAGMA user_version``): 1 the first release; 2 adds a match's
``precision``, ``score`` and ``place`` (JSON). An older file is upgraded in
place when opened (``ALTER TABLE ... ADD COLUMN``, in one ``BEGIN IMMEDIATE``
transaction, so concurrent openers agree); its rows read back with precision
``"unknown"``, no score and an empty place.

The table ``attempts`` (rows' attempts across the runs of an unfinished batch, see
``AttemptLog``) is created beside ``results`` the first time it is used, in any file,
without a version of its own: opening a file writes nothing it did not before, a version
that does not know the table still opens the file, and where the table cannot be made
only the attempt log fails (see ``geotoolkit.engine.tally``).
"""

from __future__ import annotations

import contextlib
import errno
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from geotoolkit.clock import Clock
from geotoolkit.files import private_file
from geotoolkit.results import Outcome
from geotoolkit.store.base import (
    ATTEMPTS_TTL_SECONDS,
    COLUMNS,
    DEFAULT_NO_MATCH_TTL_SECONDS,
    Attempts,
    Expiry,
    Row,
    StoreError,
    attempts_fresh,
    check_timeout,
    decode,
    encode,
)

__all__ = ["SQLiteStore", "default_store_path"]

T = TypeVar("T")

_VERSION = 2
_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('matched', 'no_match')),
    lon REAL,
    lat REAL,
    label TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    provider TEXT NOT NULL DEFAULT '',
    attempts INTEGER NOT NULL DEFAULT 1,
    stored_at REAL NOT NULL,
    precision TEXT,
    score REAL,
    place TEXT
) WITHOUT ROWID
"""
#: Rows' attempts in a batch not run to its end (``Attempts``), by cache key; created on first use.
_ATTEMPTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    key TEXT PRIMARY KEY NOT NULL,
    attempts INTEGER NOT NULL,
    sent INTEGER NOT NULL,
    not_before REAL NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    updated_at REAL NOT NULL
) WITHOUT ROWID
"""
_ATTEMPTS_COLUMNS = "attempts, sent, not_before, error, reason, updated_at"
#: Columns added by schema v2, added to a v1 table in place.
_ADDED = (("precision", "TEXT"), ("score", "REAL"), ("place", "TEXT"))
_INSERT = (f"INSERT OR REPLACE INTO results (key, {', '.join(COLUMNS)}) "
           f"VALUES ({', '.join('?' * (len(COLUMNS) + 1))})")
#: Keys per ``IN (...)`` query: far below SQLite's variable limit, large enough to be fast.
_CHUNK = 500


#: What SQLite says of a file that is not (or no longer) a whole database.
_DAMAGED = ("malformed", "not a database", "file is encrypted")


def _hint(exc: sqlite3.Error, path: Path) -> str:
    """What to do about a damaged file (cut short by a full disk, an interrupted copy)."""
    if not any(word in str(exc) for word in _DAMAGED):
        return ""
    return (f"; the file is damaged: move {path} aside to start an empty cache (the rows it "
            "held are sent again), or run without a cache")


#: SQLite's primary result codes of a file this process may never use as it is: no
#: permission, read only, damaged, not a database (a busy or full database may clear).
_REFUSED_CODES = frozenset({sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CORRUPT,
                            sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_AUTH})
#: Errors opening the path that no retry heals: a directory, no permission, a read-only mount.
_REFUSED_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR, errno.EROFS,
                             errno.ENAMETOOLONG})


def _refused(exc: BaseException) -> bool:
    """Whether the cache's path is refused for good (not a lock wait or a full disk).

    >>> _refused(IsADirectoryError(errno.EISDIR, "Is a directory"))
    True
    >>> _refused(sqlite3.OperationalError("database is locked"))
    False
    """
    if isinstance(exc, OSError):
        return exc.errno in _REFUSED_ERRNOS
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in _REFUSED_CODES
    text = str(exc)
    return "newer than this geotoolkit" in text or any(word in text for word in _DAMAGED)


def default_store_path() -> Path:
    """``results.sqlite`` in the user's cache directory (created on first use)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("geotoolkit")) / "results.sqlite"


class SQLiteStore:
    """Settled outcomes in a SQLite file, shared by every process on the machine.

    WAL mode with ``synchronous=NORMAL``: each ``put`` is its own committed
    transaction, so a killed process (even ``kill -9``) keeps every finished
    result. The file must live on a local filesystem; it is created readable by
    its owner only (0600, and the directories it needs 0700).

    Parameters
    ----------
    path
        The file; ``None`` is :func:`default_store_path`.
    clock
        Supplies "now" for the no-match expiry (injectable for tests).
    no_match_ttl_seconds
        How long a no-match settles its query; ``None``: for ever.
    timeout_seconds
        How long a call waits for a file locked by another connection (a
        ``BEGIN EXCLUSIVE`` left open) before it raises :class:`StoreError`.
    """

    backend = "sqlite"
    blocking = True

    def __init__(self, path: str | Path | None = None, *, clock: Clock | None = None,
                 no_match_ttl_seconds: float | None = DEFAULT_NO_MATCH_TTL_SECONDS,
                 timeout_seconds: float = 30.0) -> None:
        self._expiry = Expiry.build(no_match_ttl_seconds, clock)
        timeout_seconds = check_timeout(timeout_seconds)
        # "~/x" is in the home directory, not in a directory "~" made in the working one.
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        self._lock = threading.Lock()
        self._attempts_ready = False
        try:
            private_file(self.path)
            self._db = sqlite3.connect(self.path, timeout=timeout_seconds,
                                       isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the SQLite cache at {self.path}: {exc}",
                             backend="sqlite", permanent=_refused(exc)) from exc
        try:
            self._guard(self._init_schema)
        except StoreError:
            self._db.close()
            raise

    def _init_schema(self) -> None:
        db = self._db
        if self._version() == _VERSION:
            db.execute("PRAGMA synchronous=NORMAL")
            return
        self._wal()
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("BEGIN IMMEDIATE")
        try:
            self._version()  # again, now that no other connection can upgrade it
            db.execute(_SCHEMA)
            have = {row[1] for row in db.execute("PRAGMA table_info(results)")}
            for column, kind in _ADDED:
                if column not in have:
                    db.execute(f"ALTER TABLE results ADD COLUMN {column} {kind}")
            db.execute(f"PRAGMA user_version={_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def _wal(self) -> None:
        """Switch the file to WAL. Changing the journal mode ignores the busy timeout: with
        several openers at once, the others are refused ("database is locked") while one
        switches, and find it switched when they look again."""
        for _ in range(50):
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc):
                    raise
            with contextlib.suppress(sqlite3.OperationalError):  # busy too: try again
                if str(self._db.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
                    return
            time.sleep(0.02)
        self._db.execute("PRAGMA journal_mode=WAL")  # the last try: its error is the answer

    def _version(self) -> int:
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version > _VERSION:
            raise sqlite3.DatabaseError(f"schema version {version} is newer than this geotoolkit")
        return version

    def _guard(self, body: Callable[[], T]) -> T:
        with self._lock:
            try:
                return body()
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite cache {self.path} failed: {exc}{_hint(exc, self.path)}",
                                 backend="sqlite", permanent=_refused(exc)) from exc

    def get_many(self, keys: Sequence[str]) -> Mapping[str, Outcome]:
        """The fresh outcomes stored for ``keys`` (missing and expired keys are absent)."""
        unique = list(dict.fromkeys(keys))
        rows = self._guard(lambda: self._select(unique))
        now = self._expiry.now()
        return {key: decode(row) for key, row in rows if self._expiry.fresh(row, now)}

    def _select(self, keys: list[str]) -> list[tuple[str, Row]]:
        return [(r[0], r[1:]) for r in self._rows(f"{', '.join(COLUMNS)} FROM results", keys)]

    def _rows(self, what: str, keys: list[str]) -> list[tuple[Any, ...]]:
        """``SELECT key, <what> WHERE key IN keys``, in chunks SQLite's variable limit allows."""
        found: list[tuple[Any, ...]] = []
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start:start + _CHUNK]
            found.extend(self._db.execute(
                f"SELECT key, {what} WHERE key IN ({', '.join('?' * len(chunk))})", chunk))
        return found

    def put(self, key: str, outcome: Outcome) -> None:
        """Store a match or no-match, committed at once; failures are ignored."""
        row = encode(outcome, self._expiry.now())
        if row is not None:
            self._guard(lambda: self._db.execute(_INSERT, (key, *row)))

    def put_many(self, items: Iterable[tuple[str, Outcome]]) -> None:
        """Store many outcomes in one transaction (failures are skipped)."""
        now = self._expiry.now()
        rows = [(k, *row) for k, o in items if (row := encode(o, now)) is not None]

        def body() -> None:
            with self._db:  # BEGIN ... COMMIT, or ROLLBACK on error
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(_INSERT, rows)

        self._guard(body)

    def delete(self, keys: Iterable[str]) -> None:
        """Forget ``keys`` (their queries will be sent again)."""
        items = [(k,) for k in keys]
        self._guard(lambda: self._db.executemany("DELETE FROM results WHERE key = ?", items))

    def get_attempts(self, keys: Sequence[str]) -> Mapping[str, Attempts]:
        """The attempts kept for ``keys`` (see ``AttemptLog``; expired ones are absent)."""
        unique = list(dict.fromkeys(keys))

        def body() -> list[tuple[str, Attempts]]:
            return [(r[0], Attempts(*r[1:]))
                    for r in self._rows(f"{_ATTEMPTS_COLUMNS} FROM attempts", unique)]

        now = self._expiry.now()
        return {k: a for k, a in self._logged(body) if attempts_fresh(a.updated_at, now)}

    def put_attempts(self, key: str, attempts: Attempts) -> None:
        """Keep ``key``'s attempts, committed at once."""
        row = (key, *attempts.row(self._expiry.now()))
        self._logged(lambda: self._db.execute(
            f"INSERT OR REPLACE INTO attempts (key, {_ATTEMPTS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            row))

    def clear_attempts(self, keys: Sequence[str]) -> None:
        """Forget the attempts of ``keys`` (and any expired ones), in one transaction."""
        items = [(k,) for k in keys]
        cutoff = (self._expiry.now() - ATTEMPTS_TTL_SECONDS,)

        def body() -> None:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany("DELETE FROM attempts WHERE key = ?", items)
                self._db.execute("DELETE FROM attempts WHERE updated_at < ?", cutoff)

        self._logged(body)

    def _logged(self, body: Callable[[], T]) -> T:
        """``body`` on the attempt log, the table created first if this store has not yet."""
        def with_table() -> T:
            if not self._attempts_ready:
                self._db.execute(_ATTEMPTS_SCHEMA)
                self._attempts_ready = True
            return body()

        return self._guard(with_table)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"
