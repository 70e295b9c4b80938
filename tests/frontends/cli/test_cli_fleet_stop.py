"""Several ``geotoolkit geocode`` processes on one API key and one Redis gate, against the
simulator with a daily quota: once the provider says the quota is spent, the fleet stops
(``geotoolkit.gate.stop``). Before the stop was shared, each process went on until its own
402 (8 processes with 2 requests in flight each met 15 of them); now the provider sees one,
or the few already in flight.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import geotoolkit
from geotoolkit.testing import ProviderSimulator

PROCESSES = 4
SECRET = "cli-stop-s3cret-key"


def _argv(sim: ProviderSimulator, tmp_path: Path, n: int, gate: str) -> list[str]:
    return ["geocode", str(tmp_path / f"in{n}.csv"), "-o", str(tmp_path / f"out{n}.gpkg"),
            "--provider", "nominatim", "--base-url", sim.url, "--api-key-env", "STOP_KEY",
            "--user-agent", "geotoolkit-tests/1.0 (tests@example.org)", "--gate", gate,
            "--cache", "none", "--rate", "20", "--concurrency", "2", "--progress", "none"]


def _clean(redis_url: str, sim: ProviderSimulator) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        for key in client.scan_iter(match=f"geotoolkit:127.0.0.1:{sim.port}:*"):
            client.delete(key)
    finally:
        client.close()


@pytest.mark.redis
def test_processes_on_one_key_stop_at_the_first_402(tmp_path: Path, redis_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(geotoolkit.__file__).parents[1]),
           "STOP_KEY": SECRET}
    with ProviderSimulator(daily_cap=20) as sim:
        try:
            children = []
            for n in range(PROCESSES):
                rows = [f"Landstrasse {100 * n + i}, 9490 Vaduz" for i in range(1, 16)]
                pd.DataFrame({"address": rows}).to_csv(tmp_path / f"in{n}.csv", index=False)
                children.append(subprocess.Popen(
                    [sys.executable, "-m", "geotoolkit", *_argv(sim, tmp_path, n, redis_url)],
                    env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            ended = [child.communicate(timeout=120) for child in children]
            assert sim.count(status=200) == 20
            assert 1 <= sim.count(status=402) <= 2  # the first, and at most one in flight
            said = "\n".join(err for _, err in ended)
            assert "another worker on this API key was told its quota is spent" in said
            assert SECRET not in said
            status = subprocess.run(
                [sys.executable, "-m", "geotoolkit", "gate", "status", redis_url, "--provider",
                 f"127.0.0.1:{sim.port}", "--json"],
                env=env, capture_output=True, text=True, timeout=60, check=True)
            [key] = json.loads(status.stdout)["keys"]
            assert key["stop_remaining"] > 3500 and "quota spent" in key["stop_cause"]
            resumed = subprocess.run(
                [sys.executable, "-m", "geotoolkit", "gate", "resume", redis_url, "--provider",
                 f"127.0.0.1:{sim.port}"],
                env=env, capture_output=True, text=True, timeout=60, check=True)
            assert "ended the fleet stop on" in resumed.stdout
            again = subprocess.run(
                [sys.executable, "-m", "geotoolkit", "gate", "status", redis_url, "--provider",
                 f"127.0.0.1:{sim.port}"],
                env=env, capture_output=True, text=True, timeout=60, check=True)
            assert "STOPPED" not in again.stdout and SECRET not in again.stdout
        finally:
            _clean(redis_url, sim)
