"""The rate limiters real providers run, as pure per-key algorithms on an injected ``now``.

Every limiter is a small class holding per-key state and nothing else: no clock, no I/O,
no threads (the simulator calls it under its own lock). ``admit(key, now)`` decides one
request and records it; ``check(key, now)`` says what ``admit`` would decide, changing
nothing; ``refund(key)`` undoes the last admission of ``key`` (for a scripted 429 that
must not count). A request may cost more than one unit (``cost=``: a batch counted per
row): it is admitted when the key has room for it (or, costing more than the limiter
ever holds, when the key is idle), and all of its cost is recorded, so a big batch
delays the key's next requests. The parameters can be changed at any time with ``configure`` without
losing the per-key history, like a provider changing a plan.

- ``sliding-window``: at most ``rate * window`` admissions in any ``window``;
  Retry-After: until the oldest counted admission leaves the window.
- ``sliding-log``: the same, but rejected requests are logged too (they count against
  the key: hammering keeps it locked out).
- ``fixed-window``: at most ``rate * window`` admissions per calendar-aligned window;
  Retry-After: until the window ends.
- ``gcra`` (alias ``leaky-bucket``): nginx ``limit_req`` with ``burst`` and ``nodelay``;
  Retry-After: always 1, as nginx-style limiters say.
- ``token-bucket``: a bucket of ``burst`` tokens (default: ``rate``) refilled at ``rate``
  per second, one token per request; Retry-After: until the next token.

Retry-After values are whole seconds, at least 1, rounded up.

>>> limiter = GCRA(rate=2.0, burst=0)           # one request every 0.5 s
>>> [limiter.admit("k", t).admitted for t in (0.0, 0.25, 0.5)]
[True, False, True]
>>> limiter.admit("other", 0.5).admitted        # state is per key
True
>>> FixedWindow(rate=1.0, window_seconds=60.0).admit("k", 30.0)
Verdict(admitted=True, wait_seconds=0.0, retry_after=1)
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass
from typing import ClassVar, Final, Literal

__all__ = [
    "GCRA",
    "LIMITERS",
    "FixedWindow",
    "LeakyBucket",
    "Limiter",
    "LimiterName",
    "SlidingLog",
    "SlidingWindow",
    "TokenBucket",
    "Verdict",
    "make_limiter",
]

#: The limiter names ``ProviderSimulator(limiter=...)`` accepts.
LimiterName = Literal[
    "sliding-window", "sliding-log", "fixed-window", "gcra", "leaky-bucket", "token-bucket"
]

#: Arrivals this close to a boundary count as on it (float sums of 1/r drift by ulps).
_EPSILON: Final = 1e-6

Key = str | None


@dataclass(frozen=True)
class Verdict:
    """One decision: admitted or not, and when the key may try again.

    ``wait_seconds`` is 0.0 when admitted; ``retry_after`` is the ``Retry-After`` this
    limiter would announce for a 429 issued now (whole seconds, at least 1).
    """

    admitted: bool
    wait_seconds: float
    retry_after: int


def _ceil_seconds(wait: float) -> int:
    """Whole seconds, rounded up, at least 1 (``Retry-After: 0`` invites a hot loop)."""
    return max(1, math.ceil(wait - 1e-9))


def _window_shape(rate: float, window_seconds: float) -> tuple[int, float]:
    """``(capacity, window)``; a window too short for one request is widened to ``1/rate``.

    >>> _window_shape(0.2, 10.0), _window_shape(2.0, 0.25)
    ((2, 10.0), (1, 0.5))
    """
    allowed = rate * window_seconds
    if allowed < 1:
        return 1, 1.0 / rate
    return math.floor(allowed + 1e-9), window_seconds


class Limiter(ABC):
    """Per-key admission control with parameters ``rate`` (requests/s), ``window_seconds``
    and ``burst``; each algorithm uses the ones it needs.

    Parameters
    ----------
    rate : float
        Requests per second (> 0).
    window_seconds : float
        The window of the window-based limiters (> 0).
    burst : int or None
        ``gcra``: requests allowed ahead of the rate (default 0); ``token-bucket``: the
        bucket's capacity (default: ``rate``, at least 1). Ignored by the others.
    """

    name: ClassVar[str]

    def __init__(
        self, rate: float, *, window_seconds: float = 1.0, burst: int | None = None
    ) -> None:
        self.rate = self.window_seconds = 0.0
        self.burst: int | None = None
        self.clear()
        self.configure(rate, window_seconds=window_seconds, burst=burst)

    def configure(
        self, rate: float, *, window_seconds: float = 1.0, burst: int | None = None
    ) -> None:
        """Change the parameters; the per-key history is kept."""
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"rate must be a positive number, got {rate!r}")
        if not (math.isfinite(window_seconds) and window_seconds > 0):
            raise ValueError(f"window_seconds must be a positive number, got {window_seconds!r}")
        if burst is not None and (isinstance(burst, bool) or not isinstance(burst, int) or burst < 0):
            raise ValueError(f"burst must be a whole number >= 0 or None, got {burst!r}")
        self.rate, self.window_seconds, self.burst = float(rate), float(window_seconds), burst

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(rate={self.rate!r}, window_seconds={self.window_seconds!r}, "
                f"burst={self.burst!r})")

    def _verdict(self, wait: float) -> Verdict:
        wait = max(0.0, wait)
        return Verdict(wait == 0.0, wait, self.retry_after(wait))

    def retry_after(self, wait_seconds: float) -> int:
        """The ``Retry-After`` seconds this limiter announces when the key must wait."""
        return _ceil_seconds(wait_seconds)

    @abstractmethod
    def check(self, key: Key, now: float, cost: int = 1) -> Verdict:
        """What ``admit(key, now, cost)`` would decide; records nothing."""

    @abstractmethod
    def admit(self, key: Key, now: float, cost: int = 1) -> Verdict:
        """Decide one request of ``key`` costing ``cost`` units at ``now``, and record it."""

    @abstractmethod
    def refund(self, key: Key) -> None:
        """Undo the last admission of ``key`` (nothing when there is none to undo)."""

    @abstractmethod
    def clear(self) -> None:
        """Forget every key (also sets up the empty state)."""


class SlidingWindow(Limiter):
    """At most ``capacity = floor(rate * window)`` admissions in any ``window`` (a log of
    admission times per key); rejected requests are not logged.

    >>> w = SlidingWindow(rate=2.0, window_seconds=1.0)
    >>> [w.admit("k", t).admitted for t in (0.0, 0.9, 1.0, 1.5)]
    [True, True, True, False]
    >>> round(w.check("k", 1.5).wait_seconds, 6)   # 0.9 leaves the window at 1.9
    0.4
    """

    name = "sliding-window"
    _counts_rejections: ClassVar[bool] = False

    _log: dict[Key, deque[float]]
    _costs: dict[Key, int]

    def _trimmed(self, key: Key, now: float) -> tuple[deque[float], int, float]:
        capacity, window = _window_shape(self.rate, self.window_seconds)
        log = self._log.setdefault(key, deque())
        while log and log[0] <= now - window:
            log.popleft()
        return log, capacity, window

    @staticmethod
    def _wait(log: deque[float], capacity: int, window: float, now: float, cost: int) -> float:
        keep = capacity - min(cost, capacity)  # entries that may stay in the window
        if len(log) <= keep:
            return 0.0
        return log[len(log) - keep - 1] + window - now

    def check(self, key: Key, now: float, cost: int = 1) -> Verdict:
        log, capacity, window = self._trimmed(key, now)
        return self._verdict(self._wait(log, capacity, window, now, cost))

    def admit(self, key: Key, now: float, cost: int = 1) -> Verdict:
        log, capacity, window = self._trimmed(key, now)
        verdict = self._verdict(self._wait(log, capacity, window, now, cost))
        if verdict.admitted:
            log.extend([now] * cost)
            self._costs[key] = cost
        elif self._counts_rejections:  # logged all the same: it counts against the key
            log.extend([now] * cost)
            verdict = self._verdict(self._wait(log, capacity, window, now, cost))
        return verdict

    def refund(self, key: Key) -> None:
        log = self._log.get(key)
        for _ in range(self._costs.pop(key, 1)):
            if log:
                log.pop()

    def clear(self) -> None:
        self._log = {}
        self._costs = {}


class SlidingLog(SlidingWindow):
    """A sliding window that logs rejected requests too: hammering keeps you locked out.

    >>> s = SlidingLog(rate=1.0, window_seconds=1.0)
    >>> [s.admit("k", t).admitted for t in (0.0, 0.5, 1.2, 2.3)]   # 1.2: 0.5 still counts
    [True, False, False, True]
    """

    name = "sliding-log"
    _counts_rejections = True


class FixedWindow(Limiter):
    """At most ``floor(rate * window)`` admissions per calendar-aligned window
    (``[n * window, (n + 1) * window)`` on the clock's epoch, as per-minute plans count).

    >>> f = FixedWindow(rate=2.0, window_seconds=1.0)
    >>> [f.admit("k", t).admitted for t in (0.1, 0.2, 0.3, 1.0)]
    [True, True, False, True]
    >>> per_minute = FixedWindow(rate=1 / 60, window_seconds=60.0)
    >>> per_minute.admit("k", 90.0).admitted, per_minute.admit("k", 90.5).retry_after
    (True, 30)
    """

    name = "fixed-window"

    _counts: dict[Key, tuple[int, int]]
    _costs: dict[Key, int]

    def _state(self, key: Key, now: float, cost: int) -> tuple[int, int, float]:
        """``(window index, units used in it, wait)`` for ``key`` at ``now``."""
        capacity, window = _window_shape(self.rate, self.window_seconds)
        index = math.floor(now / window)
        seen, count = self._counts.get(key, (index, 0))
        count = count if seen == index else 0
        room = count + min(cost, capacity) <= capacity
        return index, count, (0.0 if room else (index + 1) * window - now)

    def check(self, key: Key, now: float, cost: int = 1) -> Verdict:
        return self._verdict(self._state(key, now, cost)[2])

    def admit(self, key: Key, now: float, cost: int = 1) -> Verdict:
        index, count, wait = self._state(key, now, cost)
        verdict = self._verdict(wait)
        if verdict.admitted:
            self._counts[key] = (index, count + cost)
            self._costs[key] = cost
        return verdict

    def refund(self, key: Key) -> None:
        state = self._counts.get(key)
        if state is not None and state[1] > 0:
            self._counts[key] = (state[0], max(0, state[1] - self._costs.pop(key, 1)))

    def clear(self) -> None:
        self._counts = {}
        self._costs = {}


class GCRA(Limiter):
    """The generic cell rate algorithm: nginx ``limit_req zone rate=r burst=b nodelay``.

    A request at ``now`` is admitted when it arrives no earlier than ``tat - burst/rate``
    (``tat``: the theoretical arrival time of the key's next request), and then
    ``tat = max(tat, now) + 1/rate``. With burst 0, two requests closer than ``1/rate``
    apart: the second is rejected. Rejections do not move ``tat``. Like nginx, the state
    is kept in requests (the excess over the rate), so a new rate applies to it at once.
    It announces ``Retry-After: 1`` whatever the wait, as such limiters do.

    >>> g = GCRA(rate=1.0, burst=2)
    >>> [g.admit("k", 0.0).admitted for _ in range(4)]     # 1 + burst at once
    [True, True, True, False]
    >>> g.check("k", 0.0)
    Verdict(admitted=False, wait_seconds=1.0, retry_after=1)
    """

    name = "gcra"

    _excess: dict[Key, tuple[float, float]]  # key -> (tat - as_of in requests, as of)
    _previous: dict[Key, tuple[float, float] | None]

    def retry_after(self, wait_seconds: float) -> int:
        return 1

    def _level(self, key: Key, now: float) -> float:
        """The key's excess at ``now``, in requests: ``(tat - now) * rate``, at least 0."""
        excess, as_of = self._excess.get(key, (0.0, now))
        return max(0.0, excess - max(0.0, now - as_of) * self.rate)

    def _wait(self, level: float, cost: int) -> float:
        burst = self.burst or 0
        over = level - burst + (min(cost, burst + 1) - 1)  # whole numbers last: no float drift
        return 0.0 if over <= _EPSILON * self.rate else over / self.rate

    def check(self, key: Key, now: float, cost: int = 1) -> Verdict:
        return self._verdict(self._wait(self._level(key, now), cost))

    def admit(self, key: Key, now: float, cost: int = 1) -> Verdict:
        level = self._level(key, now)
        verdict = self._verdict(self._wait(level, cost))
        if verdict.admitted:
            self._previous[key] = self._excess.get(key)
            self._excess[key] = (level + cost, max(now, self._excess.get(key, (0.0, now))[1]))
        return verdict

    def refund(self, key: Key) -> None:
        if key in self._previous:
            previous = self._previous.pop(key)
            if previous is None:
                self._excess.pop(key, None)
            else:
                self._excess[key] = previous

    def clear(self) -> None:
        self._excess = {}
        self._previous = {}


class TokenBucket(Limiter):
    """A bucket of ``burst`` tokens (default: ``rate``, at least 1), full at first, refilled
    continuously at ``rate`` tokens per second; each admission takes one token.

    >>> b = TokenBucket(rate=1.0, burst=2)
    >>> [b.admit("k", 0.0).admitted for _ in range(3)]
    [True, True, False]
    >>> b.check("k", 0.25)                     # 0.25 of a token: 0.75 s to the next one
    Verdict(admitted=False, wait_seconds=0.75, retry_after=1)
    """

    name = "token-bucket"

    _buckets: dict[Key, tuple[float, float]]
    _previous: dict[Key, tuple[float, float] | None]

    @property
    def capacity(self) -> float:
        """Tokens the bucket holds when full."""
        return float(self.burst) if self.burst else max(1.0, self.rate)

    def _tokens(self, key: Key, now: float) -> tuple[float, float]:
        tokens, as_of = self._buckets.get(key, (self.capacity, now))
        elapsed = max(0.0, now - as_of)
        return min(self.capacity, tokens + elapsed * self.rate), max(as_of, now)

    def _wait(self, tokens: float, cost: int) -> float:
        missing = min(float(cost), self.capacity) - tokens
        return 0.0 if missing <= _EPSILON * self.rate else missing / self.rate

    def check(self, key: Key, now: float, cost: int = 1) -> Verdict:
        return self._verdict(self._wait(self._tokens(key, now)[0], cost))

    def admit(self, key: Key, now: float, cost: int = 1) -> Verdict:
        tokens, as_of = self._tokens(key, now)
        verdict = self._verdict(self._wait(tokens, cost))
        if verdict.admitted:  # a batch costing more than the bucket holds leaves it in debt
            self._previous[key] = self._buckets.get(key)
            self._buckets[key] = (tokens - cost if cost > 1 else max(0.0, tokens - 1.0), as_of)
        return verdict

    def refund(self, key: Key) -> None:
        if key in self._previous:
            previous = self._previous.pop(key)
            if previous is None:
                self._buckets.pop(key, None)
            else:
                self._buckets[key] = previous

    def clear(self) -> None:
        self._buckets = {}
        self._previous = {}


class LeakyBucket(GCRA):
    """``leaky-bucket``: the GCRA under its other name (a leaky bucket "as a meter")."""

    name = "leaky-bucket"


#: Limiter classes by name.
LIMITERS: Final[dict[str, type[Limiter]]] = {
    cls.name: cls
    for cls in (SlidingWindow, SlidingLog, FixedWindow, GCRA, LeakyBucket, TokenBucket)
}


def make_limiter(
    name: str, rate: float, *, window_seconds: float = 1.0, burst: int | None = None
) -> Limiter:
    """A limiter by name (one of ``LIMITERS``).

    >>> make_limiter("token-bucket", 5.0, burst=10).capacity
    10.0
    """
    try:
        cls = LIMITERS[name]
    except (KeyError, TypeError):
        raise ValueError(f"limiter must be one of {sorted(LIMITERS)}, got {name!r}") from None
    return cls(rate, window_seconds=window_seconds, burst=burst)
