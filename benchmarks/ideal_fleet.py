"""An ideal fleet against a limiter without burst: what this machine's own jitter costs.

A leaky bucket with no burst (nginx ``limit_req`` without ``burst``; the simulator's
``gcra-b0``) refuses a request that arrives less than 1/R after the one it let through
before. A fleet paces a margin under the limit (geotoolkit: 1 %, 101 ms apart at 10/s),
so a send that reaches the limiter about 1 ms later than the next one does is refused,
and each 429 pauses the whole fleet for its ``Retry-After`` (1 s: a 30 s run loses
0.033 of its utilisation). How often the machine alone makes that happen is measured
here without geotoolkit. K plain loops (``fleetbench.loop``, a process each, as the
fleet's workers) share one exact schedule at ``(1 - margin) x R`` from one start
instant, each sending every K-th slot: the fleet that knew the limit and needed no
gate. No pause; a refused row is sent again at its loop's next slot. Every figure comes
from the limiter's log.

Run from the repository root (about 40 s a run)::

    python benchmarks/ideal_fleet.py --limiters gcra-b0,nginx-ra-b0 --margins 0.01,0.02,0.03

Prints, per limiter, margin and run, the sends, the 429s and, for each 429, when it
came and the gap the limiter saw since the request it let through before; then, per
limiter and margin, the runs that drew at least one 429.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent), str(BENCH_DIR)]

from fleet import raise_priority  # noqa: E402  (the paths above first)
from fleetbench.cell import child_env  # noqa: E402
from fleetbench.loop import LoopArgs  # noqa: E402
from fleetbench.measure import refusals  # noqa: E402
from fleetbench.spec import ALL_LIMITERS, limiter_names  # noqa: E402
from fleetbench.target import FLEET, Arrival, Target  # noqa: E402

#: From the launch to the schedule's start: every loop has imported httpx and opened its
#: connection by then (a loop still starting would send its first slots late, together).
START_SECONDS = 8.0


def _launch(args: LoopArgs, workdir: Path) -> subprocess.Popen[bytes]:
    path = workdir / f"loop-{args.slot}.json"
    path.write_text(json.dumps(asdict(args)))
    return subprocess.Popen([sys.executable, "-m", "fleetbench.loop", str(path)], env=child_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def ideal_run(limiter: str, rate: float, margin: float, k: int, rows: int) -> list[Arrival]:
    """One run: ``k`` loops, ``rows`` successes in all; the fleet's arrivals, in order."""
    key = f"ideal-{limiter}-{time.time_ns()}"
    pace = rate * (1.0 - margin)
    with tempfile.TemporaryDirectory(prefix="geotoolkit-ideal-") as tmp:
        workdir = Path(tmp)
        with Target(ALL_LIMITERS[limiter], rate, workdir) as target:
            target.clock.arm()
            start_at = time.monotonic() + START_SECONDS
            loops = [_launch(LoopArgs(target.url, key, pace, f"{FLEET} {i}",
                                      rows=rows // k + (i < rows % k), slot=i, stride=k,
                                      start_at=start_at), workdir)
                     for i in range(min(k, rows))]
            deadline = start_at + 4.0 * rows / pace + 30.0
            for loop in loops:
                try:
                    loop.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    loop.kill()
                    loop.wait()
        arrivals = target.arrivals(key)  # after the block: a proxy's log is written
    return sorted((a for a in arrivals if a.who == "fleet"), key=lambda a: a.time)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--limiters", default="gcra-b0,nginx-ra-b0",
                   help=f"comma-separated, of {', '.join(ALL_LIMITERS)}")
    p.add_argument("--rate", type=float, default=10.0, help="the limit, requests/s per key")
    p.add_argument("--margins", default="0.01,0.02,0.03",
                   help="the schedule's margins under the limit, comma-separated")
    p.add_argument("--k", type=int, default=16, help="loops (processes) sharing the schedule")
    p.add_argument("--rows", type=int, default=300, help="successes per run")
    p.add_argument("--repeat", type=int, default=3, help="runs per limiter and margin")
    args = p.parse_args(argv)
    try:
        limiters = limiter_names(args.limiters)
    except ValueError as exc:
        p.error(str(exc))
    margins = [float(x) for x in args.margins.split(",") if x]
    if args.k < 1 or args.rows < 1 or args.repeat < 1 or not all(0 <= m < 1 for m in margins):
        p.error("--k, --rows and --repeat must be >= 1, each margin in [0, 1)")
    raise_priority()  # as fleet.py: the simulator stands for the provider's own machines
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} | limit {args.rate:g}/s, "
          f"K = {args.k}, {args.rows} rows a run")
    print("limiter      margin run  sent  429  429/ok  the 429s: s since the first, gap ms")
    drew: dict[tuple[str, float], int] = {}
    # Margins interleaved within each round: the machine's load drifts over minutes.
    for round_ in range(args.repeat):
        for limiter in limiters:
            for margin in margins:
                arrivals = ideal_run(limiter, args.rate, margin, args.k, args.rows)
                refused = refusals(arrivals)
                ok = sum(a.status == 200 for a in arrivals)
                drew[limiter, margin] = drew.get((limiter, margin), 0) + bool(refused)
                shown = ", ".join(f"{t:.1f} s {'-' if g is None else f'{g:.1f}'}"
                                  for t, g in refused[:8])
                print(f"{limiter:<12} {margin:>6.3f} {round_ + 1:>3} {len(arrivals):>5} "
                      f"{len(refused):>4} {len(refused) / max(ok, 1):>7.4f}  {shown}", flush=True)
    print("\nruns that drew a 429:")
    for (limiter, margin), count in drew.items():
        print(f"  {limiter:<12} margin {margin:.3f}: {count} of {args.repeat}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
