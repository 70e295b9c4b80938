"""The fleet gate on Redis: the primitives in one Lua script, the strategy in Python.

Every batch of primitives is one round trip (``EVALSHA`` of ``_redis_lua.BATCH``),
atomic, on the server's clock (``TIME``): every client of the fleet agrees on
"now" whatever its own clock says.

Nothing waits forever: connecting and every reply have a deadline
(``timeout_seconds``); a server that is down, hung (``SIGSTOP``) or too slow
turns the call into a ``GateError``. A timed-out call is not retried (the
script may have run: a retry could reserve twice); a connection broken by a
restart is re-dialled once, and a script the restarted server no longer knows
(``NOSCRIPT``: it did not run) is loaded again.

Key layout (gate state is ephemeral; this layout is new in this version, so a
fleet mixing it with an earlier one shares pacing, not cap counts):
``<key>:gate`` (hash: ``tat``, ``pause_until``, ``epoch``, ``cause``),
``<key>:n:<name>`` and ``<key>:d:<name>`` (one string per counter: stats
buckets; durable ones, cap counts per period), ``<key>:values`` (hash of shared
values; the fleet's own, the AIMD state and heartbeats, live under
``<key>#fleet:values``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, NoReturn
from urllib.parse import unquote, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from geotoolkit.clock import Clock
from geotoolkit.errors import ConfigurationError, GateError
from geotoolkit.gate import _redis_lua as lua
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
from geotoolkit.redact import redact
from geotoolkit.urls import check_userinfo

__all__ = ["RedisGate", "RedisStore"]


def _arg(x: float) -> str:
    return repr(float(x))


def _glob(text: str) -> str:
    """``text`` matched literally by a Redis ``MATCH`` pattern.

    >>> _glob("geotoolkit:a*b?[c]")
    'geotoolkit:a\\\\*b\\\\?\\\\[c\\\\]'
    """
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class RedisStore(Primitives):
    """The primitives on Redis; see ``RedisGate``."""

    backend = "redis"
    blocking = True
    clock: Clock | None = None  # the server's TIME is the truth

    def __init__(self, url: str, *, key_ttl_seconds: float = 3600,
                 timeout_seconds: float = 2.0) -> None:
        if not (math.isfinite(key_ttl_seconds) and key_ttl_seconds > 0):
            raise ConfigurationError("key_ttl_seconds must be finite and > 0")
        timeout_seconds = check_timeout(timeout_seconds)
        check_userinfo(url, "Redis gate")
        _check_db_path(url)
        self.key_ttl_seconds = float(key_ttl_seconds)
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
        self._batch = self._client.register_script(lua.BATCH)

    # -- key layout -------------------------------------------------------------------------------

    @staticmethod
    def state_key(key: str) -> str:
        """The hash holding a gate key's pacing state."""
        return f"{key}:gate"

    @staticmethod
    def counter_key(key: str, name: str, durable: bool = False) -> str:
        """The string holding one counter of a gate key (``d``: a durable one)."""
        return f"{key}:{'d' if durable else 'n'}:{name}"

    @staticmethod
    def values_key(key: str) -> str:
        """The hash holding a gate key's shared values."""
        return f"{key}:values"

    # -- the primitives ---------------------------------------------------------------------------

    def _fail(self, action: str, exc: Exception) -> NoReturn:
        message = redact(f"{type(exc).__name__}: {exc}", [self._password])
        message = message.split(", with args beginning with:", 1)[0]  # the script's keys
        if _runs_no_scripts(exc):
            message += (" (a Sentinel's address, or a server with scripting disabled: the gate "
                        "needs a Redis that runs Lua scripts)")
        elif isinstance(exc, _CLUSTER_ERRORS):
            message += (" (a Redis Cluster node: the gate's batches name several keys, which a "
                        "cluster refuses; give a standalone Redis, or a replicated one's primary)")
        raise GateError(f"Redis gate at {self.url} failed to {action}: {message}",
                        backend="redis", permanent=_refused_setting(exc)) from exc

    def run(self, ops: Sequence[Op]) -> list[Any]:
        if not ops:
            return []
        keys: list[str] = []
        args: list[str] = []
        for op in ops:
            self._encode(op, keys, args)
        try:
            reply = self._batch(keys=keys, args=args)
        except (redis.RedisError, OSError, ValueError, TypeError) as exc:
            self._fail(describe(ops), exc)
        return [_decode(op, part) for op, part in zip(ops, reply, strict=True)]

    def _encode(self, op: Op, keys: list[str], args: list[str]) -> None:
        if isinstance(op, Reserve):
            keys.append(self.state_key(op.key))
            args += ["R", _arg(self.key_ttl_seconds), _arg(op.interval), _arg(op.horizon)]
        elif isinstance(op, Pause):
            keys.append(self.state_key(op.key))
            args += ["P", _arg(self.key_ttl_seconds), _arg(op.seconds), op.cause]
        elif isinstance(op, ReadState):
            keys.append(self.state_key(op.key))
            args.append("S")
        elif isinstance(op, AddCounters):
            keys += [self.counter_key(op.key, name, op.durable) for name, _ in op.counts]
            args += ["A", str(len(op.counts)), _arg(op.ttl_seconds), *(str(d) for _, d in op.counts)]
        elif isinstance(op, ReadCounters):
            keys += [self.counter_key(op.key, name, op.durable) for name in op.names]
            args += ["C", str(len(op.names))]
        elif isinstance(op, SetValue):
            keys.append(self.values_key(op.key))
            mode = "absent" if op.only_if_absent else ("set" if op.only_if is None else "equal")
            args += ["V", op.name, op.value, _arg(op.ttl_seconds), mode, op.only_if or ""]
        elif isinstance(op, ReadValues):
            keys.append(self.values_key(op.key))
            args += ["L", op.prefix]
        else:
            keys.append(self.values_key(op.key))
            args += ["D", op.name, "0" if op.only_if is None else "1", op.only_if or ""]

    def keys(self, prefix: str = "") -> list[str]:
        """Gate keys with a pacing state: ``SCAN`` with a ``MATCH`` (never ``KEYS``)."""
        suffix = self.state_key("")
        try:
            found = {str(name)[: -len(suffix)]
                     for name in self._client.scan_iter(match=_glob(prefix) + "*" + _glob(suffix),
                                                        count=1000)}
        except (redis.RedisError, OSError) as exc:
            self._fail("list its keys", exc)
        return sorted(found)

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
        return f"RedisStore({self.url!r})"


