"""GeocodeJob: a batch in the background against the local simulator, with a memory gate.

No timing assertions: the timeouts below are only safety nets against a hang.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from geotoolkit.display.widget import ProgressPanel
from geotoolkit.errors import AuthenticationError
from geotoolkit.frontends.background import GeocodeJob
from geotoolkit.orchestration.job import settle
from geotoolkit.orchestration.options import GeocodeOptions
from geotoolkit.progress import Event, ItemFinished
from geotoolkit.providers import Nominatim
from geotoolkit.results import Outcome, Query
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

pytestmark = pytest.mark.widget

SAFETY = 30.0
SECRET = "wrong-key-do-not-show-9f3a"


@pytest.fixture(scope="module")
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator(valid_keys=None) as simulator:
        yield simulator


def queries(n: int) -> list[Query | str]:
    return [Query(text=KNOWN_ADDRESSES[i % len(KNOWN_ADDRESSES)].address) for i in range(n)]


def start_job(sim: ProviderSimulator, items: list[Query | str], *, rate: float,
              progress: object = False, api_key: str | None = None) -> GeocodeJob[list[str]]:
    provider = Nominatim(sim.url, user_agent="geotoolkit-tests/1.0", api_key=api_key)
    job: GeocodeJob[list[str]] = GeocodeJob(progress=progress)
    options = GeocodeOptions(provider=provider, gate="memory://", rate=rate, concurrency=2,
                             cache=False)

    def statuses(outcomes: list[Outcome]) -> list[str]:
        return [o.status for o in outcomes]

    return job.start(lambda: settle(items, options, job.sink), finish=statuses)


def test_result_done_and_repr(sim: ProviderSimulator) -> None:
    panel = ProgressPanel(display=False)
    job = start_job(sim, [*queries(4), "empty address"], rate=200, progress=panel)
    assert job.result(timeout=SAFETY) == ["matched"] * 4 + ["failed"]
    assert job.done() and job.status() == "done"
    assert job.panel is panel and panel.bar.value == 5 and panel.bar.bar_style == "warning"
    assert repr(job).startswith("<GeocodeJob done: 5/5 rows: 4 matched")
    assert "done" in job._repr_html_()


def test_cancel_stops_the_batch_and_the_panel_says_interrupted(sim: ProviderSimulator) -> None:
    first = threading.Event()
    panel = ProgressPanel(display=False)

    def sink(event: Event) -> None:
        panel(event)
        if isinstance(event, ItemFinished):
            first.set()

    job = start_job(sim, queries(40), rate=2.0, progress=sink)  # 20 s if left alone
    assert first.wait(SAFETY)
    assert not job.done()
    with pytest.raises(TimeoutError):
        job.result(timeout=0)
    assert job.cancel() is True
    with pytest.raises(concurrent.futures.CancelledError, match="run again to resume"):
        job.result(timeout=SAFETY)
    assert job.done() and job.status() == "cancelled"
    assert job.cancel() is False
    assert job.tally.finished is not None and job.tally.finished.interrupted
    assert "interrupted" in panel.title.value and repr(panel).endswith("interrupted")
    assert 0 < job.tally.done < 40


def test_a_cancel_while_the_result_is_built_does_not_call_a_finished_job_cancelled(
        sim: ProviderSimulator) -> None:
    """The batch is over and ``finish`` builds the result when cancel() comes: nothing is
    left to stop, result() gives the result, so the job is done, not "cancelled"."""
    building, release = threading.Event(), threading.Event()
    options = GeocodeOptions(provider=Nominatim(sim.url, user_agent="geotoolkit-tests/1.0"),
                             gate="memory://", rate=200, cache=False)
    job: GeocodeJob[list[str]] = GeocodeJob(progress=False)

    def finish(outcomes: list[Outcome]) -> list[str]:
        building.set()
        assert release.wait(SAFETY)
        return [o.status for o in outcomes]

    job.start(lambda: settle(queries(3), options, job.sink), finish=finish)
    assert building.wait(SAFETY)
    job.cancel()
    release.set()
    assert job.result(timeout=SAFETY) == ["matched"] * 3
    assert job.status() == "done"
    assert repr(job).startswith("<GeocodeJob done: 3/3 rows") and "done" in job._repr_html_()


def test_error_is_raised_by_result_and_shown_without_the_key(sim: ProviderSimulator) -> None:
    sim.valid_keys = {"the-right-key"}
    try:
        panel = ProgressPanel(display=False)
        job = start_job(sim, queries(3), rate=200, progress=panel, api_key=SECRET)
        with pytest.raises(AuthenticationError):
            job.result(timeout=SAFETY)
    finally:
        sim.valid_keys = None
    assert job.status().startswith("failed: AuthenticationError")
    assert panel.bar.bar_style == "danger"
    shown = [repr(job), job._repr_html_(), panel.text(), panel.title.value]
    assert all(SECRET not in text for text in shown)


def test_job_must_be_started_once() -> None:
    job: GeocodeJob[int] = GeocodeJob(progress=False)
    assert job.status() == "pending" and job.panel is None
    with pytest.raises(RuntimeError, match="not been started"):
        job.done()

    async def answer() -> int:
        return 42

    job.start(answer)
    assert job.result(timeout=SAFETY) == 42
    with pytest.raises(RuntimeError, match="already been started"):
        job.start(answer)


def addresses_frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"address": [KNOWN_ADDRESSES[i].address for i in range(n)]})


def test_accessor_background_returns_a_job_whose_result_is_the_frame(
        sim: ProviderSimulator) -> None:
    provider = Nominatim(sim.url, user_agent="geotoolkit-tests/1.0")
    job = addresses_frame(3).geocode.run("address", provider=provider, gate="memory://", rate=200,
                                         cache=False, progress=False, background=True)
    assert isinstance(job, GeocodeJob)
    result = job.result(timeout=SAFETY)
    assert list(result["geocode_status"]) == ["matched"] * 3
    assert result.crs.to_string() == "EPSG:4326"
    assert job.status() == "done" and job.panel is None


def test_cancelled_background_run_resumes_from_the_cache(
        sim: ProviderSimulator, tmp_path: Path) -> None:
    frame = addresses_frame(20)
    provider = Nominatim(sim.url, user_agent="geotoolkit-tests/1.0")
    options: dict[str, Any] = {"provider": provider, "gate": "memory://",
                               "cache": f"sqlite:///{tmp_path / 'cache.sqlite'}"}
    first = threading.Event()

    def sink(event: Event) -> None:
        if isinstance(event, ItemFinished):
            first.set()

    job = frame.geocode.run("address", rate=2.0, progress=sink, background=True, **options)
    assert first.wait(SAFETY)
    job.cancel()
    with pytest.raises(concurrent.futures.CancelledError):
        job.result(timeout=SAFETY)
    settled = job.tally.done
    assert 0 < settled < 20
    sim.reset()
    result = frame.geocode.run("address", rate=200, progress=False, **options)
    assert list(result["geocode_status"]) == ["matched"] * 20
    assert sim.count() == 20 - settled  # only the rows the first run had not finished


def test_a_second_start_on_rows_a_running_job_is_geocoding_is_refused(tmp_path: Path) -> None:
    # Running a notebook cell with background=True again while its job runs started a second
    # job on the same rows: each row in flight or not yet settled was sent (and paid) twice.
    frame = addresses_frame(6)
    frame.loc[0, "address"] += " #timeout"  # answered only after SAFETY: the job keeps running
    with ProviderSimulator(hang_seconds=SAFETY) as sim:
        provider = Nominatim(sim.url, user_agent="geotoolkit-tests/1.0")
        options: dict[str, Any] = {"provider": provider, "rate": 200, "progress": False,
                                   "gate": f"sqlite:///{tmp_path / 'gate.sqlite'}",
                                   "cache": f"sqlite:///{tmp_path / 'cache.sqlite'}"}
        finished: list[Event] = []
        five = threading.Event()

        def sink(event: Event) -> None:
            if isinstance(event, ItemFinished):
                finished.append(event)
                if len(finished) == 5:
                    five.set()

        first = frame.geocode.run("address", background=True, **{**options, "progress": sink})
        with pytest.raises(RuntimeError) as refused:
            frame.iloc[3:].geocode.run("address", background=True, **options)  # overlapping rows
        message = str(refused.value)
        assert "already geocoding 3 of these rows" in message and "job.cancel()" in message
        assert first.status() == "running"
        other = addresses_frame(8).iloc[6:]  # rows of their own: they may run alongside
        assert list(other.geocode.run("address", background=True, **options)
                    .result(timeout=SAFETY)["geocode_status"]) == ["matched"] * 2
        assert five.wait(SAFETY)  # only the hanging row is left: nothing else is in flight
        first.cancel()
        with pytest.raises(concurrent.futures.CancelledError):
            first.result(timeout=SAFETY)
        again = frame.iloc[1:].geocode.run("address", background=True, **options)  # it has ended
        assert list(again.result(timeout=SAFETY)["geocode_status"]) == ["matched"] * 5
        sent = Counter(r.params["q"] for r in sim.requests if r.status == 200)
    assert [sent[a] for a in frame["address"].iloc[1:]] == [1] * 5


EXITING_SCRIPT = """
import sys, threading
import pandas as pd
import geotoolkit
from geotoolkit.progress import ItemFinished
from geotoolkit.providers import Nominatim

