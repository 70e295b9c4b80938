"""Stopping the command mid-batch: Ctrl-C (SIGINT) and SIGTERM (a scheduler, ``kill``,
systemd, Kubernetes) end it cleanly, keep the settled rows, and a rerun sends only the rest.

The command runs in a child process against the simulator; the signal is sent once the
simulator has logged some of its requests (no sleep, no timing assertion).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pyogrio
import pytest

import geotoolkit
from geotoolkit.frontends.cli import EX_TERMINATED, main
from geotoolkit.testing import ProviderSimulator

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

UA = "geotoolkit-tests/1.0 (tests@example.org)"
N = 80
ADDRESSES = [f"Signal street {i}, 9490 Vaduz" if i % 11 else f"nowhere {i}" for i in range(N)]


def _argv(sim: ProviderSimulator, tmp_path: Path, rate: str) -> list[str]:
    return ["geocode", str(tmp_path / "in.csv"), "-o", str(tmp_path / "out.gpkg"),
            "--base-url", sim.url, "--user-agent", UA, "--rate", rate,
            "--concurrency", "2", "--progress", "text",
            "--gate", f"sqlite:///{tmp_path}/gate.sqlite",
            "--cache", f"sqlite:///{tmp_path}/cache.sqlite"]


def _sent(sim: ProviderSimulator) -> Counter[str]:
    return Counter(r.query for r in sim.requests)


@contextmanager
def _command(sim: ProviderSimulator, tmp_path: Path,
             preexec_fn: Callable[[], None] | None = None) -> Iterator[subprocess.Popen[str]]:
    """The command on ``tmp_path/in.csv`` (the ADDRESSES) in a child process at 40/s,
    killed after the block if it still runs."""
    pd.DataFrame({"address": ADDRESSES}).to_csv(tmp_path / "in.csv", index=False)
    env = {**os.environ, "PYTHONPATH": str(Path(geotoolkit.__file__).parents[1])}
    child = subprocess.Popen([sys.executable, "-m", "geotoolkit", *_argv(sim, tmp_path, "40")],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=preexec_fn)
    try:
        yield child
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()


@pytest.mark.parametrize(("signum", "status", "message"), [
    (signal.SIGINT, 130, "interrupted"),
    (signal.SIGTERM, EX_TERMINATED, "terminated"),
])
def test_a_signal_ends_the_run_cleanly_and_a_rerun_sends_only_the_rest(
        tmp_path: Path, signum: int, status: int, message: str) -> None:
    with ProviderSimulator(latency_seconds=0.05) as sim:
        with _command(sim, tmp_path) as child:
            arrived = sim.wait_for_requests(10, timeout=120.0)
            assert child.poll() is None, f"the command ended early: {child.communicate()}"
            assert arrived, "the command sent too few requests in time"
            child.send_signal(signum)
            out, err = child.communicate(timeout=120.0)
        assert child.returncode == status, err
        assert err.splitlines()[-1] == message
        assert "Traceback" not in err and out == ""  # no "done -> out.gpkg"
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "cache.sqlite", "gate.sqlite", "in.csv"]  # no output, no .partial, no -wal left
        first = _sent(sim)

        sim.reset()
        assert main([*_argv(sim, tmp_path, "unlimited")[:-6], "--progress", "none",
                     "--gate", "memory://", "--cache", f"sqlite:///{tmp_path}/cache.sqlite"]) == 0
        second = _sent(sim)
    assert max(second.values()) == 1
    assert len(set(first) & set(second)) <= 2  # re-sent: at most the two in flight
    assert len(first) + len(second) <= N + 2
    geocoded = pyogrio.read_dataframe(tmp_path / "out.gpkg", layer="geocoded")
    letters = pyogrio.read_dataframe(tmp_path / "out.gpkg", layer="dead_letters",
                                     read_geometry=False)
    assert len(geocoded) + len(letters) == N and set(letters["geocode_status"]) == {"no_match"}


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_sigterm_ends_a_run_started_with_sigint_ignored_cleanly(tmp_path: Path) -> None:
    """A command started in the background of a script (``geotoolkit geocode ... &``, nohup)
    inherits SIGINT ignored, so asyncio.run installs no handler of its own. SIGTERM then
    raised KeyboardInterrupt wherever the event loop was: the command printed 'terminated',
    then 'Task exception was never retrieved' and a traceback. Now the batch is cancelled
    as Ctrl-C would cancel it, and SIGINT stays ignored, as its parent asked."""
    with (ProviderSimulator(latency_seconds=0.05) as sim,
          _command(sim, tmp_path, preexec_fn=_ignore_sigint) as child):
        assert sim.wait_for_requests(5, timeout=120.0), "the command sent too few requests"
        child.send_signal(signal.SIGINT)  # ignored, as the parent asked
        assert sim.wait_for_requests(10, timeout=120.0), "SIGINT stopped the command"
        assert child.poll() is None, f"the command ended early: {child.communicate()}"
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=120.0)
    assert child.returncode == EX_TERMINATED, err
    assert err.splitlines()[-1] == "terminated"
    assert "Traceback" not in err and "never retrieved" not in err and out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.sqlite", "gate.sqlite", "in.csv"]
