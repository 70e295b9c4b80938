"""The transport's own inflater (``engine/http.py``): content codings undone piece by piece,
whatever the network's chunks (pure: bytes in, bytes out; the bomb is in tests/faults)."""

from __future__ import annotations

import gzip
import zlib

import pytest

from geotoolkit.engine.http import _PIECE, _codings, _decoded

TEXT = b'[{"lat": "47.141", "lon": "9.5215", "display_name": "Vaduz"}]' * 50


def _raw_deflate(data: bytes) -> bytes:
    deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return deflate.compress(data) + deflate.flush()


def _inflated(header: list[str], body: bytes, chunk: int) -> bytes:
    codings = _codings(header)
    return b"".join(piece for at in range(0, len(body), chunk)
                    for piece in _decoded(codings, body[at:at + chunk]))


@pytest.mark.parametrize(("header", "body"), [
    (["gzip"], gzip.compress(TEXT)),
    (["x-gzip"], gzip.compress(TEXT)),
    (["deflate"], zlib.compress(TEXT)),
    (["Deflate"], _raw_deflate(TEXT)),  # raw, as some servers send it
    (["gzip", "deflate"], zlib.compress(gzip.compress(TEXT))),  # applied in that order
    (["identity", "br"], TEXT),  # nothing to undo; a coding not asked for is left as it is
], ids=["gzip", "x-gzip", "deflate", "raw-deflate", "gzip-deflate", "identity-br"])
@pytest.mark.parametrize("chunk", [1, 2, 7, 65_536])
def test_a_body_is_inflated_whatever_its_chunks(header: list[str], body: bytes, chunk: int) -> None:
    """A raw deflate body whose first chunk was one byte was taken for a zlib stream, then
    refused ("incorrect header check") at its second byte."""
    assert _inflated(header, body, chunk) == TEXT


def test_no_piece_is_larger_than_the_step() -> None:
    bomb = gzip.compress(bytes(10 * _PIECE))
    pieces = list(_decoded(_codings(["gzip"]), bomb))
    assert sum(map(len, pieces)) == 10 * _PIECE and max(map(len, pieces)) <= _PIECE
