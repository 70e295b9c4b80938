"""What an export would refuse, checked before a batch is sent (not after it ran for hours)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Hashable, Iterable
from pathlib import Path

import pandas as pd

from geotoolkit.errors import ConfigurationError
from geotoolkit.export.dtypes import REVERSE_COLUMNS
from geotoolkit.schema import GEOCODE_COLUMNS, result_columns
from geotoolkit.urls import install_extra

__all__ = ["FORMATS", "GEOPACKAGE_MAX_FIELDS", "PYARROW_MISSING", "case_clash", "check_exportable",
           "fid_refusal", "format_of", "width_refusal"]

#: File suffixes the writers know, and the format each selects.
FORMATS = {".gpkg": "GeoPackage", ".parquet": "GeoParquet", ".geoparquet": "GeoParquet"}

#: What writing GeoParquet without pyarrow (the ``parquet`` extra) says.
PYARROW_MISSING = f"GeoParquet needs pyarrow, which is not installed here: {install_extra('parquet')}"


def format_of(path: str | os.PathLike[str]) -> str:
    """The format a file name selects; ``ConfigurationError`` for an unknown suffix."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ConfigurationError(
            f"cannot tell the output format of {os.fspath(path)!r}: use a file name ending "
            f"in {', '.join(FORMATS)}")
    return FORMATS[suffix]


def _result_columns(columns: Iterable[Hashable], *, reverse: bool = False) -> list[Hashable]:
    """The columns of a result built from a frame with ``columns``."""
    columns = list(columns)
    if reverse:  # the frame's own columns: the reverse job has dropped earlier results
        added: tuple[str, ...] = REVERSE_COLUMNS
        ours: set[Hashable] = {*REVERSE_COLUMNS, "geometry"}
    else:
        added, ours = GEOCODE_COLUMNS, {*result_columns(columns), *GEOCODE_COLUMNS, "geometry"}
    return [c for c in columns if c not in ours] + [*added, "geometry"]


def check_exportable(frame: pd.DataFrame, path: str | os.PathLike[str], *,
                     reverse: bool = False) -> None:
    """Refuse, before any request, a frame whose result ``path`` could not hold.

    The file's directory must exist and take a new file (a file is made there and
    removed), and the file must not be a directory; GeoParquet needs pyarrow. Column
    names must be non-empty text, distinct even ignoring case (GeoPackage is
    SQLite: ``Name`` and ``name`` are one column), at most
    :data:`GEOPACKAGE_MAX_FIELDS` of them in a GeoPackage, and a ``fid`` column (in any case)
    must hold unique whole numbers from 0 (GeoPackage uses it as the feature id). With
    ``reverse``, ``frame`` holds the input columns of a reverse run
    (``ReverseJob.frame``), whose result adds
    :data:`~geotoolkit.export.dtypes.REVERSE_COLUMNS`.

    Examples
    --------
    >>> check_exportable(pd.DataFrame({"address": [], "Address": []}), "out.gpkg")
    Traceback (most recent call last):
    ...
    geotoolkit.errors.ConfigurationError: out.gpkg cannot hold columns that differ only in \
case: 'address' and 'Address'; rename one of them
    """
    fmt = format_of(path)
    name = os.fspath(path)
    _check_place(Path(path))
    if fmt == "GeoParquet":
        _require_pyarrow()
    columns = _result_columns(frame.columns, reverse=reverse)
    bad = [c for c in columns if not isinstance(c, str) or not c.strip()]
    if bad:
        raise ConfigurationError(
            f"{name} needs column names that are non-empty text, got {bad[0]!r}; "
            "rename it (df.columns = [...])")
    clash = case_clash([str(c) for c in columns])
    if clash is not None:
        raise ConfigurationError(f"{name} {clash}")
    wide = width_refusal(map(str, columns)) if fmt == "GeoPackage" else None
    if wide is not None:
        raise ConfigurationError(f"{name} {wide}")
    if fmt == "GeoPackage":
        for fid in [c for c in frame.columns if isinstance(c, str) and c.casefold() == "fid"]:
            refusal = fid_refusal(frame[fid], fid)
            if refusal is not None:
                raise ConfigurationError(f"{name}: {refusal}")


def case_clash(columns: Iterable[str]) -> str | None:
    """What a GeoPackage (SQLite: names ignore case) says of the first two of ``columns``
    that differ only in case; None when there are none."""
    seen: dict[str, str] = {}
    for column in columns:
        other = seen.setdefault(column.casefold(), column)
        if other != column:
            return (f"cannot hold columns that differ only in case: {other!r} and {column!r}; "
                    "rename one of them")
    return None


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(PYARROW_MISSING) from exc


def _check_place(path: Path) -> None:
    """Refuse a file the writer could not put in place: in a missing directory, over one, or
    in a directory that takes no new file (read-only: the writer's file goes next to the
    target first). Tried with a file of its own, removed at once: permission bits do not
    tell (root, a read-only mount, an immutable folder)."""
    if not path.parent.is_dir():
        raise ConfigurationError(f"cannot write {path}: there is no directory {path.parent}; "
                                 "create it first")
    if path.is_dir():
        raise ConfigurationError(f"cannot write {path}: it is a directory; name a file")
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.stem}.",
                                         suffix=".probe"):
            pass
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write {path}: the directory {path.parent} takes no new file "
            f"({exc.strerror or exc}); make it writable, or write somewhere else") from exc


#: The columns a GeoPackage layer holds besides its feature id and geometry: SQLite's
#: default limit of 2000 columns in a table, which GDAL's own build keeps, less one more
#: that GDAL takes when the feature ids come from a column (as the writer gives them).
GEOPACKAGE_MAX_FIELDS = 1997


def width_refusal(columns: Iterable[str]) -> str | None:
    """Why a GeoPackage layer cannot hold ``columns`` (more fields than SQLite's limit,
    ``geometry`` and a ``fid`` apart); None when it can."""
    fields = [c for c in columns if c != "geometry" and c.casefold() != "fid"]
    if len(fields) <= GEOPACKAGE_MAX_FIELDS:
        return None
    return (f"cannot hold {len(fields)} columns: a GeoPackage layer holds at most "
            f"{GEOPACKAGE_MAX_FIELDS} besides its feature id and geometry; keep fewer, or write "
            "GeoParquet (a .parquet file)")


def fid_refusal(fid: pd.Series, column: str) -> str | None:
    """Why ``fid`` (the values of the input's ``column`` named ``fid`` in any case), which
    GDAL takes as a GeoPackage's feature ids, cannot be them: they must be unique whole
    numbers from 0 (GDAL would cut ``1.5`` to 1, and give ``-1``, its "no id", a new one);
    None when they can."""
    values = pd.to_numeric(fid, errors="coerce")
    whole = values.notna().all() and bool((values == values.round()).all())
    if whole and values.is_unique and not bool((values < 0).any()):
        return None
    return (f"a {column!r} column is GeoPackage's feature id and must hold unique whole numbers "
            f"from 0; rename it, e.g. to 'source_fid' (in the CSV's header, or "
            f"df.rename(columns={{{column!r}: 'source_fid'}}))")
