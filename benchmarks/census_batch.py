"""Census batch endpoint vs single-address endpoint at 1 request/s: prints figures, asserts nothing.

The provider simulator runs in this process (its request log gives the 429 counts and
the rows per upload) with a rate limit of ``--limit`` requests per second (sliding
window); the engine paces itself at the same rate, as a user would configure it.
Each scenario runs in a fresh child process (its peak RSS, ``ru_maxrss``, is its own)
with a SQLite cache in a temporary directory:

- ``batch``: ``--rows`` addresses (default 10 000) through ``locations/addressbatch``
  with the engine's default batch size (the Census maximum, 10 000 per upload);
- ``batch-1000``: the same with ``batch_size=1000`` (10 uploads, paced at the limit);
- ``single``: the same addresses through ``locations/onelineaddress``
  (``batch_size=1``), stopped after ``--single-seconds`` (default 30 s): rows/s is the
  rows settled in that time over its length.

Target (issue 15): batch rows/s >= 100 x single rows/s, with the same 429 behaviour.

Usage::

    python benchmarks/census_batch.py
    python benchmarks/census_batch.py --rows 2000 --single-seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _addresses(n: int) -> list[str]:
    return [f"{100 + i} Benchmark Street, Springfield, IL {62700 + i % 50}" for i in range(n)]


# --------------------------------------------------------------------------- child


def child(url: str, rows: int, limit: float, batch_size: int, seconds: float | None) -> dict[str, Any]:
    from geotoolkit.engine import Engine
    from geotoolkit.gate import MemoryGate
    from geotoolkit.policy import RatePolicy
    from geotoolkit.progress import Event, ItemFinished, Throttled
    from geotoolkit.providers import Census
    from geotoolkit.results import Query
    from geotoolkit.store import SQLiteStore

    settled = throttled = 0

    def progress(event: Event) -> None:
        nonlocal settled, throttled
        if isinstance(event, ItemFinished):
            settled += event.rows
        elif isinstance(event, Throttled):
            throttled += 1

    items: list[Query | str] = [Query(text=a) for a in _addresses(rows)]
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "cache.sqlite")
        engine = Engine(Census(url), gate=MemoryGate(), store=store, rate=RatePolicy(rate=limit),
                        batch_size=batch_size or None, concurrency=4)
        started = time.perf_counter()
        try:
            asyncio.run(asyncio.wait_for(engine.run(items, progress), timeout=seconds))
            stopped = False
        except TimeoutError:
            stopped = True
        wall = time.perf_counter() - started
        store.close()
    return {"rows": settled, "wall_s": round(wall, 2), "rows_per_s": settled / wall,
            "stopped": stopped, "throttled_events": throttled,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


# --------------------------------------------------------------------------- parent


def _child(url: str, rows: int, limit: float, batch_size: int, seconds: float | None) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", url, str(rows), str(limit), str(batch_size),
            str(seconds or 0)]
    out = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    if out.returncode != 0:
        raise RuntimeError(f"child {argv[3:]} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        url, rows, limit, size, seconds = sys.argv[2:7]
        print(json.dumps(child(url, int(rows), float(limit), int(size), float(seconds) or None)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--limit", type=float, default=1.0, help="requests per second (simulator and engine)")
    parser.add_argument("--single-seconds", type=float, default=30.0)
    parser.add_argument("--only", default="batch,batch-1000,single")
    args = parser.parse_args()

    from geotoolkit.testing import ProviderSimulator

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} (wall time on a shared machine); {args.rows} addresses, "
          f"limit {args.limit:g} request/s (simulator sliding window; engine paced at the same rate)")
    scenarios = {"batch": (0, None), "batch-1000": (1000, None), "single": (1, args.single_seconds)}
    figures: dict[str, dict[str, Any]] = {}
    with ProviderSimulator(rate_limit=args.limit) as sim:
        for name, (size, seconds) in scenarios.items():
            if name not in args.only.split(","):
                continue
            sim.reset()
            r = _child(sim.url, args.rows, args.limit, size, seconds)
            log = sim.requests
            r["requests"] = len(log)
            r["http_429"] = sum(1 for x in log if x.status == 429)
            r["rows_per_upload"] = sorted({x.rows for x in log if x.rows is not None})
            figures[name] = r
            print(f"{name:>11}: {r['rows']:>6} rows in {r['wall_s']:>7.2f} s = {r['rows_per_s']:>9.2f} rows/s"
                  f"{' (stopped at the time limit)' if r['stopped'] else ''}; {r['requests']} requests "
                  f"(rows per upload {r['rows_per_upload'] or '-'}), {r['http_429']} HTTP 429, "
                  f"{r['throttled_events']} Throttled events; peak RSS {r['peak_rss_mb']} MB")
    if "single" in figures:
        for name in ("batch", "batch-1000"):
            if name in figures:
                ratio = figures[name]["rows_per_s"] / figures["single"]["rows_per_s"]
                print(f"ratio {name} / single: {ratio:,.0f}x (target >= 100x)")


if __name__ == "__main__":
    main()
