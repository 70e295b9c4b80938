"""Reverse geocoding a frame: points in, the addresses found there out.

:class:`ReverseJob` is the reverse counterpart of
:class:`~geotoolkit.orchestration.job.FrameJob`, and goes the same way through: its
checks come first and open nothing (a frame without a CRS, a provider without a
reverse endpoint, the usage policies, columns the result would overwrite), then
:func:`~geotoolkit.orchestration.job.settle` runs the engine over one
:class:`~geotoolkit.results.ReverseQuery` per row, on the same gate, cache, pacing,
progress and fallback chain stages as forward geocoding, and
:func:`~geotoolkit.orchestration.reverse_frame.reverse_frame` builds the result.

The points are reprojected to EPSG:4326 with the frame's own CRS (and back again, to
catch a point the projection cannot hold), then read as ``lon, lat`` (shapely's
``x, y``) once, here. A row that is no usable point (missing, empty, not a Point,
out of range, (0, 0)) is a dead letter with its reason, never sent. A point is sent rounded
to ``decimals`` decimals of a degree (default :data:`~geotoolkit.results.REVERSE_DECIMALS`,
about 0.1 m), which is also its cache key: two fixes closer than that share one
request, and a rerun sends nothing already settled.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import numbers
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from pyproj import CRS
from pyproj.exceptions import CRSError, ProjError

from geotoolkit.engine import run_sync
from geotoolkit.errors import ConfigurationError
from geotoolkit.export import input_columns
from geotoolkit.export.dtypes import REVERSE_COLUMNS
from geotoolkit.orchestration.job import gate_backend, require_columns, require_name, settle
from geotoolkit.orchestration.options import GeocodeOptions
from geotoolkit.orchestration.reverse_frame import point_lonlat, reverse_frame
from geotoolkit.providers import PROVIDERS, can_reverse
from geotoolkit.providers.policies import check_usage_policy
from geotoolkit.results import REVERSE_DECIMALS, Outcome, Query, ReverseQuery, reverse_query
from geotoolkit.schema import FULL_RESULT_COLUMNS
from geotoolkit.validate import check_point, require_country

if TYPE_CHECKING:
    from geotoolkit.progress import ProgressSink

__all__ = ["MAX_DECIMALS", "ReverseJob", "reverse_job"]

#: The most decimals of a degree a point may be sent with (1e-10 degrees: about 0.01 mm).
MAX_DECIMALS = 10
_WGS84 = CRS.from_epsg(4326)
#: A point whose round trip through EPSG:4326 moves it by more than this share of its own
#: value (at least 1e-6 of a unit) is outside where its CRS can be reprojected.
_ROUND_TRIP_TOLERANCE = 1e-6


def reverse_job(frame: pd.DataFrame, options: GeocodeOptions, *, lon: str | None = None,
                lat: str | None = None, crs: object = None,
                decimals: int = REVERSE_DECIMALS, country: str | None = None) -> ReverseJob:
    """The checked reverse run a front end asked for: a GeoDataFrame's own geometry, or a
    plain frame's ``lon`` and ``lat`` columns (named, never guessed) in ``crs``
    (default EPSG:4326); ``country``: see :class:`ReverseJob`."""
    columns = lon is not None or lat is not None
    if isinstance(frame, gpd.GeoDataFrame) and (columns or crs is not None):
        raise ConfigurationError(
            "a GeoDataFrame is reverse geocoded from its own geometry and CRS: drop lon=, lat= "
            "and crs= (gdf.set_crs(...) when it has no CRS), or pass pd.DataFrame(gdf) to read "
            "lon/lat columns instead")
    if isinstance(frame, gpd.GeoDataFrame):
        return ReverseJob(frame, options, decimals=decimals, country=country)
    if lon is None or lat is None:
        raise ConfigurationError(
            "reverse geocoding needs points: a GeoDataFrame of Points, or the names of both "
            "coordinate columns of this DataFrame, e.g. lon='lon', lat='lat' (and crs= when "
            "they are not EPSG:4326 degrees)")
    return ReverseJob.from_columns(frame, options, lon=lon, lat=lat, crs=crs, decimals=decimals,
                                   country=country)


class ReverseJob:
    """A checked reverse-geocoding run over a GeoDataFrame of Points in any CRS.

    ``await run()``, then ``result(outcomes)`` (or ``run_sync()``); building it checks
    everything and opens nothing. :attr:`frame` holds the input's own columns (what
    the result keeps), :attr:`points` the input geometry in EPSG:4326, :attr:`items`
    one ReverseQuery (or the reason it cannot be sent) per row.

    Parameters
    ----------
    frame
        A GeoDataFrame with a CRS; its active geometry holds the points. An earlier
        result (forward or reverse) is accepted: its geocode columns are replaced.
    options
        The run's options; every provider must have a reverse endpoint.
    decimals
        Points are sent, and cached, rounded to this many decimals of a degree
        (default 6, about 0.1 m; 5 is about 1 m, 4 about 10 m).
    reasons
        Optional, one per row: a reason the row cannot be sent (``None``: it can),
        decided before the geometry was built (:meth:`from_columns`).
    country
        Optional, an ISO 3166-1 alpha-2 code: a point outside that country's boxes is a
        dead letter, never sent, and one whose (lat, lon) would fall inside says its
        coordinates look swapped (lat and lon columns read the wrong way round are the
        commonest slip with a table of fixes).

    Raises
    ------
    ConfigurationError
        No CRS (the message names ``set_crs``), a CRS with no way to lon/lat (a
        local engineering CRS, another planet's), no active geometry, a provider
        without reverse geocoding, a bad ``decimals`` or ``country``, duplicate column names, or
        columns of the frame the result would overwrite (without
        ``overwrite_columns=True``).
    """

    def __init__(self, frame: gpd.GeoDataFrame, options: GeocodeOptions, *,
                 decimals: int = REVERSE_DECIMALS,
                 reasons: Sequence[str | None] | None = None, country: str | None = None) -> None:
        _check_decimals(decimals)
        code = None if country is None else require_country(country)
        _check_providers(options)
        geometry = _geometry(frame)
        self.frame = _own_columns(frame, overwrite=options.overwrite_columns,
                                  full_results=options.full_results)
        for provider in options.providers:
            check_usage_policy(provider, rows=len(frame), gate_backend=gate_backend(options.gate),
                               cached=options.cache is not False, rate=options.rate_policy)
        if reasons is not None and len(reasons) != len(frame):
            raise ValueError(f"{len(reasons)} reasons for {len(frame)} rows")
        self.options, self.decimals = options, int(decimals)  # a numpy integer too
        self.points, moved = _to_lonlat(geometry)
        given = reasons if reasons is not None else [None] * len(frame)
        self.items: list[ReverseQuery | str] = [
            before or problem or _query(point, self.decimals, code)
            for point, before, problem in zip(self.points.array, given, moved, strict=True)]
        self.points = _nowhere_dropped(self.points, moved)

    @classmethod
    def from_columns(cls, frame: pd.DataFrame, options: GeocodeOptions, *, lon: str, lat: str,
                     crs: object = None, decimals: int = REVERSE_DECIMALS,
                     country: str | None = None) -> ReverseJob:
        """From a plain frame's ``lon`` and ``lat`` columns (longitudes and latitudes, or
        eastings and northings in ``crs``; ``None``: EPSG:4326 degrees, assumed): a cell
        that is not a number is a dead letter that says so; both columns are kept in the
        result. With no ``crs`` given, columns none of whose points is in degrees are
        refused (projected metres read as degrees would all be dead letters)."""
        require_name("lon", lon)
        require_name("lat", lat)
        require_columns(frame.columns, [lon, lat])
        if lon == lat:
            raise ConfigurationError(f"lon and lat name the same column {lon!r}")
        target = _crs("EPSG:4326" if crs is None else crs)
        if "geometry" in frame.columns and "geocode_status" not in frame.columns \
                and not options.overwrite_columns:
            raise ConfigurationError(
                "the frame already has its own 'geometry' column, which the result would "
                "replace: rename it, or pass overwrite_columns=True to replace it")
        xs, x_reasons = _numbers(frame[lon], "lon", lon)
        ys, y_reasons = _numbers(frame[lat], "lat", lat)
        if crs is None:
            _check_degrees(xs, ys, lon, lat)
        reasons = [a or b for a, b in zip(x_reasons, y_reasons, strict=True)]
        points = gpd.points_from_xy(xs, ys, crs=target)  # shapely: x = lon, y = lat
        points[np.array([r is not None for r in reasons], dtype=bool)] = None
        own = pd.DataFrame(frame).drop(columns=["geometry"], errors="ignore")
        located = gpd.GeoDataFrame(own, geometry=points, crs=target)
        return cls(located, options, decimals=decimals, reasons=reasons, country=country)

    async def run(self, progress: ProgressSink | None = None) -> list[Outcome]:
        """Settle every row (cached points are not sent)."""
        # settle() is annotated for addresses; it hands every item to the engine unchanged,
        # and the engine settles ReverseQuery items the same way (see the module docstring).
        return await settle(cast("list[Query | str]", self.items), self.options, progress)

    def result(self, outcomes: list[Outcome]) -> gpd.GeoDataFrame:
        """The EPSG:4326 GeoDataFrame for ``outcomes`` (see
        :func:`~geotoolkit.orchestration.reverse_frame.reverse_frame`)."""
        return reverse_frame(self.frame, self.points, outcomes,
                             min_precision=self.options.min_precision,
                             full_results=self.options.full_results)

    def run_sync(self, progress: ProgressSink | None = None) -> gpd.GeoDataFrame:
        """Run to the end from synchronous code (also inside Jupyter) and build the result."""
        outcomes = run_sync(lambda: self.run(progress))
        return self.result(outcomes)


# -- checks -----------------------------------------------------------------------------------


def _check_decimals(decimals: object) -> None:
    if isinstance(decimals, bool) or not isinstance(decimals, numbers.Integral) \
            or not 0 <= int(decimals) <= MAX_DECIMALS:
        raise ConfigurationError(f"decimals must be a whole number from 0 to {MAX_DECIMALS} "
                                 f"(6 is about 0.1 m), got {decimals!r}")


def _check_providers(options: GeocodeOptions) -> None:
    unable = [p.name for p in options.providers if not can_reverse(p)]
    if unable:
        able = sorted(name for name, cls in PROVIDERS.items() if getattr(cls, "supports_reverse", False))
        raise ConfigurationError(f"{', '.join(unable)} cannot reverse geocode (no reverse endpoint); "
                                 f"these can: {', '.join(able)}")


def _crs(crs: object) -> CRS:
    try:
        return CRS.from_user_input(crs)
    except CRSError as exc:
        raise ConfigurationError(f"crs: not a coordinate reference system: {crs!r}") from exc


def _geometry(frame: pd.DataFrame) -> gpd.GeoSeries:
    """The frame's active geometry; refused without a CRS (coordinates cannot be read then)."""
    if not isinstance(frame, gpd.GeoDataFrame):
        raise ConfigurationError("reverse geocoding needs a GeoDataFrame of Points (or lon and "
                                 f"lat columns), got {type(frame).__name__}")
    name = frame._geometry_column_name
    if name is None or name not in frame.columns:
        raise ConfigurationError("the GeoDataFrame has no active geometry column: choose the one "
                                 "with the points, gdf.set_geometry('column')")
    geometry = frame.geometry
    if geometry.crs is None:
        raise ConfigurationError(
            "the GeoDataFrame has no CRS, so its coordinates cannot be read as lon/lat: set the "
            "one they are in first, e.g. gdf.set_crs('EPSG:4326') for degrees or "
            "gdf.set_crs('EPSG:2056') for Swiss LV95 metres")
    return geometry


