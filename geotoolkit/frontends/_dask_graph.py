"""The dask graph of a geocoding run: each distinct query settled once, whatever partition holds it.

A duplicate address inside one partition is sent once (the engine groups its rows by
cache key); across partitions nothing joins them, so a run over ``n`` partitions would
send an address up to ``n`` times: quota and hours at 1 request/s. With more than one
partition the graph is therefore three steps, all lazy (one graph, computed with the
result, nothing computed to build it):

1. **keys**: each partition gives one row per distinct query it holds (the cache key,
   the query its job built from that row -- a ``Query`` with the row's own text, a
   ``ReverseQuery`` with its point -- and where its first row is:
   ``partition * 2**32 + position``); invalid input (an empty cell, a missing point) is
   a key of its own, its reason in place of the query;
2. **settle**: those rows are shuffled by key into buckets (one per worker thread, at
   least :data:`MIN_BUCKETS`, at most one per partition); each bucket settles its
   distinct queries once through the ordinary run (gate, cache, chain: each sent as its
   first row in frame order asked, as a single ``df.geocode`` run would) and gives the
   final outcome (a ``Match``, ``NoMatch`` or ``Failure`` with its reason) back once
   per (key, partition) that asked for it. A bucket with nothing to send (only
   reasons) opens neither the gate nor the cache;
3. **assemble**: those answers are routed back to the partition that asked
   (``set_index`` on the partition-major number with divisions known in advance, so
   nothing is computed to find them), and each original partition builds its result
   with the job's ``result(outcomes)``: its own index, order and divisions, country
   checks and ``min_precision`` per row, exactly as before.

Why a join of outcomes rather than the shared cache or claims: failures are never
cached (a failed address would be sent again by the next partition), ``cache=False``
has no shared store at all, and a chain's final answer is not one cache row; a claim
that makes a second partition wait for the first holds a worker thread while it waits,
and two partitions each holding a key the other waits for deadlock.

Memory: the shuffled frames hold one small row per distinct (query, partition), never
a whole partition, and nothing goes to the client. The input's partitions stay on the
workers (spilled to disk by dask when memory runs short) from the time their keys are
read until their answers come back: the shuffle is a barrier, so computing any one
partition (``head()``) runs the whole run. One partition needs none of this (the engine
groups its duplicates) and runs the job directly, as does a factory that cannot settle
queries without their frame (``across_partitions=False``). Forward and reverse
geocoding go through the same graph: only their job factories differ.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import pandas as pd

from geotoolkit.engine import run_sync
from geotoolkit.export import result_dtypes

if TYPE_CHECKING:
    import dask.dataframe as dd
    import geopandas as gpd

    from geotoolkit.progress import ProgressSink
    from geotoolkit.results import Outcome, Query, ReverseQuery

__all__ = ["AT", "ITEM", "KEY", "MIN_BUCKETS", "OUTCOME", "SPAN", "Assemble", "Cluster", "Job",
           "JobFactory", "KeyedFactory", "Keys", "Settle", "Whole", "answers_meta", "distinct_graph",
           "key_of", "meta", "normalise", "workers"]

#: The columns of the keys and answers frames.
KEY, AT, ITEM, OUTCOME = ("__geotoolkit_key__", "__geotoolkit_at__", "__geotoolkit_item__",
                          "__geotoolkit_outcome__")
#: Rows numbered per partition: ``AT = partition * SPAN + position``.
SPAN = 2**32
#: The fewest buckets that settle the distinct queries (when there are as many partitions).
#: There are as many as the cluster has worker threads, so that as many jobs run at once
#: as partitions did before (each with ``concurrency`` requests in flight), but no more:
#: every bucket is one more job (gate and cache opened, an HTTP client) and makes both
#: shuffles wider. 4,000 distinct addresses in 40 partitions on a 2-process LocalCluster
#: took 8.0 s with 8 buckets, 12.4 s with 32 (6.0 s before, with 40 jobs and no shuffles).
MIN_BUCKETS = 8


@dataclass(frozen=True)
class Cluster:
    """The workers ``geocode`` sees when it is called: an adaptive cluster that later
    grows (onto more machines) is not seen. Without a distributed cluster: this machine,
    with dask's local schedulers' threads (one per CPU)."""

    hosts: int
    threads: int

    @classmethod
    def of(cls, client: Any = None) -> Cluster:
        found = workers(client)
        if found is None:
            return cls(1, os.cpu_count() or 1)
        hosts = {str(info.get("host", urlsplit(address).hostname))
                 for address, info in found.items()}
        threads = sum(int(info.get("nthreads", 1)) for info in found.values())
        return cls(max(1, len(hosts)), max(1, threads))


def workers(client: Any = None) -> dict[str, dict[str, Any]] | None:
    """The distributed workers by address (``None`` without a distributed client)."""
    if client is None:
        try:
            from distributed import default_client
        except ImportError:
            return None
        try:
            client = default_client()  # type: ignore[no-untyped-call]
        except ValueError:  # no distributed client: dask's local schedulers
            return None
    try:
        info = client.scheduler_info(n_workers=-1)  # every worker, not the first five
    except TypeError:  # distributed before 2025: no n_workers, and no limit either
        info = client.scheduler_info()
    found: dict[str, dict[str, Any]] = info.get("workers", {})
    return found


class Job(Protocol):
    """What a job factory makes of one partition (a ``FrameJob``; a ``ReverseJob`` alike)."""

    @property
    def items(self) -> Sequence[Query | ReverseQuery | str]:
        """One query (or the reason it cannot be sent) per row."""

    async def run(self, progress: ProgressSink | None = None) -> list[Outcome]:
        """Settle every row (on the worker): one outcome per item."""

    def result(self, outcomes: list[Outcome]) -> gpd.GeoDataFrame:
        """The result for ``outcomes`` (``[]`` on zero rows: the meta), opening nothing."""


class JobFactory(Protocol):
    """Makes the job of one frame; picklable, since it travels to the workers."""

    def __call__(self, frame: pd.DataFrame) -> Job:
        """The checked job of ``frame`` (opens nothing)."""


@runtime_checkable
class KeyedFactory(JobFactory, Protocol):
    """A job factory that settles its jobs' items without their frames: the items of
    every partition can be regrouped by key and each settled once (see
    :func:`distinct_graph`)."""

    async def settle(self, items: list[Query | ReverseQuery | str]) -> list[Outcome]:
        """Settle ``items`` as the jobs' ``run`` would (on the worker): one outcome each."""


