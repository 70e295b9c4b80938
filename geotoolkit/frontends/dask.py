"""Geocode a dask DataFrame on a cluster, lazily, into partitioned GeoParquet: nothing collected.

:func:`geocode` returns a *lazy* dask-geopandas GeoDataFrame. Nothing runs until it is
computed or written; then the ordinary ``df.geocode`` job
(:class:`~geotoolkit.orchestration.job.FrameJob`) runs on whichever workers dask picks,
opening the gate and the result cache *by URL* there and closing them again. Each
distinct address (its cache key) is sent once per run, whichever partitions its rows
are in: the partitions' distinct queries are shuffled by key, settled once each, and
their answers routed back to the partitions that asked, which build their rows (Points
from ``(lon, lat)`` in EPSG:4326) in their own index, order and divisions (see
:mod:`geotoolkit.frontends._dask_graph`). Computing any part of the result
(``head()``) therefore runs the whole run; ``across_partitions=False`` geocodes each
partition alone. :func:`reverse` does the same with the points of a dask-geopandas
GeoDataFrame (each distinct point once, as ``gdf.geocode.reverse()`` would settle it).
Every worker must reach the same gate and cache:

- on a cluster spanning machines: ``gate="redis://..."`` or ``"postgresql://..."``, and
  ``cache="postgresql://..."`` (or ``cache=False``);
- on one machine (a ``LocalCluster``, the threaded or multiprocessing scheduler) a
  SQLite gate and cache work as well: ``sqlite:///path`` on a local filesystem.

``memory://`` is always refused: it lives inside one call, so every partition would
pace alone. SQLite on workers spread over several hosts is refused too. Both raise
:class:`~geotoolkit.errors.ConfigurationError` before anything is sent.

The options are one :class:`~geotoolkit.orchestration.options.GeocodeOptions`, built
and checked on the client, pickled to the workers (the provider with it: its key stays
out of reprs and logs). A task killed mid-run (a lost worker) is run again by dask;
with a shared cache, the rows it had settled are not sent again.

Where the result goes:

- :func:`write_partitioned` writes ``out/geocoded/`` (GeoParquet, the matched rows) and
  ``out/dead_letters/`` (Parquet, the rows to review) straight from the workers, in
  one pass over the partitions, and brings back two row counts;
- ``result.to_parquet("out/")`` writes every row as one GeoParquet dataset (the dead
  letters are the rows whose ``geocode_status`` is not ``"matched"``);
- :func:`to_geodataframe` computes the whole result into the client's memory: for
  small results only.

For example, on a cluster::

    import dask.dataframe as dd
    from geotoolkit.frontends import dask as gdask

    ddf = dd.read_parquet("s3://bucket/addresses/")
    out = gdask.geocode(ddf, "address", provider="nominatim", base_url=url,
                        user_agent="acme/1.0 (ops@acme.example)", rate=10,
                        gate="redis://gate.internal:6379/0", cache="postgresql://...")
    geocoded, letters = gdask.write_partitioned(out, "s3://bucket/geocoded-run/")
"""

from __future__ import annotations

import os
import pickle
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pandas as pd

from geotoolkit.errors import ConfigurationError, ExportError
from geotoolkit.export import dead_letters
from geotoolkit.frontends._dask_graph import (
    Cluster,
    JobFactory,
    KeyedFactory,
    Whole,
    distinct_graph,
    meta,
)
from geotoolkit.frontends._dask_jobs import Alone, Forward, Reverse
from geotoolkit.orchestration.job import Columns, gate_backend
from geotoolkit.orchestration.options import GeocodeOptions, with_options_signature
from geotoolkit.providers.policies import check_usage_policy
from geotoolkit.redact import redact
from geotoolkit.results import REVERSE_DECIMALS
from geotoolkit.urls import backend_of, install_extra, sqlite_path

if TYPE_CHECKING:
    import dask.dataframe as dd
    import dask_geopandas as dgpd
    import geopandas as gpd


__all__ = ["check_shared", "geocode", "reverse", "to_geodataframe", "write_partitioned"]


