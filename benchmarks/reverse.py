"""Reverse-geocoding benchmark: engine overhead against a bare httpx loop. Prints, asserts nothing.

``--points`` distinct points (default 5 000) inside the simulator's world are reverse
geocoded at ``--concurrency`` 32 against the provider simulator (its own process, no
rate limit, ``--latency`` 20 ms per answer, like ``benchmarks/batch.py``'s ``overhead``
scenario), in one child process, three ways, round after round (each round starts with
another of the three):

- ``bare``: an ``httpx.AsyncClient`` loop sending the same ``/reverse`` requests (built
  by the same provider) with the same concurrency and connection limits;
- ``gdf.geocode.reverse``: the whole front end on a GeoDataFrame of Points
  (``ReverseJob``: checks, reprojection, one ``ReverseQuery`` per row, the engine,
  ``reverse_frame`` with the geodesic distances), ``rate=math.inf``, ``gate="memory://"``,
  ``cache=False``, no progress;
- ``Engine.run``: the engine alone over the same ``ReverseQuery`` items.

Requests per second for each round, the ratios to bare (best/best, as ``batch.py``
prints them, and the median of the per-round ratios; target: ``gdf.geocode.reverse`` >=
0.9 x bare, i.e. engine overhead within 10 %), the client's CPU time per request (the
client is CPU-bound here: the figure that says where the overhead is), and the child's
peak RSS. ``--profile FILE`` writes a cProfile of one ``gdf.geocode.reverse`` round too.

Usage::

    python benchmarks/reverse.py                          # 5 000 points, 3 rounds
    python benchmarks/reverse.py --points 1000 --rounds 1 --profile /tmp/reverse.prof
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from batch import UA, _peak_rss_mb, _rss_mb, simulator  # noqa: E402  (benchmarks/batch.py)

#: The simulator's world (Liechtenstein's box, geotoolkit.testing._gazetteer.BBOX), a margin in.
_WEST, _SOUTH, _EAST, _NORTH = 9.48, 47.06, 9.63, 47.26


def _points(n: int) -> list[tuple[float, float]]:
    """``n`` distinct ``(lon, lat)`` on a grid inside the simulator's world (distinct at 6
    decimals, so every point is its own request)."""
    side = max(1, int(n**0.5) + 1)
    step_lon, step_lat = (_EAST - _WEST) / side, (_NORTH - _SOUTH) / side
    return [(round(_WEST + (i % side) * step_lon, 6), round(_SOUTH + (i // side) * step_lat, 6))
            for i in range(n)]


# --------------------------------------------------------------------------- the three paths

#: (requests per second of wall time, this process's CPU microseconds per request)
Figures = tuple[float, float]


class _Clock:
    """Wall time and this process's CPU time since it was made."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def figures(self, n: int) -> Figures:
        wall, cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
        return n / wall, cpu / n * 1e6


async def _bare(url: str, points: list[tuple[float, float]], concurrency: int) -> Figures:
    """A plain AsyncClient loop over the provider's own /reverse requests (built beforehand)."""
    import httpx

    from geotoolkit.providers import Nominatim
    from geotoolkit.results import ReverseQuery

    provider = Nominatim(url, user_agent=UA)
    requests = iter([provider.build_request(ReverseQuery(lon, lat)) for lon, lat in points])
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30.0) as client:

        async def worker() -> None:
            for request in requests:
                (await client.send(request)).raise_for_status()

        clock = _Clock()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return clock.figures(len(points))


def _accessor(url: str, points: list[tuple[float, float]], concurrency: int) -> Figures:
    """``gdf.geocode.reverse`` end to end (the input frame built beforehand)."""
    import geopandas as gpd

    import geotoolkit  # noqa: F401  (registers df.geocode)
    from geotoolkit.providers import Nominatim

    lon, lat = zip(*points, strict=True)
    gdf = gpd.GeoDataFrame({"fix": range(len(points))},
                           geometry=gpd.points_from_xy(lon, lat), crs="EPSG:4326")
    provider = Nominatim(url, user_agent=UA)
    clock = _Clock()
    out = gdf.geocode.reverse(provider=provider, rate=math.inf, gate="memory://", cache=False,
                              concurrency=concurrency, progress=False)
    figures = clock.figures(len(points))
    statuses = out["geocode_status"].value_counts().to_dict()
    if int(out["geocode_attempts"].sum()) != len(points) or statuses.get("failed", 0):
        raise RuntimeError(f"not one request per point, or failures: {statuses}")
    return figures


