"""The CLI end to end: CSV -> GeoPackage through the accessor, against the simulator."""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import warnings
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pyogrio
import pytest

from geotoolkit.frontends.cli import main
from geotoolkit.gate import open_gate
from geotoolkit.gate.fallback import GateUnavailableWarning
from geotoolkit.testing import ProviderSimulator

SECRET = "sk-live-0123456789abcdef-secret"
ADDRESSES = ["Städtle 38, 9490 Vaduz, Liechtenstein", "Landstrasse 19, 9494 Schaan",
             "Irgendwo 7, 9490 Vaduz", "Nowhere Lane 1", "", "Städtle 38, 9490 Vaduz, Liechtenstein",
             "Broken 1 #malformed"]


@pytest.fixture
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator(valid_keys={SECRET}) as simulator:
        yield simulator


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    path = tmp_path / "in.csv"
    pd.DataFrame({"id": range(len(ADDRESSES)), "address": ADDRESSES}).to_csv(path, index=False)
    return path


def _argv(sim: ProviderSimulator, csv_path: Path, out: Path, *extra: str) -> list[str]:
    return ["geocode", str(csv_path), "-o", str(out), "--base-url", sim.url,
            "--user-agent", "geotoolkit-tests/1.0 (tests@example.org)",
            "--api-key-env", "GTK_TEST_KEY", "--gate", "memory://", "--progress", "json", *extra]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GTK_TEST_KEY", SECRET)


