"""Export results and dead letters to GeoPackage (via pyogrio)."""

from __future__ import annotations

import os
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pyogrio

from geotoolkit.errors import ExportError
from geotoolkit.frame import dead_letters

__all__ = ["write_geopackage"]


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Object columns as text, so GDAL gets one field type per column."""
    out = pd.DataFrame(frame).copy()
    for name in out.columns:
        if name != "geometry" and out[name].dtype == object:
            out[name] = out[name].map(lambda v: None if v is None or v != v else str(v))
    return out


def write_geopackage(result: gpd.GeoDataFrame, path: str | os.PathLike[str]) -> tuple[int, int]:
    """Write matched rows to layer ``geocoded`` and the rest to ``dead_letters``.

    The file is written next to ``path`` and moved into place, so an interrupted
    export never leaves a half-written GeoPackage. Returns the two row counts.
    """
    target = Path(path)
    partial = target.with_name(f".{target.stem}.partial{target.suffix or '.gpkg'}")
    matched = result[result["geocode_status"] == "matched"]
    letters = dead_letters(result)
    try:
        partial.unlink(missing_ok=True)
        geocoded = gpd.GeoDataFrame(_plain(matched), geometry="geometry", crs=result.crs)
        geocoded.to_file(partial, layer="geocoded", driver="GPKG", engine="pyogrio")
        pyogrio.write_dataframe(_plain(letters), partial, layer="dead_letters", driver="GPKG",
                                append=False)
        os.replace(partial, target)
    except (OSError, pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError,
            ValueError) as exc:
        partial.unlink(missing_ok=True)
        raise ExportError(f"cannot write GeoPackage {target}: {exc}") from exc
    return len(matched), len(letters)