def _engine(url: str, points: list[tuple[float, float]], concurrency: int) -> Figures:
    """``Engine.run`` alone over the same ReverseQuery items."""
    from geotoolkit.engine import Engine
    from geotoolkit.gate import MemoryGate
    from geotoolkit.providers import Nominatim
    from geotoolkit.results import ReverseQuery

    engine = Engine(Nominatim(url, user_agent=UA), gate=MemoryGate(), rate=math.inf,
                    concurrency=concurrency)
    items = [ReverseQuery(lon, lat) for lon, lat in points]
    clock = _Clock()
    outcomes = asyncio.run(engine.run(items))
    figures = clock.figures(len(points))
    if sum(o.attempts for o in outcomes) != len(points):
        raise RuntimeError("not one request per point")
    return figures


# --------------------------------------------------------------------------- the child


def child(url: str, n: int, concurrency: int, rounds: int, profile: str) -> dict[str, Any]:
    points = _points(n)
    warm = _points(200)
    warm = [(lon + 1e-6, lat) for lon, lat in warm]  # other points: no simulator-side reuse
    asyncio.run(_bare(url, warm, concurrency))
    _accessor(url, warm, concurrency)
    _engine(url, warm, concurrency)
    rss_before = _rss_mb()
    bare: list[Figures] = []
    accessor: list[Figures] = []
    engine: list[Figures] = []
    paths: list[tuple[list[Figures], Any]] = [
        (bare, lambda: asyncio.run(_bare(url, points, concurrency))),
        (accessor, lambda: _accessor(url, points, concurrency)),
        (engine, lambda: _engine(url, points, concurrency))]
    for round_ in range(rounds):  # interleaved, each round in another order: a noisy
        for i in range(len(paths)):  # neighbour or a warm server favours no path
            figures, measure = paths[(round_ + i) % len(paths)]
            figures.append(measure())
    if profile:
        import cProfile

        cProfile.runctx("_accessor(url, points, concurrency)", globals(),
                        {"url": url, "points": points, "concurrency": concurrency,
                         "_accessor": _accessor}, filename=profile)
    best = max(r for r, _ in bare)
    return {"points": n, "concurrency": concurrency, "rounds": rounds,
            **{f"{name}_rps": [round(r) for r, _ in runs] for name, runs in
               (("bare", bare), ("accessor", accessor), ("engine", engine))},
            **{f"{name}_cpu_us": [round(c) for _, c in runs] for name, runs in
               (("bare", bare), ("accessor", accessor), ("engine", engine))},
            "ratio_accessor": round(max(r for r, _ in accessor) / best, 3),
            "ratio_engine": round(max(r for r, _ in engine) / best, 3),
            "ratio_accessor_per_round": [round(a[0] / b[0], 3)
                                         for a, b in zip(accessor, bare, strict=True)],
            "ratio_engine_per_round": [round(e[0] / b[0], 3) for e, b in zip(engine, bare, strict=True)],
            "rss_before_mb": round(rss_before), "peak_rss_mb": round(_peak_rss_mb()),
            "load": round(os.getloadavg()[0], 1)}


# --------------------------------------------------------------------------- the parent


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        url, n, concurrency, rounds, profile = sys.argv[2:7]
        print(json.dumps(child(url, int(n), int(concurrency), int(rounds), profile)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=5_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.02, help="simulator latency, s")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", default="", help="write a cProfile of one reverse() round here")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} (figures are wall time on a shared machine)")
    with simulator(args.latency) as url:
        out = subprocess.run([sys.executable, __file__, "--child", url, str(args.points),
                              str(args.concurrency), str(args.rounds), args.profile],
                             capture_output=True, text=True, check=False, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"the benchmark failed:\n{out.stderr}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    ok = r["ratio_accessor"] >= 0.9
    median_accessor = statistics.median(r["ratio_accessor_per_round"])
    median_engine = statistics.median(r["ratio_engine_per_round"])
    print(f"reverse: {r['points']} distinct points, concurrency {r['concurrency']}, latency "
          f"{args.latency * 1000:.0f} ms, no limit, {r['rounds']} rounds (load average after: "
          f"{r['load']})")
    print(f"  bare httpx loop      {r['bare_rps']} req/s, client CPU {r['bare_cpu_us']} us/request")
    print(f"  gdf.geocode.reverse  {r['accessor_rps']} req/s, client CPU {r['accessor_cpu_us']} "
          f"us/request (per round vs bare: {r['ratio_accessor_per_round']})")
    print(f"  Engine.run           {r['engine_rps']} req/s, client CPU {r['engine_cpu_us']} us/request "
          f"(per round vs bare: {r['ratio_engine_per_round']})")
    print(f"  ratio (best/best): gdf.geocode.reverse {r['ratio_accessor']}, Engine.run "
          f"{r['ratio_engine']} -> {'OK' if ok else 'MISSED'} (target >= 0.9); median of the "
          f"rounds: gdf.geocode.reverse {median_accessor:.3f}, Engine.run {median_engine:.3f}")
    print(f"  peak RSS of the benchmark process {r['peak_rss_mb']} MB "
          f"(before the measured rounds: {r['rss_before_mb']} MB)")


if __name__ == "__main__":
    main()
