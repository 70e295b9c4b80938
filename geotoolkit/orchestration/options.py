"""One configuration for every front end: :class:`GeocodeOptions`.

The accessor (``df.geocode.run``), :func:`geotoolkit.geocode`, the command line, the
dask front end and background jobs all build one ``GeocodeOptions`` at their edge
and hand it on; nothing downstream re-declares an option. It extends the engine's
:class:`~geotoolkit.engine.EngineSettings` (pacing, retries, deadlines) with what a
run opens: the provider (resolved once, here), the gate and the result cache.
Everything is validated when the object is built, before any file, socket or
connection is opened.

Environment variables are read in one place, :meth:`GeocodeOptions.from_env`:
``GEOTOOLKIT_GATE_URL`` and ``GEOTOOLKIT_CACHE_URL`` supply the gate and the cache
when they are not given, so a password never has to be typed into a notebook or
onto a command line.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import InitVar, dataclass
from pathlib import PurePath
from typing import Any

from geotoolkit.engine.settings import EngineSettings, _seconds, option, option_docs
from geotoolkit.errors import ConfigurationError
from geotoolkit.gate import Gate
from geotoolkit.providers.base import Provider
from geotoolkit.providers.registry import resolve_provider
from geotoolkit.redact import redact
from geotoolkit.results import PRECISIONS, Precision
from geotoolkit.store import DEFAULT_NO_MATCH_TTL_SECONDS, unknown_cache_url
from geotoolkit.urls import backend_of, check_userinfo

__all__ = ["CACHE_URL_ENV", "GATE_URL_ENV", "GeocodeOptions", "option_names", "with_options_signature"]

#: The environment variables :meth:`GeocodeOptions.from_env` reads.
GATE_URL_ENV = "GEOTOOLKIT_GATE_URL"
CACHE_URL_ENV = "GEOTOOLKIT_CACHE_URL"

_GATE_METHODS = ("reserve", "pause", "state", "record", "stats", "close")
_STORE_METHODS = ("get_many", "put")


_FALLBACK_STATUSES = frozenset({"no_match", "too_coarse", "failed"})


def _resolve(provider: object, *, api_key: str | None, user_agent: str | None,
             base_url: str | None) -> Provider | tuple[Provider, ...]:
    """One provider, or a chain: names in a chain take only ``user_agent`` (give instances
    for anything more, so a key or a URL never goes to the wrong provider)."""
    if isinstance(provider, str) or not isinstance(provider, Sequence):
        return resolve_provider(provider, api_key=api_key, user_agent=user_agent,  # type: ignore[arg-type]
                                base_url=base_url)
    chain = list(provider)
    if not chain:
        raise ConfigurationError("provider: an empty chain")
    if len(chain) == 1:
        return _resolve(chain[0], api_key=api_key, user_agent=user_agent, base_url=base_url)
    if api_key is not None or base_url is not None:
        raise ConfigurationError("with a provider chain, give each provider with its own api_key "
                                 "and base_url (instances, or get_provider(name, ...))")
    return tuple(resolve_provider(p, user_agent=user_agent if isinstance(p, str) else None)
                 for p in chain)


def _check_gate(gate: object) -> None:
    if gate is None:
        return
    if isinstance(gate, str):
        check_userinfo(gate, "gate")
        backend = backend_of(gate)
        if backend is None:
            raise ConfigurationError(
                f"unknown gate URL {redact(gate)!r}: use memory://, sqlite:///path, "
                "redis://host:port/db or postgresql://...")
        return
    if not all(callable(getattr(gate, m, None)) for m in _GATE_METHODS):
        raise ConfigurationError(f"gate must be a URL or a Gate, got {type(gate).__name__}")


def _fallback_statuses(value: object) -> tuple[str, ...] | None:
    """``fallback_on`` as a tuple of statuses; ``None`` when it is not one status or a
    collection of them (``None`` itself, a number, a status no row passes on with)."""
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Iterable):
        return None
    statuses = tuple(value)
    usable = all(isinstance(s, str) and s in _FALLBACK_STATUSES for s in statuses)
    return statuses if usable else None


def _check_cache(cache: object) -> None:
    if cache is None or cache is False or isinstance(cache, os.PathLike | PurePath):
        return
    if isinstance(cache, str):
        if cache.strip().lower() == "none":
            return
        check_userinfo(cache, "cache")
        if backend_of(cache) not in ("memory", "sqlite", "postgres"):
            raise unknown_cache_url(cache)
        return
    if cache is True or not all(hasattr(cache, m) for m in _STORE_METHODS):
        raise ConfigurationError(
            f"cache must be a URL, a path, None or False, got {type(cache).__name__}")


@dataclass(frozen=True, kw_only=True)
class GeocodeOptions(EngineSettings):
    """Everything a geocoding run needs besides its input; validated when built.

    Every front end takes exactly these options as keyword arguments, so
    ``df.geocode.run(provider=p, rate=2)`` and ``geocode(addresses, provider=p, rate=2)``
    mean the same. The API key lives only inside the resolved provider (never in a
    repr, an error or a file).

    Examples
    --------
    >>> options = GeocodeOptions(provider="photon", rate=2, gate="memory://")
    >>> options.provider
    Photon('https://photon.komoot.io')
    >>> GeocodeOptions(provider="photon", gate="ftp://nowhere")
    Traceback (most recent call last):
    ...
    geotoolkit.errors.ConfigurationError: unknown gate URL 'ftp://nowhere': use memory://, \
