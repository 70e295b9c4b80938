"""Small HTTP servers of the tests' own on 127.0.0.1: a quiet handler with one call for a
whole answer, and a server serving in a thread for the length of a ``with`` block."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar

__all__ = ["Quiet", "serving"]

S = TypeVar("S", bound=ThreadingHTTPServer)


class Quiet(BaseHTTPRequestHandler):
    """A request handler that logs nothing, with one call for a whole answer."""

    def reply(self, status: int, headers: Sequence[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(server: S) -> Iterator[S]:
    """``server`` serving in a thread inside the block; shut down and closed after it."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