def test_csv_to_geopackage(sim: ProviderSimulator, csv_path: Path, tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    out, cache = tmp_path / "out.gpkg", tmp_path / "cache.sqlite"
    assert main(_argv(sim, csv_path, out, "--cache", f"sqlite:///{cache}")) == 0
    captured = capsys.readouterr()
    geocoded = pyogrio.read_dataframe(out, layer="geocoded")
    letters = pyogrio.read_dataframe(out, layer="dead_letters", read_geometry=False)
    assert len(geocoded) + len(letters) == len(ADDRESSES)
    assert geocoded.crs.to_epsg() == 4326
    for _, row in geocoded.iterrows():
        expected = sim.expected(ADDRESSES[int(row["id"])])
        assert (row["lon"], row["lat"]) == expected == (row.geometry.x, row.geometry.y)
    assert sorted(geocoded["id"].astype(int)) == [0, 1, 2, 5]
    assert dict(zip(letters["id"].astype(int), letters["geocode_status"], strict=True)) == {
        3: "no_match", 4: "failed", 6: "failed"}
    assert "7/7 rows: 4 matched, 1 no match, 2 failed" in captured.out
    assert "(geocoded: 4, dead_letters: 3)" in captured.out
    assert '"event": "BatchFinished"' in captured.err
    assert all(r.key == SECRET for r in sim.requests)  # the key was used ...
    for blob in (out.read_bytes(), cache.read_bytes(), captured.out.encode(), captured.err.encode()):
        assert SECRET.encode() not in blob  # ... and appears nowhere


def test_a_rerun_resumes_from_the_cache(sim: ProviderSimulator, csv_path: Path,
                                        tmp_path: Path) -> None:
    cache = f"sqlite:///{tmp_path}/cache.sqlite"
    assert main(_argv(sim, csv_path, tmp_path / "one.gpkg", "--cache", cache)) == 0
    sent = len(sim.requests)
    assert sent == 5  # the duplicate once, the empty cell never
    assert main(_argv(sim, csv_path, tmp_path / "two.gpkg", "--cache", cache)) == 0
    assert [r.query for r in sim.requests[sent:]] == ["broken 1 #malformed"]  # only the failure


def test_cache_none_sends_everything_again(sim: ProviderSimulator, csv_path: Path,
                                           tmp_path: Path) -> None:
    assert main(_argv(sim, csv_path, tmp_path / "one.gpkg", "--cache", "none")) == 0
    assert main(_argv(sim, csv_path, tmp_path / "two.gpkg", "--cache", "none")) == 0
    assert len(sim.requests) == 10
    assert not list(tmp_path.glob("*.sqlite"))


def test_country_flag_sends_outsiders_to_the_dead_letters(
        sim: ProviderSimulator, csv_path: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "jp.gpkg"
    assert main(_argv(sim, csv_path, out, "--cache", "none", "--country", "JP")) == 0
    letters = pyogrio.read_dataframe(out, layer="dead_letters", read_geometry=False)
    assert len(letters) == len(ADDRESSES)
    assert letters["geocode_reason"].str.startswith("outside JP").sum() == 4
    assert "(geocoded: 0, dead_letters: 7, 4 flagged by validation)" in capsys.readouterr().out


def test_missing_column_exits_2(sim: ProviderSimulator, csv_path: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    code = main(_argv(sim, csv_path, tmp_path / "x.gpkg", "--column", "street", "--cache", "none"))
    assert code == 2
    err = capsys.readouterr().err
    assert "column 'street' not in the frame" in err and "id, address" in err
    assert sim.requests == [] and not (tmp_path / "x.gpkg").exists()


@pytest.mark.parametrize("header", ["\u200baddress", "\ufeffaddress", "Address\u00a0"])
def test_a_column_name_with_invisible_characters_is_shown_and_hinted(
        header: str, sim: ProviderSimulator, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A zero-width space pasted from a web page, a second byte order mark or a no-break
    space in the header: the refusal read "column 'address' not in the frame; available
    columns: id, address", the character invisible, and no hint."""
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    path.write_text(f"id,{header}\n1,Vaduz\n", encoding="utf-8")
    assert main(_argv(sim, path, out, "--cache", "none")) == 2
    assert capsys.readouterr().err == (f"geotoolkit: column 'address' not in the frame (did you "
                                       f"mean {header!r}?); available columns: id, {header!r}\n")
    assert sim.requests == []


@pytest.mark.parametrize(("flag", "value"), [
    ("--api-key-env", SECRET),                                  # the key in place of its name
    ("--gate-env", "redis://:hunter2-secret@127.0.0.1:1/0"),    # a URL with its password
    ("--cache-env", "postgresql://u:hunter2-secret@127.0.0.1:1/x"),
])
def test_a_value_given_to_an_env_flag_is_refused_and_not_shown(
        sim: ProviderSimulator, csv_path: Path, tmp_path: Path, flag: str, value: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*_argv(sim, csv_path, tmp_path / "x.gpkg", "--cache", "none")]
    if flag == "--api-key-env":
        argv[argv.index("GTK_TEST_KEY")] = value
    else:
        given = flag.removesuffix("-env")  # the URL flag and its -env flag together are refused
        del argv[argv.index(given):argv.index(given) + 2]
        argv += [flag, value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{flag} takes the name of an environment variable" in err
    assert value not in err and "secret" not in err.replace("in case it is a secret", "")
    assert sim.requests == []


def test_an_env_flag_naming_an_unset_variable_says_which(
        sim: ProviderSimulator, csv_path: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = _argv(sim, csv_path, tmp_path / "x.gpkg", "--cache", "none")
    argv[argv.index("GTK_TEST_KEY")] = "GTK_TEST_KEY_TYPO"
    assert main(argv) == 2
    assert "environment variable GTK_TEST_KEY_TYPO (the API key) is not set or empty" in \
        capsys.readouterr().err
    hex_key = "a3f9c1d2e7b4a5f8c6d0e1f2a3b4c5d9"  # an OpenCage-style key in place of a name
    argv[argv.index("GTK_TEST_KEY_TYPO")] = hex_key
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the environment variable --api-key-env names (the API key) is not set" in err
    assert hex_key not in err
    assert sim.requests == []


def test_unknown_country_or_cache_exits_2(sim: ProviderSimulator, csv_path: Path,
                                          tmp_path: Path) -> None:
    assert main(_argv(sim, csv_path, tmp_path / "x.gpkg", "--country", "XX")) == 2
    assert main(_argv(sim, csv_path, tmp_path / "x.gpkg", "--cache", "ftp://nope")) == 2
    assert sim.requests == []


def test_max_wait_exits_75_with_retry_after(sim: ProviderSimulator, csv_path: Path,
                                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(_argv(sim, csv_path, tmp_path / "x.gpkg", "--cache", "none", "--rate", "0.5",
                      "--concurrency", "1", "--max-wait-seconds", "0.1"))
    assert code == 75
    assert "retry_after=" in capsys.readouterr().err
    assert len(sim.requests) == 1


def test_demo_runs_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = Path(__file__).resolve().parents[3] / "notebooks" / "data" / "addresses.csv"
    out = tmp_path / "demo.gpkg"
    assert main(["demo", str(data), "-o", str(out), "--limit", "200", "--progress", "none"]) == 0
    rows = len(pd.read_csv(data))
    geocoded = pyogrio.read_dataframe(out, layer="geocoded")
    letters = pyogrio.read_dataframe(out, layer="dead_letters", read_geometry=False)
    assert len(geocoded) + len(letters) == rows and len(geocoded) > 0
    assert f"{rows}/{rows} rows" in capsys.readouterr().out


@pytest.mark.parametrize("problem", ["no such file", "not an output format", "no such column"])
def test_demo_refuses_bad_arguments_before_announcing_its_simulator(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], problem: str) -> None:
    """Every refusal of ``geotoolkit demo`` came after 'simulator at http://127.0.0.1:...,
    limited to 2 requests/s per key', as if the run had begun; now the line comes only with
    a run that starts."""
    data = Path(__file__).resolve().parents[3] / "notebooks" / "data" / "addresses.csv"
    argv = {"no such file": ["demo", str(tmp_path / "nothere.csv"), "-o", str(tmp_path / "x.gpkg")],
            "not an output format": ["demo", str(data), "-o", str(tmp_path / "x.csv")],
            "no such column": ["demo", str(data), "-o", str(tmp_path / "x.gpkg"), "--column", "addr"]}
    assert main([*argv[problem], "--progress", "none"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("geotoolkit: ") and "simulator at" not in err
    assert main(["demo", str(data), "-o", str(tmp_path / "ok.gpkg"), "--limit", "200",
                 "--progress", "none"]) == 0
    assert "simulator at http://127.0.0.1:" in capsys.readouterr().err


def test_provider_by_name(sim: ProviderSimulator, csv_path: Path, tmp_path: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "liq.gpkg"
    argv = ["geocode", str(csv_path), "-o", str(out), "--provider", "locationiq",
            "--base-url", sim.url, "--api-key-env", "GTK_TEST_KEY", "--gate", "memory://",
            "--cache", "none", "--progress", "none", "--rate", "100"]
    assert main(argv) == 0
    assert {r.key for r in sim.requests} == {SECRET}
    assert SECRET not in capsys.readouterr().out and SECRET.encode() not in out.read_bytes()
    assert len(pyogrio.read_dataframe(out, layer="geocoded")) == 4


def test_a_keyed_provider_without_a_key_names_the_flag(sim: ProviderSimulator, csv_path: Path,
                                                     tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["geocode", str(csv_path), "-o", str(tmp_path / "x.gpkg"), "--provider", "opencage",
            "--base-url", sim.url, "--gate", "memory://", "--cache", "none"]
    assert main(argv) == 2
    assert "opencage requires an api_key (on the command line: --api-key-env VAR" in (
        capsys.readouterr().err)
    assert sim.requests == []


def test_an_unreachable_gate_is_said_once_not_as_a_warning_from_a_thread(
        sim: ProviderSimulator, csv_path: Path, tmp_path: Path) -> None:
    argv = _argv(sim, csv_path, tmp_path / "x.gpkg", "--cache", "none", "--rate", "100")
    argv[argv.index("--gate") + 1] = "redis://127.0.0.1:1/0"  # nothing listens there
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0  # paced locally, at a share of the rate
    assert not [w for w in caught if issubclass(w.category, GateUnavailableWarning)]


def test_nominatim_without_a_user_agent_is_refused(csv_path: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["geocode", str(csv_path), "-o", str(tmp_path / "x.gpkg"), "--gate", "memory://"]
    assert main(argv) == 2
    assert "user_agent" in capsys.readouterr().err


@pytest.mark.parametrize(("base_url", "message"), [
    ("http://[::1", "Invalid IPv6 URL"),  # a traceback (ValueError from urlsplit)
    ("http://127.0.0.1:99999", "Port out of range"),  # every row failed, "ExceptionGroup: ..."
    ("http://127.0.0.1:http", "Port could not be cast"),
    ("http://127.0.0.1:0", "port 0"),
    ("http://me:hunter2@127.0.0.1:99999", "Port out of range"),
    ("ftp://me:hunter2@127.0.0.1", "must be an http(s) URL"),
])
def test_a_base_url_that_is_not_usable_exits_2_saying_why_before_sending(
        csv_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], base_url: str,
        message: str) -> None:
    out = tmp_path / "x.gpkg"
    argv = ["geocode", str(csv_path), "-o", str(out), "--base-url", base_url, "--user-agent",
            "geotoolkit-tests/1.0 (tests@example.org)", "--gate", "memory://", "--cache", "none"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "base_url" in err and message in err
    assert "hunter2" not in err and not out.exists()


@pytest.mark.parametrize("sep", [";", "\t", "|"])
def test_a_csv_with_another_delimiter_is_read_by_its_header(
        sep: str, sim: ProviderSimulator, tmp_path: Path) -> None:
    """A spreadsheet in much of Europe exports ``;`` (with a byte order mark): the same rows
    come out as from a comma-separated file, a quoted address with the delimiter in it
    whole."""
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    rows = [(0, "Städtle 38; 9490 Vaduz, Liechtenstein"), (1, "Landstrasse 19, 9494 Schaan")]
    body = "".join(f'{i}{sep}"{a}"\n' for i, a in rows)
    path.write_bytes(("\ufeff" + f"id{sep}address\n" + body).encode())
    assert main(_argv(sim, path, out, "--cache", "none")) == 0
    geocoded = pyogrio.read_dataframe(out, layer="geocoded")
    assert sorted(zip(geocoded["id"].astype(int), geocoded["address"], strict=True)) == rows
    assert sorted(str(r.query) for r in sim.requests) == sorted(a.casefold() for _, a in rows)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_an_empty_cell_of_a_one_column_csv_is_a_row(
        newline: str, sim: ProviderSimulator, tmp_path: Path) -> None:
    """A spreadsheet saves an empty cell of a one-column sheet as an empty line, and pandas
    skips empty lines: 5 addresses with 2 empty cells came out as 3 rows, the 2 lost without
    a word. Each is now a row that fails as a missing (or empty) address; blank lines after the last
    row (an editor's) are no rows, and in a file of several columns, where a spreadsheet
    writes an empty row as its delimiters, an empty line stays skipped."""
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    lines = ["address", '"Städtle 38, Vaduz"', "", '"Landstrasse 19, Schaan"', "   ",
             '"Äulestrasse 20, Vaduz"', "", ""]
    path.write_bytes(("\ufeff" + newline.join(lines)).encode())
    assert main(_argv(sim, path, out, "--cache", "none")) == 0
    geocoded = pyogrio.read_dataframe(out, layer="geocoded")
    letters = pyogrio.read_dataframe(out, layer="dead_letters")
    assert len(geocoded) == 3 and len(letters) == 2
    assert list(letters["geocode_reason"]) == ["missing address", "empty address"]
    several = tmp_path / "several.csv"
    several.write_text("id,address\n1,Vaduz\n\n2,Schaan\n", encoding="utf-8")
    assert main(_argv(sim, several, tmp_path / "several.gpkg", "--cache", "none")) == 0
    assert [len(pyogrio.read_dataframe(tmp_path / "several.gpkg", layer=name))
            for name in ("geocoded", "dead_letters")] == [2, 0]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_csv_whose_first_line_names_its_delimiter_is_read_by_it(
        newline: str, sim: ProviderSimulator, tmp_path: Path) -> None:
    """Excel's ``sep=;`` above the header (some exports write it so that Excel opens the
    file right anywhere) names the delimiter: it was read as the header, and the run
    refused with "column 'address' not in the frame; available columns: sep=, Unnamed: 1"."""
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    rows = [(0, "Städtle 38, 9490 Vaduz"), (1, "Landstrasse 19, 9494 Schaan")]
    lines = ["sep=;", "id;address", *(f"{i};{a}" for i, a in rows)]
    path.write_bytes(("\ufeff" + newline.join(lines) + newline).encode())
    assert main(_argv(sim, path, out, "--cache", "none")) == 0
    geocoded = pyogrio.read_dataframe(out, layer="geocoded")
    assert sorted(zip(geocoded["id"].astype(int), geocoded["address"], strict=True)) == rows


@pytest.mark.parametrize(("encoding", "sep"), [("utf-16", "\t"), ("utf-16-be", ";")])
def test_a_utf16_text_with_its_byte_order_mark_is_read(
        encoding: str, sep: str, sim: ProviderSimulator, tmp_path: Path) -> None:
    """Excel's "Unicode Text" is tab-separated UTF-16 with a byte order mark, which names
    the encoding: it was refused with "it is not UTF-8 text (byte 0xff at position 0)"."""
    path, out = tmp_path / "in.txt", tmp_path / "out.gpkg"
    rows = [(0, "Städtle 38, 9490 Vaduz"), (1, f'"Landstrasse 19{sep} 9494 Schaan"')]
    text = "".join(f"{line}\r\n" for line in [f"id{sep}address", *(f"{i}{sep}{a}" for i, a in rows)])
    path.write_bytes(("\ufeff" + text).encode(encoding))
    assert main(_argv(sim, path, out, "--cache", "none")) == 0
    geocoded = pyogrio.read_dataframe(out, layer="geocoded")
    assert sorted(zip(geocoded["id"].astype(int), geocoded["address"], strict=True)) == [
        (i, a.strip('"')) for i, a in rows]


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_without_its_byte_order_mark_is_refused_with_what_to_do(
        encoding: str, sim: ProviderSimulator, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Without a BOM its bytes pass for UTF-8 with a NUL after each letter, and the run was
    refused as "column 'address' not in the frame; available columns: a\\0d\\0d\\0r...",
    which a terminal shows as "available columns: address"."""
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    path.write_bytes("id,address\r\n1,Vaduz\r\n".encode(encoding))
    assert main(_argv(sim, path, out, "--cache", "none")) == 2
    assert capsys.readouterr().err == (
        f"geotoolkit: cannot read {path}: its header holds NUL characters, as UTF-16 text without "
        "a byte order mark does; save it as UTF-8 (in a spreadsheet: \"CSV UTF-8\")\n")
    assert sim.requests == [] and not out.exists()


def test_a_csv_with_carriage_returns_alone_as_line_ends_is_read(
        sim: ProviderSimulator, tmp_path: Path) -> None:
    """Excel for the Mac's "CSV (Macintosh)" ends lines with CR alone: the header was read
    as the whole file, and the run ended in a traceback (_csv.Error: new-line character
    seen in unquoted field)."""
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    rows = [(0, "Städtle 38, 9490 Vaduz"), (1, "Landstrasse 19, 9494 Schaan")]
    path.write_bytes("".join(f'{line}\r' for line in ["id,address", *(f'{i},"{a}"' for i, a in rows)])
                     .encode())
    assert main(_argv(sim, path, out, "--cache", "none")) == 0
    geocoded = pyogrio.read_dataframe(out, layer="geocoded")
    assert sorted(zip(geocoded["id"].astype(int), geocoded["address"], strict=True)) == rows


def test_placeholder_cells_without_a_letter_or_digit_are_dead_letters_never_sent(
        sim: ProviderSimulator, tmp_path: Path) -> None:
    """A spreadsheet's "-", "?" or "." for an unknown address, or a cell holding only a
    zero-width space, was sent as an address: the simulator (as any provider may) found a
    place for each, and they came out matched."""
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    cells = ["-", "?", " . ", "\u200b", "\ufeff", "Landstrasse 19, 9494 Schaan"]
    path.write_text("id,address\n" + "".join(f'{i},"{c}"\n' for i, c in enumerate(cells)),
                    encoding="utf-8")
    assert main(_argv(sim, path, out, "--cache", "none")) == 0
    letters = pyogrio.read_dataframe(out, layer="dead_letters").set_index("id")
    assert letters.geocode_reason.to_dict() == {
        str(i): f"address has no letter or digit: {c.strip()!r}" for i, c in enumerate(cells[:5])}
    assert (letters.geocode_attempts == 0).all()
    assert [str(r.query) for r in sim.requests] == ["landstrasse 19, 9494 schaan"]


def test_a_spreadsheets_error_values_and_null_are_dead_letters_never_sent(
        sim: ProviderSimulator, tmp_path: Path) -> None:
    """A VLOOKUP that found no address leaves '#N/A' in its cell, a broken reference '#REF!',
    and database tools export a missing value as 'NULL': each was sent as an address, and
    the simulator (as any provider may) found a place for it: matched."""
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    cells = ["#N/A", "#REF!", "#value!", "NULL", "Nullstrasse 1, 9490 Vaduz"]
    path.write_text("id,address\n" + "".join(f'{i},"{c}"\n' for i, c in enumerate(cells)),
                    encoding="utf-8")
    assert main(_argv(sim, path, out, "--cache", "none")) == 0
    letters = pyogrio.read_dataframe(out, layer="dead_letters").set_index("id")
    assert letters.geocode_reason.to_dict() == {
        "0": "address is a spreadsheet's error value '#N/A' (its formula failed)",
        "1": "address is a spreadsheet's error value '#REF!' (its formula failed)",
        "2": "address is a spreadsheet's error value '#value!' (its formula failed)",
        "3": "missing address (the cell reads 'NULL')"}
    assert [str(r.query) for r in sim.requests] == ["nullstrasse 1, 9490 vaduz"]


def test_a_csv_that_is_not_utf8_is_refused_with_what_to_do(
        sim: ProviderSimulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    path.write_bytes("id;address\n1;Städtle 38, Vaduz\n".encode("cp1252"))
    assert main(_argv(sim, path, out, "--cache", "none")) == 2
    err = capsys.readouterr().err
    assert "not UTF-8 text (byte 0xe4" in err and "save it as UTF-8" in err
    assert sim.requests == [] and not out.exists()


@pytest.mark.parametrize("body", [b"", b"\n", b"\xef\xbb\xbf", b"\r\n\r\n"])
def test_an_empty_csv_is_refused_as_empty(body: bytes, sim: ProviderSimulator, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """It was refused with pandas' "No columns to parse from file"."""
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    path.write_bytes(body)
    assert main(_argv(sim, path, out, "--cache", "none")) == 2
    assert capsys.readouterr().err == (
        f"geotoolkit: cannot read {path}: it is empty (not even a header); a CSV starts with a "
        "line naming its columns, e.g. address\n")
    assert sim.requests == [] and not out.exists()


def _workbook(path: Path) -> Path:
    """A zip archive, as a .xlsx is (its sheet deflated: bytes that are no UTF-8 text)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr("xl/worksheets/sheet1.xml", "<row><c><is><t>Vaduz</t></is></c></row>" * 50)
    return path


@pytest.mark.parametrize("name", ["in.xlsx", "in.xls", "in.csv"])
def test_a_spreadsheet_workbook_is_refused_naming_what_to_save_it_as(
        name: str, sim: ProviderSimulator, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A workbook given as the input was refused as "not UTF-8 text (byte 0x87 at position
    10); save it as UTF-8", which says nothing of the sheet to save as CSV."""
    path, out = tmp_path / name, tmp_path / "out.gpkg"
    if name.endswith(".xls"):  # an OLE2 compound file, as Excel 97-2003 writes
        path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(range(256)) * 4)
    else:
        _workbook(path)
    assert main(_argv(sim, path, out, "--cache", "none")) == 2
    err = capsys.readouterr().err
    assert err == (f"geotoolkit: cannot read {path}: it is a spreadsheet workbook (.xlsx, .xls "
                   "or .ods), not CSV text; save the sheet as \"CSV UTF-8\" and give that file\n")
    assert sim.requests == [] and not out.exists()


@pytest.mark.parametrize(("body", "message"), [
    # an unquoted comma in the first row: pandas would take the first column as the index
    # and geocode " 9490 Vaduz" as the address of id "Städtle 38"
    ("id,address\n1,Städtle 38, 9490 Vaduz\n2,Landstrasse 19\n", "a row has more cells than the header"),
    ("id,address\n1,Landstrasse 19\n2,Städtle 38, 9490 Vaduz\n", "Expected 2 fields in line 3, saw 3"),
    # pandas would rename the second column to "address.1"
    ("address,id,address\nLandstrasse 19,1,x\n", "names a column more than once: 'address'"),
])
def test_a_csv_whose_cells_do_not_line_up_with_its_header_is_refused(
        body: str, message: str, sim: ProviderSimulator, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    path.write_text(body, encoding="utf-8")
    assert main(_argv(sim, path, out, "--cache", "none")) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"geotoolkit: cannot read {path}: ") and message in err
    assert "Traceback" not in err
    assert sim.requests == [] and not out.exists()


def test_a_csv_with_a_quote_never_closed_is_refused_as_that(
        sim: ProviderSimulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "in.csv"
    path.write_text('id,address\n1,"Landstrasse 19\n2,Nowhere Lane 1\n', encoding="utf-8")
    assert main(_argv(sim, path, tmp_path / "out.gpkg", "--cache", "none")) == 2
    err = capsys.readouterr().err
    assert "EOF inside string" in err and "delimiter" not in err  # not the advice for commas
    assert sim.requests == []


def test_a_csv_with_fid_and_geom_columns_is_written_whole(
        sim: ProviderSimulator, tmp_path: Path) -> None:
    """A QGIS export has a ``fid`` column (text, in a CSV) and may have a ``geom`` one: both
    collided with what GDAL writes (the feature id, the geometry column) only after every
    row had been geocoded."""
    path, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    path.write_text('FID,Geom,address\n7,a,"Landstrasse 19, 9494 Schaan"\n9,b,Nowhere Lane 1\n',
                    encoding="utf-8")
    assert main(_argv(sim, path, out, "--cache", "none")) == 0
    geocoded = pyogrio.read_dataframe(out, layer="geocoded", fid_as_index=True)
    letters = pyogrio.read_dataframe(out, layer="dead_letters", fid_as_index=True,
                                     read_geometry=False)
    assert (geocoded.index.tolist(), geocoded["Geom"].tolist()) == ([7], ["a"])
    assert (letters.index.tolist(), letters["Geom"].tolist()) == ([9], ["b"])
    assert (geocoded.geometry.x[7], geocoded.geometry.y[7]) == sim.expected(
        "Landstrasse 19, 9494 Schaan")


@pytest.mark.parametrize(("output", "message"), [
    ("missing/out.gpkg", "there is no directory"), ("missing/out.parquet", "there is no directory"),
    ("folder.gpkg", "it is a directory")])
def test_an_output_that_cannot_be_put_in_place_is_refused_before_anything_is_sent(
        output: str, message: str, sim: ProviderSimulator, csv_path: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "folder.gpkg").mkdir()
    assert main(_argv(sim, csv_path, tmp_path / output, "--cache", "none")) == 2
    assert f"geotoolkit: cannot write {tmp_path / output}: {message}" in capsys.readouterr().err
    assert sim.requests == []  # not after the whole run
    assert not (tmp_path / "missing").exists()


@contextlib.contextmanager
def _unwritable(folder: Path) -> Iterator[None]:
    """``folder`` taking no new file while the block runs: mode 0555, and for root (whom
    modes do not stop) the immutable attribute; skipped where neither stops a write."""
    folder.chmod(0o555)
    immutable = os.geteuid() == 0 and subprocess.run(
        ["chattr", "+i", str(folder)], capture_output=True, check=False).returncode == 0
    try:
        try:
            (folder / "probe").touch()
        except OSError:
            yield
        else:
            (folder / "probe").unlink()
            pytest.skip("no way to make a folder read-only here")
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)


@pytest.mark.parametrize("name", ["out.gpkg", "out.parquet"])
def test_a_read_only_output_folder_is_refused_before_anything_is_sent(
        name: str, sim: ProviderSimulator, csv_path: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Every row was sent, then the export failed: 'stopped: ExportError: cannot write
    GeoPackage ...: sqlite3_open(...) failed: unable to open database file', exit 1."""
    folder = tmp_path / "shared"
    folder.mkdir()
    with _unwritable(folder):
        assert main(_argv(sim, csv_path, folder / name, "--cache", "none")) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"geotoolkit: cannot write {folder / name}: the directory {folder} "
                          "takes no new file (")
    assert err.endswith("); make it writable, or write somewhere else\n")
    assert sim.requests == [] and list(folder.iterdir()) == []


def test_an_earlier_output_given_as_the_csv_says_to_add_only_dead_letters(
        sim: ProviderSimulator, csv_path: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    first = tmp_path / "first.gpkg"
    assert main(_argv(sim, csv_path, first, "--cache", "none")) == 0
    sent = len(sim.requests)
    capsys.readouterr()
    assert main(_argv(sim, first, tmp_path / "next.gpkg", "--cache", "none")) == 2
    err = capsys.readouterr().err
    assert "is a GeoPackage file" in err and "add --only-dead-letters" in err
    assert "UTF-8" not in err  # not read as a CSV in some other encoding
    assert len(sim.requests) == sent and not (tmp_path / "next.gpkg").exists()


def test_help_examples_are_commands_to_copy(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    examples = lines[lines.index("examples:") + 1:]
    # a continued example ends in a backslash, and the next line goes on with its flags
    assert "  geotoolkit geocode addresses.csv -o out.gpkg --provider census,nominatim \\" in examples
    for line, following in itertools.pairwise(examples):
        if line.endswith("\\"):
            assert following.startswith("      --"), following
    assert not any("   --" in line.strip() for line in examples)  # no line joined in the source


def test_cap_tz_counts_the_cap_in_the_providers_day(sim: ProviderSimulator, csv_path: Path,
                                                     tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``--cap 2 --cap-tz America/Los_Angeles``: the run stops at the cap, told when it resets
    at Pacific midnight, and the count is the Pacific day's (the UTC day's is apart)."""
    la = "America/Los_Angeles"
    gate_url = f"sqlite:///{tmp_path / 'gate.sqlite'}"
    argv = _argv(sim, csv_path, tmp_path / "x.gpkg", "--cache", "none", "--concurrency", "1",
                 "--cap", "2", "--cap-tz", la)
    argv[argv.index("--gate") + 1] = gate_url
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "stopped: QuotaExceededError: the daily cap of 2 requests" in err
    assert len(sim.requests) == 2
    gate = open_gate(gate_url)
    try:
        [key] = gate.keys("geotoolkit:")
        usage = gate.usage(key, "day", la)
        assert (usage.used, usage.tz) == (2, la) and gate.usage(key).used == 0
    finally:
        gate.close()
    reset = datetime.fromtimestamp(usage.resets_at, ZoneInfo(la))
    utc = datetime.fromtimestamp(usage.resets_at, UTC)
    assert (f"2 sent on {usage.label}, America/Los_Angeles); it resets at {reset:%Y-%m-%d} "
            f"00:00 America/Los_Angeles ({utc:%H:%M} UTC)") in err
    assert SECRET not in err


@pytest.mark.parametrize(("extra", "message"), [
    (("--cap-tz", "America/Los_Angeles"), "--cap-tz is the zone of --cap's day"),
    (("--cap", "5", "--cap-tz", "Mars/Olympus_Mons"), "unknown time zone 'Mars/Olympus_Mons'"),
])
def test_a_bad_cap_tz_exits_2_before_sending(sim: ProviderSimulator, csv_path: Path,
                                             tmp_path: Path, extra: tuple[str, ...], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_argv(sim, csv_path, tmp_path / "x.gpkg", "--cache", "none", *extra)) == 2
    assert message in capsys.readouterr().err
    assert sim.requests == []


@pytest.mark.parametrize("rate", ["5", "unlimited"])
def test_a_rate_over_public_nominatims_maximum_exits_2(csv_path: Path, tmp_path: Path, rate: str,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # Were the refusal to go, nothing would leave loopback: every proxy is a closed port.
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    out = tmp_path / "x.gpkg"
    argv = ["geocode", str(csv_path), "-o", str(out), "--user-agent",
            "geotoolkit-tests/1.0 (tests@example.org)", "--gate", "memory://", "--rate", rate,
            "--circuit-timeout-seconds", "1"]  # a regression fails at once, not in 10 minutes
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "nominatim.openstreetmap.org allows 1 request/s at most" in err and "--rate" in err
    assert not out.exists()
