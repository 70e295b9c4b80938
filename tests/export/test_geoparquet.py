"""GeoParquet export and the suffix dispatch: what is written is what is read back."""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geotoolkit import ConfigurationError, ExportError
from geotoolkit.export import dead_letters, write_geoparquet, write_results
from geotoolkit.orchestration.frame import outcomes_frame
from geotoolkit.results import Failure, Match, NoMatch

pytest.importorskip("pyarrow")


def _result() -> gpd.GeoDataFrame:
    df = pd.DataFrame({"address": ["Städtle 38, Vaduz", "Nowhere 1", "", "Zollstrasse 2"],
                       "n": [1, 2, 3, 4]}, index=pd.Index([30, 10, 20, 40], name="row"))
    outcomes = [Match(lon=9.52195, lat=47.13974, label="Städtle 38", provider="nominatim"),
                NoMatch(provider="nominatim"),
                Failure(reason="empty address", error="InvalidInput", provider="nominatim"),
                Match(lon=9.5209, lat=47.1367, label="Zollstrasse 2", provider="nominatim",
                      attempts=3)]
    return outcomes_frame(df, outcomes)


@pytest.mark.parametrize("name", ["out.parquet", "out.geoparquet", "OUT.PARQUET"])
def test_geoparquet_round_trip_keeps_rows_coordinates_crs_and_status(
        tmp_path: Path, name: str) -> None:
    result = _result()
    target = tmp_path / name
    assert write_results(result, target) == (2, 2)
    back = gpd.read_parquet(target)
    assert back.crs.to_epsg() == 4326
    assert list(back.index) == [30, 10, 20, 40] and back.index.name == "row"
    assert list(back["geocode_status"]) == ["matched", "no_match", "failed", "matched"]
    assert back.loc[30, ["lon", "lat"]].tolist() == [9.52195, 47.13974]
    assert (back.geometry[30].x, back.geometry[30].y) == (9.52195, 47.13974)
    assert back.geometry[[10, 20]].isna().all() and back.loc[[10, 20], "lon"].isna().all()
    assert back.loc[40, "geocode_attempts"] == 3 and back.loc[20, "address"] == ""
    letters = dead_letters(back)
    assert list(letters.index) == [10, 20]
    assert list(letters["geocode_reason"]) == ["no match", "empty address"]
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no partial file left behind


def test_write_results_dispatches_a_geopackage_to_its_two_layers(tmp_path: Path) -> None:
    target = tmp_path / "out.gpkg"
    assert write_results(_result(), target) == (2, 2)
    assert sorted(name for name, _ in pyogrio.list_layers(target)) == ["dead_letters", "geocoded"]
    geocoded = gpd.read_file(target, layer="geocoded")
    assert list(geocoded["lon"]) == [9.52195, 9.5209]



@pytest.mark.parametrize("index", [pd.Index([30, 10, 20, 40], name="row"),
                                   pd.Index(["a", "b", "c", "d"]),
                                   pd.MultiIndex.from_arrays([["x", "x", "y", "y"], [1, 2, 1, 2]],
                                                             names=["k", "m"])])
def test_an_index_that_carries_ids_is_in_both_layers_of_a_geopackage(
        tmp_path: Path, index: pd.Index) -> None:
    """A dead letter must keep its id as a matched row does: the review loop works from it."""
    result = _result().set_axis(index)
    target = tmp_path / "out.gpkg"
    write_results(result, target)
    names = [n or "index" for n in index.names]
    for layer, status in (("geocoded", "matched"), ("dead_letters", "no_match")):
        rows = pyogrio.read_dataframe(target, layer=layer, read_geometry=False)
        own = result[(result["geocode_status"] == "matched") == (status == "matched")]
        assert list(rows.columns[:len(names)]) == names
        assert list(rows[names].itertuples(index=False, name=None)) == [
            i if isinstance(i, tuple) else (i,) for i in own.index]


def test_an_index_named_as_a_column_is_written_beside_it(tmp_path: Path) -> None:
    result = _result().rename_axis("Address")  # a column is named 'address'
    target = tmp_path / "out.gpkg"
    assert write_results(result, target) == (2, 2)
    rows = pyogrio.read_dataframe(target, layer="geocoded", read_geometry=False)
    assert list(rows["Address_index"]) == [30, 40]
    assert list(rows["address"]) == ["Städtle 38, Vaduz", "Zollstrasse 2"]


