"""Choosing a progress renderer: the one rule for ``progress="auto"``.

``"auto"`` is the notebook panel inside Jupyter (the status line in the cell when the
kernel cannot import ipywidgets); outside it, a status line when stderr is a terminal,
and nothing otherwise. A background job never writes to the terminal (it would
scribble over your prompt): there ``"auto"`` is the panel in Jupyter and nothing
elsewhere.
"""

from __future__ import annotations

import sys

from geotoolkit.display.environment import in_notebook, widgets_available
from geotoolkit.progress import ProgressSink

__all__ = ["CHOICES", "in_notebook", "progress_sink"]

#: The named renderers ``progress=`` accepts (or False/None, or a callable).
CHOICES = ("auto", "widget", "text", "json", "none")


def _auto(background: bool) -> str:
    if widgets_available():
        return "widget"
    if background:
        return "none"
    return "text" if in_notebook() or sys.stderr.isatty() else "none"


def _panel() -> ProgressSink:
    try:
        from geotoolkit.display.widget import ProgressPanel
    except ImportError as exc:
        from geotoolkit.errors import ConfigurationError

        raise ConfigurationError(
            f"progress='widget' needs ipywidgets, which this kernel cannot import ({exc}): "
            "pip install ipywidgets in the kernel's environment, or pass progress='text'") from exc
    return ProgressPanel(display=True)


def progress_sink(progress: object = "auto", *, background: bool = False,
                  summary: bool = True) -> ProgressSink | None:
    """The renderer for ``progress``: a name in :data:`CHOICES`, False/None (none), or a
    callable taking progress events (returned as is). ``summary=False``: the caller prints
    its own summary (see :class:`~geotoolkit.display.text.TextProgress`).

    >>> progress_sink(False) is None, progress_sink("none") is None
    (True, True)
    >>> type(progress_sink("json")).__name__
    'JsonLinesProgress'
    """
    if progress is None or progress is False:
        return None
    if callable(progress):
        return progress
    if progress == "auto":
        progress = _auto(background)
    if progress == "widget":
        return _panel()
    if progress == "text":
        from geotoolkit.display.text import TextProgress

        return TextProgress(summary=summary)
    if progress == "json":
        from geotoolkit.display.text import JsonLinesProgress

        return JsonLinesProgress()
    if progress == "none":
        return None
    from geotoolkit.errors import ConfigurationError

    raise ConfigurationError(
        f"progress must be one of {', '.join(map(repr, CHOICES))}, False or a callable, "
        f"got {progress!r}")
