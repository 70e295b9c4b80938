"""The provider policy registry, kept as data, and the usage-policy check.

Each entry states what a provider's *public service* publishes: its rate, the
free plan's caps, whether a key or a real User-Agent is required, and the terms
that change how a batch may run. Values follow the public plans as best known
when written; plans change, so every number can be overridden (``rate=``) and
the ``terms_url`` is the authority.

A policy applies to a provider instance only when it talks to one of the
policy's ``hosts``: a self-hosted Nominatim, Photon or Pelias is yours, with no
limits but the ones you set.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from geotoolkit.errors import ConfigurationError
from geotoolkit.policy import RatePolicy

__all__ = [
    "LARGE_BATCH_ROWS",
    "POLICIES",
    "ProviderPolicy",
    "UsagePolicyWarning",
    "check_usage_policy",
    "get_policy",
    "policy_for",
]

#: A batch larger than this against a service that tolerates bulk jobs only
#: from a single machine gets a ``UsagePolicyWarning`` first.
LARGE_BATCH_ROWS = 1000

_FLEET_BACKENDS = frozenset({"redis", "postgres", "postgresql"})


class UsagePolicyWarning(UserWarning):
    """A batch is about to bend a provider's published usage policy."""


class _Addressed(Protocol):
    """What the registry needs to know of a provider: its name and host."""

    @property
    def name(self) -> str: ...

    @property
    def host(self) -> str: ...


@dataclass(frozen=True)
class ProviderPolicy:
    """What a provider's public service publishes about its use.

    Attributes
    ----------
    name
        The provider's registry name (``get_provider(name)``).
    rate_per_second
        Requests per second for the whole application on one key; ``None``
        when nothing is published and no conservative default is chosen.
    rate_is_absolute
        The service allows no more than ``rate_per_second`` to anyone (public Nominatim's
        "absolute maximum"), so a faster rate is refused; elsewhere a paid plan may allow
        more, and ``rate=`` is taken as given.
    daily_cap, monthly_cap
        Requests per day / month on the free plan, after which the service
        refuses (``None``: no such cap, or pay-as-you-go).
    cap_tz
        The time zone (IANA) whose midnight starts the service's quota day and month,
        where its documentation says so (Google Maps Platform: Pacific time; OpenCage:
        UTC); UTC where it says nothing found. Count a cap in it:
        ``Cap(n, tz=policy.cap_tz)``.
    key_required, user_agent_required
        Whether requests need an API key / a User-Agent naming the application.
    caching_required
        Whether the terms require results to be cached on your side.
    single_machine_bulk_only
        Bulk jobs are tolerated only from a single machine (no fleets).
    terms_url
        Where the authoritative terms live.
    notes
        Terms that matter, in one or two sentences.
    hosts
        The public hosts this policy describes.
    """

    name: str
    rate_per_second: float | None
    rate_is_absolute: bool = False
    daily_cap: int | None = None
    monthly_cap: int | None = None
    cap_tz: str = "UTC"
    key_required: bool = False
    user_agent_required: bool = False
    caching_required: bool = False
    single_machine_bulk_only: bool = False
    terms_url: str = ""
    notes: str = ""
    hosts: tuple[str, ...] = ()


