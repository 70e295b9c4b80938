"""GeoPackage and GeoParquet export of what an input table brought: no text lost, names a file
can hold, a layer of Points even when empty."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pyogrio
import pytest

from geotoolkit import ConfigurationError, ExportError
from geotoolkit.export import check_exportable, read_results, write_results
from geotoolkit.orchestration.frame import outcomes_frame
from geotoolkit.results import Failure, Match


@pytest.mark.parametrize("dtype", [object, "string"])
def test_a_nul_character_is_written_as_an_escape_not_where_the_text_ends(
        tmp_path: Path, dtype: object) -> None:
    """GDAL ends a text at a NUL: the dead letter of ``"Va\\x00duz"`` (refused for its NUL,
    "at position 2") read ``"Va"``, and a note ``"c\\x00d"`` of a matched row ``"c"``, the
    rest of each cell gone without a word. The NUL is kept as the escape ``\\x00``."""
    frame = pd.DataFrame({"address": ["Vaduz", "Va\x00duz"], "note": ["c\x00d", "a\x00b"]},
                         dtype=dtype)
    outcomes = [Match(lon=9.52, lat=47.14, label="Vaduz", provider="nominatim"),
                Failure(reason="address contains a NUL character (at position 2)",
                        error="InvalidInput", provider="nominatim")]
    target = tmp_path / "out.gpkg"
    assert write_results(outcomes_frame(frame, outcomes), target) == (1, 1)
    back = read_results(target)
    assert back[["address", "note"]].to_dict("records") == [
        {"address": "Vaduz", "note": "c\\x00d"}, {"address": "Va\\x00duz", "note": "a\\x00b"}]


@pytest.mark.parametrize("name", ["out.gpkg", "out.parquet"])
@pytest.mark.parametrize("column", [0, ("site", "code"), " "])
def test_a_column_name_that_is_no_text_is_refused_saying_so(
        tmp_path: Path, name: str, column: object) -> None:
    """``pd.DataFrame({0: ...})`` or MultiIndex columns, after the run: the GeoPackage
    writer raised AttributeError ('int' object has no attribute 'encode') from pyogrio,
    the GeoParquet one pyarrow's words. Nothing is written."""
    frame = pd.DataFrame({"address": ["Vaduz"], column: ["x"]})
    result = outcomes_frame(frame, [Match(lon=9.52, lat=47.14, label="Vaduz",
                                          provider="nominatim")])
    target = tmp_path / name
    with pytest.raises(ExportError, match=rf"^cannot write Geo\w+ {target}: column names must "
                                          rf"be non-empty text, got {re.escape(repr(column))}; "
                                          r"rename it \(result.columns = \[...\]\)$"):
        write_results(result, target)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("addresses", [["Nowhere 1", ""], []])
def test_an_empty_geocoded_layer_is_still_a_layer_of_points(
        tmp_path: Path, addresses: list[str]) -> None:
    """A table none of whose rows matched (or a header alone) left a ``geocoded`` layer of
    geometry type 'Unknown': no shape told GDAL its type, though the layer holds Points."""
    outcomes = [Failure(reason="no match", error="NoMatch", provider="nominatim")] * len(addresses)
    target = tmp_path / "out.gpkg"
    assert write_results(outcomes_frame(pd.DataFrame({"address": addresses}), outcomes),
                         target) == (0, len(addresses))
    info = pyogrio.read_info(target, layer="geocoded")
    assert (info["geometry_type"], info["crs"], info["features"]) == ("Point", "EPSG:4326", 0)


def _statuses(n: int) -> tuple[list[str], list[Match | Failure]]:
    addresses = [f"row {i}" for i in range(n)]
    outcomes: list[Match | Failure] = [
        Match(lon=9.52, lat=47.14, label=a, provider="nominatim") if i % 3 else
        Failure(reason="no match", error="NoMatch", provider="nominatim")
        for i, a in enumerate(addresses)]
    return addresses, outcomes


