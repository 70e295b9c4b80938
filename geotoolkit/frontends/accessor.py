"""``df.geocode``: geocode a DataFrame into a validated EPSG:4326 GeoDataFrame.

Importing geotoolkit registers the accessor on every DataFrame (and so every
GeoDataFrame)::

    result = df.geocode.run("address", provider=Nominatim(user_agent="me/1.0"))
    result.geocode.dead_letters()      # what did not match, why, and how precisely
    result.geocode.explore()           # a map: points by precision, dead letters beside
    fixed = result.geocode.dead_letters()[["address"]]   # correct some addresses...
    result = result.geocode.retry(fixed, provider=...)   # ...send only those again

    places = gdf.geocode.reverse(provider=...)   # Points in any CRS -> the addresses there
    result = await df.geocode.run_async("address", provider=...)   # on the running loop

A thin front end: the options become one
:class:`~geotoolkit.orchestration.options.GeocodeOptions`, the work is a
:class:`~geotoolkit.orchestration.job.FrameJob` (reverse: a
:class:`~geotoolkit.orchestration.reverse.ReverseJob`). This module imports only pandas at
import time, so registering the accessor is cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from geotoolkit.results import REVERSE_DECIMALS

if TYPE_CHECKING:
    import geopandas as gpd

    from geotoolkit.display.map import ResultMap
    from geotoolkit.frontends.background import GeocodeJob
    from geotoolkit.orchestration.job import FrameJob
    from geotoolkit.orchestration.reverse import ReverseJob

__all__ = ["GeocodeAccessor"]


@pd.api.extensions.register_dataframe_accessor("geocode")
class GeocodeAccessor:
    """Geocoding for DataFrames and GeoDataFrames: ``df.geocode.run(...)``.

    Examples
    --------
    >>> import pandas as pd
    >>> from geotoolkit.providers import Nominatim
    >>> from geotoolkit.testing import ProviderSimulator
    >>> df = pd.DataFrame({"address": ["Städtle 38, 9490 Vaduz", "Nowhere 1"]}, index=[10, 20])
    >>> with ProviderSimulator() as sim:
    ...     p = Nominatim(sim.url, user_agent="docs-example/1.0")
    ...     out = df.geocode.run(provider=p, gate="memory://", cache=False, progress=False)
    >>> out[["lon", "lat", "geocode_status"]]
            lon       lat geocode_status
    10  9.52195  47.13974        matched
    20      NaN       NaN       no_match
    >>> out.crs.to_string(), list(out.geocode.dead_letters().index)
    ('EPSG:4326', [20])
    """

    def __init__(self, pandas_obj: pd.DataFrame) -> None:
        self._obj = pandas_obj

    def run(
        self,
        column: str | None = None,
        *,
        progress: Any = "auto",
        background: bool = False,
        **options: Any,
    ) -> gpd.GeoDataFrame | GeocodeJob[gpd.GeoDataFrame]:
        """Geocode the frame; return a new GeoDataFrame (same index, EPSG:4326).

        The input is never modified. Rows get ``lon``, ``lat`` (float), a Point
        built from them, ``geocode_status`` (matched, too_coarse, no_match,
        failed), ``geocode_precision`` (an ordered categorical, finest first:
        address, interpolated, street, postcode, locality, region, country,
        feature, unknown), ``geocode_score`` (the provider's confidence in [0, 1], NaN
        where it gives none), ``geocode_label``, ``geocode_provider`` (with a
        chain: which provider answered), ``geocode_reason`` (why a row did not
        match) and ``geocode_attempts``. Every point is validated first; flagged
        rows are "failed" with the reason and no geometry. With
        ``min_precision``, coarser matches are "too_coarse": no coordinates, no
        geometry, their point in ``geocode_coarse_lon``/``geocode_coarse_lat``.
        ``full_results=True`` adds the provider's place id, address components
        and bounding box as ``geocode_*`` columns.

        Parameters
        ----------
        column
            The free-text address column (default ``"address"``), or ``None``
            when structured columns are given instead.
        progress
            ``"auto"``, ``"widget"``, ``"text"``, ``"json"``, ``False`` or a callable
            taking progress events.
        background
            Return at once a :class:`~geotoolkit.frontends.background.GeocodeJob`
            (``result()``, ``cancel()``, ``done()``, ``panel``) and geocode in a
            background thread, so you can keep working.
        housenumber, street, city, county, state, postalcode
            Column names for a structured query (instead of ``column``).
        country
            An ISO 3166-1 alpha-2 code: points outside that country are flagged,
            and reported as swapped when ``(lat, lon)`` falls inside. Or the name of
            a column holding a code (or English country name) per row: sent as the
            structured ``country`` field and used to validate each row.
        **options
            The options of :class:`~geotoolkit.orchestration.options.GeocodeOptions`
            (``provider`` is required): ``rate``, ``gate``, ``cache``, ``concurrency``,
            ``max_wait_seconds``, ... ``$GEOTOOLKIT_GATE_URL`` and
            ``$GEOTOOLKIT_CACHE_URL`` supply the gate and cache when not given.

        Raises
        ------
        KeyError
            A named column is missing (the message lists the available ones).
        ConfigurationError
            Bad options or columns, caught before anything is opened or sent.
        """
        from geotoolkit.display.sinks import progress_sink

        job = self._frame_job(column, options)
        if background:
            from geotoolkit.frontends.background import start_in_background

            return start_in_background(job, progress)
        return job.run_sync(progress_sink(progress))

    async def run_async(self, column: str | None = None, *, progress: Any = "auto",
                        **options: Any) -> gpd.GeoDataFrame:
        """:meth:`run`, awaited: ``out = await df.geocode.run_async("address", ...)`` in a
        Jupyter cell, an ``async def`` task (Prefect, Dagster) or any asyncio program.

        The batch runs on the caller's event loop (gate and cache calls in worker
        threads), so the loop keeps serving other tasks, widgets and the kernel while
        it waits for the provider. Cancelling the task (the notebook's stop button on a
        cell with ``await``) stops the batch: the rows already settled are kept in the
        cache, so a rerun sends only the rest, and ``CancelledError`` is raised. The
        parameters, result and errors are those of :meth:`run` (no ``background``: the
        task is the handle).
        """
        from geotoolkit.display.sinks import progress_sink

        job = self._frame_job(column, options)
        return job.result(await job.run(progress_sink(progress)))

    def _frame_job(self, column: str | None, options: dict[str, Any]) -> FrameJob:
        from geotoolkit.orchestration.job import Columns, FrameJob
        from geotoolkit.orchestration.options import GeocodeOptions

        columns = Columns.take(column, options)
        return FrameJob(self._obj, columns, GeocodeOptions.from_env(**options))

    def reverse(
        self,
        *,
        lon: str | None = None,
        lat: str | None = None,
        crs: Any = None,
        decimals: int = REVERSE_DECIMALS,
        country: str | None = None,
        progress: Any = "auto",
        background: bool = False,
        **options: Any,
    ) -> gpd.GeoDataFrame | GeocodeJob[gpd.GeoDataFrame]:
        """Reverse geocode the frame's points: the address at each one, in a new GeoDataFrame.

        The points are reprojected from the frame's CRS to EPSG:4326 first (a frame
        without a CRS is refused: ``gdf.set_crs(...)``). The result has the same
        index and the input columns, and keeps the input point (reprojected) as its
        geometry, so it still maps where the fixes were. It adds
        ``geocode_status`` (matched, too_coarse with ``min_precision``, no_match,
        failed), ``geocode_label`` (the address found), ``geocode_precision`` (the
        ordered categorical of :meth:`run`), ``geocode_score``,
        ``geocode_provider``, ``geocode_reason``, ``geocode_attempts``, the place's
        own point ``geocode_lon``/``geocode_lat`` and ``geocode_distance_m``, its
        geodesic distance (WGS84) from the input point in metres; with
        ``full_results=True`` the address components (``geocode_street``,
        ``geocode_housenumber``, ``geocode_postcode``, ``geocode_locality``...).
        Missing, empty and non-point geometries, out-of-range coordinates and
        (0, 0) are dead letters with their reason, never sent; so, with ``country``
        (an ISO alpha-2 code), is a point outside that country, and one whose
        (lat, lon) would fall inside says its coordinates look swapped.

        The same engine, gate, cache, options and progress as :meth:`run`: points
        are cached by their coordinates rounded to ``decimals``, so two fixes closer
        than that share one request and a rerun sends nothing already settled.

        Parameters
        ----------
        lon, lat
            For a plain DataFrame only: the names of its longitude and latitude
            columns (or easting and northing in ``crs``), never guessed; both are
            kept. A GeoDataFrame uses its own geometry and CRS.
        crs
            With ``lon``/``lat``: the CRS of those columns (default EPSG:4326).
        decimals
            Decimals of a degree a point is sent and cached with (default 6, about
            0.1 m; 4 is about 10 m: GPS jitter below that shares one request).
        progress, background
            As for :meth:`run`.
        **options
            The options of :class:`~geotoolkit.orchestration.options.GeocodeOptions`
            (``provider`` is required, and must have a reverse endpoint; a list of
            them is a fallback chain).

        Raises
        ------
        ConfigurationError
            No CRS (or one with no way to lon/lat), a provider without reverse
            geocoding, bad options, columns the result would overwrite; all before
            anything is opened or sent.

        Examples
        --------
        >>> import geopandas as gpd
        >>> from shapely.geometry import Point
        >>> from geotoolkit.providers import Nominatim
        >>> from geotoolkit.testing import ProviderSimulator
        >>> fixes = gpd.GeoDataFrame({"fix": ["a", "b"]}, geometry=[
        ...     Point(2758020, 1223073), Point(2700000, 1100000)], crs="EPSG:2056")
        >>> with ProviderSimulator() as sim:
        ...     p = Nominatim(sim.url, user_agent="docs-example/1.0")
        ...     out = fixes.geocode.reverse(provider=p, gate="memory://", cache=False,
        ...                                 progress=False)
        >>> out.geocode_status.tolist(), out.geocode_label[0]
        (['matched', 'no_match'], '38, Städtle, Vaduz, 9490, Liechtenstein')
        >>> out.crs.to_string(), round(float(out.geocode_distance_m[0]), 1)
        ('EPSG:4326', 2.2)
        """
        from geotoolkit.display.sinks import progress_sink

        job = self._reverse_job(lon, lat, crs, decimals, country, options)
        if background:
            from geotoolkit.frontends.background import start_in_background

            return start_in_background(job, progress)
        return job.run_sync(progress_sink(progress))

    async def reverse_async(self, *, lon: str | None = None, lat: str | None = None,
                            crs: Any = None, decimals: int = REVERSE_DECIMALS,
                            country: str | None = None, progress: Any = "auto",
                            **options: Any) -> gpd.GeoDataFrame:
        """:meth:`reverse`, awaited on the caller's event loop, as :meth:`run_async` is
        :meth:`run`: ``out = await fixes.geocode.reverse_async(provider=...)``."""
        from geotoolkit.display.sinks import progress_sink

        job = self._reverse_job(lon, lat, crs, decimals, country, options)
        return job.result(await job.run(progress_sink(progress)))

    def _reverse_job(self, lon: str | None, lat: str | None, crs: Any, decimals: int,
                     country: str | None, options: dict[str, Any]) -> ReverseJob:
        from geotoolkit.orchestration.options import GeocodeOptions
        from geotoolkit.orchestration.reverse import reverse_job

        return reverse_job(self._obj, GeocodeOptions.from_env(**options), lon=lon, lat=lat,
                           crs=crs, decimals=decimals, country=country)

    def dead_letters(self) -> pd.DataFrame:
        """The rows of a result that did not match (too coarse, no match or flagged), with
        the reason, for review: correct some and hand them to :meth:`retry`. For a
        reverse result, a GeoDataFrame keeping each row's input geometry."""
        from geotoolkit.export import dead_letters

        return dead_letters(self._obj)

    def retry(self, fixed: pd.DataFrame | None = None, column: str | None = None, *,
              progress: Any = "auto", **options: Any) -> gpd.GeoDataFrame:
        """Send some rows of a result again; return the WHOLE result with them merged in.

        The review loop: ``letters = result.geocode.dead_letters()``, correct some
        addresses (by hand, or in a spreadsheet read back with ``index_col=0``), then
        ``result = result.geocode.retry(letters.loc[[...]], provider=...)``. Only the
        rows of ``fixed`` are sent (by index label; its input columns replace the
        result's), and a row whose answer is in the cache is not sent at all. No
        row is lost, added or moved; the retried rows get their new status, point
        and provider; ``geocode_attempts`` adds up the requests of every round and
        ``geocode_fixed`` is True for every row whose address you changed.

        Parameters
        ----------
        fixed
            Rows of this result (same index labels), e.g. edited dead letters;
            ``None``: every dead letter as it is (after an outage, or to ask
            another provider).
        column, housenumber, street, city, county, state, postalcode, country
            The address columns, as for :meth:`run`.
        progress
            As for :meth:`run`.
        **options
            The same options as :meth:`run` (``provider`` is required): they are
            not kept on the frame (a provider carries its key, which must never
            travel in a pickle or a Parquet file), so pass them again.

        Raises
        ------
        ConfigurationError
            ``fixed`` is not a DataFrame, has rows or columns the result does not,
            or the result's index has duplicates; the result is a reverse result.
        """
        from geotoolkit.display.sinks import progress_sink
        from geotoolkit.errors import ConfigurationError
        from geotoolkit.export.dtypes import is_reverse_result
        from geotoolkit.orchestration.frame import retry
        from geotoolkit.orchestration.job import Columns
        from geotoolkit.orchestration.options import GeocodeOptions

        if is_reverse_result(self._obj):
            raise ConfigurationError(
                "retry() sends addresses again; this is a reverse result: run reverse() again "
                "(settled points come from the cache), or on some rows, result.loc[rows]"
                ".geocode.reverse(provider=...)")
        columns = Columns.take(column, options)
        return retry(self._obj, fixed, columns, GeocodeOptions.from_env(**options),
                     progress_sink(progress))

    def explore(self, **kwargs: Any) -> ResultMap:
        """An interactive map of the result: points coloured by precision, dead letters beside.

        Built on ``GeoDataFrame.explore()`` (folium); the tooltip shows the input
        columns, the label, the provider and the precision; too-coarse points are
        drawn hollow in their own layer. A large result draws a random sample of
        ``max_points`` points (default 5,000; ``None``: every point) and says so. Needs
        the ``map`` extra (``pip install -e '.[map]'`` in the checkout). Other keyword arguments go
        to ``GeoDataFrame.explore()`` (``tiles=``, ``tooltip=``, ``m=``...).

        Returns
        -------
        ResultMap
            Shown in a notebook as the map with the dead-letter table beside it;
            ``.map`` is the ``folium.Map``, ``.dead_letters`` the table,
            ``save(path)`` writes both to one HTML page.
        """
        from geotoolkit.display.map import explore
        from geotoolkit.export import dead_letters
        from geotoolkit.export.dtypes import is_reverse_result

        if is_reverse_result(self._obj):
            return _explore_reverse(self._obj, **kwargs)
        return explore(self._obj, dead_letters(self._obj), **kwargs)


