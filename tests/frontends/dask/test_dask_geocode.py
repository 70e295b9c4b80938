"""geotoolkit.dask on a real multi-process LocalCluster, paced through a shared Redis gate.

The cluster (``client``) and the Redis gate (``redis_gate``) come from this directory's
conftest.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import os
import pickle
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest

from geotoolkit import ConfigurationError
from geotoolkit import dask as gdask
from geotoolkit.providers import Nominatim
from geotoolkit.results import normalise_address
from geotoolkit.schema import GEOCODE_COLUMNS
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.dask

UA = "geotoolkit-tests/1.0 (tests@example.org)"
WORKERS = 2  # the cluster's worker processes (conftest)
RATE = 20.0
# Known addresses match exactly; the others get stable hashed coordinates.
ADDRESSES = [k.address for k in KNOWN_ADDRESSES] + [f"Teststrasse {i}, 9490 Vaduz" for i in range(40)]


class Arrivals:
    """A simulator clock that signals once ``n`` requests have arrived."""

    def __init__(self, n: int) -> None:
        self.n, self.seen, self.reached = n, 0, threading.Event()

    def __call__(self) -> float:
        self.seen += 1  # called under the simulator's lock, once per request
        if self.seen >= self.n:
            self.reached.set()
        return time.time()


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"address": ADDRESSES, "n": range(len(ADDRESSES))},
                        index=pd.Index([f"r{i}" for i in range(len(ADDRESSES))], name="id"))


def _max_in_window(times: list[float], window: float) -> int:
    ordered = sorted(times)
    return max(bisect.bisect_left(ordered, t + window) - i for i, t in enumerate(ordered))


def test_partitions_share_the_fleet_pace_and_match_a_single_process_run(
        client: Any, redis_gate: Callable[[ProviderSimulator], str], tmp_path: Path) -> None:
    df = _frame()
    with ProviderSimulator() as sim:
        provider = Nominatim(sim.url, user_agent=UA)
        alone = df.geocode.run("address", provider=provider, gate="memory://", rate=math.inf,
                               cache=False, progress=False)
        sim.reset()
        lazy = gdask.geocode(dd.from_pandas(df, npartitions=6, sort=False), "address", provider="nominatim",
                             base_url=sim.url, user_agent=UA, gate=redis_gate(sim),
                             cache=f"sqlite:///{tmp_path}/results.sqlite", rate=RATE,
                             concurrency=1)
        out = lazy.compute()
        sent = sim.requests
    assert len(sent) == len(df) and {r.status for r in sent} == {200}
    times = [r.time for r in sent]
    # Paced as one fleet, the 60 sends take ~3 s; two workers pacing alone would take ~1.5 s.
    # (A send trails its reserved slot when its worker is slow to wake, so allow some.)
    assert max(times) - min(times) >= 0.6 * (len(sent) - 1) / RATE
    # The gate spaces the reserved slots; a send trails its slot when its process stalls
    # (GIL, a cold code path), landing closer to the next one. With concurrency=1 each
    # worker holds one reservation at a time: allow one such straggler per worker.
    assert _max_in_window(times, 1.0) <= RATE + WORKERS
    assert list(out.index) == list(df.index) and list(out["n"]) == list(df["n"])
    assert (out["geocode_status"] == "matched").all()
    assert out[["lon", "lat"]].to_numpy().tolist() == alone[["lon", "lat"]].to_numpy().tolist()
    assert out.loc["r0", ["lon", "lat"]].tolist() == list(sim.expected(ADDRESSES[0]) or ())
    # Every partition came back as a GeoDataFrame in the dtypes of the lazy result's meta.
    assert isinstance(out, gpd.GeoDataFrame) and out.crs.to_epsg() == 4326
    assert out.dtypes.to_dict() == lazy._meta.dtypes.to_dict()
    assert [[p.x, p.y] for p in out.geometry] == out[["lon", "lat"]].to_numpy().tolist()


@pytest.mark.postgres
def test_a_killed_worker_loses_nothing_and_settled_rows_are_not_sent_again(
        client: Any, redis_gate: Callable[[ProviderSimulator], str], postgres_dsn: str) -> None:
    arrivals = Arrivals(len(ADDRESSES) // 3)
    df = _frame()
    with ProviderSimulator(clock=arrivals) as sim, _postgres_rows(postgres_dsn, sim) as stored:
        lazy = gdask.geocode(dd.from_pandas(df, npartitions=4, sort=False), "address",
                             provider=Nominatim(sim.url, user_agent=UA), gate=redis_gate(sim),
                             cache=postgres_dsn, rate=RATE, concurrency=2)
        pids = client.run(os.getpid)
        future = client.compute(lazy)
        assert arrivals.reached.wait(30), "the job never got going"
        busy = [w for w, tasks in client.processing().items() if tasks] or list(pids)
        settled = stored()
        os.kill(pids[busy[0]], signal.SIGKILL)  # mid-partition, as a crash would
        out = future.result(timeout=60)
        sent = Counter(normalise_address(r.params["q"]) for r in sim.requests if r.status == 200)
    assert pids[busy[0]] not in client.run(os.getpid).values()  # it really died
    assert set(out["geocode_status"]) == {"matched"} and list(out.index) == list(df.index)
    assert settled and all(sent[a] == 1 for a in settled)  # settled before the kill: sent once
    assert set(sent) == {normalise_address(a) for a in ADDRESSES}
    # At most the requests in flight on the killed worker (concurrency 2) were repeated.
    assert sum(sent.values()) <= len(ADDRESSES) + 2


@contextlib.contextmanager
def _postgres_rows(dsn: str, sim: ProviderSimulator) -> Iterator[Callable[[], set[str]]]:
    """A reader of the addresses the shared PostgreSQL cache holds for ``sim``; deleted after."""
    import psycopg

    prefix = Nominatim(sim.url, user_agent=UA).cache_namespace() + ":"

    def stored() -> set[str]:
        with psycopg.connect(dsn) as conn:
            rows = conn.execute("SELECT key FROM geotoolkit_results WHERE starts_with(key, %s)",
                                (prefix,)).fetchall()
        return {key[len(prefix):] for (key,) in rows}

    try:
        yield stored
    finally:
        with psycopg.connect(dsn) as conn:
            conn.execute("DELETE FROM geotoolkit_results WHERE starts_with(key, %s)", (prefix,))


def test_a_memory_gate_or_cache_is_refused_before_anything_runs(client: Any) -> None:
    ddf = dd.from_pandas(_frame(), npartitions=2)
    provider = Nominatim("http://127.0.0.1:9", user_agent=UA)
    with pytest.raises(ConfigurationError, match=r"memory:// gate .* each partition"):
        gdask.geocode(ddf, provider=provider, gate="memory://", cache=False)
    with pytest.raises(ConfigurationError, match="memory:// cache"):
        gdask.geocode(ddf, provider=provider, gate="sqlite:///g.sqlite", cache="memory://")
    with pytest.raises(ConfigurationError, match="need a gate"):
        gdask.geocode(ddf, provider=provider, gate=False, cache=False)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="as a URL"):
        gdask.geocode(ddf, provider=provider, gate=object(), cache=False)  # type: ignore[arg-type]


class _TwoHostClient:
    """Just enough of ``distributed.Client`` to describe workers on two machines."""

    def scheduler_info(self, n_workers: int = 5) -> dict[str, Any]:
        assert n_workers == -1  # every worker, not the first five
        return {"workers": {"tcp://10.0.0.1:4001": {"host": "10.0.0.1"},
                            "tcp://10.0.0.1:4002": {"host": "10.0.0.1"},
                            "tcp://10.0.0.2:4001": {"host": "10.0.0.2"}}}


def test_relative_sqlite_urls_name_the_callers_files_whatever_the_workers_directory(
        client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``sqlite:///cache.sqlite`` is relative to the working directory of whoever wrote it.
    Workers started elsewhere (``dask worker`` under a service manager runs in ``/``)
    must open the caller's gate and cache, not files of their own that a rerun from
    the notebook would never find."""
    here, elsewhere = tmp_path / "notebook", tmp_path / "worker"
    here.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(here)
    directories = client.run(os.getcwd)
    client.run(os.chdir, str(elsewhere))
    addresses = ADDRESSES[:6]
    try:
        with ProviderSimulator() as sim:
            options: dict[str, Any] = {"provider": "nominatim", "base_url": sim.url,
                                       "user_agent": UA, "rate": math.inf,
                                       "gate": "sqlite:///gate.sqlite",
                                       "cache": "sqlite:///cache.sqlite"}
            ddf = dd.from_pandas(pd.DataFrame({"address": addresses}), npartitions=2)
            out = gdask.geocode(ddf, "address", **options).compute()
            assert (out["geocode_status"] == "matched").all() and sim.count() == len(addresses)
            sim.reset()
            again = pd.DataFrame({"address": addresses}).geocode.run(
                "address", progress=False, **options)  # the same URLs, here
            assert (again["geocode_status"] == "matched").all()
            assert sim.count() == 0  # every row came from the cache the workers wrote
    finally:
        for worker, directory in directories.items():
            client.run(os.chdir, directory, workers=[worker])
    assert not list(elsewhere.iterdir())


