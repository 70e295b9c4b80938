"""One fleet worker: geocode a share of the rows through the gate, recording every send.

Cold (the default): ``python -m fleetbench.worker ARGS.json RESULT.json`` in a fresh
interpreter, which imports geotoolkit and starts at once, as a notebook or a cron job
does: its lazy imports, first connections and first garbage collections all land on
the fleet's first seconds. Warm (``--warm``): ``warm_main`` in a process forked from a
fork server that imported this module, warmed up, and released at a common start line.
"""

from __future__ import annotations

import time

STARTED = time.time()  # the interpreter has started; geotoolkit is not imported yet

import asyncio  # noqa: E402  (the instant above is taken before the imports on purpose)
import gc  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from types import FrameType  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402

import geotoolkit  # noqa: E402, F401  (what a notebook does first)
from geotoolkit.engine import Engine  # noqa: E402
from geotoolkit.gate import open_gate  # noqa: E402
from geotoolkit.gate.base import pusher  # noqa: E402
from geotoolkit.policy import RatePolicy  # noqa: E402
from geotoolkit.progress import Event, FleetSampled, ItemFinished, Throttled  # noqa: E402
from geotoolkit.providers import Nominatim  # noqa: E402
from geotoolkit.results import Query  # noqa: E402

__all__ = ["WorkerArgs", "WorkerResult", "warm_main"]

UA = "geotoolkit-benchmark/1.0 (bench@example.org)"


@dataclass
class WorkerArgs:
    index: int
    url: str
    api_key: str
    gate_url: str
    rate: float  #: the fleet's configured rate
    addresses: list[str]
    concurrency: int = 4
    niceness: int = 0
    launched_at: float = 0.0  #: when the benchmark started this process (cold)


@dataclass
class WorkerResult:
    index: int
    inputs: int
    outcomes: int = 0
    matched: int = 0
    no_match: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)
    sends: list[float] = field(default_factory=list)
    pauses: list[tuple[float, float]] = field(default_factory=list)  #: published (see CountingGate)
    factors: list[tuple[float, float]] = field(default_factory=list)  #: (time, factor) per reservation
    #: (asked at, spacing asked, due) per claim, store times
    claims: list[tuple[float, float, float]] = field(default_factory=list)
    #: (asked at, seconds) per push of the fleet's next claim (a send that left late)
    pushes: list[tuple[float, float]] = field(default_factory=list)
    #: (time, line) per 429 event this worker's gate call applied (the gate's DEBUG log)
    events: list[tuple[float, str]] = field(default_factory=list)
    throttled: int = 0  #: Throttled events
    allowed: list[float] = field(default_factory=list)
    workers_seen: int = 0
    reserved: int = 0
    launched_at: float = 0.0
    started_at: float = 0.0  #: the interpreter's start (cold) or the start line (warm)
    imported_at: float = 0.0  #: geotoolkit imported (cold)
    error: str | None = None


class CountingGate:
    """Delegates to a gate, counting the slots it reserved (sent, given up or voided) and
    recording each pause it published.

    A pause is recorded as the window in which it surely ran: from the return of the
    ``pause`` call (every worker can see it from then on) to the call's start plus the
    remaining seconds the store returned (it ends no later than that). The stores are
    on this host, so their clocks are this clock. A send inside that window went out
    while a published pause was in force, whatever the round trip of the call.
    """

    def __init__(self, inner: Any) -> None:
        self.inner, self.reserved = inner, 0
        self.pauses: list[tuple[float, float]] = []
        self.factors: list[tuple[float, float]] = []
        self.claims: list[tuple[float, float, float]] = []
        self.pushes: list[tuple[float, float]] = []

    def reserve(self, *args: Any, **kwargs: Any) -> Any:
        reservation = self.inner.reserve(*args, **kwargs)
        self.reserved += reservation.reserved
        self.factors.append((time.time(), reservation.rate_factor))
        return reservation

    def claim(self, key: str, interval: float) -> Any:
        before = time.time()
        claimed = self.inner.claim(key, interval)
        self.claims.append((before, interval, claimed.now + max(0.0, claimed.wait)))
        return claimed

    def push(self, key: str, seconds: float) -> None:
        self.pushes.append((time.time(), seconds))
        pusher(self.inner)(key, seconds)

    def pause(self, *args: Any, **kwargs: Any) -> float:
        before = time.time()
        remaining: float = self.inner.pause(*args, **kwargs)
        self.pauses.append((time.time(), before + remaining))
        return remaining

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class TimedTransport(httpx.AsyncBaseTransport):
    """Records the instant each request enters the transport (after its gate check)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, sends: list[float]) -> None:
        self.inner, self.sends = inner, sends

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sends.append(time.time())
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _sink(result: WorkerResult) -> Any:
    def sink(event: Event) -> None:
        if isinstance(event, Throttled):
            result.throttled += 1
        elif isinstance(event, ItemFinished) and not event.cached:  # counted as rows finish,
            result.outcomes += event.rows  # so that a worker cut at the deadline reports them
            if event.status == "matched":
                result.matched += event.rows
            elif event.status == "no_match":
                result.no_match += event.rows
            else:
                result.failed += event.rows
        elif isinstance(event, FleetSampled):
            if event.allowed_rate is not None:
                result.allowed.append(event.allowed_rate)
            result.workers_seen = max(result.workers_seen, event.workers_active)
    return sink


def _transport(concurrency: int, *, keepalive_seconds: float | None = None) -> httpx.AsyncHTTPTransport:
    """The engine's own pool (``make_client``: ``concurrency`` keep-alive connections)."""
    extra = {} if keepalive_seconds is None else {"keepalive_expiry": keepalive_seconds}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency, **extra)
    return httpx.AsyncHTTPTransport(limits=limits)


