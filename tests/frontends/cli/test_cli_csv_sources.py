"""Where a CSV comes from: a pipe (``/dev/stdin``, a shell's ``<(...)``), a compressed file
(``.csv.gz`` as data portals ship it, a zip archive holding one CSV). Each is read as the
same CSV would be, or refused saying what it is; never as something it is not."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pyogrio
import pytest

import geotoolkit
from geotoolkit.frontends.cli import main
from geotoolkit.testing import ProviderSimulator

UA = "geotoolkit-tests/1.0 (tests@example.org)"
ROWS = [(0, "Städtle 38, 9490 Vaduz"), (1, "Landstrasse 19, 9494 Schaan")]
TEXT = "id;address\n" + "".join(f"{i};{a}\n" for i, a in ROWS)


@pytest.fixture
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator() as simulator:
        yield simulator


def _argv(sim: ProviderSimulator, source: str, out: Path, command: str = "geocode") -> list[str]:
    return [command, source, "-o", str(out), "--base-url", sim.url, "--user-agent", UA,
            "--gate", "memory://", "--cache", "none", "--progress", "none"]


def _rows(out: Path) -> list[tuple[int, str]]:
    geocoded = pyogrio.read_dataframe(out, layer="geocoded")
    return sorted(zip(geocoded["id"].astype(int), geocoded["address"], strict=True))


def _command(sim: ProviderSimulator, source: str, out: Path, **run: object
             ) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(Path(geotoolkit.__file__).parents[1])}
    return subprocess.Popen([sys.executable, "-m", "geotoolkit", *_argv(sim, source, out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **run)


def _finish(child: subprocess.Popen[bytes], given: bytes | None = None) -> tuple[int, str]:
    """The exit status and stderr of ``child``; killed if it hangs (a guard, not a timing)."""
    try:
        _, err = child.communicate(given, timeout=120)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail("the command hung reading its input")
    return child.returncode, err.decode()


def test_a_csv_piped_to_dev_stdin_is_read(sim: ProviderSimulator, tmp_path: Path) -> None:
    """``csvcut ... | geotoolkit geocode /dev/stdin``: a pipe can be read once, and the file
    was opened three times (its first bytes for the encoding, its header, then pandas), so
    the run was refused with "cannot read /dev/stdin: it is empty (not even a header)"."""
    out = tmp_path / "out.gpkg"
    child = _command(sim, "/dev/stdin", out, stdin=subprocess.PIPE)
    assert _finish(child, TEXT.encode()) == (0, "")
    assert _rows(out) == ROWS


def test_a_named_pipe_is_read_once_not_waited_on(sim: ProviderSimulator, tmp_path: Path) -> None:
    """A named pipe (``mkfifo``) whose writer has written its CSV and closed it: the second
    opening of the three waited for another writer, for ever."""
    fifo, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    os.mkfifo(fifo)
    child = _command(sim, str(fifo), out)
    with open(fifo, "wb") as writer:  # opened once the command opens it to read
        writer.write(TEXT.encode())
    assert _finish(child) == (0, "")
    assert _rows(out) == ROWS


def _zipped(path: Path, data: bytes) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("addresses.csv", data)


COMPRESSED: dict[str, Callable[[Path, bytes], object]] = {
    "in.csv.gz": lambda p, d: p.write_bytes(gzip.compress(d)),
    "in.csv.bz2": lambda p, d: p.write_bytes(bz2.compress(d)),
    "in.csv.xz": lambda p, d: p.write_bytes(lzma.compress(d)),
    "in.csv.zip": _zipped,
}


@pytest.mark.parametrize("name", list(COMPRESSED))
def test_a_compressed_csv_is_read(name: str, sim: ProviderSimulator, tmp_path: Path) -> None:
    """``addresses.csv.gz`` was refused as "its header holds NUL characters, as UTF-16 text
    without a byte order mark does; save it as UTF-8" (a gzip header has NUL bytes), a
    ``.csv.zip`` as "a spreadsheet workbook": neither is what the file is."""
    path, out = tmp_path / name, tmp_path / "out.gpkg"
    COMPRESSED[name](path, ("\ufeff" + TEXT).encode())
    assert main(_argv(sim, str(path), out)) == 0
    assert _rows(out) == ROWS


def test_a_truncated_compressed_csv_is_refused_saying_so(
        sim: ProviderSimulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out = tmp_path / "in.csv.gz", tmp_path / "out.gpkg"
    path.write_bytes(gzip.compress(TEXT.encode() * 50)[:-20])
    assert main(_argv(sim, str(path), out)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"geotoolkit: cannot read {path}: ") and "Traceback" not in err
    assert sim.requests == [] and not out.exists()


def test_a_compressed_csv_of_points_is_reverse_geocoded(sim: ProviderSimulator,
                                                        tmp_path: Path) -> None:
    """``fixes.csv.gz`` was taken for a file with its own geometry: "--lon and --lat are for
    a CSV; fixes.csv.gz has its own geometry"."""
    path, out = tmp_path / "fixes.csv.gz", tmp_path / "out.gpkg"
    path.write_bytes(gzip.compress(b"id,x,y\n1,9.52197,47.13976\n"))
    assert main([*_argv(sim, str(path), out, "reverse"), "--lon", "x", "--lat", "y"]) == 0
    assert pyogrio.read_dataframe(out, layer="geocoded")["id"].tolist() == ["1"]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_header_cell_on_two_lines_keeps_every_row(
        newline: str, sim: ProviderSimulator, tmp_path: Path) -> None:
    """A spreadsheet header cell with a line break in it (Alt+Enter: "Customer / address")
    is saved quoted over two lines. Only the first line was read as the header, which
    seemed to name one column, so the rows whose first cell was empty at the end of the
    file were taken for blank lines and dropped: 3 rows in, 1 out, without a word."""
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    lines = ['"Customer', 'address",id', '"Städtle 38, 9490 Vaduz",1', ",2", ",3"]
    path.write_bytes(newline.join(lines).encode() + newline.encode())
    argv = [*_argv(sim, str(path), out), "--column", f"Customer{newline}address"]
    assert main(argv) == 0
    letters = pyogrio.read_dataframe(out, layer="dead_letters", read_geometry=False)
    assert pyogrio.read_dataframe(out, layer="geocoded")["id"].tolist() == ["1"]
    assert letters["id"].tolist() == ["2", "3"]


def test_a_quote_inside_a_header_name_opens_no_cell(sim: ProviderSimulator, tmp_path: Path) -> None:
    """An inch mark in a column name (``Pipe 5"``) is a character, not the start of a quoted
    cell: the header is its line alone, as pandas reads it."""
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    path.write_text('id,Pipe 5",address\n0,a,"Städtle 38, 9490 Vaduz"\n1,b,Landstrasse 19\n',
                    encoding="utf-8")
    assert main(_argv(sim, str(path), out)) == 0
    geocoded = pyogrio.read_dataframe(out, layer="geocoded")
    assert geocoded['Pipe 5"'].tolist() == ["a", "b"]
