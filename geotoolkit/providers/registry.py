"""Providers by name: ``get_provider("opencage", api_key=...)``."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, cast

from geotoolkit.errors import ConfigurationError
from geotoolkit.providers.arcgis import ArcGIS
from geotoolkit.providers.base import ForwardProvider, Provider
from geotoolkit.providers.census import Census
from geotoolkit.providers.geonorge import Geonorge
from geotoolkit.providers.google import Google
from geotoolkit.providers.here import Here
from geotoolkit.providers.locationiq import LocationIQ
from geotoolkit.providers.mapbox import Mapbox
from geotoolkit.providers.nominatim import Nominatim
from geotoolkit.providers.opencage import OpenCage
from geotoolkit.providers.pelias import Pelias
from geotoolkit.providers.photon import Photon

__all__ = ["PROVIDERS", "get_provider", "resolve_provider"]

#: Every provider class by its registry name (read-only).
PROVIDERS: Mapping[str, type[Any]] = MappingProxyType({
    cls.name: cls for cls in (Nominatim, Photon, Pelias, LocationIQ, OpenCage, Google, Mapbox,
                              Here, ArcGIS, Geonorge, Census)})


#: The command line's flag for a constructor argument a provider requires.
_FLAGS = {"user_agent": '--user-agent "my-app/1.0 (me@example.org)"'}


def get_provider(name: str, **options: Any) -> Provider:
    """A provider instance by name; ``None`` options are dropped (their default applies).

    Parameters
    ----------
    name
        One of ``PROVIDERS`` (case-insensitive), for example ``"opencage"``.
    **options
        Passed to the provider's constructor: ``api_key``, ``user_agent``,
        ``base_url``, ``rate`` and the provider's own options.

    Raises
    ------
    ConfigurationError
        An unknown name (the message lists the known ones), an option the
        provider does not take, or a missing key or user agent it requires.

    Examples
    --------
    >>> get_provider("photon").host
    'photon.komoot.io'
    >>> get_provider("opencage")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    geotoolkit.errors.ConfigurationError: opencage requires an api_key (on the command line: ...
    """
    cls = PROVIDERS.get(name.strip().lower()) if isinstance(name, str) else None
    if cls is None:
        raise ConfigurationError(
            f"unknown provider {name!r}; known: {', '.join(sorted(PROVIDERS))}")
    options = {k: v for k, v in options.items() if v is not None}
    accepted = inspect.signature(cls).parameters
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigurationError(
            f"{cls.name} does not take {', '.join(unknown)}; it takes "
            f"{', '.join(p for p in accepted)}")
    missing = [n for n, p in accepted.items() if p.default is p.empty and n not in options
               and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if missing:
        flags = ", ".join(_FLAGS[n] for n in missing if n in _FLAGS)
        hint = f" (on the command line: {flags})" if flags else ""
        raise ConfigurationError(f"{cls.name} requires {', '.join(missing)}{hint}")
    provider: Provider = cls(**options)
    return provider


def resolve_provider(provider: Provider | ForwardProvider | str, *, api_key: str | None = None,
                     user_agent: str | None = None, base_url: str | None = None) -> Provider:
    """A provider instance passed through, or one built by name with the given options.

    ``api_key``, ``user_agent`` and ``base_url`` only go with a name: an instance
    already has its own (passing them too is refused, so nothing is silently ignored).
    An instance needs only the members of ``ForwardProvider`` (one written before
    reverse geocoding and batches): read its capabilities with ``can_reverse()`` and
    ``batch_policy()``, which say no for one that does not declare them.

    >>> resolve_provider("photon", base_url="http://127.0.0.1:2322").host
    '127.0.0.1:2322'
    """
    if isinstance(provider, str):
        return get_provider(provider, api_key=api_key, user_agent=user_agent, base_url=base_url)
    if not isinstance(provider, ForwardProvider):
        raise ConfigurationError(
            f"provider must be a geotoolkit provider such as Nominatim(...) or a name such as "
            f"'photon', got {type(provider).__name__}")
    given = [n for n, v in (("api_key", api_key), ("user_agent", user_agent),
                            ("base_url", base_url)) if v is not None]
    if given:
        raise ConfigurationError(
            f"{', '.join(given)} go to the provider's constructor when passing an instance")
    return cast(Provider, provider)
