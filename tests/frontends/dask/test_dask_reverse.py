"""geotoolkit.dask.reverse: each distinct point sent once per run, whichever partitions hold it;
and a run with nothing to send (blank addresses, missing points) opens neither gate nor cache.

On the directory's LocalCluster (two worker processes), against the simulator on
loopback, counting the requests it received. ``cache=False`` where a test counts
requests, so a shared cache cannot hide a second send.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest
import shapely

from geotoolkit import ConfigurationError
from geotoolkit import dask as gdask
from geotoolkit.testing import ProviderSimulator

dd = pytest.importorskip("dask.dataframe")
dgpd = pytest.importorskip("dask_geopandas")

pytestmark = pytest.mark.dask

UA = "geotoolkit-tests/1.0 (tests@example.org)"
#: Ten distinct points inside the simulator's world (Liechtenstein), at 6 decimals.
POINTS = [(round(9.50 + 0.01 * i, 6), round(47.10 + 0.01 * (i % 5), 6)) for i in range(10)]
COLUMNS = ["geocode_status", "geocode_label", "geocode_reason", "geocode_lon", "geocode_lat",
           "geocode_distance_m"]


def _options(sim: ProviderSimulator, tmp_path: Path, **more: Any) -> dict[str, Any]:
    return {"provider": "nominatim", "base_url": sim.url, "user_agent": UA, "rate": 200.0,
            "gate": f"sqlite:///{tmp_path}/gate.sqlite", "cache": False, **more}


def _sent(sim: ProviderSimulator) -> Counter[tuple[float, float]]:
    return Counter((float(r.params["lon"]), float(r.params["lat"])) for r in sim.requests)


def _same(out: gpd.GeoDataFrame, alone: gpd.GeoDataFrame) -> None:
    """The result columns as ``gdf.geocode.reverse()`` gave them (dask makes the index's
    strings pyarrow strings)."""
    pd.testing.assert_frame_equal(pd.DataFrame(out[COLUMNS]), pd.DataFrame(alone[COLUMNS]),
                                  check_index_type=False)


def _points() -> gpd.GeoDataFrame:
    """Each point three times over the frame (the third 3 cm away: the same key at 6
    decimals), a missing and an empty geometry, in an order that spreads every point over
    several partitions."""
    cells: list[Any] = [*(shapely.Point(p) for p in POINTS),
                        *(shapely.Point(p) for p in reversed(POINTS)),
                        None, shapely.Point(),
                        *(shapely.Point(lon + 3e-7, lat) for lon, lat in POINTS)]
    return gpd.GeoDataFrame({"n": range(len(cells))}, geometry=cells, crs="EPSG:4326",
                            index=pd.Index([f"p{i:02d}" for i in range(len(cells))], name="id"))


def test_the_same_point_in_different_partitions_is_sent_once(client: Any, tmp_path: Path) -> None:
    points = _points()
    ddf = dgpd.from_geopandas(points, npartitions=8)  # more partitions than buckets: fan back out
    with ProviderSimulator() as sim:
        lazy = gdask.reverse(ddf, **_options(sim, tmp_path))
        assert sim.requests == []  # building it sends nothing
        out = lazy.compute()
        sent = _sent(sim)
        alone = points.geocode.reverse(progress=False, **{**_options(sim, tmp_path), "gate": "memory://"})
    assert sent == Counter(POINTS)  # each once, across partitions
    assert list(out.index) == list(points.index) and list(out["n"]) == list(points["n"])
    assert lazy.npartitions == 8 and lazy.known_divisions and lazy.divisions == ddf.divisions
    assert out.crs == "EPSG:4326" and out.geometry.equals(alone.geometry)
    _same(out, alone)
    assert Counter(out["geocode_status"]) == {"matched": 30, "failed": 2}


def test_reverse_partitions_run_alone_on_request(client: Any, tmp_path: Path) -> None:
    """``across_partitions=False``, as for ``geocode``: a point is sent once per partition
    that holds it, and computing one partition sends its points only."""
    points = _points().iloc[:20]  # POINTS, then POINTS reversed
    ddf = dgpd.from_geopandas(points, npartitions=2)
    with ProviderSimulator() as sim:
        lazy = gdask.reverse(ddf, across_partitions=False, **_options(sim, tmp_path))
        assert len(lazy.partitions[0].compute()) == 10
        assert _sent(sim) == Counter(POINTS)
        sim.reset()
        out = lazy.compute()
        assert _sent(sim) == Counter(POINTS * 2)  # once in each partition
    assert list(out["n"]) == list(range(20)) and set(out["geocode_status"]) == {"matched"}


def test_reverse_is_checked_on_the_client_before_anything_runs(client: Any, tmp_path: Path) -> None:
    points = dgpd.from_geopandas(_points().set_crs(None, allow_override=True), npartitions=2)
    with ProviderSimulator() as sim:
        with pytest.raises(ConfigurationError, match="no CRS"):
            gdask.reverse(points, **_options(sim, tmp_path))
        with pytest.raises(ConfigurationError, match="memory://"):
            gdask.reverse(points, **{**_options(sim, tmp_path), "gate": "memory://"})
        with pytest.raises(ConfigurationError, match="names of both coordinate columns"):
            gdask.reverse(dd.from_pandas(pd.DataFrame({"x": [9.5]}), npartitions=1),
                          **_options(sim, tmp_path))
        lazy = gdask.reverse(points.set_crs(4326), **_options(sim, tmp_path, api_key="s3cret-key"))
        assert "s3cret" not in repr(lazy) and "s3cret" not in str(lazy.dask)
        assert sim.requests == []


def test_lon_lat_columns_of_a_dask_dataframe_as_for_pandas(client: Any, tmp_path: Path) -> None:
    """A plain dask DataFrame with ``lon=``/``lat=`` columns (and ``crs=``), as
    ``df.geocode.reverse(lon=, lat=)``: each distinct point once, the columns kept."""
    lonlat = [*POINTS, *POINTS[:5]]
    frame = pd.DataFrame({"x": [p[0] for p in lonlat] + [None], "y": [p[1] for p in lonlat] + [47.1]})
    with ProviderSimulator() as sim:
        out = gdask.reverse(dd.from_pandas(frame, npartitions=4), lon="x", lat="y", crs="EPSG:4326",
                            **_options(sim, tmp_path)).compute()
        assert _sent(sim) == Counter(POINTS)
        alone = frame.geocode.reverse(lon="x", lat="y", progress=False,
                                      **{**_options(sim, tmp_path), "gate": "memory://"})
    _same(out, alone)
    assert list(out["x"].iloc[:15]) == list(frame["x"].iloc[:15]) and out["geocode_reason"].iloc[-1] == \
        "lon (x) is missing"


def test_an_all_empty_geometry_settles_every_row_as_pandas_does_and_opens_nothing(
        client: Any, tmp_path: Path) -> None:
    """Missing and empty points only: each row fails with its reason, as
    ``gdf.geocode.reverse()`` gives them; nothing is sent, and neither the gate's nor
    the cache's file is made (nothing was to be sent)."""
    cells = [None, shapely.Point(), None, shapely.Point(), shapely.Point(), None]
    points = gpd.GeoDataFrame({"n": range(6)}, geometry=cells, crs="EPSG:4326")
    cache = f"sqlite:///{tmp_path}/cache.sqlite"
    with ProviderSimulator() as sim:
        alone = points.geocode.reverse(progress=False, **{**_options(sim, tmp_path), "gate": "memory://"})
        for across in (True, False):
            out = gdask.reverse(dgpd.from_geopandas(points, npartitions=3), across_partitions=across,
                                **_options(sim, tmp_path, cache=cache)).compute()
            _same(out, alone)
        assert sim.requests == []
    assert list(alone["geocode_reason"]) == ["missing geometry", "empty geometry"] * 2 + \
        ["empty geometry", "missing geometry"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_run_of_only_blank_addresses_opens_neither_gate_nor_cache(client: Any, tmp_path: Path) -> None:
    """Every bucket (and every partition, run alone) holds only reasons: nothing to send,
    so no gate or cache is opened (no file made); the rows fail with their reasons."""
    cells = [None, "", "  ", pd.NA, "\t", None, "", "   "]
    frame = pd.DataFrame({"address": pd.array(cells, dtype="string[pyarrow]"), "n": range(len(cells))})
    cache = f"sqlite:///{tmp_path}/cache.sqlite"
    with ProviderSimulator() as sim:
        alone = frame.geocode.run("address", progress=False, **{**_options(sim, tmp_path), "gate": "memory://"})
        for across in (True, False):
            out = gdask.geocode(dd.from_pandas(frame, npartitions=4), "address", across_partitions=across,
                                **_options(sim, tmp_path, cache=cache)).compute()
            assert list(out["geocode_reason"]) == list(alone["geocode_reason"])
        assert sim.requests == []
    assert set(alone["geocode_status"]) == {"failed"}
    assert sorted(p.name for p in tmp_path.iterdir()) == []
