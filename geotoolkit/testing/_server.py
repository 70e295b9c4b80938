"""The simulator's HTTP side: a small threading HTTP/1.1 server on 127.0.0.1.

It asks its owner (``Owner._handle``) what to answer and puts that on the wire, fault and
all: trickled heads and bodies, streamed huge bodies, half bodies, dropped and reset
connections, requests held until an outage ends. It can stop listening while keeping its
port reserved (``refuse`` / ``resume``), so a recovered server is back on the same URL.
"""

from __future__ import annotations

import contextlib
import http
import json
import socket
import socketserver
import struct
import sys
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from http.server import ThreadingHTTPServer
from typing import Any, ClassVar, Final, Protocol, cast

from geotoolkit.testing._reply import PaddedBody, Reply

__all__ = ["HOST", "Owner", "Server", "refusing_url", "unused_url"]

HOST: Final = "127.0.0.1"
_MAX_LINE: Final = 65536
_MAX_HEADERS: Final = 100
_MAX_BODY: Final = 64 * 1024 * 1024  # a batch upload of 10,000 records is far smaller
_POLL_SECONDS: Final = 0.02
_NO_BODY: Final = frozenset({204, 304})


class Owner(Protocol):
    """What the server needs from the simulator."""

    def _handle(self, method: str, target: str, content_type: str, body: bytes
                ) -> tuple[float, Reply, float]:
        """``(now, reply, delay_seconds)`` for one request; logs it."""

    def _wait_outage_change(self, epoch: int) -> None:
        """Block until the outage ``epoch`` is over (or the simulator stops)."""

    def _now(self) -> float:
        """The simulator's clock."""


def unused_url() -> str:
    """A loopback URL nobody listens on: connecting to it is refused.

    The port was free a moment ago; nothing stops another program from taking it later
    (use :func:`refusing_url` to hold it for the duration of a test).

    >>> unused_url().startswith("http://127.0.0.1:")
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return f"http://{HOST}:{sock.getsockname()[1]}"


@contextlib.contextmanager
def refusing_url() -> Iterator[str]:
    """A loopback URL whose port is held (bound, never listening) while the block runs.

    >>> import httpx
    >>> with refusing_url() as url:
    ...     try:
    ...         httpx.get(url)
    ...     except httpx.ConnectError:
    ...         print("refused")
    refused
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        yield f"http://{HOST}:{sock.getsockname()[1]}"


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


