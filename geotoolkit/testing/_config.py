"""The simulator's configuration: one frozen value, replaced whole on each change."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from typing import Literal, get_args

from geotoolkit.testing.faults import parse_fault
from geotoolkit.testing.limiters import LIMITERS, LimiterName

__all__ = ["RETRY_AFTER_MODES", "BatchCost", "Config", "OutageMode", "RetryAfterMode",
           "format_retry_after", "quota_of", "reset_headers"]

#: The named modes of ``retry_after`` (besides a fixed number of seconds).
NamedRetryAfter = Literal["auto", "http-date", "missing", "reset-headers"]
RETRY_AFTER_MODES: tuple[str, ...] = get_args(NamedRetryAfter)

#: ``retry_after`` configuration: a mode, or a fixed delta-seconds value.
RetryAfterMode = NamedRetryAfter | int

#: A whole-server outage: refuse connections, reset them, or accept and never answer.
OutageMode = Literal["refuse", "reset", "hang"]

#: What a batch request takes from the rate limiter and the daily cap: 1, or 1 per row.
BatchCost = Literal["request", "row"]

def _positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class Config:
    """Every setting of a simulator; replaced whole on each change (from any thread)."""

    rate_limit: float | None
    window_seconds: float
    retry_after: RetryAfterMode
    latency_seconds: float
    error_503_rate: float
    valid_keys: frozenset[str] | None
    daily_cap: int | None
    hang_seconds: float
    clock: Callable[[], float]
    limiter: LimiterName = "sliding-window"
    burst: int | None = None
    fault: str | None = None
    trickle_interval_seconds: float = 0.5
    trickle_chunk_bytes: int = 16
    huge_body_bytes: int = 50_000_000
    batch_cost: BatchCost = "request"
    batch_hang_over: int | None = None
    outage: OutageMode | None = None

    def __post_init__(self) -> None:
        if self.rate_limit is not None:
            _positive("rate_limit", self.rate_limit)
        _positive("window_seconds", self.window_seconds)
        ra = self.retry_after
        if isinstance(ra, bool) or not (
            (isinstance(ra, int) and ra >= 0) or ra in RETRY_AFTER_MODES
        ):
            raise ValueError(
                f"retry_after must be one of {RETRY_AFTER_MODES} or a non-negative int, got {ra!r}"
            )
        if not self.latency_seconds >= 0:
            raise ValueError(f"latency_seconds must be >= 0, got {self.latency_seconds!r}")
        if not 0 <= self.error_503_rate <= 1:
            raise ValueError(f"error_503_rate must be in [0, 1], got {self.error_503_rate!r}")
        if self.daily_cap is not None and self.daily_cap < 0:
            raise ValueError(f"daily_cap must be >= 0 or None, got {self.daily_cap!r}")
        if not self.hang_seconds >= 0:
            raise ValueError(f"hang_seconds must be >= 0, got {self.hang_seconds!r}")
        if not callable(self.clock):
            raise ValueError("clock must be callable")
        self._check_new_settings()

    def _check_new_settings(self) -> None:
        if self.limiter not in LIMITERS:
            raise ValueError(f"limiter must be one of {sorted(LIMITERS)}, got {self.limiter!r}")
        burst = self.burst
        if burst is not None and (isinstance(burst, bool) or not isinstance(burst, int) or burst < 0):
            raise ValueError(f"burst must be a whole number >= 0 or None, got {burst!r}")
        if self.fault is not None:
            object.__setattr__(self, "fault", parse_fault(self.fault))
        _positive("trickle_interval_seconds", self.trickle_interval_seconds)
        for name in ("trickle_chunk_bytes", "huge_body_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        if self.batch_cost not in get_args(BatchCost):
            raise ValueError(f"batch_cost must be one of {get_args(BatchCost)}, got {self.batch_cost!r}")
        over = self.batch_hang_over
        if over is not None and (isinstance(over, bool) or not isinstance(over, int) or over < 0):
            raise ValueError(f"batch_hang_over must be a whole number >= 0 or None, got {over!r}")
        if self.outage is not None and self.outage not in get_args(OutageMode):
            raise ValueError(f"outage must be one of {get_args(OutageMode)} or None, got {self.outage!r}")



def format_retry_after(mode: RetryAfterMode, now: float, seconds: int) -> str | None:
    """The header for ``mode``: ``seconds`` is what the limiter would say (``auto``)."""
    if mode in ("missing", "reset-headers"):
        return None
    if isinstance(mode, int):
        return str(mode)
    if mode == "auto":
        return str(seconds)
    return formatdate(now + seconds, usegmt=True)


def quota_of(cfg: Config) -> int | None:
    """The requests a limited key may make per window (``None``: not limited)."""
    return None if cfg.rate_limit is None else max(1, round(cfg.rate_limit * cfg.window_seconds))


def reset_headers(now: float, seconds: int, limit: int | None,
                  window_seconds: float) -> tuple[tuple[str, str], ...]:
    """A quota's reset, as providers say it without ``Retry-After`` (``reset-headers``):
    the IETF draft's ``RateLimit-Policy`` and ``RateLimit`` (``t``: seconds to the reset)
    and the common ``X-RateLimit-*`` trio (``X-RateLimit-Reset``: a Unix time).

    >>> dict(reset_headers(1000.5, 3, 10, 1.0))["RateLimit"]
    '"default";r=0;t=3'
    >>> dict(reset_headers(1000.5, 3, 10, 1.0))["X-RateLimit-Reset"]
    '1004'
    """
    quota = max(1, limit or 1)
    return (("RateLimit-Policy", f'"default";q={quota};w={max(1, round(window_seconds))}'),
            ("RateLimit", f'"default";r=0;t={seconds}'),
            ("X-RateLimit-Limit", str(quota)),
            ("X-RateLimit-Remaining", "0"),
            ("X-RateLimit-Reset", str(math.ceil(now) + seconds)))