sqlite:///path, redis://host:port/db or postgresql://...
    """

    provider: Provider | str | Sequence[Provider | str] = option(
        cli={"metavar": "NAME"},
        doc="A provider instance, e.g. Nominatim(user_agent='my-app/1.0 (me@example.org)'), or a "
            "registered name such as 'opencage' (then give api_key, user_agent, base_url); or a "
            "list of them, a fallback chain: rows the first one leaves (see fallback_on) go to "
            "the next, each under its own gate key, rate and policy.")
    api_key: InitVar[str | None] = option(
        None, doc="With a provider name: its API key (never shown, logged or stored in clear).")
    user_agent: InitVar[str | None] = option(
        None, doc="With a provider name: the User-Agent naming your application and a contact.")
    base_url: InitVar[str | None] = option(
        None, doc="With a provider name: a self-hosted or compatible instance.")
    gate: str | Gate | None = option(
        None, cli={"metavar": "URL"},
        doc="The fleet gate shared by every worker on the key: sqlite:///path, redis://..., "
            "postgresql://..., memory:// or a Gate; None: the SQLite file in your cache dir "
            f"(or ${GATE_URL_ENV} through from_env).")
    cache: Any = option(
        None, cli={"metavar": "URL|none"},
        doc="Where settled rows persist, so a rerun (or a run after a crash) sends only the rest: "
            "sqlite:///path, postgresql://..., memory://, a path, a store object, False for none; "
            f"None: the SQLite file in your cache dir (or ${CACHE_URL_ENV} through from_env).")
    no_match_ttl_seconds: float | None = option(
        DEFAULT_NO_MATCH_TTL_SECONDS, cli={"type": float, "metavar": "S"},
        doc="No-matches are asked again after this long (default a week); matches never "
            "expire; failures are never cached.")
    min_precision: Precision | None = option(
        None, cli={"choices": PRECISIONS[:-1], "metavar": "LEVEL"},
        doc="Matches coarser than this (address, interpolated, street, postcode, locality, "
            "region, country, feature) become dead letters with status too_coarse, keeping their "
            "point in their own columns; a feature (a river, lake, park, peak: no part of an "
            "address) is coarser than a country, a match of unknown precision coarser than "
            "all; default: keep all.")
    full_results: bool = option(
        False, cli={"action": "store_true"},
        doc="Add the provider's structured answer as geocode_* columns: its place id, the "
            "address components and the bounding box.")
    fallback_on: tuple[str, ...] = option(
        ("no_match", "too_coarse"),
        doc="With a provider chain: which rows go on to the next provider (of no_match, "
            "too_coarse, failed).")
    overwrite_columns: bool = option(
        False, cli={"action": "store_true"},
        doc="Replace the frame's own lon, lat, geometry or geocode_* columns (the names a "
            "result adds) with the geocoded ones; without it such a frame is refused (nothing "
            "of yours is overwritten in silence).")

    def __post_init__(self, api_key: str | None, user_agent: str | None,
                      base_url: str | None) -> None:
        super().__post_init__()
        object.__setattr__(self, "provider",
                           _resolve(self.provider, api_key=api_key, user_agent=user_agent,
                                    base_url=base_url))
        if self.min_precision is not None and self.min_precision not in PRECISIONS[:-1]:
            raise ConfigurationError(f"min_precision must be one of {', '.join(PRECISIONS[:-1])}, "
                                     f"got {self.min_precision!r}")
        _seconds("no_match_ttl_seconds", self.no_match_ttl_seconds, optional=True)
        if not isinstance(self.full_results, bool):
            raise ConfigurationError("full_results must be True or False")
        fallback = _fallback_statuses(self.fallback_on)
        if fallback is None:
            raise ConfigurationError(f"fallback_on takes {', '.join(sorted(_FALLBACK_STATUSES))}, "
                                     f"or a list of them (() for none), got {self.fallback_on!r}")
        object.__setattr__(self, "fallback_on", fallback)
        if len(self.providers) > 1 and self.rate is not None:
            raise ConfigurationError(
                "rate= with a provider chain is ambiguous: each provider runs at its own published "
                "or default rate; give a rate to a provider itself, e.g. Nominatim(..., rate=2) "
                "(on the command line, leave --rate out)")
        _check_gate(self.gate)
        _check_cache(self.cache)
        if not isinstance(self.overwrite_columns, bool):
            raise ConfigurationError("overwrite_columns must be True or False")

    def __repr__(self) -> str:
        shown = ", ".join(f"{f}={getattr(self, f)!r}" for f in _shown_fields(self))
        return redact(f"GeocodeOptions({shown})")

    @property
    def providers(self) -> tuple[Provider, ...]:
        """The providers in order: one, or the fallback chain."""
        value = self.provider
        return value if isinstance(value, tuple) else (value,)

    @property
    def resolved_provider(self) -> Provider:
        """The (first) provider instance."""
        return self.providers[0]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: Any) -> GeocodeOptions:
        """Build options, taking the gate and cache URLs from the environment when not given.

        ``$GEOTOOLKIT_GATE_URL`` fills ``gate`` and ``$GEOTOOLKIT_CACHE_URL`` fills
        ``cache`` when they are absent or ``None``.
        """
        _check_names(options)
        env = os.environ if environ is None else environ
        for name, var in (("gate", GATE_URL_ENV), ("cache", CACHE_URL_ENV)):
            if options.get(name) is None and env.get(var, "").strip():
                options[name] = env[var].strip()
        return cls(**options)


GeocodeOptions.__doc__ = option_docs(GeocodeOptions)


def _shown_fields(options: GeocodeOptions) -> list[str]:
    """The fields that differ from their defaults (the provider always), seams hidden."""
    shown = []
    for f in dataclasses.fields(options):
        if f.metadata.get("seam"):
            continue
        value = getattr(options, f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING \
            else f.default
        if f.name == "provider" or value != default:
            shown.append(f.name)
    return shown


def _check_names(options: Mapping[str, Any]) -> None:
    """Refuse an unknown option by name, suggesting the closest known one."""
    import difflib

    known = option_names()
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigurationError(f"unknown option {name!r}{hint}; the options are "
                                     f"{', '.join(known)}")


def option_names() -> tuple[str, ...]:
    """Every keyword :class:`GeocodeOptions` accepts, in signature order."""
    import inspect

    return tuple(inspect.signature(GeocodeOptions).parameters)


def with_options_signature(func: Any, *, columns: bool = False) -> Any:
    """Give ``func`` (which takes ``**options``) a signature listing every option (and, with
    ``columns``, the structured column arguments), so ``help()``, IDEs and notebook tab
    completion show them all while the options stay declared once, here.
    """
    import inspect

    from geotoolkit.results import STRUCTURED_FIELDS

    own = inspect.signature(func)
    params = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
    keyword = inspect.Parameter.KEYWORD_ONLY
    if columns:
        params += [inspect.Parameter(name, keyword, default=None, annotation="str | None")
                   for name in STRUCTURED_FIELDS]
    taken = {p.name for p in params}
    params += [p.replace(kind=keyword)
               for p in inspect.signature(GeocodeOptions).parameters.values() if p.name not in taken]
    func.__signature__ = own.replace(parameters=params)
    return func