_POLICIES = (
    ProviderPolicy(
        "nominatim", 1.0, rate_is_absolute=True, user_agent_required=True,
        caching_required=True, single_machine_bulk_only=True,
        terms_url="https://operations.osmfoundation.org/policies/nominatim/",
        notes="An absolute maximum of 1 request/s for the whole application; a User-Agent "
              "identifying it; results must be cached; bulk geocoding only from a single "
              "machine, otherwise run your own instance.",
        hosts=("nominatim.openstreetmap.org",)),
    ProviderPolicy(
        "photon", 1.0, terms_url="https://photon.komoot.io/",
        notes="komoot's public instance is free for fair use and throttles extensive use; no "
              "number is published, 1 request/s is geotoolkit's conservative default. "
              "Self-host Photon for bulk work.",
        hosts=("photon.komoot.io",)),
    ProviderPolicy(
        "pelias", 10.0, key_required=True, terms_url="https://geocode.earth/terms",
        notes="Pelias is open source and usually self-hosted (no limits but yours). The "
              "hosted Geocode Earth service needs an api_key; its rate depends on the plan.",
        hosts=("api.geocode.earth",)),
    ProviderPolicy(
        "locationiq", 2.0, daily_cap=5000, key_required=True,
        terms_url="https://locationiq.com/tos",
        notes="Free plan: 5,000 requests/day, 2 requests/s (60/minute). Nominatim-compatible "
              "API; 429 'Rate Limited Day' means the daily quota is spent.",
        hosts=("us1.locationiq.com", "eu1.locationiq.com")),
    ProviderPolicy(
        "opencage", 1.0, daily_cap=2500, key_required=True,
        terms_url="https://opencagedata.com/terms",
        notes="Free trial: 2,500 requests/day at 1 request/s; paid plans are faster. Results "
              "may be stored (open data); 402 means the quota is spent.",
        hosts=("api.opencagedata.com",)),
    ProviderPolicy(
        "google", 50.0, key_required=True, cap_tz="America/Los_Angeles",
        terms_url="https://cloud.google.com/maps-platform/terms",
        notes="3,000 queries/minute per project; billed per request after the monthly free "
              "usage; daily quotas (set in the Cloud console) reset at midnight Pacific time. "
              "Caching is restricted (coordinates at most 30 days; place IDs may be "
              "kept): check the terms before storing results.",
        hosts=("maps.googleapis.com",)),
    ProviderPolicy(
        "mapbox", 1000 / 60, monthly_cap=100_000, key_required=True,
        terms_url="https://www.mapbox.com/legal/tos",
        notes="1,000 requests/minute; 100,000 free temporary requests/month. Temporary results "
              "must not be stored: use permanent=True (a paid feature) to keep them.",
        hosts=("api.mapbox.com",)),
    ProviderPolicy(
        "here", 5.0, monthly_cap=30_000, key_required=True,
        terms_url="https://legal.here.com/en-gb/terms",
        notes="Base plan: 5 requests/s and about 30,000 free transactions/month; storing "
              "results is restricted by the terms.",
        hosts=("geocode.search.hereapi.com",)),
    ProviderPolicy(
        "arcgis", None, key_required=True,
        terms_url="https://www.esri.com/en-us/legal/terms/full-master-agreement",
        notes="A token (API key) is required here. No per-second rate is published (the service "
              "throttles); results may be stored only with for_storage=True, which uses credits.",
        hosts=("geocode-api.arcgis.com", "geocode.arcgis.com")),
    ProviderPolicy(
        "geonorge", 5.0, terms_url="https://www.kartverket.no/api-og-data/vilkar-for-bruk",
        notes="Kartverket's open address API (Norway only), no key, CC BY 4.0. No rate is "
              "published: 5 requests/s is geotoolkit's conservative default.",
        hosts=("ws.geonorge.no",)),
    ProviderPolicy(
        "census", 5.0,
        terms_url="https://geocoding.geo.census.gov/geocoder/Geocoding_Services_API.html",
        notes="US addresses only, free, no key. No rate is published: 5 requests/s is "
              "geotoolkit's conservative default; use CensusBatch (10,000 records per file) "
              "for volume.",
        hosts=("geocoding.geo.census.gov",)),
)

#: Every known policy by provider name (read-only).
POLICIES: Mapping[str, ProviderPolicy] = MappingProxyType({p.name: p for p in _POLICIES})


def get_policy(name: str) -> ProviderPolicy:
    """The policy registered for a provider name.

    >>> get_policy("nominatim").rate_per_second
    1.0
    """
    try:
        return POLICIES[name.strip().lower()]
    except KeyError:
        raise ConfigurationError(
            f"no policy for provider {name!r}; known: {', '.join(sorted(POLICIES))}") from None


