"""One run of one cell: the limited provider, the fleet (or the reference pacer), and the
other client if any; then the figures.

Cold workers (the default) are started with ``subprocess.Popen`` one after the other,
as fast as the benchmark can, each a fresh interpreter that imports geotoolkit and
runs at once: the cell's clock starts at the first launch. Warm workers (``--warm``)
are forked from a fork server that imported geotoolkit, warm up, and start together
when all are ready: the clock starts at that start line.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fleetbench.loop import LoopArgs
from fleetbench.measure import Figures, summarise
from fleetbench.spec import CellSpec
from fleetbench.target import FLEET, OTHER, REFERENCE, Arrival, Target
from fleetbench.worker import WorkerArgs, WorkerResult, warm_main

__all__ = ["BENCH_DIR", "REPO", "Runner", "gate_url"]

BENCH_DIR = Path(__file__).resolve().parents[1]
REPO = BENCH_DIR.parent
REDIS_URL = os.environ.get("GEOTOOLKIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
POSTGRES_DSN = os.environ.get("GEOTOOLKIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def gate_url(name: str, workdir: Path) -> str:
    if name == "redis":
        return REDIS_URL
    if name == "postgres":
        return POSTGRES_DSN
    if name == "sqlite":
        return f"sqlite:///{workdir / f'gate-{uuid.uuid4().hex[:8]}.sqlite'}"
    raise ValueError(f"unknown gate {name!r}")


def child_env() -> dict[str, str]:
    """The environment of the benchmark's child processes: this checkout first."""
    env = dict(os.environ)
    paths = [str(REPO), str(BENCH_DIR), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


class Runner:
    """Runs cells in ``workdir`` (``concurrency``: engine concurrency per worker)."""

    def __init__(self, workdir: Path, *, concurrency: int = 4, niceness: int = 0,
                 dump: Path | None = None) -> None:
        self.workdir, self.concurrency, self.niceness = workdir, concurrency, niceness
        self.dump = dump
        self.env = child_env()
        self._warm_ctx: Any = None

    def _path(self, name: str) -> Path:
        return self.workdir / f"{name}-{uuid.uuid4().hex[:8]}"

    @staticmethod
    def deadline_seconds(cell: CellSpec) -> float:
        """A cell is cut after this long (90 s for the start, then four times the work at
        the share left): a fleet that collapses must not hold the matrix up. The rows
        it did not settle are lost, and the cell says it was cut."""
        return 90.0 + 4.0 * cell.rows / cell.share_left

    # -- plain loops --------------------------------------------------------------------

    def _loop(self, url: str, key: str, rate: float, prefix: str, rows: int) -> subprocess.Popen[bytes]:
        path = self._path("loop.json")
        path.write_text(json.dumps(asdict(LoopArgs(url, key, rate, prefix, rows, self.niceness))))
        return subprocess.Popen([sys.executable, "-m", "fleetbench.loop", str(path)], env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @staticmethod
    def _stop(process: subprocess.Popen[bytes] | None) -> None:
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    # -- a cell -------------------------------------------------------------------------

    def run(self, cell: CellSpec) -> Figures:
        key = f"bench-{uuid.uuid4().hex}"
        with Target(cell.limiter, cell.rate, self.workdir) as target:
            target.clock.arm()
            other = None
            if cell.other_share:
                other = self._loop(target.url, key, cell.rate * cell.other_share, OTHER, 0)
            try:
                if cell.reference:
                    launched = time.time()
                    reference = self._loop(target.url, key, cell.share_left, REFERENCE, cell.rows)
                    self._wait([reference], launched + self.deadline_seconds(cell))
                    workers: list[dict[str, Any]] = []
                elif cell.warm:
                    launched, workers = self._warm(cell, target, key)
                else:
                    launched, workers = self._cold(cell, target.url, key)
            finally:
                self._stop(other)
        arrivals = target.arrivals(key)
        if self.dump is not None:
            self._dump(cell, arrivals, workers, launched)
        return summarise(cell, arrivals, workers, launched)

    def _dump(self, cell: CellSpec, arrivals: list[Arrival], workers: list[dict[str, Any]],
              launched: float) -> None:
        """The cell's raw record (``--dump``): the limiter's log and every worker's own."""
        assert self.dump is not None
        self.dump.mkdir(parents=True, exist_ok=True)
        name = f"{cell.limiter.name}-{cell.gate}-k{cell.k}-{uuid.uuid4().hex[:6]}.json"
        (self.dump / name).write_text(json.dumps({
            "cell": asdict(cell), "launched": launched,
            "arrivals": [asdict(a) for a in arrivals], "workers": workers}))

    def _worker_args(self, cell: CellSpec, url: str, key: str, gate: str) -> list[dict[str, Any]]:
        addresses = [f"{FLEET} {i}, 9490 Vaduz" for i in range(cell.rows)]
        return [{"index": i, "url": url, "api_key": key, "gate_url": gate, "rate": cell.configured,
                 "addresses": addresses[i::cell.k], "concurrency": self.concurrency,
                 "niceness": self.niceness} for i in range(cell.k)]

    def _cold(self, cell: CellSpec, url: str, key: str) -> tuple[float, list[dict[str, Any]]]:
        gate = gate_url(cell.gate, self.workdir)
        plans = []
        for args in self._worker_args(cell, url, key, gate):
            path, result = self._path("args.json"), self._path("result.json")
            plans.append((args, path, result))
        processes = []
        launched = time.time()
        for args, path, result in plans:
            args["launched_at"] = time.time()
            path.write_text(json.dumps(args))
            err = self._path("stderr.txt")
            with err.open("wb") as stderr:
                processes.append((subprocess.Popen(
                    [sys.executable, "-m", "fleetbench.worker", str(path), str(result)],
                    env=self.env, stdout=subprocess.DEVNULL, stderr=stderr), args, result, err))
        self._wait([p for p, _, _, _ in processes], launched + self.deadline_seconds(cell))
        return launched, [self._collect(args, result, err, process.returncode)
                          for process, args, result, err in processes]

    @staticmethod
    def _wait(processes: list[subprocess.Popen[bytes]], deadline: float) -> None:
        """Wait for every process until ``deadline`` (a ``time.time``), then cut the rest
        (SIGTERM: they report what they did), and kill those that do not stop."""
        for process in processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                break
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    @staticmethod
    def _collect(args: dict[str, Any], result: Path, err: Path, code: int | None) -> dict[str, Any]:
        if result.exists():
            collected: dict[str, Any] = json.loads(result.read_text())
            return collected
        tail = err.read_text(errors="replace").strip().splitlines()[-1:] if err.exists() else []
        return asdict(WorkerResult(args["index"], len(args["addresses"]), launched_at=args["launched_at"],
                                   error=f"exit {code}: {' '.join(tail)[:300]}"))

    def _warm(self, cell: CellSpec, target: Target, key: str) -> tuple[float, list[dict[str, Any]]]:
        if self._warm_ctx is None:
            self._warm_ctx = mp.get_context("forkserver")
            self._warm_ctx.set_forkserver_preload(["fleetbench.worker"])
        ctx = self._warm_ctx
        gate = gate_url(cell.gate, self.workdir)
        ready, go, results = ctx.Queue(), ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=warm_main, args=(WorkerArgs(**args), ready, go, results))
                 for args in self._worker_args(cell, target.url, key, gate)]
        for proc in procs:
            proc.start()
        for _ in procs:
            ready.get(timeout=300)
        target.clock.arm()  # the warm-up's /status calls came before: align on the fleet
        launched = time.time()
        go.set()
        workers = [results.get(timeout=self.deadline_seconds(cell) + 60) for _ in procs]
        for proc in procs:
            proc.join(timeout=30)
        for worker in workers:
            worker["launched_at"] = launched
        return launched, workers
