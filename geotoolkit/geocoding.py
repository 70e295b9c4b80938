"""``geocode()``: the synchronous facade over the engine, and the shared set-up."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

import httpx

from geotoolkit._sync import run_sync
from geotoolkit.clock import Clock
from geotoolkit.engine import Engine, ResultStore
from geotoolkit.errors import ConfigurationError
from geotoolkit.gate import Gate, open_gate
from geotoolkit.policy import Backoff, RatePolicy
from geotoolkit.progress import ProgressSink
from geotoolkit.providers.base import Provider
from geotoolkit.results import Outcome, Query, query_from_value

__all__ = ["build_engine", "geocode", "rate_policy"]


def rate_policy(rate: float | RatePolicy | None, provider: Provider) -> RatePolicy:
    """``rate`` (requests/s for the whole fleet on the key), defaulting to the provider's limit."""
    if isinstance(rate, RatePolicy):
        return rate
    if rate is None:
        return RatePolicy(rate=provider.default_rate)
    if isinstance(rate, bool) or not isinstance(rate, int | float):
        raise ConfigurationError(f"rate must be requests per second, got {rate!r}")
    return RatePolicy(rate=float(rate))


def build_engine(
    provider: Provider,
    *,
    gate: str | Gate | None = None,
    rate: float | RatePolicy | None = None,
    concurrency: int = 4,
    max_attempts: int = 6,
    backoff: Backoff | None = None,
    timeout: httpx.Timeout | float | None = None,
    clock: Clock | None = None,
    progress: ProgressSink | None = None,
    store: ResultStore | None = None,
    max_wait_seconds: float | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    rng: random.Random | None = None,
) -> Engine:
    """Assemble an Engine from user-facing arguments (gate URL, rate number, ...)."""
    if not isinstance(provider, Provider):
        raise ConfigurationError(
            f"provider must be a geotoolkit provider such as Nominatim(...), got {provider!r}")
    return Engine(
        provider, gate=open_gate(gate, clock=clock), rate=rate_policy(rate, provider),
        backoff=backoff, concurrency=concurrency, max_attempts=max_attempts, clock=clock,
        timeout=timeout, transport=transport, progress=progress, store=store,
        max_wait_seconds=max_wait_seconds, rng=rng)


def geocode(addresses: Iterable[Any], *, provider: Provider, **options: Any) -> list[Outcome]:
    """Geocode ``addresses`` and return one outcome per address, in order.

    Works in a plain script and inside Jupyter's running event loop. Bad input
    (None, NaN, empty text, non-strings) becomes a ``Failure`` without a request.

    Parameters
    ----------
    addresses
        Free-text addresses, ``Query`` objects or mappings of structured fields.
    provider
        For example ``Nominatim(user_agent="my-app/1.0 (me@example.org)")``.
    **options
        ``gate`` (URL or Gate; default: the SQLite file in the user cache),
        ``rate`` (requests/s for the whole fleet on this key; default: the
        provider's published limit), ``concurrency`` (4), ``max_attempts`` (6),
        ``backoff``, ``timeout``, ``clock``, ``progress``, ``store``,
        ``max_wait_seconds`` (non-blocking mode), ``transport``.

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
    items: list[Query | str] = [query_from_value(a) for a in addresses]
    engine = build_engine(provider, **options)
    try:
        return run_sync(lambda: engine.run(items))
    finally:
        if options.get("gate") is None or isinstance(options.get("gate"), str):
            engine.gate.close()
