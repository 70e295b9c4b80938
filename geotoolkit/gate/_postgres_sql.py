"""The PostgreSQL gate's schema and its primitives: one statement each, on ``clock_timestamp()``.

Tables: ``geotoolkit_gate`` (one row per key: tat, pause_until, epoch, cause),
``geotoolkit_gate_counters`` (ephemeral counters: stats buckets) and
``geotoolkit_gate_values`` (shared values) are UNLOGGED with a low fillfactor:
ephemeral state rewritten many times a second (HOT updates, no WAL). The
durable counters (cap counts: a crash must not reset a billed quota) live in
the logged ``geotoolkit_gate_usage``, a counter's name in its ``period``
column, as the cap counters of earlier versions did: their counts carry over.

Only two plpgsql functions remain, for the two primitives that read and write
the pacing row under its lock: ``geotoolkit_gate_reserve_slot`` and
``geotoolkit_gate_publish_pause``. A database from an earlier version is
upgraded in place (columns added); what only earlier versions use (their
functions, ``geotoolkit_gate_workers``, the AIMD and bucket columns) is left
alone, so an older process on the same database keeps working.
"""

from __future__ import annotations

from geotoolkit.pgschema import schema_mark

__all__ = ["ADD", "MARK", "READ", "SCHEMA", "STATE", "SWEEP", "VALUES", "VALUE_CLAIM",
           "VALUE_DELETE", "VALUE_SET", "VALUE_SWAP"]

_NOW = "extract(epoch FROM clock_timestamp())::double precision"


def _add_columns(table: str, columns: dict[str, str]) -> str:
    """Add missing columns without taking the table lock when there is nothing to do."""
    checks = " OR ".join(
        f"NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = "
        f"current_schema() AND table_name = '{table}' AND column_name = '{name}')"
        for name in columns)
    adds = ", ".join(f"ADD COLUMN IF NOT EXISTS {name} {kind}" for name, kind in columns.items())
    return f"DO $$ BEGIN IF {checks} THEN ALTER TABLE {table} {adds}; END IF; END $$"


SCHEMA = [
    """
    CREATE UNLOGGED TABLE IF NOT EXISTS geotoolkit_gate (
        key text PRIMARY KEY,
        tat double precision NOT NULL DEFAULT 0,
        pause_until double precision NOT NULL DEFAULT 0,
        epoch bigint NOT NULL DEFAULT 0,
        cause text NOT NULL DEFAULT '',
        updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
    ) WITH (fillfactor = 50)
    """,
    _add_columns("geotoolkit_gate", {"epoch": "bigint NOT NULL DEFAULT 0",
                                     "cause": "text NOT NULL DEFAULT ''"}),
    """
    CREATE UNLOGGED TABLE IF NOT EXISTS geotoolkit_gate_counters (
        key text NOT NULL,
        name text NOT NULL,
        value bigint NOT NULL,
        expires_at double precision NOT NULL,
        PRIMARY KEY (key, name)
    ) WITH (fillfactor = 50)
    """,
    """
    CREATE TABLE IF NOT EXISTS geotoolkit_gate_usage (
        key text NOT NULL,
        period text NOT NULL,
        used bigint NOT NULL DEFAULT 0,
        updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        expires_at double precision,
        PRIMARY KEY (key, period)
    )
    """,
    _add_columns("geotoolkit_gate_usage", {"expires_at": "double precision"}),
    """
    CREATE UNLOGGED TABLE IF NOT EXISTS geotoolkit_gate_values (
        key text NOT NULL,
        name text NOT NULL,
        value text NOT NULL,
        expires_at double precision NOT NULL,
        PRIMARY KEY (key, name)
    ) WITH (fillfactor = 50)
    """,
    # Lock a key's row (creating it), for the rest of the transaction.
    """
    CREATE OR REPLACE FUNCTION geotoolkit_gate_lock(p_key text) RETURNS geotoolkit_gate
    LANGUAGE plpgsql AS $$
    DECLARE g geotoolkit_gate%ROWTYPE;
    BEGIN
        SELECT * INTO g FROM geotoolkit_gate WHERE key = p_key FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO geotoolkit_gate (key) VALUES (p_key) ON CONFLICT (key) DO NOTHING;
            SELECT * INTO g FROM geotoolkit_gate WHERE key = p_key FOR UPDATE;
        END IF;
        RETURN g;
    END $$
    """,
    # GCRA with the pause epoch: slot = max(now, tat, pause_until), reserved within the horizon.
    f"""
    CREATE OR REPLACE FUNCTION geotoolkit_gate_reserve_slot(
        p_key text, p_interval double precision, p_horizon double precision,
        OUT o_wait double precision, OUT o_now double precision, OUT o_reserved boolean,
        OUT o_epoch bigint)
    LANGUAGE plpgsql AS $$
    DECLARE
        g geotoolkit_gate%ROWTYPE := geotoolkit_gate_lock(p_key);
        v_slot double precision;
    BEGIN
        o_now := {_NOW};  -- read once the row is ours
        v_slot := greatest(o_now, g.tat, g.pause_until);
        o_wait := v_slot - o_now;
        o_reserved := o_wait <= p_horizon;
        o_epoch := g.epoch;
        IF o_reserved THEN
            UPDATE geotoolkit_gate SET tat = v_slot + p_interval, updated_at = clock_timestamp()
             WHERE key = p_key;
        END IF;
    END $$
    """,
    # Publish a pause, never shortening one: a new one opens an epoch and restarts tat at
    # its end, extending a running one pushes tat.
    f"""
    CREATE OR REPLACE FUNCTION geotoolkit_gate_publish_pause(
        p_key text, p_seconds double precision, p_cause text,
        OUT o_now double precision, OUT o_until double precision,
        OUT o_previous double precision, OUT o_epoch bigint)
    LANGUAGE plpgsql AS $$
    DECLARE
        g geotoolkit_gate%ROWTYPE := geotoolkit_gate_lock(p_key);
    BEGIN
        o_now := {_NOW};
        o_previous := g.pause_until;
        o_until := greatest(g.pause_until, o_now + greatest(p_seconds, 0));
        o_epoch := g.epoch;
        IF o_until > o_previous THEN
            IF o_now >= o_previous THEN
                g.tat := o_until;
                o_epoch := o_epoch + 1;
            ELSE
                g.tat := greatest(g.tat, o_until);
            END IF;
            UPDATE geotoolkit_gate
               SET tat = g.tat, pause_until = o_until, epoch = o_epoch, cause = p_cause,
                   updated_at = clock_timestamp()
             WHERE key = p_key;
        END IF;
    END $$
    """,
]

