"""Progress on a terminal: one status line rewritten in place, or JSON lines for machines."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from typing import TextIO

from geotoolkit.display.environment import in_notebook
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


def _rewrites(stream: TextIO) -> bool:
    """Whether ``\\r`` rewrites the line on ``stream``: a terminal, or a notebook cell's
    own stdout or stderr (no terminal, but the notebook honours ``\\r``)."""
    if stream in (sys.stdout, sys.stderr) and in_notebook():
        return True
    try:
        return stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def _columns(stream: TextIO) -> int | None:
    """The terminal's width: ``$COLUMNS`` when set (the shell's convention), else the
    size of the terminal behind ``stream``; ``None`` when unknown."""
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return os.get_terminal_size(stream.fileno()).columns or None
    except (AttributeError, OSError, ValueError):
        return None


class TextProgress:
    """Rewrites one status line on a terminal, at most ``max_hz`` times a second.

    The line shows progress, the stage of a provider chain, the fleet gauge and any pause
    countdown with its cause::

        geocoding 12/20 (60%) 4.0 rows/s ETA 2 s | fleet 19.8/20 req/s, throttled 2%, 2 workers
        | paused 11 s: Retry-After from nominatim.example: 12 s

    Parameters
    ----------
    stream
        Where to write; default ``sys.stderr``.
    max_hz
        Most redraws per second; the final summary is always written.
    time_fn
        Monotonic seconds (inject a fake one in tests).
    interactive
        Rewrite the line in place (``\\r``), cut to the terminal's width; default: when
        ``stream`` is a terminal or a notebook cell's output. Otherwise (a file, a pipe,
        CI logs) a whole line is written every ``log_every_seconds``, with no carriage
        return, and the summary.
    log_every_seconds
        Seconds between two lines when not interactive.
    summary
        Write the summary when the batch finishes (default). ``False``, for a caller that
        prints its own (the CLI on a terminal): an interactive line is cleared instead
        once the batch ended well; a stopped batch's summary is still written, and a
        non-interactive log always ends with it.
    """

    def __init__(self, stream: TextIO | None = None, *, max_hz: float = 10.0,
                 time_fn: TimeFn = time.monotonic, interactive: bool | None = None,
                 log_every_seconds: float = 10.0, summary: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.summary = summary
        self.model = ProgressModel(time_fn)
        self._time = time_fn
        self.interactive = _rewrites(self.stream) if interactive is None else interactive
        self._min_gap = 1.0 / max_hz if self.interactive else log_every_seconds
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
        if not self.interactive:
            self.stream.write(line + "\n")
            self.stream.flush()
            return
        if final and not self.summary and isinstance(event, BatchFinished) \
                and event.error is None and not event.interrupted:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
            self.stream.flush()
            return
        if not final:
            columns = _columns(self.stream)
            line = line if columns is None else self.line(columns - 1)
        padding = " " * max(0, self._width - len(line))
        self._width = 0 if final else len(line)
        self.stream.write("\r" + line + padding + ("\n" if final else ""))
        self.stream.flush()

    def line(self, width: int | None = None) -> str:
        """The current status line (the summary once the batch finished); with ``width``,
        at most that many characters (a wrapped line cannot be rewritten in place): the
        fleet figures go first, then the stage, then the line is cut."""
        if self.tally.finished is not None:
            return summary_line(self.tally)
        view = self.model.view()
        parts = [f"geocoding {progress_text(view)}", stage_text(view), fleet_text(view),
                 pause_text(view)]
        line = " | ".join(p for p in parts if p)
        for dropped in (2, 1):
            if width is None or len(line) <= width:
                break
            parts[dropped] = ""
            line = " | ".join(p for p in parts if p)
        return line if width is None else line[:max(1, width)]


class JsonLinesProgress:
    """One JSON object per event, with its type name under ``event``.

    Strict JSON: a number JSON cannot hold is written as a string, ``"Infinity"`` (an
    unlimited rate), ``"-Infinity"`` or ``"NaN"``.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr

    def __call__(self, event: Event) -> None:
        record = {"event": type(event).__name__, **dataclasses.asdict(event)}
        for name, value in record.items():
            if isinstance(value, str):
                record[name] = redact(value)
            elif isinstance(value, float) and not math.isfinite(value):
                record[name] = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        self.stream.write(json.dumps(record, allow_nan=False) + "\n")
        self.stream.flush()