@pytest.mark.parametrize("index", [None, [0, 2, 5, 7, 9, 12]])
def test_the_rows_come_back_in_their_order_with_their_index(
        tmp_path: Path, index: list[int] | None) -> None:
    """The two layers split the rows, and nothing kept their order or an unnamed integer
    index (a CSV's rows, a filtered frame's labels): read back, the geocoded layer came
    first, on a fresh RangeIndex, and in QGIS a dead letter's feature id was its place in
    its layer, not its row of the input. The feature id is now the index + 1."""
    addresses, outcomes = _statuses(6)
    frame = pd.DataFrame({"address": addresses}, index=index)
    result = outcomes_frame(frame, outcomes)
    target = tmp_path / "out.gpkg"
    assert write_results(result, target) == (4, 2)
    back = read_results(target)
    assert back["address"].tolist() == addresses and list(back.index) == list(frame.index)
    letters = pyogrio.read_dataframe(target, layer="dead_letters", fid_as_index=True,
                                     read_geometry=False)
    assert [(fid - 1, a) for fid, a in letters["address"].items()] == [
        (label, a) for label, a in zip(frame.index, addresses, strict=True) if a in ("row 0", "row 3")]


def test_layers_numbered_each_from_one_read_back_one_after_the_other(tmp_path: Path) -> None:
    """A file whose layers were each numbered from 1 (written before, or from a named index)
    still reads: the geocoded layer first, on a fresh RangeIndex."""
    addresses, outcomes = _statuses(6)
    result = outcomes_frame(pd.DataFrame({"address": addresses},
                                         index=pd.Index(list("abcdef"), name="key")), outcomes)
    target = tmp_path / "out.gpkg"
    write_results(result, target)
    back = read_results(target)
    assert back["key"].tolist() == list("bcef") + list("ad") and list(back.index) == list(range(6))


@pytest.mark.parametrize("index", [[0, 1, 2, 0, 1, 2], [-3, -2, -1, 0, 1, 2],
                                   [2**62, 0, 1, 2, 3, 4]])
def test_an_integer_index_that_cannot_number_the_rows_is_written_as_a_column(
        tmp_path: Path, index: list[int]) -> None:
    """Two CSVs read and concatenated (``pd.concat([a, b])``) give each row's label twice:
    such an index (or a negative or huge one) cannot be the feature ids, and was written
    nowhere: read back, neither layer said which input row a dead letter was."""
    addresses, outcomes = _statuses(6)
    frame = pd.DataFrame({"address": addresses}, index=index)
    target = tmp_path / "out.gpkg"
    assert write_results(outcomes_frame(frame, outcomes), target) == (4, 2)
    back = read_results(target)
    assert sorted(zip(back["index"], back["address"], strict=True)) == sorted(
        zip(index, addresses, strict=True))
    letters = pyogrio.read_dataframe(target, layer="dead_letters", read_geometry=False)
    assert list(zip(letters["index"], letters["address"], strict=True)) == [
        (index[0], "row 0"), (index[3], "row 3")]