@pytest.mark.parametrize("name", ["out.csv", "out", "out.shp"])
def test_an_unknown_suffix_is_a_configuration_error(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigurationError, match=r"\.gpkg, \.parquet, \.geoparquet"):
        write_results(_result(), tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_the_previous_file_untouched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.parquet"
    write_geoparquet(_result(), target)
    before = target.read_bytes()

    def half_then_fail(self: gpd.GeoDataFrame, path: Path, **kwargs: object) -> None:
        Path(path).write_bytes(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(gpd.GeoDataFrame, "to_parquet", half_then_fail)
    with pytest.raises(ExportError, match="disk full"):
        write_geoparquet(_result().iloc[:1], target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]


def test_object_columns_of_one_kind_keep_their_values_in_geoparquet(tmp_path: Path) -> None:
    """A column of yes/no with blanks (``pd.read_csv`` gives object: True, False, NaN), or
    whole numbers with a gap, was written as text: "True"/"False" (both truthy), "1"."""
    result = _result()
    result.insert(1, "verified", [True, False, None, True])
    result.insert(2, "floor", np.array([1, None, 3, 12], dtype=object))
    result.insert(3, "mixed", [1, "a", None, 2.5])  # no one kind: text, as before
    write_results(result, tmp_path / "out.parquet")
    back = gpd.read_parquet(tmp_path / "out.parquet")
    assert back["verified"].tolist()[:2] == [True, False] and pd.isna(back.loc[20, "verified"])
    assert back.loc[back["verified"].fillna(False).astype(bool)].index.tolist() == [30, 40]
    assert back["floor"].tolist()[0] == 1 and back.loc[40, "floor"] == 12
    assert isinstance(back.loc[40, "floor"], int | np.integer) and pd.isna(back.loc[10, "floor"])
    assert back["mixed"].tolist()[:2] == ["1", "a"]


@pytest.mark.parametrize(("name", "column"), [
    ("out.gpkg", pd.to_timedelta([1, 2, 3, 4], unit="s")),   # GDAL has no such field
    ("out.gpkg", np.array([2**64 - 1, 0, 1, 2], dtype="uint64")),  # too large for its integers
    ("out.gpkg", [1j, 2j, 3j, 4j]), ("out.parquet", [1j, 2j, 3j, 4j])])
def test_a_column_the_format_cannot_hold_is_an_export_error_leaving_nothing_behind(
        tmp_path: Path, name: str, column: object) -> None:
    target = tmp_path / name
    write_results(_result(), target)
    before = target.read_bytes()
    result = _result()
    result.insert(1, "odd", column)
    with pytest.raises(ExportError, match=f"cannot write Geo.* {target}"):
        write_results(result, target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no partial file left behind


def test_missing_directory_and_non_results_are_export_errors(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="cannot write GeoParquet"):
        write_geoparquet(_result(), tmp_path / "missing" / "out.parquet")
    with pytest.raises(ExportError, match="not a geocoding result"):
        write_geoparquet(gpd.GeoDataFrame({"a": [1]}, geometry=[None]), tmp_path / "x.parquet")


coordinates = st.tuples(st.floats(-180, 180, allow_nan=False), st.floats(-90, 90, allow_nan=False))


@settings(max_examples=12, deadline=None)
@given(st.lists(coordinates, min_size=1, max_size=8))
def test_lon_lat_survive_geoparquet_exactly(tmp_path_factory: pytest.TempPathFactory,
                                            points: list[tuple[float, float]]) -> None:
    df = pd.DataFrame({"address": [f"a{i}" for i in range(len(points))]})
    result = outcomes_frame(df, [Match(lon=lon, lat=lat) for lon, lat in points])
    target = tmp_path_factory.mktemp("hyp") / "out.parquet"
    write_geoparquet(result, target)
    back = gpd.read_parquet(target)
    assert back[["lon", "lat"]].equals(result[["lon", "lat"]])
    assert list(back["geocode_status"]) == list(result["geocode_status"])
    matched = back["geocode_status"] == "matched"
    assert list(back.geometry[matched].x) == list(back.loc[matched, "lon"])
    assert list(back.geometry[matched].y) == list(back.loc[matched, "lat"])
