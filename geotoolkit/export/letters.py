"""Which rows of a result are dead letters, and with which columns."""

from __future__ import annotations

import geopandas as gpd
import pandas as pd

from geotoolkit.schema import DEAD_LETTER_COLUMNS, result_columns

__all__ = ["dead_letters", "input_columns"]


def input_columns(df: pd.DataFrame) -> pd.DataFrame:
    """The input columns of ``df``, without earlier geocode columns or geometry."""
    drop = [*result_columns(df.columns), *(["geometry"] if "geometry" in df.columns else [])]
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
    """
    if "geocode_status" not in result.columns:
        raise KeyError("no geocode_status column: this frame is not a geocoding result; "
                       "call df.geocode.run() first")
    rows = result[result["geocode_status"] != "matched"]
    base = [c for c in input_columns(result).columns if c not in DEAD_LETTER_COLUMNS]
    kept = [c for c in DEAD_LETTER_COLUMNS if c in rows.columns]
    rest = [c for c in result_columns(rows.columns) if c not in kept and c not in ("lon", "lat")]
    return pd.DataFrame(rows[base + kept + rest])
