"""Execute the notebooks headless with nbclient, against the simulator, so they never rot.

Each notebook runs in a scratch copy of ``notebooks/`` (it writes files next to itself);
all run at once, each in its own kernel. nbclient raises ``CellExecutionError`` when
a cell fails.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest

pytestmark = pytest.mark.notebook

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
KERNEL = "python3"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _kernel_name() -> str:
    """The python3 kernelspec, installed for this user from ipykernel when missing."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(KERNEL)
    except NoSuchKernel:
        from ipykernel.kernelspec import install

        install(user=True, kernel_name=KERNEL)
    return KERNEL


async def _execute(name: str, workdir: Path, kernel: str) -> Any:
    from nbclient import NotebookClient

    notebook = nbformat.read(workdir / name, as_version=4)
    client = NotebookClient(notebook, timeout=60, kernel_name=kernel,
                            resources={"metadata": {"path": str(workdir)}})
    await client.async_execute()
    return notebook


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every notebook, executed side by side (each kernel in its own scratch directory)."""
    kernel, names = _kernel_name(), ("quickstart.ipynb", "team_on_one_key.ipynb",
                                     "review_and_fix.ipynb", "reverse_geocoding.ipynb")
    workdirs = {name: tmp_path_factory.mktemp(name.split(".")[0]) for name in names}
    for workdir in workdirs.values():
        shutil.copytree(NOTEBOOKS, workdir, dirs_exist_ok=True)

    async def every() -> list[Any]:
        runs = (_execute(name, workdirs[name], kernel) for name in names)
        return await asyncio.gather(*runs, return_exceptions=True)

    results = dict(zip(names, asyncio.run(every()), strict=True))
    return {name: (result, workdirs[name]) for name, result in results.items()}


def execute(executed: dict[str, Any], name: str) -> tuple[Any, Path]:
    notebook, workdir = executed[name]
    if isinstance(notebook, BaseException):
        raise notebook
    return notebook, workdir


def outputs(notebook: Any) -> tuple[str, list[dict[str, Any]]]:
    """All stream text, and every rich output's data bundle."""
    text, bundles = [], []
    for cell in notebook.cells:
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream":
                text.append(out["text"])
            elif out["output_type"] in ("display_data", "execute_result"):
                bundles.append(out["data"])
    return "".join(text), bundles


def test_quickstart_runs_offline_and_writes_a_geopackage(executed: dict[str, Any]) -> None:
    notebook, tmp_path = execute(executed, "quickstart.ipynb")
    text, bundles = outputs(notebook)
    assert "wrote output/addresses.gpkg: 20 geocoded, 2 dead letters; read back 20 points" in text
    assert (tmp_path / "output" / "addresses.gpkg").is_file()
    panels = [b["text/plain"] for b in bundles if WIDGET_VIEW in b]
    assert len(panels) == 2  # the run, then the rerun in the background
    assert all(p.startswith("geocoded 22/22 rows: 20 matched, 1 no match, 1 failed;")
               and p.endswith("; done") for p in panels)
    assert "requests sent the second time: 0" in text  # everything came from the cache
    assert "<GeocodeJob done: 22/22 rows" in text
    assert "progress sink failed" not in text
    maps = [b for b in bundles if b.get("text/plain", "").startswith("<ResultMap: 2 dead letters>")]
    assert len(maps) == 1 and "leaflet" in maps[0]["text/html"].lower()
    assert "install folium" not in text


def _statuses(line: str) -> dict[str, int]:
    return {status: int(n) for n, status in re.findall(r"(\d+) (\w+)", line)}


def test_review_and_fix_corrects_only_what_it_must(executed: dict[str, Any]) -> None:
    notebook, workdir = execute(executed, "review_and_fix.ipynb")
    text, bundles = outputs(notebook)
    before, after = (_statuses(line) for line in re.findall(r"^statuses: (.*)$", text, re.M))
    assert sum(before.values()) == sum(after.values()) == 10
    assert before["no_match"] == 2 and "no_match" not in after  # the two corrected rows
    assert before.get("too_coarse", 0) == after.get("too_coarse", 0)  # untouched, not re-sent
    assert after["matched"] == before["matched"] + 2
    assert "corrected 2 rows; requests sent by the retry: 2; rows before and after: 10 and 10" in text
    maps = [b for b in bundles if b.get("text/plain", "").startswith("<ResultMap: ")]
    assert len(maps) == 1 and "dead letter" in maps[0]["text/html"]
    chain = re.search(r"census got (\d+) requests; nominatim got 0", text)
    assert chain is not None and int(chain.group(1)) > 0  # what census left came from the cache
    answered = re.search(r"^answered by: (\d+) census, (\d+) nominatim$", text, re.M)
    assert answered is not None and int(answered.group(1)) + int(answered.group(2)) == 10
    assert int(answered.group(2)) == 2  # the town and the postcode: census knows no such places
    found = re.search(r"wrote output/reviewed.gpkg: (\d+) geocoded, (\d+) dead letters; read back "
                      r"10 rows, precision category", text)
    assert found is not None and int(found.group(1)) == after["matched"]
    assert (workdir / "output" / "reviewed.gpkg").is_file()


def test_team_on_one_key_shows_no_request_during_the_pause(executed: dict[str, Any]) -> None:
    notebook, _ = execute(executed, "team_on_one_key.ipynb")
    text, bundles = outputs(notebook)
    assert "alice got 429 + Retry-After: 2 s" in text
    assert "0 requests reached the server during the pause" in text
    assert "alice 10 of 10 matched" in text and "bob 10 of 10 matched" in text
    summaries = sorted(b["text/plain"] for b in bundles if WIDGET_VIEW in b)
    assert len(summaries) == 2 and all(s.startswith("geocoded 10/10 rows") for s in summaries)
    assert "progress sink failed" not in text