def _own_columns(frame: gpd.GeoDataFrame, *, overwrite: bool, full_results: bool) -> pd.DataFrame:
    """The input's own columns (what the result keeps), without its geometry."""
    duplicated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
    if duplicated:
        raise ConfigurationError(
            f"the frame has duplicate column names: {', '.join(map(repr, duplicated))}; "
            "give every column a distinct name first (df.columns = [...])")
    if "geocode_status" in frame.columns:  # an earlier result: its geocode columns are ours
        return input_columns(frame)
    own = pd.DataFrame(frame).drop(columns=[frame.geometry.name])
    added = {*REVERSE_COLUMNS, *(FULL_RESULT_COLUMNS if full_results else ()), "geometry"}
    theirs = [str(c) for c in own.columns if c in added]
    if theirs and not overwrite:
        raise ConfigurationError(
            f"the frame already has its own {', '.join(map(repr, theirs))} column(s), which the "
            "result would replace: rename them, or pass overwrite_columns=True "
            "(--overwrite-columns) to replace them")
    return own.drop(columns=theirs)


# -- the points -------------------------------------------------------------------------------


def _check_degrees(xs: np.ndarray, ys: np.ndarray, lon: str, lat: str) -> None:
    """Refuse columns read as degrees (no CRS given) none of whose points is in range,
    as eastings and northings in metres are: naming their CRS is the fix, not a dead
    letter per row.

    >>> _check_degrees(np.array([9.52, 2758019.0]), np.array([47.14, 1220165.0]), "x", "y")
    >>> _check_degrees(np.array([2758019.0]), np.array([1220165.0]), "x", "y")
    Traceback (most recent call last):
    ...
    geotoolkit.errors.ConfigurationError: no point of the columns 'x' and 'y' is in longitude
    and latitude degrees (the first: x=2758019.0, y=1220165.0): they look projected; ...
    """
    known = np.isfinite(xs) & np.isfinite(ys)
    if not known.any():
        return
    degrees = (np.abs(xs) <= 180.0) & (np.abs(ys) <= 90.0)
    if degrees[known].any():
        return
    first = int(np.flatnonzero(known)[0])
    raise ConfigurationError(
        f"no point of the columns {lon!r} and {lat!r} is in longitude and latitude degrees "
        f"(the first: {lon}={float(xs[first])!r}, {lat}={float(ys[first])!r}): they look projected; name "
        "their CRS, e.g. crs='EPSG:2056' (--crs EPSG:2056) for Swiss LV95 metres")


