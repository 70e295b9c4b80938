"""The notebook progress panel: one ipywidgets panel per batch, fed by progress events.

The panel is a :data:`~geotoolkit.progress.ProgressSink`: call it with events. It
renders them and never drives the engine. Events may arrive from the engine's
background thread; they are folded into a :class:`~geotoolkit.display.model.ProgressModel`
under a lock and the widgets are redrawn at most ``max_hz`` times a second (the
final state is always drawn).
"""

from __future__ import annotations

import html
import threading
import time
from typing import Any

import ipywidgets as widgets

from geotoolkit.display.environment import in_notebook
from geotoolkit.display.model import (
    ProgressModel,
    ProgressView,
    TimeFn,
    counts_text,
    fleet_text,
    pause_text,
    progress_text,
    stage_text,
    summary_line,
)
from geotoolkit.progress import BatchFinished, BatchStarted, Event, Tally

__all__ = ["ProgressPanel"]

_COLOURS = {"success": "#2e7d32", "warning": "#b26a00", "danger": "#c62828", "": "#1565c0"}


def _span(text: str, colour: str = "inherit", bold: bool = False) -> str:
    weight = "bold" if bold else "normal"
    return f'<span style="color:{colour};font-weight:{weight}">{html.escape(text)}</span>'


class ProgressPanel:
    """A progress bar and a throttle gauge for one geocoding batch.

    Parameters
    ----------
    display
        Show the panel with ``IPython.display`` when created inside a notebook
        (and refresh a pause countdown between events). ``False`` for tests.
    max_hz
        Most redraws per second; events in between are coalesced.
    time_fn
        Monotonic seconds, for redraw throttling and pause countdowns.
    label
        The heading, for example a worker's name; the provider host is appended.

    Attributes
    ----------
    bar, gauge
        The ``IntProgress`` (rows done of total) and ``FloatProgress`` (fleet
        requests/s against the allowed rate) widgets.
    status, fleet, pause, counts, title
        ``HTML`` widgets: progress text, fleet figures, pause countdown with its
        cause, outcome counts (too-coarse matches when there are), and the heading
        with the state (and, while a provider chain runs, its stage).
    renders
        How many times the widgets were redrawn.

    Examples
    --------
    >>> from geotoolkit.progress import BatchFinished, BatchStarted, ItemFinished
    >>> panel = ProgressPanel(display=False)
    >>> for event in (BatchStarted(total=2, unique=2), ItemFinished("matched"),
    ...               ItemFinished("matched"), BatchFinished(2, 0, 0, elapsed_seconds=1.0)):
    ...     panel(event)
    >>> panel.bar.value, panel.bar.max, panel.bar.bar_style
    (2, 2, 'success')
    >>> print(repr(panel))
    geocoded 2/2 rows: 2 matched, 0 no match, 0 failed; 0 throttled; 1.0 s; done
    """

    def __init__(self, display: bool = True, *, max_hz: float = 10.0,
                 time_fn: TimeFn = time.monotonic, label: str = "Geocoding") -> None:
        self.model = ProgressModel(time_fn)
        self.label = label
        self.renders = 0
        self._time, self._min_gap = time_fn, 1.0 / max_hz
        self._lock = threading.RLock()
        self._last: float | None = None
        self._dirty = False
        self._shown_pause = False
        self._stop = threading.Event()
        self._live = display and in_notebook()
        self._handle: Any = None
        self._ticker: threading.Thread | None = None
        self._build()
        self._draw(self.model.view())
        if self._live:
            self._show()

    def _build(self) -> None:
        def text() -> widgets.HTML:
            return widgets.HTML(layout=widgets.Layout(flex="1 1 auto", width="auto",
                                                      margin="0 0 0 12px"))

        self.title = widgets.HTML()
        self.bar = widgets.IntProgress(value=0, min=0, max=1, description="rows",
                                       layout=widgets.Layout(width="50%", min_width="240px"))
        self.gauge = widgets.FloatProgress(value=0.0, min=0.0, max=1.0, description="req/s",
                                           layout=widgets.Layout(width="50%", min_width="240px"))
        self.status, self.fleet = text(), text()
        self.pause = widgets.HTML(layout=widgets.Layout(display="none"))
        self.counts = widgets.HTML()
        row = widgets.Layout(width="100%", align_items="center")
        self.widget = widgets.VBox([
            self.title,
            widgets.HBox([self.bar, self.status], layout=row),
            widgets.HBox([self.gauge, self.fleet], layout=row),
            self.pause,
            self.counts,
        ], layout=widgets.Layout(border="1px solid #ddd", padding="4px 8px", width="100%"))

    # -- the sink ---------------------------------------------------------------

    @property
    def tally(self) -> Tally:
        """The running counts."""
        return self.model.tally

    def __call__(self, event: Event) -> None:
        with self._lock:
            self.model.update(event)
            self._dirty = True
            final = isinstance(event, BatchFinished)
            if final or self._due():
                self._render()
        if isinstance(event, BatchStarted) and self._live and (
                self._ticker is None or self._stop.is_set()):
            self._start_ticker()  # this run's: the panel may be passed to another run
        if final:
            self._stop.set()
            self._update_display()

    def flush(self) -> None:
        """Redraw now, whatever the rate limit (for example after a replay of events)."""
        with self._lock:
            self._render()

    def refresh(self) -> None:
        """Redraw pending changes (and a running pause countdown), if a redraw is due."""
        with self._lock:
            counting = self._shown_pause or self.model.view().pause_seconds > 0
            if (self._dirty or counting) and self._due():
                self._render()

    def _due(self) -> bool:
        return self._last is None or self._time() - self._last >= self._min_gap

    def _render(self) -> None:
        self._last = self._time()
        self._dirty = False
        self.renders += 1
        self._draw(self.model.view())

    # -- drawing ----------------------------------------------------------------

    def _draw(self, view: ProgressView) -> None:
        self.bar.max = max(1, view.total)
        empty_done = view.total == 0 and view.state == "done"  # 0 of 0 rows: all of them
        self.bar.value = self.bar.max if empty_done else min(view.done, self.bar.max)
        self.bar.bar_style = view.bar_style
        self.status.value = _span(progress_text(view))
        self._draw_gauge(view)
        pause = pause_text(view)
        self._shown_pause = bool(pause)
        self.pause.value = _span(pause, _COLOURS["warning"], bold=True) if pause else ""
        self.pause.layout.display = None if pause else "none"
        self.counts.value = self._counts_html(view)
        self.title.value = self._title_html(view)

    def _draw_gauge(self, view: ProgressView) -> None:
        allowed = view.allowed_rate or max(view.pace or 0.0, 1.0)
        self.gauge.max = allowed
        self.gauge.value = min(view.pace or 0.0, allowed)
        ratio = view.throttle_ratio or 0.0
        self.gauge.bar_style = "danger" if ratio > 0.1 else ("warning" if ratio > 0 else "info")
        self.gauge.description = "fleet" if view.fleet_measured else "pace"
        self.fleet.value = _span(fleet_text(view))

    @staticmethod
    def _counts_html(view: ProgressView) -> str:
        coarse = [_span(f"{view.too_coarse} too coarse", _COLOURS["warning"])] if view.too_coarse else []
        return " &middot; ".join([
            _span(f"{view.matched} matched", _COLOURS["success"]), *coarse,
            _span(f"{view.no_match} no match", _COLOURS["warning"]),
            _span(f"{view.failed} failed", _COLOURS["danger"]),
            _span(f"{view.throttles} throttled"),
        ])

    def _title_html(self, view: ProgressView) -> str:
        where = f" via {view.host}" if view.host else ""
        if view.state == "stopped":
            state = f"stopped: {view.error}"
        elif view.state == "done":
            state = f"done in {view.elapsed_seconds:.1f} s"
        else:
            state = view.state
        stage = stage_text(view)
        stage = f" &middot; {_span(stage)}" if stage and view.state == "running" else ""
        return (_span(f"{self.label}{where}", bold=True) + " &mdash; "
                + _span(state, _COLOURS[view.bar_style], bold=True) + stage)

    def text(self) -> str:
        """Everything the panel shows, as plain text (for tests, logs and terminals)."""
        with self._lock:
            view = self.model.view()
        stage = stage_text(view)
        lines = [repr(self), f"{progress_text(view)} | {fleet_text(view)}", counts_text(view)]
        lines += [stage] if stage else []
        pause = pause_text(view)
        return "\n".join(lines + ([pause] if pause else []))

    # -- notebook display -------------------------------------------------------

    def __repr__(self) -> str:
        with self._lock:
            finished = self.tally.finished is not None
            return ("geocoded " if finished else "geocoding ") + summary_line(self.tally)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle: dict[str, Any] = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = repr(self)
        return bundle

    def _show(self) -> None:
        from IPython import display as ipython_display

        show: Any = ipython_display.display
        self._handle = show(self, display_id=True)

    def _update_display(self) -> None:
        """Replace the saved text/plain output with the final summary."""
        if self._handle is not None:
            self._handle.update(self)

    def _start_ticker(self) -> None:
        self._stop = stop = threading.Event()

        def tick() -> None:
            while not stop.wait(0.25):
                self.refresh()

        self._ticker = threading.Thread(target=tick, name="geotoolkit-panel", daemon=True)
        self._ticker.start()

    def close(self) -> None:
        """Stop the countdown ticker and close the widgets."""
        self._stop.set()
        self.widget.close()
