"""Answers the simulator does not give, from a tiny hostile server on 127.0.0.1.

Each answer is canned: the address names it (``"... #answer=NAME"``) and the server sends
exactly those bytes, status and headers (``{target}`` in a header: the request target, the
key included), whatever the request. The batch runs end to end
(``df.geocode.run``, a SQLite cache, an export), so a crash in the store or the writer
counts as much as one in the parser.
"""

from __future__ import annotations

import gzip
import logging
import tracemalloc
import zlib
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pyogrio
import pytest
from loopback_support import Quiet, serving

from geotoolkit.export import write_results
from geotoolkit.policy import Backoff
from geotoolkit.providers import Census, Nominatim

pytestmark = pytest.mark.faults

SECRET = "sk-server-0123456789abcdef-key"
UA = "geotoolkit-faults/1.0 (tests@example.org)"
GOOD = b'[{"lat": "47.141", "lon": "9.5215", "display_name": "Vaduz"}]'
FAST = {"request_deadline_seconds": 2.0, "max_attempts": 2, "rate": 200.0, "concurrency": 2,
        "backoff": Backoff(initial_seconds=0.01, max_seconds=0.05, retry_after_cap_seconds=0.1),
        "gate": "memory://"}



def _gzipped_zeros(megabytes: int) -> bytes:
    """``megabytes`` MB of zeros, gzipped: about a thousandth of that."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = bytes(1 << 20)
    return b"".join(deflate.compress(zeros) for _ in range(megabytes)) + deflate.flush()


def _raw_deflate(data: bytes) -> bytes:
    deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return deflate.compress(data) + deflate.flush()


#: name -> (status, headers, body)
ANSWERS: dict[str, tuple[int, list[tuple[str, str]], bytes]] = {
    # JSON may escape a lone UTF-16 surrogate; no UTF-8 store or file can hold one.
    "surrogate-label": (200, [], rb'[{"lat": "47.1", "lon": "9.5", "display_name": "Vad\ud800uz",'
                                 rb' "address": {"road": "St\udfffr", "city": "Vaduz"}}]'),
    "surrogate-error": (200, [], rb'{"error": "lookup \udc80 failed"}'),
    "surrogate-400": (400, [], rb'{"error": "bad \ud800 query"}'),
    # JSON may escape NUL too: PostgreSQL refuses it in text, GDAL cuts the text there.
    "nul-label": (200, [], rb'[{"lat": "47.1", "lon": "9.5", "display_name": "Va\u0000duz",'
                           rb' "address": {"road": "St\u0000r", "city": "Vaduz"}}]'),
    # An error page in plain text with a raw NUL (no JSON to escape it): its reason.
    "nul-text-400": (400, [], b"bad \x00 query"),
    "nul-text-200": (200, [], b"<html>bad \x00 gateway</html>"),
    # A header that echoes the request, key and all (httpcore logs headers at DEBUG).
    "echo-header": (200, [("X-Request", "{target}")], GOOD),
    # A header that echoes the bare key, no "key=" before it.
    "echo-key": (200, [("X-Request", "{key}")], GOOD),
    # A match whose place fields echo the key ({key} in a body: the key sent).
    "echo-place": (200, [], b'[{"lat": "47.141", "lon": "9.5215", "display_name": "Vaduz {key}",'
                            b' "place_id": "{key}", "address": {"road": "Road {key}", "house_number":'
                            b' "{key}", "postcode": "{key}", "city": "City {key}", "state": "{key}"}}]'),
    # Redirects are not followed; a 3xx is not an answer, even with a JSON body.
    "moved-json": (301, [("Location", "http://127.0.0.1:9/elsewhere{target}")], GOOD),
    "redirect-loop": (302, [("Location", "{target}")], b""),
    "redirect-bare": (307, [], b""),
    "moved-relative": (308, [("Location", "/v2{target}")], b""),
    # A cache on the way answering a request that asked for no cached copy.
    "not-modified": (304, [], b""),
    # Numeric strings float() reads but no provider means: "4_7" is 47.0 to Python.
    "digit-separators": (200, [], b'[{"lat": "4_7.1", "lon": "9_5", "display_name": "x"}]'),
    "other-digits": (200, [], '[{"lat": "\u0664\u0667", "lon": "9.5", "display_name": "x"}]'.encode()),
    # A gzip bomb gzipped again: a body of a few hundred bytes that inflates to 100 MB.
    "gzip-bomb": (200, [("Content-Encoding", "gzip, gzip")], gzip.compress(_gzipped_zeros(100))),
    # Codings servers do stack or send raw: the answer is read all the same.
    "gzip-twice": (200, [("Content-Encoding", "gzip"), ("Content-Encoding", "x-gzip")],
                   gzip.compress(gzip.compress(GOOD))),
    "deflate-raw": (200, [("Content-Encoding", "Deflate")], _raw_deflate(GOOD)),
    # A compressed body that ends before its stream does, its framing complete (the
    # Content-Length says these bytes): without the trailer no checksum was ever checked.
    "gzip-cut": (200, [("Content-Encoding", "gzip")], gzip.compress(GOOD)[:-8]),
    "gzip-cut-mid": (200, [("Content-Encoding", "gzip")], gzip.compress(GOOD * 20)[:-40]),
    "deflate-cut": (200, [("Content-Encoding", "deflate")], zlib.compress(GOOD)[:-4]),
    "gzip-gzip-cut": (200, [("Content-Encoding", "gzip, gzip")],
                      gzip.compress(gzip.compress(GOOD)[:-8])),
    # No body at all under a coding (as some servers send a 204's, or a 200 a proxy emptied).
    "gzip-empty": (200, [("Content-Encoding", "gzip")], b""),
}


class _Handler(Quiet):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        params = parse_qs(urlsplit(self.path).query)
        text = " ".join(params.get("q", [""]))
        name = text.rsplit("#answer=", 1)[1] if "#answer=" in text else ""
        status, headers, body = ANSWERS.get(name, (200, [], GOOD))
        key = " ".join(params.get("key", [""]))
        self.reply(status, [*((name, value.replace("{key}", key).replace("{target}", self.path))
                              for name, value in headers),
                            ("Content-Type", "application/json")], body.replace(b"{key}", key.encode()))


@pytest.fixture
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    with serving(server):
        yield f"http://127.0.0.1:{server.server_address[1]}"


def run(url: str, addresses: list[str], cache: Path | str, **options: Any) -> pd.DataFrame:
    """``cache``: a SQLite file, or a URL."""
    provider = Nominatim(url, user_agent=UA, api_key=SECRET)
    frame = pd.DataFrame({"address": addresses})
    where = cache if isinstance(cache, str) else f"sqlite:///{cache}"
    return frame.geocode.run(provider=provider, cache=where, progress=False,
                             **{**FAST, **options})


@pytest.mark.parametrize("answer", ["surrogate-label", "surrogate-error", "surrogate-400"])
def test_a_lone_surrogate_in_an_answer_is_replaced_and_the_batch_is_stored_and_exported(
        url: str, tmp_path: Path, answer: str) -> None:
    cache = tmp_path / "cache.sqlite"
    result = run(url, ["Städtle 1, Vaduz", f"Landstrasse 1, Vaduz #answer={answer}", "Vaduz"],
                 cache, full_results=True)
    assert result["geocode_status"].tolist()[::2] == ["matched", "matched"]
    row = result.iloc[1]
    if answer == "surrogate-label":
        assert row["geocode_status"] == "matched"
        assert (row["geocode_label"], row["geocode_street"]) == ("Vad\ufffduz", "St\ufffdr")
    else:
        assert row["geocode_status"] == "failed" and "\ufffd" in row["geocode_reason"]
    out = tmp_path / "out.gpkg"
    assert sum(write_results(result, out)) == 3
    assert "\ufffd" in out.read_bytes().decode("utf-8", errors="replace")


def test_a_nul_in_an_answer_is_replaced_and_the_batch_is_stored_on_postgresql_and_exported(
        url: str, tmp_path: Path, postgres_dsn: str) -> None:
    result = run(url, ["Städtle 1, Vaduz", "Landstrasse 1, Vaduz #answer=nul-label"],
                 postgres_dsn, full_results=True)
    assert result["geocode_status"].tolist() == ["matched", "matched"]
    row = result.iloc[1]
    assert (row["geocode_label"], row["geocode_street"]) == ("Va\ufffdduz", "St\ufffdr")
    out = tmp_path / "out.gpkg"
    assert sum(write_results(result, out)) == 2
    labels = pyogrio.read_dataframe(out, layer="geocoded")["geocode_label"].tolist()
    assert "Va\ufffdduz" in labels  # whole, not cut at the NUL


@pytest.mark.parametrize("answer", ["nul-text-400", "nul-text-200"])
def test_a_nul_in_an_error_page_is_replaced_in_the_reason_kept_on_postgresql_and_exported(
        url: str, tmp_path: Path, postgres_dsn: str, caplog: pytest.LogCaptureFixture,
        answer: str) -> None:
    """A NUL in a body that is not JSON went into the row's reason as it came: PostgreSQL
    refused the row's attempts ("cannot write rows' attempts in the cache"), GDAL cut the
    exported reason there."""
    caplog.set_level(logging.WARNING)
    result = run(url, ["Vaduz", f"Landstrasse 1, Vaduz #answer={answer}"], postgres_dsn)
    assert result["geocode_status"].tolist() == ["matched", "failed"]
    reason = result["geocode_reason"].iloc[1]
    assert "bad \ufffd " in reason and "\x00" not in reason
    assert "cannot write" not in caplog.text
    out = tmp_path / "out.gpkg"
    assert sum(write_results(result, out)) == 2
    letters = pyogrio.read_dataframe(out, layer="dead_letters")["geocode_reason"].tolist()
    assert letters == [reason]  # whole, not cut at the NUL


class _CensusBatch(Quiet):
    """The Census batch endpoint, answering records ``0`` and ``1`` with raw CSV (NUL
    included: CSV, unlike JSON, does not escape it)."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.reply(200, [("Content-Type", "text/csv")], (
            b'"0","Landstrasse 1, Vaduz","Match","Exact","4600 SIL\x00VER HILL RD, WASH\x00INGTON, DC,'
            b' 20233","-76.92744,38.845985","613199520","L"\n'
            b'"1","Vaduz","Match","Exact","4600 SILVER HILL RD, WASHINGTON, DC, 20233",'
            b'"-76.92744,38.845985","613199520","L"\n'))


