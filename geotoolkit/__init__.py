"""geotoolkit: rate-aware, fleet-polite batch geocoding for pandas and GeoPandas.

Coordinates are always ``lon, lat``, in that order.
"""

from geotoolkit import errors, providers
from geotoolkit.accessor import GeocodeAccessor  # registers df.geocode
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
from geotoolkit.gate import Gate, MemoryGate, SQLiteGate, open_gate
from geotoolkit.geocoding import geocode
from geotoolkit.policy import Backoff, RatePolicy, parse_retry_after
from geotoolkit.results import Failure, Match, NoMatch, Outcome, Query

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "Backoff",
    "Clock",
    "ConfigurationError",
    "ExportError",
    "Failure",
    "FakeClock",
    "Gate",
    "GateError",
    "GeocodeAccessor",
    "GeotoolkitError",
    "Match",
    "MemoryGate",
    "NoMatch",
    "Outcome",
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
    "errors",
    "geocode",
    "open_gate",
    "parse_retry_after",
    "providers",
]
