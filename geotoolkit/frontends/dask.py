"""Geocode a dask DataFrame partition by partition, paced fleet-wide by a shared gate.

Each partition runs the ordinary ``df.geocode`` job on whichever worker dask picks:
it opens the gate and the result cache *by URL* on that worker, geocodes its rows and
closes them again. So every worker must reach the same gate and cache:

- on a cluster spanning machines: ``gate="redis://..."`` or ``"postgresql://..."``, and
  ``cache="postgresql://..."`` (or ``cache=False``);
- on one machine (a ``LocalCluster``, the threaded or multiprocessing scheduler) a
  SQLite gate and cache work as well: ``sqlite:///path`` on a local filesystem.

``memory://`` is always refused: it lives inside one call, so every partition would
pace alone. SQLite on workers spread over several hosts is refused too. Both raise
:class:`~geotoolkit.errors.ConfigurationError` before anything is sent.

The options are one :class:`~geotoolkit.orchestration.options.GeocodeOptions`, built
and checked on the client, pickled to the workers (the provider with it: its key stays
out of reprs and logs). The result is a dask DataFrame, not a GeoDataFrame (dask-geopandas is not a
dependency): the input columns plus ``lon``, ``lat`` and the ``geocode_*`` columns of
``df.geocode.run()``. :func:`to_geodataframe` computes it into a GeoDataFrame with
Point geometry in EPSG:4326. A partition killed mid-run (a lost worker) is run again by
dask; with a shared cache, the rows it had settled are not sent again.

For example, on a cluster::

    import dask.dataframe as dd
    from geotoolkit.frontends import dask as gdask

    ddf = dd.read_parquet("s3://bucket/addresses/")
    out = gdask.geocode(ddf, "address", provider="nominatim", base_url=url,
                        user_agent="acme/1.0 (ops@acme.example)", rate=10,
                        gate="redis://gate.internal:6379/0", cache="postgresql://...")
    gdf = gdask.to_geodataframe(out)
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pandas as pd

from geotoolkit.errors import ConfigurationError
from geotoolkit.export import result_dtypes
from geotoolkit.orchestration.frame import outcomes_frame
from geotoolkit.orchestration.job import Columns, FrameJob, gate_backend, require_columns
from geotoolkit.orchestration.options import GeocodeOptions, with_options_signature
from geotoolkit.providers.policies import check_usage_policy
from geotoolkit.redact import redact

if TYPE_CHECKING:
    import dask.dataframe as dd
    import geopandas as gpd

__all__ = ["check_shared", "geocode", "to_geodataframe"]



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


def _cluster_hosts(client: Any = None) -> int:
    """How many hosts the distributed cluster's workers run on now (1 without a cluster).

    Counted when :func:`geocode` is called: an adaptive cluster that later grows onto
    more machines is not seen.
    """
    if client is None:
        try:
            from distributed import default_client
        except ImportError:
            return 1
        try:
            client = default_client()  # type: ignore[no-untyped-call]
        except ValueError:  # no distributed client: dask's local schedulers
            return 1
    try:
        info = client.scheduler_info(n_workers=-1)  # every worker, not the first five
    except TypeError:  # distributed before 2025: no n_workers, and no limit either
        info = client.scheduler_info()
    workers = info.get("workers", {})
    hosts = {str(info.get("host", urlsplit(address).hostname)) for address, info in workers.items()}
    return max(1, len(hosts))


def _shippable(options: GeocodeOptions) -> None:
    """Refuse options that cannot travel to the workers (an unpicklable provider)."""
    try:
        pickle.dumps(options)
    except Exception as exc:  # any pickling failure: the options cannot travel
        raise ConfigurationError(
            f"{options.provider!r} cannot be sent to dask workers ({type(exc).__name__}); pass "
            "the provider by name, e.g. provider='nominatim', user_agent=..., base_url=...") from exc


@dataclass(frozen=True, repr=False)
class _PartitionJob:
    """Geocode one partition: a FrameJob whose gate and cache are opened on the worker."""

    columns: Columns
    options: GeocodeOptions

    def __call__(self, part: pd.DataFrame) -> pd.DataFrame:
        if len(part) == 0:
            return _meta(part, self.options)
        result = FrameJob(part, self.columns, self.options).run_sync(None)
        return _normalise(pd.DataFrame(result.drop(columns=result.geometry.name)))

    def __repr__(self) -> str:
        return redact(f"_PartitionJob({self.options.provider!r}, gate={self.options.gate}, "
                      f"cache={self.options.cache})")


def _normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """The result columns in their fixed dtypes, so every partition matches the meta."""
    return result_dtypes(frame)


def _meta(meta: pd.DataFrame, options: GeocodeOptions) -> pd.DataFrame:
    """The columns and dtypes of a partition's result: what geocoding no rows gives."""
    result = outcomes_frame(meta.iloc[:0], [], min_precision=options.min_precision,
                            full_results=options.full_results)
    return _normalise(pd.DataFrame(result.drop(columns=result.geometry.name)))


