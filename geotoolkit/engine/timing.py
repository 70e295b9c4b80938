"""What a worker learns from its gate calls: the store's clock, the usual round trip and how
late its sends usually fire, and the counts it has not reported yet. Stdlib only."""

from __future__ import annotations

import math
from dataclasses import dataclass

from geotoolkit.gate.base import Report

__all__ = ["ClockSync", "Counts", "SlotTiming"]



@dataclass
class Counts:
    """What a run saw since its last report to the gate (flushed with its next gate call),
    and when the first of it was seen, on the store's clock (``at``).

    >>> counts = Counts()
    >>> counts.add(at=10.5, requests=1); counts.add(at=10.7, successes=1)
    >>> counts.take()
    Report(requests=1, successes=1, throttled=0, at=10.5)
    >>> counts.take().at is None   # taken: nothing left, no instant
    True
    """

    requests: int = 0
    successes: int = 0
    throttled: int = 0
    at: float | None = None

    def add(self, *, at: float, requests: int = 0, successes: int = 0, throttled: int = 0) -> None:
        """Count what was seen at ``at`` (the store's clock). A report holds a worker's few
        counts since its last gate call (measured: one or two) and goes to the bucket of the
        first: the rest are off by at most the time between them."""
        self.requests += requests
        self.successes += successes
        self.throttled += throttled
        if self.at is None:
            self.at = at

    def take(self) -> Report:
        """The report to send, resetting the counts."""
        report = Report(self.requests, self.successes, self.throttled, self.at)
        self.requests = self.successes = self.throttled = 0
        self.at = None
        return report


class ClockSync:
    """The store's clock minus ours, from the fastest recent round trips (as NTP does).

    A reply stamped ``server`` by the store between our ``start`` and ``end`` bounds
    the offset to ``server - (start + end) / 2 +- rtt / 2``; the estimate is the
    value in those bounds closest to zero, from the fastest round trip (older ones
    count slowly less): exactly 0 when the store shares our clock, whatever the
    latency.

    >>> sync = ClockSync()
    >>> sync.update(start=10.0, end=10.2, server=10.15)   # same clock, slow reply
    >>> sync.offset, sync.local(12.0)
    (0.0, 12.0)
    >>> sync.update(start=20.0, end=20.002, server=25.001)  # a store 5 s ahead
    >>> round(sync.offset, 3)    # known to within the round trip's 1 ms
    4.999
    """

    def __init__(self) -> None:
        self.offset, self._rtt = 0.0, math.inf

    def update(self, start: float, end: float, server: float) -> None:
        rtt = max(0.0, end - start)
        self._rtt *= 1.02
        if rtt <= self._rtt:
            centre = server - (start + end) / 2
            self._rtt, self.offset = rtt, math.copysign(max(0.0, abs(centre) - rtt / 2), centre)

    def local(self, server_time: float) -> float:
        """A store-clock instant on our clock."""
        return server_time - self.offset


class SlotTiming:
    """How a worker keeps its sends on their slots, from what its gate calls show.

    ``observe`` every gate call (our ``start`` and ``end``, the store's ``server``
    stamp): it feeds the ``ClockSync`` (``local``) and a moving average of the
    round trip, so the pause check before a send can start that much early
    (``lead``, at most ``max_lead``). ``on_time(late, tolerance)`` tells whether a
    send ``late`` seconds after its slot is within ``tolerance`` of the usual
    lateness: the mean of the sends so far and a prior of 0 (strict at the start,
    when a fleet starting together is late), then of the last ``memory`` sends.

    >>> timing = SlotTiming()
    >>> timing.observe(start=1.0, end=1.004, server=1.002)
    >>> round(timing.lead, 3), timing.local(2.0)
    (0.004, 2.0)
    >>> timing.on_time(0.010, tolerance=0.015), timing.on_time(0.030, tolerance=0.015)
    (True, False)
    """

    def __init__(self, max_lead: float = 0.01, memory: int = 10) -> None:
        self.max_lead, self.memory = max_lead, memory
        self.sync = ClockSync()
        self.rtt: float | None = None  # moving average of a gate call's round trip
        self.lateness, self._sends = 0.0, 0

    def observe(self, start: float, end: float, server: float) -> None:
        self.sync.update(start, end, server)
        rtt = max(0.0, end - start)
        self.rtt = rtt if self.rtt is None else 0.8 * self.rtt + 0.2 * rtt

    def local(self, server_time: float) -> float:
        """A store-clock instant on our clock."""
        return self.sync.local(server_time)

    @property
    def lead(self) -> float:
        """How early to start the check before a send: one usual round trip."""
        return min(self.rtt or 0.0, self.max_lead)

    def on_time(self, late: float, tolerance: float) -> bool:
        """Count a send ``late`` seconds after its slot; is it within ``tolerance`` of usual?"""
        usual = self.lateness
        self._sends = min(self._sends + 1, self.memory)
        self.lateness += (late - usual) / (self._sends + 1)
        return late <= usual + tolerance
