"""What a gate knows about each key's fleet: the data of ``geotoolkit gate status URL --json``.

``fleet_status(gate)`` lists every gate key with a pacing state on the store (or
the one given) with its pace, adaptive factor, 429s per success, running pause,
active workers and cap counts of the current UTC day and month. A gate key is a
hash of the API key (``geotoolkit.keys.gate_key``): no secret is ever shown.

>>> from geotoolkit.clock import FakeClock
>>> from geotoolkit.gate import MemoryGate, Report, gate_key
>>> gate = MemoryGate(clock=FakeClock(start=1_709_251_200.0))
>>> key = gate_key("api.example.com", "s3cret")
>>> gate.reserve(key, 0.5).reserved
True
>>> gate.record(key, Report(requests=4, successes=3, throttled=1), worker="w1").workers_active
1
>>> [status] = fleet_status(gate)
>>> status.key == key, status.pace, status.throttled_per_success, status.workers_active
(True, 4.0, 0.3333333333333333, 1)
>>> status.day.period, status.month.period
('2024-03-01', '2024-03')
>>> "s3cret" in status.to_json()
False
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from geotoolkit.errors import ConfigurationError
from geotoolkit.gate.base import FleetStats, Gate, Usage

__all__ = ["KEY_PREFIX", "KeyStatus", "fleet_status"]

#: Every gate key starts with this (``geotoolkit.keys.gate_key``).
KEY_PREFIX = "geotoolkit:"


@dataclass(frozen=True)
class KeyStatus:
    """One key's fleet, as the gate's store sees it now (times on the store's clock)."""

    key: str
    #: Requests per second over the stats window (``window_seconds``), and the counts in it.
    pace: float
    window_seconds: float
    requests: int
    successes: int
    throttled: int
    #: The adaptive factor: 1.0 is the configured rate, less after 429s that kept coming.
    rate_factor: float
    #: 429s per successful answer over the window (None: no success to compare with).
    throttled_per_success: float | None
    pause_remaining: float
    pause_cause: str
    workers_active: int
    #: Sends counted against caps in the current UTC day and month.
    day: Usage
    month: Usage

    @classmethod
    def of(cls, key: str, stats: FleetStats, day: Usage, month: Usage) -> KeyStatus:
        ratio = (stats.throttled / stats.successes if stats.successes
                 else (0.0 if not stats.throttled else None))
        return cls(key=key, pace=stats.pace, window_seconds=stats.window_seconds,
                   requests=stats.requests, successes=stats.successes, throttled=stats.throttled,
                   rate_factor=stats.rate_factor, throttled_per_success=ratio,
                   pause_remaining=stats.pause_remaining, pause_cause=stats.pause_cause,
                   workers_active=stats.workers_active, day=day, month=month)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (JSON types only)."""
        return asdict(self)

    def to_json(self) -> str:
        """One JSON object.

        >>> KeyStatus.of("k", FleetStats(0.0, 10.0, 0, 0, 0), Usage("1970-01-01", 0, 86400.0),
        ...              Usage("1970-01", 0, 2678400.0)).to_json()[:30]
        '{"key": "k", "pace": 0.0, "win'
        """
        return json.dumps(self.as_dict())


def fleet_status(gate: Gate, key: str | None = None) -> list[KeyStatus]:
    """The status of every key with a pacing state on ``gate`` (or of ``key`` only).

    Listing the keys needs a gate that can (``FleetGate`` and ``FallbackGate``:
    a Redis ``SCAN``, a SQL ``SELECT DISTINCT``); each key then costs one round
    trip (two reads and a stats call on a gate that has no ``snapshot``).
    """
    keys = [key] if key is not None else _keys(gate)
    return [KeyStatus.of(k, *_snapshot(gate, k)) for k in keys]


def _keys(gate: Gate) -> list[str]:
    lister = getattr(gate, "keys", None)
    if lister is None:
        raise ConfigurationError(f"a {type(gate).__name__} cannot list its keys: give the key")
    found: list[str] = lister(KEY_PREFIX)
    return found


def _snapshot(gate: Gate, key: str) -> tuple[FleetStats, Usage, Usage]:
    snapshot = getattr(gate, "snapshot", None)
    if snapshot is not None:
        found: tuple[FleetStats, Usage, Usage] = snapshot(key)
        return found
    return gate.stats(key), gate.usage(key, "day"), gate.usage(key, "month")
