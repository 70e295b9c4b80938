"""The fleet panel: every key on a gate, live in a notebook, refreshed on a background thread.

It renders gate status data (one mapping per key, as ``geotoolkit gate status --json``
prints it) with the fragments of :mod:`geotoolkit.display.fleet_text`, pulled from a
``source`` callable; it never opens a gate and never drives the engine (the front end
``geotoolkit.fleet_panel`` wires a gate to it, and falls back to the text outside a
notebook).
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable
from typing import Any

import ipywidgets

from geotoolkit.display.environment import in_notebook
from geotoolkit.display.fleet_text import (
    FleetWatch,
    KeyView,
    StatusSource,
    caps_reset_text,
    caps_text,
    check_refresh,
    details_text,
    pace_text,
    pause_line,
    stop_line,
)

__all__ = ["FleetPanel"]

_COLOURS = {"ok": "#2e7d32", "warning": "#b26a00", "danger": "#c62828", "muted": "#666"}


class _Card:
    """The widgets of one key: heading, a fleet stop, gauge (pace vs allowed), figures, pause,
    caps."""

    def __init__(self, widgets: Any) -> None:
        row = widgets.Layout(width="100%", align_items="center")
        self.title = widgets.HTML()
        self.gauge = widgets.FloatProgress(value=0.0, min=0.0, max=1.0, description="req/s",
                                           layout=widgets.Layout(width="40%", min_width="200px"))
        self.pace = widgets.HTML(layout=widgets.Layout(flex="1 1 auto", margin="0 0 0 12px"))
        self.details = widgets.HTML()
        self.pause = widgets.HTML(layout=widgets.Layout(display="none"))
        self.stop = widgets.HTML(layout=widgets.Layout(display="none"))
        self.caps = widgets.HTML()
        self.box = widgets.VBox([self.title, self.stop,
                                 widgets.HBox([self.gauge, self.pace], layout=row),
                                 self.details, self.pause, self.caps],
                                layout=widgets.Layout(border_top="1px solid #eee", padding="4px 0"))

    def draw(self, view: KeyView) -> None:
        self.title.value = _span(view.key, bold=True)
        allowed = view.allowed_rate or max(view.pace, 1.0)
        self.gauge.max = allowed
        self.gauge.value = min(view.pace, allowed)
        self.gauge.bar_style = _gauge_style(view)
        self.pace.value = _span(pace_text(view))
        self.details.value = _span(details_text(view))
        pause = pause_line(view)
        self.pause.value = _span(pause, _COLOURS["warning"], bold=True) if pause else ""
        self.pause.layout.display = None if pause else "none"
        stop = stop_line(view)
        self.stop.value = _span(stop, _COLOURS["danger"], bold=True) if stop else ""
        self.stop.layout.display = None if stop else "none"
        reset = caps_reset_text(view)
        self.caps.value = _span(caps_text(view) + (f"; {reset}" if reset else ""),
                                _COLOURS["muted"])

    def close(self) -> None:
        for row in self.box.children:
            for widget in getattr(row, "children", ()):
                widget.close()
            row.close()
        self.box.close()


def _gauge_style(view: KeyView) -> str:
    """Blue without throttled answers (429s, 503s), amber with a few, red above one per ten
    successes (or none)."""
    ratio = view.throttled_per_success
    if not view.throttled:
        return "info"
    return "danger" if ratio is None or ratio > 0.1 else "warning"


def _span(text: str, colour: str = "inherit", bold: bool = False) -> str:
    weight = "bold" if bold else "normal"
    return f'<span style="color:{colour};font-weight:{weight}">{html.escape(text)}</span>'


class FleetPanel(FleetWatch):
    """A live ipywidgets panel of every key on a gate, refreshed on a background thread.

    Parameters
    ----------
    source
        Returns the current gate status data (one mapping per key).
    title
        Names the gate in the heading (redacted: a URL's password never shows).
    refresh_seconds
        Seconds between two refreshes of the background thread.
    display
        Show the panel with ``IPython.display`` (inside a notebook). ``False`` for tests.
    start
        Start the background refresh at once (``start()`` later otherwise).

    Attributes
    ----------
    widget
        The ``VBox``: ``header`` (an ``HTML``: the gate, the key count, when read, an
        error) then ``keys``, a ``VBox`` of one card per key (a heading, a
        ``FloatProgress`` gauge of the pace against the allowed rate, the figures,
        the pause and the cap counts, each an ``HTML``); ``cards`` maps keys to them.

    ``stop()`` (or leaving a ``with`` block) stops the refresh (then calls ``on_stop``);
    the last figures stay. A panel shown in a notebook also stops when the cell that
    showed it runs again (the cell id the front end sends, or else the same source), so
    re-running the cell never leaves an unseen panel refreshing. ``close()`` stops it and
    closes the widgets too.
    A failing ``source`` (a gate that went away) is shown in the heading, not raised.
    """

    def __init__(self, source: StatusSource, *, title: str = "", refresh_seconds: float = 1.0,
                 display: bool = True, start: bool = True,
                 time_fn: Callable[[], float] = time.time,
                 on_stop: Callable[[], None] | None = None) -> None:
        super().__init__(source, title=title, time_fn=time_fn, on_stop=on_stop)
        self.refresh_seconds = check_refresh(refresh_seconds)
        self._widgets: Any = ipywidgets
        self.header = ipywidgets.HTML()
        self.keys = ipywidgets.VBox()
        self.widget = ipywidgets.VBox([self.header, self.keys], layout=ipywidgets.Layout(
            border="1px solid #ddd", padding="4px 8px", width="100%"))
        self.cards: dict[str, _Card] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._shell: Any = None
        self._cell: tuple[str | None, str] = (None, "")
        self.refresh()
        if display and in_notebook():
            from IPython import display as ipython_display

            show: Any = ipython_display.display
            show(self)
            self._stop_when_the_cell_runs_again()
        if start:
            self.start()

    def refresh(self) -> None:
        """Read the statuses again and redraw every card."""
        self._pull()
        with self._lock:
            colour = _COLOURS["danger"] if self.error else "inherit"
            self.header.value = _span(self.header_text(), colour, bold=True)
            views = [KeyView.of(s) for s in self.statuses]
            for view in views:
                if view.key not in self.cards:
                    self.cards[view.key] = _Card(self._widgets)
                self.cards[view.key].draw(view)
            shown = [self.cards[v.key].box for v in views]
            if list(self.keys.children) != shown:
                self.keys.children = tuple(shown)

    def header_text(self) -> str:
        """The heading's text."""
        return self.heading() if self.statuses or self.error else (
            f"{self.heading()} | no key on this gate has a pacing state yet")

    def start(self) -> None:
        """Refresh every ``refresh_seconds`` on a daemon thread (never blocks the kernel)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(self.refresh_seconds):
                self.refresh()

        self._thread = threading.Thread(target=loop, name="geotoolkit-fleet-panel", daemon=True)
        self._thread.start()

    def _stop_when_the_cell_runs_again(self) -> None:
        """Stop when the cell being run now runs again (its output, this panel, is gone)."""
        import IPython

        shell: Any = getattr(IPython, "get_ipython")()  # noqa: B009 (untyped in IPython)
        header = getattr(shell, "parent_header", None) or {}
        cell_id = (header.get("metadata") or {}).get("cellId")
        source = (header.get("content") or {}).get("code")
        self._cell = (cell_id if isinstance(cell_id, str) and cell_id else None,
                      source if isinstance(source, str) else "")
        self._shell = shell
        shell.events.register("pre_run_cell", self._on_cell)

    def _on_cell(self, info: Any) -> None:
        cell_id, source = self._cell
        if (info.cell_id == cell_id) if cell_id is not None else (info.raw_cell == source):
            self.stop()

    @property
    def running(self) -> bool:
        """Whether the background refresh runs."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Stop the background refresh (the panel keeps its last figures)."""
        self._stop.set()
        shell, self._shell = self._shell, None
        if shell is not None:
            shell.events.unregister("pre_run_cell", self._on_cell)
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=60.0)  # at most one refresh, whose gate calls have deadlines
        super().stop()

    def close(self) -> None:
        """Stop the background refresh and close the widgets (they leave the page)."""
        self.stop()
        with self._lock:
            for card in self.cards.values():
                card.close()
            for widget in (self.header, self.keys, self.widget):
                widget.close()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle: dict[str, Any] = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = self.text()
        return bundle
