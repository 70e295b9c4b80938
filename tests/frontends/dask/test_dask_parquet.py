"""The lazy dask-geopandas result and partitioned GeoParquet written by the workers.

On the directory's LocalCluster (conftest ``client``), against the provider simulator.
``cache=False`` where a test counts requests: every address must then be sent exactly
once, so a partition geocoded twice (the writes and the counts not sharing it) shows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest

from geotoolkit import ConfigurationError, ExportError
from geotoolkit import dask as gdask
from geotoolkit.export import PRECISION_DTYPE, dead_letters
from geotoolkit.orchestration.frame import outcomes_frame
from geotoolkit.schema import COARSE_COLUMNS, DEAD_LETTER_COLUMNS
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator, unused_url

dd = pytest.importorskip("dask.dataframe")
dgpd = pytest.importorskip("dask_geopandas")

pytestmark = pytest.mark.dask

UA = "geotoolkit-tests/1.0 (tests@example.org)"
NOWHERE = "Nowhere Street 999, 0000 Atlantis"  # the simulator finds nothing for it
MATCHING = [k.address for k in KNOWN_ADDRESSES] + [f"Teststrasse {i}, 9490 Vaduz" for i in range(16)]
ADDRESSES = [*MATCHING[:10], NOWHERE, *MATCHING[10:], ""]  # "": not sent, a dead letter


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"address": ADDRESSES, "n": range(len(ADDRESSES))},
                        index=pd.Index([f"r{i}" for i in range(len(ADDRESSES))], name="id"))


def _lazy(sim: ProviderSimulator, gate: str, npartitions: int = 4, **options: Any) -> Any:
    ddf = dd.from_pandas(_frame(), npartitions=npartitions, sort=False)
    return gdask.geocode(ddf, "address", provider="nominatim", base_url=sim.url, user_agent=UA,
                         gate=gate, cache=False, rate=100, **options)


def _sent(sim: ProviderSimulator) -> Counter[str]:
    return Counter(r.params["q"] for r in sim.requests)


def test_the_result_is_a_lazy_geodataframe_whose_meta_is_geocoding_zero_rows(client: Any) -> None:
    with ProviderSimulator() as sim:
        lazy = _lazy(sim, "redis://127.0.0.1:6379/15", min_precision="street")
        # (dask holds the input's text as string[pyarrow]: the meta keeps the input's dtypes)
        zero = outcomes_frame(dd.from_pandas(_frame())._meta, [], min_precision="street")
        assert isinstance(lazy, dgpd.GeoDataFrame) and lazy.crs.to_epsg() == 4326
        assert lazy.geometry.name == "geometry" and lazy.npartitions == 4
        assert lazy._meta.dtypes.to_dict() == zero.dtypes.to_dict()
        assert list(lazy.columns) == list(zero.columns)
        assert [c for c in lazy.columns if c in COARSE_COLUMNS] == list(COARSE_COLUMNS)
        assert lazy["geocode_precision"].dtype == PRECISION_DTYPE
        assert lazy["geocode_precision"].cat.known and lazy["geocode_precision"].cat.ordered
        assert lazy.index.name == "id"
        # Building, describing and deriving from the lazy result sends nothing.
        matched = lazy[lazy["geocode_status"] == "matched"]
        assert isinstance(matched, dgpd.GeoDataFrame) and "Teststrasse" not in repr(lazy)
        assert sim.requests == []


def test_write_partitioned_writes_geoparquet_and_dead_letters_from_one_pass(
        client: Any, redis_gate: Callable[[ProviderSimulator], str], tmp_path: Path) -> None:
    with ProviderSimulator() as sim:
        lazy = _lazy(sim, redis_gate(sim))
        assert sim.requests == []  # nothing runs until the workers write
        counts = gdask.write_partitioned(lazy, tmp_path / "out")
        sent = _sent(sim)
        expected = {a: sim.expected(a) for a in MATCHING}
    assert sent == Counter(a for a in ADDRESSES if a)  # every row settled once
    assert counts == (len(MATCHING), 2)
    # One file per partition in each dataset, written by the workers.
    for name in ("geocoded", "dead_letters"):
        assert sorted(p.name for p in (tmp_path / "out" / name).glob("*.parquet")) == \
            [f"part.{i}.parquet" for i in range(4)]
    back = gpd.read_parquet(tmp_path / "out" / "geocoded")
    assert back.crs.to_epsg() == 4326 and back.index.name == "id"
    assert list(back.index) == [f"r{i}" for i, a in enumerate(ADDRESSES) if a in expected]
    assert set(back["geocode_status"]) == {"matched"}
    assert [[p.x, p.y] for p in back.geometry] == back[["lon", "lat"]].to_numpy().tolist()
    assert [(p.x, p.y) for p in back.geometry] == [expected[a] for a in back["address"]]
    assert back["geocode_precision"].dtype == PRECISION_DTYPE
    letters = pd.read_parquet(tmp_path / "out" / "dead_letters")
    assert list(letters.index) == ["r10", f"r{len(ADDRESSES) - 1}"]
    assert list(letters["geocode_status"]) == ["no_match", "failed"]
    assert list(letters.columns) == ["address", "n", *[c for c in DEAD_LETTER_COLUMNS if c in letters]]
    assert not {"lon", "lat", "geometry"} & set(letters.columns)


def test_to_parquet_writes_every_row_as_one_geoparquet_dataset(
        client: Any, redis_gate: Callable[[ProviderSimulator], str], tmp_path: Path) -> None:
    with ProviderSimulator() as sim:
        lazy = _lazy(sim, redis_gate(sim), npartitions=3)
        lazy.to_parquet(tmp_path / "all")
        sent = _sent(sim)
    assert sent == Counter(a for a in ADDRESSES if a)
    back = gpd.read_parquet(tmp_path / "all")
    assert list(back.index) == list(_frame().index) and back.crs.to_epsg() == 4326
    assert list(dead_letters(back).index) == ["r10", f"r{len(ADDRESSES) - 1}"]
    matched = back[back["geocode_status"] == "matched"]
    assert [[p.x, p.y] for p in matched.geometry] == matched[["lon", "lat"]].to_numpy().tolist()
    assert back.geometry[back["geocode_status"] != "matched"].isna().all()
    assert len(list((tmp_path / "all").glob("part.*.parquet"))) == 3


def test_empty_partitions_open_nothing(client: Any) -> None:
    ddf = dd.from_pandas(_frame(), npartitions=3)
    nothing = ddf[ddf["n"] < 0]
    # Neither the gate nor the provider is reachable: an empty partition must not try.
    lazy = gdask.geocode(nothing, "address", provider="nominatim", base_url=unused_url(),
                         user_agent=UA, gate="redis://127.0.0.1:9/0", cache=False)
    out = lazy.compute()
    assert isinstance(out, gpd.GeoDataFrame) and len(out) == 0
    assert out.dtypes.to_dict() == lazy._meta.dtypes.to_dict()


def test_write_partitioned_refuses_to_mix_with_an_earlier_run(
        client: Any, redis_gate: Callable[[ProviderSimulator], str], tmp_path: Path) -> None:
    (tmp_path / "out" / "geocoded").mkdir(parents=True)
    (tmp_path / "out" / "geocoded" / "part.9.parquet").write_bytes(b"stale")
    with ProviderSimulator() as sim:
        lazy = _lazy(sim, redis_gate(sim), npartitions=2)
        with pytest.raises(ExportError, match="already holds files"):
            gdask.write_partitioned(lazy, tmp_path / "out")
        assert sim.requests == []
        assert gdask.write_partitioned(lazy, tmp_path / "out", overwrite=True) == (len(MATCHING), 2)
    assert sorted(p.name for p in (tmp_path / "out" / "geocoded").iterdir()) == \
        ["part.0.parquet", "part.1.parquet"]


def test_a_frame_with_its_own_geometry_is_refused_on_the_client(client: Any) -> None:
    frame = gpd.GeoDataFrame(_frame(), geometry=gpd.points_from_xy([9.5] * len(ADDRESSES),
                                                                   [47.1] * len(ADDRESSES)), crs=4326)
    gddf = dgpd.from_geopandas(frame, npartitions=2)
    with pytest.raises(ConfigurationError, match="own geometry column 'geometry'"):
        gdask.geocode(gddf, "address", provider="nominatim", base_url=unused_url(), user_agent=UA,
                      gate="redis://127.0.0.1:6379/15", cache=False)
    lazy = gdask.geocode(gddf, "address", provider="nominatim", base_url=unused_url(), user_agent=UA,
                         gate="redis://127.0.0.1:6379/15", cache=False, overwrite_columns=True)
    assert isinstance(lazy, dgpd.GeoDataFrame) and list(lazy.columns).count("geometry") == 1
