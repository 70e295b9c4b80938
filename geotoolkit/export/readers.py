"""Read a written result back: both GeoPackage layers, or the GeoParquet file, as one frame."""

from __future__ import annotations

import os
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pyogrio

from geotoolkit.errors import ConfigurationError, ExportError
from geotoolkit.export.checks import format_of
from geotoolkit.export.dtypes import result_dtypes

__all__ = ["read_results"]


def read_results(path: str | os.PathLike[str]) -> gpd.GeoDataFrame:
    """A result written by :func:`~geotoolkit.export.write_results`, as one GeoDataFrame.

    A GeoPackage's ``geocoded`` layer comes first, then its ``dead_letters`` (edited
    or not: a corrected address is read as it now stands), on a fresh
    ``RangeIndex``; a GeoParquet file keeps its index and order. Result columns get
    their dtypes back (``geocode_precision`` categorical, ...), rows of the dead
    letters no coordinates and no geometry.

    Raises
    ------
    ConfigurationError
        The file does not exist, or is not a result (no ``geocode_status``).
    ExportError
        The file cannot be read.
    """
    source = Path(path)
    if not source.is_file():
        raise ConfigurationError(f"no such file: {source}")
    geopackage = format_of(source) == "GeoPackage"
    try:
        frame = _geopackage(source) if geopackage else gpd.read_parquet(source)
    except (OSError, ValueError, pyogrio.errors.DataSourceError,
            pyogrio.errors.DataLayerError) as exc:
        raise ExportError(f"cannot read {source}: {exc}") from exc
    if "geocode_status" not in frame.columns:
        raise ConfigurationError(f"{source} is not a geocoding result (no geocode_status column)")
    typed = result_dtypes(pd.DataFrame(frame.drop(columns=frame.geometry.name)))
    return gpd.GeoDataFrame(typed, geometry=frame.geometry.to_numpy(), crs="EPSG:4326")


def _geopackage(source: Path) -> gpd.GeoDataFrame:
    layers = {name for name, _ in pyogrio.list_layers(source)}
    if "geocoded" not in layers or "dead_letters" not in layers:
        raise ExportError(f"{source} has no geocoded and dead_letters layers: not a result")
    geocoded = pyogrio.read_dataframe(source, layer="geocoded")
    letters = pd.DataFrame(pyogrio.read_dataframe(source, layer="dead_letters", read_geometry=False))
    letters = letters.reindex(columns=list(dict.fromkeys([*geocoded.columns, *letters.columns])))
    letters["geometry"] = None
    both = pd.concat([pd.DataFrame(geocoded), letters], ignore_index=True)
    return gpd.GeoDataFrame(both, geometry="geometry", crs=geocoded.crs or "EPSG:4326")
