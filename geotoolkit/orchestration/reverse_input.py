"""The points of a file, for a reverse run: a CSV's coordinate columns, or a file's geometry.

``geotoolkit reverse INPUT`` reads its input here, so a script can do the same::

    job = reverse_job_from_file("fixes.csv", options, lon="x", lat="y", crs="EPSG:2056")
    result = job.run_sync()

A CSV (a file named ``.csv``, ``.tsv`` or ``.txt``, compressed or not, or a pipe, read as
``geotoolkit geocode`` reads one) needs ``lon`` and ``lat`` (the names of its columns: never guessed, and kept
in the result as read, as text); its ``crs`` defaults to EPSG:4326. Any other file is
read with :func:`~geotoolkit.export.read_points` (a vector file GDAL reads, or
GeoParquet) and reverse geocoded from its own geometry and CRS; ``crs`` may only supply
a CRS the file lacks.
"""

from __future__ import annotations

import bz2
import contextlib
import csv
import gzip
import io
import lzma
import os
import re
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, cast

import geopandas as gpd
import pandas as pd
from pyproj import CRS
from pyproj.exceptions import CRSError

from geotoolkit.errors import ConfigurationError
from geotoolkit.export import read_points
from geotoolkit.orchestration.options import GeocodeOptions
from geotoolkit.orchestration.reverse import ReverseJob
from geotoolkit.results import REVERSE_DECIMALS

__all__ = ["CSV_DELIMITERS", "CSV_SUFFIXES", "csv_delimiter", "read_csv_text",
           "reverse_job_from_file"]

#: The suffixes of the files read as CSV text: tab-separated files are named either way.
CSV_SUFFIXES = (".csv", ".tsv", ".txt")


def reverse_job_from_file(path: str | os.PathLike[str], options: GeocodeOptions, *,
                          lon: str | None = None, lat: str | None = None, crs: str | None = None,
                          layer: str | None = None, decimals: int = REVERSE_DECIMALS,
                          country: str | None = None) -> ReverseJob:
    """The checked reverse run over the points of ``path`` (see the module docstring).

    Raises
    ------
    ConfigurationError
        A CSV without ``lon`` and ``lat``, ``lon``/``lat`` or ``layer`` where they do
        not apply, a ``crs`` that contradicts the file's own, or anything
        :class:`~geotoolkit.orchestration.reverse.ReverseJob` refuses.
    """
    source = Path(path)
    if source.suffix.lower() in _WORKBOOK_SUFFIXES:
        raise _workbook(source)
    if _is_csv(source):
        if lon is None or lat is None:
            raise ConfigurationError("a CSV needs --lon and --lat: the names of its coordinate "
                                     "columns (they are never guessed)")
        if layer is not None:
            raise ConfigurationError("--layer is for files with layers, not a CSV")
        return ReverseJob.from_columns(read_csv_text(source), options, lon=lon, lat=lat,
                                       crs=crs, decimals=decimals,
                                       country=country)
    if lon is not None or lat is not None:
        raise ConfigurationError(f"--lon and --lat are for a CSV; {source.name} has its own "
                                 "geometry")
    points = read_points(source, layer)
    if crs is not None:
        points = _with_crs(points, crs, source)
    _check_located(points, source)
    return ReverseJob(points, options, decimals=decimals, country=country)


