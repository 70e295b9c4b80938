"""Batch benchmarks for ``df.geocode.run()``: prints figures, asserts nothing.

Scenarios (each runs in a fresh child process, so peak RSS is its own):

- ``cached``: ``--rows`` rows (default 400 000), half of them duplicates, all already
  in the SQLite cache. Target: <= 20 s wall time and <= 2 GB peak RSS; no request sent.
- ``overhead``: the engine without a rate limit against the simulator (``--latency``
  20 ms, ``--concurrency`` 32, ``--unique`` 5 000 addresses), versus a bare
  ``httpx.AsyncClient`` loop sending the same requests with the same concurrency.
  Target: engine requests/s >= 0.9 x bare.
- ``memory``: peak RSS grows with unique addresses, not with attempts: N unique with
  no retries, N unique each answered 503 three times first, 2N and 4N unique (an
  in-process transport, so the server and sockets do not blur the figures).

Usage::

    python benchmarks/batch.py                       # everything, full size
    python benchmarks/batch.py --rows 40000 --unique 1000 --only cached,overhead
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

UA = "geotoolkit-benchmark/1.0 (bench@example.org)"


def _rss_mb() -> float:
    """Current resident set size, MB (Linux /proc; psutil when available)."""
    try:
        import psutil

        return float(psutil.Process().memory_info().rss) / 2**20
    except ImportError:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


def _addresses(n: int, tag: str = "") -> list[str]:
    return [f"Benchmarkstrasse {i}{tag}, {9485 + i % 14} Vaduz" for i in range(n)]


# --------------------------------------------------------------------------- children


def child_cached(rows: int) -> dict[str, Any]:
    import httpx
    import pandas as pd

    import geotoolkit  # noqa: F401  (registers df.geocode)
    from geotoolkit.providers import Nominatim
    from geotoolkit.results import Match, Query
    from geotoolkit.store import SQLiteStore

    unique = _addresses(rows // 2)
    provider = Nominatim("http://127.0.0.1:9", user_agent=UA)
    ns = provider.cache_namespace()
    sent: list[httpx.Request] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cache.sqlite"
        store = SQLiteStore(path)
        store.put_many((f"{ns}:{Query(text=a).key()}",
                        Match(lon=9.5 + i * 1e-7, lat=47.1, label=a, provider="nominatim"))
                       for i, a in enumerate(unique))
        store.close()
        df = pd.DataFrame({"address": unique + unique[::-1], "row": range(2 * len(unique))})
        del unique
        before = _rss_mb()
        started, cpu = time.perf_counter(), time.process_time()
        out = df.geocode.run(provider=provider, gate="memory://", cache=f"sqlite:///{path}",
                             progress=False, transport=httpx.MockTransport(refuse))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"rows": len(df), "unique": len(df) // 2, "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2), "load": round(os.getloadavg()[0], 1),
            "matched": int((out["geocode_status"] == "matched").sum()), "requests": len(sent),
            "rss_before_mb": round(before), "peak_rss_mb": round(_peak_rss_mb())}


async def _bare(url: str, addresses: list[str], concurrency: int) -> float:
    import httpx

    from geotoolkit.providers import Nominatim
    from geotoolkit.results import Query

    provider = Nominatim(url, user_agent=UA)
    requests = iter([provider.build_request(Query(text=a)) for a in addresses])
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30.0) as client:

        async def worker() -> None:
            for request in requests:
                (await client.send(request)).raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return len(addresses) / (time.perf_counter() - started)


def _engine_rate(url: str, addresses: list[str], concurrency: int) -> tuple[float, float]:
    """(accessor end to end, Engine.run alone) requests/s."""
    import pandas as pd

    import geotoolkit  # noqa: F401
    from geotoolkit.engine import Engine
    from geotoolkit.gate import MemoryGate
    from geotoolkit.providers import Nominatim
    from geotoolkit.results import Query

    provider = Nominatim(url, user_agent=UA)
    df = pd.DataFrame({"address": addresses})
    started = time.perf_counter()
    out = df.geocode.run(provider=provider, rate=math.inf, gate="memory://", cache=False,
                         concurrency=concurrency, progress=False)
    accessor = len(addresses) / (time.perf_counter() - started)
    assert (out["geocode_status"] == "matched").all()
    engine = Engine(provider, gate=MemoryGate(), rate=math.inf, concurrency=concurrency)
    items: list[Query | str] = [Query(text=a) for a in addresses]
    started = time.perf_counter()
    asyncio.run(engine.run(items))
    return accessor, len(addresses) / (time.perf_counter() - started)


def child_overhead(url: str, unique: int, concurrency: int, rounds: int) -> dict[str, Any]:
    addresses = _addresses(unique, " ov")
    asyncio.run(_bare(url, addresses[:200], concurrency))  # warm up both paths
    _engine_rate(url, addresses[:200], concurrency)
    bare, accessor, engine = [], [], []
    for _ in range(rounds):
        bare.append(asyncio.run(_bare(url, addresses, concurrency)))
        a, e = _engine_rate(url, addresses, concurrency)
        accessor.append(a)
        engine.append(e)
    best = max(bare)
    return {"unique": unique, "concurrency": concurrency,
            "bare_rps": [round(x) for x in bare], "accessor_rps": [round(x) for x in accessor],
            "engine_rps": [round(x) for x in engine],
            "ratio_accessor": round(max(accessor) / best, 3),
            "ratio_engine": round(max(engine) / best, 3)}


def child_memory(unique: int, retries: int) -> dict[str, Any]:
    """An in-process transport (no sockets), so only geotoolkit's own memory is measured."""
    import httpx
    import pandas as pd

    import geotoolkit  # noqa: F401
    from geotoolkit.policy import Backoff
    from geotoolkit.providers import Nominatim

    seen: dict[str, int] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        q = request.url.params["q"]
        seen[q] = seen.get(q, 0) + 1
        if seen[q] <= retries:
            return httpx.Response(503)
        return httpx.Response(200, json=[{"lat": "47.1", "lon": "9.5", "display_name": q}])

    df = pd.DataFrame({"address": _addresses(unique, f" m{retries}")})
    provider = Nominatim("http://memory.test", user_agent=UA)
    before = _rss_mb()
    started = time.perf_counter()
    out = df.geocode.run(provider=provider, rate=math.inf, gate="memory://", cache=False,
                         concurrency=32, progress=False, max_attempts=retries + 1,
                         backoff=Backoff(initial_seconds=0.0), transport=httpx.MockTransport(answer))
    return {"unique": unique, "attempts_each": retries + 1,
            "attempts_total": int(out["geocode_attempts"].sum()),
            "matched": int((out["geocode_status"] == "matched").sum()),
            "wall_s": round(time.perf_counter() - started, 2),
            "rss_before_mb": round(before), "peak_rss_mb": round(_peak_rss_mb()),
            "growth_mb": round(_peak_rss_mb() - before, 1)}


