"""The hostile world, scripted: the faults real providers, servers and proxies commit.

A fault is named by a magic token in the address (``"Städtle 38, Vaduz #trickle"``), or
switched on for every search with ``ProviderSimulator.fault = "trickle"``. A token takes
``xN`` (``#503x2``): only the first N requests of that exact query are affected, then it
answers normally; several counted tokens run in sequence (``#503x2 #429x1``).

:data:`FAULTS` says what the server does for each (``docs/testing.md`` also says what a
robust client should do). Faults apply after authentication, the rate limit, the daily
cap and the parameter checks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from geotoolkit.testing._reply import Answer, Delivery, PaddedBody, Reply, error_reply
from geotoolkit.testing._tokens import FAULTS, Token, find_tokens, parse_fault, strip_tokens

__all__ = [
    "FAULTS",
    "REFUNDED",
    "SUCCEEDS",
    "Situation",
    "Token",
    "fault_reply",
    "find_tokens",
    "parse_fault",
    "strip_tokens",
]

#: Faults whose client gets a complete, valid answer: they count toward the daily cap.
SUCCEEDS: Final = frozenset({"timeout", "trickle", "trickleheaders", "huge"})
#: Scripted 429s: they never count toward the rate limit.
REFUNDED: Final = frozenset({"429", "retryafterhuge", "retryafterjunk"})

_MALFORMED_BODY: Final = b"<html><body><h1>502 Bad Gateway</h1>upstream glitch, not JSON"
_HTML_PAGE: Final = (
    b"<!DOCTYPE html>\n<html><head><title>Sign in to the network</title></head>\n"
    b"<body><h1>Welcome to Hotel WiFi</h1><p>Please accept the terms of use to continue."
    b"</p><form method=post action=/login><input type=submit value=Accept></form>"
    b"</body></html>\n"
)
_OVERFLOW_DIGITS: Final = 400
_BIGNUM_DIGITS: Final = 5000
_RETRY_AFTER_DIGITS: Final = 4000
_RETRY_AFTER_JUNK: Final = "whenever (NaN)"
_MARK: Final = "\ue000GEOTOOLKIT-FAULT\ue000"  # never produced by json.dumps of real data


@dataclass(frozen=True)
class Situation:
    """What a fault may need to know about the request it spoils."""

    answer: Answer
    target: str  #: the request target as received (path and query string)
    params: Mapping[str, str]
    retry_after: str | None  #: the Retry-After the limiter would send now
    hang_seconds: float
    trickle_interval_seconds: float
    trickle_chunk_bytes: int
    huge_body_bytes: int


def _trickled(s: Situation, delivery: Delivery) -> Reply:
    return Reply(200, render=s.answer.render, delivery=delivery,
                 trickle_interval_seconds=s.trickle_interval_seconds,
                 trickle_chunk_bytes=s.trickle_chunk_bytes)


def _hit(answer: Answer) -> dict[str, object]:
    """The answer's single result (a known place even when the query has no match)."""
    hits = answer.hits()
    if hits:
        return hits[0]
    fallback = Answer("Städtle 38, 9490 Vaduz", {}, answer.fmt, answer.addressdetails, None)
    return fallback.hits()[0]


def _spliced(answer: Answer, fields: Mapping[str, str]) -> list[bytes]:
    """The one-result JSON cut where ``fields`` go, with raw JSON text in between."""
    hit = _hit(answer)
    for name in fields:
        hit[name] = _MARK
    text = json.dumps([hit], ensure_ascii=False)
    parts = text.split(json.dumps(_MARK, ensure_ascii=False))
    out = [parts[0].encode()]
    for raw, part in zip(fields.values(), parts[1:], strict=True):
        out += [raw.encode(), part.encode()]
    return out


def huge_body(answer: Answer, size: int) -> PaddedBody:
    """Valid JSON of about ``size`` bytes: one result whose display_name is ``x`` * N."""
    prefix, quote_open, suffix = _spliced(answer, {"display_name": '"'})
    head, tail = prefix + quote_open, b'"' + suffix
    return PaddedBody(head, max(0, size - len(head) - len(tail)), tail)


def numeric_body(answer: Answer, digits: int, *, lon: bool = True) -> bytes:
    """One result whose ``lat`` (and ``lon``) are JSON integers with ``digits`` digits."""
    fields = {"lat": "4" + "7" * (digits - 1)}
    if lon:
        fields["lon"] = "9" + "5" * (digits - 1)
    return b"".join(_spliced(answer, fields))


def _echo(s: Situation) -> Reply:
    shown = ", ".join(f"{k}={v}" for k, v in s.params.items())
    return error_reply(400, f"invalid request: GET {s.target} (parameters: {shown})")


def _status(code: int) -> Reply:
    if code in (204, 304):
        return Reply(code)
    return error_reply(code, f"simulated status {code}")


def fault_reply(name: str, s: Situation) -> Reply:
    """The reply for fault ``name`` (a key of :data:`FAULTS`, or ``status=NNN``)."""
    if name.startswith("status="):
        return _status(int(name.partition("=")[2]))
    simple: dict[str, Callable[[], Reply]] = {
        "malformed": lambda: Reply(200, _MALFORMED_BODY),
        "error": lambda: Reply(200, json.dumps({"error": "Unable to geocode"}).encode()),
        "500": lambda: error_reply(500, "internal server error"),
        "503": lambda: error_reply(503, "service unavailable", s.retry_after),
        "429": lambda: error_reply(429, "rate limit exceeded", s.retry_after),
        "reset": lambda: Reply(0, delivery="close"),
        "retryafterhuge": lambda: error_reply(429, "rate limit exceeded", "9" * _RETRY_AFTER_DIGITS),
        "retryafterjunk": lambda: error_reply(429, "rate limit exceeded", _RETRY_AFTER_JUNK),
        "html": lambda: Reply(200, _HTML_PAGE, content_type="text/html; charset=utf-8"),
        "echo400": lambda: _echo(s),
    }
    if name in simple:
        return simple[name]()
    answer = s.answer
    if name == "timeout":
        return Reply(200, render=answer.render, hang_seconds=s.hang_seconds)
    if name == "trickle":
        return _trickled(s, "trickle")
    if name == "trickleheaders":
        return _trickled(s, "trickle-headers")
    if name == "huge":
        return Reply(200, render=lambda: huge_body(answer, s.huge_body_bytes))
    if name == "badgzip":
        return Reply(200, render=answer.render, headers=(("Content-Encoding", "gzip"),))
    if name == "overflow":
        return Reply(200, render=lambda: numeric_body(answer, _OVERFLOW_DIGITS))
    if name == "bignum":
        return Reply(200, render=lambda: numeric_body(answer, _BIGNUM_DIGITS, lon=False))
    if name == "resetbody":
        return Reply(200, render=answer.render, delivery="half")
    raise ValueError(f"unknown fault {name!r}")

