"""Outcomes to (Geo)DataFrames: validated WGS84 Points built explicitly from (lon, lat)."""

from __future__ import annotations

from collections.abc import Sequence

import geopandas as gpd
import numpy as np
import pandas as pd

from geotoolkit.results import Match, Outcome
from geotoolkit.validate import check_lonlat

__all__ = ["GEOCODE_COLUMNS", "dead_letters", "outcomes_frame"]

#: Columns added to the input frame.
GEOCODE_COLUMNS = ("lon", "lat", "geocode_status", "geocode_label", "geocode_provider",
                   "geocode_reason", "geocode_attempts")


def _row(outcome: Outcome) -> tuple[float, float, str, str, str, str | None, int]:
    if isinstance(outcome, Match):
        problem = check_lonlat(outcome.lon, outcome.lat)
        if problem is None:
            return (outcome.lon, outcome.lat, "matched", outcome.label, outcome.provider,
                    None, outcome.attempts)
        return (np.nan, np.nan, "failed", outcome.label, outcome.provider,
                f"invalid coordinates: {problem}", outcome.attempts)
    return (np.nan, np.nan, outcome.status, "", outcome.provider, outcome.reason,
            outcome.attempts)


def outcomes_frame(df: pd.DataFrame, outcomes: Sequence[Outcome]) -> gpd.GeoDataFrame:
    """A copy of ``df`` with the geocode columns and Point geometry in EPSG:4326.

    Rows that did not match (or whose coordinates fail validation) keep an empty
    geometry and say why in ``geocode_reason``.
    """
    if len(outcomes) != len(df):
        raise ValueError(f"{len(outcomes)} outcomes for {len(df)} rows")
    columns = list(zip(*map(_row, outcomes), strict=True)) if outcomes else [()] * 7
    out = pd.DataFrame(
        {name: list(values) for name, values in zip(GEOCODE_COLUMNS, columns, strict=True)},
        index=df.index)
    out["lon"] = out["lon"].astype("float64")
    out["lat"] = out["lat"].astype("float64")
    out["geocode_attempts"] = out["geocode_attempts"].astype("int64")
    base = pd.DataFrame(df).drop(columns=[c for c in GEOCODE_COLUMNS if c in df.columns])
    if isinstance(df, gpd.GeoDataFrame) and df.geometry.name in base.columns:
        base = base.drop(columns=[df.geometry.name])
    merged = pd.concat([base, out], axis=1)
    points = gpd.points_from_xy(out["lon"], out["lat"], crs="EPSG:4326")
    geometry = gpd.GeoSeries(points, index=df.index, crs="EPSG:4326")
    geometry[out["geocode_status"] != "matched"] = None
    return gpd.GeoDataFrame(merged, geometry=geometry, crs="EPSG:4326")


def dead_letters(result: pd.DataFrame) -> pd.DataFrame:
    """The rows that did not match, with reasons and attempt counts, for review."""
    rows = result[result["geocode_status"] != "matched"]
    frame = pd.DataFrame(rows.drop(columns=["geometry", "lon", "lat"], errors="ignore"))
    return frame
