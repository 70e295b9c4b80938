"""``df.geocode``: geocode a DataFrame into a validated EPSG:4326 GeoDataFrame.

Importing geotoolkit registers the accessor on every DataFrame (and so every
GeoDataFrame)::

    result = df.geocode.run("address", provider=Nominatim(user_agent="me/1.0"))
    result.geocode.dead_letters()

The work lives in :func:`prepare` (a :class:`FrameJob`: items, engine, store) and
:func:`geocode_frame`, so other front ends (the CLI, a background runner) reuse it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import pandas as pd

from geotoolkit._sync import run_sync
from geotoolkit.clock import Clock
from geotoolkit.engine import Engine, ResultStore
from geotoolkit.errors import ConfigurationError
from geotoolkit.gate import Gate
from geotoolkit.geocoding import build_engine
from geotoolkit.policy import Backoff, RatePolicy
from geotoolkit.providers.base import Provider
from geotoolkit.render import progress_sink
from geotoolkit.results import Outcome, Query, query_from_value
from geotoolkit.store import DEFAULT_NO_MATCH_TTL_SECONDS, open_store
from geotoolkit.validate import require_country

if TYPE_CHECKING:
    import geopandas as gpd

    from geotoolkit.background import GeocodeJob

__all__ = ["STRUCTURED_ARGUMENTS", "FrameJob", "GeocodeAccessor", "geocode_frame", "prepare"]

#: Keyword arguments of ``run()`` naming structured-address columns (``country`` aside).
STRUCTURED_ARGUMENTS = ("street", "housenumber", "city", "county", "state", "postalcode")


def _require_columns(df: pd.DataFrame, names: Iterable[str]) -> None:
    for name in names:
        if name not in df.columns:
            available = ", ".join(map(str, df.columns)) or "(none)"
            raise KeyError(f"column {name!r} not in the frame; available columns: {available}")


def _free_text_items(values: Iterable[Any]) -> list[Query | str]:
    """One Query (or reason string) per cell; equal strings share one Query."""
    memo: dict[Hashable, Query | str] = {}
    items: list[Query | str] = []
    for value in values:
        if isinstance(value, str):
            item = memo.get(value)
            if item is None:
                item = memo[value] = query_from_value(value)
            items.append(item)
        else:
            items.append(query_from_value(value))
    return items


def _structured_items(df: pd.DataFrame, columns: dict[str, str]) -> list[Query | str]:
    names = list(columns)
    cells = zip(*(df[c].tolist() for c in columns.values()), strict=True)
    return [query_from_value(dict(zip(names, row, strict=True))) for row in cells]


@dataclass
class _Plan:
    """What to send and how to validate: from run()'s column arguments."""

    items: list[Query | str]
    country: str | list[Any] | None


def _plan(df: pd.DataFrame, column: str | None, structured: dict[str, str | None],
          country: str | None) -> _Plan:
    fields = {k: v for k, v in structured.items() if v is not None}
    if fields and column is not None:
        raise ConfigurationError("give either one free-text column or structured columns, not both")
    country_column = country if country is not None and country in df.columns else None
    checks: str | list[Any] | None = None
    if country is not None and country_column is None:
        checks = require_country(country)
    if not fields:
        name = "address" if column is None else column
        _require_columns(df, [name])
        items = _free_text_items(df[name].tolist())
    else:
        if country_column is not None:
            fields["country"] = country_column
        _require_columns(df, fields.values())
        items = _structured_items(df, fields)
    if country_column is not None:
        checks = df[country_column].tolist()
    return _Plan(items, checks)


@dataclass
class FrameJob:
    """A prepared geocoding run over one frame: ``await run()``, then ``result()``; ``close()``."""

    frame: pd.DataFrame
    items: list[Query | str]
    engine: Engine
    country: str | list[Any] | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)

    async def run(self) -> list[Outcome]:
        """Settle every row (cached rows are not sent)."""
        return await self.engine.run(self.items)

    def result(self, outcomes: list[Outcome]) -> gpd.GeoDataFrame:
        """The validated EPSG:4326 GeoDataFrame for ``outcomes``."""
        from geotoolkit.frame import outcomes_frame

        return outcomes_frame(self.frame, outcomes, country=self.country)

    def close(self) -> None:
        """Release the gate and store this job opened (not those passed in)."""
        while self.closers:
            self.closers.pop()()


