"""Progress renderers outside notebooks: one text line on a terminal, or JSON lines."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import TextIO

from geotoolkit.progress import BatchFinished, Event, ProgressSink, Tally, Throttled

__all__ = ["JsonLinesProgress", "TextProgress", "in_notebook", "progress_sink", "summary_line"]


def summary_line(tally: Tally) -> str:
    """One line: counts, rate and how the run ended."""
    end = tally.finished
    elapsed = end.elapsed_seconds if end else tally.last_at - tally.started_at
    state = "interrupted" if end and end.interrupted else (f"stopped: {end.error}" if end and end.error
                                                           else "done")
    return (f"{tally.done}/{tally.total} rows: {tally.matched} matched, {tally.no_match} no match, "
            f"{tally.failed} failed; {tally.throttles} throttled; {elapsed:.1f} s; {state}")


class TextProgress:
    """Rewrites one status line on a terminal, at most ``max_hz`` times a second."""

    def __init__(self, stream: TextIO | None = None, *, max_hz: float = 10.0) -> None:
        self.stream = stream or sys.stderr
        self.tally = Tally()
        self._min_gap = 1.0 / max_hz
        self._last = 0.0

    def __call__(self, event: Event) -> None:
        self.tally.update(event)
        now = time.monotonic()
        final = isinstance(event, BatchFinished)
        if not final and now - self._last < self._min_gap:
            return
        self._last = now
        self.stream.write("\r" + self._line() + ("\n" if final else ""))
        self.stream.flush()

    def _line(self) -> str:
        t = self.tally
        if t.finished is not None:
            return summary_line(t)
        pct = 100.0 * t.done / t.total if t.total else 100.0
        eta = t.eta_seconds()
        line = f"geocoding {t.done}/{t.total} ({pct:.0f}%) {t.rows_per_second():.1f} rows/s"
        line += f" ETA {eta:.0f} s" if eta is not None else ""
        throttle = t.last_throttle
        if isinstance(throttle, Throttled) and t.last_at - throttle.at < throttle.wait_seconds:
            line += f" | paused {throttle.wait_seconds:.0f} s ({throttle.cause} from {throttle.host})"
        return line + " " * 4


class JsonLinesProgress:
    """One JSON object per event, with its type name under ``event``."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr

    def __call__(self, event: Event) -> None:
        record = {"event": type(event).__name__, **dataclasses.asdict(event)}
        self.stream.write(json.dumps(record) + "\n")
        self.stream.flush()


def in_notebook() -> bool:
    """True inside a Jupyter kernel (ZMQ shell), where widgets can render."""
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()  # type: ignore[attr-defined]
    except AttributeError:
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def progress_sink(progress: object = "auto") -> ProgressSink | None:
    """Choose a renderer: "auto" (widget in Jupyter, text line on a terminal,
    nothing otherwise), "widget", "text", "json", False/None (none), or a callable."""
    if progress is None or progress is False or progress == "none":
        return None
    if callable(progress):
        return progress  # type: ignore[no-any-return]
    if progress == "auto":
        progress = "widget" if in_notebook() else ("text" if sys.stderr.isatty() else "none")
    if progress == "widget":
        from geotoolkit.widget import ProgressPanel

        return ProgressPanel(display=True)
    if progress == "text":
        return TextProgress()
    if progress == "json":
        return JsonLinesProgress()
    if progress == "none":
        return None
    raise ValueError(f"progress must be 'auto', 'widget', 'text', 'json', False or a callable, "
                     f"got {progress!r}")
