"""Which rows of a result are dead letters, and with which columns."""

from __future__ import annotations

import geopandas as gpd
import pandas as pd

from geotoolkit.export.dtypes import REVERSE_POINT_COLUMNS, is_reverse_result
from geotoolkit.schema import DEAD_LETTER_COLUMNS, result_columns

__all__ = ["added_columns", "dead_letters", "input_columns"]


def added_columns(df: pd.DataFrame) -> list[object]:
    """The columns of ``df`` that geotoolkit added to a result (not the input's own).

    A reverse result adds no ``lon``/``lat`` (its geometry is the input point), so
    there those two, when present, are the input's own.
    """
    ours = [*result_columns(df.columns), *(c for c in df.columns if c in REVERSE_POINT_COLUMNS)]
    if is_reverse_result(df):
        ours = [c for c in ours if c not in ("lon", "lat")]
    return ours


def input_columns(df: pd.DataFrame) -> pd.DataFrame:
    """The input columns of ``df``, without earlier geocode columns or geometry."""
    drop = [*added_columns(df), *(["geometry"] if "geometry" in df.columns else [])]
    if isinstance(df, gpd.GeoDataFrame) and df._geometry_column_name in df.columns:
        drop.append(df._geometry_column_name)
    return pd.DataFrame(df).drop(columns=list(dict.fromkeys(drop)))


def dead_letters(result: pd.DataFrame) -> pd.DataFrame:
    """The rows that did not match (too coarse, no match, or flagged), for review.

    A plain DataFrame with the input columns, then ``geocode_status``,
    ``geocode_reason``, ``geocode_attempts``, ``geocode_provider``,
    ``geocode_label``, ``geocode_precision`` and ``geocode_score`` (with
    ``min_precision``: the too-coarse point in ``geocode_coarse_lon``/``_lat``; after a
    ``retry()``: ``geocode_fixed``; with ``full_results``: the place columns); the
    index of ``result`` is kept, so corrected rows can be handed to ``retry()``.

    For a reverse result (``gdf.geocode.reverse()``) a GeoDataFrame: each row keeps
    its input geometry, so the review still shows where the fix was (and a
    too-coarse row its ``geocode_lon``/``geocode_lat``/``geocode_distance_m``).
    """
    if "geocode_status" not in result.columns:
        raise KeyError("no geocode_status column: this frame is not a geocoding result; "
                       "call df.geocode.run() first")
    rows = result[result["geocode_status"] != "matched"]
    base = [c for c in input_columns(result).columns if c not in DEAD_LETTER_COLUMNS]
    kept = [c for c in DEAD_LETTER_COLUMNS if c in rows.columns]
    rest = [c for c in added_columns(rows) if c not in kept and c not in ("lon", "lat")]
    if is_reverse_result(result) and isinstance(result, gpd.GeoDataFrame):
        name = result.geometry.name
        return gpd.GeoDataFrame(rows[[*base, *kept, *rest, name]], geometry=name, crs=result.crs)
    return pd.DataFrame(rows[base + kept + rest])
