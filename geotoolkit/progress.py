"""Progress events: past-tense facts the engine emits and front ends render.

The engine never knows who listens: a notebook widget, a terminal line, JSON
lines, or nothing. Sinks are plain callables taking one event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from geotoolkit.schema import STATUSES, final_status, passes_on

__all__ = [
    "BatchFinished",
    "BatchStarted",
    "Event",
    "FleetSampled",
    "ItemFinished",
    "ProgressSink",
    "StageSink",
    "StageStarted",
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

    ``precision`` is the match's precision (``None`` for other statuses). With a
    provider chain, ``passed_on`` rows are not settled yet: they go on to the next
    provider (see :class:`StageStarted`).
    """

    status: Literal["matched", "no_match", "failed", "too_coarse"]
    rows: int = 1
    attempts: int = 1
    cached: bool = False
    at: float = 0.0
    precision: str | None = None
    passed_on: bool = False


@dataclass(frozen=True)
class StageStarted:
    """A provider chain began stage ``stage`` of ``stages``: ``rows`` rows go to ``provider``.

    Each stage is its own engine batch (its own ``BatchStarted``) under that
    provider's gate key and rate; the counts of a run add up over its stages.
    """

    stage: int
    stages: int
    provider: str
    rows: int
    at: float = 0.0


@dataclass(frozen=True)
class Throttled:
    """The fleet paused: ``cause`` is "retry-after" (the server said so), "backoff", or
    "circuit" (the provider is unreachable or answering 5xx, ``status_code``: its circuit
    opened, one probe at a time)."""

    wait_seconds: float
    cause: Literal["retry-after", "backoff", "fleet pacing", "circuit"]
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
    too_coarse: int = 0


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


Event = BatchStarted | StageStarted | ItemFinished | Throttled | FleetSampled | BatchFinished
ProgressSink = Callable[[Event], None]


class StageSink:
    """One stage's engine events as the whole run's, passed on to ``sink``.

    A match coarser than ``min_precision`` is reported ``too_coarse``; rows going on
    to the next stage of a chain (``last`` false, status in ``fallback_on``) are
    ``passed_on``; each stage's ``BatchFinished`` is held back (the run emits one at
    its end, :meth:`finished`, with the counts of its final answers) unless it reports
    an error or an interruption, which end the run.

    Examples
    --------
    >>> seen = []
    >>> sink = StageSink(seen.append, min_precision="street", fallback_on=("too_coarse",))
    >>> sink.last = False
    >>> sink(ItemFinished("matched", precision="locality"))
    >>> seen[-1].status, seen[-1].passed_on
    ('too_coarse', True)
    """

    def __init__(self, sink: ProgressSink, *, min_precision: str | None,
                 fallback_on: Iterable[str]) -> None:
        self.sink, self.min_precision, self.fallback_on = sink, min_precision, tuple(fallback_on)
        self.last = True
        self.started: float | None = None
        self.counts = dict.fromkeys(STATUSES, 0)
        self.ended = False  # an error or an interruption was passed on

    def __call__(self, event: Event) -> None:
        if isinstance(event, ItemFinished):
            event = self._item(event)
        elif isinstance(event, BatchStarted) and self.started is None:
            self.started = event.at
        elif isinstance(event, BatchFinished):
            if event.error is None and not event.interrupted:
                return
            event = self.finished(event.at, error=event.error, interrupted=event.interrupted)
            self.ended = True
        self.sink(event)

    def _item(self, event: ItemFinished) -> ItemFinished:
        status = final_status(event.status, event.precision, self.min_precision)
        sent = event.attempts or int(event.cached)  # a cached answer was sent by an earlier run
        passed = event.passed_on or (not self.last and passes_on(status, sent, self.fallback_on))
        if not passed:
            self.counts[status] += event.rows
        return dataclasses.replace(event, status=status, passed_on=passed)  # type: ignore[arg-type]

    def finished(self, at: float, counts: Mapping[str, int] | None = None, *,
                 error: str | None = None, interrupted: bool = False) -> BatchFinished:
        """The run's ``BatchFinished`` at ``at``: ``counts`` per final status (default: the
        counts of the events seen)."""
        c = counts or self.counts
        start = self.started if self.started is not None else at
        return BatchFinished(matched=c["matched"], no_match=c["no_match"], failed=c["failed"],
                             too_coarse=c["too_coarse"], error=error, interrupted=interrupted,
                             elapsed_seconds=at - start, at=at)


@dataclass
class Tally:
    """Running counts built from events; shared by every renderer.

    A finished run's counts are those of its ``BatchFinished`` (with a provider chain,
    a row that a later provider could not improve on keeps an earlier answer: the
    last event settles the counts). A run that starts after that one finished (the
    same sink passed to another run) is counted alone, from zero.
    """

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
    passed_on: int = 0
    stage: StageStarted | None = None

    def update(self, event: Event) -> None:
        if self.next_run(event):
            vars(self).update(vars(Tally()))
        self.last_at = max(self.last_at, event.at)
        if isinstance(event, BatchStarted):
            if self.stage is None or self.stage.stage == 1:  # a later stage's rows are counted
                self.total, self.started_at = event.total, event.at
            self.rate, self.host = event.rate, event.host
        elif isinstance(event, StageStarted):
            self.stage = event
        elif isinstance(event, ItemFinished):
            self._finished_item(event)
        elif isinstance(event, Throttled):
            self.throttles += 1
            self.last_throttle = event
        elif isinstance(event, FleetSampled):
            self.fleet = event
        else:
            self.finished = event
            self.matched, self.no_match, self.failed = event.matched, event.no_match, event.failed
            self.too_coarse = event.too_coarse

    def next_run(self, event: Event) -> bool:
        """True when ``event`` starts another run after this one finished."""
        return self.finished is not None and isinstance(event, BatchStarted | StageStarted)

    def _finished_item(self, event: ItemFinished) -> None:
        if event.passed_on:
            self.passed_on += event.rows
            return
        self.done += event.rows
        setattr(self, event.status, getattr(self, event.status) + event.rows)

    def rows_per_second(self) -> float:
        elapsed = self.last_at - self.started_at
        return self.done / elapsed if elapsed > 0 else 0.0

    def eta_seconds(self) -> float | None:
        speed = self.rows_per_second()
        return (self.total - self.done) / speed if speed > 0 else None