def test_sqlite_is_refused_when_workers_span_hosts(client: Any) -> None:
    ddf = dd.from_pandas(_frame(), npartitions=2)
    provider = Nominatim("http://127.0.0.1:9", user_agent=UA)
    two_hosts = _TwoHostClient()
    with pytest.raises(ConfigurationError, match=r"SQLite gate .* 2 hosts"):
        gdask.geocode(ddf, provider=provider, gate="sqlite:///g.sqlite", cache=False,
                      client=two_hosts)
    with pytest.raises(ConfigurationError, match=r"SQLite cache .* 2 hosts"):
        gdask.geocode(ddf, provider=provider, gate="redis://127.0.0.1:6379/15", cache=None,
                      client=two_hosts)
    lazy = gdask.geocode(ddf, provider=provider, gate="redis://127.0.0.1:6379/15",
                         cache="postgresql://postgres@127.0.0.1/test", client=two_hosts)
    assert list(lazy.columns[-len(GEOCODE_COLUMNS) - 1:]) == [*GEOCODE_COLUMNS, "geometry"]
    # The real LocalCluster is one host: SQLite is fine there.
    gdask.geocode(ddf, provider=provider, gate="sqlite:///g.sqlite", cache=False)


def test_providers_travel_with_the_options_without_showing_the_key() -> None:
    ddf = dd.from_pandas(_frame(), npartitions=1)
    lazy = gdask.geocode(ddf, provider="nominatim", base_url="http://127.0.0.1:9", user_agent=UA,
                         api_key="s3cret-key", gate="sqlite:///g.sqlite", cache=False)
    assert "s3cret" not in repr(lazy) and "s3cret" not in str(lazy.dask)

    unpicklable = Nominatim("http://127.0.0.1:9", user_agent=UA)
    unpicklable.lock = threading.Lock()  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        pickle.dumps(unpicklable)
    with pytest.raises(ConfigurationError, match="by name"):
        gdask.geocode(ddf, provider=unpicklable, gate="sqlite:///g.sqlite", cache=False)
    with pytest.raises(ConfigurationError, match=r"unknown option .progress."):
        gdask.geocode(ddf, provider="nominatim", base_url="http://127.0.0.1:9", user_agent=UA,
                      gate="sqlite:///g.sqlite", cache=False, progress=True)
    with pytest.raises(KeyError, match="'street'"):
        gdask.geocode(ddf, None, provider="nominatim", base_url="http://127.0.0.1:9",
                      user_agent=UA, gate="sqlite:///g.sqlite", cache=False, street="street")


