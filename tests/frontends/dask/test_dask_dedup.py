"""Each distinct address is sent once per run, whichever partitions its rows fall in.

On the directory's LocalCluster (two worker processes), against the simulator on
loopback, counting the requests it received. ``cache=False`` where a test counts
requests, so a shared cache cannot hide a second send.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest

from geotoolkit import ConfigurationError
from geotoolkit import dask as gdask
from geotoolkit.results import normalise_address
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

dd = pytest.importorskip("dask.dataframe")

pytestmark = pytest.mark.dask

UA = "geotoolkit-tests/1.0 (tests@example.org)"
NOWHERE = "Nowhere Street 999, 0000 Atlantis"  # the simulator finds nothing for it
UNIQUE = [*(k.address for k in KNOWN_ADDRESSES[:8]), NOWHERE, "Teststrasse 1, 9490 Vaduz #status=400"]


def _options(sim: ProviderSimulator, tmp_path: Path, **more: Any) -> dict[str, Any]:
    return {"provider": "nominatim", "base_url": sim.url, "user_agent": UA, "rate": 200.0,
            "gate": f"sqlite:///{tmp_path}/gate.sqlite", "cache": False, **more}


def _sent(sim: ProviderSimulator) -> Counter[str]:
    return Counter(normalise_address(r.params["q"]) for r in sim.requests)


def test_duplicates_in_different_partitions_are_sent_once(client: Any, tmp_path: Path) -> None:
    # Every address three times, spread over ten partitions; the second spelling differs
    # only in case and spaces (the same cache key).
    addresses = [*UNIQUE, *(a.upper() for a in UNIQUE), *(f"  {a}" for a in reversed(UNIQUE))]
    frame = pd.DataFrame({"address": addresses, "n": range(len(addresses))},
                         index=pd.Index([f"r{i:02d}" for i in range(len(addresses))], name="id"))
    # More partitions than buckets (8 on this 2-thread cluster): answers fan back out.
    ddf = dd.from_pandas(frame, npartitions=10)  # a sorted index: known divisions
    with ProviderSimulator() as sim:
        lazy = gdask.geocode(ddf, "address", **_options(sim, tmp_path))
        assert sim.requests == []  # building it sends nothing
        out = lazy.compute()
        sent, texts = _sent(sim), Counter(r.params["q"] for r in sim.requests)
        matched = lazy[lazy["geocode_status"] == "matched"].compute()  # derived: same partitions
        alone = frame.geocode.run("address", progress=False, **{**_options(sim, tmp_path),
                                                               "gate": "memory://"})
    assert sent == Counter(normalise_address(a) for a in UNIQUE)  # each once, across partitions
    assert texts == Counter(UNIQUE)  # in the words of its first row, as df.geocode sends it
    assert list(out.index) == list(frame.index) and list(out["n"]) == list(frame["n"])
    assert lazy.npartitions == 10 and lazy.known_divisions and lazy.divisions == ddf.divisions
    assert list(matched.index) == [i for i, s in out["geocode_status"].items() if s == "matched"]
    columns = ["lon", "lat", "geocode_status", "geocode_label", "geocode_reason"]
    assert out[columns].astype(object).fillna("-").to_numpy().tolist() == \
        alone[columns].astype(object).fillna("-").to_numpy().tolist()
    assert Counter(out["geocode_status"]) == {"matched": 24, "no_match": 3, "failed": 3}


def test_a_non_unique_index_and_empty_partitions_give_the_one_partition_result(
        client: Any, tmp_path: Path) -> None:
    """Rows are joined back by position, never by index label: a repeated label, a
    partition of missing or blank addresses, pyarrow strings with NA all come back as
    one partition (the engine alone) gives them."""
    cells = [None, "", "Nowhere Street 999, 0000 Atlantis", UNIQUE[0], pd.NA, "  ", UNIQUE[1],
             UNIQUE[0], None, UNIQUE[1].lower()]
    frame = pd.DataFrame({"address": pd.array(cells, dtype="string[pyarrow]"), "n": range(len(cells))},
                         index=[7, 7, 3, 3, 3, 1, 1, 7, 0, 0])
    results = []
    with ProviderSimulator() as sim:
        for npartitions in (1, 5):
            ddf = dd.from_pandas(frame, npartitions=npartitions, sort=False)
            results.append(gdask.geocode(ddf, "address", **_options(sim, tmp_path)).compute())
            assert _sent(sim) == Counter(normalise_address(a) for a in (NOWHERE, *UNIQUE[:2]))
            sim.reset()
    one, many = results
    assert list(many.index) == list(frame.index) and list(many["n"]) == list(frame["n"])
    pd.testing.assert_frame_equal(pd.DataFrame(many), pd.DataFrame(one))
    assert list(many["geocode_status"]) == ["failed", "failed", "no_match", "matched", "failed",
                                            "failed", "matched", "matched", "failed", "matched"]


def test_nothing_is_computed_to_build_it_and_each_input_partition_once_to_run_it(
        client: Any, tmp_path: Path) -> None:
    marks = tmp_path / "reads"
    marks.mkdir()
    ddf = dd.from_map(_Reader(str(marks)), range(4), meta=_Reader.META, enforce_metadata=False)
    with ProviderSimulator() as sim:
        lazy = gdask.geocode(ddf, "address", **_options(sim, tmp_path))
        assert not list(marks.iterdir())  # building it read nothing
        lazy.compute()
        assert _sent(sim) == Counter(normalise_address(a) for a in UNIQUE[:3])
    # The keys and the rows of a partition come from one read (the input is not read twice).
    assert sorted(Counter(p.name.split("-")[0] for p in marks.iterdir()).items()) == \
        [(str(i), 1) for i in range(4)]


class _Reader:
    """Reads partition ``i`` (three addresses, repeated across partitions), leaving a mark."""

    META = pd.DataFrame({"address": pd.Series([], dtype="string[pyarrow]")})

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def __call__(self, i: int) -> pd.DataFrame:
        import uuid

        Path(self.directory, f"{i}-{uuid.uuid4().hex}").touch()
        return pd.DataFrame({"address": pd.array([UNIQUE[i % 3], UNIQUE[(i + 1) % 3]],
                                                 dtype="string[pyarrow]")})


def test_a_dask_series_is_refused_on_the_client_with_what_to_pass(tmp_path: Path) -> None:
    series = dd.from_pandas(pd.Series(UNIQUE[:4], name="address"), npartitions=2)
    with ProviderSimulator() as sim, pytest.raises(ConfigurationError, match=r"to_frame\(\)"):
        gdask.geocode(series, "address", **_options(sim, tmp_path))


def test_a_partition_whose_dtypes_differ_from_the_meta_passes_through(
        client: Any, tmp_path: Path) -> None:
    """dask's meta is a guess (read_csv infers int64 from the first block; a later block
    may hold text): the input's own columns pass through as before, unchecked."""
    meta = pd.DataFrame({"address": pd.Series([], dtype="string[pyarrow]"),
                         "floors": pd.Series([], dtype="int64")})
    ddf = dd.from_map(_gappy, range(3), meta=meta, enforce_metadata=False)
    with ProviderSimulator() as sim:
        out = gdask.geocode(ddf, "address", **_options(sim, tmp_path)).compute()
    assert list(out["floors"]) == [0, 1, 2, 3, "n/a", "5"]
    assert list(out["geocode_status"]) == ["matched"] * 6


