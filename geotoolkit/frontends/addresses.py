"""``geocode(addresses, ...)``: the synchronous front end for plain sequences of addresses."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from geotoolkit.display.sinks import progress_sink
from geotoolkit.engine import run_sync
from geotoolkit.errors import ConfigurationError
from geotoolkit.orchestration.job import gate_backend, settle
from geotoolkit.orchestration.options import GeocodeOptions, with_options_signature
from geotoolkit.providers.policies import check_usage_policy
from geotoolkit.results import Outcome, Query, query_from_value

__all__ = ["geocode"]


def geocode(addresses: Iterable[Any], *, progress: Any = None, **options: Any) -> list[Outcome]:
    """Geocode ``addresses`` and return one outcome per address, in order.

    Works in a plain script and inside Jupyter's running event loop. Bad input
    (None, NaN, empty text, non-strings) becomes a ``Failure`` without a request.

    Parameters
    ----------
    addresses
        Free-text addresses, ``Query`` objects or mappings of structured fields: a list,
        a column (``df["address"]``), any iterable. A DataFrame is refused (iterating it
        gives its column labels: use ``df.geocode.run(column, ...)``), and so is a single
        string or mapping (it would be geocoded piece by piece: pass ``[address]``).
    progress
        A callable taking progress events, or "auto", "widget", "text", "json";
        default none.
    **options
        The options of :class:`~geotoolkit.orchestration.options.GeocodeOptions`
        (``provider`` is required). Unlike ``df.geocode.run()``, nothing is cached
        unless ``cache`` is given. The provider's usage policy is checked first
        (``UsagePolicyWarning``, or ``ConfigurationError`` for a fleet against
        public Nominatim).

    Examples
    --------
    >>> from geotoolkit.providers import Nominatim
    >>> from geotoolkit.testing import ProviderSimulator
    >>> with ProviderSimulator() as sim:
    ...     p = Nominatim(sim.url, user_agent="docs-example/1.0")
    ...     out = geocode(["Städtle 38, 9490 Vaduz", None], provider=p, gate="memory://", rate=50)
    >>> [o.status for o in out]
    ['matched', 'failed']
    """
    _check_addresses(addresses)
    options.setdefault("cache", False)
    settings = GeocodeOptions.from_env(**options)
    items: list[Query | str] = [query_from_value(a) for a in addresses]
    for provider in settings.providers:
        check_usage_policy(provider, rows=len(items), gate_backend=gate_backend(settings.gate),
                           cached=settings.cache is not False, rate=settings.rate_policy)
    sink = progress_sink(progress)
    return run_sync(lambda: settle(items, settings, sink))


def _check_addresses(addresses: object) -> None:
    """Refuse what iterates to something other than its addresses."""
    if isinstance(addresses, str | bytes | Mapping):
        kind = "structured address" if isinstance(addresses, Mapping) else "string"
        raise ConfigurationError(
            f"geocode() takes a sequence of addresses, got one {kind}: pass [{addresses!r}]")
    if hasattr(addresses, "columns") and hasattr(addresses, "iloc"):  # a (Geo)DataFrame
        raise ConfigurationError(
            "geocode() takes a sequence of addresses, not a DataFrame (iterating it gives "
            "its column labels): use df.geocode.run(column, ...) for the whole frame, or "
            "geocode(df[column], ...) for the outcomes of one column")


with_options_signature(geocode)
