"""The fleet gate on PostgreSQL: one row per gate key, updated by plpgsql functions.

Every ``acquire`` and ``pause`` is one SQL function call on an autocommit
connection; the function locks the key's row, reads the server's
``clock_timestamp()`` (not ``now()``, frozen at transaction start) and applies the
GCRA step. The table is UNLOGGED with a low fillfactor: the state is ephemeral
pacing, rewritten many times a second by a busy fleet (HOT updates, no WAL).
Rows idle for an hour are deleted opportunistically.

Create the schema ahead of time with ``geotoolkit gate init URL`` (``init_schema``),
or let the first gate call do it.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import psycopg
from psycopg import errors as pg_errors

from geotoolkit.clock import Clock
from geotoolkit.errors import ConfigurationError, GateError
from geotoolkit.gate import redact_url
from geotoolkit.gate.base import GateState, _check

__all__ = ["PostgresGate", "init_schema", "redact_dsn"]

T = TypeVar("T")

#: Key of the transaction-level advisory lock serialising schema creation.
_SCHEMA_LOCK = 0x6765_6F74_6B67  # "geotkg"

#: How often (seconds, per gate instance) idle rows are swept.
_SWEEP_EVERY = 600.0

#: Stand-in for an infinite horizon.
_FAR = 1e15

_SCHEMA = [
    """
    CREATE UNLOGGED TABLE IF NOT EXISTS geotoolkit_gate (
        key text PRIMARY KEY,
        tat double precision NOT NULL DEFAULT 0,
        pause_until double precision NOT NULL DEFAULT 0,
        updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
    ) WITH (fillfactor = 50)
    """,
    # The GCRA step, reporting the server's "now" as well: slot = now + wait.
    """
    CREATE OR REPLACE FUNCTION geotoolkit_gate_reserve(
        p_key text, p_interval double precision, p_horizon double precision,
        OUT wait double precision, OUT now double precision)
    LANGUAGE plpgsql AS $$
    DECLARE
        v_tat double precision;
        v_until double precision;
        v_slot double precision;
    BEGIN
        SELECT g.tat, g.pause_until INTO v_tat, v_until
          FROM geotoolkit_gate g WHERE g.key = p_key FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO geotoolkit_gate (key) VALUES (p_key) ON CONFLICT (key) DO NOTHING;
            SELECT g.tat, g.pause_until INTO v_tat, v_until
              FROM geotoolkit_gate g WHERE g.key = p_key FOR UPDATE;
        END IF;
        -- read the clock once the row is ours
        now := extract(epoch FROM clock_timestamp())::double precision;
        v_slot := greatest(now, v_tat, v_until);
        wait := v_slot - now;
        IF wait <= p_horizon THEN
            UPDATE geotoolkit_gate
               SET tat = v_slot + p_interval, updated_at = clock_timestamp()
             WHERE key = p_key;
        END IF;
    END
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION geotoolkit_gate_acquire(
        p_key text, p_interval double precision, p_horizon double precision)
    RETURNS double precision
    LANGUAGE sql AS $$
        SELECT r.wait FROM geotoolkit_gate_reserve(p_key, p_interval, p_horizon) r
    $$
    """,
    # Publish a pause (never shortening one) and push tat to it; return the
    # remaining seconds.
    """
    CREATE OR REPLACE FUNCTION geotoolkit_gate_pause(p_key text, p_seconds double precision)
    RETURNS double precision
    LANGUAGE plpgsql AS $$
    DECLARE
        v_now double precision;
        v_until double precision;
    BEGIN
        SELECT g.pause_until INTO v_until
          FROM geotoolkit_gate g WHERE g.key = p_key FOR UPDATE;
        v_now := extract(epoch FROM clock_timestamp())::double precision;
        INSERT INTO geotoolkit_gate AS g (key, tat, pause_until, updated_at)
        VALUES (p_key, v_now + greatest(p_seconds, 0), v_now + greatest(p_seconds, 0),
                clock_timestamp())
        ON CONFLICT (key) DO UPDATE
           SET pause_until = greatest(g.pause_until, excluded.pause_until),
               tat = greatest(g.tat, g.pause_until, excluded.pause_until),
               updated_at = excluded.updated_at
        RETURNING g.pause_until INTO v_until;
        RETURN v_until - v_now;
    END
    $$
    """,
]

# Idle for an hour and no pause or reservation still pending.
_SWEEP = """
    DELETE FROM geotoolkit_gate
     WHERE updated_at < clock_timestamp() - interval '1 hour'
       AND greatest(tat, pause_until) < extract(epoch FROM clock_timestamp())
"""

_STATE = """
    SELECT extract(epoch FROM clock_timestamp())::double precision,
           coalesce((SELECT tat FROM geotoolkit_gate WHERE key = %(k)s), 0),
           coalesce((SELECT pause_until FROM geotoolkit_gate WHERE key = %(k)s), 0)