def _gappy(i: int) -> pd.DataFrame:
    floors: pd.Series[Any] = pd.Series([2 * i, 2 * i + 1], dtype="int64")
    if i == 2:
        floors = pd.Series(["n/a", "5"], dtype=object)
    return pd.DataFrame({"address": pd.array(UNIQUE[i:i + 2], dtype="string[pyarrow]"),
                         "floors": floors})


def test_a_job_factory_without_settle_still_runs_partition_by_partition(
        client: Any, tmp_path: Path) -> None:
    """The ``_lazy`` extension point: a factory that cannot settle its items without their
    frame (no ``settle``, as ``across_partitions=False`` makes it) is not regrouped."""
    from geotoolkit.orchestration.options import GeocodeOptions

    dgpd = pytest.importorskip("dask_geopandas")
    points = gpd.GeoDataFrame({"n": range(6)}, geometry=gpd.points_from_xy([9.52] * 6, [47.14] * 6),
                              crs=4326)
    with ProviderSimulator() as sim:
        options = GeocodeOptions(**{**_options(sim, tmp_path), "provider": "nominatim"})
        out = gdask._lazy(dgpd.from_geopandas(points, npartitions=3), _Reverse(options)).compute()
        assert sim.count() == 3  # one per partition: not regrouped
    assert list(out["n"]) == list(range(6)) and set(out["geocode_status"]) == {"matched"}


