"""The hostile world, scripted: the faults real providers, servers and proxies commit.

A fault is named by a magic token in the address (``"Städtle 38, Vaduz #trickle"``), or
switched on for every search with ``ProviderSimulator.fault = "trickle"``. A token takes
``xN`` (``#503x2``): only the first N requests of that exact query are affected, then it
answers normally; several counted tokens run in sequence (``#503x2 #429x1``).

:data:`FAULTS` says what the server does for each (``docs/testing.md`` also says what a
robust client should do). Faults apply after authentication, the rate limit, the daily
cap and the parameter checks, and speak each provider's dialect: ``#429`` is a 429 in the
provider's own error form, ``#huge`` inflates its own label field.

In a batch, the first row whose token is active decides the whole batch's fault
(``#poison`` is the poison pill: 500); :data:`ROW_MARKERS` (``#badrow``, ``#tie``,
``#absent``) spoil one record of an otherwise good answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from geotoolkit.testing._reply import Answer, Delivery, PaddedBody, Reply, error_reply
from geotoolkit.testing._tokens import (
    FAULTS,
    ROW_MARKERS,
    Token,
    find_tokens,
    parse_fault,
    strip_tokens,
)

__all__ = [
    "FAULTS",
    "REFUNDED",
    "ROW_MARKERS",
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
    #: The provider's own refusal with a given status (``error(status, message, retry_after)``).
    error: Callable[[int, str, str | None], Reply] = field(default=lambda status, message, retry_after:
                                                           error_reply(status, message, retry_after))
    #: The provider's 200 whose body says the lookup failed (``#error``).
    in_body_error: Reply = field(default_factory=lambda: Reply(
        200, json.dumps({"error": "Unable to geocode"}).encode()))


def _trickled(s: Situation, delivery: Delivery) -> Reply:
    return Reply(s.answer.status, render=s.answer.render, delivery=delivery,
                 trickle_interval_seconds=s.trickle_interval_seconds,
                 trickle_chunk_bytes=s.trickle_chunk_bytes)


def _mark(name: str) -> str:
    return f"\ue000GEOTOOLKIT-FAULT-{name}\ue000"  # never produced by real data


def _spliced(answer: Answer, fields: Mapping[str, str]) -> list[bytes]:
    """The answer cut where ``fields`` (label, lon, lat) go, with raw text in between.

    In JSON a placeholder stands for a whole value (the raw text replaces it, quotes and
    all); in CSV it sits inside a field.
    """
    body = answer.build({name: _mark(name) for name in fields})
    found = {name: _quoted(answer, name) for name in fields}
    pattern = re.compile(b"|".join(re.escape(token) for token in found.values()))
    raw = {token: fields[name].encode() for name, token in found.items()}
    out: list[bytes] = []
    last = 0
    for match in pattern.finditer(body):
        out += [body[last:match.start()], raw[match.group(0)]]
        last = match.end()
    return [*out, body[last:]]


def _quoted(answer: Answer, name: str) -> bytes:
    mark = _mark(name)
    return (json.dumps(mark, ensure_ascii=False) if answer.json_values else mark).encode()


def huge_body(answer: Answer, size: int) -> PaddedBody:
    """Valid JSON (or CSV) of about ``size`` bytes: one result whose label is ``x`` * N."""
    quote = '"' if answer.json_values else ""
    prefix, quote_open, suffix = _spliced(answer, {"label": quote})
    head, tail = prefix + quote_open, quote.encode() + suffix
    return PaddedBody(head, max(0, size - len(head) - len(tail)), tail)


def numeric_body(answer: Answer, digits: int, *, lon: bool = True) -> bytes:
    """One result whose ``lat`` (and ``lon``) are JSON integers with ``digits`` digits."""
    fields = {"lat": "4" + "7" * (digits - 1)}
    if lon:
        fields["lon"] = "9" + "5" * (digits - 1)
    return b"".join(_spliced(answer, fields))


def _echo(s: Situation) -> Reply:
    shown = ", ".join(f"{k}={v}" for k, v in s.params.items())
    return s.error(400, f"invalid request: GET {s.target} (parameters: {shown})", None)


def _status(code: int, s: Situation) -> Reply:
    if code in (204, 304):
        return Reply(code)
    return s.error(code, f"simulated status {code}", None)


def fault_reply(name: str, s: Situation) -> Reply:
    """The reply for fault ``name`` (a key of :data:`FAULTS`, or ``status=NNN``)."""
    if name.startswith("status="):
        return _status(int(name.partition("=")[2]), s)
    simple: dict[str, Callable[[], Reply]] = {
        "malformed": lambda: Reply(200, _MALFORMED_BODY),
        "error": lambda: s.in_body_error,
        "500": lambda: s.error(500, "internal server error", None),
        "503": lambda: s.error(503, "service unavailable", s.retry_after),
        "429": lambda: s.error(429, "rate limit exceeded", s.retry_after),
        "reset": lambda: Reply(0, delivery="close"),
        "retryafterhuge": lambda: s.error(429, "rate limit exceeded", "9" * _RETRY_AFTER_DIGITS),
        "retryafterjunk": lambda: s.error(429, "rate limit exceeded", _RETRY_AFTER_JUNK),
        "html": lambda: Reply(200, _HTML_PAGE, content_type="text/html; charset=utf-8"),
        "echo400": lambda: _echo(s),
        "poison": lambda: s.error(500, "internal server error: a poisoned record failed the batch",
                                  None),
    }
    if name in simple:
        return simple[name]()
    answer = s.answer
    kind = answer.content_type
    if name == "timeout":
        return Reply(answer.status, render=answer.render, hang_seconds=s.hang_seconds,
                     content_type=kind)
    if name == "trickle":
        return replace(_trickled(s, "trickle"), content_type=kind)
    if name == "trickleheaders":
        return replace(_trickled(s, "trickle-headers"), content_type=kind)
    if name == "huge":
        return Reply(answer.status, render=lambda: huge_body(answer, s.huge_body_bytes),
                     content_type=kind)
    if name == "badgzip":
        return Reply(answer.status, render=answer.render, headers=(("Content-Encoding", "gzip"),),
                     content_type=kind)
    if name == "overflow":
        return Reply(answer.status, render=lambda: numeric_body(answer, _OVERFLOW_DIGITS),
                     content_type=kind)
    if name == "bignum":
        return Reply(answer.status, render=lambda: numeric_body(answer, _BIGNUM_DIGITS, lon=False),
                     content_type=kind)
    if name == "resetbody":
        return Reply(answer.status, render=answer.render, delivery="half", content_type=kind)
    raise ValueError(f"unknown fault {name!r}")

