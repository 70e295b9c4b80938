"""Watching a fleet, as text: every key on a gate, once or at each refresh.

What is shown is gate status data, one mapping per gate key as
``geotoolkit gate status --json`` prints it (``KeyStatus.as_dict()``): the pace
against the allowed rate, the adaptive factor, throttled answers (429s and 503s) per
success over the stats window, a running pause with its cause, a fleet stop (the provider
said the key's quota is spent) with its cause and end, the workers active and the sends counted
toward the day's and the month's caps. A ``source`` callable returns the current
list; this module never opens a gate and never drives the engine (the front end
``geotoolkit.fleet_panel`` wires a gate to it; the notebook panel is
:mod:`geotoolkit.display.fleet_panel`).

Every text shown passes :func:`geotoolkit.redact.redact`. Gate keys are hashes of
the API keys: no secret is in them.

>>> status = {"key": "geotoolkit:geo.example:3f2a", "host": "geo.example", "pace": 0.9,
...           "window_seconds": 10.0, "requests": 9, "successes": 8, "throttled": 1,
...           "rate_factor": 0.9, "throttled_per_success": 0.125, "pause_remaining": 2.5,
...           "pause_cause": "Retry-After from geo.example: 3 s", "workers_active": 2,
...           "day": {"period": "2024-03-01", "used": 120, "resets_at": 0.0},
...           "month": {"period": "2024-03", "used": 3400, "resets_at": 0.0},
...           "rate": 1.0, "rate_source": "published", "allowed_rate": 0.9, "now": 0.0}
>>> print(status_text([status]))
geotoolkit:geo.example:3f2a
  pace 0.9/0.9 req/s (100% of allowed: 1 req/s x factor 0.9, published)
  factor 0.9 | throttled per success 0.125 (1 per 8 over 10 s) | 2 workers active
  paused 3 s: Retry-After from geo.example: 3 s
  counted toward caps: 120 on 2024-03-01 (UTC day), 3400 in 2024-03 (UTC month)
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, TextIO

from geotoolkit.display.model import pause_phrase
from geotoolkit.errors import ConfigurationError
from geotoolkit.periods import check_zone, reset_text
from geotoolkit.redact import redact

__all__ = [
    "FleetText",
    "FleetWatch",
    "KeyView",
    "StatusSource",
    "caps_reset_text",
    "caps_text",
    "check_refresh",
    "details_text",
    "key_lines",
    "pace_text",
    "pause_line",
    "status_text",
    "stop_line",
]

#: Returns the current gate status data: one mapping per key (``KeyStatus.as_dict()``).
StatusSource = Callable[[], Sequence[Mapping[str, Any]]]

def _num(value: float) -> str:
    """``0.97``, ``0.003``, ``16.7``, ``1500``: three significant digits, no exponent.

    >>> [_num(v) for v in (0.97, 0.0031, 16.666, 1.0, 1500.4, 0.0)]
    ['0.97', '0.0031', '16.7', '1', '1500', '0']
    """
    if not math.isfinite(value):
        return str(value)
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _float(value: object, default: float = 0.0) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _optional(value: object) -> float | None:
    return None if value is None else _float(value)


@dataclass(frozen=True)
class KeyView:
    """One key's status, as shown (text fields redacted). Built by :meth:`of`."""

    key: str
    host: str
    pace: float
    window_seconds: float
    requests: int
    successes: int
    throttled: int
    rate_factor: float
    throttled_per_success: float | None
    pause_seconds: float
    pause_cause: str
    workers: int
    rate: float | None
    rate_source: str
    allowed_rate: float | None
    day_used: int
    day_period: str
    month_used: int
    month_period: str
    #: The time zone of the cap periods shown, and when the day's ends (0: unknown).
    cap_tz: str = "UTC"
    day_resets_at: float = 0.0
    #: A fleet stop (the provider said the key's quota is spent): its remaining seconds
    #: (0: none) and what it says.
    stop_seconds: float = 0.0
    stop_cause: str = ""

    @classmethod
    def of(cls, status: Mapping[str, Any]) -> KeyView:
        """The view of one gate status mapping (missing fields read as zero or unknown)."""
        day, month = status.get("day") or {}, status.get("month") or {}
        return cls(
            key=redact(status.get("key", "")), host=redact(status.get("host", "")),
            pace=_float(status.get("pace")), window_seconds=_float(status.get("window_seconds")),
            requests=_int(status.get("requests")), successes=_int(status.get("successes")),
            throttled=_int(status.get("throttled")),
            rate_factor=_float(status.get("rate_factor"), 1.0),
            throttled_per_success=_optional(status.get("throttled_per_success")),
            pause_seconds=max(0.0, _float(status.get("pause_remaining"))),
            pause_cause=redact(status.get("pause_cause") or ""),
            workers=_int(status.get("workers_active")), rate=_optional(status.get("rate")),
            rate_source=redact(status.get("rate_source") or ""),
            allowed_rate=_optional(status.get("allowed_rate")),
            day_used=_int(day.get("used")), day_period=redact(day.get("period", "")),
            month_used=_int(month.get("used")), month_period=redact(month.get("period", "")),
            cap_tz=_zone(day.get("tz")), day_resets_at=_float(day.get("resets_at")),
            stop_seconds=max(0.0, _float(status.get("stop_remaining"))),
            stop_cause=redact(status.get("stop_cause") or ""))

    @property
    def usage(self) -> float | None:
        """The pace as a share of the allowed rate (``None``: unknown)."""
        if not self.allowed_rate:
            return None
        return self.pace / self.allowed_rate


