"""The team result store: one PostgreSQL table, created on first use (psycopg 3).

One autocommit connection guarded by a lock, opened on first use and reopened
after a failure (within the same call when the server ended the session while the
store was idle: an admin, a restart, a failover); every ``put`` is committed at once. ``stored_at`` is written
from the injected clock (host time), which is only used for no-match expiry.

Every statement has a deadline (the session's ``lock_timeout`` and
``statement_timeout``, besides ``connect_timeout`` and ``tcp_user_timeout``): a
row or table locked by another session turns a call into a ``StoreError``; a session
that never answers (a hung backend, a pooler holding the query) is cut by this client
after twice the deadline and a second (``geotoolkit.watchdog``).
Schema v2 added ``precision``, ``score`` and ``place``; a table from before is
upgraded in place on first use (under the schema's advisory lock, taking the
table lock only when a column is missing). The table ``geotoolkit_attempts`` (rows'
attempts across the runs of an unfinished batch, see ``AttemptLog``) is created beside it
the first time it is used, the same way but with its own mark: a results table in place
stays as it is, so workers who may not create tables keep using it when a newer version
comes (their attempt log alone fails until the owner has used it once, see
``geotoolkit.engine.tally``). A table in place (its comment marks its
version) is used as it is: users then need only ``SELECT, INSERT, UPDATE, DELETE`` on it.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

import psycopg

from geotoolkit.clock import Clock
from geotoolkit.pgschema import ensure_schema, error_text, redial, refused_setting, schema_mark
from geotoolkit.redact import redact
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
from geotoolkit.urls import bad_dsn, check_userinfo
from geotoolkit.watchdog import Watchdog

__all__ = ["ATTEMPTS_TABLE", "TABLE", "PostgresStore"]

T = TypeVar("T")

TABLE = "geotoolkit_results"
ATTEMPTS_TABLE = "geotoolkit_attempts"
#: Key of the transaction-level advisory lock serialising schema creation ("gtkres").
_SCHEMA_LOCK = 0x6774_6B72_6573
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    key text PRIMARY KEY,
    status text NOT NULL CHECK (status IN ('matched', 'no_match')),
    lon double precision,
    lat double precision,
    label text NOT NULL DEFAULT '',
    reason text NOT NULL DEFAULT '',
    provider text NOT NULL DEFAULT '',
    attempts integer NOT NULL DEFAULT 1,
    stored_at double precision NOT NULL,
    precision text,
    score double precision,
    place text
)
"""
#: Schema v1 -> v2, in place; the table lock is taken only when a column is missing.
_MIGRATE = f"""
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                    WHERE table_schema = current_schema()
                      AND table_name = '{TABLE}' AND column_name = 'place') THEN
        ALTER TABLE {TABLE}
            ADD COLUMN IF NOT EXISTS precision text,
            ADD COLUMN IF NOT EXISTS score double precision,
            ADD COLUMN IF NOT EXISTS place text;
    END IF;
END $$
"""
#: Rows' attempts in a batch not run to its end (``Attempts``), by cache key; on first use.
_ATTEMPTS_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {ATTEMPTS_TABLE} (
    key text PRIMARY KEY,
    attempts integer NOT NULL,
    sent integer NOT NULL,
    not_before double precision NOT NULL,
    error text NOT NULL DEFAULT '',
    reason text NOT NULL DEFAULT '',
    updated_at double precision NOT NULL
)
"""
_ATTEMPTS_COLUMNS = "attempts, sent, not_before, error, reason, updated_at"
#: The comment the table carries once ``_SCHEMA`` and ``_MIGRATE`` ran (``geotoolkit.pgschema``):
#: a table in place is used as it is, by a user who may not create or alter anything, and any
#: change to them brings it up to date.
_MARK = schema_mark("geotoolkit cache schema", (_SCHEMA, _MIGRATE))
_ATTEMPTS_MARK = schema_mark("geotoolkit attempts schema", (_ATTEMPTS_SCHEMA,))
#: PostgreSQL's largest timeout setting (milliseconds).
_MAX_TIMEOUT_MS = 2_147_483_647
#: Errors of a statement that ran out of time (the connection itself is fine).
_TIMED_OUT = (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled)
_UPSERT = (f"INSERT INTO {TABLE} (key, {', '.join(COLUMNS)}) "
           f"VALUES ({', '.join(['%s'] * (len(COLUMNS) + 1))}) ON CONFLICT (key) DO UPDATE SET "
           + ", ".join(f"{c} = excluded.{c}" for c in COLUMNS))
_SELECT = f"SELECT key, {', '.join(COLUMNS)} FROM {TABLE} WHERE key = ANY(%s)"
_CHUNK = 5000


def _read(dsn: str) -> tuple[dict[str, Any] | None, str]:
    """The DSN's parameters, or ``None`` and why the driver cannot read it."""
    try:
        return psycopg.conninfo.conninfo_to_dict(dsn), ""
    except psycopg.Error as exc:
        return None, str(exc)


