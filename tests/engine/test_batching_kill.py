"""kill -9 in the middle of a batch: the rerun sends only the rows not settled.

A child process geocodes through the Census batch endpoint of the simulator (in this
process) with a SQLite cache, in batches of 5. Its second upload hangs (``#timeoutx1``
on one of its rows); once the simulator has seen that upload, the child is killed
with SIGKILL. The rerun finds the first batch's rows in the cache and sends one
upload with the five others.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from geotoolkit import Match, MemoryGate, Query, RatePolicy
from geotoolkit.engine import Engine
from geotoolkit.providers import Census
from geotoolkit.store.sqlite import SQLiteStore
from geotoolkit.testing import ProviderSimulator

ROOT = Path(__file__).resolve().parents[2]
ADDRESSES = [f"Landstrasse {i}, 9490 Vaduz" + (" #timeoutx1" if i == 7 else "") for i in range(10)]

CHILD = textwrap.dedent("""
    import asyncio, json, math, sys
    from geotoolkit import MemoryGate, Query, RatePolicy
    from geotoolkit.engine import Engine
    from geotoolkit.providers import Census
    from geotoolkit.store.sqlite import SQLiteStore

    url, path, addresses = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    engine = Engine(Census(url), gate=MemoryGate(), store=SQLiteStore(path), rate=RatePolicy(rate=math.inf),
                    batch_size=5, concurrency=1)
    asyncio.run(engine.run([Query(text=a) for a in addresses]))
""")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_batch_killed_mid_upload_resends_only_unsettled_rows(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with ProviderSimulator(hang_seconds=60.0) as sim:
        child = subprocess.Popen([sys.executable, "-c", CHILD, sim.url, str(cache), json.dumps(ADDRESSES)],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            assert sim.wait_for_requests(2, timeout=60.0), "the second upload never arrived"
        finally:
            child.send_signal(signal.SIGKILL)
            _, err = child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL, err.decode(errors="replace")
        assert [(r.rows, r.status) for r in sim.requests] == [(5, 200), (5, 200)]  # the second: hung

        store = SQLiteStore(cache)
        try:
            engine = Engine(Census(sim.url), gate=MemoryGate(), store=store, rate=RatePolicy(rate=math.inf),
                            batch_size=5)
            outcomes = asyncio.run(engine.run([Query(text=a) for a in ADDRESSES]))
        finally:
            store.close()
        assert [r.rows for r in sim.requests] == [5, 5, 5]  # only the five not settled, once
        assert all(isinstance(o, Match) for o in outcomes)
