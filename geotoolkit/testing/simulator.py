"""A local Nominatim-compatible HTTP server for tests, notebooks, benchmarks and dry runs.

It listens on ``127.0.0.1`` only, in a background thread, and speaks enough of Nominatim's
``/search`` API (``format=jsonv2``/``json``) to exercise a whole geocoding pipeline offline,
including the unpleasant parts: per-key rate limits with every ``Retry-After`` form,
authentication, daily quotas, random 503s, latency, and failures scripted by magic tokens
in the address::

    #malformed   200 with a body that is not JSON
    #error       200 with {"error": "Unable to geocode"}
    #500         500
    #503         503 (with Retry-After)
    #429         429 (with Retry-After; does not count toward the rate window)
    #reset       the connection is closed without a response (logged with status 0)
    #timeout     hang ``hang_seconds`` (interrupted by stop()), then answer normally

Each token accepts ``xN`` (``#503x2``): only the first N requests of that exact normalised
query are affected, then it answers normally. Several counted tokens run in sequence:
``#503x2 #429x1`` gives 503, 503, 429, then the answer.

Order of checks for ``/search``: authentication (401 missing key / 403 wrong key), rate
limit (429), daily cap (402), parameters (400), random 503 (``error_503_rate``), magic
tokens, answer. Everything is decided under one lock at arrival; ``latency_seconds`` (and
the ``#timeout`` hang) are slept afterwards, outside the lock.
"""

from __future__ import annotations

import contextlib
import http
import json
import math
import random
import socket
import socketserver
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from email.utils import formatdate
from http.server import ThreadingHTTPServer
from typing import Any, ClassVar, Final, Literal, cast
from urllib.parse import parse_qsl, urlsplit

from geotoolkit.testing._places import (
    NOMINATIM_FIELDS,
    Token,
    find_tokens,
    query_repr,
    resolve,
)

__all__ = ["RESET_STATUS", "ProviderSimulator", "RetryAfterMode", "SimulatedRequest"]

#: ``retry_after`` configuration: a mode, or a fixed delta-seconds value.
RetryAfterMode = Literal["auto", "http-date", "missing"] | int

#: Status logged for a request answered by closing the connection (``#reset``).
RESET_STATUS: Final = 0

_HOST: Final = "127.0.0.1"
_SEARCH_PATHS: Final = frozenset({"/search", "/search.php"})
_STATUS_PATHS: Final = frozenset({"/status", "/status.php"})
_FORMATS: Final = frozenset({"jsonv2", "json"})
_JSON: Final = "application/json; charset=utf-8"
_TEXT: Final = "text/plain; charset=utf-8"
_MALFORMED_BODY: Final = b"<html><body><h1>502 Bad Gateway</h1>upstream glitch, not JSON"
_JOIN_SECONDS: Final = 5.0
_MAX_LINE: Final = 65536
_MAX_HEADERS: Final = 100

_ANY: Any = object()  # sentinel for "no filter"


@dataclass(frozen=True)
class SimulatedRequest:
    """One request as the simulator saw it."""

    time: float  #: ``clock()`` at arrival, before any latency
    key: str | None  #: the ``key`` query parameter as sent, or ``None``
    path: str
    params: dict[str, str] = field(hash=False)
    query: str | None  #: normalised free text, or ``street=…|city=…``; ``None`` if absent
    status: int  #: HTTP status served (``RESET_STATUS`` when the connection was dropped)


@dataclass(frozen=True)
class _Config:
    rate_limit: float | None
    window_seconds: float
    retry_after: RetryAfterMode
    latency_seconds: float
    error_503_rate: float
    valid_keys: frozenset[str] | None
    daily_cap: int | None
    hang_seconds: float
    clock: Callable[[], float]

    def __post_init__(self) -> None:
        if self.rate_limit is not None and not self.rate_limit > 0:
            raise ValueError(f"rate_limit must be positive or None, got {self.rate_limit!r}")
        if not self.window_seconds > 0:
            raise ValueError(f"window_seconds must be positive, got {self.window_seconds!r}")
        ra = self.retry_after
        if isinstance(ra, bool) or not (
            (isinstance(ra, int) and ra >= 0) or ra in ("auto", "http-date", "missing")
        ):
            raise ValueError(
                "retry_after must be 'auto', 'http-date', 'missing' or a non-negative int, "
                f"got {ra!r}"
            )
        if not self.latency_seconds >= 0:
            raise ValueError(f"latency_seconds must be >= 0, got {self.latency_seconds!r}")
        if not 0 <= self.error_503_rate <= 1:
            raise ValueError(f"error_503_rate must be in [0, 1], got {self.error_503_rate!r}")
        if self.daily_cap is not None and self.daily_cap < 0:
            raise ValueError(f"daily_cap must be >= 0 or None, got {self.daily_cap!r}")
        if not self.hang_seconds >= 0:
            raise ValueError(f"hang_seconds must be >= 0, got {self.hang_seconds!r}")
        if not callable(self.clock):
            raise ValueError("clock must be callable")


