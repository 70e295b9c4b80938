"""The reverse job: refusals before anything opens, the points it would send (lon first, after
reprojection), and the result frame built from outcomes (status rules, distance, dtypes)."""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pytest
from pyproj import Geod, Transformer
from shapely.geometry import LineString, MultiPoint, Point, Polygon

from geotoolkit import ConfigurationError
from geotoolkit.export import PRECISION_DTYPE, read_results, write_results
from geotoolkit.orchestration.options import GeocodeOptions
from geotoolkit.orchestration.reverse import ReverseJob, reverse_job
from geotoolkit.orchestration.reverse_frame import geodesic_distance_m, reverse_frame
from geotoolkit.providers import Census, Nominatim, Photon
from geotoolkit.results import Failure, Match, NoMatch, Place, ReverseQuery
from geotoolkit.testing import unused_url

AGENT = "geotoolkit-tests/1.0 (tests@example.org)"
NOWHERE = unused_url()  # nothing listens: a test that sent anything would fail loudly
TO_LV95 = Transformer.from_crs("EPSG:4326", "EPSG:2056", always_xy=True)


def options(**given: object) -> GeocodeOptions:
    given.setdefault("provider", Nominatim(NOWHERE, user_agent=AGENT))
    given.setdefault("gate", "memory://")
    given.setdefault("cache", False)
    return GeocodeOptions(**given)  # type: ignore[arg-type]


def points(*geometries: object, crs: str | None = "EPSG:4326", **columns: list[object]
           ) -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame(columns or {"fix": list(range(len(geometries)))},
                            geometry=list(geometries), crs=crs)


# -- refusals -------------------------------------------------------------------------------


def test_a_frame_without_a_crs_is_refused_naming_set_crs() -> None:
    with pytest.raises(ConfigurationError, match=r"no CRS.*gdf\.set_crs\('EPSG:4326'\)"):
        ReverseJob(points(Point(9.52, 47.14), crs=None), options())


def test_a_plain_frame_needs_both_coordinate_columns_named() -> None:
    df = pd.DataFrame({"lon": [9.52], "lat": [47.14]})
    with pytest.raises(ConfigurationError, match="names of both coordinate columns"):
        reverse_job(df, options())  # never guessed, even when they are called lon and lat
    with pytest.raises(ConfigurationError, match="names of both"):
        reverse_job(df, options(), lon="lon")
    with pytest.raises(KeyError, match=r"column 'Lat' not in the frame \(did you mean 'lat'\?\)"):
        reverse_job(df, options(), lon="lon", lat="Lat")
    with pytest.raises(ConfigurationError, match="same column"):
        reverse_job(df, options(), lon="lon", lat="lon")
    with pytest.raises(ConfigurationError, match="not a coordinate reference system"):
        reverse_job(df, options(), lon="lon", lat="lat", crs="EPSG:999999")


def test_a_geodataframe_takes_no_columns_or_crs() -> None:
    with pytest.raises(ConfigurationError, match="from its own geometry and CRS"):
        reverse_job(points(Point(9.52, 47.14)), options(), lon="x", lat="y")
    with pytest.raises(ConfigurationError, match="from its own geometry and CRS"):
        reverse_job(points(Point(9.52, 47.14)), options(), crs="EPSG:2056")


def test_a_geodataframe_without_active_geometry_is_refused() -> None:
    frame = gpd.GeoDataFrame({"fix": [1]})
    with pytest.raises(ConfigurationError, match=r"no active geometry column.*set_geometry"):
        ReverseJob(frame, options())


def test_a_provider_without_reverse_geocoding_is_refused_alone_or_in_a_chain() -> None:
    with pytest.raises(ConfigurationError, match=r"census cannot reverse geocode.*these can: "
                                                 r"arcgis, geonorge, google"):
        ReverseJob(points(Point(9.52, 47.14)), options(provider=Census(NOWHERE)))
    chain = [Photon(NOWHERE), Census(NOWHERE)]
    with pytest.raises(ConfigurationError, match="census cannot reverse geocode"):
        ReverseJob(points(Point(9.52, 47.14)), options(provider=chain))


@pytest.mark.parametrize("decimals", [-1, 11, 2.5, True, "6"])
def test_decimals_must_be_a_whole_number_from_0_to_10(decimals: object) -> None:
    with pytest.raises(ConfigurationError, match="decimals must be a whole number from 0 to 10"):
        ReverseJob(points(Point(9.52, 47.14)), options(), decimals=decimals)  # type: ignore[arg-type]


