"""Chaos run: the real CLI against a hostile simulator, killed at random, rerun until done.

Prints figures and the checks it made; exits 1 when a promise was broken. Not a test.

``--rows`` rows (default 5 000) go into a CSV: duplicates (also differing in case and
spacing), empty cells, unicode, cells longer than a URL may carry, quotes and newlines,
addresses that find nothing, and addresses carrying every fault token of
``geotoolkit.testing.FAULTS`` (transient ones as ``#503x2`` that end matched, permanent
ones that end failed). ``python3 -m geotoolkit geocode ... -o out.gpkg`` runs as a child
process against a :class:`~geotoolkit.testing.ProviderSimulator` in this process, on the
default SQLite gate and cache (``XDG_CACHE_HOME`` points into the work folder; or
``--gate``/``--cache`` URLs), with an API key given the documented way
(``--api-key-env``). Meanwhile the simulator's weather changes (seeded): its rate limiter
and ``Retry-After`` form (delta-seconds, HTTP-date, reset headers), random 503s, short
outages (refused, reset, hung). Each of the first ``--kills`` runs is ended by SIGKILL,
SIGTERM or SIGINT at a random moment (after a random number of requests, or early, while
it starts); then it is rerun until it exits 0.

Checked from the outputs alone (and the simulator's request log):

- every input row is in the GeoPackage exactly once (layer ``geocoded`` or
  ``dead_letters``), with a status, and a reason for every dead letter; rows whose
  outcome is certain (plain addresses, ``nowhere``, ``#429x1``...) have the status
  expected;
- matched points are EPSG:4326 Points at the simulator's ``(lon, lat)``;
- no query was sent again once the cache held it (the cache is read after every run);
  queries answered but not yet stored when a run was killed are counted as sent again;
- no ``.partial`` file is left; the API key is in no output, log, gate or cache file;
- a SIGTERM/SIGINT run exits 143/130 saying ``terminated``/``interrupted``, no traceback.

Usage::

    python benchmarks/chaos.py                          # 5 000 rows, 6 kills, ~2-3 minutes
    python benchmarks/chaos.py --rows 20000 --kills 20 --seed 7
    python benchmarks/chaos.py --gate redis://127.0.0.1:6379/15 \\
        --cache postgresql://postgres@127.0.0.1:5432/test
    python benchmarks/chaos.py --scenarios              # the extra scenarios only (below)

``--scenarios`` runs what a user may meet besides kills and says what they saw: a second
process started on the same output while the first runs, the output folder made
read-only mid-run, and a truncated SQLite cache on a rerun.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from geotoolkit.providers import Nominatim  # noqa: E402
from geotoolkit.results import normalise_address  # noqa: E402
from geotoolkit.testing import ProviderSimulator  # noqa: E402
from geotoolkit.testing.faults import FAULTS, find_tokens  # noqa: E402

UA = "geotoolkit-chaos/1.0 (chaos@example.org)"
KEY = "chaos-SECRET-key-0123456789abcdef"
KEY_ENV = "CHAOS_GEOCODER_KEY"

#: Fault rows: the token, and the status the row must end with (None: not certain).
#: Transient faults that stop after N answers end matched (N below max attempts).
#: ``#retryafterhuge`` is left out: its 4000-digit Retry-After is capped at 300 s, as
#: documented, and the whole fleet waits those 5 minutes (``--slow-faults`` adds it).
SLOW_FAULT_ROWS: tuple[tuple[str, str | None], ...] = (("#retryafterhugex1", "matched"),)
FAULT_ROWS: tuple[tuple[str, str | None], ...] = (
    ("#429x1", "matched"), ("#429x3", "matched"), ("#retryafterjunkx1", "matched"),
    ("#503x2", "matched"), ("#500x2", "matched"), ("#resetx1", "matched"), ("#timeoutx1", "matched"),
    ("#resetbodyx1", "matched"), ("#status=502x1", "matched"), ("#status=504x2", "matched"),
    ("#trickleheadersx1", "matched"), ("#tricklex1", "matched"),
    ("#500", "failed"), ("#malformed", "failed"), ("#error", None), ("#reset", "failed"),
    ("#huge", "failed"), ("#badgzip", "failed"), ("#overflow", "failed"),
    ("#bignum", "failed"), ("#echo400", "failed"), ("#html", "failed"),
    ("#status=418", "failed"), ("#status=451", "failed"), ("#poison", "failed"),
    ("#timeout", "failed"), ("#trickle", "failed"),
)

TOWNS = ("9490 Vaduz", "9494 Schaan", "9495 Triesen", "9496 Balzers", "9497 Triesenberg",
         "9485 Nendeln", "9486 Schaanwald", "9487 Gamprin", "9488 Schellenberg", "9493 Mauren")


# --------------------------------------------------------------------------- the input


@dataclass(frozen=True)
class Row:
    row_id: int
    address: str
    kind: str
    expect: str | None  # matched, no_match, failed, or None (not certain)


def make_rows(n: int, rng: random.Random, slow_faults: bool = False) -> list[Row]:
    """``n`` rows: mostly plain addresses, the hostile ones spread at random."""
    rows: list[Row] = []
    special = _special_rows(rng, SLOW_FAULT_ROWS if slow_faults else ())
    positions = set(rng.sample(range(n), min(n, len(special))))
    queue = iter(special)
    for i in range(n):
        if i in positions:
            address, kind, expect = next(queue)
        elif rows and rng.random() < 0.12:  # a duplicate, maybe in another case and spacing
            earlier = rng.choice(rows)
            address = earlier.address if rng.random() < 0.5 else \
                "  " + earlier.address.upper().replace(" ", "   ") + " "
            kind, expect = f"dup:{earlier.kind}", earlier.expect
        else:
            street = rng.choice(("Landstrasse", "Städtle", "Feldkircher Strasse", "Im Bretscha"))
            address, kind, expect = f"{street} {i}, {rng.choice(TOWNS)}", "plain", "matched"
        rows.append(Row(i, address, kind, expect))
    return rows


def _special_rows(rng: random.Random, extra: tuple[tuple[str, str | None], ...]
                  ) -> list[tuple[str, str, str | None]]:
    out: list[tuple[str, str, str | None]] = []
    for token, expect in extra:
        out.append((f"Slow fault street {token}, 9490 Vaduz", f"fault:{token}", expect))
    for i in range(4):
        out.append(("", "empty", "failed"))
        out.append(("   ", "blank", "failed"))
        out.append((f"Nowhere Lane {i}", "nowhere", "no_match"))
        out.append((f"Städtle {i}, 9490 Vaduz — ünïcødé 東京 🚀 «{i}»", "unicode", "matched"))
        out.append((f"Im Gässle {i}, \"Haus\", 9494 Schaan\nzweite Zeile", "quotes", "matched"))
        out.append((f"Lange Strasse {i} " + "x" * 5000, "long", "failed"))
        out.append((f"Zollstrasse {i}, 9490 Vaduz " + "y" * 300, "longish", "matched"))
    for j in range(2):  # twice, but a scripted 429 once: each cuts the fleet's pace
        for token, expect in FAULT_ROWS[j * 3:] if j else FAULT_ROWS:
            out.append((f"Fault street {j} {token}, 9490 Vaduz", f"fault:{token}", expect))
    rng.shuffle(out)
    return out


def write_csv(rows: list[Row], path: Path) -> None:
    import pandas as pd

    pd.DataFrame({"row_id": [r.row_id for r in rows],
                  "address": [r.address for r in rows]}).to_csv(path, index=False)


# --------------------------------------------------------------------------- the world


class Weather:
    """Changes the simulator's behaviour every few seconds (seeded), until stopped."""

    def __init__(self, sim: ProviderSimulator, rng: random.Random, calm: bool) -> None:
        self.sim, self.rng, self.calm = sim, rng, calm
        self.changes: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Weather:
        if not self.calm:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.sim.outage(None)

    def _loop(self) -> None:
        while not self._stop.wait(self.rng.uniform(1.0, 4.0)):
            self._change()

    def _change(self) -> None:
        sim, rng = self.sim, self.rng
        roll = rng.random()
        if roll < 0.15:
            mode = rng.choice(("refuse", "reset", "hang"))
            self.changes[f"outage {mode}"] += 1
            sim.outage(mode)  # type: ignore[arg-type]
            self._stop.wait(rng.uniform(0.3, 1.5))
            sim.outage(None)
        elif roll < 0.45:
            sim.retry_after = rng.choice(("auto", "http-date", "reset-headers", 1))
            self.changes[f"retry_after {sim.retry_after}"] += 1
        elif roll < 0.7:
            sim.error_503_rate = rng.choice((0.0, 0.0, 0.02, 0.05))
            self.changes["503 rate"] += 1
        else:
            limiter = rng.choice(("sliding-window", "gcra", "token-bucket", "fixed-window"))
            sim.configure(limiter=limiter, rate_limit=rng.choice((120, 200, 300)),
                          burst=5 if limiter in ("gcra", "token-bucket") else None,
                          window_seconds=1.0)
            self.changes[f"limiter {limiter}"] += 1


