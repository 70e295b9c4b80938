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

The result is a dask DataFrame, not a GeoDataFrame (dask-geopandas is not a
dependency): the input columns plus ``lon``, ``lat`` and the ``geocode_*`` columns of
``df.geocode.run()``. :func:`to_geodataframe` computes it into a GeoDataFrame with
Point geometry in EPSG:4326. A partition killed mid-run (a lost worker) is run again by
dask; with a shared cache, the rows it had settled are not sent again.

For example, on a cluster::

    import dask.dataframe as dd
    from geotoolkit import dask as gdask

    ddf = dd.read_parquet("s3://bucket/addresses/")
    out = gdask.geocode(ddf, "address", provider="nominatim", base_url=url,
                        user_agent="acme/1.0 (ops@acme.example)", rate=10,
                        gate="redis://gate.internal:6379/0", cache="postgresql://...")
    gdf = gdask.to_geodataframe(out)
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pandas as pd

from geotoolkit.errors import ConfigurationError
from geotoolkit.frame import GEOCODE_COLUMNS
from geotoolkit.gate import redact_url
from geotoolkit.geocoding import gate_backend, resolve_provider
from geotoolkit.providers.base import Provider
from geotoolkit.providers.policies import check_usage_policy
from geotoolkit.providers.registry import get_provider

if TYPE_CHECKING:
    import dask.dataframe as dd
    import geopandas as gpd

__all__ = ["ProviderSpec", "check_shared", "geocode", "to_geodataframe"]

#: Keyword arguments of :func:`geocode` that name structured-address columns.
_STRUCTURED = ("street", "housenumber", "city", "county", "state", "postalcode")
#: Options passed on to ``df.geocode.run()`` in every partition.
_PASSED = ("rate", "concurrency", "max_attempts", "backoff", "timeout", "max_wait_seconds",
           "country", "no_match_ttl_seconds")
_TEXT_COLUMNS = ("geocode_status", "geocode_label", "geocode_provider", "geocode_reason")


@dataclass(frozen=True)
class ProviderSpec:
    """A provider by registry name and options, built on each worker.

    The options (``api_key`` among them) are hidden from the repr.

    >>> spec = ProviderSpec("opencage", {"api_key": "s3cret"})
    >>> spec
    ProviderSpec('opencage', options=['api_key'])
    >>> spec.build().name
    'opencage'
    """

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def build(self) -> Provider:
        """The provider instance."""
        return get_provider(self.name, **self.options)

    def __repr__(self) -> str:
        return f"ProviderSpec({self.name!r}, options={sorted(self.options)})"


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


def _shippable(provider: Provider | str, options: Mapping[str, Any]) -> Provider | ProviderSpec:
    """What each partition needs to get the provider: the instance, or its spec."""
    instance = resolve_provider(provider, **options)  # validates on the client, early
    if isinstance(provider, str):
        return ProviderSpec(provider, {k: v for k, v in options.items() if v is not None})
    try:
        pickle.dumps(instance)
    except Exception as exc:  # any pickling failure: the instance cannot travel
        raise ConfigurationError(
            f"{instance!r} cannot be sent to dask workers ({type(exc).__name__}); pass the "
            "provider by name, e.g. provider='nominatim', user_agent=..., base_url=...") from exc
    return instance


@dataclass(frozen=True, repr=False)
class _PartitionJob:
    """Geocode one partition: ``df.geocode.run()`` with URLs opened on the worker."""

    provider: Provider | ProviderSpec
    column: str | None
    gate: str | None
    cache: str | bool | None
    options: Mapping[str, Any]

    def __call__(self, part: pd.DataFrame) -> pd.DataFrame:
        from geotoolkit.accessor import geocode_frame

        provider = self.provider.build() if isinstance(self.provider, ProviderSpec) \
            else self.provider
        if len(part) == 0:
            return _with_columns(part)
        result = geocode_frame(part, self.column, provider=provider, gate=self.gate,
                               cache=self.cache, progress=False, **self.options)
        return _normalise(pd.DataFrame(result.drop(columns=result.geometry.name)))

    def __repr__(self) -> str:
        urls = [redact_url(u) if isinstance(u, str) else repr(u) for u in (self.gate, self.cache)]
        return f"_PartitionJob({self.provider!r}, gate={urls[0]}, cache={urls[1]})"