def _is_csv(source: Path) -> bool:
    """Whether ``source`` is read as CSV text: named so (``fixes.csv``, ``fixes.csv.gz``), or
    a pipe (``/dev/stdin``, a shell's ``<(...)``), which no vector format is read from."""
    suffixes = [s.lower() for s in source.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSED_SUFFIXES:
        suffixes.pop()
    return bool(suffixes and suffixes[-1] in CSV_SUFFIXES) or (
        source.exists() and not source.is_file() and not source.is_dir())


def _check_located(points: pd.DataFrame, path: Path) -> None:
    """Refuse a file whose features have no geometry, or no CRS, saying what to do from the
    command line (``ReverseJob`` names ``gdf.set_crs``, which a file has not)."""
    if not isinstance(points, gpd.GeoDataFrame) or points._geometry_column_name not in points:
        raise ConfigurationError(
            f"{path} has no geometry: a table of coordinates goes in as a CSV, its columns "
            "named with --lon and --lat")
    if points.crs is None:
        raise ConfigurationError(
            f"{path} says nothing of its CRS (a shapefile without its .prj?): name the one its "
            "coordinates are in, e.g. --crs EPSG:4326 for degrees or --crs EPSG:2056 for "
            "Swiss LV95 metres (crs= in Python)")


#: The delimiters a CSV's header is read for: spreadsheets in much of Europe export
#: ``;`` (the comma is their decimal mark), and tab-separated files are common too.
CSV_DELIMITERS = (",", ";", "\t", "|")


def csv_delimiter(header: str) -> str:
    r"""The delimiter of a CSV whose first line is ``header``: the one of
    ``CSV_DELIMITERS`` it holds most often outside quotes (column names rarely hold
    one), ``,`` when it holds none (a single column). Counted, not ``csv.Sniffer``: on
    one line the sniffer weighs how evenly a character splits, not how often, and reads
    ``name;street, nr;zip`` as comma-separated, and still does given rows such as
    ``A;Städtle, 38;9490`` below it (addresses hold commas in a ``;`` file).

    >>> csv_delimiter("id;address;zip"), csv_delimiter("id,address"), csv_delimiter("address")
    (';', ',', ',')
    >>> csv_delimiter("name;street, nr;zip")
    ';'
    >>> csv_delimiter('"street; number",city'), csv_delimiter("id\taddress")
    (',', '\t')
    """
    counts = dict.fromkeys(CSV_DELIMITERS, 0)
    quoted = False
    for char in header:
        if char == '"':
            quoted = not quoted
        elif not quoted and char in counts:
            counts[char] += 1
    best = max(CSV_DELIMITERS, key=lambda d: counts[d])  # the first of a tie: ","
    return best if counts[best] else ","


#: Excel's first line naming a CSV's delimiter: ``sep=;`` (it is no row and no header).
_EXCEL_SEP = re.compile(r"sep=(.)", re.IGNORECASE)


def read_csv_text(path: Path) -> pd.DataFrame:
    """A CSV with every cell as text (empty cells missing), as the command line reads it:
    UTF-8 (with or without a byte order mark), or UTF-16 with its byte order mark (what
    Excel saves as "Unicode Text"), its delimiter read off its header
    (``csv_delimiter``), or named by a first line such as ``sep=;`` (Excel's hint, which
    some exports write above the header). It may be compressed (gzip, bzip2, xz, or a
    zip archive holding that one file) or come through a pipe (``/dev/stdin``), read once.
    A file in another encoding is refused with
    what to do, not read as something it is not (a spreadsheet workbook is told to be
    saved as "CSV UTF-8"); so is a header naming a column twice,
    or a row with more cells than the header (an address with an unquoted delimiter),
    which pandas would otherwise rename (``address.1``) or shift into the index."""
    try:
        opener = _opener(path)
        encoding = _encoding(path, opener)
        with opener() as raw, io.TextIOWrapper(raw, encoding=encoding, errors="replace",
                                               newline="") as file:
            header, second = _record(file), _record(file)
        hint = _EXCEL_SEP.fullmatch(header)
        if hint is not None:
            header = second
        sep = hint.group(1) if hint is not None else csv_delimiter(header)
        one_column = len(_check_header(path, header, sep)) == 1
        with warnings.catch_warnings(), opener() as raw:
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(raw, sep=sep, dtype=str, keep_default_na=False, na_values=[""],
                                encoding=encoding, index_col=False, skip_blank_lines=not one_column,
                                skiprows=1 if hint is not None else None)
        return _without_trailing_blanks(frame) if one_column else frame
    except ConfigurationError:
        raise
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"cannot read {path}: it is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at "
            f"position {exc.start}); save it as UTF-8 (in a spreadsheet: \"CSV UTF-8\")") from exc
    except (pd.errors.ParserWarning, pd.errors.ParserError) as exc:
        raise ConfigurationError(f"cannot read {path}: {_parse_problem(exc, sep)}") from exc
    except pd.errors.EmptyDataError as exc:
        raise ConfigurationError(
            f"cannot read {path}: it is empty (not even a header); a CSV starts with a line "
            "naming its columns, e.g. address") from exc
    except (OSError, ValueError, EOFError, csv.Error, lzma.LZMAError, zipfile.BadZipFile) as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from exc


