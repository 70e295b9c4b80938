"""The fleet gate on PostgreSQL: one row per gate key, updated by plpgsql functions.

Every gate call is one SQL function call on an autocommit connection (schema in
``_postgres_sql``); the function locks the key's row, reads the server's
``clock_timestamp()`` (not ``now()``, frozen at transaction start) and applies the
step. The state tables are UNLOGGED with a low fillfactor: ephemeral pacing,
rewritten many times a second by a busy fleet (HOT updates, no WAL); the cap
counters are logged. Rows idle for an hour are deleted opportunistically; cap
periods follow the server's UTC calendar.

Create the schema ahead of time with ``geotoolkit gate init URL`` (``init_schema``),
or let the first gate call do it.

Nothing waits forever: the session has a ``statement_timeout`` of
``timeout_seconds`` and a ``lock_timeout`` of 90 % of it (besides
``connect_timeout`` and ``tcp_user_timeout``), so a row held by another session
(``SELECT ... FOR UPDATE`` left open), a ``LOCK TABLE``, a ``VACUUM FULL`` or an
``ALTER`` turns a gate call into a ``GateError`` after about that long
(``FallbackGate`` then paces locally until the lock is gone).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import psycopg
from psycopg import errors as pg_errors

from geotoolkit.clock import Clock
from geotoolkit.errors import ConfigurationError, GateError
from geotoolkit.gate import _postgres_sql as sql
from geotoolkit.gate._postgres_sql import SCHEMA, SWEEP
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
    _check,
    check_timeout,
    check_value,
)
from geotoolkit.gate.fleet import cap_reached
from geotoolkit.redact import redact

__all__ = ["PostgresGate", "init_schema"]

T = TypeVar("T")

#: Key of the transaction-level advisory lock serialising schema creation.
_SCHEMA_LOCK = 0x6765_6F74_6B67  # "geotkg"

#: How often (seconds, per gate instance) idle rows are swept.
_SWEEP_EVERY = 600.0

#: Stand-in for an infinite horizon.
_FAR = 1e15

_STATE = """
    SELECT extract(epoch FROM clock_timestamp())::double precision,
           coalesce((SELECT tat FROM geotoolkit_gate WHERE key = %(k)s), 0),
           coalesce((SELECT pause_until FROM geotoolkit_gate WHERE key = %(k)s), 0),
           coalesce((SELECT epoch FROM geotoolkit_gate WHERE key = %(k)s), 0)
"""

_STATS = """
    SELECT s.* FROM (SELECT extract(epoch FROM clock_timestamp())::double precision AS n) c
      LEFT JOIN geotoolkit_gate g ON g.key = %(k)s
     CROSS JOIN LATERAL geotoolkit_gate_stats_of(
           %(k)s, c.n, g.b_stamp, g.b_counts, coalesce(g.factor, 1.0),
           coalesce(g.pause_until, 0.0), g.cause) s
"""

_USAGE = """
    SELECT p.label, coalesce(u.used, 0), p.resets_at
      FROM geotoolkit_gate_period(extract(epoch FROM clock_timestamp())::double precision,
                                  %(p)s) p
      LEFT JOIN geotoolkit_gate_usage u ON u.key = %(k)s AND u.period = p.label
"""

#: Errors of a statement that ran out of time (the connection itself is fine).
_TIMED_OUT = (pg_errors.LockNotAvailable, pg_errors.QueryCanceled)


def _password(dsn: str) -> str | None:
    try:
        value = psycopg.conninfo.conninfo_to_dict(dsn).get("password")
    except psycopg.Error:
        return None
    return str(value) if value else None


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


def _error_text(exc: BaseException, secrets: list[str | None]) -> str:
    """``exc`` as redacted text, without PostgreSQL's CONTEXT lines (the SQL that ran)."""
    text = str(exc).split("\nCONTEXT:", 1)[0].strip()
    return redact(f"{type(exc).__name__}: {text}", secrets)


def _connect(dsn: str, timeout_seconds: float) -> psycopg.Connection[Any]:
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
        conn.execute("SELECT set_config('lock_timeout', %s, false), "
                     "set_config('statement_timeout', %s, false), "
                     "set_config('synchronous_commit', 'off', false)", _deadlines(timeout_seconds))
    except BaseException:
        conn.close()
        raise
    return conn


