"""Cache and resume: settled rows are not sent again; no-matches expire; kill -9 resumes."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import geotoolkit
from geotoolkit import FakeClock, Query
from geotoolkit.providers import Nominatim
from geotoolkit.providers.base import Provider
from geotoolkit.store import SQLiteStore
from geotoolkit.testing import ProviderSimulator

UA = "geotoolkit-tests/1.0 (tests@example.org)"


def test_no_matches_expire_with_the_clock(fake_provider: Provider, coordinates: Callable[..., Any],
                                          tmp_path: Path) -> None:
    server = coordinates({"vaduz": ("9.52", "47.14")})
    clock = FakeClock()  # the engine may move it a little too (its sleeps): wide margins
    df = pd.DataFrame({"address": ["vaduz", "nowhere"]})

    def run() -> Any:
        return df.geocode.run(provider=fake_provider, gate="memory://", progress=False,
                              cache=f"sqlite:///{tmp_path}/c.sqlite", clock=clock,
                              no_match_ttl_seconds=3600.0, transport=server.transport())

    run()
    assert sorted(server.sent) == ["nowhere", "vaduz"]
    clock.advance(1800.0)
    run()
    assert len(server.sent) == 2  # both settled: nothing sent
    clock.advance(3600.0)
    out = run()
    assert server.sent[2:] == ["nowhere"]  # the no-match expired, the match did not
    assert list(out["geocode_status"]) == ["matched", "no_match"]


@pytest.mark.postgres
def test_a_postgres_cache_is_shared(sim: ProviderSimulator, provider: Nominatim,
                                    postgres_dsn: str) -> None:
    tag = uuid.uuid4().hex
    df = pd.DataFrame({"address": [f"Teamweg {tag}, Vaduz", "Nowhere 9"]})
    options = {"provider": provider, "gate": "memory://", "cache": postgres_dsn, "progress": False}
    try:
        first = df.geocode.run(**options)
        second = df.geocode.run(**options)
        assert len(sim.requests) == 2
        assert list(second["lon"].fillna(0)) == list(first["lon"].fillna(0))
        assert first.at[0, "lon"] == sim.expected(df.at[0, "address"])[0]  # type: ignore[index]
    finally:
        from geotoolkit.store.postgres import PostgresStore

        store = PostgresStore(postgres_dsn)
        ns = provider.cache_namespace()
        store.delete(f"{ns}:{Query(text=a).key()}" for a in df["address"])
        store.close()


_CHILD = """
import math
import sys
import pandas as pd
import geotoolkit
from geotoolkit.providers import Nominatim

url, cache, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
df = pd.DataFrame({"address": [f"Resume street {i}, 9490 Vaduz" for i in range(n)]})
df.geocode.run(provider=Nominatim(url, user_agent=sys.argv[4]), gate="memory://", rate=math.inf,
               concurrency=2, cache=cache, progress=False)
print("finished")
"""


def _kill_when_logged(proc: subprocess.Popen[str], sim: ProviderSimulator, count: int) -> None:
    """SIGKILL the child once the simulator has logged ``count`` of its requests."""
    arrived = sim.wait_for_requests(count, timeout=120.0)
    assert proc.poll() is None, f"the child ended early: {proc.communicate()}"
    assert arrived, "the child sent too few requests in time"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()  # reap it and close the pipes


def test_kill_9_loses_only_requests_in_flight(tmp_path: Path) -> None:
    n, concurrency = 100, 2
    addresses = [f"Resume street {i}, 9490 Vaduz" for i in range(n)]
    cache = f"sqlite:///{tmp_path}/resume.sqlite"
    env = {**os.environ, "PYTHONPATH": str(Path(geotoolkit.__file__).parents[1])}
    with ProviderSimulator(latency_seconds=0.05) as sim:
        provider = Nominatim(sim.url, user_agent=UA)
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, sim.url, cache, str(n), UA],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        _kill_when_logged(proc, sim, 20)
        assert proc.returncode == -signal.SIGKILL
        first = [r.query for r in sim.requests]

        store = SQLiteStore(tmp_path / "resume.sqlite")
        keys = {f"{provider.cache_namespace()}:{Query(text=a).key()}": Query(text=a).key()
                for a in addresses}
        settled = {keys[k] for k in store.get_many(list(keys))}
        store.close()
        assert len(first) - concurrency <= len(settled) < n  # only requests in flight were lost

        sim.reset()
        out = pd.DataFrame({"address": addresses}).geocode.run(
            provider=provider, gate="memory://", rate=math.inf, concurrency=8, cache=cache,
            progress=False)
        second = [r.query for r in sim.requests]
    assert not settled & set(second)  # settled rows were not sent again
    assert len(second) == len(set(second)) == n - len(settled)  # the rest, once each
    assert len(set(first) & set(second)) <= concurrency  # re-sent: at most those in flight
    assert (out["geocode_status"] == "matched").all()
    assert [(x, y) for x, y in zip(out["lon"], out["lat"], strict=True)] == [
        sim.expected(a) for a in addresses]