#: The comment ``geotoolkit_gate`` carries once ``SCHEMA`` ran (``geotoolkit.pgschema``): a
#: schema in place (``geotoolkit gate init``) is used as it is, by a user who may not create
#: or replace anything, and any change to the statements brings it up to date.
MARK = schema_mark("geotoolkit gate schema", SCHEMA)

#: Housekeeping: idle pacing rows, expired counters and values, cap counts of long-gone periods.
SWEEP = [
    f"""DELETE FROM geotoolkit_gate
        WHERE updated_at < clock_timestamp() - interval '1 hour'
          AND greatest(tat, pause_until) < {_NOW}""",
    f"DELETE FROM geotoolkit_gate_counters WHERE expires_at < {_NOW}",
    f"""DELETE FROM geotoolkit_gate_usage
        WHERE expires_at < {_NOW}
           OR (expires_at IS NULL AND updated_at < clock_timestamp() - interval '62 days')""",
    f"DELETE FROM geotoolkit_gate_values WHERE expires_at < {_NOW}",
]

#: The pacing state (params: k). One row: now, tat, pause_until, epoch, cause.
STATE = f"""
    SELECT c.n, coalesce(g.tat, 0), coalesce(g.pause_until, 0), coalesce(g.epoch, 0),
           coalesce(g.cause, '')
      FROM (SELECT {_NOW} AS n) c LEFT JOIN geotoolkit_gate g ON g.key = %(k)s
"""

#: Counter tables: durable -> (table, name column, value column).
_COUNTERS = {False: ("geotoolkit_gate_counters", "name", "value"),
             True: ("geotoolkit_gate_usage", "period", "used")}


def _add(durable: bool) -> str:
    table, name, value = _COUNTERS[durable]
    touched = ", updated_at = clock_timestamp()" if durable else ""
    return f"""
    INSERT INTO {table} AS t (key, {name}, {value}, expires_at)
    SELECT %(k)s, u.name, u.delta, {_NOW} + %(ttl)s
      FROM unnest(%(names)s::text[], %(deltas)s::bigint[]) WITH ORDINALITY AS u(name, delta, i)
     ORDER BY u.i
    ON CONFLICT (key, {name}) DO UPDATE
       SET {value} = CASE WHEN t.expires_at <= {_NOW} THEN excluded.{value}
                          ELSE t.{value} + excluded.{value} END,
           expires_at = excluded.expires_at{touched}
    RETURNING {name}, {value}
    """


def _read(durable: bool) -> str:
    table, name, value = _COUNTERS[durable]
    return f"""
    SELECT {name}, {value} FROM {table}
     WHERE key = %(k)s AND {name} = ANY(%(names)s::text[])
       AND (expires_at IS NULL OR expires_at > {_NOW})
    """


#: Add to counters, in name order (params: k, names, deltas, ttl); rows back: name, new value.
ADD = {durable: _add(durable) for durable in (False, True)}
#: Read the live counters among names (params: k, names); rows back: name, value.
READ = {durable: _read(durable) for durable in (False, True)}

#: Store a shared value, replacing any (params: k, n, v, ttl). One row back.
VALUE_SET = f"""
    INSERT INTO geotoolkit_gate_values AS v (key, name, value, expires_at)
    VALUES (%(k)s, %(n)s, %(v)s, {_NOW} + %(ttl)s)
    ON CONFLICT (key, name) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
    RETURNING true
"""

#: Store it only if no live value exists: a row back when stored. A concurrent
#: claimant waits for the first one's insert, then sees its live value: one wins.
VALUE_CLAIM = f"""
    INSERT INTO geotoolkit_gate_values AS v (key, name, value, expires_at)
    VALUES (%(k)s, %(n)s, %(v)s, {_NOW} + %(ttl)s)
    ON CONFLICT (key, name) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
     WHERE v.expires_at <= {_NOW}
    RETURNING true
"""

#: Compare-and-set: replace a live value only while it holds %(only)s. A row back when stored.
VALUE_SWAP = f"""
    UPDATE geotoolkit_gate_values SET value = %(v)s, expires_at = {_NOW} + %(ttl)s
     WHERE key = %(k)s AND name = %(n)s AND value = %(only)s::text AND expires_at > {_NOW}
    RETURNING true
"""

#: The live values of a key whose names start with a prefix (params: k, p).
VALUES = f"""
    SELECT name, value FROM geotoolkit_gate_values
     WHERE key = %(k)s AND starts_with(name, %(p)s) AND expires_at > {_NOW}
"""

#: Delete a live value, only if it holds %(only)s when that is not NULL. A row back if deleted.
VALUE_DELETE = f"""
    DELETE FROM geotoolkit_gate_values
     WHERE key = %(k)s AND name = %(n)s AND expires_at > {_NOW}
       AND (%(only)s::text IS NULL OR value = %(only)s::text)
    RETURNING true
"""
