"""Fleet gates, chosen by URL: ``memory://``, ``sqlite:///path``, ``redis://``, ``postgresql://``."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from geotoolkit.clock import Clock
from geotoolkit.errors import ConfigurationError
from geotoolkit.gate.base import (
    Aimd,
    Cap,
    FleetStats,
    Gate,
    GateState,
    Report,
    Reservation,
    Usage,
    gate_key,
)
from geotoolkit.gate.memory import MemoryGate
from geotoolkit.gate.sqlite import SQLiteGate, default_gate_path

__all__ = [
    "Aimd",
    "Cap",
    "FleetStats",
    "Gate",
    "GateState",
    "MemoryGate",
    "Report",
    "Reservation",
    "SQLiteGate",
    "Usage",
    "default_gate_path",
    "gate_key",
    "open_gate",
    "redact_url",
]


def redact_url(url: str) -> str:
    """Hide the password of a store URL, for logs and reprs.

    >>> redact_url("redis://:hunter2@127.0.0.1:6379/0")
    'redis://:***@127.0.0.1:6379/0'
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def open_gate(
    url: str | Gate | None = None, *, clock: Clock | None = None, fallback: bool = True
) -> Gate:
    """Open a gate from a URL (or pass a Gate through). ``None``: the default SQLite file.

    A server gate (``redis://``, ``postgresql://``) comes wrapped in a
    ``FallbackGate`` unless ``fallback=False``: if its store becomes unreachable
    mid-run, this process paces itself locally at a conservative share of the
    rate, warns once (``GateUnavailableWarning``) and returns to the shared state
    when the store is back.

    >>> open_gate("memory://").backend
    'memory'
    """
    if url is None:
        return SQLiteGate(clock=clock)
    if not isinstance(url, str):
        if isinstance(url, Gate):
            return url
        raise ConfigurationError(f"gate must be a URL or a Gate, got {type(url).__name__}")
    scheme = urlsplit(url).scheme.lower()
    if scheme == "memory":
        return MemoryGate(clock=clock)
    if scheme == "sqlite":
        # sqlite:///relative/path and sqlite:////absolute/path, as in SQLAlchemy.
        rest = unquote(url.split("://", 1)[1])
        path = rest[1:] if rest.startswith("/") else rest
        return SQLiteGate(path or None, clock=clock)
    gate = _open_server_gate(scheme, url)
    if not fallback:
        return gate
    from geotoolkit.gate.fallback import FallbackGate

    return FallbackGate(gate, clock=clock)


def _open_server_gate(scheme: str, url: str) -> Gate:
    opener: Any
    if scheme in ("redis", "rediss", "unix"):
        from geotoolkit.gate.redis import RedisGate as opener
    elif scheme in ("postgresql", "postgres"):
        from geotoolkit.gate.postgres import PostgresGate as opener
    else:
        raise ConfigurationError(
            f"unknown gate URL scheme {scheme!r} in {redact_url(url)!r}: use memory://, "
            "sqlite:///path, redis://host:port/db or postgresql://..."
        )
    gate: Gate = opener(url)
    return gate
