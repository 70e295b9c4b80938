"""A fleet stop: the provider said the key's quota is spent, so every worker on it stops.

Quotas are per API key. When one worker's provider answers "quota exhausted" (an HTTP
402, or a provider's own quota answer raising ``QuotaExceededError``), the worker
publishes a stop on the gate key: the shared value ``stop`` (``STOP_VALUE``) holding a
``FleetStop`` (until when, on the store's clock; the provider's words, redacted; the
status), living until the stop ends. ``FleetGate`` reads it in the round trip of every
``reserve``, ``claim`` and ``state`` (``Reservation.stop``, ``Claim.stop``,
``GateState.stop``: no round trip of its own): a send whose last check finds it does
not go, and the next reservation raises the same
``QuotaExceededError``, saying another worker on the key met it.

The stop ends at the provider's stated reset (``Retry-After``, ``X-RateLimit-Reset``,
OpenCage's ``rate.reset``), else after ``DEFAULT_STOP_SECONDS``; ``geotoolkit gate resume``
ends it sooner (it deletes the value). A gate's own ``Cap`` is not a stop: its count
already stops every worker. Only a gate key of one API key gets a stop
(``geotoolkit.keys.is_keyed``: a keyless host's key is shared by every user agent and
address on the gate). An authentication refusal (401/403) publishes no stop (see
docs/fleet-gate.md). Stdlib only, over the pure core.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass

from geotoolkit.errors import QuotaExceededError
from geotoolkit.redact import redact

__all__ = ["DEFAULT_STOP_SECONDS", "MAX_STOP_SECONDS", "STOP_VALUE", "FleetStop", "stop_seconds"]

#: The shared value of a gate key holding its fleet stop.
STOP_VALUE = "stop"
#: How long a stop lasts when the provider states no reset: an hour. Long enough that the
#: fleet (and a rerun within it) sends nothing into a spent quota; short enough that a quota
#: that came back (a new day, a plan upgraded) costs at most an hour's wait, then one 402
#: per stop (``geotoolkit gate resume`` ends it at once).
DEFAULT_STOP_SECONDS = 3600.0
#: A stated reset further than this (a month and a day) is cut to it.
MAX_STOP_SECONDS = 32 * 86_400.0
#: The longest provider text kept in a stop.
_MAX_REASON_CHARS = 500


def stop_seconds(error: QuotaExceededError) -> tuple[float, bool]:
    """How long a stop for ``error`` lasts, and whether the provider said so.

    >>> stop_seconds(QuotaExceededError("spent", retry_after=120.0))
    (120.0, True)
    >>> stop_seconds(QuotaExceededError("spent"))
    (3600.0, False)
    """
    hint = error.retry_after
    if hint is not None and math.isfinite(hint) and hint > 0:
        return min(float(hint), MAX_STOP_SECONDS), True
    return DEFAULT_STOP_SECONDS, False


@dataclass(frozen=True)
class FleetStop:
    """A stop on one gate key: ``until`` (store clock), the provider's ``reason``
    (redacted), its HTTP ``status``, and whether the provider ``stated`` the end."""

    until: float
    reason: str
    status: int | None = None
    stated: bool = False

    def to_json(self) -> str:
        return json.dumps([self.until, self.reason, self.status, self.stated])

    @classmethod
    def from_json(cls, text: str | None) -> FleetStop | None:
        """The stop a shared value holds; ``None`` when absent or unreadable.

        >>> FleetStop.from_json(FleetStop(5.0, "spent", 402).to_json())
        FleetStop(until=5.0, reason='spent', status=402, stated=False)
        >>> FleetStop.from_json("junk") is None
        True
        """
        if not text:
            return None
        try:
            until, reason, status, stated = json.loads(text)
            stop = cls(float(until), redact(str(reason))[:_MAX_REASON_CHARS],
                       None if status is None else int(status), bool(stated))
        except (ValueError, TypeError):
            return None
        return stop if math.isfinite(stop.until) else None

    @classmethod
    def of(cls, error: QuotaExceededError, now: float, secrets: tuple[str, ...] = ()) -> FleetStop:
        """The stop ``error`` (the provider's answer) publishes at ``now`` (store clock)."""
        seconds, stated = stop_seconds(error)
        return cls(now + seconds, redact(str(error), secrets)[:_MAX_REASON_CHARS],
                   error.status_code, stated)

    def remaining(self, now: float) -> float:
        return max(0.0, self.until - now)

    def cause(self, now: float) -> str:
        """What ``gate status`` and the fleet panel say.

        >>> print(FleetStop(1_700_003_600.0, "x quota exhausted (HTTP 402)", 402, True).cause(0.0))
        quota spent: x quota exhausted (HTTP 402); every worker on the key stops until 2023-11-14 23:13:20 UTC
        """
        return f"quota spent: {self.reason}; every worker on the key stops {self._until()}"

    def _until(self) -> str:
        """When the stop ends, in words, and whether the provider said so."""
        end = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.until))
        return f"until {end}{'' if self.stated else ' (a default: the provider stated no reset)'}"

    def error(self, now: float, *, host: str = "", provider: str | None = None
              ) -> QuotaExceededError:
        """The error a worker that meets the stop raises: the class of the first worker's,
        ``retry_after`` the stop's remaining seconds when the provider stated its end
        (``None`` otherwise, as that worker's own 402 says)."""
        left = self.remaining(now)
        where = f"{host}: " if host else ""
        return QuotaExceededError(
            f"{where}another worker on this API key was told its quota is spent "
            f"({self.reason}); the fleet stops on the key for {left:.0f} s more, "
            f"{self._until()}. "
            "Finished rows are kept; `geotoolkit gate resume` ends the stop sooner.",
            retry_after=left if self.stated else None, provider=provider,
            status_code=self.status)
