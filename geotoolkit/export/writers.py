"""Export results and dead letters: GeoPackage (via pyogrio) or GeoParquet (via pyarrow).

Both writers work on the GeoDataFrame of ``df.geocode.run()``, write next to the
target and move the file into place, so an interrupted export never leaves a
half-written file, and return ``(geocoded, dead_letters)`` row counts. Each writer has a
file of its own there (two runs on one output at once: the target is one run's whole file).
:func:`write_results` picks the format from the file name.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pyogrio

from geotoolkit.errors import ExportError
from geotoolkit.export.checks import (
    PYARROW_MISSING,
    case_clash,
    fid_refusal,
    format_of,
    width_refusal,
)
from geotoolkit.export.letters import dead_letters

__all__ = ["write_geopackage", "write_geoparquet", "write_results"]


def _plain(frame: pd.DataFrame, *, gdal: bool = True) -> pd.DataFrame:
    """Object columns (and, for GDAL, categorical and string ones) as text: one field type
    per column. GDAL ends a text at a NUL character (``"Va\\x00duz"`` was written ``"Va"``,
    the rest of the cell lost): for it a NUL is written as the escape ``\\x00``. For
    GeoParquet, an object column of booleans, or of whole numbers, with gaps (a CSV's yes/no
    column with blanks) keeps its values, as a nullable ``boolean`` or ``Int64`` column."""
    out = pd.DataFrame(frame).copy()
    for name in out.columns:
        dtype = out[name].dtype
        text = pd.api.types.is_object_dtype(dtype) or (gdal and (
            isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_string_dtype(dtype)))
        if name == "geometry" or not text:
            continue
        kind = None if gdal else _one_kind(out[name])
        out[name] = out[name].astype(object).map(_gdal_text if gdal else _text) if kind is None \
            else out[name].astype(kind)
    return out


def _one_kind(column: pd.Series) -> str | None:
    """``"boolean"`` or ``"Int64"`` when every value of an object column that is not missing
    is a bool, or a whole number that fits 64 bits; ``None`` otherwise (written as text)."""
    kind = pd.api.types.infer_dtype(column, skipna=True)
    if kind == "boolean":
        return "boolean"
    if kind == "integer" and all(-2**63 <= v < 2**63 for v in column.dropna()):
        return "Int64"
    return None


def _missing(value: object) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or an array in a cell: not missing
        return False


def _text(value: object) -> str | None:
    """A cell as text a file can hold: text that is not valid Unicode (a lone surrogate
    from a badly decoded input) keeps its code points as ``\\udcfc`` escapes."""
    if value is None or (not isinstance(value, str) and _missing(value)):
        return None
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def _gdal_text(value: object) -> str | None:
    """:func:`_text`, with a NUL character as the escape ``\\x00`` (GDAL would end the text
    there)."""
    text = _text(value)
    return None if text is None else text.replace("\x00", "\\x00")


#: GDAL names a GeoPackage's geometry column ``geom``, which an input column of that name
#: (in any case: SQLite's names are case-insensitive) would collide with after the run;
#: named as in the frame, the result's own ``geometry`` already keeps other columns apart.
_LAYER_OPTIONS = {"GEOMETRY_NAME": "geometry"}


def _feature_ids(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its ``fid`` column (any case) as whole numbers: GDAL takes such a
    column as the feature id, and refuses it as text (a CSV's ``"1"``) or float (``1.0``)."""
    for name in [c for c in frame.columns if isinstance(c, str) and c.casefold() == "fid"]:
        frame[name] = pd.to_numeric(frame[name]).astype("int64")
    return frame


def _index_as_columns(frame: pd.DataFrame, index: pd.Index) -> pd.DataFrame:
    """``frame`` (rows of a result whose index is ``index``) with an index that carries ids
    (named, not integers, or integers that cannot number the rows: repeated, as two
    concatenated CSVs give, negative, or huge) as its first columns, as
    GeoDataFrame.to_file does: a layer has no index of its own. A level named
    as a column already is (in any case: GeoPackage is SQLite) is written as
    ``<name>_index``, not refused after the whole run."""
    if _row_numbers(index):
        return frame
    taken = {str(c).casefold() for c in frame.columns}
    names = []
    for position, name in enumerate(frame.index.names):
        label = "index" if name is None and frame.index.nlevels == 1 else (
            f"level_{position}" if name is None else str(name))
        while label.casefold() in taken:
            label = f"{label}_index"
        taken.add(label.casefold())
        names.append(label)
    return frame.rename_axis(names).reset_index()