def prepare(
    df: pd.DataFrame,
    column: str | None = None,
    *,
    provider: Provider | str,
    api_key: str | None = None,
    user_agent: str | None = None,
    base_url: str | None = None,
    street: str | None = None,
    housenumber: str | None = None,
    city: str | None = None,
    county: str | None = None,
    state: str | None = None,
    postalcode: str | None = None,
    country: str | None = None,
    gate: str | Gate | None = None,
    rate: float | RatePolicy | None = None,
    concurrency: int = 4,
    max_attempts: int = 6,
    backoff: Backoff | None = None,
    timeout: httpx.Timeout | float | None = None,
    cache: Any = None,
    no_match_ttl_seconds: float | None = DEFAULT_NO_MATCH_TTL_SECONDS,
    progress: Any = "auto",
    max_wait_seconds: float | None = None,
    clock: Clock | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    rng: random.Random | None = None,
) -> FrameJob:
    """Check the arguments, build the queries and open the gate and store.

    Takes the arguments of :meth:`GeocodeAccessor.run`. Nothing is sent yet.
    """
    structured = {"street": street, "housenumber": housenumber, "city": city, "county": county,
                  "state": state, "postalcode": postalcode}
    plan = _plan(df, column, structured, country)
    store: ResultStore | None = open_store(cache, clock=clock,
                                           no_match_ttl_seconds=no_match_ttl_seconds)
    closers: list[Callable[[], None]] = []
    if store is not None and store is not cache and hasattr(store, "close"):
        closers.append(store.close)
    try:
        engine = build_engine(
            provider, api_key=api_key, user_agent=user_agent, base_url=base_url, gate=gate,
            rate=rate, concurrency=concurrency, max_attempts=max_attempts,
            backoff=backoff, timeout=timeout, clock=clock, progress=progress_sink(progress),
            store=store, max_wait_seconds=max_wait_seconds, transport=transport, rng=rng,
            rows=len(df))
    except BaseException:
        for close in closers:
            close()
        raise
    if gate is None or isinstance(gate, str):
        closers.append(engine.gate.close)
    # Under copy-on-write a shallow copy is a snapshot: later edits to df do not leak in.
    return FrameJob(df.copy(deep=False), plan.items, engine, plan.country, closers)


def geocode_frame(df: pd.DataFrame, column: str | None = None, **options: Any) -> gpd.GeoDataFrame:
    """Geocode ``df`` synchronously (also inside Jupyter); see :meth:`GeocodeAccessor.run`."""
    job = prepare(df, column, **options)
    try:
        outcomes = run_sync(job.run)
    finally:
        job.close()
    return job.result(outcomes)


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
        provider: Provider | str,
        api_key: str | None = None,
        user_agent: str | None = None,
        base_url: str | None = None,
        street: str | None = None,
        housenumber: str | None = None,
        city: str | None = None,
        county: str | None = None,
        state: str | None = None,
        postalcode: str | None = None,
        country: str | None = None,
        gate: str | Gate | None = None,
        rate: float | RatePolicy | None = None,
        concurrency: int = 4,
        max_attempts: int = 6,
        backoff: Backoff | None = None,
        timeout: httpx.Timeout | float | None = None,
        cache: Any = None,
        no_match_ttl_seconds: float | None = DEFAULT_NO_MATCH_TTL_SECONDS,
        progress: Any = "auto",
        max_wait_seconds: float | None = None,
        clock: Clock | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        rng: random.Random | None = None,
        background: bool = False,
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
        provider
            For example ``Nominatim(user_agent="my-app/1.0 (me@example.org)")``, or
            a registered name such as ``"photon"``. Its usage policy is checked
            first (``rows`` is the frame's length).
        api_key, user_agent, base_url
            With a provider name: its key (never shown or stored in clear), the
            user agent identifying your application, another instance's URL.
        street, housenumber, city, county, state, postalcode
            Column names for a structured query (instead of ``column``).
        country
            An ISO 3166-1 alpha-2 code: points outside that country are flagged,
            and reported as swapped when ``(lat, lon)`` falls inside. Or the name
            of a column holding a code (or English country name) per row: sent as
            the structured ``country`` field and used to validate each row.
        gate, rate, concurrency, max_attempts, backoff, timeout, max_wait_seconds
            As for :func:`geotoolkit.geocode`.
        cache
            Where settled rows persist, so a rerun (or a run after a crash) sends
            only the rest: ``None`` the SQLite file in the user cache dir,
            ``False`` none, ``"sqlite:///path"``, ``"postgresql://..."``,
            ``"memory://"`` or a store object.
        no_match_ttl_seconds
            No-matches are asked again after this long (default a week);
            matches never expire; failures are never cached.
        progress
            ``"auto"``, ``"widget"``, ``"text"``, ``"json"``, ``False`` or a callable
            taking progress events.
        clock, transport, rng
            Injection seams for tests.
        background
            Return at once a :class:`~geotoolkit.background.GeocodeJob` (``result()``,
            ``cancel()``, ``done()``, ``panel``) and geocode in a background thread,
            so you can keep working; ``job.result()`` is the GeoDataFrame.

        Raises
        ------
        KeyError
            A named column is missing (the message lists the available ones).
        ConfigurationError
            Bad arguments (unknown country code, both column kinds, ...).
        """
        options = {k: v for k, v in locals().items() if k not in ("self", "column", "background")}
        if background:
            from geotoolkit.background import start_in_background

            prepared = prepare(self._obj, column, **{**options, "progress": False})
            return start_in_background(prepared, progress)
        return geocode_frame(self._obj, column, **options)

    def dead_letters(self) -> pd.DataFrame:
        """The rows of a result that did not match or were flagged, ready for review."""
        from geotoolkit.frame import dead_letters

        return dead_letters(self._obj)