def _numbers(cells: pd.Series, what: str, name: str) -> tuple[np.ndarray, list[str | None]]:
    """The cells as floats (NaN where missing or unusable), and why each unusable one is."""
    values = np.full(len(cells), math.nan)
    reasons: list[str | None] = [None] * len(cells)
    for i, cell in enumerate(cells.tolist()):
        value, reasons[i] = _number(cell, what, name)
        values[i] = value
    return values, reasons


def _number(cell: Any, what: str, name: str) -> tuple[float, str | None]:
    """One cell as a float, or NaN and why it is none (missing, not a number)."""
    missing = f"{what} ({name}) is missing"
    if isinstance(cell, str):
        if not cell.strip():
            return math.nan, missing
        try:
            value = float(cell)
        except ValueError:
            return math.nan, f"{what} ({name}) is not a number: {cell.strip()[:40]!r}" + \
                _decimal_comma(cell.strip())
    elif isinstance(cell, decimal.Decimal):  # a NUMERIC column read from a database
        value = math.nan if cell.is_nan() else float(cell)
    elif isinstance(cell, bool) or not isinstance(cell, numbers.Real):
        return math.nan, missing if _missing(cell) else \
            f"{what} ({name}) is not a number ({type(cell).__name__})"
    else:
        try:
            value = float(cell)
        except OverflowError:
            return math.nan, f"{what} ({name}) is too large for a float"
    return value, missing if math.isnan(value) else None


