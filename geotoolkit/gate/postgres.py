"""The fleet gate on PostgreSQL: the primitives in SQL, the strategy in Python.

Each primitive is one statement (two of them small plpgsql functions that lock
the key's pacing row; schema in ``_postgres_sql``) reading the server's
``clock_timestamp()`` (not ``now()``, frozen at transaction start). A batch of
primitives goes in one round trip: a pipeline (libpq >= 14) that runs as one
implicit transaction, on an autocommit connection. The state tables are UNLOGGED
with a low fillfactor: ephemeral pacing, rewritten many times a second by a busy
fleet (HOT updates, no WAL); the cap counters are logged. Rows idle for an hour
are deleted opportunistically.

Create the schema ahead of time with ``geotoolkit gate init URL`` (``init_schema``),
or let the first gate call do it; a schema from an earlier version is upgraded in
place. A schema in place (its table's comment marks its version) is used as it is:
workers then need only ``SELECT, INSERT, UPDATE, DELETE`` on its tables.

Nothing waits forever: the session has a ``statement_timeout`` of
``timeout_seconds`` and a ``lock_timeout`` of 90 % of it (besides
``connect_timeout`` and ``tcp_user_timeout``), so a row held by another session
(``SELECT ... FOR UPDATE`` left open), a ``LOCK TABLE``, a ``VACUUM FULL`` or an
``ALTER`` turns a gate call into a ``GateError`` after about that long
(``FallbackGate`` then paces locally until the lock is gone). A session that never
answers (a hung backend, a pooler holding the query), which the server's deadlines
cannot end, is cut by this client after twice ``timeout_seconds`` and a second
(``geotoolkit.watchdog``); the next call dials a new one.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import psycopg
from psycopg import errors as pg_errors

from geotoolkit.clock import Clock
from geotoolkit.errors import GateError
from geotoolkit.gate import _postgres_sql as sql
from geotoolkit.gate._postgres_sql import SCHEMA, SWEEP
from geotoolkit.gate.base import Aimd, check_timeout
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
    describe,
)
from geotoolkit.gate.strategy import FleetGate
from geotoolkit.pgschema import ensure_schema, error_text, redial, refused_setting
from geotoolkit.redact import redact
from geotoolkit.urls import bad_dsn, check_userinfo
from geotoolkit.watchdog import Watchdog

__all__ = ["PostgresGate", "PostgresStore", "init_schema"]

T = TypeVar("T")

#: Key of the transaction-level advisory lock serialising schema creation.
_SCHEMA_LOCK = 0x6765_6F74_6B67  # "geotkg"

#: How often (seconds, per gate instance) idle rows are swept.
_SWEEP_EVERY = 600.0

#: Errors of a statement that ran out of time (the connection itself is fine).
_TIMED_OUT = (pg_errors.LockNotAvailable, pg_errors.QueryCanceled)

#: Whether this libpq can send a batch in one round trip (a pipeline).
_PIPELINE = psycopg.Pipeline.is_supported()


def _password(dsn: str) -> str | None:
    try:
        value = psycopg.conninfo.conninfo_to_dict(dsn).get("password")
    except psycopg.Error:
        return None
    return str(value) if value else None


def _unreadable(dsn: str) -> str | None:
    """Why the driver cannot read ``dsn`` (``None``: it can)."""
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        return str(exc)
    return None


#: PostgreSQL's largest timeout setting (milliseconds).
_MAX_TIMEOUT_MS = 2_147_483_647


def _deadlines(timeout_seconds: float) -> tuple[str, str]:
    """The session's ``lock_timeout`` and ``statement_timeout`` for a call deadline.

    A lock wait gives up a little earlier (90 %), so it is reported as a lock wait.

    >>> _deadlines(0.3), _deadlines(1e12)[1]
    (('270ms', '300ms'), '2147483647ms')
    """
    lock, statement = (f"{min(_MAX_TIMEOUT_MS, max(1, math.ceil(timeout_seconds * share)))}ms"
                       for share in (900, 1000))
    return lock, statement


def _connect(dsn: str, timeout_seconds: float, watchdog: Watchdog) -> psycopg.Connection[Any]:
    params: dict[str, Any] = {"autocommit": True, "application_name": "geotoolkit-gate"}
    given = psycopg.conninfo.conninfo_to_dict(dsn)
    if "connect_timeout" not in given:
        params["connect_timeout"] = max(1, math.ceil(timeout_seconds))
    if "tcp_user_timeout" not in given:  # a dead server mid-query fails fast too
        params["tcp_user_timeout"] = min(_MAX_TIMEOUT_MS, max(1, math.ceil(timeout_seconds * 1000)))
    conn = psycopg.connect(dsn, **params)
    try:
        # Every statement has a deadline: a held row or table lock, a VACUUM FULL or
        # a hung query becomes an error, never a wait for ever. Cap counters are the
        # only logged writes; losing the last fraction of a second of them in a
        # server crash is fine, waiting for an fsync per send is not.
        with watchdog.guard(conn.fileno()):
            conn.execute("SELECT set_config('lock_timeout', %s, false), "
                         "set_config('statement_timeout', %s, false), "
                         "set_config('synchronous_commit', 'off', false)",
                         _deadlines(timeout_seconds))
    except BaseException:
        conn.close()
        raise
    return conn


def _create_schema(conn: psycopg.Connection[Any], *, repair: bool = False,
                   feed: Callable[[], None] = lambda: None) -> None:
    """Create or update the schema, unless it is in place (``repair``: a part of it was
    found missing, which its mark cannot tell); ``feed`` before each statement (the
    client-side deadline is one statement's)."""
    ensure_schema(conn, table="geotoolkit_gate", mark=sql.MARK, statements=SCHEMA,
                  lock=_SCHEMA_LOCK, repair=repair, feed=feed)
    # Housekeeping, after the schema is committed: a sweep that runs out of time
    # (a row held by someone else) must not turn the first gate call into an error.
    with contextlib.suppress(psycopg.Error):
        _sweep(conn, feed)


def _sweep(conn: psycopg.Connection[Any], feed: Callable[[], None]) -> None:
    for statement in SWEEP:
        feed()
        conn.execute(statement)


def _statement(op: Op) -> tuple[str, dict[str, Any]]:
    """The SQL of one primitive and its parameters."""
    if isinstance(op, Reserve):
        return ("SELECT * FROM geotoolkit_gate_reserve_slot(%(k)s, %(i)s, %(h)s)",
                {"k": op.key, "i": float(op.interval), "h": float(op.horizon)})
    if isinstance(op, Pause):
        return ("SELECT * FROM geotoolkit_gate_publish_pause(%(k)s, %(s)s, %(c)s)",
                {"k": op.key, "s": float(op.seconds), "c": op.cause})
    if isinstance(op, ReadState):
        return sql.STATE, {"k": op.key}
    if isinstance(op, AddCounters):
        return sql.ADD[op.durable], {"k": op.key, "names": [n for n, _ in op.counts],
                                     "deltas": [d for _, d in op.counts], "ttl": op.ttl_seconds}
    if isinstance(op, ReadCounters):
        return sql.READ[op.durable], {"k": op.key, "names": list(op.names)}
    if isinstance(op, SetValue):
        statement = (sql.VALUE_CLAIM if op.only_if_absent
                     else sql.VALUE_SET if op.only_if is None else sql.VALUE_SWAP)
        return statement, {"k": op.key, "n": op.name, "v": op.value, "ttl": op.ttl_seconds,
                           "only": op.only_if}
    if isinstance(op, ReadValues):
        return sql.VALUES, {"k": op.key, "p": op.prefix}
    return sql.VALUE_DELETE, {"k": op.key, "n": op.name, "only": op.only_if}


def _result(op: Op, cursor: psycopg.Cursor[Any]) -> Any:
    rows = cursor.fetchall()
    if isinstance(op, Reserve):
        wait, now, reserved, epoch = rows[0]
        return Slot(float(wait), float(now), bool(reserved), int(epoch))
    if isinstance(op, Pause):
        now, until, previous, epoch = rows[0]
        return Paused(float(now), float(until), float(previous), int(epoch))
    if isinstance(op, ReadState):
        now, tat, until, epoch, cause = rows[0]
        return StoreState(float(now), float(tat), float(until), int(epoch), str(cause))
    if isinstance(op, AddCounters | ReadCounters | ReadValues):
        convert = str if isinstance(op, ReadValues) else int
        return {str(name): convert(value) for name, value in rows}
    return bool(rows)


def _pipelined(conn: psycopg.Connection[Any],
               statements: Sequence[tuple[str, dict[str, Any]]]) -> list[psycopg.Cursor[Any]]:
    """``statements`` in one pipeline: one round trip, one implicit transaction.

    A statement's error is raised as it is. Raised inside the pipeline's block, psycopg
    would log the pipeline's own failure to end ("error ignored terminating ...:
    pipeline aborted") on stderr besides: it is caught there and raised after the block.
    """
    failure: psycopg.Error | None = None
    try:
        with conn.pipeline():
            try:
                cursors = [conn.execute(*statement) for statement in statements]
            except psycopg.Error as exc:
                failure = exc
    except psycopg.Error:
        if failure is None:
            raise
    if failure is not None:
        raise failure
    return cursors


def init_schema(dsn: str, *, timeout_seconds: float = 5.0) -> None:
    """Create (or update) the gate table and functions; idempotent and concurrency-safe."""
    store = PostgresStore(dsn, timeout_seconds=timeout_seconds)
    try:
        store.init_schema()
    finally:
        store.close()


class PostgresStore(Primitives):
    """The primitives on PostgreSQL; see ``PostgresGate``."""

    backend = "postgres"
    blocking = True
    clock: Clock | None = None  # the server's clock_timestamp() is the truth

    def __init__(self, dsn: str, *, timeout_seconds: float = 5.0) -> None:
        check_userinfo(dsn, "PostgreSQL gate")
        self._password = _password(dsn)
        self.dsn = redact(dsn, [self._password])
        reason = _unreadable(dsn)
        if reason is not None:  # raised here: the driver's error, which names it, is not chained
            raise bad_dsn(dsn, "PostgreSQL gate", reason, (self._password,))
        self._dsn = dsn
        self._timeout = check_timeout(timeout_seconds)
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._schema_ready = False
        self._schema_lost = False
        # The server keeps the deadlines above; a server that never answers is cut here.
        self._watchdog = Watchdog(2 * self._timeout + 1.0)
        self._last_sweep = time.monotonic()

    # -- plumbing ---------------------------------------------------------------

    def _fail(self, action: str, exc: BaseException) -> NoReturn:
        message = error_text(exc, [self._password])
        if isinstance(exc, _TIMED_OUT):
            message += f" (after {self._timeout:g} s)"
        elif self._watchdog.fired:
            message = (f"no answer within {self._watchdog.seconds:g} s (a hung server, or a pooler "
                       f"holding the query): {message}")
        elif isinstance(exc, pg_errors.InsufficientPrivilege) and not self._schema_ready:
            message += (" (the gate's tables are missing or from another version, and this user"
                        " may not create them: run `geotoolkit gate init URL` as their owner)")
        raise GateError(f"PostgreSQL gate at {self.dsn} failed to {action}: {message}",
                        backend="postgres", permanent=refused_setting(exc)) from exc

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._watchdog.fired = False
            self._conn = _connect(self._dsn, self._timeout, self._watchdog)
        return self._conn

    def _ready(self, conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
        if not self._schema_ready:
            _create_schema(conn, repair=self._schema_lost, feed=self._watchdog.feed)
            self._schema_ready, self._schema_lost = True, False
        return conn

    def _call(self, action: str, body: Callable[[psycopg.Connection[Any]], T]) -> T:
        with self._lock:
            for attempt in (1, 2):
                dialled = self._conn is not None and not self._conn.closed
                started = time.monotonic()
                try:
                    conn = self._connection()
                    with self._watchdog.guard(conn.fileno()):
                        return body(self._ready(conn))
                except (pg_errors.UndefinedTable, pg_errors.UndefinedFunction) as exc:
                    # Someone dropped the schema under us: recreate it, once (the batch
                    # was one transaction: nothing of it was applied).
                    self._schema_ready, self._schema_lost = False, True
                    if attempt == 2:
                        self._fail(action, exc)
                except (psycopg.Error, OSError) as exc:
                    if isinstance(exc, OSError) or not self._healthy(exc):
                        self._drop_connection()
                    if not redial(attempt=attempt, dialled=dialled, dropped=self._conn is None,
                                  timed_out=isinstance(exc, _TIMED_OUT),
                                  elapsed=time.monotonic() - started, timeout=self._timeout):
                        self._fail(action, exc)
            raise AssertionError("unreachable")  # pragma: no cover

    def _healthy(self, exc: psycopg.Error) -> bool:
        """Whether the connection survives ``exc`` (a statement that timed out: yes)."""
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            return False
        if isinstance(exc, pg_errors.InvalidSqlStatementName):
            # psycopg took a statement for prepared whose Parse the server skipped (it was
            # in a pipeline a lock timeout aborted): every later call on this session fails
            # on it. A new session starts with no prepared statements.
            return False
        return isinstance(exc, _TIMED_OUT) or not isinstance(exc, psycopg.OperationalError)

    def _maybe_sweep(self, conn: psycopg.Connection[Any]) -> None:
        if time.monotonic() - self._last_sweep >= _SWEEP_EVERY:
            self._last_sweep = time.monotonic()
            # Housekeeping only: a failure must not turn a made reservation into an error.
            with contextlib.suppress(psycopg.Error):
                _sweep(conn, self._watchdog.feed)

    # -- the primitives -----------------------------------------------------------

    def init_schema(self) -> None:
        """Create (or update) the tables and functions now; idempotent."""
        self._call("create its schema", lambda conn: _create_schema(conn, feed=self._watchdog.feed))

    def run(self, ops: Sequence[Op]) -> list[Any]:
        if not ops:
            return []

        def body(conn: psycopg.Connection[Any]) -> list[Any]:
            if len(ops) == 1 or not _PIPELINE:
                results = [_result(op, conn.execute(*_statement(op))) for op in ops]
            else:
                cursors = _pipelined(conn, [_statement(op) for op in ops])
                results = [_result(op, cursor) for op, cursor in zip(ops, cursors, strict=True)]
            if any(op.writes for op in ops):
                self._maybe_sweep(conn)
            return results

        return self._call(describe(ops), body)

    def keys(self, prefix: str = "") -> list[str]:
        rows = self._call("list its keys", lambda conn: conn.execute(
            "SELECT DISTINCT key FROM geotoolkit_gate WHERE starts_with(key, %s) ORDER BY key",
            (prefix,)).fetchall())
        return [str(row[0]) for row in rows]

    def close(self) -> None:
        with self._lock:
            self._drop_connection()
            self._watchdog.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self.dsn!r})"


class PostgresGate(FleetGate):
    """Gate state in PostgreSQL tables, shared by every process that can reach it.

    One autocommit connection guarded by a lock, opened on first use and reopened
    after a failure (within the same call when the server ended the session while the
    gate was idle: an admin, a restart, a failover). ``clock`` is this host's clock, used only to estimate the
    server's between replies: the server's ``clock_timestamp()`` is the truth.
    ``timeout_seconds`` bounds connecting and every statement (lock waits
    included). The password (in the URL's user info, ``?password=`` or
    ``password=``) appears in no error or repr.
    """

    store: PostgresStore

    def __init__(self, dsn: str, *, clock: Clock | None = None, timeout_seconds: float = 5.0,
                 aimd: Aimd | None = None) -> None:
        store = PostgresStore(dsn, timeout_seconds=timeout_seconds)
        super().__init__(store, aimd=aimd, clock=clock)
        self.dsn = store.dsn

    def init_schema(self) -> None:
        """Create (or update) the tables and functions now; idempotent."""
        self.store.init_schema()

    def __repr__(self) -> str:
        return f"PostgresGate({self.dsn!r})"
