"""What the simulator answers: a ``Reply`` decided under the lock, its body rendered after.

Private to :mod:`geotoolkit.testing`; stdlib only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Final, Literal

__all__ = [
    "JSON",
    "RESET_STATUS",
    "TEXT",
    "Answer",
    "Body",
    "Delivery",
    "Marks",
    "PaddedBody",
    "Reply",
    "error_reply",
    "json_reply",
]

#: Status logged for a request answered by dropping the connection.
RESET_STATUS: Final = 0

JSON: Final = "application/json; charset=utf-8"
TEXT: Final = "text/plain; charset=utf-8"

#: How a reply goes on the wire:
#: ``normal``; ``close`` (drop the connection, no answer); ``rst`` (reset it: TCP RST);
#: ``hang`` (no answer until the outage ends or the server stops, then drop);
#: ``trickle`` (headers, then the body a small chunk at a time); ``trickle-headers`` (the
#: head a small chunk at a time, then the body); ``half`` (the whole head, half the body,
#: then close).
Delivery = Literal["normal", "close", "rst", "hang", "trickle", "trickle-headers", "half"]

_DROPPED: Final = frozenset({"close", "rst", "hang", "half"})
_PAD_CHUNK: Final = b"x" * 65536


@dataclass(frozen=True)
class PaddedBody:
    """A body too big to hold: ``prefix``, ``pad`` bytes of ``x``, then ``suffix``."""

    prefix: bytes
    pad: int
    suffix: bytes

    @property
    def length(self) -> int:
        return len(self.prefix) + self.pad + len(self.suffix)

    def chunks(self) -> Iterator[bytes]:
        """The body in pieces of at most 64 KiB (one reused padding chunk)."""
        yield self.prefix
        left = self.pad
        while left > 0:
            piece = _PAD_CHUNK if left >= len(_PAD_CHUNK) else _PAD_CHUNK[:left]
            left -= len(piece)
            yield piece
        yield self.suffix


Body = bytes | PaddedBody


#: Placeholders by field (``label``, ``lon``, ``lat``) put into an answer in place of the
#: real values, for faults that splice raw text into a valid body.
Marks = Mapping[str, str]


@dataclass(frozen=True)
class Answer:
    """A normal answer, decided under the lock and rendered outside it.

    ``build(marks)`` renders the body; with ``marks``, the first result carries the
    placeholders instead of its label and coordinates (a known place stands in when
    nothing was found). ``json_values``: a placeholder replaces a whole JSON value (it
    appears quoted); else it appears as raw text inside a field (CSV).
    """

    build: Callable[[Marks], bytes]
    status: int = 200
    content_type: str = JSON
    json_values: bool = True

    def render(self) -> bytes:
        return self.build({})


@dataclass(frozen=True)
class Reply:
    """One decided reply. ``render`` (when set) produces the body outside the lock."""

    status: int
    body: Body = b""
    content_type: str = JSON
    retry_after: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    delivery: Delivery = "normal"
    hang_seconds: float = 0.0  #: ``#timeout``: silence before answering
    trickle_interval_seconds: float = 0.5
    trickle_chunk_bytes: int = 16
    epoch: int = 0  #: ``hang``: the outage epoch whose end releases the request
    render: Callable[[], Body] | None = field(default=None, compare=False)

    @property
    def logged_status(self) -> int:
        """The status logged: ``RESET_STATUS`` when the client gets no complete answer."""
        return RESET_STATUS if self.delivery in _DROPPED else self.status

    @property
    def length(self) -> int:
        body = self.body
        return body.length if isinstance(body, PaddedBody) else len(body)

    def rendered(self) -> Reply:
        """This reply with its body produced (a no-op when there is nothing to render)."""
        if self.render is None:
            return self
        return replace(self, body=self.render(), render=None)


def error_reply(status: int, message: str, retry_after: str | None = None) -> Reply:
    """A small JSON error: ``{"error": {"code": status, "message": message}}``."""
    body = {"error": {"code": status, "message": message}}
    return Reply(status, json.dumps(body).encode(), retry_after=retry_after)


def json_reply(status: int, body: object, *, headers: tuple[tuple[str, str], ...] = (),
               content_type: str = JSON) -> Reply:
    """A reply whose body is ``body`` as JSON (UTF-8, non-ASCII kept)."""
    return Reply(status, json.dumps(body, ensure_ascii=False).encode("utf-8"),
                 content_type=content_type, headers=headers)
