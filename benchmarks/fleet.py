"""Fleet benchmark: K worker processes share one API key against the provider simulator.

Run from the repository root, for example::

    python benchmarks/fleet.py                          # the whole matrix (several minutes)
    python benchmarks/fleet.py --gates redis --k 16 --quick
    python benchmarks/fleet.py --overhead-only

Each run starts the simulator in this process (``ProviderSimulator(rate_limit=R,
window_seconds=1)``: at most R requests per key in any one-second window, else 429
with ``Retry-After``), then K worker processes, each running one ``Engine`` over its
share of N distinct addresses, all on one gate key. Workers are forked from a
fork server that imported geotoolkit once (importing it costs seconds of CPU), and
start together once all are connected to the gate.

Figures per run:

utilisation
    successes per second divided by R, from the first to the last request in the
    simulator's log (paced at the default 3 % under R, the ceiling is ~0.97).
429/ok
    429 answers per successful answer (simulator log).
sent
    requests the simulator received.
lost
    inputs without an outcome (a worker that crashed loses its whole share);
    ``failed`` counts outcomes that are failures.
in pause
    requests *sent* while a published pause was active. A pause is published by the
    worker that got the 429 (``gate.pause``), which then emits ``Throttled(at, wait)``;
    ``at`` is taken after the gate call returned, so from ``at`` on every worker can
    see it. Each worker records the instant each request enters its HTTP transport
    (after its gate check). A send inside any ``[at, at + wait)`` window is counted.
    The only legitimate way to be counted is the race of a worker that passed its gate
    check just before ``at`` and reached its transport just after it.
    ``arrived`` is the same count on the simulator's arrival times: it also includes
    requests that were already on the wire when the pause was published.
unused
    slots reserved on the gate but not used for a send: given up because the worker
    woke too late for them, or cancelled by a pause (each leaves a gap in the pace).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from geotoolkit.engine import Engine
from geotoolkit.gate import gate_key, open_gate
from geotoolkit.policy import RatePolicy
from geotoolkit.progress import Event, FleetSampled, Throttled
from geotoolkit.providers import Nominatim
from geotoolkit.results import Query
from geotoolkit.testing import ProviderSimulator

REDIS_URL = os.environ.get("GEOTOOLKIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
POSTGRES_DSN = os.environ.get("GEOTOOLKIT_TEST_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
UA = "geotoolkit-benchmark/1.0 (bench@example.org)"
SHAPES = {10: 300, 50: 1500}  # R -> N
WORKER_NICENESS = 5
QUICK_SHAPES = {10: 100, 50: 500}


# -- worker process -----------------------------------------------------------------------


@dataclass
class WorkerArgs:
    index: int
    sim_url: str
    api_key: str
    gate_url: str
    rate: float
    addresses: list[str]
    concurrency: int
    warm: bool = True


@dataclass
class WorkerResult:
    index: int
    inputs: int
    outcomes: int = 0
    failed: int = 0
    sends: list[float] = field(default_factory=list)
    pauses: list[tuple[float, float]] = field(default_factory=list)
    allowed: list[float] = field(default_factory=list)
    workers_seen: int = 0
    reserved: int = 0
    error: str | None = None


class CountingGate:
    """Delegates to a gate, counting the slots it reserved (sent, given up or voided)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.reserved = inner, 0

    def reserve(self, *args: Any, **kwargs: Any) -> Any:
        reservation = self.inner.reserve(*args, **kwargs)
        self.reserved += reservation.reserved
        return reservation

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
            result.pauses.append((event.at, event.at + event.wait_seconds))
        elif isinstance(event, FleetSampled):
            if event.allowed_rate is not None:
                result.allowed.append(event.allowed_rate)
            result.workers_seen = max(result.workers_seen, event.workers_active)
    return sink


async def warm_up(inner: httpx.AsyncBaseTransport, sim_url: str, gate: Any, key: str,
                  concurrency: int) -> None:
    """Pay the process's one-off costs before the start line, as a long-running worker has.

    The first request of a fresh Python process spends ~50 ms in lazy imports (httpcore,
    anyio, ...) *after* its gate check, and each new connection a few ms more: enough
    to land a cold fleet's first requests inside the simulator's one-second window
    together with later, on-time ones. ``/status`` is not rate limited nor keyed.
    """

    async def status() -> None:
        response = await inner.handle_async_request(httpx.Request("GET", f"{sim_url}/status"))
        await response.aread()
        await response.aclose()

    await asyncio.gather(*(status() for _ in range(concurrency)))
    await asyncio.gather(*(asyncio.to_thread(gate.state, key) for _ in range(concurrency + 1)))
    # A fresh fork's first full collection walks every object the imports made (pandas,
    # shapely, ...): ~50 ms of CPU each, 16 at once on 2 cores. A long-running worker
    # has had it; without this it lands on the fleet's first seconds.
    gc.collect()


