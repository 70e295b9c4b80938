"""One real multi-process LocalCluster for every dask test, and the Redis gate they share.

Starting the cluster and importing geotoolkit on its workers is most of the cost, so
one cluster (two worker processes, one thread each) serves the whole directory. Every
test uses its own simulator, so its gate key (the simulator's host:port) and cache
keys are its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from geotoolkit.testing import ProviderSimulator

distributed = pytest.importorskip("distributed")
pytest.importorskip("dask_geopandas")

#: Worker processes of the cluster.
WORKERS = 2


@pytest.fixture(scope="package")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=logging.CRITICAL)
    dask_client = distributed.Client(cluster)
    try:
        dask_client.run(_warm_up)
        yield dask_client
    finally:
        dask_client.close()
        cluster.close()


def _warm_up() -> None:
    """Import on a worker what a partition needs, so a cold import does not delay a send."""
    import importlib

    for name in ("geopandas", "httpx", "redis", "pyarrow", "geotoolkit.frontends.accessor",
                 "geotoolkit.frontends.dask", "geotoolkit.orchestration.frame", "geotoolkit.gate.redis",
                 "geotoolkit.store.sqlite"):
        importlib.import_module(name)


@pytest.fixture
def redis_gate(redis_url: str) -> Iterator[Callable[[ProviderSimulator], str]]:
    """The Redis gate URL; the keys of the simulators it was used with are deleted after."""
    import redis

    used: list[str] = []

    def gate_for(sim: ProviderSimulator) -> str:
        used.append(f"geotoolkit:127.0.0.1:{sim.port}:*")
        return redis_url

    yield gate_for
    conn = redis.Redis.from_url(redis_url)
    try:
        for pattern in used:
            stale = list(conn.scan_iter(pattern))
            if stale:
                conn.delete(*stale)
    finally:
        conn.close()
