"""geotoolkit: rate-aware, fleet-polite batch geocoding for pandas and GeoPandas.

Coordinates are always ``lon, lat``, in that order.

Importing geotoolkit registers the ``df.geocode`` accessor (at once when pandas is
loaded, otherwise as soon as it is). Everything else loads lazily: importing the pure
core (``geotoolkit.policy``, ``geotoolkit.errors``, ``geotoolkit.results``, ...) loads
no third-party module.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the module that defines it (loaded on first use).
_EXPORTS = {
    "AuthenticationError": "geotoolkit.errors",
    "ConfigurationError": "geotoolkit.errors",
    "ExportError": "geotoolkit.errors",
    "GateError": "geotoolkit.errors",
    "GeotoolkitError": "geotoolkit.errors",
    "ProviderError": "geotoolkit.errors",
    "ProviderResponseError": "geotoolkit.errors",
    "ProviderUnavailableError": "geotoolkit.errors",
    "QueryError": "geotoolkit.errors",
    "QuotaExceededError": "geotoolkit.errors",
    "RateLimitError": "geotoolkit.errors",
    "Clock": "geotoolkit.clock",
    "FakeClock": "geotoolkit.clock",
    "SystemClock": "geotoolkit.clock",
    "Backoff": "geotoolkit.policy",
    "RatePolicy": "geotoolkit.policy",
    "parse_rate_limit_reset": "geotoolkit.policy",
    "parse_retry_after": "geotoolkit.policy",
    "Failure": "geotoolkit.results",
    "Match": "geotoolkit.results",
    "NoMatch": "geotoolkit.results",
    "Outcome": "geotoolkit.results",
    "Place": "geotoolkit.results",
    "Query": "geotoolkit.results",
    "Cap": "geotoolkit.gate",
    "Gate": "geotoolkit.gate",
    "MemoryGate": "geotoolkit.gate",
    "SQLiteGate": "geotoolkit.gate",
    "open_gate": "geotoolkit.gate",
    "GeocodeOptions": "geotoolkit.orchestration.options",
    "GeocodeAccessor": "geotoolkit.frontends.accessor",
    "geocode": "geotoolkit.frontends.addresses",
    "fleet_panel": "geotoolkit.frontends.fleet_watch",
    "write_results": "geotoolkit.export",
}
_SUBMODULES = ("errors", "providers")
#: Front-end modules reachable as attributes: ``from geotoolkit import dask as gdask``.
_ALIASES = {"dask": "geotoolkit.frontends.dask", "orchestrators": "geotoolkit.frontends.orchestrators"}

__all__ = [
    "AuthenticationError",
    "Backoff",
    "Cap",
    "Clock",
    "ConfigurationError",
    "ExportError",
    "Failure",
    "FakeClock",
    "Gate",
    "GateError",
    "GeocodeAccessor",
    "GeocodeOptions",
    "GeotoolkitError",
    "Match",
    "MemoryGate",
    "NoMatch",
    "Outcome",
    "Place",
    "ProviderError",
    "ProviderResponseError",
    "ProviderUnavailableError",
    "Query",
    "QueryError",
    "QuotaExceededError",
    "RateLimitError",
    "RatePolicy",
    "SQLiteGate",
    "SystemClock",
    "__version__",
    "dask",
    "errors",
    "fleet_panel",
    "geocode",
    "open_gate",
    "orchestrators",
    "parse_rate_limit_reset",
    "parse_retry_after",
    "providers",
    "write_results",
]

if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    from geotoolkit import errors, providers
    from geotoolkit.clock import Clock, FakeClock, SystemClock
    from geotoolkit.errors import (
        AuthenticationError,
        ConfigurationError,
        ExportError,
        GateError,
        GeotoolkitError,
        ProviderError,
        ProviderResponseError,
        ProviderUnavailableError,
        QueryError,
        QuotaExceededError,
        RateLimitError,
    )
    from geotoolkit.export import write_results
    from geotoolkit.frontends.accessor import GeocodeAccessor
    from geotoolkit.frontends.addresses import geocode
    from geotoolkit.frontends.fleet_watch import fleet_panel
    from geotoolkit.gate import Cap, Gate, MemoryGate, SQLiteGate, open_gate
    from geotoolkit.orchestration.options import GeocodeOptions
    from geotoolkit.policy import Backoff, RatePolicy, parse_rate_limit_reset, parse_retry_after
    from geotoolkit.results import Failure, Match, NoMatch, Outcome, Place, Query


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"geotoolkit.{name}")
    if name in _ALIASES:
        return importlib.import_module(_ALIASES[name])
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'geotoolkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# -- registering df.geocode -----------------------------------------------------------------


def _register_accessor() -> None:
    importlib.import_module("geotoolkit.frontends.accessor")  # registers df.geocode


class _AfterPandas(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Registers the accessor right after pandas is imported (when geotoolkit came first)."""

    def __init__(self) -> None:
        self._loader: Any = None

    def find_spec(self, name: str, path: Any, target: ModuleType | None = None) -> Any:
        if name != "pandas":
            return None
        sys.meta_path.remove(self)  # one shot; find the real spec without us
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        self._loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        created: ModuleType | None = self._loader.create_module(spec)
        return created

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__.loader = self._loader  # type: ignore[union-attr]
        module.__loader__ = self._loader
        self._loader.exec_module(module)
        _register_accessor()


if "pandas" in sys.modules:
    _register_accessor()
elif not any(isinstance(f, _AfterPandas) for f in sys.meta_path):
    sys.meta_path.insert(0, _AfterPandas())