url, cache, addresses = sys.argv[1], sys.argv[2], sys.argv[3:]
two = threading.Event()
finished = []

def sink(event):
    if isinstance(event, ItemFinished):
        finished.append(event)
        if len(finished) == 2:
            two.set()

job = pd.DataFrame({"address": addresses}).geocode.run(
    "address", provider=Nominatim(url, user_agent="geotoolkit-tests/1.0"), rate=200,
    gate="memory://", cache=cache, progress=sink, background=True)
assert two.wait(30)
print("leaving", flush=True)  # without asking for the result: the job is still running
"""


def test_a_job_still_running_when_the_interpreter_exits_is_stopped_saying_so(
        tmp_path: Path) -> None:
    # A script that ended while its background job ran exited 0 and said nothing: the rows
    # not settled yet were silently never geocoded.
    import os
    import subprocess
    import sys

    addresses = [KNOWN_ADDRESSES[0].address + " #timeout", *addresses_frame(3)["address"][1:]]
    cache = f"sqlite:///{tmp_path / 'cache.sqlite'}"
    script = tmp_path / "leave.py"
    script.write_text(EXITING_SCRIPT, encoding="utf-8")
    with ProviderSimulator(hang_seconds=SAFETY) as sim:
        ended = subprocess.run([sys.executable, str(script), sim.url, cache, *addresses],
                               capture_output=True, text=True, timeout=SAFETY * 2,
                               env=os.environ.copy())
        assert ended.returncode == 0, ended.stderr
        assert ended.stdout == "leaving\n"
        assert ("geotoolkit: a background geocoding job was still running at exit and was "
                "stopped: <GeocodeJob cancelled: 2/3 rows") in ended.stderr
        assert "run the same batch again to finish it" in ended.stderr
        sim.reset()
        rest = pd.DataFrame({"address": addresses[1:]}).geocode.run(
            "address", provider=Nominatim(sim.url, user_agent="geotoolkit-tests/1.0"), rate=200,
            gate="memory://", cache=cache, progress=False)
        assert list(rest["geocode_status"]) == ["matched"] * 2 and sim.count() == 0  # cached