#: A number written with a decimal comma, as spreadsheets in much of Europe save a CSV.
_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+")


def _decimal_comma(text: str) -> str:
    """A hint for a number with a decimal comma (``'9,52'``): it is not read as 9.52, since
    a comma may as well separate thousands; the file is to be saved with decimal points.

    >>> _decimal_comma("9,52"), _decimal_comma("abc")
    (' (a decimal comma? write the number with a point: 9.52)', '')
    """
    if _DECIMAL_COMMA.fullmatch(text) is None:
        return ""
    return f" (a decimal comma? write the number with a point: {text.replace(',', '.')})"


def _missing(cell: object) -> bool:
    try:
        return bool(pd.isna(cell))
    except (TypeError, ValueError):  # a list or an array in a cell
        return False


def _to_lonlat(geometry: gpd.GeoSeries) -> tuple[gpd.GeoSeries, list[str | None]]:
    """The geometry in EPSG:4326, and for each row whether its point was lost on the way."""
    crs = geometry.crs
    if crs.equals(_WGS84, ignore_axis_order=True):  # geopandas keeps x = lon whatever the axes
        return geometry.set_crs("EPSG:4326", allow_override=True), [None] * len(geometry)
    name = crs.to_string()
    try:
        lonlat = geometry.to_crs("EPSG:4326")
        back = lonlat.to_crs(crs)
    except (CRSError, ProjError) as exc:  # a local engineering CRS, another planet's...
        raise ConfigurationError(f"the points cannot be reprojected from {name} to EPSG:4326 "
                                 f"lon/lat ({exc}): give the CRS they are really in"
                                 ) from exc
    before, after = point_lonlat(geometry.array), point_lonlat(back.array)
    problems: list[str | None] = []
    for x0, y0, x1, y1 in zip(*before, *after, strict=True):
        # only a finite point can be lost (inf - inf would warn, and says nothing)
        lost = math.isfinite(x0) and math.isfinite(y0) and not all(
            abs(a - b) <= _ROUND_TRIP_TOLERANCE * max(1.0, abs(a)) for a, b in ((x0, x1), (y0, y1)))
        problems.append(f"({x0}, {y0}) cannot be reprojected from {name} to lon/lat "
                        "(outside the area that CRS covers?)" if lost else None)
    return lonlat, problems


