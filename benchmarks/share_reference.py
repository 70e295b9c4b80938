"""What a limiter lets a plain pacer have beside another client on the same key.

The fleet benchmark's "another client takes 40 %" cells ask the fleet to settle near the
share left (at least 0.85 of it). Whether a pace under the share is also free of 429s
depends on the limiter, not on the fleet: this script measures it without geotoolkit.
For each limiter and each pace, two plain loops (``fleetbench.loop``, the same-run
reference pacer's loop) run side by side on one key for the same ``--seconds`` (their
slots in that span): the other client at ``--other`` requests/s, and a pacer at the pace.
Both send on an exact schedule and re-send a refused row at their next slot. Every
figure comes from the limiter's log.

Run from the repository root::

    python benchmarks/share_reference.py --limiters haproxy --paces 5,5.3,5.6,6
    python benchmarks/share_reference.py --limiters fixed-1s,sliding-log,gcra-b1,haproxy

Prints, per limiter and pace, the pacer's sends and the share refused, and the other
client's. HAProxy comes from Debian (``apt-get install -y haproxy``); nginx the same
(``nginx-light``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent), str(BENCH_DIR)]

from fleetbench.loop import LoopArgs, run_loop  # noqa: E402  (the paths above first)
from fleetbench.spec import ALL_LIMITERS, limiter_names  # noqa: E402
from fleetbench.target import FLEET, OTHER, Target  # noqa: E402


def side_by_side(limiter: str, rate: float, pace: float, other: float,
                 seconds: float) -> dict[str, tuple[int, int]]:
    """``{"fleet": (sent, refused), "other": (sent, refused)}`` for one pace."""
    key = f"share-{limiter}-{pace:g}-{time.time_ns()}"
    with tempfile.TemporaryDirectory() as workdir:
        with (Target(ALL_LIMITERS[limiter], rate, Path(workdir)) as target,
              ThreadPoolExecutor(max_workers=2) as pool):
            loops = [pool.submit(run_loop, LoopArgs(target.url, key, r, prefix, seconds=seconds))
                     for r, prefix in ((other, OTHER), (pace, FLEET))]
            for loop in loops:
                loop.result()  # a loop that failed (the limiter hung up) fails the pace
        arrivals = target.arrivals(key)  # after the block: a proxy's log is written
    return {who: (sum(a.who == who for a in arrivals),
                  sum(a.who == who and a.status == 429 for a in arrivals))
            for who in ("fleet", "other")}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--limiters", default="haproxy",
                   help=f"comma-separated, of {', '.join(ALL_LIMITERS)}")
    p.add_argument("--rate", type=float, default=10.0, help="the limit, requests/s per key")
    p.add_argument("--other", type=float, default=4.0, help="the other client's pace")
    p.add_argument("--paces", default="5,5.3,5.6,6", help="the pacer's paces, comma-separated")
    p.add_argument("--seconds", type=float, default=25.0)
    args = p.parse_args(argv)
    try:
        limiters = limiter_names(args.limiters)
    except ValueError as exc:
        p.error(str(exc))
    paces = [float(x) for x in args.paces.split(",") if x]
    print(f"# limit {args.rate:g}/s, the other client at {args.other:g}/s, {args.seconds:g} s each")
    print("limiter      pace  share  sent refused  share  | other sent refused")
    for limiter in limiters:
        for pace in paces:
            got = side_by_side(limiter, args.rate, pace, args.other, args.seconds)
            (sent, refused), (osent, orefused) = got["fleet"], got["other"]
            left = args.rate - args.other
            print(f"{limiter:<12} {pace:>4g} {pace / left:>6.3f} {sent:>5} {refused:>7} "
                  f"{refused / max(sent, 1):>6.3f}  | {osent:>10} {orefused:>7}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