@dataclass(frozen=True)
class _Answer:
    """A normal search answer, rendered outside the lock."""

    text: str | None
    structured: dict[str, str]
    fmt: str
    addressdetails: bool
    countrycodes: str | None

    def render(self) -> bytes:
        place = resolve(self.text, self.structured)
        codes = self.countrycodes
        if (
            place is not None
            and codes is not None
            and codes.strip()
            and "li" not in {c.strip().casefold() for c in codes.split(",")}
        ):
            place = None
        payload = [] if place is None else [place.to_json(self.fmt, self.addressdetails)]
        return json.dumps(payload, ensure_ascii=False).encode("utf-8")


@dataclass(frozen=True)
class _Reply:
    status: int
    body: bytes = b""
    content_type: str = _JSON
    retry_after: str | None = None
    hang_seconds: float = 0.0
    reset: bool = False
    answer: _Answer | None = None


def _error(status: int, message: str, retry_after: str | None = None) -> _Reply:
    body = {"error": {"code": status, "message": message}}
    return _Reply(status, json.dumps(body).encode(), retry_after=retry_after)


class _SlidingWindow:
    """Per-key sliding-window log: at most ``capacity`` admissions in any ``window``."""

    def __init__(self) -> None:
        self._log: dict[str | None, deque[float]] = {}

    @staticmethod
    def shape(rate_limit: float, window_seconds: float) -> tuple[int, float]:
        """``(capacity, window)``; a window too short for one request is widened to 1/rate."""
        allowed = rate_limit * window_seconds
        if allowed < 1:
            return 1, 1.0 / rate_limit
        return math.floor(allowed + 1e-9), window_seconds

    def _trim(self, key: str | None, now: float, window: float) -> deque[float]:
        log = self._log.setdefault(key, deque())
        while log and log[0] <= now - window:
            log.popleft()
        return log

    def wait_seconds(self, key: str | None, now: float, rate: float, window_s: float) -> float:
        """Seconds until ``key`` may be admitted again (0 when it may be admitted now)."""
        capacity, window = self.shape(rate, window_s)
        log = self._trim(key, now, window)
        if len(log) < capacity:
            return 0.0
        return max(0.0, log[-capacity] + window - now)

    def admit(self, key: str | None, now: float, rate: float, window_s: float) -> float | None:
        """Record an admission and return ``None``, or return the wait without recording."""
        capacity, window = self.shape(rate, window_s)
        log = self._trim(key, now, window)
        if len(log) < capacity:
            log.append(now)
            return None
        return max(0.0, log[-capacity] + window - now)

    def forget_last(self, key: str | None) -> None:
        log = self._log.get(key)
        if log:
            log.pop()

    def clear(self) -> None:
        self._log.clear()


