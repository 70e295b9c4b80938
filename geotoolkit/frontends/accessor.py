"""``df.geocode``: geocode a DataFrame into a validated EPSG:4326 GeoDataFrame.

Importing geotoolkit registers the accessor on every DataFrame (and so every
GeoDataFrame)::

    result = df.geocode.run("address", provider=Nominatim(user_agent="me/1.0"))
    result.geocode.dead_letters()

A thin front end: the options become one
:class:`~geotoolkit.orchestration.options.GeocodeOptions`, the work is a
:class:`~geotoolkit.orchestration.job.FrameJob`. This module imports only pandas at
import time, so registering the accessor is cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    import geopandas as gpd

    from geotoolkit.frontends.background import GeocodeJob

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
        built from them, ``geocode_status`` (matched, no_match, failed),
        ``geocode_label``, ``geocode_provider``, ``geocode_reason`` (why a row
        did not match) and ``geocode_attempts``. Every point is validated first;
        flagged rows are "failed" with the reason and no geometry.

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
        from geotoolkit.orchestration.job import Columns, FrameJob
        from geotoolkit.orchestration.options import GeocodeOptions

        columns = Columns.take(column, options)
        job = FrameJob(self._obj, columns, GeocodeOptions.from_env(**options))
        if background:
            from geotoolkit.frontends.background import start_in_background

            return start_in_background(job, progress)
        return job.run_sync(progress_sink(progress))

    def dead_letters(self) -> pd.DataFrame:
        """The rows of a result that did not match (or were flagged), ready for review."""
        from geotoolkit.export import dead_letters

        return dead_letters(self._obj)


def _signature() -> None:
    from geotoolkit.orchestration.options import with_options_signature

    with_options_signature(GeocodeAccessor.run, columns=True)


_signature()