# -- text fragments, shared by the terminal, the notebook panel and its text fallback -----------


def pace_text(view: KeyView) -> str:
    """``pace 0.9/0.97 req/s (93% of allowed: 1 req/s x factor 0.97, published)``."""
    if view.allowed_rate is None or view.rate is None:
        return f"pace {_num(view.pace)} req/s (allowed rate unknown)"
    source = f", {view.rate_source}" if view.rate_source else ""
    share = f"{100.0 * (view.usage or 0.0):.0f}% of allowed: "
    return (f"pace {_num(view.pace)}/{_num(view.allowed_rate)} req/s ({share}{_num(view.rate)} "
            f"req/s x factor {_num(view.rate_factor)}{source})")


def _throttle_text(view: KeyView) -> str:
    window = f"over {_num(view.window_seconds)} s"
    if view.throttled_per_success is None:
        return f"throttled per success: none succeeded ({view.throttled} throttled {window})"
    if not view.throttled:
        answers = (f"{view.successes} success{'es' if view.successes != 1 else ''}"
                   if view.successes else "no answer")
        return f"throttled per success 0 ({answers} {window})"
    return (f"throttled per success {_num(view.throttled_per_success)} "
            f"({view.throttled} per {view.successes} {window})")


def details_text(view: KeyView) -> str:
    """``factor 0.97 | throttled per success 0.01 (1 per 100 over 10 s) | 2 workers active``
    (throttled: the 429 and 503 answers)."""
    workers = f"{view.workers} worker{'s' if view.workers != 1 else ''} active"
    return f"factor {_num(view.rate_factor)} | {_throttle_text(view)} | {workers}"


def pause_line(view: KeyView) -> str:
    """``paused 27 s: Retry-After from geo.example: 30 s``, or ``""`` when not paused."""
    return pause_phrase(view.pause_seconds, view.pause_cause)


def stop_line(view: KeyView) -> str:
    """``STOPPED 3540 s: quota spent: ...``: a fleet stop (the provider said the key's quota
    is spent; ``geotoolkit gate resume`` ends it), or ``""`` when none.

    >>> stop_line(KeyView.of({"key": "k", "stop_remaining": 59.5, "stop_cause": "quota spent"}))
    'STOPPED 60 s: quota spent'
    """
    if view.stop_seconds <= 0:
        return ""
    cause = f": {view.stop_cause}" if view.stop_cause else ""
    return f"STOPPED {math.ceil(view.stop_seconds - 1e-9)} s{cause}"


def caps_text(view: KeyView) -> str:
    """``counted toward caps: 120 on 2024-03-01 (UTC day), 3400 in 2024-03 (UTC month)``:
    the periods of the zone asked (``gate status --cap-tz``).

    >>> view = KeyView.of({"key": "k", "day": {"period": "2026-12-06@America/Los_Angeles",
    ...     "used": 7, "resets_at": 1_796_630_400.0, "tz": "America/Los_Angeles"},
    ...     "month": {"period": "2026-12@America/Los_Angeles", "used": 9}})
    >>> caps_text(view)[:63]
    'counted toward caps: 7 on 2026-12-06 (America/Los_Angeles day),'
    >>> caps_reset_text(view)
    'the day resets at 2026-12-07 00:00 America/Los_Angeles (08:00 UTC)'
    """
    day, month = view.day_period.partition("@")[0], view.month_period.partition("@")[0]
    return (f"counted toward caps: {view.day_used} on {day} ({view.cap_tz} day), "
            f"{view.month_used} in {month} ({view.cap_tz} month)")


