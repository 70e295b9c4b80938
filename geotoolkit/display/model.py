"""The view model every renderer shares, and the text fragments they show.

Every front end renders the same :class:`ProgressView`, built by a
:class:`ProgressModel` from progress events: the notebook panel
(:mod:`geotoolkit.display.widget`), the terminal line (:mod:`geotoolkit.display.text`)
and the summary line. The model never drives the engine; it only reads events.
Fleet figures come from ``FleetSampled`` when the engine emits it, and are otherwise
estimated from ``Throttled`` and ``ItemFinished`` (this process's own pace).

Any text shown to a person goes through :func:`geotoolkit.redact.redact`, so an API
key that slipped into an error message never reaches a terminal, a widget or a saved
notebook.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from geotoolkit.progress import (
    BatchFinished,
    BatchStarted,
    Event,
    FleetSampled,
    ItemFinished,
    Tally,
    Throttled,
)
from geotoolkit.redact import redact

__all__ = [
    "ProgressModel",
    "ProgressView",
    "TimeFn",
    "counts_text",
    "fleet_text",
    "pause_phrase",
    "pause_text",
    "progress_text",
    "stage_text",
    "summary_line",
]

TimeFn = Callable[[], float]
State = Literal["waiting", "running", "done", "interrupted", "stopped"]

@dataclass(frozen=True)
class ProgressView:
    """What a renderer shows at one instant; built by :meth:`ProgressModel.view`.

    ``pace``/``allowed_rate`` are requests/s (the fleet's when ``fleet_measured``,
    else this process's own estimate); ``throttle_ratio`` is the share of
    requests answered 429/503; ``workers`` is ``None`` until the fleet is sampled.
    """

    done: int
    total: int
    matched: int
    no_match: int
    failed: int
    throttles: int
    rows_per_second: float
    eta_seconds: float | None
    elapsed_seconds: float
    pace: float | None
    allowed_rate: float | None
    throttle_ratio: float | None
    workers: int | None
    fleet_measured: bool
    pause_seconds: float
    pause_cause: str
    state: State
    error: str | None
    host: str
    too_coarse: int = 0
    passed_on: int = 0
    stage: int = 0
    stages: int = 0
    stage_provider: str = ""
    stage_rows: int = 0

    @property
    def dead_letters(self) -> int:
        """Rows that did not match (too coarse, no match or failed)."""
        return self.too_coarse + self.no_match + self.failed

    @property
    def bar_style(self) -> Literal["", "success", "warning", "danger"]:
        """ipywidgets colour: green done, amber dead letters or interrupted, red stopped."""
        if self.state == "stopped":
            return "danger"
        if self.state == "interrupted" or (self.state == "done" and self.dead_letters):
            return "warning"
        return "success" if self.state == "done" else ""


def _throttle_cause(event: Throttled) -> str:
    host = event.host or "the provider"
    if event.cause == "retry-after" and event.retry_after is not None:
        return f"Retry-After from {host}: {event.retry_after:.0f} s"
    if event.cause == "backoff":
        status = f"{event.status_code} " if event.status_code else ""
        return f"backoff after {status}from {host}"
    if event.cause == "circuit":
        seen = f"answering HTTP {event.status_code}" if event.status_code else "unreachable"
        return f"circuit open: {host} {seen}, probing"
    return "fleet pacing"


class ProgressModel:
    """Accumulates events into a :class:`ProgressView`; thread-compatible, not locked.

    Parameters
    ----------
    time_fn
        Monotonic seconds, used only to count pauses down between events.
        Inject a fake one in tests.

    Examples
    --------
    >>> from geotoolkit.progress import BatchStarted, Throttled
    >>> now = [0.0]
    >>> model = ProgressModel(time_fn=lambda: now[0])
    >>> model.update(BatchStarted(total=3, unique=3, rate=1.0, host="geo.example"))
    >>> model.update(Throttled(wait_seconds=12, cause="retry-after", host="geo.example",
    ...                        retry_after=12))
    >>> now[0] = 5.0
    >>> pause_text(model.view())
    'paused 7 s: Retry-After from geo.example: 12 s'
    """

    def __init__(self, time_fn: TimeFn = time.monotonic, *, tally: Tally | None = None) -> None:
        self.tally = tally if tally is not None else Tally()
        self.started = tally is not None and (tally.total > 0 or tally.finished is not None)
        self.requests = 0
        self._time = time_fn
        self._pause_until = 0.0
        self._pause_cause = ""

    def update(self, event: Event) -> None:
        """Fold one event in (a run started after the last one finished replaces it)."""
        if self.tally.next_run(event):
            self.requests, self._pause_until, self._pause_cause = 0, 0.0, ""
        self.tally.update(event)
        if isinstance(event, BatchStarted):
            self.started = True
        elif isinstance(event, ItemFinished) and not event.cached:
            self.requests += event.attempts
        elif isinstance(event, Throttled):
            self._pause(event.wait_seconds, _throttle_cause(event))
        elif isinstance(event, FleetSampled):
            self._pause_until = self._time() + max(0.0, event.pause_remaining)
            self._pause_cause = event.pause_cause or ("fleet pause" if event.pause_remaining else "")
        elif isinstance(event, BatchFinished):
            self._pause_until = 0.0

    def _pause(self, seconds: float, cause: str) -> None:
        until = self._time() + max(0.0, seconds)
        if until >= self._pause_until:
            self._pause_until, self._pause_cause = until, cause

    def _fleet(self) -> tuple[float | None, float | None, float | None, int | None]:
        t, fleet = self.tally, self.tally.fleet
        if fleet is not None:
            ratio = fleet.throttled / fleet.requests if fleet.requests else 0.0
            return fleet.pace, fleet.allowed_rate, ratio, fleet.workers_active
        elapsed = t.last_at - t.started_at
        pace = self.requests / elapsed if elapsed > 0 and self.requests else None
        sent = max(self.requests, t.throttles)
        return pace, t.rate, (t.throttles / sent if sent else None), None

    def _state(self) -> tuple[State, str | None]:
        end = self.tally.finished
        if end is None:
            return ("running" if self.started else "waiting"), None
        if end.interrupted:
            return "interrupted", None
        if end.error:
            return "stopped", redact(end.error)
        return "done", None

    def view(self) -> ProgressView:
        """The current view; the pause countdown is computed at ``time_fn()``."""
        t, stage = self.tally, self.tally.stage
        pace, allowed, ratio, workers = self._fleet()
        state, error = self._state()
        pause = max(0.0, self._pause_until - self._time()) if t.finished is None else 0.0
        elapsed = t.finished.elapsed_seconds if t.finished else max(0.0, t.last_at - t.started_at)
        return ProgressView(
            done=t.done, total=t.total, matched=t.matched, no_match=t.no_match, failed=t.failed,
            throttles=t.throttles, rows_per_second=t.rows_per_second(),
            eta_seconds=t.eta_seconds(), elapsed_seconds=elapsed, pace=pace,
            allowed_rate=allowed, throttle_ratio=ratio, workers=workers,
            fleet_measured=t.fleet is not None, pause_seconds=pause,
            pause_cause=redact(self._pause_cause) if pause > 0 else "", state=state,
            error=error, host=redact(t.host), too_coarse=t.too_coarse, passed_on=t.passed_on,
            stage=stage.stage if stage else 0, stages=stage.stages if stage else 0,
            stage_provider=redact(stage.provider) if stage else "",
            stage_rows=stage.rows if stage else 0)


# -- text fragments shared by every renderer ------------------------------------


def progress_text(view: ProgressView) -> str:
    """``12/20 (60%) 4.0 rows/s ETA 2 s``."""
    pct = 100.0 * view.done / view.total if view.total else 100.0
    text = f"{view.done}/{view.total} ({pct:.0f}%) {view.rows_per_second:.1f} rows/s"
    if view.eta_seconds is None or view.state != "running" or view.done >= view.total:
        return text
    return text + f" ETA {view.eta_seconds:.0f} s"


def _rate(value: float) -> str:
    """``20``, ``3.5``, ``0.3``: one decimal at most, no trailing zero."""
    return f"{value:.1f}".rstrip("0").rstrip(".") or "0"


def fleet_text(view: ProgressView) -> str:
    """``fleet 19.8/20 req/s, throttled 2%, 2 workers`` (``pace …`` when only estimated)."""
    label = "fleet" if view.fleet_measured else "pace"
    pace = "-" if view.pace is None else f"{view.pace:.1f}"
    allowed = "" if view.allowed_rate is None else f"/{_rate(view.allowed_rate)}"
    text = f"{label} {pace}{allowed} req/s"
    if view.throttle_ratio is not None:
        text += f", throttled {100.0 * view.throttle_ratio:.0f}%"  # 429s and 503s
    if view.workers is not None:
        text += f", {view.workers} worker{'s' if view.workers != 1 else ''}"
    return text


def pause_text(view: ProgressView) -> str:
    """``paused 11 s: Retry-After from host: 12 s``, or ``""`` when not paused."""
    return pause_phrase(view.pause_seconds, view.pause_cause)


def pause_phrase(seconds: float, cause: str) -> str:
    """A pause as every display shows it (the batch's, a fleet key's): ``paused 11 s:
    <cause>``, whole seconds rounded up, or ``""`` when not paused.

    >>> pause_phrase(10.2, "Retry-After from host: 12 s"), pause_phrase(0.0, "x")
    ('paused 11 s: Retry-After from host: 12 s', '')
    """
    if seconds <= 0:
        return ""
    return f"paused {math.ceil(seconds - 1e-9)} s{f': {cause}' if cause else ''}"


def counts_text(view: ProgressView) -> str:
    """``18 matched, 1 no match, 1 failed`` (``, 2 too coarse`` after matched when there are)."""
    coarse = f", {view.too_coarse} too coarse" if view.too_coarse else ""
    return f"{view.matched} matched{coarse}, {view.no_match} no match, {view.failed} failed"


def stage_text(view: ProgressView) -> str:
    """``stage 2/2: nominatim (5 rows)`` with a provider chain, else ``""``.

    >>> from geotoolkit.progress import StageStarted
    >>> model = ProgressModel(time_fn=lambda: 0.0)
    >>> model.update(StageStarted(stage=2, stages=2, provider="nominatim", rows=5))
    >>> stage_text(model.view())
    'stage 2/2: nominatim (5 rows)'
    """
    if not view.stages:
        return ""
    rows = f"{view.stage_rows} row{'s' if view.stage_rows != 1 else ''}"
    return f"stage {view.stage}/{view.stages}: {view.stage_provider} ({rows})"


def _end_text(view: ProgressView) -> str:
    if view.state == "stopped":
        return f"stopped: {view.error}"
    return "done" if view.state == "done" else view.state


def summary_line(tally: Tally) -> str:
    """One line: counts, throttles, time and how the run ended (or ``running``).

    Examples
    --------
    >>> from geotoolkit.progress import BatchFinished, BatchStarted, ItemFinished
    >>> t = Tally()
    >>> for e in (BatchStarted(total=2, unique=2), ItemFinished("matched"),
    ...           ItemFinished("no_match"), BatchFinished(1, 1, 0, elapsed_seconds=1.25)):
    ...     t.update(e)
    >>> summary_line(t)
    '2/2 rows: 1 matched, 1 no match, 0 failed; 0 throttled; 1.2 s; done'
    """
    view = ProgressModel(time_fn=lambda: 0.0, tally=tally).view()
    return (f"{view.done}/{view.total} rows: {counts_text(view)}; {view.throttles} throttled; "
            f"{view.elapsed_seconds:.1f} s; {_end_text(view)}")
