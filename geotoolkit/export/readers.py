"""Read a written result back: both GeoPackage layers, or the GeoParquet file, as one frame.
And read the points a reverse run starts from (:func:`read_points`)."""

from __future__ import annotations

import os
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pyogrio

from geotoolkit.errors import ConfigurationError, ExportError
from geotoolkit.export.checks import format_of
from geotoolkit.export.dtypes import result_dtypes

__all__ = ["read_points", "read_results"]


def read_results(path: str | os.PathLike[str]) -> gpd.GeoDataFrame:
    """A result written by :func:`~geotoolkit.export.write_results`, as one GeoDataFrame.

    A GeoPackage's rows come back in the order of the result written, its index the
    feature ids less one (the writer numbers the rows of a result with an unnamed
    index of whole numbers: a CSV's first row is feature 1 in either layer), its
    ``dead_letters`` edited or not (a corrected address is read as it now stands);
    when the two layers' ids overlap (each numbered from 1), the ``geocoded`` layer
    comes first, then the ``dead_letters``, on a fresh ``RangeIndex``. A GeoParquet
    file keeps its index and order. Result columns get
    their dtypes back (``geocode_precision`` categorical, ...), rows of the dead
    letters no coordinates and no geometry (those of a reverse result their input
    geometry).

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
    geocoded = pyogrio.read_dataframe(source, layer="geocoded", fid_as_index=True)
    read = pyogrio.read_dataframe(source, layer="dead_letters", fid_as_index=True)
    letters = pd.DataFrame(read)
    if not isinstance(read, gpd.GeoDataFrame):  # a forward result's dead letters have no point
        letters["geometry"] = None
    letters = letters.reindex(columns=list(dict.fromkeys([*geocoded.columns, *letters.columns])))
    both = pd.concat([pd.DataFrame(geocoded), letters])
    if both.index.is_unique:  # the feature ids number the rows (the index + 1): their order
        both = both.sort_index()
        both.index = pd.Index(both.index.to_numpy(dtype="int64") - 1)
    else:  # each layer numbered from 1 (a file written otherwise): one after the other
        both = both.reset_index(drop=True)
    return gpd.GeoDataFrame(both, geometry="geometry", crs=geocoded.crs or "EPSG:4326")


_PARQUET = (".parquet", ".geoparquet")
_READ_ERRORS = (OSError, ValueError, pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError)


def read_points(path: str | os.PathLike[str], layer: str | None = None) -> gpd.GeoDataFrame:
    """The features of a vector file (GeoPackage, GeoJSON, Shapefile, FlatGeobuf, ... as
    GDAL reads them) or a GeoParquet file, for a reverse run, in their own CRS.

    A file with several layers needs ``layer``, except a written result (layers
    ``geocoded`` and ``dead_letters``), which is read whole by :func:`read_results`.

    Raises
    ------
    ConfigurationError
        No such file, no such layer, several layers and no ``layer``.
    ExportError
        The file cannot be read.
    """
    source = Path(path)
    if not source.is_file():
        raise ConfigurationError(f"no such file: {source}")
    parquet = source.suffix.lower() in _PARQUET
    if parquet and layer is not None:
        raise ConfigurationError(f"{source} is GeoParquet, which has no layers: drop the layer")
    layers = [] if parquet else _layers(source)
    if layer is None and set(layers) == {"geocoded", "dead_letters"}:
        return read_results(source)
    if (layer is None and len(layers) > 1) or (layer is not None and layer not in layers):
        wrong = "" if layer is None else f" (not {layer!r})"
        raise ConfigurationError(f"{source} has the layers {', '.join(layers)}: name one with "
                                 f"--layer (layer= in Python){wrong}")
    try:
        if parquet:
            return gpd.read_parquet(source)
        return pyogrio.read_dataframe(source, layer=layer)
    except _READ_ERRORS as exc:
        raise ExportError(f"cannot read {source}: {exc}") from exc


def _layers(source: Path) -> list[str]:
    try:
        return [str(name) for name, _ in pyogrio.list_layers(source)]
    except _READ_ERRORS as exc:
        raise ExportError(f"cannot read {source}: {exc}") from exc
