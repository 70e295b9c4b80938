"""A geocoding batch running in the background, so the analyst can keep working.

``df.geocode.run(..., background=True)`` returns a :class:`GeocodeJob`. The batch
runs on a private event loop in a daemon thread
(:class:`geotoolkit.engine.sync.BackgroundRun`); the job keeps a
:class:`~geotoolkit.progress.Tally` of its progress events and forwards them to a
renderer (the notebook :class:`~geotoolkit.display.widget.ProgressPanel` by default
inside Jupyter). The accessor hands over a checked run::

    return start_in_background(FrameJob(df, columns, options), progress)

The job's :meth:`GeocodeJob.sink` is passed to the run as its ``progress``: nothing is
patched into an object after it is built.

A second job on rows that a running job of this process is geocoding with the same
provider (a notebook cell run again while its job runs) is refused: the rows in flight
or not settled yet would be sent, and paid for, twice. A job still running when the
interpreter exits (a script that never asked for its result, a kernel shut down) is
cancelled, and stderr says so: its settled rows are in the cache.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import html
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

from geotoolkit.display.model import summary_line
from geotoolkit.display.sinks import progress_sink
from geotoolkit.engine.sync import BackgroundRun
from geotoolkit.progress import Event, ProgressSink, Tally
from geotoolkit.redact import redact
from geotoolkit.results import Outcome

if TYPE_CHECKING:
    from geotoolkit.display.widget import ProgressPanel

__all__ = ["GeocodeJob", "PreparedRun", "start_in_background"]

T = TypeVar("T")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class GeocodeJob(Generic[R]):
    """A handle on a background geocoding batch: ``result()``, ``cancel()``, ``done()``, ``panel``.

    Parameters
    ----------
    progress
        ``"auto"`` (the notebook panel inside Jupyter, nothing elsewhere: a
        background job must not scribble on your terminal), ``"widget"``,
        ``"text"``, ``"json"``, ``False``, or a callable sink.

    Attributes
    ----------
    tally
        Running counts from the job's progress events.
    panel
        The :class:`~geotoolkit.display.widget.ProgressPanel` rendering the job, or
        ``None`` when progress goes elsewhere.

    Examples
    --------
    >>> from geotoolkit.orchestration.job import settle
    >>> from geotoolkit.orchestration.options import GeocodeOptions
    >>> from geotoolkit.providers import Nominatim
    >>> from geotoolkit.results import Query
    >>> from geotoolkit.testing import ProviderSimulator
    >>> with ProviderSimulator() as sim:
    ...     options = GeocodeOptions(provider=Nominatim(sim.url, user_agent="docs-example/1.0"),
    ...                              gate="memory://", rate=50, cache=False)
    ...     job = GeocodeJob(progress=False)
    ...     _ = job.start(lambda: settle([Query("Städtle 38, 9490 Vaduz")], options, job.sink),
    ...                   finish=lambda outcomes: [o.status for o in outcomes])
    ...     job.result()
    ['matched']
    >>> job  # doctest: +ELLIPSIS
    <GeocodeJob done: 1/1 rows: 1 matched, 0 no match, 0 failed; 0 throttled; ...; done>
    """

    def __init__(self, progress: object = "auto") -> None:
        self.tally = Tally()
        self._renderer = progress_sink(progress, background=True)
        self._run: BackgroundRun[R] | None = None
        self._cancelled = False

    @property
    def panel(self) -> ProgressPanel | None:
        """The ProgressPanel showing this job, if progress is rendered by one."""
        from geotoolkit.display.widget import ProgressPanel

        return self._renderer if isinstance(self._renderer, ProgressPanel) else None

    def sink(self, event: Event) -> None:
        """The progress sink to give the engine: counts, then renders the event."""
        self.tally.update(event)
        if self._renderer is not None:
            self._renderer(event)

    def start(self, run: Callable[[], Coroutine[Any, Any, T]], *,
              finish: Callable[[T], R] | None = None, name: str = "geotoolkit-job") -> GeocodeJob[R]:
        """Start ``run()`` in the background; ``finish`` turns its value into the result.

        ``finish`` runs in the background thread too (``done()`` turns true only
        after it), so building a GeoDataFrame does not block the notebook.
        Put clean-up (closing a gate) in ``run`` itself, in ``try/finally``.
        """
        if self._run is not None:
            raise RuntimeError("this job has already been started")

        async def main() -> R:
            value = await run()
            return finish(value) if finish is not None else cast(R, value)

        self._run = BackgroundRun(main, name=name)
        return self

    def _started(self) -> BackgroundRun[R]:
        if self._run is None:
            raise RuntimeError("this job has not been started")
        return self._run

    def done(self) -> bool:
        """True once the batch ended: finished, failed or cancelled."""
        return self._started().done()

    def cancel(self) -> bool:
        """Ask the batch to stop; returns at once. Finished rows are kept by the cache.

        Returns False if the batch had already ended. A batch it stops makes
        ``result()`` raise ``concurrent.futures.CancelledError`` (running the same batch
        again resumes); one whose rows were all settled (its result being built) still
        ends ``done``, with its result.
        """
        cancelled = self._started().cancel()
        self._cancelled = self._cancelled or cancelled
        return cancelled

    def result(self, timeout: float | None = None) -> R:
        """Wait (up to ``timeout`` seconds) for the result.

        Raises what stopped the batch (for example ``AuthenticationError``),
        ``concurrent.futures.CancelledError`` after ``cancel()``, or
        ``TimeoutError`` when ``timeout`` passed first (the batch keeps running).
        A KeyboardInterrupt while waiting cancels the batch.
        """
        try:
            return self._started().result(timeout)
        except concurrent.futures.CancelledError as exc:
            raise concurrent.futures.CancelledError(
                "geocoding was cancelled; finished rows are cached, run again to resume") from exc

    def status(self) -> str:
        """``pending``, ``running``, ``done``, ``cancelled`` or ``failed: <error>``."""
        if self._run is None:
            return "pending"
        if not self._run.done():
            return "running"
        error = self._error()  # first: a cancel that came too late leaves a finished job
        if error is None:
            return "done"
        if self._cancelled or (self.tally.finished is not None and self.tally.finished.interrupted):
            return "cancelled"
        return f"failed: {error}"

    def _error(self) -> str | None:
        run = self._started()
        try:
            run.result(0)
        except BaseException as exc:
            return redact(f"{type(exc).__name__}: {exc}")
        return None

    def __repr__(self) -> str:
        return f"<GeocodeJob {self.status()}: {summary_line(self.tally)}>"

    def _repr_html_(self) -> str:
        status = self.status()
        colour = {"done": "#2e7d32", "running": "#1565c0", "pending": "#555"}.get(status, "#b26a00")
        return (f'<div><b>GeocodeJob</b> <span style="color:{colour}"><b>{html.escape(status)}'
                f"</b></span><br><code>{html.escape(summary_line(self.tally))}</code></div>")


class PreparedRun(Protocol[R_co]):
    """A checked run not started yet (:class:`~geotoolkit.orchestration.job.FrameJob`)."""

    async def run(self, progress: ProgressSink | None = None) -> list[Outcome]: ...

    def result(self, outcomes: list[Outcome]) -> R_co: ...


#: The jobs started by :func:`start_in_background` not known to have ended, with their claims.
_running: list[tuple[GeocodeJob[Any], frozenset[tuple[str, object]]]] = []
_running_lock = threading.Lock()
#: How long the interpreter's exit waits for a cancelled job to close its gate and cache.
EXIT_WAIT_SECONDS = 5.0


def _at_exit() -> None:
    """At the interpreter's exit: cancel the jobs still running, and say what became of them."""
    with _running_lock:
        jobs = [job for job, _ in _running if not job.done()]
        _running.clear()
    for job in jobs:
        job.cancel()
    for job in jobs:
        with contextlib.suppress(Exception):  # cancelled, failed or too slow: its status says
            job.result(EXIT_WAIT_SECONDS)
        print(f"geotoolkit: a background geocoding job was still running at exit and was "
              f"stopped: {job!r}. Rows it settled are in the cache (if any): run the same batch "
              f"again to finish it, or wait for job.result() before exiting.", file=sys.stderr)


