"""Fleet gates, chosen by URL: ``memory://``, ``sqlite:///path``, ``redis://``, ``postgresql://``."""

from __future__ import annotations

from typing import Any

from geotoolkit.clock import Clock
from geotoolkit.errors import ConfigurationError
from geotoolkit.gate.base import (
    Aimd,
    Cap,
    Claim,
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
from geotoolkit.redact import redact
from geotoolkit.urls import backend_of, check_userinfo, client_of, sqlite_path

__all__ = [
    "Aimd",
    "Cap",
    "Claim",
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
]


def open_gate(
    url: str | Gate | None = None,
    *,
    clock: Clock | None = None,
    fallback: bool = True,
    timeout_seconds: float | None = None,
) -> Gate:
    """Open a gate from a URL (or pass a Gate through). ``None``: the default SQLite file.

    A server gate (``redis://``, ``postgresql://``) comes wrapped in a
    ``FallbackGate`` unless ``fallback=False``: if its store becomes unreachable
    or slow (a held lock, a hung server), this process paces itself locally at a
    conservative share of the rate, warns once (``GateUnavailableWarning``) and
    returns to the shared state when the store is back.

    ``timeout_seconds`` bounds every store call (SQLite busy wait, Redis socket
    timeouts, PostgreSQL ``lock_timeout``/``statement_timeout``); ``None`` keeps
    each backend's default (SQLite 30 s, Redis 2 s, PostgreSQL 5 s).

    >>> open_gate("memory://").backend
    'memory'
    """
    if url is None:
        return SQLiteGate(clock=clock, **_timeout(timeout_seconds))
    if not isinstance(url, str):
        if isinstance(url, Gate):
            return url
        raise ConfigurationError(f"gate must be a URL or a Gate, got {type(url).__name__}")
    url = url.strip()  # an environment variable filled from a file ends in a newline
    check_userinfo(url, "gate")
    backend = backend_of(url)
    if backend == "memory":
        return MemoryGate(clock=clock)
    if backend == "sqlite":
        return SQLiteGate(sqlite_path(url), clock=clock, **_timeout(timeout_seconds))
    gate = _open_server_gate(backend, url, timeout_seconds)
    if not fallback:
        return gate
    from geotoolkit.gate.fallback import FallbackGate

    return FallbackGate(gate, clock=clock)


def _timeout(timeout_seconds: float | None) -> dict[str, Any]:
    return {} if timeout_seconds is None else {"timeout_seconds": timeout_seconds}


def _open_server_gate(backend: str | None, url: str, timeout_seconds: float | None) -> Gate:
    opener: Any
    if backend == "redis":
        with client_of(backend, "Redis gate"):
            from geotoolkit.gate.redis import RedisGate as opener
    elif backend == "postgres":
        with client_of(backend, "PostgreSQL gate"):
            from geotoolkit.gate.postgres import PostgresGate as opener
    else:
        raise ConfigurationError(
            f"unknown gate URL {redact(url)!r}: use memory://, "
            "sqlite:///path, redis://host:port/db or postgresql://..."
        )
    gate: Gate = opener(url, **_timeout(timeout_seconds))
    return gate