def _written(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a result: its first row matched, the others no match."""
    outcomes: list[Match | Failure] = [
        Match(lon=9.52, lat=47.14, label="Vaduz", provider="nominatim") if i == 0 else
        Failure(reason="no match", error="NoMatch", provider="nominatim")
        for i in range(len(frame))]
    return outcomes_frame(frame, outcomes)


@pytest.mark.parametrize(("columns", "first", "second"), [
    ({"LON": [8.0, 8.1]}, "LON", "lon"), ({"Geometry": ["a", "b"]}, "Geometry", "geometry"),
    ({"Address": ["a", "b"]}, "address", "Address")])
def test_columns_that_differ_only_in_case_are_refused_naming_both(
        tmp_path: Path, columns: dict[str, list[object]], first: str, second: str) -> None:
    """GeoPackage is SQLite, whose column names ignore case: a result from a frame with
    ``LON`` beside the result's ``lon`` was refused with GDAL's "Error adding field 'lon'
    to layer", which says nothing of why. The command line refuses it before sending
    (check_exportable); Python users meet it here, after the run."""
    result = _written(pd.DataFrame({"address": ["Vaduz", "Nowhere"], **columns}))
    target = tmp_path / "out.gpkg"
    pair = sorted([first, second], key=list(result.columns).index)
    with pytest.raises(ExportError, match=re.escape(
            f"cannot write GeoPackage {target}: it cannot hold columns that differ only in "
            f"case: {pair[0]!r} and {pair[1]!r}; rename one of them")):
        write_results(result, target)
    assert list(tmp_path.iterdir()) == []
    assert write_results(result, tmp_path / "out.parquet") == (1, 1)  # Parquet can


@pytest.mark.parametrize("fid", [[1, 1, 2], [1.5, 2.7, 3.0], [1, None, 3], [-1, 2, 3], ["a", "b", "c"]])
def test_a_fid_column_that_cannot_be_the_feature_ids_is_refused_not_altered(
        tmp_path: Path, fid: list[object]) -> None:
    """GDAL takes a ``fid`` column as the feature ids: ``1.5`` and ``2.7`` were written as
    1 and 2 without a word, ``-1`` (GDAL's "no id") as a new id, and repeated or missing
    ids, or text, failed with "UNIQUE constraint failed: geocoded.fid" or pandas' words."""
    result = _written(pd.DataFrame({"address": ["Vaduz", "Schaan", "Nowhere"], "fid": fid}))
    result.loc[1, "geocode_status"] = "matched"
    target = tmp_path / "out.gpkg"
    with pytest.raises(ExportError, match=re.escape(
            f"cannot write GeoPackage {target}: a 'fid' column is GeoPackage's feature id and "
            "must hold unique whole numbers from 0; rename it")):
        write_results(result, target)
    assert list(tmp_path.iterdir()) == []


def test_a_negative_fid_is_refused_before_a_run_too(tmp_path: Path) -> None:
    """The command line checks its CSV before sending: a QGIS-less ``fid`` of -1 passed,
    and GDAL wrote that row under a new id."""
    frame = pd.DataFrame({"address": ["Vaduz", "Schaan"], "fid": ["-1", "2"]})
    with pytest.raises(ConfigurationError, match=re.escape(
            "unique whole numbers from 0; rename it, e.g. to 'source_fid' (in the CSV's header")):
        check_exportable(frame, tmp_path / "out.gpkg")
    check_exportable(frame, tmp_path / "out.parquet")  # no feature ids there


def test_a_table_wider_than_a_geopackage_layer_is_refused_before_the_run(tmp_path: Path) -> None:
    """SQLite holds at most 2000 columns a table: a CSV of 2100 columns was geocoded whole,
    every row sent, and then refused by GDAL as "Error adding field 'c1996' to layer"."""
    frame = pd.DataFrame({"address": ["Vaduz", "Nowhere"],
                          **{f"c{i}": ["1", "2"] for i in range(2100)}})
    with pytest.raises(ConfigurationError, match=re.escape(
            f"{tmp_path / 'out.gpkg'} cannot hold 2110 columns: a GeoPackage layer holds at most "
            "1997 besides its feature id and geometry; keep fewer, or write GeoParquet")):
        check_exportable(frame, tmp_path / "out.gpkg")
    check_exportable(frame, tmp_path / "out.parquet")
    check_exportable(frame.iloc[:, :1988], tmp_path / "out.gpkg")  # 1997 with the result's
    target = tmp_path / "out.gpkg"
    with pytest.raises(ExportError, match=re.escape(
            f"cannot write GeoPackage {target}: it cannot hold 2110 columns")):
        write_results(_written(frame), target)
    assert list(tmp_path.iterdir()) == []
    assert write_results(_written(frame.iloc[:, :1988]), target) == (1, 1)