def test_reverse_geocoding_maps_the_fixes_with_their_distance(executed: dict[str, Any]) -> None:
    notebook, workdir = execute(executed, "reverse_geocoding.ipynb")
    text, bundles = outputs(notebook)
    assert "fixes: 12 in EPSG:2056" in text
    assert "requests sent: 10 for 12 fixes" in text  # the lost fix never, the parked pair once
    assert "statuses: 10 matched, 1 no_match, 1 failed" in text
    assert "answers more than 100 m from their fix: 1\n" in text
    assert "09:30: Planken, Oberland, Liechtenstein (locality), 4.5 km away" in text
    assert "dead letters: 2 (no_match: 1, failed: 1)" in text
    assert ("wrote output/fixes.gpkg: 10 geocoded, 2 dead letters; read back 12 rows in "
            "EPSG:4326") in text
    assert "requests sent the second time: 0" in text
    assert (workdir / "output" / "fixes.gpkg").is_file()
    panels = [b["text/plain"] for b in bundles if WIDGET_VIEW in b]
    assert len(panels) == 1
    assert panels[0].startswith("geocoded 12/12 rows: 10 matched, 1 no match, 1 failed;")
    maps = [b for b in bundles if b.get("text/plain", "").startswith("<ResultMap: 2 dead letters>")]
    assert len(maps) == 1 and "geocode_distance_m" in maps[0]["text/html"]
    assert "progress sink failed" not in text


def test_team_on_one_key_after_its_setup_cell_runs_again_says_what_to_run(tmp_path: Path) -> None:
    """Running the setup cell again (a new simulator, its log empty) and then the request-log
    cell showed ``KeyError: 't'`` from deep in pandas; now that cell says to run the workers'
    cell first."""
    from nbclient import NotebookClient

    shutil.copytree(NOTEBOOKS, tmp_path, dirs_exist_ok=True)
    code = [c for c in nbformat.read(tmp_path / "team_on_one_key.ipynb", as_version=4).cells
            if c.cell_type == "code"]
    order = [code[0], code[1], code[2], code[1], code[3]]  # setup, workers, setup again, log
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c.source) for c in order],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    NotebookClient(notebook, timeout=60, kernel_name=_kernel_name(), allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    last = notebook.cells[-1].outputs
    assert not [o for o in last if o.output_type == "error"], [o.get("evalue") for o in last]
    assert "run the two workers (the cell above) first" in "".join(o.get("text", "") for o in last)


INTERRUPTED_AWAIT_CELL = [
    """\
import asyncio, signal, threading

import pandas as pd

import geotoolkit
from geotoolkit.display.widget import ProgressPanel
from geotoolkit.progress import ItemFinished
from geotoolkit.providers import Nominatim
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

sim = ProviderSimulator().start()
frame = pd.DataFrame({"address": [k.address for k in KNOWN_ADDRESSES]})
options = dict(provider=Nominatim(sim.url, user_agent="geotoolkit-tests/1.0"),
               gate="memory://", cache="sqlite:///cache.sqlite")
panel, main = ProgressPanel(), threading.main_thread().ident

def stop_button(event):  # the stop button: ipykernel sends SIGINT to the kernel
    panel(event)
    if isinstance(event, ItemFinished) and panel.tally.done == 1:
        signal.pthread_kill(main, signal.SIGINT)""",
    """\
await asyncio.sleep(0)  # a cell with await in it runs as a task on the kernel's loop
frame.geocode.run("address", rate=2.0, progress=stop_button, **options)""",
    """\
settled = panel.tally.done
print("interrupted:", panel.tally.finished.interrupted, "settled:", settled)
sim.reset()
result = frame.geocode.run("address", rate=200, progress=False, **options)
print("sent again:", sim.count(), "of", len(frame) - settled, "left")
sim.stop()""",
]


AWAITED_RUN = """\
await frame.geocode.run_async("address", rate=2.0, progress=stop_button, **options)"""


@pytest.mark.parametrize("run", ["run", "run_async"])
def test_the_stop_button_interrupts_a_run_in_a_cell_with_await(tmp_path: Path, run: str) -> None:
    """In a cell with ``await`` ipykernel's SIGINT handler only schedules the cell's
    cancellation on the kernel's loop, which the blocked ``run()`` held: the stop button
    did nothing, all 20 rows were sent (10 s at 2 requests/s) and the cell ended as if
    never interrupted. Now the run stops, keeps its rows and a rerun resumes; so does a
    ``run_async`` awaited on the kernel's loop, which that cancellation reaches."""
    from nbclient import NotebookClient

    sources = list(INTERRUPTED_AWAIT_CELL)
    if run == "run_async":
        sources[1] = AWAITED_RUN
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in sources],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    NotebookClient(notebook, timeout=60, kernel_name=_kernel_name(), allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    setup, cell, after = (c.outputs for c in notebook.cells)
    assert not [o for o in setup + after if o.output_type == "error"], setup + after
    # ipykernel says CancelledError for any awaited cell it interrupts (`await asyncio.sleep`)
    stopped = "KeyboardInterrupt" if run == "run" else "CancelledError"
    assert [o.ename for o in cell if o.output_type == "error"] == [stopped]
    text = "".join(o.get("text", "") for o in after)
    settled = int(re.search(r"settled: (\d+)", text).group(1))  # type: ignore[union-attr]
    assert "interrupted: True" in text and 0 < settled < 20
    assert f"sent again: {20 - settled} of {20 - settled} left" in text
