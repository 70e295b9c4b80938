"""The fleet gate on Redis: a few keys per gate key, updated by atomic Lua scripts.

Every call is one round trip (``EVALSHA``; scripts in ``_redis_lua``). The
scripts read the server's clock with ``TIME``, so every client of the fleet
agrees on "now" whatever its own clock says, and cap periods (UTC day or month)
follow the server's calendar.

Nothing waits forever: connecting and every reply have a deadline
(``timeout_seconds``); a server that is down, hung (``SIGSTOP``) or too slow
turns the call into a ``GateError``. A timed-out call is not retried (the
script may have run: a retry could reserve twice); a connection broken by a
restart is re-dialled once, and scripts the restarted server no longer knows
(``NOSCRIPT``) are loaded again.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from geotoolkit.clock import Clock
from geotoolkit.errors import ConfigurationError, GateError
from geotoolkit.gate import _redis_lua as lua
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

__all__ = ["RedisGate"]

#: Stand-in for an infinite horizon (Lua's tonumber does not parse "inf").
_FAR = 1e15


def _arg(x: float) -> str:
    return repr(float(x))


def _horizon(horizon: float) -> float:
    if math.isnan(horizon):
        raise ConfigurationError("the gate horizon must be a number")
    return max(-_FAR, min(_FAR, horizon))


def _counts(report: Report | None) -> list[str]:
    report = report or Report()
    return [str(report.requests), str(report.successes), str(report.throttled)]


class RedisGate:
    """Gate state in Redis, shared by every process of a fleet that can reach it.

    ``url`` is a redis-py URL (``redis://``, ``rediss://``, ``unix://``). A gate key
    ``k`` maps to the hash ``k:gate`` (pacing, AIMD, one-second buckets), the sorted
    set ``k:workers`` (heartbeats), the hash ``k:usage`` (cap counters) and the hash
    ``k:values`` (shared values). Each expires on its own: the state
    ``key_ttl_seconds`` after it stops mattering, heartbeats after two heartbeat
    periods, cap counters a day after their period, values with the last of them.
    The password (``redis://:pw@host`` or ``?password=``) appears in no error or repr.
    ``clock`` is accepted for a uniform signature and ignored: the server's ``TIME``
    is the truth.
    """

    backend = "redis"
    blocking = True

    def __init__(
        self,
        url: str,
        *,
        key_ttl_seconds: float = 3600,
        clock: Clock | None = None,
        timeout_seconds: float = 2.0,
        aimd: Aimd | None = None,
    ) -> None:
        del clock  # the server clock is the truth
        if not (math.isfinite(key_ttl_seconds) and key_ttl_seconds > 0):
            raise ConfigurationError("key_ttl_seconds must be finite and > 0")
        timeout_seconds = check_timeout(timeout_seconds)
        self.key_ttl_seconds = float(key_ttl_seconds)
        self.aimd = aimd or Aimd()
        self._password: str | None = None
        self.url = redact(url)
        try:
            self._client: redis.Redis = redis.Redis.from_url(
                url,
                socket_connect_timeout=timeout_seconds,
                socket_timeout=timeout_seconds,
                # One quick retry re-dials a pooled connection broken by a server
                # restart; a timeout is not retried (the script may have run).
                retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
                decode_responses=True,
            )
        except (ValueError, redis.RedisError) as exc:
            raise ConfigurationError(
                f"bad Redis gate URL {self.url!r}: {redact(exc, [url])}") from exc
        password = self._client.connection_pool.connection_kwargs.get("password")
        self._password = str(password) if password else None
        self.url = redact(url, [self._password])
        register = self._client.register_script
        self._acquire, self._pause, self._record = (
            register(lua.ACQUIRE), register(lua.PAUSE), register(lua.RECORD))
        self._stats, self._state, self._usage = (
            register(lua.STATS), register(lua.STATE), register(lua.USAGE))
        self._value_set, self._values, self._value_delete = (
            register(lua.VALUE_SET), register(lua.VALUES), register(lua.VALUE_DELETE))

    @staticmethod
    def storage_key(key: str) -> str:
        """The Redis key holding a gate key's pacing state."""
        return f"{key}:gate"

    @staticmethod
    def storage_keys(key: str) -> list[str]:
        """The Redis keys of a gate key's pacing: state, heartbeats, cap counters."""
        return [f"{key}:gate", f"{key}:workers", f"{key}:usage"]

    @staticmethod
    def values_key(key: str) -> str:
        """The Redis hash holding a gate key's shared values."""
        return f"{key}:values"

    def _fail(self, action: str, exc: Exception) -> NoReturn:
        message = redact(f"{type(exc).__name__}: {exc}", [self._password])
        raise GateError(f"Redis gate at {self.url} failed to {action}: {message}",
                        backend="redis") from exc

    def _run(self, action: str, script: Any, key: str, *args: str,
             keys: list[str] | None = None) -> Any:
        """Run ``script`` on the key's pacing keys (or ``keys``); its reply as is."""
        try:
            return script(keys=keys or self.storage_keys(key), args=list(args))
        except (redis.RedisError, OSError, ValueError, TypeError) as exc:
            self._fail(action, exc)

    # -- the Gate protocol ------------------------------------------------------

    def reserve(self, key: str, interval: float, horizon: float = 60.0, *,
                report: Report | None = None, cap: Cap | None = None) -> Reservation:
        _check(interval)
        reply = self._run(
            "acquire", self._acquire, key, _arg(interval), _arg(_horizon(horizon)),
            _arg(self.key_ttl_seconds), *_counts(report), _arg(self.aimd.increase_per_second),
            str(cap.limit if cap is not None else -1), cap.period if cap is not None else "day")
        wait, now, reserved, epoch, factor, used, label, resets, capped = reply
        usage = Usage(str(label), int(used), float(resets)) if cap is not None else None
        if int(capped):
            assert cap is not None and usage is not None
            raise cap_reached(cap, usage)
        return Reservation(float(wait), float(now), bool(int(reserved)), int(epoch),
                           float(factor), usage)

    def acquire(self, key: str, interval: float, horizon: float = 60.0) -> float:
        return self.reserve(key, interval, horizon).wait

    def pause(self, key: str, seconds: float, *, cause: str = "", rate_limited: bool = False,
              report: Report | None = None) -> float:
        _check(0.0, seconds)
        a = self.aimd
        remaining, _now = self._run(
            "pause", self._pause, key, _arg(seconds), _arg(self.key_ttl_seconds), cause,
            "1" if rate_limited else "0", _arg(a.decrease), _arg(a.min_factor),
            _arg(a.hold_seconds), _arg(a.recent_seconds), *_counts(report))
        return float(remaining)

    def state(self, key: str) -> GateState:
        now, tat, until, epoch = self._run("read the state", self._state, key)
        return GateState(now=float(now), tat=float(tat), pause_until=float(until), epoch=int(epoch))

    def record(self, key: str, report: Report, *, worker: str | None = None,
               leaving: bool = False) -> FleetStats:
        reply = self._run(
            "record", self._record, key, _arg(self.key_ttl_seconds), *_counts(report),
            _arg(self.aimd.increase_per_second), worker or "", "1" if leaving else "0",
            _arg(HEARTBEAT_SECONDS))
        return self._fleet_stats(reply)

    def stats(self, key: str) -> FleetStats:
        return self._fleet_stats(self._run("read the stats", self._stats, key))

    @staticmethod
    def _fleet_stats(reply: list[Any]) -> FleetStats:
        now, window, requests, successes, throttled, factor, until, cause, workers = reply
        return FleetStats(
            now=float(now), window_seconds=float(window), requests=int(requests),
            successes=int(successes), throttled=int(throttled), rate_factor=float(factor),
            pause_until=float(until), pause_cause=str(cause), workers_active=int(workers))

    def usage(self, key: str, period: Period = "day") -> Usage:
        label, used, resets = self._run("read the usage", self._usage, key, period)
        return Usage(str(label), int(used), float(resets))

    def set_value(self, key: str, name: str, value: str, *, ttl_seconds: float,
                  only_if_absent: bool = False) -> bool:
        ttl = check_value(name, value, ttl_seconds)
        stored = self._run("set a value", self._value_set, key, name, value, _arg(ttl),
                           "1" if only_if_absent else "0", keys=[self.values_key(key)])
        return bool(int(stored))

    def values(self, key: str, prefix: str = "") -> dict[str, str]:
        flat = self._run("read the values", self._values, key, prefix, keys=[self.values_key(key)])
        return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat), 2)}

    def delete_value(self, key: str, name: str, *, only_if: str | None = None) -> bool:
        deleted = self._run("delete a value", self._value_delete, key, name,
                            "0" if only_if is None else "1", only_if or "",
                            keys=[self.values_key(key)])
        return bool(int(deleted))

    def ping(self) -> bool:
        """True when the server answers."""
        try:
            return bool(self._client.ping())
        except (redis.RedisError, OSError):
            return False

    def close(self) -> None:
        """Release the connection pool."""
        self._client.close()
        self._client.connection_pool.disconnect()

    def __repr__(self) -> str:
        return f"RedisGate({self.url!r})"
