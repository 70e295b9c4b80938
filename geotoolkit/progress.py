"""Progress events: past-tense facts the engine emits and front ends render.

The engine never knows who listens: a notebook widget, a terminal line, JSON
lines, or nothing. Sinks are plain callables taking one event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "BatchFinished",
    "BatchStarted",
    "Event",
    "FleetSampled",
    "ItemFinished",
    "ProgressSink",
    "Tally",
    "Throttled",
]


@dataclass(frozen=True)
class BatchStarted:
    """A batch began: ``total`` rows, ``unique`` distinct queries, ``cached`` already settled."""

    total: int
    unique: int
    cached: int = 0
    rate: float | None = None
    host: str = ""
    at: float = 0.0


@dataclass(frozen=True)
class ItemFinished:
    """One distinct query settled, covering ``rows`` input rows.

    ``precision`` is the match's precision (``None`` for other statuses).
    """

    status: Literal["matched", "no_match", "failed", "too_coarse"]
    rows: int = 1
    attempts: int = 1
    cached: bool = False
    at: float = 0.0
    precision: str | None = None


@dataclass(frozen=True)
class Throttled:
    """The fleet paused: ``cause`` is "retry-after" (the server said so) or "backoff"."""

    wait_seconds: float
    cause: Literal["retry-after", "backoff", "fleet pacing"]
    host: str = ""
    status_code: int | None = None
    retry_after: float | None = None
    at: float = 0.0


@dataclass(frozen=True)
class BatchFinished:
    """The batch ended: counts per status, and the error that stopped it, if any."""

    matched: int
    no_match: int
    failed: int
    elapsed_seconds: float
    error: str | None = None
    interrupted: bool = False
    at: float = 0.0


@dataclass(frozen=True)
class FleetSampled:
    """A periodic reading of the fleet state on the gate (every worker on the key).

    ``pace`` is the fleet's measured requests/s over ``window_seconds``,
    ``allowed_rate`` the rate the fleet currently paces at (it can sit below the
    configured rate after repeated 429s), ``throttled`` the 429/503 answers in
    the window, ``pause_remaining`` the seconds of a published pause and
    ``pause_cause`` its reason ("Retry-After from <host>: 12 s", "fleet pacing").
    """

    pace: float
    allowed_rate: float | None
    requests: int
    successes: int
    throttled: int
    window_seconds: float
    pause_remaining: float = 0.0
    pause_cause: str = ""
    workers_active: int = 1
    at: float = 0.0


Event = BatchStarted | ItemFinished | Throttled | FleetSampled | BatchFinished
ProgressSink = Callable[[Event], None]


@dataclass
class Tally:
    """Running counts built from events; shared by every renderer."""

    total: int = 0
    done: int = 0
    matched: int = 0
    no_match: int = 0
    failed: int = 0
    too_coarse: int = 0
    throttles: int = 0
    started_at: float = 0.0
    last_at: float = 0.0
    finished: BatchFinished | None = None
    last_throttle: Throttled | None = None
    fleet: FleetSampled | None = None
    rate: float | None = None
    host: str = ""

    def update(self, event: Event) -> None:
        self.last_at = max(self.last_at, event.at)
        if isinstance(event, BatchStarted):
            self.total, self.started_at = event.total, event.at
            self.rate, self.host = event.rate, event.host
        elif isinstance(event, ItemFinished):
            self.done += event.rows
            setattr(self, event.status, getattr(self, event.status) + event.rows)
        elif isinstance(event, Throttled):
            self.throttles += 1
            self.last_throttle = event
        elif isinstance(event, FleetSampled):
            self.fleet = event
        else:
            self.finished = event

    def rows_per_second(self) -> float:
        elapsed = self.last_at - self.started_at
        return self.done / elapsed if elapsed > 0 else 0.0

    def eta_seconds(self) -> float | None:
        speed = self.rows_per_second()
        return (self.total - self.done) / speed if speed > 0 else None