class PostgresStore:
    """Settled outcomes in a PostgreSQL table shared by a team.

    Parameters
    ----------
    dsn
        A ``postgresql://`` URL or ``key=value`` DSN; its password (user info,
        ``?password=`` or ``password=``) never appears in errors or reprs.
    clock, no_match_ttl_seconds
        As for :class:`~geotoolkit.store.SQLiteStore`.
    timeout_seconds
        The deadline of connecting and of every statement, lock waits included.
    """

    backend = "postgres"
    blocking = True

    def __init__(self, dsn: str, *, clock: Clock | None = None,
                 no_match_ttl_seconds: float | None = DEFAULT_NO_MATCH_TTL_SECONDS,
                 timeout_seconds: float = 5.0) -> None:
        self._expiry = Expiry.build(no_match_ttl_seconds, clock)
        check_userinfo(dsn, "PostgreSQL cache")
        self._password: str | None = None
        self.dsn = redact(dsn)
        given, reason = _read(dsn)
        if given is None:  # raised here: the driver's error, which names it, is not chained
            raise bad_dsn(dsn, "PostgreSQL cache", reason)
        self._password = str(given.get("password") or "") or None
        self.dsn = redact(dsn, [self._password])
        self._dsn = dsn
        self._given = given
        self._timeout = check_timeout(timeout_seconds)
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._table_ready = False
        self._attempts_ready = False
        # The server keeps the deadlines; a server that never answers is cut here.
        self._watchdog = Watchdog(2 * self._timeout + 1.0)

    def _fail(self, exc: BaseException) -> NoReturn:
        message = error_text(exc, [self._password])  # not the SQL that ran
        if isinstance(exc, _TIMED_OUT):
            message += f" (after {self._timeout:g} s)"
        elif self._watchdog.fired:
            message = (f"no answer within {self._watchdog.seconds:g} s (a hung server, or a pooler "
                       f"holding the query): {message}")
        elif isinstance(exc, psycopg.errors.InsufficientPrivilege) and not self._table_ready:
            message += (f" (the table {TABLE} is missing or from another version, and this user "
                        "may not create it: open the cache once as a user who may)")
        raise StoreError(f"PostgreSQL cache at {self.dsn} failed: {message}",
                         backend="postgres", permanent=refused_setting(exc)) from exc

    def _connect(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            params: dict[str, Any] = {"autocommit": True, "application_name": "geotoolkit-cache"}
            if "connect_timeout" not in self._given:
                params["connect_timeout"] = max(1, math.ceil(self._timeout))
            if "tcp_user_timeout" not in self._given:
                params["tcp_user_timeout"] = min(_MAX_TIMEOUT_MS, max(1, math.ceil(self._timeout * 1000)))
            self._watchdog.fired = False
            conn = psycopg.connect(self._dsn, **params)
            try:
                # A lock wait gives up a little earlier, so it is reported as one.
                deadlines = tuple(f"{min(_MAX_TIMEOUT_MS, max(1, math.ceil(self._timeout * share)))}ms"
                                  for share in (900, 1000))
                with self._watchdog.guard(conn.fileno()):
                    conn.execute("SELECT set_config('lock_timeout', %s, false), "
                                 "set_config('statement_timeout', %s, false)", deadlines)
                    ensure_schema(conn, table=TABLE, mark=_MARK, statements=(_SCHEMA, _MIGRATE),
                                  lock=_SCHEMA_LOCK)
                self._table_ready = True
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _call(self, body: Callable[[psycopg.Connection[Any]], T]) -> T:
        with self._lock:
            for attempt in (1, 2):
                dialled = self._conn is not None and not self._conn.closed
                started = time.monotonic()
                try:
                    conn = self._connect()
                    with self._watchdog.guard(conn.fileno()):
                        return body(conn)
                except (psycopg.Error, OSError) as exc:
                    timed_out = isinstance(exc, _TIMED_OUT)
                    if not timed_out or self._conn is None or self._conn.broken:
                        self._drop()
                    if not redial(attempt=attempt, dialled=dialled, dropped=self._conn is None,
                                  timed_out=timed_out, elapsed=time.monotonic() - started,
                                  timeout=self._timeout):
                        self._fail(exc)
            raise AssertionError("unreachable")  # pragma: no cover

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def get_many(self, keys: Sequence[str]) -> Mapping[str, Outcome]:
        """The fresh outcomes stored for ``keys`` (missing and expired keys are absent)."""
        unique = list(dict.fromkeys(keys))

        def body(conn: psycopg.Connection[Any]) -> list[tuple[str, Row]]:
            found: list[tuple[str, Row]] = []
            for start in range(0, len(unique), _CHUNK):
                self._watchdog.feed()  # each statement has its deadline
                rows = conn.execute(_SELECT, (unique[start:start + _CHUNK],)).fetchall()
                found.extend((r[0], tuple(r[1:])) for r in rows)
            return found

        rows = self._call(body) if unique else []
        now = self._expiry.now()
        return {key: decode(row) for key, row in rows if self._expiry.fresh(row, now)}

    def put(self, key: str, outcome: Outcome) -> None:
        """Store a match or no-match, committed at once; failures are ignored."""
        self.put_many([(key, outcome)])

    def put_many(self, items: Iterable[tuple[str, Outcome]]) -> None:
        """Store many outcomes in one transaction (failures are skipped)."""
        now = self._expiry.now()
        rows = [(k, *row) for k, o in items if (row := encode(o, now)) is not None]
        if not rows:
            return

        def body(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction(), conn.cursor() as cursor:
                for start in range(0, len(rows), _CHUNK):
                    self._watchdog.feed()  # each chunk has its deadline
                    cursor.executemany(_UPSERT, rows[start:start + _CHUNK])

        self._call(body)

    def delete(self, keys: Iterable[str]) -> None:
        """Forget ``keys`` (their queries will be sent again)."""
        items = list(keys)
        self._call(lambda conn: conn.execute(f"DELETE FROM {TABLE} WHERE key = ANY(%s)", (items,)))

    def get_attempts(self, keys: Sequence[str]) -> Mapping[str, Attempts]:
        """The attempts kept for ``keys`` (see ``AttemptLog``; expired ones are absent)."""
        unique = list(dict.fromkeys(keys))
        select = f"SELECT key, {_ATTEMPTS_COLUMNS} FROM {ATTEMPTS_TABLE} WHERE key = ANY(%s)"

        def body(conn: psycopg.Connection[Any]) -> list[tuple[str, Attempts]]:
            found: list[tuple[str, Attempts]] = []
            for start in range(0, len(unique), _CHUNK):
                self._watchdog.feed()
                rows = conn.execute(select, (unique[start:start + _CHUNK],)).fetchall()
                found.extend((r[0], Attempts(*r[1:])) for r in rows)
            return found

        found = self._logged(body) if unique else []
        now = self._expiry.now()
        return {k: a for k, a in found if attempts_fresh(a.updated_at, now)}

    def put_attempts(self, key: str, attempts: Attempts) -> None:
        """Keep ``key``'s attempts, committed at once."""
        names = _ATTEMPTS_COLUMNS.split(", ")
        upsert = (f"INSERT INTO {ATTEMPTS_TABLE} (key, {_ATTEMPTS_COLUMNS}) VALUES "
                  f"(%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO UPDATE SET "
                  + ", ".join(f"{c} = excluded.{c}" for c in names))
        row = (key, *attempts.row(self._expiry.now()))
        self._logged(lambda conn: conn.execute(upsert, row))

    def clear_attempts(self, keys: Sequence[str]) -> None:
        """Forget the attempts of ``keys`` (and any expired ones)."""
        items = list(keys)
        cutoff = self._expiry.now() - ATTEMPTS_TTL_SECONDS

        def body(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                for start in range(0, len(items), _CHUNK):
                    self._watchdog.feed()
                    conn.execute(f"DELETE FROM {ATTEMPTS_TABLE} WHERE key = ANY(%s)",
                                 (items[start:start + _CHUNK],))
                self._watchdog.feed()
                conn.execute(f"DELETE FROM {ATTEMPTS_TABLE} WHERE updated_at < %s", (cutoff,))

        self._logged(body)

    def _logged(self, body: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``body`` on the attempt log, its table made first if this store has not yet."""
        def with_table(conn: psycopg.Connection[Any]) -> T:
            if not self._attempts_ready:
                ensure_schema(conn, table=ATTEMPTS_TABLE, mark=_ATTEMPTS_MARK,
                              statements=(_ATTEMPTS_SCHEMA,), lock=_SCHEMA_LOCK,
                              feed=self._watchdog.feed)
                self._attempts_ready = True
            return body(conn)

        return self._call(with_table)

    def close(self) -> None:
        with self._lock:
            self._drop()
            self._watchdog.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self.dsn!r})"