def _backend(value: Any, *, default: str = "sqlite") -> str:
    """The backend a gate or cache argument names, without opening it."""
    if value is None:
        return default
    if value is False or (isinstance(value, str) and value.strip().lower() == "none"):
        return "none"
    if isinstance(value, str):
        return gate_backend(value)
    return ""  # an object: not shippable to workers


def check_shared(gate: Any, cache: Any, hosts: int) -> None:
    """Refuse a gate or cache that the workers cannot share.

    Parameters
    ----------
    gate, cache
        The URLs given to :func:`geocode` (``None``: the default SQLite files).
    hosts
        How many machines the workers run on (1 without a distributed cluster).

    Raises
    ------
    ConfigurationError
        ``memory://`` or an object instead of a URL; SQLite with ``hosts > 1``.

    Examples
    --------
    >>> check_shared("redis://127.0.0.1:6379/0", "postgresql://db/geo", hosts=3)
    >>> check_shared("sqlite:///gate.sqlite", None, hosts=2)
    Traceback (most recent call last):
    ...
    geotoolkit.errors.ConfigurationError: a SQLite gate is one file on one machine, but the \
workers run on 2 hosts: use gate='redis://...' or 'postgresql://...'
    """
    _check_one("gate", gate, hosts)
    _check_one("cache", cache, hosts)


def _check_one(role: str, value: Any, hosts: int) -> None:
    backend = _backend(value)
    if backend == "":
        raise ConfigurationError(
            f"pass the {role} as a URL, not {type(value).__name__}: every partition opens "
            f"its own connection on its worker")
    if backend == "none" and role == "gate":
        raise ConfigurationError("the workers need a gate to share: pass its URL")
    if backend == "memory":
        servers = "redis://... or postgresql://..." if role == "gate" else "postgresql://..."
        raise ConfigurationError(
            f"a memory:// {role} lives inside one call, so each partition would have its "
            f"own and the fleet would not share it: use sqlite:///path on one machine, "
            f"{servers} on a cluster")
    if backend == "sqlite" and hosts > 1:
        servers = "'redis://...' or 'postgresql://...'" if role == "gate" \
            else "'postgresql://...' (or False)"
        raise ConfigurationError(
            f"a SQLite {role} is one file on one machine, but the workers run on {hosts} "
            f"hosts: use {role}={servers}")


def _anchored(url: Any) -> Any:
    """A relative ``sqlite:///path`` made absolute here, on the client: the path is
    relative to the caller's working directory, and a worker may run in another (``dask
    worker`` started by a service manager runs in ``/``) and open files of its own."""
    if isinstance(url, str) and backend_of(url) == "sqlite":
        path = sqlite_path(url)
        if path is not None and not os.path.isabs(path):
            return f"sqlite:///{quote(os.path.abspath(path))}"
    return url


def _shippable(options: GeocodeOptions) -> None:
    """Refuse options that cannot travel to the workers (an unpicklable provider)."""
    try:
        pickle.dumps(options)
    except Exception as exc:  # any pickling failure: the options cannot travel
        raise ConfigurationError(
            f"{options.provider!r} cannot be sent to dask workers ({type(exc).__name__}); pass "
            "the provider by name, e.g. provider='nominatim', user_agent=..., base_url=...") from exc


def _dask_geopandas() -> Any:
    try:
        import dask_geopandas
    except ImportError as exc:
        raise ImportError("geotoolkit's dask front end needs dask-geopandas: "
                          f"{install_extra('dask')}") from exc
    return dask_geopandas


