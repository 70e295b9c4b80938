"""Non-blocking mode end to end: raise RateLimitError(retry_after) instead of sleeping, resume.

The simulator allows 4 requests/s per key and answers every 429 with ``Retry-After:
120``; the batch is paced at 50/s so it runs into the limit after a few rows.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pytest

from geotoolkit import RateLimitError, geocode
from geotoolkit.clock import SystemClock
from geotoolkit.frontends.cli import EX_TEMPFAIL, main
from geotoolkit.providers import Nominatim
from geotoolkit.store import MemoryStore
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

UA = "geotoolkit-tests/1.0 (tests@example.org)"
ADDRESSES = [k.address for k in KNOWN_ADDRESSES[:12]]


class Later(SystemClock):
    """The real clock, read two minutes ahead: "rerun once the pause is over"."""

    def now(self) -> float:
        return super().now() + 121.0


@pytest.fixture
def sim() -> ProviderSimulator:
    with ProviderSimulator(rate_limit=4, retry_after=120) as simulator:
        yield simulator  # type: ignore[misc]


def _sent(sim: ProviderSimulator) -> Counter[str]:
    return Counter(r.params["q"] for r in sim.requests if r.status == 200)


def test_the_accessor_raises_instead_of_waiting_and_the_rerun_sends_only_the_rest(
        sim: ProviderSimulator, tmp_path: Path) -> None:
    df = pd.DataFrame({"address": ADDRESSES})
    options = {"provider": Nominatim(sim.url, user_agent=UA), "rate": 50, "progress": False,
               "gate": f"sqlite:///{tmp_path}/gate.sqlite", "max_wait_seconds": 5,
               "cache": f"sqlite:///{tmp_path}/results.sqlite"}
    with pytest.raises(RateLimitError) as first:
        df.geocode.run("address", **options)
    # 120 s from the 429's Retry-After (or a hair less: the fleet's pause, as another
    # worker of the batch saw it)
    assert 119 < (first.value.retry_after or 0) <= 120
    settled = _sent(sim)
    assert 1 <= len(settled) < len(ADDRESSES) and sim.count(429) >= 1

    before = len(sim.requests)  # too early: the fleet-wide pause is still on the gate
    with pytest.raises(RateLimitError) as again:
        df.geocode.run("address", **options)
    assert 100 < (again.value.retry_after or 0) <= 120 and len(sim.requests) == before

    sim.reset()  # two minutes later: the pause is over, and the limit lifted
    sim.rate_limit = None
    result = df.geocode.run("address", **options, clock=Later())
    assert (result["geocode_status"] == "matched").all()
    assert set(_sent(sim)) == set(ADDRESSES) - set(settled)  # only the rest was sent
    assert max(_sent(sim).values()) == 1


def test_geocode_raises_instead_of_waiting_and_resumes_from_its_store(
        sim: ProviderSimulator) -> None:
    store = MemoryStore()
    provider = Nominatim(sim.url, user_agent=UA)
    options = {"provider": provider, "gate": "memory://", "rate": 50, "cache": store,
               "max_wait_seconds": 0.5, "concurrency": 1}
    with pytest.raises(RateLimitError) as raised:
        geocode(ADDRESSES, **options)
    assert raised.value.retry_after == 120.0
    assert list(_sent(sim)) == ADDRESSES[:4]  # one at a time: the first four got through

    sim.reset()
    sim.rate_limit = None
    outcomes = geocode(ADDRESSES, **options)
    assert list(_sent(sim)) == ADDRESSES[4:]  # resumed: the first four came from the store
    assert [(o.lon, o.lat) for o in outcomes] == [sim.expected(a) for a in ADDRESSES]  # type: ignore[union-attr]


def test_the_cli_exits_75_with_retry_after_on_stderr_then_resumes(
        sim: ProviderSimulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "addresses.csv"
    pd.DataFrame({"address": ADDRESSES}).to_csv(source, index=False)
    target = tmp_path / "out.parquet"
    args = ["geocode", str(source), "-o", str(target), "--user-agent", UA, "--base-url", sim.url,
            "--rate", "50", "--max-wait-seconds", "5", "--progress", "none",
            "--cache", f"sqlite:///{tmp_path}/results.sqlite"]
    assert main([*args, "--gate", f"sqlite:///{tmp_path}/gate.sqlite"]) == EX_TEMPFAIL
    lines = capsys.readouterr().err.splitlines()
    assert "retry_after=120.0" in lines
    # With --progress none that line was all stderr held: a cron mail gave no reason. A human
    # line now says why and what to do; the line scripts read stays the last.
    assert lines[-1] == "retry_after=120.0"
    why = lines[-2]
    assert why.startswith("geotoolkit: deferred, not failed: ") and "120.0 s" in why
    assert "Run the same command again in 120.0 s or later" in why and "kept in the cache" in why
    assert not target.exists()
    settled = _sent(sim)

    sim.reset()
    sim.rate_limit = None  # a later run, on a fresh gate: the pause is over
    assert main([*args, "--gate", f"sqlite:///{tmp_path}/gate2.sqlite"]) == 0
    assert set(_sent(sim)) == set(ADDRESSES) - set(settled)
    back = gpd.read_parquet(target)
    assert list(back["address"]) == ADDRESSES and (back["geocode_status"] == "matched").all()
    assert back.crs.to_epsg() == 4326
