"""The schema and functions of the PostgreSQL gate; each gate call is one function call.

They mirror ``geotoolkit.gate.fleet`` (the contract suite checks that they agree).
``geotoolkit_gate`` (one row per key: pacing, AIMD, one-second buckets as arrays)
and ``geotoolkit_gate_workers`` (heartbeats) are UNLOGGED with a low fillfactor:
ephemeral state rewritten many times a second (HOT updates, no WAL). The cap
counters in ``geotoolkit_gate_usage`` are logged -- a crash must not reset a
billed quota -- and written with ``synchronous_commit = off`` by the gate's
session (a crash may lose the last fraction of a second of counts). Shared
values live in ``geotoolkit_gate_values`` (UNLOGGED: a breaker's state is
ephemeral), one statement per call, expiring on ``clock_timestamp()``.
"""

from __future__ import annotations

from geotoolkit.gate.fleet import BUCKET_SECONDS, CREDIT_SECONDS, SLOTS, WINDOW_SECONDS

__all__ = ["SCHEMA", "SWEEP", "VALUES", "VALUE_CLAIM", "VALUE_DELETE", "VALUE_SET"]

_TABLES = [
    """
    CREATE UNLOGGED TABLE IF NOT EXISTS geotoolkit_gate (
        key text PRIMARY KEY,
        tat double precision NOT NULL DEFAULT 0,
        pause_until double precision NOT NULL DEFAULT 0,
        updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
    ) WITH (fillfactor = 50)
    """,
    # Columns added after the first release: upgrade a table in place, without
    # taking the table lock when there is nothing to do.
    """
    DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                        WHERE table_schema = current_schema()
                          AND table_name = 'geotoolkit_gate' AND column_name = 'b_counts') THEN
            ALTER TABLE geotoolkit_gate
                ADD COLUMN IF NOT EXISTS epoch bigint NOT NULL DEFAULT 0,
                ADD COLUMN IF NOT EXISTS cause text NOT NULL DEFAULT '',
                ADD COLUMN IF NOT EXISTS factor double precision NOT NULL DEFAULT 1,
                ADD COLUMN IF NOT EXISTS decreased_at double precision,
                ADD COLUMN IF NOT EXISTS throttled_at double precision,
                ADD COLUMN IF NOT EXISTS increased_at double precision,
                ADD COLUMN IF NOT EXISTS b_stamp bigint[],
                ADD COLUMN IF NOT EXISTS b_counts integer[];
        END IF;
    END $$
    """,
    """
    CREATE UNLOGGED TABLE IF NOT EXISTS geotoolkit_gate_workers (
        key text NOT NULL,
        worker text NOT NULL,
        expires_at double precision NOT NULL,
        PRIMARY KEY (key, worker)
    ) WITH (fillfactor = 50)
    """,
    """
    CREATE TABLE IF NOT EXISTS geotoolkit_gate_usage (
        key text NOT NULL,
        period text NOT NULL,
        used bigint NOT NULL DEFAULT 0,
        updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        PRIMARY KEY (key, period)
    )
    """,
    """
    CREATE UNLOGGED TABLE IF NOT EXISTS geotoolkit_gate_values (
        key text NOT NULL,
        name text NOT NULL,
        value text NOT NULL,
        expires_at double precision NOT NULL,
        PRIMARY KEY (key, name)
    ) WITH (fillfactor = 50)
    """,
]