def worker_main(args: WorkerArgs, ready: Any, go: Any, results: Any) -> None:
    # The provider has a machine of its own in real life; here the simulator shares two
    # cores with the fleet, so the workers yield to it (and to the gate's server).
    os.nice(WORKER_NICENESS)
    result = WorkerResult(args.index, len(args.addresses))
    gate = CountingGate(open_gate(args.gate_url))
    try:
        provider = Nominatim(args.sim_url, user_agent=UA, api_key=args.api_key)
        # Keep the warm-up's connections until the start line (httpx closes idle ones
        # after 5 s by default, and 16 workers can take longer than that to get ready).
        limits = httpx.Limits(max_connections=args.concurrency,
                              max_keepalive_connections=args.concurrency, keepalive_expiry=60.0)
        inner = httpx.AsyncHTTPTransport(limits=limits)
        engine = Engine(provider, gate=gate, rate=RatePolicy(rate=args.rate),
                        concurrency=args.concurrency, transport=TimedTransport(inner, result.sends),
                        max_attempts=10)
        gate.state(provider.gate_key)  # connected before the start line

        async def session() -> list[Any]:
            if args.warm:
                await warm_up(inner, args.sim_url, gate, provider.gate_key, args.concurrency)
            ready.put(args.index)
            await asyncio.to_thread(go.wait)
            return await engine.run([Query(text=a) for a in args.addresses], _sink(result))

        outcomes = asyncio.run(session())
        result.outcomes = len(outcomes)
        result.failed = sum(1 for o in outcomes if o.status == "failed")
        result.reserved = gate.reserved
    except BaseException as exc:  # reported, counted as lost rows
        result.error = f"{type(exc).__name__}: {exc}"
        ready.put(args.index)
    finally:
        gate.close()
        results.put(asdict(result))


# -- one run --------------------------------------------------------------------------------


@dataclass
class Run:
    gate: str
    rate: float
    configured: float
    n: int
    k: int
    utilisation: float = 0.0
    per_success_429: float = 0.0
    sent: int = 0
    successes: int = 0
    lost: int = 0
    failed: int = 0
    in_pause: int = 0
    arrived_in_pause: int = 0
    unused_slots: int = 0
    min_allowed: float | None = None
    workers_seen: int = 0
    span_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


def _inside(times: Sequence[float], windows: Sequence[tuple[float, float]]) -> int:
    return sum(1 for t in times if any(start < t < end for start, end in windows))


def gate_url(name: str, workdir: Path) -> str:
    if name == "redis":
        return REDIS_URL
    if name == "postgres":
        return POSTGRES_DSN
    return f"sqlite:///{workdir / f'gate-{uuid.uuid4().hex[:8]}.sqlite'}"


def run_once(ctx: Any, gate: str, rate: float, configured: float, n: int, k: int,
             concurrency: int, workdir: Path, *, warm: bool = True) -> Run:
    api_key = f"bench-{uuid.uuid4().hex}"
    addresses = [f"Benchmark street {i}, 9490 Vaduz" for i in range(n)]
    url = gate_url(gate, workdir)
    with ProviderSimulator(rate_limit=rate, window_seconds=1.0) as sim:
        ready, go, results = ctx.Queue(), ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=worker_main, args=(
            WorkerArgs(i, sim.url, api_key, url, configured, addresses[i::k], concurrency, warm),
            ready, go, results)) for i in range(k)]
        for proc in procs:
            proc.start()
        for _ in procs:
            ready.get(timeout=300)
        go.set()
        timeout = 120 + 10 * n / rate
        collected = [WorkerResult(**results.get(timeout=timeout)) for _ in procs]
        for proc in procs:
            proc.join(timeout=30)
        log = [r for r in sim.requests if r.key == api_key]
    return _summarise(Run(gate, rate, configured, n, k), collected, log)


def _summarise(run: Run, workers: list[WorkerResult], log: list[Any]) -> Run:
    ok = [r for r in log if r.status == 200]
    run.sent, run.successes = len(log), len(ok)
    if len(log) >= 2:
        run.span_seconds = log[-1].time - log[0].time
        run.utilisation = len(ok) / run.span_seconds / run.rate
    run.per_success_429 = sum(1 for r in log if r.status == 429) / max(1, len(ok))
    run.lost = sum(w.inputs - w.outcomes for w in workers)
    run.unused_slots = sum(w.reserved - len(w.sends) for w in workers)
    run.failed = sum(w.failed for w in workers)
    windows = [p for w in workers for p in w.pauses]
    run.in_pause = _inside([t for w in workers for t in w.sends], windows)
    run.arrived_in_pause = _inside([r.time for r in log], windows)
    allowed = [a for w in workers for a in w.allowed]
    run.min_allowed = min(allowed) if allowed else None
    run.workers_seen = max((w.workers_seen for w in workers), default=0)
    run.errors = [f"worker {w.index}: {w.error}" for w in workers if w.error]
    return run


