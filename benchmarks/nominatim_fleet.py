"""A fleet against a real Nominatim behind a real nginx ``limit_req``, as a user runs it.

K ``geotoolkit geocode`` processes (the CLI, cold) share one embedded SQLite gate and
geocode their shares of 400 real Liechtenstein addresses
(``tests/providers/fixtures/nominatim_lab/liechtenstein.csv``) through an nginx that
limits every client on loopback together to ``--rate`` requests/s (``burst=B nodelay``,
answering 429 without ``Retry-After``), in front of a self-hosted Nominatim
(``benchmarks/nominatim/lab.sh`` starts one). Three runs:

- ``known``: ``--rate R`` given, a fresh gate;
- ``discover``: no rate (a self-hosted instance publishes none), a fresh gate: the fleet
  discovers it;
- ``remembered``: no rate again, on the gate ``discover`` left: it starts where that
  run settled.

Every figure comes from nginx's access log: successes, 429s, the utilisation
``(S - 1) / (R * (last - first success))`` (``util``) and the same over the successes
after the run's last 429 (``after``: where the fleet settled); rows come from the
GeoPackages (in = geocoded + dead letters, or rows were lost). A process still running
after ``--deadline`` seconds is killed and its run reported with exit -9::

    bash benchmarks/nominatim/lab.sh &                     # a real Nominatim on :8088
    python benchmarks/nominatim_fleet.py                   # K = 4, 5 r/s burst 1 (~4 min)
    python benchmarks/nominatim_fleet.py --workers 8 --rate 10 --burst 0
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path[:0] = [str(REPO), str(BENCH_DIR)]

import pyogrio  # noqa: E402
from fleetbench.measure import utilisation  # noqa: E402
from fleetbench.nginx import Nginx  # noqa: E402

ADDRESSES = REPO / "tests" / "providers" / "fixtures" / "nominatim_lab" / "liechtenstein.csv"
AGENT = "geotoolkit-bench/1.0 (bench@example.org)"
RUNS = ("known", "discover", "remembered")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nominatim", default="http://127.0.0.1:8088", help="a loopback Nominatim")
    p.add_argument("--rate", type=float, default=5.0, help="nginx's limit, requests/s")
    p.add_argument("--burst", type=int, default=1, help="nginx's burst (0: none)")
    p.add_argument("--workers", type=int, default=4, help="CLI processes on one gate")
    p.add_argument("--rows", type=int, default=400, help="addresses (at most 400)")
    p.add_argument("--runs", default=",".join(RUNS), help="comma-separated subset of " + ", ".join(RUNS))
    p.add_argument("--deadline", type=float, help="seconds a run may take (default: 3x its rows "
                   "at the rate, plus 120 s)")
    args = p.parse_args(argv)
    if urlsplit(args.nominatim).hostname not in ("127.0.0.1", "localhost"):
        p.error("--nominatim must be a loopback URL (nginx proxies to 127.0.0.1)")
    return args


def split(rows: list[dict[str, str]], k: int, workdir: Path) -> list[Path]:
    """Worker ``i`` gets rows ``i, i + k, ...`` (as a team splits a file)."""
    paths = []
    for i in range(k):
        path = workdir / f"part{i}.csv"
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows[i::k])
        paths.append(path)
    return paths


def run(name: str, args: argparse.Namespace, nginx: Nginx, parts: list[Path], gate: Path,
        workdir: Path) -> dict[str, float]:
    """One run of the K processes through ``nginx`` (one for every run: the gate keys a
    provider by its host and port, so a run remembers what the one before learned)."""
    rate = ["--rate", f"{args.rate:g}"] if name == "known" else []
    seen = len(nginx.log("127.0.0.1"))
    started = time.monotonic()
    deadline = started + (args.deadline or 3.0 * args.rows / args.rate + 120.0)
    procs = []
    for i, part in enumerate(parts):
        out, output = workdir / f"{name}-{i}.gpkg", workdir / f"{name}-{i}.log"
        cmd = [sys.executable, "-m", "geotoolkit", "geocode", str(part), "-o", str(out),
               "--column", "address", "--base-url", nginx.url, "--user-agent", AGENT,
               "--gate", f"sqlite:///{gate}", "--cache", "none", "--progress", "none", *rate]
        with output.open("w") as sink:  # a file, not a pipe nobody reads while it runs
            procs.append((out, output, subprocess.Popen(cmd, cwd=REPO, stdout=sink,
                                                        stderr=subprocess.STDOUT)))
    codes = []
    for _, _, proc in procs:
        try:
            codes.append(proc.wait(timeout=max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(proc.wait())
    wall = time.monotonic() - started
    log = nginx.log("127.0.0.1")[seen:]  # this run's requests: those after the last run's
    ok = [t for t, status, _ in log if status == 200]
    refused_at = [t for t, status, _ in log if status == 429]
    refused = len(refused_at)
    # Where the fleet settled: the successes after its last 429 (all of them without one).
    after = [t for t in ok if not refused_at or t > refused_at[-1]]
    settled = matched = 0
    for out, output, proc in procs:
        if proc.returncode != 0:
            print(output.read_text()[-2000:], file=sys.stderr)
        for layer in ("geocoded", "dead_letters"):
            if out.exists():
                frame = pyogrio.read_dataframe(out, layer=layer, read_geometry=False)
                settled += len(frame)
                matched += int((frame.geocode_status == "matched").sum())
    return {"util": utilisation(ok, args.rate), "after": utilisation(after, args.rate),
            "ok": len(ok), "429": refused,
            "per_ok": refused / max(1, len(ok)), "matched": matched, "settled": settled,
            "wall": wall, "exit": max(codes)}


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    with ADDRESSES.open(newline="") as f:
        rows = list(csv.DictReader(f))[: args.rows]
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} | nginx limit_req "
          f"{args.rate:g} r/s burst {args.burst} | K = {args.workers} CLI processes, one "
          f"SQLite gate | {len(rows)} rows | load {os.getloadavg()[0]:.2f}")
    print(f"{'run':<11} {'util':>6} {'after':>6} {'ok':>4} {'429':>4} {'429/ok':>7} {'matched':>7} "
          f"{'rows in/out':>11} {'wall s':>7} exit")
    with tempfile.TemporaryDirectory(prefix="geotoolkit-nominatim-") as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o755)
        parts = split(rows, args.workers, workdir)
        gates = {"known": workdir / "known.db", "discover": workdir / "learned.db",
                 "remembered": workdir / "learned.db"}
        upstream = urlsplit(args.nominatim).port or 80
        with Nginx(upstream, args.rate, args.burst, workdir, zone_key="$remote_addr") as nginx:
            for name in args.runs.split(","):
                f = run(name, args, nginx, parts, gates[name], workdir)
                print(f"{name:<11} {f['util']:>6.3f} {f['after']:>6.3f} {f['ok']:>4} {f['429']:>4} "
                      f"{f['per_ok']:>7.3f} "
                      f"{f['matched']:>7} {len(rows):>5}/{f['settled']:<5} {f['wall']:>7.1f} "
                      f"{f['exit']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