async def warm_up(inner: httpx.AsyncBaseTransport, url: str, gate: Any, key: str,
                  concurrency: int) -> None:
    """Pay a process's one-off costs before the start line, as a long-running worker has:
    lazy imports on the first request, the connections, the gate's threads and
    connections, and a fresh process's first full collection. ``/status`` is neither
    rate limited nor keyed."""

    async def status() -> None:
        response = await inner.handle_async_request(httpx.Request("GET", f"{url}/status"))
        await response.aread()
        await response.aclose()

    await asyncio.gather(*(status() for _ in range(concurrency)))
    await asyncio.gather(*(asyncio.to_thread(gate.state, key) for _ in range(concurrency + 1)))
    gc.collect()


def _settle(result: WorkerResult, outcomes: list[Any]) -> None:
    """Counts from the run's outcomes (the events counted them already, as rows finished)."""
    result.outcomes = len(outcomes)
    result.matched = sum(1 for o in outcomes if o.status == "matched")
    result.no_match = sum(1 for o in outcomes if o.status == "no_match")
    result.failed = len(outcomes) - result.matched - result.no_match
    result.failures = [str(getattr(o, "reason", ""))[:200] for o in outcomes
                       if o.status not in ("matched", "no_match")][:3]


class EventLog(logging.Handler):
    """Keeps the gate's 429 events (``geotoolkit.gate`` at DEBUG) with their instants."""

    def __init__(self, events: list[tuple[float, str]]) -> None:
        super().__init__(logging.DEBUG)
        self.events = events

    def emit(self, record: logging.LogRecord) -> None:
        self.events.append((record.created, record.getMessage()))


def run(args: WorkerArgs, result: WorkerResult, *, warm: Any = None) -> None:
    """Geocode ``args.addresses``; ``warm(inner, gate, key)``, if given, is awaited before
    the run (the warm variant's warm-up and start line)."""
    os.nice(args.niceness - os.nice(0))  # absolute: the benchmark itself runs at -10
    events = logging.getLogger("geotoolkit.gate")
    events.setLevel(logging.DEBUG)
    events.addHandler(EventLog(result.events))
    gate = CountingGate(open_gate(args.gate_url))
    try:
        provider = Nominatim(args.url, user_agent=UA, api_key=args.api_key)
        inner = _transport(args.concurrency, keepalive_seconds=None if warm is None else 60.0)
        engine = Engine(provider, gate=gate, rate=RatePolicy(rate=args.rate),
                        concurrency=args.concurrency, transport=TimedTransport(inner, result.sends))

        async def session() -> list[Any]:
            if warm is not None:
                await warm(inner, gate, provider.gate_key)
                result.started_at = time.time()
            return await engine.run([Query(text=a) for a in args.addresses], _sink(result))

        _settle(result, asyncio.run(session()))
    except BaseException as exc:  # reported, counted as lost rows
        result.error = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        result.pauses = list(gate.pauses)
        result.factors = list(gate.factors)
        result.claims = list(gate.claims)
        result.pushes = list(gate.pushes)
        result.reserved = gate.reserved
        gate.close()


def warm_main(args: WorkerArgs, ready: Any, go: Any, results: Any) -> None:
    """The warm variant, in a forked process: warm up, wait for the start line, run."""
    result = WorkerResult(args.index, len(args.addresses), launched_at=args.launched_at)

    async def warm(inner: httpx.AsyncBaseTransport, gate: Any, key: str) -> None:
        gate.state(key)
        await warm_up(inner, args.url, gate, key, args.concurrency)
        ready.put(args.index)
        await asyncio.to_thread(go.wait)

    try:
        run(args, result, warm=warm)
    finally:
        if result.error is not None and not result.started_at:
            ready.put(args.index)  # never keep the start line waiting
        results.put(asdict(result))


class Cut(Exception):
    """SIGTERM: the benchmark cut the cell at its deadline."""


def _cut(signum: int, frame: FrameType | None) -> None:
    raise Cut("cut at the cell's deadline")


def cold_main(argv: list[str]) -> int:
    """``ARGS.json RESULT.json``: run at once, write the result (also when cut by SIGTERM)."""
    imported = time.time()
    signal.signal(signal.SIGTERM, _cut)
    args = WorkerArgs(**json.loads(Path(argv[0]).read_text()))
    result = WorkerResult(args.index, len(args.addresses), launched_at=args.launched_at,
                          started_at=STARTED, imported_at=imported)
    run(args, result)
    Path(argv[1]).write_text(json.dumps(asdict(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(cold_main(sys.argv[1:]))