HEADER = (f"{'gate':9} {'R':>4} {'conf':>5} {'N':>5} {'K':>3} {'util':>6} {'429/ok':>7} "
          f"{'sent':>5} {'lost':>4} {'fail':>4} {'in pause (arrived)':>18} {'unused':>6} {'min allowed':>11} "
          f"{'seen':>4} {'span s':>6}")


def row(run: Run) -> str:
    allowed = "-" if run.min_allowed is None else f"{run.min_allowed:.1f}"
    pause = f"{run.in_pause} ({run.arrived_in_pause})"
    return (f"{run.gate:9} {run.rate:>4g} {run.configured:>5g} {run.n:>5} {run.k:>3} "
            f"{run.utilisation:>6.4f} {run.per_success_429:>7.4f} {run.sent:>5} {run.lost:>4} "
            f"{run.failed:>4} {pause:>18} {run.unused_slots:>6} {allowed:>11} {run.workers_seen:>4} "
            f"{run.span_seconds:>6.1f}")


# -- gate overhead ----------------------------------------------------------------------------


def overhead(gate: str, workdir: Path, calls: int = 5000) -> dict[str, float]:
    """Median and p99 of ``acquire`` (one process, one thread, as ``open_gate`` returns it)."""
    g = open_gate(gate_url(gate, workdir))
    key = gate_key(f"overhead-{uuid.uuid4().hex[:8]}.example", "bench")
    try:
        for _ in range(200):  # connect, load scripts, warm caches
            g.acquire(key, 0.0)
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            g.acquire(key, 0.0)
            samples.append(time.perf_counter() - start)
    finally:
        g.close()
    samples.sort()
    return {"median_ms": statistics.median(samples) * 1000,
            "p99_ms": samples[int(0.99 * len(samples)) - 1] * 1000}


# -- main -------------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gates", default="redis,postgres,sqlite", help="comma-separated subset")
    p.add_argument("--k", default="1,4,16", help="worker counts, comma-separated")
    p.add_argument("--rates", default="10,50", help="simulator limits R (N follows R)")
    p.add_argument("--quick", action="store_true", help="a third of N per run")
    p.add_argument("--no-overload", action="store_true",
                   help="skip the runs configured at twice the simulator's limit")
    p.add_argument("--overload-only", action="store_true")
    p.add_argument("--overhead-only", action="store_true")
    p.add_argument("--no-overhead", action="store_true")
    p.add_argument("--concurrency", type=int, default=4, help="engine concurrency per worker")
    p.add_argument("--cold", action="store_true",
                   help="no warm-up: workers start with cold imports and connections")
    p.add_argument("--json", type=Path, help="also write every figure to this file")
    return p.parse_args(argv)


def machine() -> str:
    load = os.getloadavg()
    return (f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, "
            f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    gates = [g.strip() for g in args.gates.split(",") if g.strip()]
    ks = [int(k) for k in args.k.split(",")]
    rates = [float(r) for r in args.rates.split(",")]
    shapes = QUICK_SHAPES if args.quick else SHAPES
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "machine": machine(), "command": " ".join(sys.argv),
                              "overhead": {}, "runs": []}
    print(f"# {report['date']} | {report['machine']}", flush=True)
    with tempfile.TemporaryDirectory(prefix="geotoolkit-bench-") as tmp:
        workdir = Path(tmp)
        if not args.no_overhead:
            print("# gate overhead: 5000 acquires, one process", flush=True)
            for gate in gates:
                figures = overhead(gate, workdir)
                report["overhead"][gate] = figures
                print(f"{gate:9} median {figures['median_ms']:.3f} ms  "
                      f"p99 {figures['p99_ms']:.3f} ms", flush=True)
        if not args.overhead_only:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(["__main__"])
            print(HEADER, flush=True)
            plan = [(g, r, r, k) for g in gates for r in rates for k in ks
                    if not args.overload_only]
            if not args.no_overload:
                plan += [(g, r, 2 * r, max(ks)) for g in gates for r in rates]
            for gate, rate, configured, k in plan:
                n = shapes.get(int(rate), int(30 * rate))
                run = run_once(ctx, gate, rate, configured, n, k, args.concurrency, workdir,
                               warm=not args.cold)
                report["runs"].append(asdict(run))
                print(row(run), flush=True)
                for error in run.errors:
                    print(f"   ! {error}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