def test_the_users_own_result_named_columns_are_never_overwritten_in_silence() -> None:
    frame = points(Point(9.52, 47.14), geocode_label=["mine"])
    with pytest.raises(ConfigurationError, match=r"own 'geocode_label' column\(s\)"):
        ReverseJob(frame, options())
    job = ReverseJob(frame, options(overwrite_columns=True))
    assert list(job.frame.columns) == []
    df = pd.DataFrame({"x": [9.52], "y": [47.14], "geometry": ["mine"]})
    with pytest.raises(ConfigurationError, match="own 'geometry' column"):
        reverse_job(df, options(), lon="x", lat="y")


def test_duplicate_column_names_are_refused() -> None:
    frame = gpd.GeoDataFrame(pd.DataFrame([[1, 2]], columns=["a", "a"]),
                             geometry=[Point(9.52, 47.14)], crs="EPSG:4326")
    with pytest.raises(ConfigurationError, match="duplicate column names: 'a'"):
        ReverseJob(frame, options())


# -- the points it sends ----------------------------------------------------------------------


def test_unusable_geometries_are_dead_letters_with_their_reason() -> None:
    frame = points(Point(9.52, 47.14), None, Point(), LineString([(9.5, 47.1), (9.6, 47.2)]),
                   MultiPoint([(9.5, 47.1)]), Polygon(), Point(9.52, 99.0), Point(200.0, 47.0),
                   Point(math.nan, 47.0))
    items = ReverseJob(frame, options()).items
    assert items[0] == ReverseQuery(9.52, 47.14)
    assert items[1:] == [
        "missing geometry", "empty geometry",
        "not a point (LineString): reverse geocoding takes Points",
        "not a point (MultiPoint): reverse geocoding takes Points", "empty geometry",
        "latitude 99.0 out of range [-90, 90]", "longitude 200.0 out of range [-180, 180]",
        "missing coordinates"]


def test_with_a_country_points_outside_it_are_dead_letters_and_swapped_ones_say_so() -> None:
    """Lat and lon columns read the wrong way round are the commonest slip with a table of
    fixes: with ``country=``, such a point is not sent (it would find an address in the
    Indian Ocean) but says its coordinates look swapped; one elsewhere says where it is."""
    frame = pd.DataFrame({"lon": [9.52, 47.14, 16.37], "lat": [47.14, 9.52, 48.21]})
    items = reverse_job(frame, options(), lon="lon", lat="lat", country="LI").items
    assert items[0] == ReverseQuery(9.52, 47.14)
    assert isinstance(items[1], str) and items[1].startswith("coordinates look swapped")
    assert items[2] == "outside LI (Liechtenstein): (lon, lat) = (16.37, 48.21)"
    gdf = points(Point(9.52, 47.14), Point(47.14, 9.52))
    assert [isinstance(i, str) for i in ReverseJob(gdf, options(), country="li").items] == [
        False, True]
    with pytest.raises(ConfigurationError, match="country"):
        ReverseJob(gdf, options(), country="Atlantis")


def test_swiss_coordinates_are_reprojected_and_read_lon_first() -> None:
    east, north = TO_LV95.transform(9.5219500, 47.1397400)
    frame = points(Point(east, north), crs="EPSG:2056")
    job = ReverseJob(frame, options(), decimals=np.int64(5))  # type: ignore[arg-type]
    (query,) = job.items
    assert isinstance(query, ReverseQuery)
    assert (round(query.lon, 7), round(query.lat, 7)) == (9.52195, 47.13974)
    assert query.decimals == 5 and type(query.decimals) is int  # what providers accept
    assert query.key() == "reverse:9.52195,47.13974"
    assert job.points.crs.to_epsg() == 4326
    assert list(frame.geometry) == [Point(east, north)]  # the input is not modified


def test_a_point_its_projection_cannot_hold_is_not_sent() -> None:
    frame = points(Point(1e12, 1e12), Point(2758019.0, 1223071.1), crs="EPSG:2056")
    items = ReverseJob(frame, options()).items
    assert isinstance(items[0], str)
    assert items[0].startswith("(1000000000000.0, 1000000000000.0) cannot be reprojected from "
                               "EPSG:2056 to lon/lat")
    assert isinstance(items[1], ReverseQuery)