def test_a_nul_in_a_census_batch_csv_is_replaced_and_the_batch_is_stored_on_postgresql_and_exported(
        tmp_path: Path, postgres_dsn: str) -> None:
    """The JSON answers' NULs were made U+FFFD, the Census batch's CSV kept them: PostgreSQL
    refused the label and the cache error ended the batch; GDAL cut the text there."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CensusBatch)
    server.daemon_threads = True
    frame = pd.DataFrame({"address": ["Landstrasse 1, Vaduz", "Vaduz"]})
    with serving(server):
        provider = Census(f"http://127.0.0.1:{server.server_address[1]}")
        result = frame.geocode.run(provider=provider, cache=postgres_dsn, progress=False,
                                   full_results=True, **FAST)
    assert result["geocode_status"].tolist() == ["matched", "matched"]
    row = result.iloc[0]
    assert row["geocode_label"] == "4600 SIL\ufffdVER HILL RD, WASH\ufffdINGTON, DC, 20233"
    assert (row["geocode_street"], row["geocode_locality"]) == ("SIL\ufffdVER HILL RD", "WASH\ufffdINGTON")
    out = tmp_path / "out.gpkg"
    assert sum(write_results(result, out)) == 2
    labels = pyogrio.read_dataframe(out, layer="geocoded")["geocode_label"].tolist()
    assert labels[0] == row["geocode_label"]  # whole, not cut at the NUL


@pytest.mark.parametrize("answer", ["echo-header", "echo-key"])
def test_a_header_that_echoes_the_key_is_not_logged_with_it(
        url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, answer: str) -> None:
    caplog.set_level(logging.DEBUG)
    result = run(url, [f"Landstrasse 1, Vaduz #answer={answer}"], tmp_path / "cache.sqlite")
    assert result["geocode_status"].tolist() == ["matched"]
    headers = [r for r in caplog.records if r.name.startswith("httpcore.")
               and "X-Request" in r.getMessage()]
    assert headers  # httpcore did log the headers: the check below checks something
    assert SECRET not in caplog.text


def test_a_match_whose_place_echoes_the_key_is_stored_and_exported_without_it(
        url: str, tmp_path: Path) -> None:
    """The label was redacted, the place fields were not: the key sat in geocode_street,
    geocode_postcode... of the result, in the cache and in the exported file."""
    cache = tmp_path / "cache.sqlite"
    result = run(url, ["Landstrasse 1, Vaduz #answer=echo-place"], cache, full_results=True)
    row = result.iloc[0]
    assert row["geocode_status"] == "matched"
    assert (row["geocode_label"], row["geocode_street"], row["geocode_locality"]) == (
        "Vaduz ***", "Road ***", "City ***")
    assert row["geocode_place_id"] == row["geocode_postcode"] == row["geocode_housenumber"] == "***"
    out = tmp_path / "out.gpkg"
    assert sum(write_results(result, out)) == 1
    for blob in (result.to_csv().encode(), cache.read_bytes(), out.read_bytes()):
        assert SECRET.encode() not in blob
    again = run(url, ["Landstrasse 1, Vaduz #answer=echo-place"], cache, full_results=True)
    assert SECRET not in again.to_csv() and again["geocode_street"].iloc[0] == "Road ***"


@pytest.mark.parametrize("answer", ["moved-json", "redirect-loop", "moved-relative", "redirect-bare",
                                    "not-modified"])
def test_a_redirect_fails_its_row_with_the_reason_and_is_never_read_as_an_answer(
        url: str, tmp_path: Path, answer: str) -> None:
    result = run(url, ["Vaduz", f"Landstrasse 1, Vaduz #answer={answer}"], tmp_path / "c.sqlite")
    assert result["geocode_status"].tolist() == ["matched", "failed"]
    row = result.iloc[1]
    reason = row["geocode_reason"]
    assert row["geocode_attempts"] == 1  # not retried: the next answer would be the same
    if answer in ("redirect-bare", "not-modified"):  # no address to point to: none is advised
        assert "not an answer (a cache or a proxy on the way?)" in reason
        assert "use the address" not in reason
        assert ("(not modified) to a request that was not conditional" in reason) == (
            answer == "not-modified")
    else:
        assert "answered a redirect (HTTP 3" in reason
        assert "use the address it points to as the base URL" in reason
    if answer == "moved-json":
        assert "to http://127.0.0.1:9/elsewhere/search," in reason
    if answer == "moved-relative":  # an address the reader can use, not "/v2/search"
        assert f"to {url}/v2/search," in reason
    assert SECRET not in result.to_csv()


@pytest.mark.parametrize("answer", ["digit-separators", "other-digits"])
def test_a_coordinate_that_is_not_a_decimal_number_fails_its_row(url: str, tmp_path: Path,
                                                                answer: str) -> None:
    result = run(url, ["Vaduz", f"Landstrasse 1, Vaduz #answer={answer}"], tmp_path / "c.sqlite")
    assert result["geocode_status"].tolist() == ["matched", "failed"]
    assert "is not a decimal number" in result["geocode_reason"].iloc[1]


def test_a_gzip_bomb_fails_its_row_without_ever_holding_more_than_the_cap(url: str,
                                                                          tmp_path: Path) -> None:
    """httpx inflates each chunk it reads in one go: a body gzipped twice, a few hundred
    bytes, took 100 MB (and as much as its sender liked) before the cap was checked."""
    tracemalloc.start()
    try:
        result = run(url, ["Vaduz", "Landstrasse 1, Vaduz #answer=gzip-bomb"], tmp_path / "c.sqlite",
                     max_response_bytes=1_000_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result["geocode_status"].tolist() == ["matched", "failed"]
    assert "answered more than 1,000,000 bytes" in result["geocode_reason"].iloc[1]
    assert peak < 20_000_000  # the cap, a piece beyond it, and the run's own: not 100 MB


@pytest.mark.parametrize("answer", ["gzip-twice", "deflate-raw"])
def test_an_answer_in_codings_stacked_or_raw_is_read(url: str, tmp_path: Path, answer: str) -> None:
    result = run(url, [f"Landstrasse 1, Vaduz #answer={answer}"], tmp_path / "c.sqlite")
    assert result["geocode_status"].tolist() == ["matched"]



@pytest.mark.parametrize("answer", ["gzip-cut", "gzip-cut-mid", "deflate-cut", "gzip-gzip-cut"])
def test_a_compressed_answer_that_ends_before_its_stream_fails_its_row_saying_so(
        url: str, tmp_path: Path, answer: str) -> None:
    """A gzip body without its trailer was read as whole: its CRC was never checked, and
    the row matched (cut mid-stream, the reason said "not JSON", not that it was cut)."""
    result = run(url, ["Vaduz", f"Landstrasse 1, Vaduz #answer={answer}"], tmp_path / "c.sqlite")
    assert result["geocode_status"].tolist() == ["matched", "failed"]
    reason = result["geocode_reason"].iloc[1]
    assert "sent a body that cannot be decoded" in reason and "ends before" in reason, reason


def test_an_empty_body_under_a_coding_is_said_to_be_empty(url: str, tmp_path: Path) -> None:
    result = run(url, ["Landstrasse 1, Vaduz #answer=gzip-empty"], tmp_path / "c.sqlite")
    assert result["geocode_status"].tolist() == ["failed"]
    assert "sent an empty body (HTTP 200" in result["geocode_reason"].iloc[0]


class _Negotiating(Quiet):
    """A server that picks the coding of its answer from the request's ``Accept-Encoding``,
    as CDNs do: gzip when asked for, and with no such header (any coding is then acceptable,
    RFC 9110) Brotli (the body here is no real Brotli: nothing here reads Brotli). It keeps
    every ``Accept-Encoding`` it got."""

    accepted: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        offered = self.headers.get("Accept-Encoding", "")
        type(self).accepted.append(offered)
        if "gzip" in [coding.strip() for coding in offered.split(",")]:
            self.reply(200, [("Content-Encoding", "gzip")], gzip.compress(GOOD))
        else:
            self.reply(200, [("Content-Encoding", "br")], b"\x1b\x3c\x00\xf8\xa5\x40")


def test_every_request_asks_for_the_codings_it_can_read(tmp_path: Path) -> None:
    """Requests are built apart from the client and carried no Accept-Encoding: a server
    may then answer in any coding, and one in Brotli failed every row as not JSON."""
    _Negotiating.accepted = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Negotiating)
    server.daemon_threads = True
    with serving(server):
        result = run(f"http://127.0.0.1:{server.server_address[1]}", ["Vaduz"], tmp_path / "c.sqlite")
    assert result["geocode_status"].tolist() == ["matched"]
    assert _Negotiating.accepted == ["gzip, deflate"]