def _lazy(ddf: dd.DataFrame, make_job: JobFactory, *, buckets: int | None = None
          ) -> dgpd.GeoDataFrame:
    """``ddf``'s result, lazily: each distinct query settled once over all partitions, in
    about ``buckets`` jobs (default: the worker threads of the current cluster).

    A factory without ``settle`` (see ``KeyedFactory``) runs partition by partition, each
    partition's duplicates grouped by the engine but not across partitions.

    The meta is ``make_job(empty frame).result([])``: built on the client without
    sending or opening anything. Front ends check their options first (see
    :func:`geocode`); this only wires the partitions (see
    :mod:`geotoolkit.frontends._dask_graph`).

    Returns
    -------
    dask_geopandas.GeoDataFrame
        Same index and partitions as ``ddf``; nothing runs until it is computed.
    """
    _dask_geopandas()  # registers the GeoDataFrame collection for a GeoDataFrame meta
    result_meta = meta(ddf._meta, make_job)
    # One partition: the engine groups its duplicates itself.
    if ddf.npartitions == 1 or not isinstance(make_job, KeyedFactory):
        whole: dgpd.GeoDataFrame = ddf.map_partitions(  # type: ignore[no-untyped-call]
            Whole(make_job), meta=result_meta)
        return whole
    if buckets is None:
        buckets = Cluster.of().threads
    result: dgpd.GeoDataFrame = distinct_graph(ddf, make_job, result_meta, buckets=buckets)
    return result


def _refuse_own_geometry(ddf: dd.DataFrame, options: GeocodeOptions) -> None:
    """A dask-geopandas frame has a geometry the result would replace (seen on the
    client: the partitions would refuse it one by one on the workers). An earlier
    result (it has ``geocode_status``) is not refused: its geometry is ours, as
    ``df.geocode`` treats it."""
    name = getattr(ddf._meta, "_geometry_column_name", None)
    ours = "geocode_status" in ddf.columns
    if name is not None and name in ddf.columns and not ours and not options.overwrite_columns:
        raise ConfigurationError(
            f"the frame already has its own geometry column {name!r}, which the result would "
            "replace: drop or rename it, or pass overwrite_columns=True to replace it")


def _refuse_series(ddf: Any, takes: str) -> None:
    """A dask Series (``ddf["address"]``) is no frame: say what to pass, on the client."""
    if getattr(ddf, "ndim", 2) == 1:
        raise ConfigurationError(
            f"{takes}, got a Series: pass the DataFrame, or series.to_frame() (its name is "
            "the column)")


def geocode(ddf: dd.DataFrame, column: str | None = "address", *, client: Any = None,
            across_partitions: bool = True, **options: Any) -> dgpd.GeoDataFrame:
    """Geocode a dask DataFrame lazily on a shared gate and cache, each distinct address once.

    Parameters
    ----------
    ddf
        The dask (or dask-geopandas) DataFrame holding the addresses.
    column
        The free-text address column, or ``None`` with structured columns
        (``street=``, ``city=``, ... as for ``df.geocode.run()``).
    client
        The ``distributed.Client`` whose workers will run the job (default: the
        current one, if any); only used to count the hosts and threads.
    across_partitions
        Send each distinct address once per run, whichever partitions its rows are in
        (default). Computing any part of the result (``head()``, one partition) then
        runs the whole run: every partition's addresses are sent. ``False``: each
        partition is geocoded alone (duplicates in different partitions are sent once
        per partition; computing one partition sends its addresses only, and there are
        no shuffles).
    **options
        The options of :class:`~geotoolkit.orchestration.options.GeocodeOptions`
        (``provider`` and ``gate`` are required here). The gate must be a URL every
        worker reaches: ``redis://...`` or ``postgresql://...``; on one machine also
        ``sqlite:///path``. ``memory://`` is refused. ``rate`` is for the whole
        fleet. The cache: ``postgresql://...``, on one machine ``sqlite:///path``
        (``None``: the default SQLite file), or ``False``. A relative SQLite path is
        made absolute here, against the caller's working directory, whatever the
        workers' is.

    Returns
    -------
    dask_geopandas.GeoDataFrame
        Lazy: the input columns plus ``lon``, ``lat``, the ``geocode_*`` columns of
        ``df.geocode.run()`` (``geocode_precision`` the ordered categorical) and Point
        geometry in EPSG:4326 built on each worker from ``(lon, lat)`` (empty where the
        row did not match); same index, order, partitions and divisions. Nothing is
        sent until it is computed or written (:func:`write_partitioned`,
        ``.to_parquet()``), and nothing is computed to build it. Each computation is
        one run: every distinct address (its cache key) is sent once in it, with the
        text of its first row; its rows in other partitions take the same outcome
        (match, no match, or failure with its reason). With more than one partition
        the input's partitions stay on the workers (spilled to disk by dask if need
        be) until their answers come back; nothing is collected on the client.

    Raises
    ------
    ConfigurationError
        A dask Series instead of a DataFrame, an unshareable gate or cache (see
        :func:`check_shared`), an unpicklable provider, an unknown option, a fleet
        against public Nominatim, or a frame with its own geometry (without
        ``overwrite_columns=True``; an earlier result's geometry is its own).
    ImportError
        dask-geopandas is not installed (the ``dask`` extra: ``pip install -e '.[dask]'``).
    """
    _refuse_series(ddf, "geocode takes a dask DataFrame with an address column")
    columns = Columns.take(column, options)
    settings, cluster = _settings(client, options)
    _refuse_own_geometry(ddf, settings)
    # The meta (built in _lazy, on the client) checks the columns.
    return _partitioned(ddf, Forward(settings, columns), cluster, across_partitions)