def test_a_point_that_is_not_finite_in_a_projection_is_a_dead_letter_without_a_warning() -> None:
    # the suite turns warnings into errors: inf - inf in the round-trip check used to warn
    frame = points(Point(math.inf, math.inf), Point(2758019.0, 1223071.1), crs="EPSG:2056")
    items = ReverseJob(frame, options()).items
    assert isinstance(items[0], str) and items[0].startswith("coordinates are not finite")
    assert isinstance(items[1], ReverseQuery)


def test_a_point_that_is_nowhere_in_lonlat_gets_no_geometry(tmp_path: Path) -> None:
    """A point its CRS could not carry to lon/lat kept what reprojection made of it, (-180, 90)
    for (1e30, 1e30) in EPSG:3857, a point drawn at a corner of the world; an infinite one
    kept POINT (Infinity Infinity), and the dead_letters layer's extent held inf. Such a row
    is a dead letter saying why, with no geometry."""
    frame = points(Point(1e30, 1e30), Point(math.inf, 1.0), Point(0.0, 0.0), crs="EPSG:3857")
    result = ReverseJob(frame, options()).run_sync()  # nothing is sent: every row is refused
    assert result.geocode_reason.tolist()[0].startswith("(1e+30, 1e+30) cannot be reprojected")
    assert result.geocode_reason.tolist()[1].startswith("coordinates are not finite")
    assert result.geocode_reason.tolist()[2] == "null island (0, 0)"  # a place: kept
    assert result.geometry.tolist() == [None, None, Point(0.0, 0.0)]
    target = tmp_path / "out.gpkg"
    assert write_results(result, target) == (0, 3)
    bounds = pyogrio.read_info(target, layer="dead_letters")["total_bounds"]
    assert tuple(bounds) == (0.0, 0.0, 0.0, 0.0)
    assert read_results(target).geometry.tolist() == [None, None, Point(0.0, 0.0)]


def test_a_crs_with_no_way_to_lonlat_is_refused_before_anything_is_sent() -> None:
    local = 'LOCAL_CS["site grid",UNIT["metre",1]]'  # an engineering CRS: metres from a peg
    with pytest.raises(ConfigurationError, match=r"cannot be reprojected from .*site grid.* to "
                                                 r"EPSG:4326 lon/lat .*give the CRS"):
        ReverseJob(points(Point(12.0, 5.0), crs=local), options())
    with pytest.raises(ConfigurationError, match="cannot be reprojected from IAU_2015:30100"):
        reverse_job(pd.DataFrame({"x": [1.0], "y": [2.0]}), options(), lon="x", lat="y",
                    crs="IAU_2015:30100")  # the Moon


def test_columns_are_read_as_numbers_and_unusable_cells_say_why() -> None:
    df = pd.DataFrame({"x": ["9.52", "abc", "", None, 9.5, True, "nan", "9.5"],
                       "y": ["47.14", "47.1", "47.1", "47.1", 47.1, 47.1, "47.1", "1e400"]})
    job = reverse_job(df, options(), lon="x", lat="y")
    assert job.items == [
        ReverseQuery(9.52, 47.14), "lon (x) is not a number: 'abc'", "lon (x) is missing",
        "lon (x) is missing", ReverseQuery(9.5, 47.1), "lon (x) is not a number (bool)",
        "lon (x) is missing", "coordinates are not finite (9.5, inf)"]
    assert list(job.frame.columns) == ["x", "y"]  # both kept as they were
    assert job.points.iloc[1] is None  # an unusable row has no geometry


def test_projected_columns_read_as_degrees_are_refused_naming_the_crs() -> None:
    """Eastings and northings with no crs given: every row was a dead letter saying
    'longitude 2758019.0 out of range'; the whole frame is refused, naming crs=."""
    east, north = TO_LV95.transform(9.52, 47.14)
    df = pd.DataFrame({"E": [east, None], "N": [north, north]})
    with pytest.raises(ConfigurationError, match=r"no point of the columns 'E' and 'N' is in "
                       r"longitude and latitude degrees .*crs='EPSG:2056'"):
        reverse_job(df, options(), lon="E", lat="N")
    job = reverse_job(df, options(), lon="E", lat="N", crs="EPSG:2056")  # named: read as such
    assert isinstance(job.items[0], ReverseQuery)
    assert (round(job.items[0].lon, 5), round(job.items[0].lat, 5)) == (9.52, 47.14)
    # One point in degrees among them: the others are the rows' own mistakes, dead letters.
    mixed = reverse_job(pd.DataFrame({"E": [9.52, east], "N": [47.14, north]}), options(),
                        lon="E", lat="N")
    assert mixed.items[0] == ReverseQuery(9.52, 47.14)
    assert "out of range" in str(mixed.items[1])


