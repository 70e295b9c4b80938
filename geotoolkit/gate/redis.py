"""The fleet gate on Redis: one hash per gate key, updated by atomic Lua scripts.

Every ``acquire`` and ``pause`` is one round trip (``EVALSHA``). The scripts read
the server's clock with ``TIME``, so every client of the fleet agrees on "now"
whatever its own clock says. Replies carry floats as strings: Redis truncates Lua
numbers to integers, and ``tostring`` loses digits of epoch times.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from geotoolkit.clock import Clock
from geotoolkit.errors import ConfigurationError, GateError
from geotoolkit.gate import redact_url
from geotoolkit.gate.base import GateState, _check

__all__ = ["RedisGate"]

# Shared prologue: the server clock in seconds (microsecond precision; an epoch in
# microseconds is ~1.7e15, exact in a double) and the key's current state.
_PROLOGUE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local v = redis.call('HMGET', KEYS[1], 'tat', 'pause_until')
local tat = tonumber(v[1]) or 0
local until_ = tonumber(v[2]) or 0
local function fmt(x) return string.format('%.6f', x) end
local function keep(ttl)
  -- expire ttl seconds after the state stops mattering (never during a pause)
  local ms = math.ceil((math.max(tat, until_, now) - now + ttl) * 1000)
  redis.call('PEXPIRE', KEYS[1], ms)
end
"""

# KEYS[1]: hash; ARGV: interval, horizon, ttl seconds. Returns {wait, now}.
_ACQUIRE = (
    _PROLOGUE
    + """
local interval = tonumber(ARGV[1])
local horizon = tonumber(ARGV[2])
local slot = math.max(now, tat, until_)
local wait = slot - now
if wait <= horizon then
  tat = slot + interval
  redis.call('HSET', KEYS[1], 'tat', fmt(tat))
  keep(tonumber(ARGV[3]))
end
return {fmt(wait), fmt(now)}
"""
)

# KEYS[1]: hash; ARGV: seconds, ttl seconds. Returns {remaining, now}.
_PAUSE = (
    _PROLOGUE
    + """
local seconds = math.max(tonumber(ARGV[1]), 0)
until_ = math.max(until_, now + seconds)
tat = math.max(tat, until_)
redis.call('HSET', KEYS[1], 'tat', fmt(tat), 'pause_until', fmt(until_))
keep(tonumber(ARGV[2]))
return {fmt(until_ - now), fmt(now)}
"""
)

# KEYS[1]: hash. Returns {now, tat, pause_until}; read-only.
_STATE = (
    _PROLOGUE
    + """
return {fmt(now), fmt(tat), fmt(until_)}
"""
)

#: Stand-in for an infinite horizon (Lua's tonumber does not parse "inf").
_FAR = 1e15


def _arg(x: float) -> str:
    return repr(float(x))


def _horizon(horizon: float) -> float:
    if math.isnan(horizon):
        raise ConfigurationError("the gate horizon must be a number")
    return max(-_FAR, min(_FAR, horizon))


class RedisGate:
    """Gate state in Redis, shared by every process of a fleet that can reach it.

    ``url`` is a redis-py URL (``redis://``, ``rediss://``, ``unix://``). Each gate
    key maps to one hash (``<key>:gate``) whose expiry is refreshed on every write,
    ``key_ttl_seconds`` after its state stops mattering. ``clock`` is accepted for a
    uniform signature and ignored: the server's ``TIME`` is the truth.
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
    ) -> None:
        del clock  # the server clock is the truth
        if not (math.isfinite(key_ttl_seconds) and key_ttl_seconds > 0):
            raise ConfigurationError("key_ttl_seconds must be finite and > 0")
        self.url = redact_url(url)
        self.key_ttl_seconds = float(key_ttl_seconds)
        try:
            self._client: redis.Redis = redis.Redis.from_url(
                url,
                socket_connect_timeout=timeout_seconds,
                socket_timeout=timeout_seconds,
                # One quick retry re-dials a pooled connection broken by a server
                # restart; a dead server still fails within a few seconds.
                retry=Retry(NoBackoff(), 1),
                decode_responses=True,
            )
        except (ValueError, redis.RedisError) as exc:
            raise ConfigurationError(f"bad Redis gate URL {self.url!r}: {exc}") from exc
        self._password = self._client.connection_pool.connection_kwargs.get("password")
        self._acquire = self._client.register_script(_ACQUIRE)
        self._pause = self._client.register_script(_PAUSE)
        self._state = self._client.register_script(_STATE)

    @staticmethod
    def storage_key(key: str) -> str:
        """The Redis key holding a gate key's state."""
        return f"{key}:gate"

    def _fail(self, action: str, exc: Exception) -> NoReturn:
        message = str(exc)
        if self._password:
            message = message.replace(str(self._password), "***")
        raise GateError(
            f"Redis gate at {self.url} failed to {action}: {type(exc).__name__}: {message}",
            backend="redis",
        ) from exc

    def _run(self, action: str, script: Any, key: str, *args: float) -> list[float]:
        try:
            reply = script(keys=[self.storage_key(key)], args=[_arg(a) for a in args])
            return [float(x) for x in reply]
        except (redis.RedisError, OSError, ValueError, TypeError) as exc:
            self._fail(action, exc)

    def reserve(self, key: str, interval: float, horizon: float = 60.0) -> tuple[float, float]:
        """``acquire``, also returning the server's "now": ``(wait, now)``; slot = now + wait."""
        _check(interval)
        wait, now = self._run(
            "acquire", self._acquire, key, interval, _horizon(horizon), self.key_ttl_seconds
        )
        return wait, now

    def acquire(self, key: str, interval: float, horizon: float = 60.0) -> float:
        return self.reserve(key, interval, horizon)[0]

    def pause(self, key: str, seconds: float) -> float:
        _check(0.0, seconds)
        remaining, _now = self._run("pause", self._pause, key, seconds, self.key_ttl_seconds)
        return remaining

    def state(self, key: str) -> GateState:
        now, tat, until = self._run("read the state", self._state, key)
        return GateState(now=now, tat=tat, pause_until=until)

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