class ProviderSimulator:
    """A Nominatim-like ``/search`` server on ``127.0.0.1`` in a background thread.

    >>> with ProviderSimulator(rate_limit=5) as sim:       # doctest: +SKIP
    ...     httpx.get(f"{sim.url}/search", params={"q": "Städtle 38, Vaduz"})

    Configuration attributes (``rate_limit``, ``window_seconds``, ``retry_after``,
    ``latency_seconds``, ``error_503_rate``, ``valid_keys``, ``daily_cap``,
    ``hang_seconds``, ``clock``) can be reassigned at any time, from any thread.
    """

    def __init__(
        self,
        rate_limit: float | None = None,
        *,
        window_seconds: float = 1.0,
        retry_after: RetryAfterMode = "auto",
        latency_seconds: float = 0.0,
        error_503_rate: float = 0.0,
        valid_keys: Iterable[str] | None = None,
        daily_cap: int | None = None,
        seed: int = 0,
        clock: Callable[[], float] = time.time,
        hang_seconds: float = 30.0,
        port: int = 0,
        max_log_entries: int | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # notified on every logged request
        self._received = 0  # requests logged since start or the last reset()
        self._config = _Config(
            rate_limit=rate_limit,
            window_seconds=window_seconds,
            retry_after=retry_after,
            latency_seconds=latency_seconds,
            error_503_rate=error_503_rate,
            valid_keys=None if valid_keys is None else frozenset(valid_keys),
            daily_cap=daily_cap,
            hang_seconds=hang_seconds,
            clock=clock,
        )
        self._seed = seed
        self._rng = random.Random(seed)
        self._port = port
        self._log: deque[SimulatedRequest] = deque(maxlen=max_log_entries)
        self._window = _SlidingWindow()
        self._successes: dict[str | None, int] = {}
        self._query_counts: dict[str, int] = {}
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ProviderSimulator:
        """Bind ``127.0.0.1:<port>`` and serve in a daemon thread. Returns ``self``."""
        if self._server is not None:
            raise RuntimeError("the simulator is already running")
        server = _Server(self, self._port)
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"geotoolkit-simulator:{server.server_port}",
            daemon=True,
        )
        self._server, self._thread = server, thread
        thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, drop open connections, interrupt hangs and close the socket."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.stopping.set()
        server.shutdown()
        thread.join()
        server.abort_connections()
        server.join_handlers(_JOIN_SECONDS)
        server.server_close()
        self._server = self._thread = None

    def __enter__(self) -> ProviderSimulator:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the simulator is not running; call start() first")
        return self._server.server_port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, without a trailing slash."""
        return f"http://{_HOST}:{self.port}"

    # ------------------------------------------------------------------ configuration

    def _update(self, **changes: Any) -> None:
        with self._lock:
            self._config = replace(self._config, **changes)

    def set_rate_limit(
        self, rate_limit: float | None, window_seconds: float | None = None
    ) -> None:
        """Change the per-key limit (and optionally the window) without losing history."""
        if window_seconds is None:
            self._update(rate_limit=rate_limit)
        else:
            self._update(rate_limit=rate_limit, window_seconds=window_seconds)

    @property
    def rate_limit(self) -> float | None:
        return self._config.rate_limit

    @rate_limit.setter
    def rate_limit(self, value: float | None) -> None:
        self._update(rate_limit=value)

    @property
    def window_seconds(self) -> float:
        return self._config.window_seconds

    @window_seconds.setter
    def window_seconds(self, value: float) -> None:
        self._update(window_seconds=value)

    @property
    def retry_after(self) -> RetryAfterMode:
        return self._config.retry_after

    @retry_after.setter
    def retry_after(self, value: RetryAfterMode) -> None:
        self._update(retry_after=value)

    @property
    def latency_seconds(self) -> float:
        return self._config.latency_seconds

    @latency_seconds.setter
    def latency_seconds(self, value: float) -> None:
        self._update(latency_seconds=value)

    @property
    def error_503_rate(self) -> float:
        return self._config.error_503_rate

    @error_503_rate.setter
    def error_503_rate(self, value: float) -> None:
        self._update(error_503_rate=value)

    @property
    def valid_keys(self) -> frozenset[str] | None:
        return self._config.valid_keys

    @valid_keys.setter
    def valid_keys(self, value: Iterable[str] | None) -> None:
        self._update(valid_keys=None if value is None else frozenset(value))

    @property
    def daily_cap(self) -> int | None:
        return self._config.daily_cap

    @daily_cap.setter
    def daily_cap(self, value: int | None) -> None:
        self._update(daily_cap=value)

    @property
    def hang_seconds(self) -> float:
        return self._config.hang_seconds

    @hang_seconds.setter
    def hang_seconds(self, value: float) -> None:
        self._update(hang_seconds=value)

    @property
    def clock(self) -> Callable[[], float]:
        return self._config.clock

    @clock.setter
    def clock(self, value: Callable[[], float]) -> None:
        self._update(clock=value)

    # ------------------------------------------------------------------ inspection

    @property
    def requests(self) -> list[SimulatedRequest]:
        """A snapshot copy of the request log, in arrival order."""
        with self._lock:
            return list(self._log)

    def wait_for_requests(self, count: int, timeout: float) -> bool:
        """Block until ``count`` requests have arrived (since start or the last
        ``reset()``), or ``timeout`` seconds passed; ``True`` when they have.

        For a test driving a batch from outside (kill it, stop a store) once it
        got going, without polling.
        """
        with self._arrived:
            return self._arrived.wait_for(lambda: self._received >= count, timeout)

    def requests_for(self, key: str | None) -> list[SimulatedRequest]:
        """The logged requests sent with API key ``key`` (``None``: sent without a key)."""
        return [r for r in self.requests if r.key == key]

    def count(self, status: int | None = None, *, key: str | None = _ANY) -> int:
        """How many logged requests had ``status`` (and ``key``, when given)."""
        return sum(
            1
            for r in self.requests
            if (status is None or r.status == status) and (key is _ANY or r.key == key)
        )

    def expected(self, address: str | Mapping[str, str]) -> tuple[float, float] | None:
        """The ``(lon, lat)`` served for ``address`` (free text, or structured fields).

        ``None`` when the simulator answers ``[]``. Magic tokens are ignored.
        """
        place = resolve(address) if isinstance(address, str) else resolve(None, address)
        return None if place is None else (place.lon, place.lat)

    def reset(self) -> None:
        """Clear the log, the rate windows, daily counts and token counters; reseed."""
        with self._lock:
            self._log.clear()
            self._received = 0
            self._window.clear()
            self._successes.clear()
            self._query_counts.clear()
            self._rng = random.Random(self._seed)

    # ------------------------------------------------------------------ request handling

    def _handle(self, raw_path: str) -> tuple[float, _Reply, float]:
        """Decide the reply for one request and log it: ``(now, reply, delay_seconds)``."""
        split = urlsplit(raw_path)
        path = split.path
        params = dict(parse_qsl(split.query, keep_blank_values=True))
        key = params.get("key")
        text = params.get("q")
        structured = {k: params[k] for k in NOMINATIM_FIELDS if params.get(k, "").strip()}
        query = query_repr(text, structured)
        with self._lock:
            cfg = self._config
            now = float(cfg.clock())
            try:
                reply = self._decide(cfg, now, path, params, key, text, structured, query)
            except Exception as exc:  # never let a bug kill the connection silently
                reply = _error(500, f"simulator error: {type(exc).__name__}: {exc}")
            status = RESET_STATUS if reply.reset else reply.status
            self._log.append(SimulatedRequest(now, key, path, params, query, status))
            self._received += 1
            self._arrived.notify_all()
        if reply.answer is not None:  # render the JSON outside the lock
            reply = _Reply(200, reply.answer.render(), hang_seconds=reply.hang_seconds)
        return now, reply, cfg.latency_seconds + reply.hang_seconds

    def _retry_after(self, cfg: _Config, now: float, wait: float) -> str | None:
        mode = cfg.retry_after
        if mode == "missing":
            return None
        if isinstance(mode, int):
            return str(mode)
        seconds = max(1, math.ceil(wait - 1e-9))
        if mode == "auto":
            return str(seconds)
        return formatdate(now + seconds, usegmt=True)

    def _window_wait(self, cfg: _Config, key: str | None, now: float) -> float:
        if cfg.rate_limit is None:
            return 0.0
        return self._window.wait_seconds(key, now, cfg.rate_limit, cfg.window_seconds)

    def _decide(
        self,
        cfg: _Config,
        now: float,
        path: str,
        params: dict[str, str],
        key: str | None,
        text: str | None,
        structured: dict[str, str],
        query: str | None,
    ) -> _Reply:
        if path in _STATUS_PATHS:
            return _Reply(200, b"OK", content_type=_TEXT)
        if path not in _SEARCH_PATHS:
            return _error(404, f"no such endpoint: {path}")

        if cfg.valid_keys is not None:
            if not key:
                return _error(401, "missing API key (the 'key' parameter)")
            if key not in cfg.valid_keys:
                return _error(403, "invalid API key")

        if cfg.rate_limit is not None:
            wait = self._window.admit(key, now, cfg.rate_limit, cfg.window_seconds)
            if wait is not None:
                return _error(429, "rate limit exceeded", self._retry_after(cfg, now, wait))

        if cfg.daily_cap is not None and self._successes.get(key, 0) >= cfg.daily_cap:
            return _error(402, f"daily quota of {cfg.daily_cap} requests exhausted")

        fmt = params.get("format", "jsonv2")
        if fmt not in _FORMATS:
            return _error(400, f"unsupported format {fmt!r}: use 'jsonv2' or 'json'")
        limit = params.get("limit")
        if limit is not None and not limit.strip().lstrip("-").isdigit():
            return _error(400, f"parameter 'limit' must be an integer, got {limit!r}")
        has_text = text is not None and bool(text.strip())
        if has_text and structured:
            return _error(400, "structured query parameters can not be used together with 'q'")
        if not has_text and not structured:
            return _error(400, "nothing to search for: give 'q' or structured parameters")

        if cfg.error_503_rate > 0 and self._rng.random() < cfg.error_503_rate:
            wait = self._window_wait(cfg, key, now)
            return _error(503, "service unavailable", self._retry_after(cfg, now, wait))

        assert query is not None
        hang = 0.0
        raw = text if text is not None and has_text else " ".join(structured.values())
        token = self._active_token(query, raw)
        if token is not None:
            name = token.name
            if name == "malformed":
                return _Reply(200, _MALFORMED_BODY)
            if name == "error":
                return _Reply(200, json.dumps({"error": "Unable to geocode"}).encode())
            if name == "500":
                return _error(500, "internal server error")
            if name == "503":
                wait = self._window_wait(cfg, key, now)
                return _error(503, "service unavailable", self._retry_after(cfg, now, wait))
            if name == "429":
                if cfg.rate_limit is not None:
                    self._window.forget_last(key)  # a 429 never counts toward the window
                wait = self._window_wait(cfg, key, now)
                return _error(429, "rate limit exceeded", self._retry_after(cfg, now, wait))
            if name == "reset":
                return _Reply(0, reset=True)
            if name == "timeout":
                hang = cfg.hang_seconds

        self._successes[key] = self._successes.get(key, 0) + 1
        answer = _Answer(
            text=text if has_text else None,
            structured={} if has_text else structured,
            fmt=fmt,
            addressdetails=params.get("addressdetails", "1").strip() not in ("0", "false"),
            countrycodes=params.get("countrycodes"),
        )
        return _Reply(200, hang_seconds=hang, answer=answer)

    def _active_token(self, query: str, raw: str) -> Token | None:
        tokens = find_tokens(raw)
        if not tokens:
            return None
        n = self._query_counts.get(query, 0) + 1
        self._query_counts[query] = n
        offset = 0
        for token in tokens:
            if token.times is None or n <= offset + token.times:
                return token
            offset += token.times
        return None


class _Server(ThreadingHTTPServer):
    """A threading server that tracks its connections so ``stop()`` can drop them."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, simulator: ProviderSimulator, port: int) -> None:
        self.simulator = simulator
        self.stopping = threading.Event()
        self._conn_lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._handlers: set[threading.Thread] = set()
        super().__init__((_HOST, port), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a reverse DNS lookup (getfqdn); skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._run_handler, args=(request, client_address), daemon=True
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
    """A small HTTP/1.1 keep-alive handler: GET/HEAD only, no request bodies expected.

    ``http.server.BaseHTTPRequestHandler`` parses headers with the email package, which
    costs more than everything else a request does here; this reads only what it needs.
    """

    server_version: ClassVar[str] = "geotoolkit-simulator/0.1"
    disable_nagle_algorithm = True
    close_connection: bool = True

    def handle(self) -> None:
        self.close_connection = False
        while not self.close_connection:
            self._handle_one()

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
        close = version != b"HTTP/1.1"
        length = 0
        for _ in range(_MAX_HEADERS):
            header = self.rfile.readline(_MAX_LINE + 1)
            if header in (b"\r\n", b"\n", b""):
                break
            name, _, value = header.partition(b":")
            name = name.strip().lower()
            if name == b"connection":
                tokens = {t.strip() for t in value.lower().split(b",")}
                if b"close" in tokens:
                    close = True
                elif b"keep-alive" in tokens:
                    close = False
            elif name == b"content-length":
                length = int(value.strip()) if value.strip().isdigit() else -1
            elif name == b"transfer-encoding":
                length = -1
        else:
            self._plain(431, "too many headers", close=True)
            return
        if length < 0:
            close = True  # a body we will not parse: answer, then drop the connection
        elif length:
            self.rfile.read(length)
        self.close_connection = close
        if method == b"GET":
            self._serve(target.decode("latin-1"), head=False)
        elif method == b"HEAD":
            self._serve(target.decode("latin-1"), head=True)
        else:
            self._plain(405, "only GET and HEAD are supported", close=close)

    def _plain(self, code: int, message: str, close: bool) -> None:
        self.close_connection = self.close_connection or close
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        self._write(_Reply(code, body), cast(_Server, self.server).simulator.clock(), head=False)

    def _serve(self, target: str, head: bool) -> None:
        server = cast(_Server, self.server)
        now, reply, delay = server.simulator._handle(target)
        if delay > 0 and server.stopping.wait(delay):
            self.close_connection = True
            return
        if reply.reset:
            self.close_connection = True
            return
        self._write(reply, now, head)

    def _write(self, reply: _Reply, now: float, head: bool) -> None:
        status = http.HTTPStatus(reply.status)
        lines = [
            f"HTTP/1.1 {status.value} {status.phrase}",
            f"Date: {formatdate(now, usegmt=True)}",
            f"Server: {self.server_version}",
            f"Content-Type: {reply.content_type}",
            f"Content-Length: {len(reply.body)}",
            "Access-Control-Allow-Origin: *",
        ]
        if reply.retry_after is not None:
            lines.append(f"Retry-After: {reply.retry_after}")
        if self.close_connection:
            lines.append("Connection: close")
        head_bytes = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(head_bytes if head else head_bytes + reply.body)
