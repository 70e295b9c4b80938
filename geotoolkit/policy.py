"""Retry-After parsing, backoff and pacing policy: pure functions, stdlib only."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from geotoolkit.errors import ConfigurationError

__all__ = ["Backoff", "RatePolicy", "parse_retry_after"]

_DIGITS = re.compile(r"[0-9]+")
_MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
_SHORT_DAYS = "mon|tue|wed|thu|fri|sat|sun"
_LONG_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTH = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
_TIME = r"(?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})"
# RFC 9110 section 5.6.7: IMF-fixdate, obsolete RFC 850 and asctime forms.
_IMF = re.compile(
    rf"(?:{_SHORT_DAYS}), (?P<d>\d{{2}}) (?P<mo>{_MONTH}) (?P<y>\d{{4}}) {_TIME} gmt", re.I)
_RFC850 = re.compile(
    rf"(?:{_LONG_DAYS}), (?P<d>\d{{2}})-(?P<mo>{_MONTH})-(?P<y>\d{{2}}) {_TIME} gmt", re.I)
_ASCTIME = re.compile(
    rf"(?:{_SHORT_DAYS}) (?P<mo>{_MONTH}) (?P<d>\d{{2}}| \d) {_TIME} (?P<y>\d{{4}})", re.I)


def _full_year(two_digits: int, now: datetime) -> int:
    """RFC 9110: a two-digit year more than 50 years in the future is in the past century."""
    year = now.year - now.year % 100 + two_digits
    return year - 100 if year > now.year + 50 else year


def _parse_http_date(text: str, now: datetime) -> datetime | None:
    for pattern in (_IMF, _RFC850, _ASCTIME):
        found = pattern.fullmatch(text)
        if found is None:
            continue
        year = int(found["y"])
        if pattern is _RFC850:
            year = _full_year(year, now)
        second = min(int(found["s"]), 59)  # a leap second reads as :59
        try:
            return datetime(year, _MONTHS[found["mo"].lower()], int(found["d"]),
                            int(found["h"]), int(found["mi"]), second, tzinfo=UTC)
        except ValueError:  # impossible dates: 30 Feb, 25:00, ...
            return None
    return None


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Return the seconds a ``Retry-After`` header asks to wait, or ``None``.

    RFC 9110 section 10.2.3: either delay-seconds (ASCII digits only) or an
    HTTP-date in any of its three forms. A date in the past gives ``0.0``.
    Anything else gives ``None``; this function never raises.

    Parameters
    ----------
    value
        The raw header value, or ``None`` when the header is absent.
    now
        The reference time for HTTP-dates, ideally the response's ``Date``
        header; defaults to the current UTC time. A naive datetime is UTC.

    Examples
    --------
    >>> parse_retry_after("120")
    120.0
    >>> ref = datetime(1994, 11, 6, 8, 49, 0, tzinfo=UTC)
    >>> parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=ref)
    37.0
    >>> parse_retry_after("1.5") is None
    True
    """
    if not isinstance(value, str):
        return None
    text = value.strip(" \t\r\n")
    if _DIGITS.fullmatch(text):
        return float(int(text))
    if now is None:
        now = datetime.now(UTC)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    when = _parse_http_date(text, now)
    if when is None:
        return None
    return max(0.0, (when - now).total_seconds())


@dataclass(frozen=True)
class Backoff:
    """Jittered, clamped exponential backoff; overflow-safe for any attempt.

    The ceiling for attempt ``n`` (1-based) is
    ``min(max_seconds, initial_seconds * multiplier ** (n - 1))`` and the delay is
    drawn from ``[ceiling * (1 - jitter), ceiling]``: ``jitter=1`` is full jitter.

    After a 429/503 the wait is ``max(delay(attempt), min(retry_after, retry_after_cap_seconds))``,
    so a server that keeps answering ``Retry-After: 1`` still sees a growing backoff
    and a stray ``Retry-After: 86400`` cannot park a worker for a day.

    Examples
    --------
    >>> b = Backoff(initial_seconds=1.0, max_seconds=60.0, jitter=0.0)
    >>> [b.delay(n) for n in (1, 2, 3, 10, 10**6)]
    [1.0, 2.0, 4.0, 60.0, 60.0]
    >>> b.wait(1, retry_after=86_400)
    300.0
    """

    initial_seconds: float = 1.0
    multiplier: float = 2.0
    max_seconds: float = 120.0
    jitter: float = 1.0
    retry_after_cap_seconds: float = 300.0

    def __post_init__(self) -> None:
        for name in ("initial_seconds", "max_seconds", "retry_after_cap_seconds"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigurationError(f"Backoff.{name} must be finite and >= 0, got {value!r}")
        if not (math.isfinite(self.multiplier) and self.multiplier >= 1):
            raise ConfigurationError(f"Backoff.multiplier must be >= 1, got {self.multiplier!r}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigurationError(f"Backoff.jitter must be in [0, 1], got {self.jitter!r}")

    def ceiling(self, attempt: int) -> float:
        """The largest delay for ``attempt`` (1-based), computed without overflow."""
        exponent = max(0, attempt - 1)
        if self.initial_seconds == 0 or self.multiplier == 1:
            return min(self.initial_seconds, self.max_seconds)
        limit = math.log(max(self.max_seconds, 1e-300) / self.initial_seconds, self.multiplier)
        if exponent >= limit:
            return self.max_seconds
        return min(self.max_seconds, self.initial_seconds * self.multiplier**exponent)

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """A jittered delay for ``attempt``; ``rng`` is injectable for tests."""
        top = self.ceiling(attempt)
        draw = (rng or random).random()
        return top * (1.0 - self.jitter * draw)

    def wait(
        self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """The wait after a throttled attempt: ``max(delay, clamped Retry-After)``."""
        hint = 0.0
        if retry_after is not None and not math.isnan(retry_after):
            hint = min(max(retry_after, 0.0), self.retry_after_cap_seconds)
        return max(self.delay(attempt, rng), hint)


@dataclass(frozen=True)
class RatePolicy:
    """How fast the whole fleet may send on one key.

    ``rate`` is requests per second for every worker together (``None``: no
    limit, though pauses published to the gate are still honoured).
    ``safety_margin`` paces a little under the rate (default 3 %): limiters in the
    wild enforce an exact minimum interval, and wake-up jitter would otherwise
    make a client paced at exactly the rate look too fast.
    ``horizon_seconds``: the gate reserves a slot only this far ahead; a longer
    wait is returned without a reservation.

    >>> RatePolicy(rate=1.0, safety_margin=0.0).interval
    1.0
    """

    rate: float | None = 1.0
    safety_margin: float = 0.03
    horizon_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.rate is not None and not (math.isfinite(self.rate) and self.rate > 0):
            raise ConfigurationError(f"rate must be a positive number of requests/s, got {self.rate!r}")
        if not 0.0 <= self.safety_margin < 0.5:
            raise ConfigurationError(f"safety_margin must be in [0, 0.5), got {self.safety_margin!r}")
        if not (math.isfinite(self.horizon_seconds) and self.horizon_seconds > 0):
            raise ConfigurationError("horizon_seconds must be positive")

    @property
    def interval(self) -> float:
        """Seconds between two sends of the fleet (0 when unlimited)."""
        if self.rate is None:
            return 0.0
        return 1.0 / (self.rate * (1.0 - self.safety_margin))