with_options_signature(geocode, columns=True)


def reverse(ddf: dd.DataFrame, *, lon: str | None = None, lat: str | None = None, crs: Any = None,
            decimals: int = REVERSE_DECIMALS, country: str | None = None, client: Any = None,
            across_partitions: bool = True, **options: Any) -> dgpd.GeoDataFrame:
    """Reverse geocode a dask-geopandas GeoDataFrame's points lazily, each distinct point once.

    The partitioned counterpart of ``gdf.geocode.reverse()``: the same checks, result
    columns and per-row reasons (a missing, empty or non-point geometry, a point out of
    range or outside ``country`` is a dead letter, never sent), on a shared gate and
    cache as :func:`geocode`. A point's cache key is its lon/lat rounded to
    ``decimals``: each distinct key is sent once per run, whichever partitions its rows
    are in (``across_partitions=False``: once per partition).

    Parameters
    ----------
    ddf
        A dask-geopandas GeoDataFrame with a CRS (its active geometry holds the points),
        or a dask DataFrame with ``lon`` and ``lat`` columns (named, in ``crs``: default
        EPSG:4326 degrees).
    lon, lat, crs, decimals, country
        As for ``gdf.geocode.reverse()``.
    client, across_partitions, **options
        As for :func:`geocode`; every provider must have a reverse endpoint.

    Returns
    -------
    dask_geopandas.GeoDataFrame
        Lazy: the columns of ``gdf.geocode.reverse()`` (the input point, in EPSG:4326,
        as its geometry); same index, order, partitions and divisions. Nothing is sent
        or computed to build it; each computation is one run, as for :func:`geocode`.

    Raises
    ------
    ConfigurationError
        What :func:`geocode` refuses (but the frame's own geometry: it holds the
        points), a frame without a CRS, a provider without reverse geocoding, or
        columns the result would overwrite; on the client, before anything is sent.
    ImportError
        dask-geopandas is not installed (the ``dask`` extra: ``pip install -e '.[dask]'``).
    """
    _refuse_series(ddf, "reverse takes a dask-geopandas GeoDataFrame of points (or a dask DataFrame "
                        "with lon= and lat= columns)")
    settings, cluster = _settings(client, options)
    factory = Reverse(settings, lon=lon, lat=lat, crs=crs, decimals=decimals, country=country)
    return _partitioned(ddf, factory, cluster, across_partitions)


with_options_signature(reverse)


def _settings(client: Any, options: dict[str, Any]) -> tuple[GeocodeOptions, Cluster]:
    """The options, checked on the client before anything runs, and the cluster they run on."""
    cluster = Cluster.of(client)
    check_shared(options.get("gate", False), options.get("cache"), cluster.hosts)
    options.update({role: _anchored(options[role]) for role in ("gate", "cache") if role in options})
    settings = GeocodeOptions.from_env(**options)
    _shippable(settings)
    check_usage_policy(settings.resolved_provider, gate_backend=gate_backend(settings.gate),
                       cached=settings.cache is not False, rate=settings.rate_policy)
    return settings, cluster


def _partitioned(ddf: dd.DataFrame, factory: Forward | Reverse, cluster: Cluster,
                 across_partitions: bool) -> dgpd.GeoDataFrame:
    if not across_partitions:
        return _lazy(ddf, Alone(factory))
    return _lazy(ddf, factory, buckets=cluster.threads)