class Server(ThreadingHTTPServer):
    """A threading server that tracks its connections so it can drop or reset them."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, owner: Owner, port: int) -> None:
        self.owner = owner
        self.stopping = threading.Event()
        self._conn_lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._resets: set[socket.socket] = set()
        self._handlers: set[threading.Thread] = set()
        self._serving: threading.Thread | None = None
        super().__init__((HOST, port), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a reverse DNS lookup (getfqdn); skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    # ------------------------------------------------------------------ serving

    def start_serving(self) -> None:
        """Run the accept loop in a daemon thread."""
        thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": _POLL_SECONDS},
                                  name=f"geotoolkit-simulator:{self.server_port}", daemon=True)
        self._serving = thread
        thread.start()

    def stop_serving(self) -> None:
        """End the accept loop (no-op when it is not running)."""
        thread, self._serving = self._serving, None
        if thread is not None:
            self.shutdown()
            thread.join()

    def refuse(self) -> None:
        """Stop listening and drop every connection, keeping the port bound: connecting
        is refused until :meth:`resume`."""
        self.stop_serving()
        self.socket.close()
        reservation = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            reservation.bind((HOST, self.server_port))
        except OSError as exc:
            reservation.close()
            raise RuntimeError(f"could not keep port {self.server_port} reserved: {exc}") from exc
        self.socket = reservation
        self.abort_connections()

    def resume(self) -> None:
        """Listen again, on the same port, after :meth:`refuse`."""
        self.socket.listen(self.request_queue_size)
        self.start_serving()

    # ------------------------------------------------------------------ connections

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._run_handler, args=(request, client_address), daemon=True,
            name=f"geotoolkit-simulator-handler:{self.server_port}",
        )
        with self._conn_lock:
            self._connections.add(request)
            self._handlers.add(thread)
        thread.start()

    def _run_handler(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._conn_lock:
                self._connections.discard(request)
                self._handlers.discard(threading.current_thread())

    def reset_on_close(self, conn: socket.socket) -> None:
        """Close ``conn`` with a TCP RST instead of a FIN."""
        with contextlib.suppress(OSError):
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with self._conn_lock:
            self._resets.add(conn)

    def shutdown_request(self, request: Any) -> None:
        with self._conn_lock:
            reset = request in self._resets
            self._resets.discard(request)
        if reset:  # no shutdown(SHUT_WR): that would send a FIN before the RST
            self.close_request(request)
        else:
            super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # client went away, or stop() dropped the connection
        super().handle_error(request, client_address)

    def abort_connections(self) -> None:
        with self._conn_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def join_handlers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._conn_lock:
            handlers = list(self._handlers)
        for thread in handlers:
            thread.join(max(0.0, deadline - time.monotonic()))


class _Handler(socketserver.StreamRequestHandler):
    """A small HTTP/1.1 keep-alive handler: GET, HEAD and POST (batch uploads), bodies by
    ``Content-Length`` or chunked.

    ``http.server.BaseHTTPRequestHandler`` parses headers with the email package, which
    costs more than everything else a request does here; this reads only what it needs.
    """

    server_version: ClassVar[str] = "geotoolkit-simulator/0.1"
    disable_nagle_algorithm = True
    close_connection: bool = True

    @property
    def _server(self) -> Server:
        return cast(Server, self.server)

    def handle(self) -> None:
        self.close_connection = False
        while not self.close_connection:
            self._handle_one()

    def _read_head(self, close: bool) -> tuple[bool, int, str] | None:
        """Read the headers: ``(close, body length, content type)``, or ``None`` after
        answering an error. The length is -1 for a chunked body, -2 for one we refuse."""
        length, content_type = 0, ""
        for _ in range(_MAX_HEADERS):
            header = self.rfile.readline(_MAX_LINE + 1)
            if header in (b"\r\n", b"\n", b""):
                return close, length, content_type
            name, _, value = header.partition(b":")
            name = name.strip().lower()
            if name == b"connection":
                tokens = {t.strip() for t in value.lower().split(b",")}
                if b"close" in tokens:
                    close = True
                elif b"keep-alive" in tokens:
                    close = False
            elif name == b"content-length":
                length = int(value.strip()) if value.strip().isdigit() else -2
            elif name == b"content-type":
                content_type = value.strip().decode("latin-1")
            elif name == b"transfer-encoding":
                length = -1 if value.strip().lower() == b"chunked" else -2
        self._plain(431, "too many headers", close=True)
        return None

    def _read_chunked(self) -> bytes | None:
        """A chunked body (``None``: malformed or too big)."""
        body = bytearray()
        while True:
            size_line = self.rfile.readline(_MAX_LINE + 1).split(b";")[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                return None
            if size == 0:
                while self.rfile.readline(_MAX_LINE + 1) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(body)
            if len(body) + size > _MAX_BODY:
                return None
            body += self.rfile.read(size)
            self.rfile.readline(_MAX_LINE + 1)

    def _read_body(self, length: int) -> bytes | None:
        if length == -1:
            return self._read_chunked()
        if length < 0 or length > _MAX_BODY:
            return None
        return self.rfile.read(length) if length else b""

    def _handle_one(self) -> None:
        line = self.rfile.readline(_MAX_LINE + 1)
        if not line:
            self.close_connection = True
            return
        if len(line) > _MAX_LINE:
            self._plain(414, "request line too long", close=True)
            return
        parts = line.split()
        if not parts:  # tolerate a stray CRLF between requests
            return
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            self._plain(400, "bad request line", close=True)
            return
        method, target, version = parts
        head = self._read_head(close=version != b"HTTP/1.1")
        if head is None:
            return
        close, length, content_type = head
        body = self._read_body(length)
        if body is None:  # a body we will not read: answer, then drop the connection
            self._plain(413, "request body refused (too big, or an unknown transfer coding)",
                        close=True)
            return
        self.close_connection = close
        if method in (b"GET", b"HEAD", b"POST"):
            self._serve(method.decode("latin-1"), target.decode("latin-1"), content_type, body)
        else:
            self._plain(405, "only GET, HEAD and POST are supported", close=close)

    def _plain(self, code: int, message: str, close: bool) -> None:
        self.close_connection = self.close_connection or close
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        self._write(Reply(code, body), self._server.owner._now(), head=False)

    def _serve(self, method: str, target: str, content_type: str, body: bytes) -> None:
        server = self._server
        head = method == "HEAD"
        now, reply, delay = server.owner._handle(method, target, content_type, body)
        if delay > 0 and server.stopping.wait(delay):
            self.close_connection = True
            return
        if reply.delivery in ("close", "rst", "hang"):
            self.close_connection = True
            if reply.delivery == "rst":
                server.reset_on_close(self.connection)
            elif reply.delivery == "hang":
                server.owner._wait_outage_change(reply.epoch)
            return
        self._write(reply, now, head)

    def _head(self, reply: Reply, now: float) -> bytes:
        lines = [
            f"HTTP/1.1 {reply.status} {_phrase(reply.status)}",
            f"Date: {formatdate(now, usegmt=True)}",
            f"Server: {self.server_version}",
            f"Content-Type: {reply.content_type}",
            "Access-Control-Allow-Origin: *",
        ]
        if reply.status not in _NO_BODY:
            lines.append(f"Content-Length: {reply.length}")
        lines += [f"{name}: {value}" for name, value in reply.headers]
        if reply.retry_after is not None:
            lines.append(f"Retry-After: {reply.retry_after}")
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _trickle(self, data: bytes, reply: Reply, *, wait_first: bool) -> bool:
        """Send ``data`` a chunk at a time; ``False`` when stop() interrupted it."""
        step = reply.trickle_chunk_bytes
        for start in range(0, len(data), step):
            if (start or wait_first) and self._server.stopping.wait(reply.trickle_interval_seconds):
                self.close_connection = True
                return False
            self.wfile.write(data[start:start + step])
        return True

    def _write(self, reply: Reply, now: float, head: bool) -> None:
        delivery, body = reply.delivery, reply.body
        head_bytes = self._head(reply, now)
        if delivery == "trickle-headers":
            if not self._trickle(head_bytes, reply, wait_first=False):
                return
            head_bytes = b""
        if head or reply.status in _NO_BODY:
            self.wfile.write(head_bytes)
        elif isinstance(body, PaddedBody):
            self._stream(head_bytes, body)
        elif delivery == "half":  # a Content-Length it does not honour, then hang up
            self.wfile.write(head_bytes + body[: len(body) // 2])
            self.close_connection = True
        elif delivery == "trickle":
            self.wfile.write(head_bytes)
            self._trickle(body, reply, wait_first=True)
        else:
            self.wfile.write(head_bytes + body)

    def _stream(self, head_bytes: bytes, body: PaddedBody) -> None:
        self.wfile.write(head_bytes)
        for chunk in body.chunks():
            if self._server.stopping.is_set():
                self.close_connection = True
                return
            self.wfile.write(chunk)
