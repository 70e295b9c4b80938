"""Progress on a terminal: one status line rewritten in place, or JSON lines for machines."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import TextIO

from geotoolkit.display.model import (
    ProgressModel,
    TimeFn,
    fleet_text,
    pause_text,
    progress_text,
    stage_text,
    summary_line,
)
from geotoolkit.progress import BatchFinished, Event, Tally
from geotoolkit.redact import redact

__all__ = ["JsonLinesProgress", "TextProgress"]


class TextProgress:
    """Rewrites one status line on a terminal, at most ``max_hz`` times a second.

    The line shows progress, the stage of a provider chain, the fleet gauge and any pause
    countdown with its cause::

        geocoding 12/20 (60%) 4.0 rows/s ETA 2 s | fleet 19.8/20 req/s, 429s 2%, 2 workers
        | paused 11 s: Retry-After from nominatim.example: 12 s

    Parameters
    ----------
    stream
        Where to write; default ``sys.stderr``.
    max_hz
        Most redraws per second; the final summary is always written.
    time_fn
        Monotonic seconds (inject a fake one in tests).
    """

    def __init__(self, stream: TextIO | None = None, *, max_hz: float = 10.0,
                 time_fn: TimeFn = time.monotonic) -> None:
        self.stream = stream or sys.stderr
        self.model = ProgressModel(time_fn)
        self._time = time_fn
        self._min_gap = 1.0 / max_hz
        self._last: float | None = None
        self._width = 0

    @property
    def tally(self) -> Tally:
        """The running counts."""
        return self.model.tally

    def __call__(self, event: Event) -> None:
        self.model.update(event)
        now = self._time()
        final = isinstance(event, BatchFinished)
        if not final and self._last is not None and now - self._last < self._min_gap:
            return
        self._last = now
        line = self.line()
        padding = " " * max(0, self._width - len(line))
        self._width = 0 if final else len(line)
        self.stream.write("\r" + line + padding + ("\n" if final else ""))
        self.stream.flush()

    def line(self) -> str:
        """The current status line (the summary once the batch finished)."""
        if self.tally.finished is not None:
            return summary_line(self.tally)
        view = self.model.view()
        parts = [f"geocoding {progress_text(view)}", stage_text(view), fleet_text(view),
                 pause_text(view)]
        return " | ".join(p for p in parts if p)


class JsonLinesProgress:
    """One JSON object per event, with its type name under ``event``."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr

    def __call__(self, event: Event) -> None:
        record = {"event": type(event).__name__, **dataclasses.asdict(event)}
        for name, value in record.items():
            if isinstance(value, str):
                record[name] = redact(value)
        self.stream.write(json.dumps(record) + "\n")
        self.stream.flush()