def _targets(path: str | Any, overwrite: bool, storage_options: dict[str, Any] | None
             ) -> tuple[str, str]:
    """``path/geocoded`` and ``path/dead_letters``; refused when they hold files already."""
    from fsspec.core import url_to_fs

    base = str(path).rstrip("/")
    fs, root = url_to_fs(base, **(storage_options or {}))
    for name in () if overwrite else ("geocoded", "dead_letters"):
        if fs.isdir(f"{root}/{name}") and fs.ls(f"{root}/{name}"):
            raise ExportError(f"{redact(base)}/{name} already holds files (an earlier run?): pass "
                              "overwrite=True to replace them, or write somewhere else")
    return f"{base}/geocoded", f"{base}/dead_letters"


def write_partitioned(result: dgpd.GeoDataFrame, path: str | Any, *, overwrite: bool = False,
                      storage_options: dict[str, Any] | None = None,
                      **to_parquet: Any) -> tuple[int, int]:
    """Write a :func:`geocode` result from the workers: ``path/geocoded/`` and ``path/dead_letters/``.

    One run: each partition is built once (each distinct address geocoded once, unless
    :func:`geocode` had ``across_partitions=False``), and each partition's matched
    rows go to the GeoParquet dataset ``geocoded/`` (Points in EPSG:4326) and the
    others, with the columns of :func:`~geotoolkit.export.dead_letters`, to the
    Parquet dataset ``dead_letters/``, one file per partition each, written by the
    worker that built the partition. Only the two row counts come back to the client.

    Parameters
    ----------
    result
        The lazy result of :func:`geocode`.
    path
        A directory, local or any fsspec URL (``s3://bucket/run/``).
    overwrite
        Replace what ``geocoded/`` and ``dead_letters/`` hold (default: refuse).
    storage_options
        Options of the fsspec filesystem (credentials, endpoint).
    **to_parquet
        More arguments for both ``to_parquet`` calls (``compression=``,
        ``write_index=``...).

    Returns
    -------
    tuple of int
        ``(geocoded, dead_letters)`` row counts.

    Read them back with ``geopandas.read_parquet(f"{path}/geocoded")`` (or
    ``dask_geopandas.read_parquet``) and ``pandas.read_parquet(f"{path}/dead_letters")``.
    """
    from dask.base import compute

    geocoded_path, letters_path = _targets(path, overwrite, storage_options)
    options = {"overwrite": overwrite, "storage_options": storage_options, **to_parquet}
    matched = result["geocode_status"] == "matched"
    letters = result.map_partitions(dead_letters, meta=dead_letters(result._meta))
    writes = (result[matched].to_parquet(geocoded_path, compute=False, **options),
              letters.to_parquet(letters_path, compute=False, **options))
    # Computed together, the writes and the counts share each partition's geocoding.
    *_, n_matched, n_total = compute(*writes, matched.sum(), matched.size)  # type: ignore[no-untyped-call]
    return int(n_matched), int(n_total) - int(n_matched)


def to_geodataframe(result: Any) -> gpd.GeoDataFrame:
    """Compute a :func:`geocode` result (or take a computed one) into one GeoDataFrame.

    This collects every partition into the client's memory: fine for small results;
    for large ones use :func:`write_partitioned` (or ``result.to_parquet(...)``), which
    the workers write without collecting. Matched rows get a Point from ``(lon, lat)``
    in EPSG:4326; the others an empty geometry, as with ``df.geocode.run()``.
    """
    import geopandas as gpd

    frame = result.compute() if hasattr(result, "compute") else result
    if isinstance(frame, gpd.GeoDataFrame):
        frame = frame.drop(columns=frame.geometry.name)
    frame = pd.DataFrame(frame)
    points = gpd.points_from_xy(frame["lon"], frame["lat"], crs="EPSG:4326")
    points[(frame["geocode_status"] != "matched").to_numpy(dtype=bool, na_value=True)] = None
    return gpd.GeoDataFrame(frame, geometry=points, crs="EPSG:4326")