def test_docstring_examples_run() -> None:
    import doctest

    result = doctest.testmod(gdask)
    assert result.failed == 0 and result.attempted > 0


def test_to_geodataframe_builds_points_from_lon_lat_for_matches_only() -> None:
    frame = pd.DataFrame({"lon": [9.5, float("nan")], "lat": [47.1, float("nan")],
                          "geocode_status": ["matched", "no_match"]}, index=["a", "b"])
    gdf = gdask.to_geodataframe(dd.from_pandas(frame, npartitions=1))
    assert gdf.crs.to_epsg() == 4326 and list(gdf.index) == ["a", "b"]
    assert (gdf.geometry["a"].x, gdf.geometry["a"].y) == (9.5, 47.1)
    assert gdf.geometry["b"] is None or gdf.geometry["b"].is_empty
    # A computed result (a GeoDataFrame already) gets its geometry rebuilt from lon/lat too.
    stale = gpd.GeoDataFrame(frame, geometry=gpd.points_from_xy([0.0, 0.0], [0.0, 0.0]), crs=3857)
    again = gdask.to_geodataframe(stale)
    assert again.crs.to_epsg() == 4326 and (again.geometry["a"].x, again.geometry["a"].y) == (9.5, 47.1)
    assert list(again.columns) == [*frame.columns, "geometry"]


def _load_recipe(name: str, directory: Path) -> Any:
    """The docs/recipes.md block that starts with ``# file: <name>``, imported as a module."""
    import importlib.util
    import re

    text = (Path(__file__).resolve().parents[3] / "docs" / "recipes.md").read_text()
    [source] = [b for b in re.findall(r"```python\n(.*?)```", text, re.S)
                if b.startswith(f"# file: {name}\n")]
    path = directory / name
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"geotoolkit_recipe_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_dask_recipe_writes_partitioned_geoparquet_and_dead_letters(
        client: Any, redis_gate: Callable[[ProviderSimulator], str], tmp_path: Path) -> None:
    recipe = _load_recipe("dask_geocode.py", tmp_path)
    addresses = [*ADDRESSES[:12], "Nowhere Street 999, 0000 Atlantis"]
    source, target = tmp_path / "addresses.csv", tmp_path / "out"
    pd.DataFrame({"id": range(100, 100 + len(addresses)), "address": addresses}).to_csv(source, index=False)
    with ProviderSimulator() as sim:
        counts = recipe.geocode_table(str(source), str(target), base_url=sim.url, user_agent=UA,
                                      gate=redis_gate(sim), cache=f"sqlite:///{tmp_path}/c.sqlite",
                                      rate=50, partitions=3)
        sent = Counter(r.params["q"] for r in sim.requests)
    assert counts == (len(addresses) - 1, 1) and sent == Counter(addresses)
    back = gpd.read_parquet(target / "geocoded").sort_values("id")
    assert back.crs.to_epsg() == 4326 and list(back["address"]) == addresses[:-1]
    assert list(back["id"]) == list(range(100, 100 + len(addresses) - 1))
    assert [(p.x, p.y) for p in back.geometry] == [sim.expected(a) for a in addresses[:-1]]
    letters = pd.read_parquet(target / "dead_letters")
    assert list(letters["id"]) == [100 + len(addresses) - 1]
    assert list(letters["geocode_status"]) == ["no_match"]
