"""``geotoolkit reverse`` end to end: a GeoPackage or a CSV of fixes in, addresses out, against
the simulator on loopback."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pyogrio
import pytest
from pyproj import Transformer
from shapely.geometry import Point

from geotoolkit.export import read_results
from geotoolkit.frontends.cli import main
from geotoolkit.testing import ProviderSimulator

SECRET = "sk-live-reverse-0123456789abcdef"
NEAR_STAEDTLE = (9.52197, 47.13976)
NEAR_DUXWEG = (9.5125, 47.1705)
OUTSIDE = (10.0, 47.0)


@pytest.fixture
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator(valid_keys={SECRET}) as simulator:
        yield simulator


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GTK_TEST_KEY", SECRET)


@pytest.fixture
def gpkg(tmp_path: Path) -> Path:
    path = tmp_path / "fixes.gpkg"
    frame = gpd.GeoDataFrame({"fix": ["a", "b", "c", "d"]}, geometry=[
        Point(*NEAR_STAEDTLE), Point(*OUTSIDE), Point(*NEAR_DUXWEG), Point(*NEAR_STAEDTLE)],
        crs="EPSG:4326")  # shapely: x = lon, y = lat
    frame.to_file(path, layer="fixes", engine="pyogrio")
    return path


def argv(sim: ProviderSimulator, source: Path, out: Path, *extra: str, key: bool = True
         ) -> list[str]:
    """The command for Nominatim on the simulator (with the key), or ``--provider`` in extra."""
    keyed = ["--api-key-env", "GTK_TEST_KEY"] if key else []
    return ["reverse", str(source), "-o", str(out), "--base-url", sim.url,
            "--user-agent", "geotoolkit-tests/1.0 (tests@example.org)", *keyed,
            "--gate", "memory://", "--progress", "json", *extra]


def test_geopackage_to_geopackage(sim: ProviderSimulator, gpkg: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out, cache = tmp_path / "addresses.gpkg", tmp_path / "cache.sqlite"
    assert main(argv(sim, gpkg, out, "--cache", f"sqlite:///{cache}", "--full-results")) == 0
    captured = capsys.readouterr()
    geocoded = pyogrio.read_dataframe(out, layer="geocoded")
    letters = pyogrio.read_dataframe(out, layer="dead_letters")
    assert geocoded.crs.to_epsg() == 4326 and sorted(geocoded.fix) == ["a", "c", "d"]
    assert [(p.x, p.y) for p in geocoded.geometry] == [NEAR_STAEDTLE, NEAR_DUXWEG, NEAR_STAEDTLE]
    assert geocoded.geocode_street.tolist() == ["Städtle", "Duxweg", "Städtle"]
    assert (geocoded.geocode_distance_m < 50).all()
    assert letters.fix.tolist() == ["b"] and list(letters.geometry) == [Point(*OUTSIDE)]
    assert "4/4 rows: 3 matched, 1 no match, 0 failed" in captured.out
    assert "(geocoded: 3, dead_letters: 1)" in captured.out
    assert '"event": "BatchFinished"' in captured.err
    assert len(sim.requests) == 3 and all(r.key == SECRET for r in sim.requests)
    for blob in (out.read_bytes(), cache.read_bytes(), captured.out.encode(), captured.err.encode()):
        assert SECRET.encode() not in blob
    assert main(argv(sim, gpkg, tmp_path / "again.gpkg", "--cache", f"sqlite:///{cache}")) == 0
    assert len(sim.requests) == 3  # the rerun came from the cache (a no-match is kept a week)


def test_country_keeps_points_elsewhere_and_swapped_ones_from_being_sent(
        sim: ProviderSimulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, out = tmp_path / "fixes.csv", tmp_path / "addresses.gpkg"
    pd.DataFrame({"fix": ["a", "swapped", "b"],
                  "x": [NEAR_STAEDTLE[0], NEAR_STAEDTLE[1], OUTSIDE[0]],
                  "y": [NEAR_STAEDTLE[1], NEAR_STAEDTLE[0], OUTSIDE[1]]}).to_csv(source, index=False)
    assert main(argv(sim, source, out, "--lon", "x", "--lat", "y", "--country", "LI",
                     "--cache", "none")) == 0
    letters = pyogrio.read_dataframe(out, layer="dead_letters").set_index("fix")
    assert letters.loc["swapped", "geocode_reason"].startswith("coordinates look swapped")
    assert letters.loc["b", "geocode_reason"].startswith("outside LI (Liechtenstein)")
    assert [r.query for r in sim.requests] == ["reverse:9.521970,47.139760"]  # only the one in LI
    assert "3/3 rows: 1 matched, 0 no match, 2 failed" in capsys.readouterr().out


def test_csv_with_named_swiss_coordinate_columns(sim: ProviderSimulator, tmp_path: Path) -> None:
    to_lv95 = Transformer.from_crs("EPSG:4326", "EPSG:2056", always_xy=True)
    east, north = to_lv95.transform(*NEAR_STAEDTLE)
    source, out = tmp_path / "fixes.csv", tmp_path / "addresses.parquet"
    pd.DataFrame({"id": [1, 2, 3], "E": [f"{east:.3f}", "not a number", ""],
                  "N": [f"{north:.3f}", "1223000", "1223000"]}).to_csv(source, index=False)
    code = main(argv(sim, source, out, "--cache", "none", "--lon", "E", "--lat", "N",
                     "--crs", "EPSG:2056", "--provider", "photon", key=False))
    assert code == 0
    back = read_results(out)
    assert back.geocode_status.tolist() == ["matched", "failed", "failed"]
    assert back.geocode_reason.tolist()[1:] == ["lon (E) is not a number: 'not a number'",
                                                "lon (E) is missing"]
    assert (round(back.geometry[0].x, 6), round(back.geometry[0].y, 6)) == NEAR_STAEDTLE
    assert back.E.tolist()[0] == f"{east:.3f}"  # the input columns are kept as they were
    assert [r.query for r in sim.requests] == ["reverse:9.521970,47.139760"]


def test_swiss_coordinates_without_crs_exit_2_naming_it_and_send_nothing(
        sim: ProviderSimulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """LV95 eastings and northings read as degrees were a dead letter per row ('longitude
    2758018.99 out of range'), with no word of the CRS: refused whole, naming --crs."""
    to_lv95 = Transformer.from_crs("EPSG:4326", "EPSG:2056", always_xy=True)
    east, north = to_lv95.transform(*NEAR_STAEDTLE)
    source, out = tmp_path / "fixes.csv", tmp_path / "addresses.gpkg"
    pd.DataFrame({"E": [f"{east:.3f}", ""], "N": [f"{north:.3f}", "1223000"]}).to_csv(
        source, index=False)
    assert main(argv(sim, source, out, "--cache", "none", "--lon", "E", "--lat", "N",
                     "--provider", "photon", key=False)) == 2
    err = capsys.readouterr().err
    assert "no point of the columns 'E' and 'N' is in longitude and latitude degrees" in err
    assert f"E={float(f'{east:.3f}')!r}" in err and "--crs EPSG:2056" in err
    assert sim.requests == [] and not out.exists()


@pytest.mark.parametrize("name", ["fixes.tsv", "fixes.txt", "FIXES.TSV"])
def test_a_tab_separated_file_is_read_as_csv_text(name: str, sim: ProviderSimulator,
                                                 tmp_path: Path) -> None:
    """``geotoolkit geocode`` reads a ``.tsv`` or ``.txt`` as CSV text; ``reverse`` took it
    for a vector file and refused its columns: "--lon and --lat are for a CSV; fixes.tsv
    has its own geometry" (and without them, "needs a GeoDataFrame of Points")."""
    source, out = tmp_path / name, tmp_path / "addresses.gpkg"
    source.write_text(f"fix\tx\ty\na\t{NEAR_STAEDTLE[0]}\t{NEAR_STAEDTLE[1]}\n", encoding="utf-8")
    assert main(argv(sim, source, out, "--lon", "x", "--lat", "y", "--cache", "none")) == 0
    geocoded = pyogrio.read_dataframe(out, layer="geocoded")
    assert geocoded.fix.tolist() == ["a"] and geocoded.geocode_status.tolist() == ["matched"]
    assert [r.query for r in sim.requests] == ["reverse:9.521970,47.139760"]


def test_a_decimal_comma_is_named_in_the_reason(sim: ProviderSimulator, tmp_path: Path) -> None:
    """A ``;`` CSV from a spreadsheet in much of Europe writes ``9,52``: every row was a dead
    letter saying only "lon (x) is not a number: '9,52'"."""
    source, out = tmp_path / "fixes.csv", tmp_path / "addresses.gpkg"
    source.write_text("fix;x;y\na;9,52197;47,13976\nb;abc;47,1\n", encoding="utf-8")
    assert main(argv(sim, source, out, "--lon", "x", "--lat", "y", "--cache", "none")) == 0
    letters = pyogrio.read_dataframe(out, layer="dead_letters")
    assert letters.geocode_reason.tolist() == [
        "lon (x) is not a number: '9,52197' (a decimal comma? write the number with a point: "
        "9.52197)", "lon (x) is not a number: 'abc'"]
    assert sim.requests == []


@pytest.mark.parametrize("columns", [("--lon", "x", "--lat", "y"), ()])
def test_a_spreadsheet_workbook_is_refused_naming_what_to_save_it_as(
        columns: tuple[str, ...], sim: ProviderSimulator, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """GDAL reads a .xlsx as a table: with --lon/--lat it was refused as "--lon and --lat
    are for a CSV; fixes.xlsx has its own geometry", without them as "needs a GeoDataFrame
    of Points"."""
    source = tmp_path / "fixes.xlsx"
    with zipfile.ZipFile(source, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr("xl/worksheets/sheet1.xml", "<row><c><v>9.52</v></c></row>")
    assert main(argv(sim, source, tmp_path / "x.gpkg", *columns, "--cache", "none")) == 2
    assert "it is a spreadsheet workbook (.xlsx, .xls or .ods), not CSV text; save the sheet " \
           "as \"CSV UTF-8\"" in capsys.readouterr().err
    assert sim.requests == []


def test_a_file_without_a_crs_or_a_geometry_is_told_the_flags_that_help(
        sim: ProviderSimulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A shapefile without its .prj was refused with Python's advice, "set the one they are in
    first, e.g. gdf.set_crs('EPSG:4326')", and a layer without geometry with "needs a
    GeoDataFrame of Points (or lon and lat columns), got DataFrame": neither a flag."""
    shapefile, table = tmp_path / "fixes.shp", tmp_path / "table.gpkg"
    with pytest.warns(UserWarning, match="'crs' was not provided"):  # what the file lacks
        pyogrio.write_dataframe(gpd.GeoDataFrame({"fix": ["a"]}, geometry=[Point(*NEAR_STAEDTLE)]),
                                shapefile)
    pyogrio.write_dataframe(pd.DataFrame({"x": [NEAR_STAEDTLE[0]], "y": [NEAR_STAEDTLE[1]]}),
                            table, layer="fixes")
    out = tmp_path / "addresses.gpkg"
    assert main(argv(sim, shapefile, out, "--cache", "none")) == 2
    assert capsys.readouterr().err == (
        f"geotoolkit: {shapefile} says nothing of its CRS (a shapefile without its .prj?): name "
        "the one its coordinates are in, e.g. --crs EPSG:4326 for degrees or --crs EPSG:2056 "
        "for Swiss LV95 metres (crs= in Python)\n")
    assert main(argv(sim, table, out, "--cache", "none")) == 2
    assert capsys.readouterr().err == (
        f"geotoolkit: {table} has no geometry: a table of coordinates goes in as a CSV, its "
        "columns named with --lon and --lat\n")
    assert sim.requests == []
    assert main(argv(sim, shapefile, out, "--cache", "none", "--crs", "EPSG:4326")) == 0  # as said
    assert len(sim.requests) == 1


def test_csv_without_named_columns_exits_2_and_sends_nothing(
        sim: ProviderSimulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "fixes.csv"
    pd.DataFrame({"lon": [9.52], "lat": [47.14]}).to_csv(source, index=False)
    assert main(argv(sim, source, tmp_path / "x.gpkg", "--cache", "none")) == 2
    assert "a CSV needs --lon and --lat" in capsys.readouterr().err
    assert main(argv(sim, source, tmp_path / "x.gpkg", "--lon", "lon", "--lat", "Lat")) == 2
    assert "column 'Lat' not in the frame (did you mean 'lat'?)" in capsys.readouterr().err
    assert sim.requests == [] and not (tmp_path / "x.gpkg").exists()


def test_refusals_exit_2_before_anything_is_sent(sim: ProviderSimulator, gpkg: Path,
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.gpkg"
    assert main(argv(sim, gpkg, out, "--lon", "x", "--lat", "y")) == 2
    assert "--lon and --lat are for a CSV" in capsys.readouterr().err
    assert main(argv(sim, gpkg, out, "--provider", "census", key=False)) == 2
    assert "census cannot reverse geocode" in capsys.readouterr().err
    assert main(argv(sim, gpkg, out, "--crs", "EPSG:2056")) == 2
    assert "is in EPSG:4326: --crs names the CRS of a CSV" in capsys.readouterr().err
    assert main(argv(sim, gpkg, gpkg)) == 2
    assert "would overwrite the input" in capsys.readouterr().err
    assert main(argv(sim, gpkg, out, "--decimals", "12")) == 2
    assert "decimals must be a whole number from 0 to 10" in capsys.readouterr().err
    assert main(argv(sim, tmp_path / "missing.gpkg", out)) == 2
    assert "no such file" in capsys.readouterr().err
    broken = tmp_path / "broken.gpkg"
    broken.write_bytes(b"not a GeoPackage at all")
    assert main(argv(sim, broken, out)) == 2  # a bad argument, as a bad CSV is: not a stop
    assert capsys.readouterr().err.startswith(f"geotoolkit: cannot read {broken}: ")
    assert sim.requests == [] and not out.exists()


def test_a_file_with_several_layers_needs_one_named(sim: ProviderSimulator, gpkg: Path,
                                                    tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    other = gpd.GeoDataFrame({"fix": ["z"]}, geometry=[Point(*NEAR_DUXWEG)], crs="EPSG:4326")
    other.to_file(gpkg, layer="more", engine="pyogrio")
    out = tmp_path / "x.gpkg"
    assert main(argv(sim, gpkg, out, "--cache", "none")) == 2
    # it said only "name one": how, the reader had to find in --help
    assert "has the layers fixes, more: name one with --layer" in capsys.readouterr().err
    assert main(argv(sim, gpkg, out, "--cache", "none", "--layer", "more")) == 0
    assert read_results(out).fix.tolist() == ["z"]


def test_a_file_without_a_crs_takes_crs(sim: ProviderSimulator, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "fixes.shp"
    gpd.GeoDataFrame({"fix": ["a"]}, geometry=[Point(2758020.5, 1223073.4)],
                     crs="EPSG:2056").to_file(source, engine="pyogrio")
    source.with_suffix(".prj").unlink()  # a shapefile that lost its .prj: no CRS
    out = tmp_path / "x.gpkg"
    assert main(argv(sim, source, out, "--cache", "none")) == 2
    err = capsys.readouterr().err
    assert "--crs EPSG:2056" in err and "gdf.set_crs(" not in err  # a flag, not Python
    assert main(argv(sim, source, out, "--cache", "none", "--crs", "EPSG:2056")) == 0
    back = read_results(out)
    assert back.geocode_status.tolist() == ["matched"]
    assert back.geocode_label.tolist() == ["38, Städtle, Vaduz, 9490, Liechtenstein"]


def test_max_wait_exits_75_with_retry_after(gpkg: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with ProviderSimulator(valid_keys={SECRET}, rate_limit=1, retry_after=60) as sim:
        code = main(argv(sim, gpkg, tmp_path / "x.gpkg", "--cache", "none", "--rate", "50",
                         "--concurrency", "1", "--max-wait-seconds", "0.5"))
        assert code == 75
        assert "retry_after=" in capsys.readouterr().err
        assert sim.count(429) == 1 and not (tmp_path / "x.gpkg").exists()


def test_the_dead_letters_of_a_reverse_output_are_not_geocoded_as_addresses(
        sim: ProviderSimulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, out, again = tmp_path / "fixes.csv", tmp_path / "places.gpkg", tmp_path / "again.gpkg"
    pd.DataFrame({"x": ["9.52197", "abc", "7"], "y": ["47.13976", "47.1", "47"]}).to_csv(
        source, index=False)
    assert main(argv(sim, source, out, "--cache", "none", "--lon", "x", "--lat", "y")) == 0
    sent = len(sim.requests)
    geocode = ["geocode", str(out), "--only-dead-letters", "-o", str(again), "--column", "x",
               *argv(sim, source, out, "--cache", "none")[4:]]
    assert main(geocode) == 2  # its cells are coordinates: as addresses, "abc" would match
    assert "reverse-geocoding result" in capsys.readouterr().err
    assert len(sim.requests) == sent and not again.exists()