def policy_for(provider: _Addressed) -> ProviderPolicy | None:
    """The policy of the public service ``provider`` talks to, or ``None`` if self-hosted."""
    policy = POLICIES.get(provider.name)
    if policy is None or provider.host.lower() not in policy.hosts:
        return None
    return policy


def check_usage_policy(
    provider: _Addressed, *, rows: int | None = None, gate_backend: str | None = None,
    cached: bool = True, rate: RatePolicy | None = None,
) -> None:
    """Refuse or warn about a batch that would break the provider's published policy.

    Refuses (``ConfigurationError``) a fleet (a Redis or PostgreSQL gate: many
    machines) against a service that tolerates bulk jobs only from a single
    machine, and a rate over one the service allows to nobody
    (``ProviderPolicy.rate_is_absolute``). Warns (``UsagePolicyWarning``) when such a
    service gets more than ``LARGE_BATCH_ROWS`` rows, when its terms require caching and
    the batch does not cache, and when ``rows`` exceeds the free plan's daily cap.

    Parameters
    ----------
    provider
        The provider instance (its ``name`` and ``host`` select the policy).
    rows
        The number of rows in the batch, if known.
    gate_backend
        The gate's backend name (``memory``, ``sqlite``, ``redis``, ``postgres``).
    cached
        Whether settled results are stored and reused.
    rate
        The run's rate, if one was given (``RatePolicy(rate=None)``: discover it); else
        the provider's own (``default_rate``) is the one the batch runs at.
    """
    policy = policy_for(provider)
    if policy is None:
        return
    if policy.rate_is_absolute and policy.rate_per_second is not None:
        _absolute_rate(policy, provider, rate)
    if policy.single_machine_bulk_only:
        _single_machine(policy, provider.host, rows, gate_backend)
    if policy.caching_required and not cached:
        _warn(f"{provider.host} requires results to be cached on your side: give a cache "
              "(cache=None, the default SQLite file, or a URL; on the command line, leave "
              "out --cache none) so repeated addresses are not sent again")
    if rows is not None and policy.daily_cap is not None and rows > policy.daily_cap:
        _warn(f"{rows} rows exceed {policy.name}'s free daily cap of {policy.daily_cap}: "
              "the batch will stop with QuotaExceededError unless your plan allows more")


def _absolute_rate(policy: ProviderPolicy, provider: _Addressed, rate: RatePolicy | None) -> None:
    allowed = policy.rate_per_second
    given = rate.rate if rate is not None else getattr(provider, "default_rate", None)
    if allowed is None or (rate is None and given is None) or (given is not None
                                                              and given <= allowed):
        return
    shown = ("none, so the fleet would discover one, climbing past it" if given is None
             else "unlimited" if math.isinf(given) else f"{given:g} requests/s")
    raise ConfigurationError(
        f"{provider.host} allows {allowed:g} request/s at most for the whole application, "
        f"and the rate given is {shown}: leave out rate (--rate) to run at its rate, or run "
        f"your own instance (terms: {policy.terms_url})")


def _single_machine(policy: ProviderPolicy, host: str, rows: int | None,
                    gate_backend: str | None) -> None:
    backend = (gate_backend or "").split(" ", 1)[0].lower()
    if backend in _FLEET_BACKENDS:
        raise ConfigurationError(
            f"{host} tolerates bulk geocoding only from a single machine, and a {backend} "
            f"gate means a fleet: run one machine (sqlite/memory gate), your own instance, "
            f"or another provider (terms: {policy.terms_url})")
    if rows is not None and rows > LARGE_BATCH_ROWS:
        _warn(f"{rows} rows against {host}: its policy ({policy.terms_url}) tolerates bulk "
              f"jobs from a single machine at {policy.rate_per_second:g} request/s at most; "
              "consider your own instance")


def _warn(message: str) -> None:
    """Warn, attributing the warning to the first caller outside geotoolkit."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UsagePolicyWarning, stacklevel=level)