_HELPERS = [
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
    """
    CREATE OR REPLACE FUNCTION geotoolkit_gate_count(
        INOUT stamps bigint[], INOUT counts integer[], p_now double precision,
        p_requests integer, p_successes integer, p_throttled integer)
    LANGUAGE plpgsql IMMUTABLE AS $$
    DECLARE
        v_stamp bigint := floor(p_now / __BUCKET__);
        v_i integer := (floor(p_now / __BUCKET__)::bigint % __SLOTS__)::integer + 1;
    BEGIN
        IF p_requests + p_successes + p_throttled <= 0 THEN RETURN; END IF;
        stamps := coalesce(stamps, array_fill(NULL::bigint, ARRAY[__SLOTS__]));
        counts := coalesce(counts, array_fill(0, ARRAY[3 * __SLOTS__]));
        IF stamps[v_i] IS DISTINCT FROM v_stamp THEN
            stamps[v_i] := v_stamp;
            counts[3 * v_i - 2] := 0;
            counts[3 * v_i - 1] := 0;
            counts[3 * v_i] := 0;
        END IF;
        counts[3 * v_i - 2] := counts[3 * v_i - 2] + p_requests;
        counts[3 * v_i - 1] := counts[3 * v_i - 1] + p_successes;
        counts[3 * v_i] := counts[3 * v_i] + p_throttled;
    END $$
    """,
    # Additive increase: credit the time since the last credit, if answers succeeded.
    """
    CREATE OR REPLACE FUNCTION geotoolkit_gate_credit(
        INOUT factor double precision, INOUT increased_at double precision,
        p_now double precision, p_successes integer, p_increase double precision)
    LANGUAGE plpgsql IMMUTABLE AS $$
    BEGIN
        IF p_successes <= 0 THEN RETURN; END IF;
        IF increased_at IS NULL THEN increased_at := p_now; RETURN; END IF;
        IF p_now <= increased_at THEN RETURN; END IF;
        factor := least(1.0, factor + p_increase * least(p_now - increased_at, __CREDIT__));
        increased_at := p_now;
    END $$
    """,
    # The UTC day or month containing p_at.
    """
    CREATE OR REPLACE FUNCTION geotoolkit_gate_period(
        p_at double precision, p_kind text, OUT label text, OUT resets_at double precision)
    LANGUAGE plpgsql STABLE AS $$
    DECLARE
        v_ts timestamp := to_timestamp(p_at) AT TIME ZONE 'UTC';
        v_start timestamp;
    BEGIN
        IF p_kind = 'month' THEN
            v_start := date_trunc('month', v_ts);
            label := to_char(v_start, 'YYYY-MM');
            resets_at := extract(epoch FROM (v_start + interval '1 month') AT TIME ZONE 'UTC');
        ELSE
            v_start := date_trunc('day', v_ts);
            label := to_char(v_start, 'YYYY-MM-DD');
            resets_at := extract(epoch FROM (v_start + interval '1 day') AT TIME ZONE 'UTC');
        END IF;
    END $$
    """,
    """
    CREATE OR REPLACE FUNCTION geotoolkit_gate_stats_of(
        p_key text, p_now double precision, p_stamps bigint[], p_counts integer[],
        p_factor double precision, p_until double precision, p_cause text,
        OUT o_now double precision, OUT o_window double precision, OUT o_requests bigint,
        OUT o_successes bigint, OUT o_throttled bigint, OUT o_factor double precision,
        OUT o_pause_until double precision, OUT o_cause text, OUT o_workers bigint)
    LANGUAGE plpgsql STABLE AS $$
    DECLARE
        v_stamp bigint := floor(p_now / __BUCKET__);
        v_oldest bigint;
    BEGIN
        o_now := p_now; o_window := __WINDOW__; o_factor := p_factor; o_pause_until := p_until;
        o_requests := 0; o_successes := 0; o_throttled := 0;
        o_cause := CASE WHEN p_until > p_now THEN coalesce(p_cause, '') ELSE '' END;
        IF p_stamps IS NOT NULL THEN
            FOR i IN 1..__SLOTS__ LOOP
                IF p_stamps[i] > v_stamp - __SLOTS__ AND p_stamps[i] <= v_stamp THEN
                    o_requests := o_requests + p_counts[3 * i - 2];
                    o_successes := o_successes + p_counts[3 * i - 1];
                    o_throttled := o_throttled + p_counts[3 * i];
                    v_oldest := least(coalesce(v_oldest, p_stamps[i]), p_stamps[i]);
                END IF;
            END LOOP;
        END IF;
        IF v_oldest IS NOT NULL THEN
            o_window := greatest(__BUCKET__, least(__WINDOW__, p_now - v_oldest * __BUCKET__));
        END IF;
        SELECT count(*) INTO o_workers FROM geotoolkit_gate_workers w
         WHERE w.key = p_key AND w.expires_at > p_now;
    END $$
    """,
]

