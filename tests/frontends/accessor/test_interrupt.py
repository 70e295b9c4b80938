"""Interrupting a run (the notebook's stop button, Ctrl-C) stops it cleanly and a rerun resumes.

A real SIGINT is sent to the main thread from the progress sink, once the first row
settled: the way Jupyter's "interrupt kernel" reaches a cell blocked in ``run()``.
Three paths: inside a running event loop (Jupyter: the batch runs on a private loop in
a thread), inside one whose own SIGINT handler only cancels a task on that loop (a Jupyter
cell with ``await`` in it, ``asyncio.run(main())``), and without one (a script or
terminal: ``asyncio.run``).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from geotoolkit.display.widget import ProgressPanel
from geotoolkit.progress import Event, ItemFinished
from geotoolkit.providers import Nominatim
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

pytestmark = [
    pytest.mark.widget,
    pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs POSIX signals"),
]


@pytest.fixture(scope="module")
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator() as simulator:
        yield simulator


def interrupting(panel: ProgressPanel) -> Callable[[Event], None]:
    """A sink that renders, and sends SIGINT to the main thread when the first row settles."""
    main, sent = threading.main_thread().ident, threading.Event()
    assert main is not None

    def sink(event: Event) -> None:
        panel(event)
        if isinstance(event, ItemFinished) and not sent.is_set():
            sent.set()
            signal.pthread_kill(main, signal.SIGINT)

    return sink


def in_running_loop(run: Callable[[], Any]) -> Any:
    """Call ``run`` from a coroutine on a loop without a SIGINT handler, like ipykernel."""
    loop = asyncio.new_event_loop()

    async def cell() -> Any:
        return run()

    try:
        return loop.run_until_complete(cell())
    finally:
        loop.close()


def in_a_loop_handling_sigint(run: Callable[[], Any]) -> Any:
    """Call ``run`` from a coroutine under ``asyncio.run``, whose SIGINT handler only cancels
    the main task on the loop, as ipykernel's does for a cell with ``await`` in it."""

    async def cell() -> Any:
        return run()

    return asyncio.run(cell())


@pytest.mark.parametrize("where", ["jupyter", "jupyter-await", "terminal"])
def test_interrupt_keeps_finished_rows_and_a_rerun_resumes(
        sim: ProviderSimulator, tmp_path: Path, where: str) -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    sim.reset()
    frame = pd.DataFrame({"address": [k.address for k in KNOWN_ADDRESSES]})
    options: dict[str, Any] = {
        "provider": Nominatim(sim.url, user_agent="geotoolkit-tests/1.0"),
        "gate": "memory://", "cache": f"sqlite:///{tmp_path / 'cache.sqlite'}"}
    panel = ProgressPanel(display=False)

    def run() -> Any:  # 2 requests/s: 10 s if nobody interrupted it
        return frame.geocode.run("address", rate=2.0, progress=interrupting(panel), **options)

    call = {"jupyter": in_running_loop, "jupyter-await": in_a_loop_handling_sigint}.get(
        where, lambda run: run())
    with pytest.raises(KeyboardInterrupt):
        call(run)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    finished = panel.tally.finished
    assert finished is not None and finished.interrupted
    assert repr(panel).endswith("; interrupted") and "interrupted" in panel.title.value
    settled = panel.tally.done
    assert 0 < settled < len(frame)
    sim.reset()
    result = frame.geocode.run("address", rate=200, progress=False, **options)
    assert (result["geocode_status"] == "matched").all()
    assert sim.count() == len(frame) - settled  # finished rows came from the cache