# --------------------------------------------------------------------------- the runs


@dataclass
class Setup:
    work: Path
    sim: ProviderSimulator
    args: argparse.Namespace
    env: dict[str, str] = field(default_factory=dict)

    @property
    def out(self) -> Path:
        return self.work / "out.gpkg"

    def argv(self, output: Path | None = None) -> list[str]:
        argv = [sys.executable, "-m", "geotoolkit", "geocode", str(self.work / "in.csv"),
                "-o", str(output or self.out), "--base-url", self.sim.url, "--user-agent", UA,
                "--api-key-env", KEY_ENV, "--rate", str(self.args.rate),
                "--concurrency", str(self.args.concurrency), "--progress", "text",
                "--timeout", "1", "--request-deadline-seconds", "2.5", "--max-attempts", "4",
                "--max-response-bytes", "1000000", "--circuit-timeout-seconds", "120"]
        if self.args.gate:
            argv += ["--gate", self.args.gate]
        if self.args.cache:
            argv += ["--cache", self.args.cache]
        return argv

    def cache_path(self) -> Path:
        return self.work / "xdg" / "geotoolkit" / "results.sqlite"


def make_setup(work: Path, sim: ProviderSimulator, args: argparse.Namespace) -> Setup:
    setup = Setup(work, sim, args)
    setup.env = {**os.environ, "PYTHONPATH": str(ROOT), KEY_ENV: KEY,
                 "XDG_CACHE_HOME": str(work / "xdg"), "GEOTOOLKIT_GATE_URL": "",
                 "GEOTOOLKIT_CACHE_URL": ""}
    for name in ("GEOTOOLKIT_GATE_URL", "GEOTOOLKIT_CACHE_URL"):
        setup.env.pop(name)
    return setup


