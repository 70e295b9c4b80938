"""One CLI run with no ``--rate`` against a real Nominatim behind nginx as self-hosters run it.

nginx's ``limit_req`` with its defaults: no ``limit_req_status`` (a refusal is its 503
HTML page, no ``Retry-After``), keyed on the client's address, at ``--rate`` requests/s,
with no burst, or with ``burst=B`` and no ``nodelay`` (up to B requests wait in nginx's
queue, those beyond are refused). In front of a self-hosted Nominatim
(``benchmarks/nominatim/lab.sh``). The CLI gets no rate (a self-hosted instance publishes
none): it discovers the pace on a fresh SQLite gate, with no cache.

Every figure comes from nginx's access log (requests, 200s, 503s, their share) and the
GeoPackage (rows in = geocoded + dead letters; statuses; dead letters that failed on
throttling)::

    bash benchmarks/nominatim/lab.sh &                       # a real Nominatim on :8088
    python benchmarks/nominatim/polite.py --rate 2           # the sample CSV, no burst
    python benchmarks/nominatim/polite.py --rate 2 --burst 5 \\
        --csv tests/providers/fixtures/nominatim_lab/liechtenstein.csv
    python benchmarks/nominatim/polite.py --rate 2 --repeat 14   # the sample, 308 rows

Measured 2026-12-06 (Nominatim 5.3.3, nginx-light, 2 cores shared), at 2 r/s; every row
settled, none failed on throttling (the sample's one failure is its empty address: "missing
address"):

    nginx               input                      requests  200  503  util   rows
    no burst            sample, 22 rows                  22   21    1  0.711  18 matched, 3 no match, 1 failed
    no burst            sample x 14, 308 rows            22   21    1  0.727  252 / 42 / 14
    no burst            liechtenstein.csv, 400 rows     399  395    4  0.962  393 matched, 7 no match
    burst=5, queued     sample, 22 rows                  21   21    0  0.947  18 / 3 / 1
    burst=5, queued     sample x 14, 308 rows            21   21    0  0.949  252 / 42 / 14
    burst=5, queued     liechtenstein.csv, 400 rows     395  395    0  0.997  393 matched, 7 no match

(A repeated address is sent once per run; the 400 addresses hold a few repeats too.)
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

BENCH_DIR = Path(__file__).resolve().parents[1]
REPO = BENCH_DIR.parent
sys.path[:0] = [str(REPO), str(BENCH_DIR)]

import pyogrio  # noqa: E402
from fleetbench.measure import utilisation  # noqa: E402
from fleetbench.nginx import Nginx  # noqa: E402

SAMPLE = REPO / "notebooks" / "data" / "addresses.csv"
AGENT = "geotoolkit-bench/1.0 (bench@example.org)"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nominatim", default="http://127.0.0.1:8088", help="a loopback Nominatim")
    p.add_argument("--rate", type=float, default=2.0, help="nginx's limit, requests/s")
    p.add_argument("--burst", type=int, default=0, help="nginx's burst, queued (0: none)")
    p.add_argument("--csv", type=Path, default=SAMPLE, help="a CSV with an address column")
    p.add_argument("--repeat", type=int, default=1, help="the CSV's rows this many times over")
    p.add_argument("--deadline", type=float, default=900.0, help="seconds the run may take")
    args = p.parse_args(argv)
    if urlsplit(args.nominatim).hostname not in ("127.0.0.1", "localhost"):
        p.error("--nominatim must be a loopback URL (nginx proxies to 127.0.0.1)")
    return args


def rows_csv(args: argparse.Namespace, workdir: Path) -> tuple[Path, int]:
    with args.csv.open(newline="") as f:
        rows = list(csv.DictReader(f))
    path = workdir / "input.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows * args.repeat)
    return path, len(rows) * args.repeat


def settled(out: Path) -> tuple[Counter[str], list[str]]:
    """The statuses of every row in the GeoPackage, and the dead letters' reasons."""
    statuses: Counter[str] = Counter()
    reasons: list[str] = []
    for layer in ("geocoded", "dead_letters"):
        if out.exists():
            frame = pyogrio.read_dataframe(out, layer=layer, read_geometry=False)
            statuses.update(frame.geocode_status.astype(str))
            if layer == "dead_letters":
                reasons += [str(r) for r in frame.geocode_reason]
    return statuses, reasons


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    with tempfile.TemporaryDirectory(prefix="geotoolkit-polite-") as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o755)
        source, n = rows_csv(args, workdir)
        upstream = urlsplit(args.nominatim).port or 80
        out = workdir / "out.gpkg"
        with Nginx(upstream, args.rate, args.burst, workdir, zone_key="$remote_addr",
                   status=None, nodelay=False) as nginx:
            cmd = [sys.executable, "-m", "geotoolkit", "geocode", str(source), "-o", str(out),
                   "--column", "address", "--base-url", nginx.url, "--user-agent", AGENT,
                   "--gate", f"sqlite:///{workdir / 'gate.db'}", "--cache", "none",
                   "--progress", "none"]
            started = time.monotonic()
            done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                                  timeout=args.deadline, check=False)
            wall = time.monotonic() - started
            log = nginx.log("127.0.0.1")
        statuses, reasons = settled(out)
        codes = Counter(status for _, status, _ in log)
        ok = [t for t, status, _ in log if status == 200]
        throttled = [r for r in reasons if "throttl" in r.lower() or "503" in r or "429" in r]
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} | nginx limit_req "
              f"{args.rate:g} r/s, burst {args.burst} (queued, no nodelay), its default 503 | "
              f"{args.csv.name} x {args.repeat}: {n} rows | CLI, no --rate, fresh gate, no cache")
        print(f"exit {done.returncode} in {wall:.1f} s: {done.stdout.strip() or done.stderr.strip()[-300:]}")
        print(f"nginx: {len(log)} requests, {dict(sorted(codes.items()))}; refused "
              f"{codes[503] / max(1, len(log)):.1%} of requests, {codes[503] / max(1, len(ok)):.3f} "
              f"per success; utilisation of the limit over the successes {utilisation(ok, args.rate):.3f}")
        print(f"rows: {n} in, {sum(statuses.values())} out: {dict(sorted(statuses.items()))}; "
              f"failed on throttling: {len(throttled)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
