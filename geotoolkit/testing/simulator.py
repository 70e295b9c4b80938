"""A local geocoding server for tests, notebooks, benchmarks and dry runs: every provider.

It listens on ``127.0.0.1`` only, in a background thread, and speaks the APIs of every
provider geotoolkit knows, forward, reverse and in batches, each in its own format (see
:data:`FORMATS` and ``docs/testing.md``): Nominatim, LocationIQ, Photon, Pelias, OpenCage,
Google, Mapbox, HERE, ArcGIS, Geonorge and the US Census. Point a provider at it with
``Provider(base_url=sim.url, ...)`` (or ``sim.base_url(name)``). Answers come from a small
Liechtenstein gazetteer at realistic precision (building, street, postcode, town,
country), in each provider's own words, with the unpleasant parts:

- per-key rate limits as real providers run them (``limiter=``: sliding window, sliding
  log, fixed window, GCRA / leaky bucket with ``burst``, token bucket; see
  :mod:`geotoolkit.testing.limiters`), with every ``Retry-After`` form; the key is read
  from each provider's own parameter (``key``, ``apiKey``, ``access_token``, ``token``,
  ``api_key``);
- authentication, daily quotas, random 503s, latency, each refused in the provider's
  own form (Google's ``status``, OpenCage's ``status.code``, HERE's ``title``, ArcGIS's
  error object...);
- batches (Census CSV uploads, Mapbox v6 batch) that cost 1 or 1 per row
  (``batch_cost``), hang when too big (``batch_hang_over``), fail whole (``#poison``)
  or carry one malformed record (``#badrow``);
- faults scripted by magic tokens in the address (``#503x2``, ``#trickle``, ``#huge``,
  ``#badgzip``, ``#echo400``, ``#status=451``, ...; see :mod:`geotoolkit.testing.faults`),
  or switched on for every search (``sim.fault = "trickle"``);
- whole-server outages switched at run time (``sim.outage("refuse" | "reset" | "hang")``,
  ``sim.outage(None)`` to recover on the same URL).

Everything is decided under one lock at arrival (``geotoolkit.testing._decide``);
``latency_seconds``, hangs and trickles happen afterwards, outside the lock, and are
interrupted by ``stop()``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import fields, replace
from typing import Any, Final

from geotoolkit.testing._config import BatchCost, Config, OutageMode, RetryAfterMode
from geotoolkit.testing._decide import Decider, Decision, parse_request
from geotoolkit.testing._records import Inspection, Recovery, Setting, SimulatedRequest
from geotoolkit.testing._reply import RESET_STATUS, Reply, error_reply
from geotoolkit.testing._routes import FORMATS, dialect
from geotoolkit.testing._server import HOST, Server, refusing_url, unused_url
from geotoolkit.testing.limiters import LimiterName

__all__ = [
    "FORMATS",
    "RESET_STATUS",
    "BatchCost",
    "LimiterName",
    "OutageMode",
    "ProviderSimulator",
    "RetryAfterMode",
    "SimulatedRequest",
    "refusing_url",
    "unused_url",
]

_JOIN_SECONDS: Final = 5.0


#: Settings ``configure()`` accepts (everything in the config but the outage).
_SETTINGS: Final = frozenset(f.name for f in fields(Config)) - {"outage"}


class ProviderSimulator(Inspection):
    """Every provider's geocoding API, on ``127.0.0.1`` in a background thread.

    >>> with ProviderSimulator(rate_limit=5) as sim:       # doctest: +SKIP
    ...     httpx.get(f"{sim.url}/search", params={"q": "Städtle 38, Vaduz"})
    ...     Google(base_url=sim.url, api_key="k").build_request(Query(text="Vaduz"))

    Configuration attributes (``rate_limit``, ``window_seconds``, ``limiter``, ``burst``,
    ``retry_after``, ``latency_seconds``, ``error_503_rate``, ``valid_keys``,
    ``daily_cap``, ``hang_seconds``, ``fault``, ``trickle_interval_seconds``,
    ``trickle_chunk_bytes``, ``huge_body_bytes``, ``batch_cost``, ``batch_hang_over``,
    ``clock``) can be reassigned at any time, from any thread; ``configure(**settings)``
    changes several at once.

    Parameters
    ----------
    rate_limit : float or None
        Requests per second per API key (the provider's own key parameter; no key is one
        more key); ``None``: no limit.
    window_seconds : float
        The window of ``sliding-window``, ``sliding-log`` and ``fixed-window``.
    limiter : str
        ``"sliding-window"`` (default), ``"sliding-log"``, ``"fixed-window"``,
        ``"gcra"`` / ``"leaky-bucket"``, ``"token-bucket"``.
    burst : int or None
        GCRA: requests allowed ahead of the rate (default 0); token bucket: its capacity
        (default: the rate).
    retry_after : "auto", "http-date", "missing", "reset-headers" or int
        The 429/503 ``Retry-After``: what the limiter would say (``auto``), the same as a
        date, none, or a fixed number of seconds; ``reset-headers``: none, and a 429 says
        the reset the way many providers do instead (``RateLimit``, ``RateLimit-Policy``,
        ``X-RateLimit-Limit/-Remaining/-Reset``, the last a Unix time).
    fault : str or None
        A fault for every search without its own token (``"trickle"``, ``"status=502"``).
    trickle_interval_seconds, trickle_chunk_bytes : float, int
        ``#trickle``: one chunk of this many bytes per interval (default 16 B per 0.5 s).
    huge_body_bytes : int
        ``#huge``: the size of the body (default 50 MB).
    valid_keys : iterable of str or None
        Accepted API keys (for the APIs that have keys); ``None``: no authentication.
    batch_cost : "request" or "row"
        What a batch takes from the rate limiter and the daily cap: 1, or 1 per record.
    batch_hang_over : int or None
        A batch of more records than this stays silent for ``hang_seconds`` (a timeout on
        a large upload), then answers.
    clock : callable
        Time for the limiters, the log and ``Date`` headers (default ``time.time``).
    """

    rate_limit: Setting[float | None] = Setting()
    window_seconds: Setting[float] = Setting()
    limiter: Setting[LimiterName] = Setting()
    burst: Setting[int | None] = Setting()
    retry_after: Setting[RetryAfterMode] = Setting()
    latency_seconds: Setting[float] = Setting()
    error_503_rate: Setting[float] = Setting()
    daily_cap: Setting[int | None] = Setting()
    hang_seconds: Setting[float] = Setting()
    fault: Setting[str | None] = Setting()
    trickle_interval_seconds: Setting[float] = Setting()
    trickle_chunk_bytes: Setting[int] = Setting()
    huge_body_bytes: Setting[int] = Setting()
    batch_cost: Setting[BatchCost] = Setting()
    batch_hang_over: Setting[int | None] = Setting()
    clock: Setting[Callable[[], float]] = Setting()

    def __init__(
        self,
        rate_limit: float | None = None,
        *,
        window_seconds: float = 1.0,
        limiter: LimiterName = "sliding-window",
        burst: int | None = None,
        retry_after: RetryAfterMode = "auto",
        latency_seconds: float = 0.0,
        error_503_rate: float = 0.0,
        valid_keys: Iterable[str] | None = None,
        daily_cap: int | None = None,
        seed: int = 0,
        clock: Callable[[], float] = time.time,
        hang_seconds: float = 30.0,
        fault: str | None = None,
        trickle_interval_seconds: float = 0.5,
        trickle_chunk_bytes: int = 16,
        huge_body_bytes: int = 50_000_000,
        batch_cost: BatchCost = "request",
        batch_hang_over: int | None = None,
        port: int = 0,
        max_log_entries: int | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # notified on every logged request
        self._changed = threading.Condition(self._lock)  # notified when an outage changes
        self._lifecycle = threading.RLock()  # start / stop / outage, one at a time
        self._received = 0  # requests logged since start or the last reset()
        self._epoch = 0  # bumped by every outage change and by stop()
        self._config = Config(
            rate_limit=rate_limit, window_seconds=window_seconds, retry_after=retry_after,
            latency_seconds=latency_seconds, error_503_rate=error_503_rate,
            valid_keys=None if valid_keys is None else frozenset(valid_keys),
            daily_cap=daily_cap, hang_seconds=hang_seconds, clock=clock, limiter=limiter,
            burst=burst, fault=fault, trickle_interval_seconds=trickle_interval_seconds,
            trickle_chunk_bytes=trickle_chunk_bytes, huge_body_bytes=huge_body_bytes,
            batch_cost=batch_cost, batch_hang_over=batch_hang_over,
        )
        self._decider = Decider(seed)
        self._port = port
        self._log: deque[SimulatedRequest] = deque(maxlen=max_log_entries)
        self._server: Server | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ProviderSimulator:
        """Bind ``127.0.0.1:<port>`` and serve in a daemon thread. Returns ``self``."""
        with self._lifecycle:
            if self._server is not None:
                raise RuntimeError("the simulator is already running")
            server = Server(self, self._port)
            self._server = server
            if self._config.outage == "refuse":
                server.refuse()
            else:
                server.start_serving()
        return self

    def stop(self) -> None:
        """Stop serving, drop open connections, interrupt hangs and close the socket."""
        with self._lifecycle:
            server = self._server
            if server is None:
                return
            server.stopping.set()
            self._bump_epoch()  # releases requests held by a "hang" outage
            server.stop_serving()
            server.abort_connections()
            server.join_handlers(_JOIN_SECONDS)
            server.server_close()
            self._server = None

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
        return f"http://{HOST}:{self.port}"

    def base_url(self, provider: str) -> str:
        """The base URL that serves only ``provider``'s API: ``{url}/<provider>`` (plus
        ``/v1`` for LocationIQ, whose real base URL ends with it). ``sim.url`` works for
        every provider too; this one is never ambiguous.

        >>> ProviderSimulator(port=8080).start().base_url("locationiq")  # doctest: +SKIP
        'http://127.0.0.1:8080/locationiq/v1'
        """
        try:
            spoken = dialect(provider)
        except KeyError:
            raise ValueError(f"the simulator does not speak {provider!r}: one of {FORMATS}") from None
        return f"{self.url}/{spoken.name}{spoken.base_suffix}"

    # ------------------------------------------------------------------ outages

    def outage(self, mode: OutageMode | None) -> Recovery:
        """Take the whole server down, or bring it back (``None``), from any thread.

        ``"refuse"``: stop listening (the port stays reserved): connecting is refused.
        ``"reset"``: accept, read the request, then reset the connection (TCP RST).
        ``"hang"``: accept, read the request, never answer; held requests are dropped
        when the outage ends or the simulator stops. Open connections are dropped when
        refusing. Requests that reach the server are logged with ``RESET_STATUS``.
        Recovery serves normal answers again on the same URL. Usable as a context
        manager that recovers at its end: ``with sim.outage("refuse"): ...``.
        """
        with self._lifecycle:
            with self._lock:
                previous = self._config.outage
                self._config = replace(self._config, outage=mode)
            self._bump_epoch()
            server = self._server
            if server is not None and (previous == "refuse") != (mode == "refuse"):
                if mode == "refuse":
                    server.refuse()
                else:
                    server.resume()
        return Recovery(self)

    @property
    def outage_mode(self) -> OutageMode | None:
        """The current outage (``None``: the server is up)."""
        return self._config.outage

    def _bump_epoch(self) -> None:
        with self._changed:
            self._epoch += 1
            self._changed.notify_all()

    def _wait_outage_change(self, epoch: int) -> None:
        """Block until the outage of ``epoch`` is over (or stop() ran). For the server."""
        with self._changed:
            self._changed.wait_for(lambda: self._epoch != epoch)

    # ------------------------------------------------------------------ configuration

    def configure(self, **settings: Any) -> None:
        """Change several settings at once, atomically (requests see all or none)."""
        unknown = set(settings) - _SETTINGS - {"valid_keys"}
        if unknown:
            raise TypeError(f"unknown settings: {sorted(unknown)}")
        if settings.get("valid_keys") is not None:
            settings["valid_keys"] = frozenset(settings["valid_keys"])
        self._update(**settings)

    def _update(self, **changes: Any) -> None:
        with self._lock:
            self._config = replace(self._config, **changes)

    def set_rate_limit(
        self,
        rate_limit: float | None,
        window_seconds: float | None = None,
        *,
        limiter: LimiterName | None = None,
        burst: int | None = None,
    ) -> None:
        """Change the per-key limit (and optionally the window, the limiter and its burst)
        at once. The history is kept unless the kind of limiter changes."""
        changes: dict[str, Any] = {"rate_limit": rate_limit}
        if window_seconds is not None:
            changes["window_seconds"] = window_seconds
        if limiter is not None:
            changes["limiter"] = limiter
        if burst is not None:
            changes["burst"] = burst
        self._update(**changes)

    @property
    def valid_keys(self) -> frozenset[str] | None:
        return self._config.valid_keys

    @valid_keys.setter
    def valid_keys(self, value: Iterable[str] | None) -> None:
        self.configure(valid_keys=value)

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

    def reset(self) -> None:
        """Clear the log, the limiter state, daily counts and token counters; reseed."""
        with self._lock:
            self._log.clear()
            self._received = 0
            self._decider.reset()

    # ------------------------------------------------------------------ for the server

    def _now(self) -> float:
        """The simulator's clock, now."""
        return float(self._config.clock())

    def _handle(self, method: str, target: str, content_type: str = "", body: bytes = b""
                ) -> tuple[float, Reply, float]:
        """Decide the reply to one request and log it: ``(now, reply, delay)``.

        Called by the HTTP server for each request; the request is parsed and looked up
        before the lock is taken, and the reply's body is rendered after it is released.
        """
        try:
            request = parse_request(method, target, content_type, body)
        except Exception as exc:  # never let a bug kill the connection silently
            request = parse_request(method, "/simulator-error")
            failure: Exception | None = exc
        else:
            failure = None
        with self._lock:
            cfg = self._config
            now = float(cfg.clock())
            try:
                if failure is not None:
                    raise failure
                decision = self._decider.decide(cfg, now, request, self._epoch)
            except Exception as exc:  # never let a bug kill the connection silently
                decision = Decision(error_reply(500, f"simulator error: {type(exc).__name__}: {exc}"),
                                    "fault")
            reply = decision.reply
            self._log.append(SimulatedRequest(
                now, request.key, request.path, request.params, request.query, reply.logged_status,
                request.provider, request.rows, decision.outcome))
            self._received += 1
            self._arrived.notify_all()
        try:
            reply = reply.rendered()
        except Exception as exc:
            reply = error_reply(500, f"simulator error: {type(exc).__name__}: {exc}")
        if reply.delivery in ("rst", "hang"):
            return now, reply, 0.0
        return now, reply, cfg.latency_seconds + reply.hang_seconds