def _decode(op: Op, part: Any) -> Any:
    if isinstance(op, Reserve):
        wait, now, reserved, epoch = part
        return Slot(float(wait), float(now), bool(int(reserved)), int(epoch))
    if isinstance(op, Pause):
        now, until, previous, epoch = part
        return Paused(float(now), float(until), float(previous), int(epoch))
    if isinstance(op, ReadState):
        now, tat, until, epoch, cause = part
        return StoreState(float(now), float(tat), float(until), int(epoch), str(cause))
    if isinstance(op, AddCounters):
        return {name: int(v) for (name, _), v in zip(op.counts, part, strict=True)}
    if isinstance(op, ReadCounters):
        return {name: int(v) for name, v in zip(op.names, part, strict=True) if v is not None}
    if isinstance(op, ReadValues):
        return {str(part[i]): str(part[i + 1]) for i in range(0, len(part), 2)}
    return bool(int(part))


class RedisGate(FleetGate):
    """Gate state in Redis, shared by every process of a fleet that can reach it.

    ``url`` is a redis-py URL (``redis://``, ``rediss://``, ``unix://``). A gate key
    ``k`` maps to the hash ``k:gate`` (pacing state), one string per counter
    (``k:n:<name>``: stats buckets; ``k:d:<period>``: cap counts) and the hash ``k:values`` (shared
    values; the fleet's own under ``k#fleet:values``). Each expires on its own:
    the state ``key_ttl_seconds`` after it stops mattering, a counter after its
    time to live (a stats bucket after the window, a cap count a day after its
    period), values with the last of them. The password (``redis://:pw@host`` or
    ``?password=``) appears in no error or repr. ``clock`` is this host's clock,
    used only to estimate the server's between replies: the server's ``TIME`` is
    the truth.
    """

    store: RedisStore

    def __init__(
        self,
        url: str,
        *,
        key_ttl_seconds: float = 3600,
        clock: Clock | None = None,
        timeout_seconds: float = 2.0,
        aimd: Aimd | None = None,
    ) -> None:
        store = RedisStore(url, key_ttl_seconds=key_ttl_seconds, timeout_seconds=timeout_seconds)
        super().__init__(store, aimd=aimd, clock=clock)
        self.url = store.url
        self.key_ttl_seconds = store.key_ttl_seconds

    storage_key = staticmethod(RedisStore.state_key)
    counter_key = staticmethod(RedisStore.counter_key)
    values_key = staticmethod(RedisStore.values_key)

    def ping(self) -> bool:
        """True when the server answers."""
        return self.store.ping()

    def __repr__(self) -> str:
        return f"RedisGate({self.url!r})"


