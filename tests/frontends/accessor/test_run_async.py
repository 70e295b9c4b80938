"""``await df.geocode.run_async(...)``: the batch on the caller's event loop.

An ``async def`` Prefect task, a Jupyter cell with ``await`` or any asyncio program
awaits the run instead of blocking its loop in ``run()``: the loop keeps serving other
tasks between the answers, and cancelling the task stops the batch with the settled rows
kept for the rerun.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest
from geopandas.testing import assert_geodataframe_equal
from shapely.geometry import Point

from geotoolkit.progress import Event, ItemFinished
from geotoolkit.providers import Nominatim
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator


@pytest.fixture(scope="module")
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator() as simulator:
        yield simulator


def _options(sim: ProviderSimulator, **more: Any) -> dict[str, Any]:
    return {"provider": Nominatim(sim.url, user_agent="geotoolkit-tests/1.0"),
            "gate": "memory://", **more}


def test_run_async_returns_what_run_returns_and_leaves_the_loop_free(
        sim: ProviderSimulator) -> None:
    frame = pd.DataFrame({"address": [k.address for k in KNOWN_ADDRESSES[:6]] + ["Nowhere 1"]},
                         index=range(10, 17))
    ticks = 0
    at_answers: list[int] = []

    def sink(event: Event) -> None:
        if isinstance(event, ItemFinished):
            at_answers.append(ticks)

    async def main() -> gpd.GeoDataFrame:
        nonlocal ticks
        run = asyncio.create_task(frame.geocode.run_async(
            "address", rate=20, cache=False, progress=sink, **_options(sim)))
        while not run.done():  # another task on the same loop, meanwhile
            ticks += 1
            await asyncio.sleep(0)
        return await run

    sim.reset()
    awaited = asyncio.run(main())
    assert sim.count() == len(frame)
    # The other task ran between the answers: the loop was never held for the batch.
    assert len(at_answers) == len(frame) and at_answers[0] < at_answers[-1] < ticks
    blocking = frame.geocode.run("address", rate=20, cache=False, progress=False,
                                 **_options(sim))
    assert_geodataframe_equal(awaited, blocking)
    assert awaited.crs.to_string() == "EPSG:4326" and list(awaited.index) == list(frame.index)
    assert list(awaited["geocode_status"]) == ["matched"] * 6 + ["no_match"]


def test_cancelling_the_task_keeps_the_settled_rows_and_a_rerun_sends_the_rest(
        sim: ProviderSimulator, tmp_path: Path) -> None:
    frame = pd.DataFrame({"address": [k.address for k in KNOWN_ADDRESSES]})
    options = _options(sim, cache=f"sqlite:///{tmp_path / 'cache.sqlite'}")
    settled: list[int] = []

    async def main() -> None:
        three = asyncio.Event()

        def sink(event: Event) -> None:
            if isinstance(event, ItemFinished):
                settled.append(event.rows)
                if len(settled) == 3:
                    three.set()

        # 2 requests/s: 10 s for the whole frame if nobody cancelled it
        run = asyncio.create_task(frame.geocode.run_async("address", rate=2.0, progress=sink,
                                                          **options))
        await three.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    sim.reset()
    asyncio.run(main())
    done = sum(settled)
    assert 3 <= done < len(frame)
    sim.reset()
    result = frame.geocode.run("address", rate=200, progress=False, **options)
    assert (result["geocode_status"] == "matched").all()
    assert sim.count() == len(frame) - done  # the settled rows came from the cache


def test_reverse_async_returns_what_reverse_returns(sim: ProviderSimulator) -> None:
    fixes = gpd.GeoDataFrame({"fix": ["a", "b"]}, geometry=[
        Point(2758020, 1223073), Point(2700000, 1100000)], crs="EPSG:2056")
    kwargs = _options(sim, cache=False, progress=False)
    awaited = asyncio.run(fixes.geocode.reverse_async(**kwargs))
    assert_geodataframe_equal(awaited, fixes.geocode.reverse(**kwargs))
    assert awaited["geocode_status"].tolist() == ["matched", "no_match"]