def _record(file: io.TextIOWrapper) -> str:
    r"""The next record of a CSV, without its line end: a line, and the lines a quoted cell
    runs on to (a header cell with a line break in it, ``"Customer\naddress"``, saved over
    two lines); at most 64 KiB of it."""
    record = ""
    while len(record) < 1 << 16:
        line = file.readline(1 << 16)
        record += line
        if not line or not _in_quotes(record):
            break
    return record.rstrip("\r\n")


def _in_quotes(text: str) -> bool:
    r"""Whether ``text`` ends inside a quoted cell. A quote opens one only where a cell starts
    (an inch mark in ``Pipe 5"`` is a character), and ``""`` inside one is a quote.

    >>> _in_quotes('"Customer\n'), _in_quotes('"Customer\naddress",id'), _in_quotes('Pipe 5",id')
    (True, False, False)
    """
    quoted, escaped = False, False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif quoted and char == '"':
            escaped = quoted = text[i + 1:i + 2] == '"'  # "" in a quoted cell: a quote
        elif char == '"' and (i == 0 or text[i - 1] in _CELL_STARTS):
            quoted = True
    return quoted


#: What a cell starts after: a line end or a delimiter.
_CELL_STARTS = frozenset("\r\n" + "".join(CSV_DELIMITERS))


_Opener = Callable[[], contextlib.AbstractContextManager[IO[bytes]]]

#: How a compressed file starts, and the module that reads it: data portals ship ``.csv.gz``.
_COMPRESSED = ((re.compile(rb"\x1f\x8b"), gzip), (re.compile(rb"BZh[1-9]"), bz2),
               (re.compile(rb"\xfd7zXZ\x00"), lzma))
_COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zip")


def _opener(path: Path) -> _Opener:
    """Opens the bytes of ``path``'s text afresh for each read: a file where it is,
    decompressed if it is compressed (a zip archive holding one CSV, too); a pipe, which
    can be read once only (a second opening found it empty, or waited for a writer for
    ever), from its bytes read at once."""
    data = None if path.is_file() else path.read_bytes()

    def raw() -> IO[bytes]:
        return open(path, "rb") if data is None else io.BytesIO(data)

    with raw() as file:
        start = file.read(6)
    for magic, module in _COMPRESSED:
        if magic.match(start):
            return lambda: cast(IO[bytes], module.open(path if data is None else io.BytesIO(data)))
    member = _zipped_csv(raw) if start.startswith(b"PK\x03\x04") else None
    if member is not None:
        return lambda: _zip_member(raw(), member)
    return raw


def _zipped_csv(raw: Callable[[], IO[bytes]]) -> str | None:
    """The name of the one file of a zip archive, when it is named as CSV text (a workbook
    is a zip archive too, of many files)."""
    with raw() as file, zipfile.ZipFile(file) as archive:
        names = [n for n in archive.namelist()
                 if not n.endswith("/") and not n.startswith("__MACOSX/")]
    if len(names) == 1 and Path(names[0]).suffix.lower() in CSV_SUFFIXES:
        return names[0]
    return None