def geocode(ddf: dd.DataFrame, column: str | None = "address", *, client: Any = None,
            **options: Any) -> dd.DataFrame:
    """Geocode a dask DataFrame lazily, partition by partition, on a shared gate and cache.

    Parameters
    ----------
    ddf
        The dask DataFrame holding the addresses.
    column
        The free-text address column, or ``None`` with structured columns
        (``street=``, ``city=``, ... as for ``df.geocode.run()``).
    client
        The ``distributed.Client`` whose workers will run the job (default: the
        current one, if any); only used to count the hosts.
    **options
        The options of :class:`~geotoolkit.orchestration.options.GeocodeOptions`
        (``provider`` and ``gate`` are required here). The gate must be a URL every
        worker reaches: ``redis://...`` or ``postgresql://...``; on one machine also
        ``sqlite:///path``. ``memory://`` is refused. ``rate`` is for the whole
        fleet. The cache: ``postgresql://...``, on one machine ``sqlite:///path``
        (``None``: the default SQLite file), or ``False``.

    Returns
    -------
    dask.dataframe.DataFrame
        The input columns plus ``lon``, ``lat`` and the ``geocode_*`` columns, same
        index and partitions; nothing runs until it is computed.

    Raises
    ------
    ConfigurationError
        An unshareable gate or cache (see :func:`check_shared`), an unpicklable
        provider, an unknown option, or a fleet against public Nominatim.
    """
    columns = Columns.take(column, options)
    check_shared(options.get("gate", False), options.get("cache"), _cluster_hosts(client))
    settings = GeocodeOptions.from_env(**options)
    _shippable(settings)
    check_usage_policy(settings.resolved_provider, gate_backend=gate_backend(settings.gate),
                       cached=settings.cache is not False)
    require_columns(ddf.columns, columns.names(ddf.columns))
    job = _PartitionJob(columns, settings)
    result: dd.DataFrame = ddf.map_partitions(  # type: ignore[no-untyped-call]
        job, meta=_meta(ddf._meta, settings))
    return result


with_options_signature(geocode, columns=True)


def to_geodataframe(result: Any) -> gpd.GeoDataFrame:
    """Compute a :func:`geocode` result (or take a computed one) into a GeoDataFrame.

    Matched rows get a Point from ``(lon, lat)`` in EPSG:4326; the others an empty
    geometry, as with ``df.geocode.run()``.
    """
    import geopandas as gpd

    frame = result.compute() if hasattr(result, "compute") else result
    frame = pd.DataFrame(frame)
    points = gpd.points_from_xy(frame["lon"], frame["lat"], crs="EPSG:4326")
    points[(frame["geocode_status"] != "matched").to_numpy(dtype=bool, na_value=True)] = None
    return gpd.GeoDataFrame(frame, geometry=points, crs="EPSG:4326")