def test_decimal_cells_from_a_database_are_numbers() -> None:
    df = pd.DataFrame({"x": [Decimal("9.52195"), Decimal("NaN"), Decimal("sNaN"), Decimal("Inf")],
                       "y": [Decimal("47.13974")] * 4})  # pd.read_sql of NUMERIC columns
    assert reverse_job(df, options(), lon="x", lat="y").items == [
        ReverseQuery(9.52195, 47.13974), "lon (x) is missing", "lon (x) is missing",
        "coordinates are not finite (inf, 47.13974)"]


def test_an_earlier_result_is_reverse_geocoded_again_without_its_old_columns() -> None:
    earlier = points(Point(9.52, 47.14), fix=["a"], lon=[1.0], lat=[2.0], geocode_status=["matched"],
                     geocode_label=["x"])
    assert list(ReverseJob(earlier, options()).frame.columns) == ["fix"]  # a forward result's


# -- the result frame -------------------------------------------------------------------------


def test_distance_known_answer_one_degree_of_longitude_on_the_equator() -> None:
    metres = geodesic_distance_m([0.0, 9.5, math.nan], [0.0, 47.0, 47.0], [1.0, 9.5, 9.5],
                                 [0.0, 47.0, 47.0])
    assert metres[0] == pytest.approx(6378137.0 * math.pi / 180, abs=1e-6)  # a * pi / 180
    assert metres[1] == 0.0 and math.isnan(metres[2])


def _frame(outcomes: list[object], geometries: list[object], **kw: object) -> gpd.GeoDataFrame:
    own = pd.DataFrame({"fix": list(range(len(outcomes)))}, index=[10 * (i + 1) for i in range(
        len(outcomes))])
    series = gpd.GeoSeries(geometries, crs="EPSG:4326")
    return reverse_frame(own, series, outcomes, **kw)  # type: ignore[arg-type]


def test_reverse_frame_columns_statuses_and_distance() -> None:
    east = Geod(ellps="WGS84").fwd(9.52195, 47.13974, 90.0, 100.0)[:2]  # 100 m east of the place
    place = Place(housenumber="38", street="Städtle", postcode="9490", locality="Vaduz",
                  country_code="LI")
    found = Match(9.52195, 47.13974, label="Städtle 38", provider="sim", precision="address",
                  score=0.9, place=place)
    coarse = Match(9.53, 47.14, label="Vaduz", provider="sim", precision="locality")
    out = _frame([found, coarse, Match(0.0, 0.0, label="null", provider="sim"),
                  NoMatch(provider="sim"), Failure("missing geometry", "InvalidInput", "sim")],
                 [Point(*east), Point(9.52, 47.14), Point(1.0, 1.0), Point(10.0, 47.0), None],
                 min_precision="street", full_results=True)
    assert list(out.index) == [10, 20, 30, 40, 50] and out.crs.to_epsg() == 4326
    assert list(out.geocode_status) == ["matched", "too_coarse", "failed", "no_match", "failed"]
    assert out.geocode_distance_m.iloc[0] == pytest.approx(100.0, abs=1e-6)
    assert out.geocode_distance_m.iloc[1] > 0 and out.geocode_distance_m.iloc[2:].isna().all()
    assert (out.geocode_lon.iloc[0], out.geocode_lat.iloc[0]) == (9.52195, 47.13974)
    assert out.geocode_reason.iloc[1] == "precision locality is coarser than street"
    assert out.geocode_reason.iloc[2] == "null island (0, 0)" and math.isnan(out.geocode_lon.iloc[2])
    assert out.geocode_street.iloc[0] == "Städtle" and out.geocode_housenumber.iloc[0] == "38"
    assert out.geometry.iloc[0] == Point(*east) and out.geometry.iloc[4] is None  # the input's
    assert "lon" not in out.columns and "lat" not in out.columns
    assert out.geocode_precision.dtype == PRECISION_DTYPE
    assert out.dtypes[["geocode_lon", "geocode_lat", "geocode_distance_m"]].tolist() == [
        np.dtype("float64")] * 3
    assert out.geocode_attempts.tolist() == [1, 1, 1, 1, 0]