@dataclass(frozen=True)
class _Reverse:
    options: Any

    def __call__(self, frame: pd.DataFrame) -> Any:
        from geotoolkit.orchestration.reverse import ReverseJob

        return ReverseJob(frame, self.options)


def test_the_keys_step_refuses_to_guess_its_partition(tmp_path: Path) -> None:
    """Without dask's partition number every partition would claim the rows of the first."""
    from geotoolkit.frontends._dask_graph import AT, KEY, Keys
    from geotoolkit.frontends._dask_jobs import Forward
    from geotoolkit.orchestration.job import Columns
    from geotoolkit.orchestration.options import GeocodeOptions

    options = GeocodeOptions(provider="nominatim", base_url="http://127.0.0.1:9", user_agent=UA,
                             gate=f"sqlite:///{tmp_path}/gate.sqlite", cache=False)  # opens nothing
    keys = Keys(Forward(options, Columns("address")))
    frame = pd.DataFrame({"address": [UNIQUE[0], UNIQUE[0].upper(), None]})
    got = keys(frame, partition_info={"number": 3})
    assert list(got[AT]) == [3 * 2**32, 3 * 2**32 + 2] and got[KEY].str.startswith(("q:", "x:")).all()
    assert len(keys(frame.iloc[:0])) == 0  # the meta
    with pytest.raises(RuntimeError, match="which partition"):
        keys(frame)


# dask 2026.8's lazy Parquet reader calls reset_index(inplace=True) (docs/recipes.md).
@pytest.mark.filterwarnings("ignore:The inplace keyword:pandas.errors.Pandas4Warning")
def test_an_earlier_result_read_back_can_be_geocoded_again(client: Any, tmp_path: Path) -> None:
    """Retrying the dead letters of a run read back with dask-geopandas: its geometry is
    the earlier result's own (as ``df.geocode`` accepts a result), not the user's."""
    dgpd = pytest.importorskip("dask_geopandas")
    frame = pd.DataFrame({"address": [*UNIQUE[:3], "Teststrasse 7, 9490 Vaduz #500x1"] * 2})
    with ProviderSimulator() as sim:
        options = _options(sim, tmp_path, max_attempts=1)
        gdask.geocode(dd.from_pandas(frame, npartitions=2), "address", **options) \
            .to_parquet(tmp_path / "first")
        earlier = dgpd.read_parquet(tmp_path / "first")
        retry = earlier[earlier["geocode_status"] != "matched"]
        before = len(sim.requests)  # (no reset: the simulator counts the #500x1 query's tries)
        again = gdask.geocode(retry, "address", **options).compute()
        assert [r.params["q"] for r in sim.requests[before:]] == [frame["address"].iloc[3]]
    assert list(again.index) == [3, 7] and set(again["geocode_status"]) == {"matched"}
    assert [[p.x, p.y] for p in again.geometry] == again[["lon", "lat"]].to_numpy().tolist()


def test_one_partition_of_the_result_runs_the_whole_run_unless_partitions_run_alone(
        client: Any, tmp_path: Path) -> None:
    """``head()`` computes the first partition; across partitions that needs every
    partition's answers, so every distinct address is sent. ``across_partitions=False``
    runs each partition alone: only the first partition's addresses are sent."""
    frame = pd.DataFrame({"address": [*UNIQUE[:2], *UNIQUE[2:4], *UNIQUE[:2]]})
    ddf = dd.from_pandas(frame, npartitions=3)
    with ProviderSimulator() as sim:
        peek = gdask.geocode(ddf, "address", **_options(sim, tmp_path)).head(2)
        assert list(peek["address"]) == UNIQUE[:2]
        assert _sent(sim) == Counter(normalise_address(a) for a in UNIQUE[:4])
        sim.reset()
        alone = gdask.geocode(ddf, "address", across_partitions=False, **_options(sim, tmp_path))
        assert list(alone.head(2)["address"]) == UNIQUE[:2]
        assert _sent(sim) == Counter(normalise_address(a) for a in UNIQUE[:2])
        sim.reset()
        out = alone.compute()  # each partition sends its own: UNIQUE[:2] twice
        assert _sent(sim) == Counter(normalise_address(a) for a in [*UNIQUE[:4], *UNIQUE[:2]])
    assert list(out["address"]) == list(frame["address"]) and lazy_divisions_kept(alone, ddf)


def lazy_divisions_kept(lazy: Any, ddf: Any) -> bool:
    return bool(lazy.npartitions == ddf.npartitions and lazy.divisions == ddf.divisions)