atexit.register(_at_exit)


def _claims(prepared: object) -> frozenset[tuple[str, object]]:
    """The (provider's cache namespace, query) pairs a run would send: what two jobs must not share."""
    options, items = getattr(prepared, "options", None), getattr(prepared, "items", None)
    if options is None or items is None:
        return frozenset()
    spaces = [provider.cache_namespace() for provider in options.providers]
    return frozenset((space, item) for space in spaces for item in items if not isinstance(item, str))


def start_in_background(prepared: PreparedRun[R], progress: object = "auto") -> GeocodeJob[R]:
    """Run ``prepared`` in the background, reporting to the job's renderer (``progress``).

    Raises
    ------
    RuntimeError
        A job started here is still geocoding some of these rows with the same provider.
    """
    claims = _claims(prepared)
    with _running_lock:
        _running[:] = [(job, held) for job, held in _running if not job.done()]
        for running, held in _running:
            shared = {query for _, query in claims & held}
            if shared:
                raise RuntimeError(
                    f"a background job is already geocoding {len(shared)} of these rows with "
                    f"this provider ({running!r}): wait for it (job.result()) or stop it "
                    f"(job.cancel()) first; the rows it settles are cached, so a run after it "
                    f"sends only the rest")
        job: GeocodeJob[R] = GeocodeJob(progress=progress)
        job.start(lambda: prepared.run(job.sink), finish=prepared.result)
        _running.append((job, claims))
    return job