def _nowhere_dropped(points: gpd.GeoSeries, moved: list[str | None]) -> gpd.GeoSeries:
    """The points to map: one its CRS could not carry to lon/lat (``moved``: reprojected,
    it came out as a made-up place such as (-180, 90)) or with an infinite coordinate is
    no place, so its row, a dead letter saying why, gets no geometry (in a GeoPackage its
    layer's extent would hold inf)."""
    lon, lat = point_lonlat(points.array)
    nowhere = np.array([m is not None for m in moved], dtype=bool) | np.isinf(lon) | np.isinf(lat)
    if not nowhere.any():
        return points
    placed = points.copy()
    placed[nowhere] = None
    return placed


def _query(point: object, decimals: int, country: str | None = None) -> ReverseQuery | str:
    """The ReverseQuery for one geometry (EPSG:4326), or the reason it cannot be sent
    (with ``country``, a code: outside it, or swapped)."""
    if point is None or (isinstance(point, float) and math.isnan(point)):
        return "missing geometry"
    assert isinstance(point, shapely.Geometry)
    if point.is_empty:
        return "empty geometry"
    if not isinstance(point, shapely.Point):
        return f"not a point ({point.geom_type}): reverse geocoding takes Points"
    found = reverse_query(point.x, point.y)  # shapely: x = lon, y = lat
    if isinstance(found, str):
        return found
    outside = None if country is None else check_point(found.lon, found.lat, country)
    return outside or dataclasses.replace(found, decimals=decimals)
