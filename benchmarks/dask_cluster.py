"""Dask benchmark: 100 000 rows on a LocalCluster sharing one Redis gate, nothing collected.

Run from the repository root, for example::

    python benchmarks/dask_cluster.py                     # 100 000 rows, 4 workers, 400 req/s
    python benchmarks/dask_cluster.py --rows 10000 --rate 200 --workers 2
    python benchmarks/dask_cluster.py --reverse           # the same, reverse geocoding points

What a run does:

- starts the provider simulator in this process (``ProviderSimulator(rate_limit=R,
  window_seconds=1)``: at most R requests per key in any one-second window, else 429
  with ``Retry-After``; its log keeps every request);
- starts a ``LocalCluster`` of W worker processes (one thread each) and a client;
- builds the input *on the workers* (``dd.from_map``: each partition makes its own
  distinct addresses), so the client never holds the input either;
- ``geotoolkit.dask.geocode(..., gate=<Redis>, rate=R, cache=False)`` then
  ``write_partitioned(result, out)``: every partition is geocoded on a worker, paced
  by the one Redis gate (the fleet's rate is R), and written by that worker to
  ``out/geocoded/`` (GeoParquet) and ``out/dead_letters/``;
- checks every row was settled exactly once: the answers per address in the
  simulator's log (``cache=False``, so a partition geocoded twice would show as a
  second request). The log is tallied as it fills, a window of ``--log-window``
  entries at a time (one byte per row): a log of every request would hold ~1 KiB per
  request in this process, more than the result itself, and the memory figure would
  be about the simulator instead of the client. A window that overflowed between two
  tallies is detected and fails the run;
- reports the client process's peak memory (``ru_maxrss``) before and after the write,
  against the in-memory size of the result (measured afterwards, when the dataset is
  read back with ``geopandas.read_parquet``: row count, CRS, Points equal lon/lat).
  ``--collect`` computes the result into the client with ``to_geodataframe`` instead
  of writing it, for comparison.

``--reverse`` does the same with points: each partition is a GeoDataFrame of distinct
points (EPSG:4326, made on its worker) inside the simulator's world, reverse geocoded on
the workers by ``geotoolkit.dask.reverse``, written by ``write_partitioned``; the log
maps each ``/reverse`` request back to its row, and the read back checks that each row
keeps its own input point as geometry.

Redis comes from ``GEOTOOLKIT_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/15``);
the gate's keys are deleted afterwards. Figures are those of one run on a shared machine.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REDIS_URL = os.environ.get("GEOTOOLKIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
UA = "geotoolkit-benchmark/1.0 (bench@example.org)"


def _maxrss_mib() -> float:
    """The peak resident memory of this process so far (Linux: KiB; macOS: bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


def _partition(number: int, *, size: int, rows: int) -> pd.DataFrame:
    """Partition ``number`` of the input, made on its worker: distinct addresses."""
    start, stop = number * size, min(rows, (number + 1) * size)
    ids = np.arange(start, stop, dtype="int64")
    addresses = pd.Series([f"Teststrasse {i}, 9490 Vaduz" for i in ids], dtype="str")
    return pd.DataFrame({"row": ids, "address": addresses.to_numpy()},
                        index=pd.RangeIndex(start, stop, name="id"))


#: The reverse scenario's points: a grid inside the simulator's world (Liechtenstein's box),
#: row ``i`` at column ``i % SIDE`` and line ``i // SIDE``; distinct at 6 decimals.
_WEST, _SOUTH, _EAST, _NORTH = 9.48, 47.06, 9.63, 47.26


def _grid(rows: int) -> tuple[int, float, float]:
    side = int(rows**0.5) + 1
    return side, (_EAST - _WEST) / side, (_NORTH - _SOUTH) / side


def _lonlat(ids: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    side, step_lon, step_lat = _grid(rows)
    return (np.round(_WEST + (ids % side) * step_lon, 6),
            np.round(_SOUTH + (ids // side) * step_lat, 6))


def _point_partition(number: int, *, size: int, rows: int) -> Any:
    """Partition ``number`` of the reverse input, made on its worker: distinct points."""
    import geopandas as gpd

    start, stop = number * size, min(rows, (number + 1) * size)
    ids = np.arange(start, stop, dtype="int64")
    lon, lat = _lonlat(ids, rows)
    return gpd.GeoDataFrame({"row": ids}, geometry=gpd.points_from_xy(lon, lat), crs="EPSG:4326",
                            index=pd.RangeIndex(start, stop, name="id"))


def _address_row(request: Any, rows: int) -> int:
    """The row a forward request was for (its address names it)."""
    return int(request.params["q"].split()[1].rstrip(","))


def _point_row(request: Any, rows: int) -> int:
    """The row a /reverse request was for (its point on the grid names it)."""
    side, step_lon, step_lat = _grid(rows)
    column = round((float(request.params["lon"]) - _WEST) / step_lon)
    line = round((float(request.params["lat"]) - _SOUTH) / step_lat)
    return int(line * side + column)


def _options(sim_url: str, args: argparse.Namespace) -> dict[str, Any]:
    return {"provider": "nominatim", "base_url": sim_url, "user_agent": UA, "gate": REDIS_URL,
            "cache": False, "rate": args.rate, "concurrency": args.concurrency}


def _warm_up() -> None:
    import importlib

    for name in ("geopandas", "httpx", "redis", "pyarrow", "geotoolkit.frontends.dask",
                 "geotoolkit.orchestration.frame", "geotoolkit.orchestration.reverse",
                 "geotoolkit.gate.redis"):
        importlib.import_module(name)


class _Tally:
    """Tallies the simulator's log as it fills: 200s per row, other statuses, first/last 200.

    The log keeps its last ``window`` entries; every ``every`` arrivals the new ones are
    counted. If the last entry counted has left the window, requests were missed:
    ``overflowed`` is set (the run then fails; give a larger window).
    """

    def __init__(self, sim: Any, rows: int, every: int,
                 row_of: Callable[[Any, int], int] = _address_row) -> None:
        self.sim, self.every, self.rows, self.row_of = sim, every, rows, row_of
        self.ok = np.zeros(rows, dtype=np.uint8)
        self.statuses: Counter[int] = Counter()
        self.first, self.last = float("inf"), float("-inf")
        self.counted, self.overflowed = 0, False
        self._last_entry: Any = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tally", daemon=True)

    def __enter__(self) -> _Tally:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join()
        self._drain()

    def _loop(self) -> None:
        while not self._done.is_set():
            self.sim.wait_for_requests(self.counted + self.every, timeout=1.0)
            self._drain()

    def _drain(self) -> None:
        log = self.sim.requests
        new = log
        if self._last_entry is not None:
            at = next((i for i in range(len(log) - 1, -1, -1) if log[i] is self._last_entry), None)
            if at is None:
                self.overflowed = True
            new = log[at + 1:] if at is not None else log
        for request in new:
            self.statuses[request.status] += 1
            if request.status == 200:
                self.ok[self.row_of(request, self.rows)] += 1
                self.first, self.last = min(self.first, request.time), max(self.last, request.time)
        self.counted += len(new)
        if log:
            self._last_entry = log[-1]


def _run(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    import dask.dataframe as dd
    import distributed

    from geotoolkit import dask as gdask
    from geotoolkit.testing import ProviderSimulator

    size = -(-args.rows // args.partitions)
    figures: dict[str, Any] = {"rows": args.rows, "workers": args.workers, "partitions": args.partitions,
                               "rate": args.rate, "concurrency": args.concurrency, "collect": args.collect,
                               "reverse": args.reverse}
    with ProviderSimulator(rate_limit=args.rate, window_seconds=1.0,
                           max_log_entries=args.log_window) as sim, \
            distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                     dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster) as client:
        client.run(_warm_up)
        try:
            if args.reverse:
                import dask_geopandas  # noqa: F401  (registers the GeoDataFrame collection)

                ddf = dd.from_map(_point_partition, range(args.partitions), size=size, rows=args.rows,
                                  meta=_point_partition(0, size=0, rows=0))
                lazy = gdask.reverse(ddf, **_options(sim.url, args))
            else:
                ddf = dd.from_map(_partition, range(args.partitions), size=size, rows=args.rows,
                                  meta=_partition(0, size=0, rows=0))  # given: nothing made here
                lazy = gdask.geocode(ddf, "address", **_options(sim.url, args))
            figures["sent_before_write"] = len(sim.requests)
            figures["client_maxrss_before_mib"] = _maxrss_mib()
            started = time.perf_counter()
            with _Tally(sim, args.rows, every=max(1, args.log_window // 5),
                        row_of=_point_row if args.reverse else _address_row) as tally:
                if args.collect:
                    collected = gdask.to_geodataframe(lazy)
                    matched = int((collected["geocode_status"] == "matched").sum())
                    figures["counts"] = matched, len(collected) - matched
                    collected.to_parquet(out / "collected.parquet")
                    del collected
                else:
                    figures["counts"] = gdask.write_partitioned(lazy, out)
            figures["seconds"] = time.perf_counter() - started
            figures["client_maxrss_after_mib"] = _maxrss_mib()
        finally:
            _delete_gate_keys(sim.port)
    figures.update(_settled(tally))
    figures.update(_read_back(out / ("collected.parquet" if args.collect else "geocoded"), args.rows,
                              reverse=args.reverse))
    figures["disk_mib"] = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 2**20
    return figures


def _settled(tally: _Tally) -> dict[str, Any]:
    """What the simulator's log says: requests, answers, rows settled once, the pace."""
    spread = tally.last - tally.first
    return {"requests": tally.counted, "ok": int(tally.ok.sum()), "429": tally.statuses[429],
            "statuses": dict(tally.statuses), "rows_sent_once": int((tally.ok == 1).sum()),
            "rows_sent_more_than_once": int((tally.ok > 1).sum()), "log_overflowed": tally.overflowed,
            "ok_per_second": (tally.ok.sum() - 1) / spread if spread > 0 else float("nan")}


def _read_back(path: Path, rows: int, *, reverse: bool = False) -> dict[str, Any]:
    """The dataset read back: rows, CRS, Points against lon/lat (reverse: each row's own
    input point), each id once, size in memory."""
    import geopandas as gpd
    import shapely

    back = gpd.read_parquet(path)
    points = back.geometry.values
    if reverse:
        lon, lat = _lonlat(back["row"].to_numpy(), rows)
        distances = back["geocode_distance_m"].to_numpy()
        extra = {"distance_m_median": float(np.nanmedian(distances)) if len(back) else float("nan"),
                 "distance_m_max": float(np.nanmax(distances)) if len(back) else float("nan")}
    else:
        lon, lat = back["lon"].to_numpy(), back["lat"].to_numpy()
        extra = {}
    return {
        **extra,
        "read_back_rows": len(back), "crs": back.crs.to_epsg(),
        "points_equal_lon_lat": bool(np.array_equal(shapely.get_x(points), lon)
                                     and np.array_equal(shapely.get_y(points), lat)),
        "ids_once": bool(back["row"].is_unique and len(back) == rows and back["row"].min() == 0
                         and back["row"].max() == rows - 1),
        "result_in_memory_mib": back.memory_usage(deep=True).sum() / 2**20,
    }


def _delete_gate_keys(port: int) -> None:
    import redis

    conn = redis.Redis.from_url(REDIS_URL)
    try:
        stale = list(conn.scan_iter(f"geotoolkit:127.0.0.1:{port}:*"))
        if stale:
            conn.delete(*stale)
    finally:
        conn.close()


def _report(f: dict[str, Any]) -> None:
    geocoded, letters = f["counts"]
    growth = f["client_maxrss_after_mib"] - f["client_maxrss_before_mib"]
    how = "collected with to_geodataframe" if f["collect"] else "written with write_partitioned"
    print(f"{'reverse geocoding' if f['reverse'] else 'geocoding'}: "
          f"rows {f['rows']:,} in {f['partitions']} partitions on {f['workers']} worker processes, "
          f"rate {f['rate']:g} req/s (simulator and fleet), concurrency {f['concurrency']} per partition")
    print(f"sent before the write: {f['sent_before_write']}")
    print(f"{how}: {geocoded:,} geocoded, {letters:,} dead letters in {f['seconds']:.1f} s "
          f"({f['ok_per_second']:.1f} ok/s = {f['ok_per_second'] / f['rate']:.3f} of the rate)")
    print(f"simulator: {f['requests']:,} requests ({f['statuses']}), {f['ok']:,} answered 200; rows sent "
          f"once: {f['rows_sent_once']:,}, more than once: {f['rows_sent_more_than_once']}"
          + (" -- LOG WINDOW OVERFLOWED" if f["log_overflowed"] else ""))
    print(f"client peak memory (ru_maxrss): {f['client_maxrss_before_mib']:.0f} MiB before, "
          f"{f['client_maxrss_after_mib']:.0f} MiB after (+{growth:.0f} MiB); the result is "
          f"{f['result_in_memory_mib']:.0f} MiB in memory once read back, {f['disk_mib']:.1f} MiB on disk")
    print(f"read back: {f['read_back_rows']:,} rows, EPSG:{f['crs']}, points equal "
          f"{'each input point' if f['reverse'] else 'lon/lat'}: "
          f"{f['points_equal_lon_lat']}, every id once: {f['ids_once']}")
    if f["reverse"]:
        print(f"reverse: geocode_distance_m median {f['distance_m_median']:.0f} m, "
              f"max {f['distance_m_max']:.0f} m (the place found from each point)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=4, help="worker processes")
    parser.add_argument("--partitions", type=int, default=40)
    parser.add_argument("--rate", type=float, default=400.0,
                        help="requests/s: the simulator's limit per key and the fleet's rate")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight per partition")
    parser.add_argument("--log-window", type=int, default=5_000, help="simulator log entries kept")
    parser.add_argument("--collect", action="store_true",
                        help="compute the result into the client (to_geodataframe) instead, to compare")
    parser.add_argument("--reverse", action="store_true",
                        help="reverse geocode points (a dask-geopandas frame) instead of addresses")
    parser.add_argument("--out", type=Path, default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()
    if args.reverse and args.collect:
        parser.error("--collect is for forward results (to_geodataframe reads lon/lat)")
    out = args.out or Path(tempfile.mkdtemp(prefix="geotoolkit-dask-")) / "out"
    out.mkdir(parents=True, exist_ok=True)
    try:
        figures = _run(args, out)
    finally:
        if args.out is None:
            shutil.rmtree(out.parent, ignore_errors=True)
    _report(figures)
    ok = (figures["sent_before_write"] == 0 and figures["rows_sent_once"] == args.rows
          and figures["rows_sent_more_than_once"] == 0 and not figures["log_overflowed"]
          and figures["read_back_rows"] == args.rows and figures["crs"] == 4326
          and figures["points_equal_lon_lat"] and figures["ids_once"])
    print("OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