# --------------------------------------------------------------------------- parent


@contextmanager
def simulator(latency: float, retry_after: str = "auto") -> Iterator[str]:
    """The provider simulator in its own process (so it does not share our GIL)."""
    cmd = [sys.executable, "-m", "geotoolkit.testing", "--port", "0",
           "--latency-seconds", str(latency), "--retry-after", retry_after]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None
        found = re.search(r"http://127\.0\.0\.1:\d+", proc.stdout.readline())
        if found is None:
            raise RuntimeError("the simulator did not start")
        yield found.group(0)
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def _child(*args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True,
                         text=True, check=False, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run_cached(args: argparse.Namespace) -> None:
    r = _child("cached", str(args.rows))
    ok = r["wall_s"] <= 20 and r["peak_rss_mb"] <= 2048 and r["requests"] == 0
    print(f"(a) cached: {r['rows']} rows ({r['unique']} unique), all cached: "
          f"{r['wall_s']:.2f} s wall ({r['cpu_s']:.2f} s CPU, load average {r['load']}), "
          f"peak RSS {r['peak_rss_mb']} MB "
          f"(before run {r['rss_before_mb']} MB), {r['requests']} requests, "
          f"{r['matched']} matched -> {'OK' if ok else 'MISSED'} (target <= 20 s, <= 2048 MB)")


def run_overhead(args: argparse.Namespace) -> None:
    with simulator(args.latency) as url:
        r = _child("overhead", url, str(args.unique), str(args.concurrency), str(args.rounds))
    ok = r["ratio_accessor"] >= 0.9
    print(f"(b) overhead: {r['unique']} unique, concurrency {r['concurrency']}, latency "
          f"{args.latency * 1000:.0f} ms, no limit: bare httpx {r['bare_rps']} req/s; "
          f"df.geocode.run {r['accessor_rps']} req/s; Engine.run {r['engine_rps']} req/s; "
          f"ratio (best/best) accessor {r['ratio_accessor']}, engine {r['ratio_engine']} "
          f"-> {'OK' if ok else 'MISSED'} (target >= 0.9)")


def run_memory(args: argparse.Namespace) -> None:
    n = args.memory_unique
    runs = [_child("memory", str(n), "0"), _child("memory", str(n), "3"),
            _child("memory", str(2 * n), "0"), _child("memory", str(4 * n), "0")]
    print("(c) memory: peak RSS growth during run() (unique addresses vs attempts; 503s first)")
    for r in runs:
        print(f"    {r['unique']:>7} unique x {r['attempts_each']} attempts "
              f"({r['attempts_total']:>6} requests): +{r['growth_mb']:.1f} MB "
              f"(peak {r['peak_rss_mb']} MB, {r['wall_s']:.2f} s, {r['matched']} matched)")


def _main_child(argv: list[str]) -> None:
    kind, *rest = argv
    if kind == "cached":
        result = child_cached(int(rest[0]))
    elif kind == "overhead":
        result = child_overhead(rest[0], int(rest[1]), int(rest[2]), int(rest[3]))
    else:
        result = child_memory(int(rest[0]), int(rest[1]))
    print(json.dumps(result))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _main_child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000, help="rows for (a)")
    parser.add_argument("--unique", type=int, default=5_000, help="unique addresses for (b)")
    parser.add_argument("--memory-unique", type=int, default=10_000, help="unique addresses for (c)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.02, help="simulator latency, s (b)")
    parser.add_argument("--rounds", type=int, default=2, help="repetitions for (b)")
    parser.add_argument("--only", default="cached,overhead,memory")
    args = parser.parse_args()
    chosen = set(args.only.split(","))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} (figures are wall time on a shared machine)")
    for name, fn in (("cached", run_cached), ("overhead", run_overhead), ("memory", run_memory)):
        if name in chosen:
            fn(args)


if __name__ == "__main__":
    main()