def caps_reset_text(view: KeyView) -> str:
    """When the day's cap count resets, in the periods' zone (and in UTC); ``""``: unknown."""
    if view.day_resets_at > 0 and math.isfinite(view.day_resets_at):
        return f"the day resets at {reset_text(view.day_resets_at, view.cap_tz)}"
    return ""


def _zone(value: object) -> str:
    """The zone of status data, if a known one (else UTC, as a status from before zones)."""
    try:
        return check_zone(value if value is not None else "UTC")
    except ConfigurationError:
        return "UTC"


def key_lines(view: KeyView) -> list[str]:
    """The lines of one key's block: the key, then its figures (indented)."""
    lines = [stop_line(view), pace_text(view), details_text(view), pause_line(view),
             caps_text(view), caps_reset_text(view)]
    return [view.key, *(f"  {line}" for line in lines if line)]


def status_text(statuses: Sequence[Mapping[str, Any]], *, header: str = "",
                empty: str = "no key on this gate has a pacing state yet") -> str:
    """Every key's block, after ``header`` (if any); ``empty`` when there is no key."""
    lines = [redact(header)] if header else []
    for status in statuses:
        lines += key_lines(KeyView.of(status))
    if not statuses:
        lines.append(redact(empty))
    return "\n".join(lines)


def _when(statuses: Sequence[Mapping[str, Any]], time_fn: Callable[[], float]) -> str:
    """The instant the statuses were read (the store's clock), as UTC text."""
    stamps = [_float(s.get("now")) for s in statuses if _float(s.get("now")) > 0]
    moment = stamps[0] if stamps else time_fn()
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def check_refresh(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not (
            math.isfinite(seconds) and seconds > 0):
        raise ConfigurationError(f"refresh_seconds must be finite and > 0, got {seconds!r}")
    return float(seconds)


# -- the watchers -------------------------------------------------------------------------------


class FleetWatch:
    """Pulls status data from ``source`` on ``refresh()``; remembers the last error."""

    def __init__(self, source: StatusSource, *, title: str = "",
                 time_fn: Callable[[], float] = time.time,
                 on_stop: Callable[[], None] | None = None) -> None:
        self.source = source
        self._on_stop = on_stop
        self.title = redact(title)
        self.statuses: list[Mapping[str, Any]] = []
        self.error: str | None = None
        self.refreshes = 0
        self._time = time_fn
        self._lock = threading.RLock()

    def _pull(self) -> None:
        try:
            statuses = list(self.source())
        except Exception as exc:  # shown, never raised: a refresh thread must not die
            with self._lock:
                self.error = redact(f"{type(exc).__name__}: {exc}")
                self.refreshes += 1
            return
        with self._lock:
            self.statuses, self.error = statuses, None
            self.refreshes += 1

    def heading(self) -> str:
        """``gate <title> | 2 keys | 2024-03-01 12:00:00 UTC`` (and an error, if the last
        refresh failed: the figures shown are then the last ones read)."""
        with self._lock:
            count = len(self.statuses)
            parts = [f"gate {self.title}" if self.title else "gate",
                     f"{count} key{'s' if count != 1 else ''}", _when(self.statuses, self._time)]
            if self.error:
                parts.append(f"unreachable, showing the last figures read: {self.error}")
            return " | ".join(parts)

    def text(self) -> str:
        """Everything shown, as plain text (an unreachable gate never read: the heading
        alone, which says so, as the panel's does)."""
        with self._lock:
            if self.error and not self.statuses:
                return redact(self.heading())
            return status_text(self.statuses, header=self.heading())

    def refresh(self) -> None:
        """Read the statuses again and show them."""
        self._pull()

    def stop(self) -> None:
        """Stop refreshing (and call ``on_stop``, once: it closes a gate opened for us)."""
        on_stop, self._on_stop = self._on_stop, None
        if on_stop is not None:
            on_stop()

    def close(self) -> None:
        """Stop for good (what ``with`` does on exit; a panel closes its widgets too)."""
        self.stop()

    def __enter__(self) -> FleetWatch:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return self.text()


class FleetText(FleetWatch):
    """The text rendering, written to ``stream`` (default ``sys.stdout``) at each refresh.

    What ``geotoolkit.fleet_panel`` falls back to outside a notebook: it shows the
    fleet once (``refresh()`` shows it again).
    """

    def __init__(self, source: StatusSource, *, title: str = "", stream: TextIO | None = None,
                 time_fn: Callable[[], float] = time.time,
                 on_stop: Callable[[], None] | None = None) -> None:
        super().__init__(source, title=title, time_fn=time_fn, on_stop=on_stop)
        self.stream = stream or sys.stdout
        self.refresh()

    def refresh(self) -> None:
        self._pull()
        self.stream.write(self.text() + "\n")
        self.stream.flush()