def _create_schema(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        for statement in SCHEMA:
            conn.execute(statement)
    # Housekeeping, after the schema is committed: a sweep that runs out of time
    # (a row held by someone else) must not turn the first gate call into an error.
    with contextlib.suppress(psycopg.Error):
        _sweep(conn)


def _sweep(conn: psycopg.Connection[Any]) -> None:
    for statement in SWEEP:
        conn.execute(statement)


def _counts(report: Report | None) -> tuple[int, int, int]:
    report = report or Report()
    return report.requests, report.successes, report.throttled


def _fleet_stats(row: Any) -> FleetStats:
    now, window, requests, successes, throttled, factor, until, cause, workers = row
    return FleetStats(
        now=float(now), window_seconds=float(window), requests=int(requests),
        successes=int(successes), throttled=int(throttled), rate_factor=float(factor),
        pause_until=float(until), pause_cause=str(cause or ""), workers_active=int(workers))


def init_schema(dsn: str, *, timeout_seconds: float = 5.0) -> None:
    """Create (or update) the gate table and functions; idempotent and concurrency-safe."""
    gate = PostgresGate(dsn, timeout_seconds=timeout_seconds)
    try:
        gate.init_schema()
    finally:
        gate.close()


class PostgresGate:
    """Gate state in a PostgreSQL table, shared by every process that can reach it.

    One autocommit connection guarded by a lock, opened on first use and reopened
    after a failure. ``clock`` is accepted for a uniform signature and ignored:
    the server's ``clock_timestamp()`` is the truth. ``timeout_seconds`` bounds
    connecting and every statement (lock waits included). The password (in the
    URL's user info, ``?password=`` or ``password=``) appears in no error or repr.
    """

    backend = "postgres"
    blocking = True

    def __init__(self, dsn: str, *, clock: Clock | None = None, timeout_seconds: float = 5.0,
                 aimd: Aimd | None = None) -> None:
        del clock  # the server clock is the truth
        self.aimd = aimd or Aimd()
        self._password = _password(dsn)
        self.dsn = redact(dsn, [self._password])
        try:
            psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            raise ConfigurationError(f"bad PostgreSQL gate DSN {self.dsn!r}") from exc
        self._dsn = dsn
        self._timeout = check_timeout(timeout_seconds)
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._schema_ready = False
        self._last_sweep = time.monotonic()

    # -- plumbing ---------------------------------------------------------------

    def _fail(self, action: str, exc: BaseException) -> NoReturn:
        message = _error_text(exc, [self._password])
        if isinstance(exc, _TIMED_OUT):
            message += f" (after {self._timeout:g} s)"
        raise GateError(f"PostgreSQL gate at {self.dsn} failed to {action}: {message}",
                        backend="postgres") from exc

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = _connect(self._dsn, self._timeout)
        if not self._schema_ready:
            _create_schema(self._conn)
            self._schema_ready = True
        return self._conn

    def _call(self, action: str, body: Callable[[psycopg.Connection[Any]], T]) -> T:
        with self._lock:
            for attempt in (1, 2):
                try:
                    return body(self._connection())
                except (pg_errors.UndefinedTable, pg_errors.UndefinedFunction) as exc:
                    # Someone dropped the schema under us: recreate it, once.
                    self._schema_ready = False
                    if attempt == 2:
                        self._fail(action, exc)
                except psycopg.Error as exc:
                    if not self._healthy(exc):
                        self._drop_connection()
                    self._fail(action, exc)
                except OSError as exc:
                    self._drop_connection()
                    self._fail(action, exc)
            raise AssertionError("unreachable")  # pragma: no cover

    def _healthy(self, exc: psycopg.Error) -> bool:
        """Whether the connection survives ``exc`` (a statement that timed out: yes)."""
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            return False
        return isinstance(exc, _TIMED_OUT) or not isinstance(exc, psycopg.OperationalError)

    def _maybe_sweep(self, conn: psycopg.Connection[Any]) -> None:
        if time.monotonic() - self._last_sweep >= _SWEEP_EVERY:
            self._last_sweep = time.monotonic()
            # Housekeeping only: a failure must not turn a made reservation into an error.
            with contextlib.suppress(psycopg.Error):
                _sweep(conn)

    # -- the Gate protocol ------------------------------------------------------

    def init_schema(self) -> None:
        """Create (or update) the table and functions now; idempotent."""

        def body(conn: psycopg.Connection[Any]) -> None:
            _create_schema(conn)

        self._call("create its schema", body)

    def reserve(self, key: str, interval: float, horizon: float = 60.0, *,
                report: Report | None = None, cap: Cap | None = None) -> Reservation:
        _check(interval)
        if math.isnan(horizon):
            raise ConfigurationError("the gate horizon must be a number")
        horizon = max(-_FAR, min(_FAR, horizon))
        args = (key, float(interval), float(horizon), *_counts(report),
                self.aimd.increase_per_second, cap.limit if cap is not None else None,
                cap.period if cap is not None else "day")

        def body(conn: psycopg.Connection[Any]) -> Any:
            row = conn.execute(
                "SELECT * FROM geotoolkit_gate_reserve(%s, %s, %s, %s, %s, %s, %s, %s, %s)", args,
            ).fetchone()
            self._maybe_sweep(conn)
            return row

        wait, now, reserved, epoch, factor, used, label, resets, capped = self._call("acquire", body)
        usage = Usage(str(label), int(used), float(resets)) if cap is not None else None
        if capped:
            assert cap is not None and usage is not None
            raise cap_reached(cap, usage)
        return Reservation(float(wait), float(now), bool(reserved), int(epoch), float(factor), usage)

    def acquire(self, key: str, interval: float, horizon: float = 60.0) -> float:
        return self.reserve(key, interval, horizon).wait

    def pause(self, key: str, seconds: float, *, cause: str = "", rate_limited: bool = False,
              report: Report | None = None) -> float:
        _check(0.0, seconds)
        a = self.aimd
        args = (key, float(seconds), cause, rate_limited, a.decrease, a.min_factor,
                a.hold_seconds, a.recent_seconds, *_counts(report))

        def body(conn: psycopg.Connection[Any]) -> float:
            row = conn.execute(
                "SELECT geotoolkit_gate_pause(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", args,
            ).fetchone()
            assert row is not None
            return float(row[0])

        return self._call("pause", body)

    def state(self, key: str) -> GateState:
        def body(conn: psycopg.Connection[Any]) -> GateState:
            row = conn.execute(_STATE, {"k": key}).fetchone()
            assert row is not None
            return GateState(now=float(row[0]), tat=float(row[1]), pause_until=float(row[2]),
                             epoch=int(row[3]))

        return self._call("read the state", body)

    def record(self, key: str, report: Report, *, worker: str | None = None,
               leaving: bool = False) -> FleetStats:
        args = (key, *_counts(report), self.aimd.increase_per_second, worker, leaving,
                HEARTBEAT_SECONDS)

        def body(conn: psycopg.Connection[Any]) -> FleetStats:
            return _fleet_stats(conn.execute(
                "SELECT * FROM geotoolkit_gate_record(%s, %s, %s, %s, %s, %s, %s, %s)", args,
            ).fetchone())

        return self._call("record", body)

    def stats(self, key: str) -> FleetStats:
        return self._call("read the stats",
                          lambda conn: _fleet_stats(conn.execute(_STATS, {"k": key}).fetchone()))

    def usage(self, key: str, period: Period = "day") -> Usage:
        def body(conn: psycopg.Connection[Any]) -> Usage:
            row = conn.execute(_USAGE, {"k": key, "p": period}).fetchone()
            assert row is not None
            return Usage(str(row[0]), int(row[1]), float(row[2]))

        return self._call("read the usage", body)

    def set_value(self, key: str, name: str, value: str, *, ttl_seconds: float,
                  only_if_absent: bool = False) -> bool:
        params = {"k": key, "n": name, "v": value, "ttl": check_value(name, value, ttl_seconds)}
        statement = sql.VALUE_CLAIM if only_if_absent else sql.VALUE_SET
        return self._call("set a value",
                          lambda conn: conn.execute(statement, params).fetchone() is not None)

    def values(self, key: str, prefix: str = "") -> dict[str, str]:
        rows = self._call("read the values",
                          lambda conn: conn.execute(sql.VALUES, {"k": key, "p": prefix}).fetchall())
        return {str(name): str(value) for name, value in rows}

    def delete_value(self, key: str, name: str, *, only_if: str | None = None) -> bool:
        params = {"k": key, "n": name, "only": only_if}
        return self._call("delete a value",
                          lambda conn: conn.execute(sql.VALUE_DELETE, params).fetchone() is not None)

    def close(self) -> None:
        with self._lock:
            self._drop_connection()

    def __repr__(self) -> str:
        return f"PostgresGate({self.dsn!r})"
