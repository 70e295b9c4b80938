"""Reverse outcomes to a GeoDataFrame: the input point stays the geometry, the place found
goes into its own columns, with its geodesic distance from the fix.

The result of ``gdf.geocode.reverse()``, one row per input row (same index, input
columns first), in EPSG:4326:

- ``geometry``: the input geometry, reprojected (the frame still maps where the fixes
  were; a dead letter keeps its missing, empty or non-point geometry, and a point that
  is nowhere in lon/lat, infinite or outside what its CRS covers, has none);
- ``geocode_status`` (``matched``, ``too_coarse`` with ``min_precision``,
  ``no_match``, ``failed``), ``geocode_precision`` (the ordered categorical of
  forward results), ``geocode_score``, ``geocode_label``, ``geocode_provider``,
  ``geocode_reason`` (why a row is a dead letter), ``geocode_attempts``;
- ``geocode_lon``, ``geocode_lat``: the point of the place the provider returned;
  ``geocode_distance_m``: the geodesic distance on the WGS84 ellipsoid from the input
  point to it, in metres (so an answer 3 km away shows). Set for matched and
  too-coarse rows, NaN elsewhere (a returned point that fails validation, e.g.
  (0, 0), makes the row ``failed`` and is not kept);
- with ``full_results=True``, :data:`~geotoolkit.schema.FULL_RESULT_COLUMNS` (the
  place id and address components).

There are no ``lon``/``lat`` columns: in a forward result they are the point found
and the geometry; here the geometry is the input, so the place found is named apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from pyproj import Geod

from geotoolkit.export.dtypes import REVERSE_COLUMNS, result_dtypes
from geotoolkit.orchestration.frame import OutcomeColumns
from geotoolkit.results import Outcome
from geotoolkit.validate import check_point

__all__ = ["geodesic_distance_m", "point_lonlat", "reverse_frame"]

_WGS84 = Geod(ellps="WGS84")


def geodesic_distance_m(lon1: Any, lat1: Any, lon2: Any, lat2: Any) -> np.ndarray:
    """Metres between ``(lon1, lat1)`` and ``(lon2, lat2)`` on the WGS84 ellipsoid (arrays;
    NaN where a coordinate is missing).

    >>> float(geodesic_distance_m([9.5], [47.0], [9.5], [47.0 + 1 / 60])[0].round(1))  # 1'
    1852.9
    """
    arrays = [np.asarray(v, dtype="float64") for v in (lon1, lat1, lon2, lat2)]
    out = np.full(arrays[0].shape, math.nan)
    known = np.logical_and.reduce([np.isfinite(v) for v in arrays])
    if known.any():
        a, b, c, d = (v[known] for v in arrays)
        _, _, metres = _WGS84.inv(a, b, c, d)
        out[known] = metres
    return out


def reverse_frame(own: pd.DataFrame, points: gpd.GeoSeries, outcomes: Sequence[Outcome], *,
                  min_precision: str | None = None, full_results: bool = False
                  ) -> gpd.GeoDataFrame:
    """The result of a reverse run (see the module docstring).

    ``own`` holds the input's own columns, ``points`` its geometry in EPSG:4326 (same
    rows), ``outcomes`` one per row.
    """
    n = len(own)
    if len(outcomes) != n or len(points) != n:
        raise ValueError(f"{len(outcomes)} outcomes and {len(points)} points for {n} rows")
    columns = _Columns(n, min_precision=min_precision, full_results=full_results)
    for i, outcome in enumerate(outcomes):
        columns.fill(i, outcome)
    added = columns.frame()
    lon, lat = point_lonlat(points.array)
    added["geocode_distance_m"] = geodesic_distance_m(lon, lat, added["geocode_lon"],
                                                      added["geocode_lat"])
    merged = pd.concat([own.reset_index(drop=True), added], axis=1)
    merged.index = own.index
    return gpd.GeoDataFrame(merged, geometry=points.array, crs="EPSG:4326")


def point_lonlat(geometries: Any) -> tuple[np.ndarray, np.ndarray]:
    """``lon`` and ``lat`` of each non-empty Point (shapely: x = lon, y = lat); NaN for any
    other geometry, an empty or a missing one."""
    shapes = np.asarray(geometries, dtype=object)
    lon, lat = np.full(len(shapes), math.nan), np.full(len(shapes), math.nan)
    usable = (shapely.get_type_id(shapes) == 0) & ~shapely.is_empty(shapes)
    if usable.any():
        lon[usable], lat[usable] = shapely.get_x(shapes[usable]), shapely.get_y(shapes[usable])
    return lon, lat


class _Columns(OutcomeColumns):
    """The geocode columns of a reverse result, filled row by row."""

    def __init__(self, n: int, *, min_precision: str | None, full_results: bool) -> None:
        super().__init__(REVERSE_COLUMNS, n, min_precision=min_precision,
                         full_results=full_results)

    def fill(self, i: int, outcome: Outcome) -> None:
        match = self.answered(i, outcome)
        if match is None:
            return
        problem = check_point(match.lon, match.lat)
        if problem is not None:  # flagged: a dead letter, its point kept nowhere
            self.flag(i, "failed", problem)
            return
        self.values["geocode_lon"][i], self.values["geocode_lat"][i] = match.lon, match.lat
        self.coarse(i, match)

    def frame(self) -> pd.DataFrame:
        return result_dtypes(pd.DataFrame({name: pd.Series(values, dtype=object)
                                           for name, values in self.values.items()}))
