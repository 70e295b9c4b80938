"""The fleet gate protocol: one shared pacing state per (provider host, hashed key).

The state is two instants on the store's own clock: ``tat`` (GCRA theoretical
arrival time: the earliest next send) and ``pause_until`` (a published pause).

``acquire`` *reserves* a send slot atomically in one round trip::

    slot = max(now, tat, pause_until)
    if slot - now <= horizon:  tat = slot + interval     (reserved)
    return slot - now                                    (seconds to wait)

``pause`` publishes ``pause_until = max(pause_until, now + seconds)`` (never
shorter) and pushes ``tat`` to at least ``pause_until`` so the fleet restarts
one interval apart.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from geotoolkit.errors import ConfigurationError

__all__ = ["Gate", "GateState", "gate_key", "gcra_acquire", "gcra_pause"]


@dataclass(frozen=True)
class GateState:
    """A snapshot of one key's state, times on the store's clock."""

    now: float
    tat: float
    pause_until: float

    @property
    def pause_remaining(self) -> float:
        return max(0.0, self.pause_until - self.now)


@runtime_checkable
class Gate(Protocol):
    """A shared pacing state. Implementations: Memory, SQLite, Redis, Postgres gates.

    Methods are synchronous and thread-safe; ``blocking`` tells the engine whether
    a call does I/O (then it runs in a worker thread) or is pure memory.
    """

    backend: str
    blocking: bool

    def acquire(self, key: str, interval: float, horizon: float = 60.0) -> float:
        """Reserve the next send slot; return the seconds to wait before sending.

        A wait longer than ``horizon`` is returned without a reservation: sleep,
        then call ``acquire`` again.
        """
        ...

    def pause(self, key: str, seconds: float) -> float:
        """Publish a fleet-wide pause (never shortening one); return its remaining seconds."""
        ...

    def state(self, key: str) -> GateState:
        """Read the key's state without changing it."""
        ...

    def close(self) -> None: ...


def gate_key(host: str, api_key: str | None = None) -> str:
    """The gate key for a provider host and API key; the key itself is only hashed.

    >>> gate_key("nominatim.openstreetmap.org")
    'geotoolkit:nominatim.openstreetmap.org:anonymous'
    >>> "s3cret" in gate_key("api.example.com", "s3cret")
    False
    """
    if not host:
        raise ConfigurationError("a gate key needs the provider host")
    if api_key:
        digest = hashlib.sha256(b"geotoolkit-gate:" + api_key.encode()).hexdigest()[:20]
        return f"geotoolkit:{host.lower()}:{digest}"
    return f"geotoolkit:{host.lower()}:anonymous"


def _check(interval: float, seconds: float = 0.0) -> None:
    if not (math.isfinite(interval) and interval >= 0 and math.isfinite(seconds)):
        raise ConfigurationError("gate intervals and pauses must be finite and >= 0")


def gcra_acquire(
    now: float, tat: float, pause_until: float, interval: float, horizon: float
) -> tuple[float, float]:
    """Pure GCRA step: return ``(wait, new_tat)``; ``new_tat == tat`` when not reserved."""
    _check(interval)
    slot = max(now, tat, pause_until)
    wait = slot - now
    if wait > horizon:
        return wait, tat
    return wait, slot + interval


def gcra_pause(now: float, tat: float, pause_until: float, seconds: float) -> tuple[float, float]:
    """Pure pause step: return ``(new_tat, new_pause_until)``; never shortens a pause."""
    _check(0.0, seconds)
    until = max(pause_until, now + max(seconds, 0.0))
    return max(tat, until), until
