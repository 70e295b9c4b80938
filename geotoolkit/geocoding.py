"""``geocode()``: the synchronous facade over the engine, and the shared set-up."""

from __future__ import annotations

import inspect
import random
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import httpx

from geotoolkit._sync import run_sync
from geotoolkit.clock import Clock
from geotoolkit.engine import Engine, ResultStore
from geotoolkit.errors import ConfigurationError
from geotoolkit.gate import Gate, open_gate
from geotoolkit.policy import Backoff, RatePolicy
from geotoolkit.progress import ProgressSink
from geotoolkit.providers.base import Provider
from geotoolkit.providers.policies import check_usage_policy
from geotoolkit.providers.registry import get_provider
from geotoolkit.results import Outcome, Query, query_from_value

__all__ = ["build_engine", "gate_backend", "geocode", "rate_policy", "resolve_provider"]


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
    provider: Provider | str,
    *,
    api_key: str | None = None,
    user_agent: str | None = None,
    base_url: str | None = None,
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
    rows: int | None = None,
    cached: bool | None = None,
    daily_cap: int | None = None,
    cap_period: str | None = None,
) -> Engine:
    """Assemble an Engine from user-facing arguments (provider name, gate URL, rate, ...).

    ``provider`` is an instance or a registry name (``"opencage"``); with a name,
    ``api_key``, ``user_agent`` and ``base_url`` go to its constructor. Before
    anything is opened, ``check_usage_policy`` refuses a fleet (Redis/PostgreSQL
    gate) against a single-machine-only service such as public Nominatim, and
    warns about a large batch (``rows``) or no caching (``cached``; default:
    whether a ``store`` is given). ``daily_cap`` (requests per ``cap_period``,
    ``"day"`` or ``"month"``, for the whole fleet on the key) is passed to an
    Engine that counts caps; the registry's free-plan caps are in
    ``geotoolkit.providers.get_policy(name)``.
    """
    provider = resolve_provider(provider, api_key=api_key, user_agent=user_agent,
                                base_url=base_url)
    check_usage_policy(provider, rows=rows, gate_backend=gate_backend(gate),
                       cached=store is not None if cached is None else cached)
    extra = _engine_extras(daily_cap=daily_cap, cap_period=cap_period)
    return Engine(
        provider, gate=open_gate(gate, clock=clock), rate=rate_policy(rate, provider),
        backoff=backoff, concurrency=concurrency, max_attempts=max_attempts, clock=clock,
        timeout=timeout, transport=transport, progress=progress, store=store,
        max_wait_seconds=max_wait_seconds, rng=rng, **extra)


def _engine_extras(**options: Any) -> dict[str, Any]:
    """Optional Engine arguments that were given; refused if this Engine lacks them."""
    given = {k: v for k, v in options.items() if v is not None}
    accepted = inspect.signature(Engine).parameters
    missing = sorted(set(given) - set(accepted))
    if missing:
        raise ConfigurationError(f"{', '.join(missing)} not supported by this version's Engine")
    return given


def resolve_provider(provider: Provider | str, *, api_key: str | None = None,
                     user_agent: str | None = None, base_url: str | None = None) -> Provider:
    """A provider instance, or one built by name with the given options."""
    if isinstance(provider, str):
        return get_provider(provider, api_key=api_key, user_agent=user_agent, base_url=base_url)
    if not isinstance(provider, Provider):
        raise ConfigurationError(
            f"provider must be a geotoolkit provider such as Nominatim(...) or a name such as "
            f"'photon', got {provider!r}")
    given = [n for n, v in (("api_key", api_key), ("user_agent", user_agent),
                            ("base_url", base_url)) if v is not None]
    if given:
        raise ConfigurationError(
            f"{', '.join(given)} go to the provider's constructor when passing an instance")
    return provider


def gate_backend(gate: str | Gate | None) -> str:
    """The backend a gate argument selects, without opening it (``None``: sqlite)."""
    if gate is None:
        return "sqlite"
    if isinstance(gate, str):
        scheme = urlsplit(gate).scheme.lower()
        return {"rediss": "redis", "unix": "redis", "postgresql": "postgres"}.get(scheme, scheme)
    return str(getattr(gate, "backend", ""))


def geocode(addresses: Iterable[Any], *, provider: Provider | str, **options: Any) -> list[Outcome]:
    """Geocode ``addresses`` and return one outcome per address, in order.

    Works in a plain script and inside Jupyter's running event loop. Bad input
    (None, NaN, empty text, non-strings) becomes a ``Failure`` without a request.

    Parameters
    ----------
    addresses
        Free-text addresses, ``Query`` objects or mappings of structured fields.
    provider
        An instance, for example ``Nominatim(user_agent="my-app/1.0 (me@example.org)")``,
        or a registry name such as ``"opencage"`` (then pass ``api_key``,
        ``user_agent``, ``base_url`` as options).
    **options
        ``gate`` (URL or Gate; default: the SQLite file in the user cache),
        ``rate`` (requests/s for the whole fleet on this key; default: the
        provider's published limit), ``concurrency`` (4), ``max_attempts`` (6),
        ``backoff``, ``timeout``, ``clock``, ``progress`` (a callable taking
        progress events, or "auto", "widget", "text", "json"; default none), ``store``,
        ``max_wait_seconds`` (non-blocking mode), ``transport``, ``cached``,
        ``daily_cap``: see ``build_engine``. The provider's usage policy is
        checked first (``UsagePolicyWarning``, or ``ConfigurationError`` for a
        fleet against public Nominatim).

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
    options.setdefault("rows", len(items))
    if not callable(options.get("progress")):
        from geotoolkit.render import progress_sink

        options["progress"] = progress_sink(options.get("progress"))
    engine = build_engine(provider, **options)
    try:
        return run_sync(lambda: engine.run(items))
    finally:
        if options.get("gate") is None or isinstance(options.get("gate"), str):
            engine.gate.close()
