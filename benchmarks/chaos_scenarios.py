"""The extra scenarios of ``benchmarks/chaos.py --scenarios``: what a user sees.

Each runs the real CLI against the simulator on a small CSV (``--rows``, at most 600 here)
and prints the command's exit status and last line, then checks what must hold:

- ``second process``: a second ``geotoolkit geocode`` on the same input and output,
  started while the first runs: both end 0 and the output holds every row exactly once;
- ``read-only folder``: the output's folder turns read-only while the run goes on (a
  tmpfs remounted read-only; needs root and ``mount``, else a folder made 0555 for a
  user other than root; skipped when neither works): exit 1 with ``ExportError``, no
  traceback; a rerun to another output sends nothing the cache holds;
- ``disk full``: the output on a 64 kB tmpfs (root and ``mount`` only): the same;
- ``truncated cache``: the SQLite cache cut to half its size before a rerun: exit 1 saying
  the file is damaged and what to do; moved aside, the rerun works.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from chaos import Setup, make_rows, make_setup, write_csv  # benchmarks/chaos.py

from geotoolkit.testing import ProviderSimulator

SCENARIOS = ("second process", "read-only folder", "disk full", "truncated cache")


def _run(setup: Setup, output: Path, *, wait: bool = True) -> subprocess.Popen[str]:
    child = subprocess.Popen(setup.argv(output), env=setup.env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, cwd=setup.work)
    if wait:
        child.wait()
    return child


def _last_line(child: subprocess.Popen[str]) -> str:
    assert child.stdout is not None
    lines = child.stdout.read().strip().splitlines()
    if any(line.startswith("Traceback") for line in lines):
        return "TRACEBACK: " + " | ".join(lines[-3:])
    return lines[-1] if lines else ""


def _rows_once(path: Path, n: int) -> bool:
    import pyogrio

    ids = [int(i) for layer in ("geocoded", "dead_letters")
           for i in pyogrio.read_dataframe(path, layer=layer, read_geometry=False)["row_id"]]
    return sorted(ids) == list(range(n))


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path | None]:
    where.mkdir()
    mounted = os.geteuid() == 0 and shutil.which("mount") is not None and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True, check=False).returncode == 0
    try:
        yield where if mounted else None
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def second_process(setup: Setup, n: int) -> list[str]:
    first = _run(setup, setup.out, wait=False)
    setup.sim.wait_for_requests(len(setup.sim.requests) + n // 5, timeout=60)
    second = _run(setup, setup.out, wait=False)
    codes = (first.wait(), second.wait())
    print(f"  first: exit {codes[0]}: {_last_line(first)}\n  second: exit {codes[1]}: "
          f"{_last_line(second)}")
    ok = codes == (0, 0) and _rows_once(setup.out, n)
    return [] if ok else [f"second process: exits {codes}, every row once: "
                          f"{setup.out.exists() and _rows_once(setup.out, n)}"]


def _blocked_output(setup: Setup, n: int, folder: Path, block: str) -> list[str]:
    """Run into ``folder``, which ``block`` (``ro``: remount read-only mid-run; ``full``:
    already tiny) makes unwritable, then rerun to a writable output."""
    child = _run(setup, folder / "out.gpkg", wait=False)
    if block == "ro":
        setup.sim.wait_for_requests(len(setup.sim.requests) + n // 3, timeout=60)
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    code, line = child.wait(), _last_line(child)
    print(f"  exit {code}: {line}")
    before = len(setup.sim.requests)
    rerun = _run(setup, setup.work / "elsewhere.gpkg")
    sent = len(setup.sim.requests) - before
    print(f"  rerun to another output: exit {rerun.returncode}, {sent} requests "
          f"(the rows that failed, never cached): {_last_line(rerun)}")
    problems = []
    if code != 1 or "ExportError" not in line:
        problems.append(f"{block}: exit {code}, {line!r}")
    if rerun.returncode != 0 or not _rows_once(setup.work / "elsewhere.gpkg", n):
        problems.append(f"{block}: the rerun did not write every row once")
    return problems


def _on_tmpfs(setup: Setup, n: int, name: str, size: str) -> list[str]:
    """``_blocked_output`` on a tmpfs of ``size`` (skipped where none can be mounted)."""
    with _tmpfs(setup.work / name, size) as folder:
        if folder is None:
            print("  skipped: cannot mount a tmpfs here (root and mount needed)")
            return []
        return _blocked_output(setup, n, folder, name)


def read_only(setup: Setup, n: int) -> list[str]:
    return _on_tmpfs(setup, n, "ro", "50m")


def disk_full(setup: Setup, n: int) -> list[str]:
    return _on_tmpfs(setup, n, "full", "64k")


def truncated_cache(setup: Setup, n: int) -> list[str]:
    first = _run(setup, setup.out)
    cache = setup.cache_path()
    os.truncate(cache, cache.stat().st_size // 2)
    broken = _run(setup, setup.out)
    line = _last_line(broken)
    print(f"  first run: exit {first.returncode}; rerun on the truncated cache: exit "
          f"{broken.returncode}: {line}")
    cache.rename(cache.with_name("results.damaged.sqlite"))
    again = _run(setup, setup.out)
    print(f"  moved aside, rerun: exit {again.returncode}: {_last_line(again)}")
    problems = []
    if broken.returncode != 1 or "damaged" not in line:
        problems.append(f"truncated cache: exit {broken.returncode}, {line!r}")
    if again.returncode != 0:
        problems.append("truncated cache: the rerun after moving it aside failed")
    return problems


def scenarios(args: argparse.Namespace) -> int:
    n = min(args.rows, 600)
    rows = make_rows(n, random.Random(args.seed))
    problems: list[str] = []
    for name, scenario in zip(SCENARIOS, (second_process, read_only, disk_full, truncated_cache),
                              strict=True):
        work = Path(tempfile.mkdtemp(prefix="geotoolkit-chaos-"))
        write_csv(rows, work / "in.csv")
        print(f"{name}:", flush=True)
        with ProviderSimulator(rate_limit=150, valid_keys=["chaos-SECRET-key-0123456789abcdef"],
                               hang_seconds=2.0, trickle_interval_seconds=0.3,
                               huge_body_bytes=2_000_000, latency_seconds=args.latency) as sim:
            problems += scenario(make_setup(work, sim, args), n)
        shutil.rmtree(work, ignore_errors=True)
    for text in problems:
        print(f"PROBLEM: {text}")
    print("all scenarios as expected" if not problems else "")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit("run it as: python benchmarks/chaos.py --scenarios")