def _check_db_path(url: str) -> None:
    """Refuse a ``redis://`` or ``rediss://`` URL whose path is no db index.

    redis-py reads the path with ``int()`` after dropping every ``/``, and ignores one it
    cannot read: ``/gate`` or ``/O`` would be db 0 and ``/1/2`` db 12, silently.

    >>> _check_db_path("redis://:pw@gate.internal:6379/3")
    >>> _check_db_path("redis://:pw@gate.internal:6379/gate")
    Traceback (most recent call last):
    ...
    geotoolkit.errors.ConfigurationError: the Redis gate URL's path '/gate' is no db index: \
give a number (redis://host:6379/0) or none
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return  # redis-py says what is wrong with it
    if parts.scheme.lower() not in ("redis", "rediss"):
        return  # unix://: the path is the socket's, the db is ?db=
    path = unquote(parts.path)
    if path not in ("", "/") and not re.fullmatch(r"/[0-9]+/?", path):
        raise ConfigurationError(f"the Redis gate URL's path {path!r} is no db index: give a "
                                 "number (redis://host:6379/0) or none")


#: What only a Redis Cluster node answers (``CROSSSLOT``, ``MOVED``, ``ASK``, ``CLUSTERDOWN``,
#: ``TRYAGAIN``): the URL names a cluster, which the gate cannot use.
_CLUSTER_ERRORS = (redis.exceptions.ClusterCrossSlotError, redis.exceptions.MovedError,
                   redis.exceptions.AskError, redis.exceptions.ClusterDownError,
                   redis.exceptions.TryAgainError)


def _runs_no_scripts(exc: BaseException) -> bool:
    """Whether Redis answered that it knows a command of the gate's not (a Sentinel, which
    knows neither ``EVALSHA`` nor ``SCAN``; a server with scripting disabled).

    >>> _runs_no_scripts(redis.ResponseError("unknown command 'EVALSHA', with args ..."))
    True
    """
    return isinstance(exc, redis.ResponseError) and str(exc).lower().startswith("unknown command")


def _refused_setting(exc: BaseException) -> bool:
    """Whether Redis refused a setting of the URL (a password, an ACL user's rights, a db
    index, a read-only replica's or a cluster node's address), not the connection: no
    retry heals it.

    >>> _refused_setting(redis.AuthenticationError("invalid username-password pair"))
    True
    >>> _refused_setting(redis.ResponseError("DB index is out of range"))
    True
    >>> _refused_setting(redis.ConnectionError("Connection refused"))
    False
    """
    if isinstance(exc, (redis.AuthenticationError, redis.exceptions.NoPermissionError,
                        redis.ReadOnlyError,  # a replica's URL: every write refused
                        *_CLUSTER_ERRORS)):  # a cluster node's URL: every batch refused
        return True
    return isinstance(exc, redis.ResponseError) and (
        "db index is out of range" in str(exc).lower() or _runs_no_scripts(exc))