@dataclass
class Run:
    index: int
    signal: str | None
    returncode: int
    first_request: int
    last_request: int
    stderr_tail: str
    seconds: float
    started: float  # time.time() as it was started


def cached_keys(setup: Setup, prefix: str) -> dict[str, float]:
    """The queries the cache holds, as normalised addresses (the namespace cut off), with
    when each was stored."""
    url = setup.args.cache
    if url and url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(url) as conn:
            keys = conn.execute("SELECT key, stored_at FROM geotoolkit_results").fetchall()
    else:
        path = setup.cache_path() if not url else Path(url.removeprefix("sqlite:///"))
        if not path.exists():
            return {}
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            keys = db.execute("SELECT key, stored_at FROM results").fetchall()
    return {k[len(prefix):]: float(at) for k, at in keys if k.startswith(prefix)}


def one_run(setup: Setup, index: int, rng: random.Random, kill: bool, remaining: int) -> Run:
    """One run of the CLI; ``kill``: end it with a signal at a random moment (before
    ``remaining``, the queries not cached yet, were all sent)."""
    sim = setup.sim
    first = len(sim.requests)
    log = setup.work / f"run{index:02d}.log"
    started, wall = time.monotonic(), time.time()
    # One run in four starts with SIGINT ignored, as in a script's background or nohup
    # (its SIGINT kill is a SIGTERM); the others with SIGINT as on a terminal, however
    # this script was started.
    nohup = rng.random() < 0.25
    with open(log, "w") as err:
        with _sigint(nohup):
            child = subprocess.Popen(setup.argv(), env=setup.env, stdout=err, stderr=err,
                                     cwd=setup.work)
        sent = None
        if kill:
            sent = _kill_at_random(child, sim, first, rng, remaining, nohup)
        child.wait()
    tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
    return Run(index, sent, child.returncode, first, len(sim.requests), tail[0],
               time.monotonic() - started, wall)