"""

_PASSWORD_KV = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact_dsn(dsn: str) -> str:
    """Hide the password of a PostgreSQL URL or ``key=value`` DSN.

    >>> redact_dsn("host=db password=hunter2 dbname=test")
    'host=db password=*** dbname=test'
    """
    if "://" in dsn:
        return redact_url(dsn)
    return _PASSWORD_KV.sub(r"\1***", dsn)


def _password(dsn: str) -> str | None:
    try:
        value = psycopg.conninfo.conninfo_to_dict(dsn).get("password")
    except psycopg.Error:
        return None
    return str(value) if value else None


def _connect(dsn: str, timeout_seconds: float) -> psycopg.Connection[Any]:
    params: dict[str, Any] = {"autocommit": True, "application_name": "geotoolkit-gate"}
    given = psycopg.conninfo.conninfo_to_dict(dsn)
    if "connect_timeout" not in given:
        params["connect_timeout"] = max(1, math.ceil(timeout_seconds))
    if "tcp_user_timeout" not in given:  # a dead server mid-query fails fast too
        params["tcp_user_timeout"] = max(1, math.ceil(timeout_seconds * 1000))
    return psycopg.connect(dsn, **params)


def _create_schema(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute(_SWEEP)


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
    the server's ``clock_timestamp()`` is the truth.
    """

    backend = "postgres"
    blocking = True

    def __init__(self, dsn: str, *, clock: Clock | None = None, timeout_seconds: float = 5.0) -> None:
        del clock  # the server clock is the truth
        self.dsn = redact_dsn(dsn)
        try:
            psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            raise ConfigurationError(f"bad PostgreSQL gate DSN {self.dsn!r}") from exc
        self._dsn = dsn
        self._password = _password(dsn)
        self._timeout = timeout_seconds
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._schema_ready = False
        self._last_sweep = time.monotonic()

    # -- plumbing ---------------------------------------------------------------

    def _fail(self, action: str, exc: BaseException) -> NoReturn:
        message = str(exc).strip()
        if self._password:
            message = message.replace(self._password, "***")
        raise GateError(
            f"PostgreSQL gate at {self.dsn} failed to {action}: {type(exc).__name__}: {message}",
            backend="postgres",
        ) from exc

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
                    if self._conn is None or self._conn.closed or isinstance(exc, psycopg.OperationalError):
                        self._drop_connection()
                    self._fail(action, exc)
                except OSError as exc:
                    self._drop_connection()
                    self._fail(action, exc)
            raise AssertionError("unreachable")  # pragma: no cover

    def _maybe_sweep(self, conn: psycopg.Connection[Any]) -> None:
        if time.monotonic() - self._last_sweep >= _SWEEP_EVERY:
            self._last_sweep = time.monotonic()
            # Housekeeping only: a failure must not turn a made reservation into an error.
            with contextlib.suppress(psycopg.Error):
                conn.execute(_SWEEP)

    # -- the Gate protocol ------------------------------------------------------

    def init_schema(self) -> None:
        """Create (or update) the table and functions now; idempotent."""

        def body(conn: psycopg.Connection[Any]) -> None:
            _create_schema(conn)

        self._call("create its schema", body)

    def reserve(self, key: str, interval: float, horizon: float = 60.0) -> tuple[float, float]:
        """``acquire``, also returning the server's "now": ``(wait, now)``; slot = now + wait."""
        _check(interval)
        if math.isnan(horizon):
            raise ConfigurationError("the gate horizon must be a number")
        horizon = max(-_FAR, min(_FAR, horizon))

        def body(conn: psycopg.Connection[Any]) -> tuple[float, float]:
            row = conn.execute(
                "SELECT wait, now FROM geotoolkit_gate_reserve(%s, %s, %s)",
                (key, float(interval), float(horizon)),
            ).fetchone()
            assert row is not None
            self._maybe_sweep(conn)
            return float(row[0]), float(row[1])

        return self._call("acquire", body)

    def acquire(self, key: str, interval: float, horizon: float = 60.0) -> float:
        return self.reserve(key, interval, horizon)[0]

    def pause(self, key: str, seconds: float) -> float:
        _check(0.0, seconds)

        def body(conn: psycopg.Connection[Any]) -> float:
            row = conn.execute("SELECT geotoolkit_gate_pause(%s, %s)", (key, float(seconds))).fetchone()
            assert row is not None
            return float(row[0])

        return self._call("pause", body)

    def state(self, key: str) -> GateState:
        def body(conn: psycopg.Connection[Any]) -> GateState:
            row = conn.execute(_STATE, {"k": key}).fetchone()
            assert row is not None
            return GateState(now=float(row[0]), tat=float(row[1]), pause_until=float(row[2]))

        return self._call("read the state", body)

    def close(self) -> None:
        with self._lock:
            self._drop_connection()

    def __repr__(self) -> str:
        return f"PostgresGate({self.dsn!r})"