def _numbered(result: pd.DataFrame) -> bool:
    """Whether a GeoPackage's feature ids carry the result's index: an unnamed index of
    distinct whole numbers from 0 (a CSV's rows, a filtered frame's labels), which is
    written nowhere else, and no ``fid`` column of the input's own."""
    if any(isinstance(c, str) and c.casefold() == "fid" for c in result.columns):
        return False
    return _row_numbers(result.index)


def _row_numbers(index: pd.Index) -> bool:
    """Whether ``index`` is unnamed distinct whole numbers that can be feature ids."""
    if list(index.names) != [None] or not pd.api.types.is_integer_dtype(index.dtype):
        return False
    return bool(index.is_unique and (len(index) == 0 or (index.min() >= 0
                                                          and index.max() < _MAX_FID)))


#: GeoPackage feature ids are SQLite rowids (int64); the index is written as label + 1.
_MAX_FID = 2**62


def _layer(frame: pd.DataFrame, index: pd.Index, *, numbered: bool = False) -> pd.DataFrame:
    """Rows (of a result whose index is ``index``) as GDAL takes them: an index that
    carries ids as columns, text columns,
    whole-number feature ids (``numbered``: the index + 1, so the first row of a CSV is
    feature 1 in either layer), and the frame's geometry where it has one (the matched
    rows; a reverse result's dead letters keep their input geometry)."""
    rows = _feature_ids(_plain(_index_as_columns(frame, index)))
    if numbered:
        rows.insert(0, "fid", frame.index.to_numpy(dtype="int64") + 1)
    if isinstance(frame, gpd.GeoDataFrame):
        return gpd.GeoDataFrame(rows, geometry=frame.geometry.name, crs=frame.crs)
    return rows


#: What a writer raises for a frame or a place it cannot write (a column type the format
#: has no field for, a number too large for it, a missing directory, a full disk).
_ERRORS: tuple[type[Exception], ...] = (OSError, ValueError, TypeError, OverflowError,
                                        NotImplementedError)
_GDAL_ERRORS = (*_ERRORS, pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError)