@contextlib.contextmanager
def _sigint(ignored: bool) -> Iterator[None]:
    """SIGINT ignored or not in a child started in the block (a child inherits an ignored
    signal; a Python handler is the default again after exec)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _kill_at_random(child: subprocess.Popen[bytes], sim: ProviderSimulator, first: int,
                    rng: random.Random, remaining: int, nohup: bool) -> str | None:
    signum = rng.choice((signal.SIGKILL, signal.SIGTERM, signal.SIGINT))
    if nohup and signum == signal.SIGINT:
        signum = signal.SIGTERM
    if rng.random() < 0.2:  # while it starts: importing, opening the cache, reading the CSV
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(rng.uniform(0.2, 3.0))
    else:
        target = first + rng.randint(1, max(2, int(remaining * 0.9)))
        while child.poll() is None and not sim.wait_for_requests(target, timeout=0.5):
            pass
    if child.poll() is not None:
        return None
    child.send_signal(signum)
    return signal.Signals(signum).name + (" (SIGINT ignored)" if nohup else "")


# --------------------------------------------------------------------------- the checks


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fail(self, text: str) -> None:
        self.problems.append(text)


def check_runs(runs: list[Run], report: Report) -> None:
    expected = {"SIGTERM": (143, "terminated"), "SIGINT": (130, "interrupted")}
    for run in runs:
        name = (run.signal or "").split(" ")[0]
        if name in expected:
            code, word = expected[name]
            if run.returncode not in (code, 0) or (run.returncode == code and run.stderr_tail != word):
                report.fail(f"run {run.index} ({run.signal}): exit {run.returncode}, "
                            f"last line {run.stderr_tail!r}")
        elif run.signal is None and run.returncode != 0:
            report.fail(f"run {run.index} (not killed) exit {run.returncode}: {run.stderr_tail!r}")


def check_logs(work: Path, report: Report) -> None:
    for log in sorted(work.glob("run*.log")):
        if "Traceback" in log.read_text(errors="replace"):
            report.fail(f"{log.name}: a traceback")


def check_resends(setup: Setup, snapshots: list[dict[str, float]], runs: list[Run],
                  final: dict[str, float], report: Report) -> dict[str, int]:
    """Queries sent again: once the cache held them (a broken promise), or because a kill
    came between the answer and the store (in flight: allowed, counted). ``final``: the
    queries the cache holds at the end (failures are never cached: sent by every run)."""
    requests = setup.sim.requests
    answered: set[str] = set()
    after_cached = in_flight = probed = 0
    # A circuit closed by a probe made with a query answered before (only rows that failed
    # were left): one cached query sent again each time, allowed (docs/testing.md).
    probes = {run.index: (setup.work / f"run{run.index:02d}.log").read_text(errors="replace")
              .count("answers again: circuit closed") for run in runs}
    for run, held in zip(runs, snapshots, strict=True):
        this_run: set[str] = set()
        for r in requests[run.first_request:run.last_request]:
            q = r.params.get("q")
            if q is None:
                continue
            key = normalise_address(q)
            if key in held and probes.get(run.index, 0) > 0:
                probes[run.index] -= 1  # the circuit's probe with a query answered before
                probed += 1
            elif key in held:
                after_cached += 1
                if after_cached <= 5:
                    report.fail(f"run {run.index} (started {run.started:.3f}) sent {q[:60]!r} "
                                f"again at {r.time:.3f} (status {r.status}), stored "
                                f"{held[key]:.3f}, in the cache before the run")
            elif key in answered and key in final and key not in this_run:
                in_flight += 1
                this_run.add(key)
            if r.status == 200:
                this_run.add(key)
        answered |= this_run
    if after_cached > 5:
        report.fail(f"... {after_cached} requests in all for queries already cached")
    return {"after_cached": after_cached, "in_flight": in_flight, "probed": probed}


def check_output(setup: Setup, rows: list[Row], report: Report) -> Counter[str]:
    import pyogrio

    out = setup.out
    if not out.exists():
        report.fail(f"{out} missing")
        return Counter()
    info = pyogrio.read_info(out, layer="geocoded")
    if info["geometry_type"] != "Point" or "4326" not in str(info["crs"]):
        report.fail(f"geocoded layer: {info['geometry_type']} in {info['crs']}")
    geocoded = pyogrio.read_dataframe(out, layer="geocoded")
    letters = pyogrio.read_dataframe(out, layer="dead_letters", read_geometry=False)
    seen = Counter(int(i) for i in [*geocoded["row_id"], *letters["row_id"]])
    ids = {r.row_id for r in rows}
    missing, twice = ids - set(seen), [i for i, c in seen.items() if c > 1]
    extra = set(seen) - ids
    if missing or twice or extra:
        report.fail(f"rows missing {sorted(missing)[:10]} ({len(missing)}), twice {twice[:10]} "
                    f"({len(twice)}), unknown {sorted(extra)[:10]}")
    by_id = {r.row_id: r for r in rows}
    statuses: Counter[str] = Counter()
    wrong: list[str] = []
    for frame in (geocoded, letters):
        for rec in frame.itertuples(index=False):
            row = by_id.get(int(rec.row_id))
            status = rec.geocode_status
            statuses[status] += 1
            if row is None:
                continue
            if status not in ("matched", "no_match", "failed", "too_coarse"):
                wrong.append(f"row {row.row_id}: status {status!r}")
            if status != "matched" and not (isinstance(rec.geocode_reason, str) and rec.geocode_reason):
                wrong.append(f"row {row.row_id} ({row.kind}): {status} without a reason")
            if row.expect is not None and status != row.expect:
                wrong.append(f"row {row.row_id} ({row.kind}): {status}, expected {row.expect}: "
                             f"{str(rec.geocode_reason)[:120]!r}")
    if len(geocoded):
        _check_points(setup.sim, geocoded, by_id, wrong)
    for text in wrong[:15]:
        report.fail(text)
    if len(wrong) > 15:
        report.fail(f"... {len(wrong)} row problems in all")
    return statuses


def _check_points(sim: ProviderSimulator, geocoded: Any, by_id: dict[int, Row],
                  wrong: list[str]) -> None:
    bad = 0
    for rec, geom in zip(geocoded.itertuples(index=False), geocoded.geometry, strict=True):
        want = sim.expected(by_id[int(rec.row_id)].address)
        point = (geom.x, geom.y) if geom is not None and geom.geom_type == "Point" else None
        if want is None or point is None or max(abs(point[0] - want[0]),
                                                abs(point[1] - want[1])) > 1e-9 or \
                (rec.lon, rec.lat) != point:
            bad += 1
            if bad <= 5:
                wrong.append(f"row {rec.row_id}: point {point}, lon/lat {(rec.lon, rec.lat)}, "
                             f"simulator {want}")


def check_files(work: Path, report: Report) -> None:
    for path in work.rglob("*"):
        if not path.is_file():
            continue
        if ".partial" in path.name:
            report.fail(f"left behind: {path.relative_to(work)}")
        if path.name == "in.csv":
            continue
        with open(path, "rb") as f:
            if KEY.encode() in f.read():
                report.fail(f"the API key is in {path.relative_to(work)}")


# --------------------------------------------------------------------------- main run


def chaos(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="geotoolkit-chaos-"))
    rows = make_rows(args.rows, rng, args.slow_faults)
    write_csv(rows, work / "in.csv")
    report = Report()
    covered = {find_tokens(r.address)[0].name.split("=")[0] for r in rows if find_tokens(r.address)}
    missed = {f.split("=")[0] for f in FAULTS} - covered
    if missed:
        report.notes.append(f"faults not in the input: {', '.join(sorted(missed))}")
    started = time.monotonic()
    with ProviderSimulator(rate_limit=200, valid_keys=[KEY], hang_seconds=2.0,
                           trickle_interval_seconds=0.3, huge_body_bytes=2_000_000,
                           latency_seconds=args.latency, seed=args.seed) as sim:
        setup = make_setup(work, sim, args)
        prefix = Nominatim(sim.url, user_agent=UA, api_key=KEY).cache_namespace() + ":"
        runs: list[Run] = []
        snapshots: list[dict[str, float]] = []
        unique = len({normalise_address(r.address) for r in rows if r.address.strip()})
        with Weather(sim, random.Random(args.seed + 1), args.calm) as weather:
            while True:
                index = len(runs)
                if index >= args.max_runs:
                    report.fail(f"not done after {index} runs")
                    break
                snapshots.append(cached_keys(setup, prefix))
                run = one_run(setup, index, rng, kill=index < args.kills,
                              remaining=unique - len(snapshots[-1]))
                runs.append(run)
                print(f"run {index}: {run.signal or 'no signal'}, exit {run.returncode}, "
                      f"{run.last_request - run.first_request} requests, {run.seconds:.1f} s: "
                      f"{run.stderr_tail[:140]}", flush=True)
                if run.returncode == 0:
                    break
        wall = time.monotonic() - started
        check_runs(runs, report)
        check_logs(work, report)
        resends = check_resends(setup, snapshots, runs, cached_keys(setup, prefix), report)
        statuses = check_output(setup, rows, report)
        check_files(work, report)
        requests = len(sim.requests)
    kills = sum(1 for r in runs if r.signal)
    print(f"\nrows {args.rows} (unique queries {len({normalise_address(r.address) for r in rows})}), "
          f"seed {args.seed}, gate {args.gate or 'default SQLite'}, cache "
          f"{args.cache or 'default SQLite'}")
    print(f"runs needed {len(runs)}, kills {kills} "
          f"({dict(Counter(r.signal for r in runs if r.signal))}), requests {requests}, "
          f"wall {wall:.0f} s")
    print(f"rows sent again: {resends['in_flight']} (answered before a kill came, not stored "
          f"yet), {resends['probed']} as the circuit's probe (a cached query, when only rows "
          f"that failed were left), {resends['after_cached']} otherwise after the cache held "
          f"them")
    print(f"statuses {dict(statuses)}; weather {dict(weather.changes)}")
    for text in report.notes:
        print(f"note: {text}")
    for text in report.problems:
        print(f"PROBLEM: {text}")
    print(f"work folder: {work}" if report.problems or args.keep else "all checks passed")
    if not report.problems and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if report.problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--kills", type=int, default=5, help="runs ended by a signal")
    parser.add_argument("--max-runs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", default="150", help="--rate of the CLI (default 150)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.01, help="simulator latency (s)")
    parser.add_argument("--gate", help="a gate URL (default: the CLI's default SQLite file)")
    parser.add_argument("--cache", help="a cache URL (default: the CLI's default SQLite file)")
    parser.add_argument("--calm", action="store_true", help="no weather: faults in rows only")
    parser.add_argument("--slow-faults", action="store_true",
                        help="add #retryafterhuge (the fleet waits its capped 300 s)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--scenarios", action="store_true",
                        help="run the extra scenarios instead (second process, read-only "
                             "folder, truncated cache)")
    args = parser.parse_args()
    if args.scenarios:
        from chaos_scenarios import scenarios  # benchmarks/chaos_scenarios.py

        return scenarios(args)
    return chaos(args)


if __name__ == "__main__":
    sys.exit(main())