def _explore_reverse(result: gpd.GeoDataFrame, **kwargs: Any) -> ResultMap:
    """The map of a reverse result: the input points coloured by the precision of the place
    found there, the address and its distance in the tooltip."""
    import math

    from geotoolkit.display.map import explore
    from geotoolkit.export import dead_letters, input_columns

    try:
        import folium
    except ImportError:  # explore() says what to install
        return explore(result, dead_letters(result), **kwargs)
    if "m" not in kwargs:  # centred on the fixes (the map's default reads forward lon/lat)
        from geotoolkit.orchestration.reverse_frame import point_lonlat

        lon, lat = point_lonlat(result.geometry.array)
        known = [(y, x) for x, y in zip(lon, lat, strict=True) if math.isfinite(x + y)]
        centre = [sorted(v)[len(v) // 2] for v in zip(*known, strict=True)] if known else [0, 0]
        kwargs["m"] = folium.Map(location=centre, zoom_start=12,
                                 tiles=kwargs.pop("tiles", "OpenStreetMap"))
    own = [str(c) for c in input_columns(result).columns][:3]
    kwargs.setdefault("tooltip", [*own, "geocode_label", "geocode_distance_m",
                                  "geocode_precision", "geocode_provider"])
    return explore(result, dead_letters(result), **kwargs)


def _signature() -> None:
    from geotoolkit.orchestration.options import with_options_signature

    with_options_signature(GeocodeAccessor.run, columns=True)
    with_options_signature(GeocodeAccessor.retry, columns=True)
    with_options_signature(GeocodeAccessor.reverse)


_signature()