def _normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """The geocode columns with fixed dtypes, so every partition matches the meta."""
    for name in _TEXT_COLUMNS:
        frame[name] = frame[name].astype("string")
    frame["lon"] = frame["lon"].astype("float64")
    frame["lat"] = frame["lat"].astype("float64")
    frame["geocode_attempts"] = frame["geocode_attempts"].astype("int64")
    return frame


def _with_columns(part: pd.DataFrame) -> pd.DataFrame:
    """``part`` (usually empty: the meta) with the geocode columns appended."""
    drop = [c for c in (*GEOCODE_COLUMNS, "geometry") if c in part.columns]
    base = pd.DataFrame(part).drop(columns=drop)
    empty = {name: pd.Series([None] * len(base), index=base.index, dtype="object")
             for name in GEOCODE_COLUMNS}
    return _normalise(base.assign(**empty))


def geocode(
    ddf: dd.DataFrame,
    column: str | None = "address",
    *,
    provider: Provider | str,
    gate: str | None,
    cache: str | bool | None = None,
    api_key: str | None = None,
    user_agent: str | None = None,
    base_url: str | None = None,
    client: Any = None,
    **options: Any,
) -> dd.DataFrame:
    """Geocode a dask DataFrame lazily, partition by partition, on a shared gate and cache.

    Parameters
    ----------
    ddf
        The dask DataFrame holding the addresses.
    column
        The free-text address column, or ``None`` with structured columns
        (``street=``, ``city=``, ... in ``options``).
    provider
        A picklable provider instance, or a registry name (then ``api_key``,
        ``user_agent`` and ``base_url`` build it on each worker).
    gate
        A URL every worker reaches: ``redis://...`` or ``postgresql://...``; on one
        machine also ``sqlite:///path`` (``None``: the default SQLite file).
        ``memory://`` is refused. ``rate`` is for the whole fleet.
    cache
        The shared result cache: ``postgresql://...``, on one machine
        ``sqlite:///path`` (``None``: the default SQLite file), or ``False``.
    client
        The ``distributed.Client`` whose workers will run the job (default: the
        current one, if any); only used to count the hosts.
    **options
        ``rate``, ``concurrency``, ``max_attempts``, ``backoff``, ``timeout``,
        ``max_wait_seconds``, ``country``, ``no_match_ttl_seconds`` and the
        structured column names, as for ``df.geocode.run()``.

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
    unknown = sorted(set(options) - set(_PASSED) - set(_STRUCTURED))
    if unknown:
        raise ConfigurationError(f"geotoolkit.dask.geocode does not take {', '.join(unknown)}")
    check_shared(gate, cache, _cluster_hosts(client))
    shipped = _shippable(provider, {"api_key": api_key, "user_agent": user_agent,
                                    "base_url": base_url})
    built = shipped.build() if isinstance(shipped, ProviderSpec) else shipped
    check_usage_policy(built, gate_backend=gate_backend(gate), cached=cache is not False)
    _require_columns(ddf, column, options)
    job = _PartitionJob(shipped, column, gate, cache, dict(options))
    result: dd.DataFrame = ddf.map_partitions(  # type: ignore[no-untyped-call]
        job, meta=_with_columns(ddf._meta))
    return result


def _require_columns(ddf: dd.DataFrame, column: str | None, options: Mapping[str, Any]) -> None:
    names = [options[k] for k in _STRUCTURED if options.get(k) is not None] or [column]
    missing = [n for n in names if n not in ddf.columns]
    if missing:
        raise KeyError(f"column {missing[0]!r} not in the frame; available columns: "
                       f"{', '.join(map(str, ddf.columns))}")


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
