"""Magic tokens: how an address (or ``ProviderSimulator.fault``) names a fault. Pure, stdlib."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["FAULTS", "ROW_MARKERS", "Token", "find_tokens", "parse_fault", "strip_tokens"]

#: Every fault: what the server does.
FAULTS: Final[Mapping[str, str]] = {
    "malformed": "200 with a body that is not JSON",
    "error": "200 whose body says the lookup failed, in the provider's words "
             '(Nominatim: {"error": "Unable to geocode"}; Google: UNKNOWN_ERROR; ArcGIS: an error object)',
    "500": "500 Internal Server Error",
    "503": "503 with Retry-After",
    "429": "429 with Retry-After (does not count toward the rate limit)",
    "reset": "the connection is closed without an answer",
    "timeout": "silence for hang_seconds (interrupted by stop()), then the answer",
    "trickle": "200, the valid body one trickle_chunk_bytes chunk every trickle_interval_seconds",
    "trickleheaders": "the status line and headers trickled the same way, then the body",
    "huge": "200 with huge_body_bytes of a valid body (one result, an enormous label)",
    "badgzip": "200 with Content-Encoding: gzip and a body that is not gzip",
    "overflow": "200 whose lat/lon are 400-digit JSON numbers (float() overflows)",
    "bignum": "200 whose lat is a 5000-digit JSON number (json.loads refuses it)",
    "retryafterhuge": "429 whose Retry-After has 4000 digits",
    "retryafterjunk": "429 whose Retry-After is garbage",
    "echo400": "400 whose error message echoes the request target, API key included",
    "resetbody": "200 head with a Content-Length, half the body, then the connection closes",
    "html": "200 with Content-Type text/html: a captive portal page",
    "poison": "500 Internal Server Error; in a batch, any row with it fails the whole batch",
    "status=NNN": "status NNN (200-599) with the provider's own small error body",
}

#: Row markers: not faults, but data a batch answer reacts to, row by row.
ROW_MARKERS: Final[Mapping[str, str]] = {
    "badrow": "batch: this record is malformed in an otherwise good answer",
    "tie": "Census batch: this record answers Tie",
    "absent": "Census batch: this record is left out of the answer",
}

def _alternatives(names: list[str]) -> str:
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True) if n != "status=NNN")


_NAMES = _alternatives([*FAULTS, *ROW_MARKERS])
_TOKEN_RE = re.compile(rf"#({_NAMES}|status=[2-5]\d\d)(?:x(\d+))?(?!\w)", re.IGNORECASE)
_FAULT_RE = re.compile(rf"#?({_alternatives(list(FAULTS))}|status=[2-5]\d\d)", re.IGNORECASE)


@dataclass(frozen=True)
class Token:
    """A failure-scripting token: ``#503x2`` is ``Token("503", 2)``; ``#503`` has ``times=None``."""

    name: str
    times: int | None = None


def find_tokens(text: str) -> list[Token]:
    """The magic tokens in ``text``, in order of appearance.

    >>> find_tokens("Städtle 38 #503x2 #TIMEOUT #status=418")
    [Token(name='503', times=2), Token(name='timeout', times=None), Token(name='status=418', times=None)]
    """
    return [
        Token(m.group(1).casefold(), int(m.group(2)) if m.group(2) else None)
        for m in _TOKEN_RE.finditer(text)
    ]


def strip_tokens(text: str) -> str:
    """``text`` without its magic tokens (whitespace is collapsed later by normalisation)."""
    return _TOKEN_RE.sub(" ", text)


def parse_fault(name: str) -> str:
    """The canonical name of a simulator-wide fault (``"#Trickle"`` -> ``"trickle"``).

    >>> parse_fault("status=502")
    'status=502'
    >>> parse_fault("#nope")
    Traceback (most recent call last):
    ...
    ValueError: unknown fault '#nope': expected one of malformed, error, ...
    """
    found = _FAULT_RE.fullmatch(name.strip()) if isinstance(name, str) else None
    if found is None:
        raise ValueError(f"unknown fault {name!r}: expected one of {', '.join(FAULTS)}")
    return found.group(1).casefold()
