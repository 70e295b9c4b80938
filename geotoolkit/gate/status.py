"""What a gate knows about each key's fleet: the data of ``geotoolkit gate status URL --json``.

``fleet_status(gate)`` lists every gate key with a pacing state on the store (or
the one given) with its pace, adaptive factor, throttled answers (429s, 503s) per success,
running pause, fleet stop (the provider said the key's quota is spent: its cause and
end), active workers and cap counts of the current day and month (of UTC's calendar, or
of the zone given as ``tz``: where the provider's quota resets). A gate key is a
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

The allowed rate is the rate the fleet paces at times the adaptive factor. No gate
stores the configured rate, so it comes from what the caller knows (``rate=``, a
provider's published rate by host in ``published=``) or from a rate the fleet
discovered because none was configured (kept as the shared value ``rate`` of the
key's fleet namespace, ``<key>#fleet``: see ``RatePolicy``); with none of them it is
unknown (``None``):

>>> from geotoolkit.gate.fleet import DISCOVERED, AimdState
>>> gate.set_value(f"{key}#fleet", DISCOVERED, AimdState(4.0).to_text(), ttl_seconds=60)
True
>>> [status] = fleet_status(gate, published={"api.example.com": 2.0})
>>> status.host, status.rate, status.rate_source, status.allowed_rate
('api.example.com', 4.0, 'learned', 4.0)
>>> fleet_status(gate, rate=8.0)[0].rate_source
'configured'
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from geotoolkit.errors import ConfigurationError
from geotoolkit.gate.base import FleetStats, Gate, Usage
from geotoolkit.gate.stop import STOP_VALUE, FleetStop
from geotoolkit.periods import check_zone
from geotoolkit.redact import redact

__all__ = ["KEY_PREFIX", "KeyStatus", "RateSource", "fleet_status", "host_of"]

#: Every gate key starts with this (``geotoolkit.keys.gate_key``).
KEY_PREFIX = "geotoolkit:"

#: Where a key's rate came from: given by the caller, learned by the fleet, published by
#: the provider, or ``""``: unknown.
RateSource = Literal["configured", "learned", "published", ""]


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
    #: Throttled answers (429s, 503s) per successful answer over the window (None: no
    #: success to compare with).
    throttled_per_success: float | None
    pause_remaining: float
    #: Why the fleet pauses (text from a provider: redacted, as everything shown).
    pause_cause: str
    workers_active: int
    #: Sends counted against caps in the current day and month of the zone asked (``tz``).
    day: Usage
    month: Usage
    #: The provider host the key belongs to (``""`` for a key not made by ``gate_key``).
    host: str = ""
    #: The rate (requests/s) the fleet paces at before the factor, and where it came from
    #: (``None`` and ``""``: unknown).
    rate: float | None = None
    rate_source: RateSource = ""
    #: ``rate * rate_factor``: what the fleet may send now (``None``: unknown).
    allowed_rate: float | None = None
    #: A fleet stop (``geotoolkit.gate.stop``: the provider said the key's quota is spent):
    #: its remaining seconds (0: none), its end (epoch seconds, store clock; 0: none) and
    #: what it says (the provider's words, redacted).
    stop_remaining: float = 0.0
    stop_until: float = 0.0
    stop_cause: str = ""
    #: When this was read, on the store's clock (epoch seconds; not compared).
    now: float = field(default=0.0, compare=False)

    @classmethod
    def of(cls, key: str, stats: FleetStats, day: Usage, month: Usage, *,
           rate: float | None = None, rate_source: RateSource = "",
           stop: FleetStop | None = None) -> KeyStatus:
        stopped = stop is not None and stop.remaining(stats.now) > 0
        ratio = (stats.throttled / stats.successes if stats.successes
                 else (0.0 if not stats.throttled else None))
        allowed = None if rate is None else rate * stats.rate_factor
        return cls(key=key, pace=stats.pace, window_seconds=stats.window_seconds,
                   requests=stats.requests, successes=stats.successes, throttled=stats.throttled,
                   rate_factor=stats.rate_factor, throttled_per_success=ratio,
                   pause_remaining=stats.pause_remaining, pause_cause=redact(stats.pause_cause),
                   workers_active=stats.workers_active, day=day, month=month,
                   host=host_of(key), rate=rate, rate_source=rate_source if rate else "",
                   allowed_rate=allowed,
                   stop_remaining=stop.remaining(stats.now) if stop and stopped else 0.0,
                   stop_until=stop.until if stop and stopped else 0.0,
                   stop_cause=redact(stop.cause(stats.now)) if stop and stopped else "",
                   now=stats.now)

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


def fleet_status(
    gate: Gate,
    key: str | None = None,
    *,
    hosts: Collection[str] | None = None,
    rate: float | None = None,
    published: Mapping[str, float] | None = None,
    tz: str = "UTC",
) -> list[KeyStatus]:
    """The status of every key with a pacing state on ``gate`` (or of ``key`` only).

    Parameters
    ----------
    gate
        Any gate; listing its keys needs one that can (``FleetGate`` and
        ``FallbackGate``: a Redis ``SCAN``, a SQL ``SELECT DISTINCT``).
    key
        Only this gate key (then the gate need not list its keys).
    hosts
        Only the keys of these provider hosts (``host_of``).
    rate
        The rate (requests/s) the fleet is configured with: wins over any other.
    published
        Published rates by provider host, used for a key that learned none.
    tz
        The time zone of the caps' periods (an IANA name): the day and month whose
        counts are shown, and when they reset. Caps counted in another zone count apart
        (``Cap(n, tz=...)``).

    Each key costs two round trips: its stats (with the rate its fleet discovered, if
    it had to) and cap counts (one ``snapshot``; two reads and a stats call on a gate
    that has none), and its fleet stop, if any (``geotoolkit.gate.stop``).
    """
    tz = check_zone(tz)
    keys = [key] if key is not None else _keys(gate)
    if hosts is not None:
        wanted = {h.lower() for h in hosts}
        keys = [k for k in keys if host_of(k) in wanted]
    return [_status(gate, k, rate, published or {}, tz) for k in keys]


def _status(gate: Gate, key: str, rate: float | None, published: Mapping[str, float],
            tz: str) -> KeyStatus:
    stats, day, month = _snapshot(gate, key, tz)
    source: RateSource = "configured"
    if rate is None:
        rate, source = stats.learned_rate, "learned"
    if rate is None:
        rate, source = published.get(host_of(key)), "published"
    return KeyStatus.of(key, stats, day, month, rate=rate, rate_source=source,
                         stop=_stop(gate, key))


def _stop(gate: Gate, key: str) -> FleetStop | None:
    """The key's fleet stop, if any (a gate without shared values keeps none)."""
    values = getattr(gate, "values", None)
    return None if values is None else FleetStop.from_json(values(key, STOP_VALUE).get(STOP_VALUE))


def host_of(key: str) -> str:
    """The provider host of a gate key (``""`` for a key not made by ``gate_key``).

    >>> host_of("geotoolkit:api.example.com:0a1b2c"), host_of("elsewhere")
    ('api.example.com', '')
    """
    if not key.startswith(KEY_PREFIX):
        return ""
    host, _, _ = key[len(KEY_PREFIX):].rpartition(":")
    return host


def _keys(gate: Gate) -> list[str]:
    lister = getattr(gate, "keys", None)
    if lister is None:
        raise ConfigurationError(f"a {type(gate).__name__} cannot list its keys: give the key")
    found: list[str] = lister(KEY_PREFIX)
    return found


def _snapshot(gate: Gate, key: str, tz: str) -> tuple[FleetStats, Usage, Usage]:
    zone = {"tz": tz} if tz != "UTC" else {}  # a gate may predate zones
    snapshot = getattr(gate, "snapshot", None)
    if snapshot is not None:
        found: tuple[FleetStats, Usage, Usage] = snapshot(key, **zone)
        return found
    return gate.stats(key), gate.usage(key, "day", **zone), gate.usage(key, "month", **zone)