def key_of(item: Query | ReverseQuery | str) -> str:
    """The join key of one row: its cache key, or its reason when it cannot be sent."""
    return f"x:{item}" if isinstance(item, str) else f"q:{item.key()}"


def normalise(result: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    """The result columns in their fixed dtypes, so every partition matches the meta."""
    return result_dtypes(result)


def meta(frame: pd.DataFrame, make_job: JobFactory) -> gpd.GeoDataFrame:
    """The columns and dtypes of a partition's result: what the job gives on zero rows."""
    return normalise(make_job(frame.iloc[:0]).result([]))


@dataclass(frozen=True, repr=False)
class Whole:
    """Run the job of one partition on its worker; an empty partition opens nothing."""

    make_job: JobFactory

    def __call__(self, part: pd.DataFrame) -> gpd.GeoDataFrame:
        job = self.make_job(part)
        if len(part) == 0:
            return normalise(job.result([]))
        return normalise(job.result(run_sync(lambda: job.run(None))))

    def __repr__(self) -> str:
        return f"Whole({self.make_job!r})"


@dataclass(frozen=True, repr=False)
class Keys:
    """Step 1: one row per distinct query of a partition (its first row's columns)."""

    make_job: KeyedFactory

    def __call__(self, part: pd.DataFrame, partition_info: dict[str, Any] | None = None
                 ) -> pd.DataFrame:
        if partition_info is None and len(part):  # only the meta is built without it
            raise RuntimeError("dask did not tell the keys step which partition it reads")
        number = 0 if partition_info is None else int(partition_info["number"])
        items = pd.Series(list(self.make_job(part).items), dtype=object)
        keys = pd.Series([key_of(item) for item in items], dtype=object)
        first = (~keys.duplicated()).to_numpy()
        positions = pd.RangeIndex(len(part)).to_numpy()[first]
        return pd.DataFrame({KEY: keys[first].to_numpy(), AT: number * SPAN + positions,
                             ITEM: items[first].to_numpy()})

    def __repr__(self) -> str:
        return f"Keys({self.make_job!r})"


@dataclass(frozen=True, repr=False)
class Settle:
    """Step 2: settle a bucket's distinct keys once; one answer per (key, partition)."""

    make_job: KeyedFactory

    def __call__(self, bucket: pd.DataFrame) -> pd.DataFrame:
        if len(bucket) == 0:
            return answers_meta()
        bucket = bucket.sort_values(AT, kind="stable")  # the first row in frame order first
        first = ~bucket[KEY].duplicated()
        items = list(bucket[ITEM][first])
        outcomes = run_sync(lambda: self.make_job.settle(items))
        by_key = dict(zip(bucket[KEY][first], outcomes, strict=True))
        return pd.DataFrame({AT: bucket[AT].to_numpy(), KEY: bucket[KEY].to_numpy(),
                             OUTCOME: pd.Series([by_key[k] for k in bucket[KEY]], dtype=object)
                             .to_numpy()})

    def __repr__(self) -> str:
        return f"Settle({self.make_job!r})"


def answers_meta() -> pd.DataFrame:
    """The answers of step 2 on zero rows."""
    return pd.DataFrame({AT: pd.Series([], dtype="int64"), KEY: pd.Series([], dtype=object),
                         OUTCOME: pd.Series([], dtype=object)})


@dataclass(frozen=True, repr=False)
class Assemble:
    """Step 3: a partition's result from the answers routed back to it."""

    make_job: JobFactory

    def __call__(self, part: pd.DataFrame, answers: pd.DataFrame) -> gpd.GeoDataFrame:
        job = self.make_job(part)
        if len(part) == 0:
            return normalise(job.result([]))
        by_key: dict[str, Outcome] = dict(zip(answers[KEY], answers[OUTCOME], strict=True))
        return normalise(job.result([by_key[key_of(item)] for item in job.items]))

    def __repr__(self) -> str:
        return f"Assemble({self.make_job!r})"


def distinct_graph(ddf: dd.DataFrame, make_job: KeyedFactory, result_meta: gpd.GeoDataFrame,
                   *, buckets: int) -> Any:
    """``ddf``'s result, each distinct query settled once over all partitions (lazy), in
    ``buckets`` jobs (at least :data:`MIN_BUCKETS`, at most one per partition)."""
    import dask.dataframe as dd
    from dask.delayed import delayed

    n = ddf.npartitions
    keyed = ddf.map_partitions(Keys(make_job),  # type: ignore[no-untyped-call]
                               meta=Keys(make_job)(ddf._meta))
    width = min(n, max(MIN_BUCKETS, buckets))
    shuffled = keyed.shuffle(KEY, npartitions=width, shuffle_method="tasks")
    answers = shuffled.map_partitions(Settle(make_job), meta=answers_meta())
    # Exactly one range of AT per input partition: partition i's answers come back to i.
    routed = answers.set_index(AT, divisions=[i * SPAN for i in range(n)] + [n * SPAN - 1],
                               shuffle_method="tasks")
    # Unoptimised, both share the input's tasks: each partition is read or computed once.
    assemble = delayed(Assemble(make_job))  # not pure: the options are never tokenized
    parts = [assemble(part, back) for part, back in
             zip(ddf.to_delayed(optimize_graph=False),  # type: ignore[no-untyped-call]
                 routed.to_delayed(optimize_graph=False), strict=True)]
    # A new root (not a blockwise step over two inputs): dask then sees that the result
    # and a column of it are partitioned alike, so ``out[out[c] == v]`` stays blockwise
    # instead of shuffling both sides by index.
    # Unverified, as map_partitions left them: the input's own columns pass through even
    # where dask's meta guessed their dtype wrong; the result's columns are normalised.
    return dd.from_delayed(parts, meta=result_meta, divisions=ddf.divisions, verify_meta=False)