@contextlib.contextmanager
def _zip_member(file: IO[bytes], name: str) -> Iterator[IO[bytes]]:
    with file, zipfile.ZipFile(file) as archive, archive.open(name) as member:
        yield member


#: The byte order marks of UTF-16: the file says its encoding itself.
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


#: How spreadsheet workbooks start: a zip archive (.xlsx, .ods) or an OLE2 file (.xls).
_WORKBOOKS = (b"PK\x03\x04", b"\xd0\xcf\x11\xe0")


#: The suffixes of spreadsheet workbooks, refused by name too (GDAL reads them as tables).
_WORKBOOK_SUFFIXES = (".xlsx", ".xlsm", ".xls", ".ods")


def _workbook(path: Path) -> ConfigurationError:
    return ConfigurationError(
        f"cannot read {path}: it is a spreadsheet workbook (.xlsx, .xls or .ods), not CSV "
        "text; save the sheet as \"CSV UTF-8\" and give that file")


def _encoding(path: Path, opener: _Opener) -> str:
    """``utf-16`` for a file that starts with a UTF-16 byte order mark, else ``utf-8-sig``;
    a spreadsheet workbook is refused, naming what to save it as."""
    with opener() as file:
        start = file.read(4)
    if start.startswith(_WORKBOOKS):
        raise _workbook(path)
    return "utf-16" if start[:2] in _UTF16_BOMS else "utf-8-sig"


def _parse_problem(exc: Exception, sep: str) -> str:
    """What pandas could not parse; for a row with too many cells, what to do about it."""
    if isinstance(exc, pd.errors.ParserWarning):
        detail = "a row has more cells than the header"
    elif "fields" in str(exc):  # "Expected 2 fields in line 3, saw 3"
        detail = str(exc).strip()
    else:  # e.g. "EOF inside string starting at row 1": a quote not closed
        return str(exc).strip()
    return f"{detail}; put a cell that holds the delimiter {sep!r} in double quotes"


def _without_trailing_blanks(frame: pd.DataFrame) -> pd.DataFrame:
    """A one-column CSV without the blank lines after its last cell (an editor's, no
    spreadsheet's: one saves an empty cell as an empty line, a row kept as such)."""
    cells = frame.iloc[:, 0]
    filled = cells.notna() & (cells.fillna("").str.strip() != "")
    return frame.iloc[: int(filled.to_numpy().nonzero()[0][-1]) + 1 if filled.any() else 0]


def _check_header(path: Path, header: str, sep: str) -> list[str]:
    """The column names of ``header`` (the file's first line). Refused: one that holds NUL
    characters (UTF-16 text without its byte order mark: the column names would print as
    ``address`` and not be found), or names a column twice (pandas would rename the
    second)."""
    if "\x00" in header:
        raise ConfigurationError(
            f"cannot read {path}: its header holds NUL characters, as UTF-16 text without a "
            "byte order mark does; save it as UTF-8 (in a spreadsheet: \"CSV UTF-8\")")
    names = next(csv.reader([header], delimiter=sep), [])
    twice = sorted({n for n in names if names.count(n) > 1 and n != ""})
    if twice:
        raise ConfigurationError(
            f"cannot read {path}: its header names a column more than once: "
            f"{', '.join(map(repr, twice))}; give every column a distinct name")
    return names


def _with_crs(points: gpd.GeoDataFrame, crs: str, path: Path) -> gpd.GeoDataFrame:
    """``crs`` for a file: sets a missing CRS; refused when the file says otherwise."""
    try:
        given = CRS.from_user_input(crs)
    except CRSError as exc:
        raise ConfigurationError(f"--crs: not a coordinate reference system: {crs!r}") from exc
    if points.crs is None:
        return points.set_crs(given)
    if not points.crs.equals(given):
        raise ConfigurationError(f"{path} is in {points.crs.to_string()}: --crs names the CRS of "
                                 "a CSV, or of a file without one")
    return points