def _host() -> str:
    """This machine, as a partial file's name carries it (a hash: any host name fits)."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _partial(target: Path, suffix: str) -> Path:
    """A file of this writer's own next to ``target``:
    ``.out.<host>-<pid>-<random>.partial.gpkg``. Two writers of one target (a second run
    on the same output) never share it; the partial files of writers on this machine
    that ended without removing theirs (killed) are removed. Another machine's are left
    alone (a folder shared over the network): whether its writer still runs cannot be
    told from here."""
    suffix = target.suffix or suffix
    _remove_stale(target, suffix)
    return target.with_name(
        f".{target.stem}.{_host()}-{os.getpid()}-{secrets.token_hex(4)}.partial{suffix}")


def _remove_stale(target: Path, suffix: str) -> None:
    """Remove the partial files (and SQLite's ``-journal``/``-wal``/``-shm`` beside them)
    that writers of ``target`` on this machine which no longer run left behind."""
    pattern = re.compile(rf"\.{re.escape(target.stem)}\.{_host()}-(\d+)-[0-9a-f]+\.partial"
                         rf"{re.escape(suffix)}(-journal|-wal|-shm)?")
    with contextlib.suppress(OSError):
        for path in target.parent.iterdir():
            found = pattern.fullmatch(path.name)
            if found and not _running(int(found.group(1))):
                path.unlink(missing_ok=True)


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process, or a platform without signal 0
        return True
    return True


def _check_names(result: pd.DataFrame, target: Path, what: str) -> None:
    """Refuse column names a file cannot hold (an int from ``pd.DataFrame({0: ...})``, a
    tuple of MultiIndex columns, an empty name), naming the first and what to do; for a
    GeoPackage, names that differ only in case (``LON`` beside ``lon``) and a ``fid``
    column that cannot be the feature ids (GDAL would cut ``1.5`` to 1), as
    :func:`~geotoolkit.export.check_exportable` refuses them before a run."""
    bad = [c for c in result.columns if not isinstance(c, str) or not c.strip()]
    if bad:
        raise ExportError(f"cannot write {what} {target}: column names must be non-empty text, "
                          f"got {bad[0]!r}; rename it (result.columns = [...])")
    if what != "GeoPackage":
        return
    clash = case_clash(map(str, result.columns))
    refusal = None if clash is None else f"it {clash}"
    for fid in [c for c in result.columns if str(c).casefold() == "fid"]:
        refusal = refusal or fid_refusal(result[fid], fid)
    if refusal is not None:  # GDAL's own words say nothing of why, or nothing at all
        raise ExportError(f"cannot write GeoPackage {target}: {refusal}")


@contextlib.contextmanager
def _into_place(target: Path, partial: Path, what: str,
                errors: tuple[type[Exception], ...]) -> Iterator[None]:
    """Write ``partial`` in the block, then move it over ``target``. However the block
    fails (an interrupt too) the partial file is removed; ``errors`` become ExportError."""
    try:
        yield
        os.replace(partial, target)
    except errors as exc:
        _discard(partial)
        raise ExportError(f"cannot write {what} {target}: {exc}") from exc
    except BaseException:
        _discard(partial)
        raise


def _discard(partial: Path) -> None:
    """Remove a partial file where that is possible: a folder turned read-only or a full
    disk must not turn the export's error into another one."""
    with contextlib.suppress(OSError):
        partial.unlink(missing_ok=True)


def write_geopackage(result: gpd.GeoDataFrame, path: str | os.PathLike[str]) -> tuple[int, int]:
    """Write matched rows to layer ``geocoded`` and the rest to ``dead_letters``.

    The file is written next to ``path`` and moved into place, so an interrupted
    export never leaves a half-written GeoPackage. Every result column is written
    (``geocode_precision`` as text: :func:`~geotoolkit.export.read_results` makes it
    categorical again); an index that carries ids (named, not integers, or integers that
    cannot be feature ids: repeated, as concatenated tables have them, or negative) is
    written as columns of both layers; the dead letters keep the columns of
    :func:`~geotoolkit.export.dead_letters`, and for a reverse result their input
    geometry (where each fix was: a point, or the empty, missing or non-point geometry
    that made it a dead letter). Returns the two row counts.
    """
    target = Path(path)
    _check_names(result, target, "GeoPackage")
    partial = _partial(target, ".gpkg")
    matched = result[result["geocode_status"] == "matched"]
    letters = dead_letters(result)
    numbered = _numbered(result)
    with _into_place(target, partial, "GeoPackage", _GDAL_ERRORS):
        geocoded = gpd.GeoDataFrame(_layer(matched, result.index, numbered=numbered),
                                    geometry="geometry", crs=result.crs)
        rest = _layer(letters, result.index, numbered=numbered)
        wide = width_refusal(map(str, geocoded.columns)) or width_refusal(map(str, rest.columns))
        if wide is not None:  # GDAL's words: "Error adding field 'c1996' to layer"
            raise ExportError(f"cannot write GeoPackage {target}: it {wide}")
        # an empty layer has no shape to tell its type by: it is still a layer of Points
        pyogrio.write_dataframe(geocoded, partial, layer="geocoded", driver="GPKG",
                                layer_options=_LAYER_OPTIONS,
                                geometry_type="Point" if geocoded.empty else None)
        pyogrio.write_dataframe(rest, partial, layer="dead_letters", driver="GPKG",
                                append=False, layer_options=_LAYER_OPTIONS)
    return len(matched), len(letters)


def write_geoparquet(result: gpd.GeoDataFrame, path: str | os.PathLike[str]) -> tuple[int, int]:
    """Write every row to one GeoParquet file; ``geocode_status`` marks the dead letters.

    Unlike the GeoPackage's two layers, the dead letters stay in the file as the
    rows whose ``geocode_status`` is not ``"matched"`` (empty geometry, NaN
    ``lon``/``lat``, the reason in ``geocode_reason``), so large results are
    written once and the index, row order and CRS survive a round trip::

        back = geopandas.read_parquet(path)
        letters = geotoolkit.export.dead_letters(back)

    Written next to ``path`` and moved into place. Needs pyarrow (the ``parquet``
    extra). Returns ``(geocoded, dead_letters)`` row counts.
    """
    target = Path(path)
    _check_names(result, target, "GeoParquet")
    partial = _partial(target, ".parquet")
    if "geocode_status" not in result.columns:
        raise ExportError("no geocode_status column: this frame is not a geocoding result")
    matched, letters = result[result["geocode_status"] == "matched"], dead_letters(result)
    try:
        import pyarrow
    except ImportError as exc:
        raise ExportError(PYARROW_MISSING) from exc
    frame = gpd.GeoDataFrame(_plain(result, gdal=False), geometry=result.geometry.name,
                             crs=result.crs)
    with _into_place(target, partial, "GeoParquet", (*_ERRORS, pyarrow.ArrowException)):
        frame.to_parquet(partial, index=True, compression="zstd")
    return len(matched), len(letters)


def write_results(result: gpd.GeoDataFrame, path: str | os.PathLike[str]) -> tuple[int, int]:
    """Write ``result`` in the format its suffix names: ``.gpkg``, ``.parquet``, ``.geoparquet``.

    Returns ``(geocoded, dead_letters)`` row counts.

    Raises
    ------
    ConfigurationError
        An unknown suffix (the message lists the known ones).
    ExportError
        The file cannot be written.
    """
    if format_of(path) == "GeoPackage":
        return write_geopackage(result, path)
    return write_geoparquet(result, path)