_CALLS = [
    # The GCRA step at p_interval / factor, the report, the cap counter: one call.
    """
    CREATE OR REPLACE FUNCTION geotoolkit_gate_reserve(
        p_key text, p_interval double precision, p_horizon double precision,
        p_requests integer, p_successes integer, p_throttled integer,
        p_increase double precision, p_cap bigint, p_period text,
        OUT o_wait double precision, OUT o_now double precision, OUT o_reserved boolean,
        OUT o_epoch bigint, OUT o_factor double precision, OUT o_used bigint,
        OUT o_period text, OUT o_resets_at double precision, OUT o_capped boolean)
    LANGUAGE plpgsql AS $$
    DECLARE
        g geotoolkit_gate%ROWTYPE := geotoolkit_gate_lock(p_key);
        v_slot double precision;
    BEGIN
        -- read the clock once the row is ours
        o_now := extract(epoch FROM clock_timestamp())::double precision;
        SELECT * INTO g.b_stamp, g.b_counts FROM geotoolkit_gate_count(
            g.b_stamp, g.b_counts, o_now, p_requests, p_successes, p_throttled);
        SELECT * INTO g.factor, g.increased_at FROM geotoolkit_gate_credit(
            g.factor, g.increased_at, o_now, p_successes, p_increase);
        o_capped := false;
        IF p_cap IS NOT NULL THEN
            SELECT * INTO o_period, o_resets_at FROM geotoolkit_gate_period(o_now, p_period);
            SELECT u.used INTO o_used FROM geotoolkit_gate_usage u
             WHERE u.key = p_key AND u.period = o_period;
            o_used := coalesce(o_used, 0);
            o_capped := o_used >= p_cap;
        END IF;
        v_slot := greatest(o_now, g.tat, g.pause_until);
        o_wait := v_slot - o_now;
        o_reserved := NOT o_capped AND o_wait <= p_horizon;
        IF o_reserved THEN
            g.tat := v_slot + p_interval / g.factor;
            IF p_cap IS NOT NULL THEN
                o_used := o_used + 1;
                INSERT INTO geotoolkit_gate_usage AS u (key, period, used)
                VALUES (p_key, o_period, o_used)
                ON CONFLICT (key, period)
                DO UPDATE SET used = excluded.used, updated_at = clock_timestamp();
            END IF;
        END IF;
        UPDATE geotoolkit_gate
           SET tat = g.tat, factor = g.factor, increased_at = g.increased_at,
               b_stamp = g.b_stamp, b_counts = g.b_counts, updated_at = clock_timestamp()
         WHERE key = p_key;
        o_epoch := g.epoch;
        o_factor := g.factor;
    END $$
    """,
    # Publish a pause (never shortening one); a 429 may cut the factor (AIMD).
    """
    CREATE OR REPLACE FUNCTION geotoolkit_gate_pause(
        p_key text, p_seconds double precision, p_cause text, p_rate_limited boolean,
        p_decrease double precision, p_min_factor double precision, p_hold double precision,
        p_recent double precision, p_requests integer, p_successes integer,
        p_throttled integer)
    RETURNS double precision
    LANGUAGE plpgsql AS $$
    DECLARE
        g geotoolkit_gate%ROWTYPE := geotoolkit_gate_lock(p_key);
        v_now double precision := extract(epoch FROM clock_timestamp())::double precision;
        v_old double precision := g.pause_until;
        v_prev double precision := g.throttled_at;
        v_cut boolean := false;
        v_mult double precision;
    BEGIN
        IF p_rate_limited AND v_now >= v_old THEN
            g.throttled_at := v_now;
            IF g.decreased_at IS NULL OR v_now - g.decreased_at >= p_hold THEN
                v_mult := CASE
                    WHEN v_prev IS NULL THEN 1.0  -- a first 429 only pauses
                    WHEN v_now - v_prev <= p_recent THEN p_decrease
                    ELSE 1 - (1 - p_decrease) * p_recent / (v_now - v_prev) END;
                IF v_mult < 1 THEN
                    g.factor := greatest(p_min_factor, g.factor * v_mult);
                    g.decreased_at := v_now;
                    v_cut := true;
                END IF;
            END IF;
        END IF;
        g.pause_until := greatest(v_old, v_now + greatest(p_seconds, 0));
        IF g.pause_until > v_old AND v_now >= v_old THEN
            g.tat := g.pause_until;  -- a new pause: cancel the reservations
            g.epoch := g.epoch + 1;
            g.cause := p_cause;
        ELSIF g.pause_until > v_old THEN
            g.tat := greatest(g.tat, g.pause_until);  -- extending a running one
            g.cause := p_cause;
        END IF;
        IF v_cut THEN g.increased_at := g.pause_until; END IF;
        SELECT * INTO g.b_stamp, g.b_counts FROM geotoolkit_gate_count(
            g.b_stamp, g.b_counts, v_now, p_requests, p_successes, p_throttled);
        UPDATE geotoolkit_gate
           SET tat = g.tat, pause_until = g.pause_until, epoch = g.epoch, cause = g.cause,
               factor = g.factor, decreased_at = g.decreased_at, throttled_at = g.throttled_at,
               increased_at = g.increased_at, b_stamp = g.b_stamp, b_counts = g.b_counts,
               updated_at = clock_timestamp()
         WHERE key = p_key;
        RETURN g.pause_until - v_now;
    END $$
    """,
    # Count a report, refresh or drop a heartbeat, and return the stats.
    """
    CREATE OR REPLACE FUNCTION geotoolkit_gate_record(
        p_key text, p_requests integer, p_successes integer, p_throttled integer,
        p_increase double precision, p_worker text, p_leaving boolean,
        p_heartbeat double precision)
    RETURNS TABLE (r_now double precision, r_window double precision, r_requests bigint,
                   r_successes bigint, r_throttled bigint, r_factor double precision,
                   r_pause_until double precision, r_cause text, r_workers bigint)
    LANGUAGE plpgsql AS $$
    DECLARE
        g geotoolkit_gate%ROWTYPE;
        v_now double precision;
    BEGIN
        IF p_requests + p_successes + p_throttled > 0 THEN
            g := geotoolkit_gate_lock(p_key);
            v_now := extract(epoch FROM clock_timestamp())::double precision;
            SELECT * INTO g.b_stamp, g.b_counts FROM geotoolkit_gate_count(
                g.b_stamp, g.b_counts, v_now, p_requests, p_successes, p_throttled);
            SELECT * INTO g.factor, g.increased_at FROM geotoolkit_gate_credit(
                g.factor, g.increased_at, v_now, p_successes, p_increase);
            UPDATE geotoolkit_gate
               SET factor = g.factor, increased_at = g.increased_at, b_stamp = g.b_stamp,
                   b_counts = g.b_counts, updated_at = clock_timestamp()
             WHERE key = p_key;
        ELSE
            SELECT * INTO g FROM geotoolkit_gate WHERE key = p_key;
            v_now := extract(epoch FROM clock_timestamp())::double precision;
        END IF;
        IF p_worker IS NOT NULL AND p_leaving THEN
            DELETE FROM geotoolkit_gate_workers w WHERE w.key = p_key AND w.worker = p_worker;
        ELSIF p_worker IS NOT NULL THEN
            INSERT INTO geotoolkit_gate_workers AS w (key, worker, expires_at)
            VALUES (p_key, p_worker, v_now + p_heartbeat)
            ON CONFLICT (key, worker) DO UPDATE SET expires_at = excluded.expires_at;
        END IF;
        RETURN QUERY SELECT * FROM geotoolkit_gate_stats_of(
            p_key, v_now, g.b_stamp, g.b_counts, coalesce(g.factor, 1.0),
            coalesce(g.pause_until, 0.0), g.cause);
    END $$
    """,
]


def _render(statement: str) -> str:
    return (statement.replace("__SLOTS__", str(SLOTS))
            .replace("__BUCKET__", repr(BUCKET_SECONDS))
            .replace("__WINDOW__", repr(WINDOW_SECONDS))
            .replace("__CREDIT__", repr(CREDIT_SECONDS)))


#: Statements run, in order, under an advisory lock, by ``init_schema``.
SCHEMA = [_render(s) for s in _TABLES + _HELPERS + _CALLS]

#: Housekeeping: idle state, expired heartbeats, cap counters of long-gone periods.
SWEEP = [
    """DELETE FROM geotoolkit_gate
        WHERE updated_at < clock_timestamp() - interval '1 hour'
          AND greatest(tat, pause_until) < extract(epoch FROM clock_timestamp())""",
    """DELETE FROM geotoolkit_gate_workers
        WHERE expires_at < extract(epoch FROM clock_timestamp())""",
    """DELETE FROM geotoolkit_gate_usage
        WHERE updated_at < clock_timestamp() - interval '62 days'""",
    """DELETE FROM geotoolkit_gate_values
        WHERE expires_at < extract(epoch FROM clock_timestamp())""",
]

_NOW = "extract(epoch FROM clock_timestamp())::double precision"

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
