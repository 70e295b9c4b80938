"""Run the async engine from sync code: scripts, terminals and Jupyter alike.

Inside Jupyter an event loop is already running in the main thread, so the
coroutine runs on a private loop in a background thread (never ``nest_asyncio``).
A KeyboardInterrupt (the notebook's stop button) cancels the coroutine cleanly and is
raised again; a run cancelled from elsewhere (``BackgroundRun.cancel()``) raises
``concurrent.futures.CancelledError`` from ``result()``. While the main thread waits here,
blocking the loop that runs it, SIGINT raises KeyboardInterrupt even where that loop has
its own handler (a Jupyter cell with ``await`` in it, ``asyncio.run(main())``): such a
handler only schedules a cancellation on the loop, which could not run before the batch
ended.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["BackgroundRun", "run_sync"]

T = TypeVar("T")


class BackgroundRun(Generic[T]):
    """A coroutine running on its own event loop in a daemon thread.

    ``result()`` waits for it, ``cancel()`` stops it (finished work is kept by the
    engine's store), ``done()`` tells whether it ended.
    """

    def __init__(self, factory: Callable[[], Coroutine[Any, Any, T]], *, name: str = "geotoolkit"):
        self._future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[T] | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(factory,), name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _main(self, factory: Callable[[], Coroutine[Any, Any, T]]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._task = loop.create_task(factory())
            self._ready.set()
            try:
                self._future.set_result(loop.run_until_complete(self._task))
            except BaseException as exc:  # delivered to whoever waits on result()
                self._future.set_exception(exc)
        finally:
            self._ready.set()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def done(self) -> bool:
        return self._future.done()

    def cancel(self) -> bool:
        """Ask the run to stop; returns False if it had already finished."""
        if self._future.done() or self._loop is None or self._task is None:
            return False
        self._loop.call_soon_threadsafe(self._task.cancel)
        return True

    def result(self, timeout: float | None = None) -> T:
        """Wait for the outcome; a KeyboardInterrupt while waiting cancels the run.

        Raises ``concurrent.futures.CancelledError`` when the run was cancelled
        (``asyncio.CancelledError`` inside the loop is translated) and
        ``TimeoutError`` when ``timeout`` passed first.
        """
        try:
            with _interruptible():
                return self._future.result(timeout)
        except KeyboardInterrupt:
            self.cancel()
            self._thread.join()
            raise
        except asyncio.CancelledError as exc:
            raise concurrent.futures.CancelledError("the run was cancelled") from exc


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """While the main thread blocks its running loop, let SIGINT raise KeyboardInterrupt.

    A loop's own SIGINT handler (ipykernel's for a cell with ``await``, asyncio.Runner's)
    only schedules work on the loop this wait holds, so the stop button did nothing until
    the batch had ended. SIG_IGN, SIG_DFL and the default handler are left as they are.
    """
    previous = signal.getsignal(signal.SIGINT)
    if (threading.current_thread() is not threading.main_thread() or not _loop_running()
            or not callable(previous) or previous is signal.default_int_handler):
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_sync(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine made by ``factory`` to completion from synchronous code."""
    if not _loop_running():
        return asyncio.run(factory())
    return BackgroundRun(factory).result()
