"""The geotoolkit exception tree.

Per-row outcomes are data (``Match``, ``NoMatch``, ``Failure``); a batch raises
only for what stops it. Foreign exceptions (httpx, redis, psycopg, sqlite3) are
mapped to these once, at the adapter's edge, with ``raise ... from exc``::

    GeotoolkitError
    ├── ConfigurationError (ValueError)        bad arguments, gate URL, user agent
    ├── ProviderError                          .provider, .status_code
    │   ├── QueryError (ValueError)            400-class bad input      → dead letter
    │   ├── AuthenticationError                401/403, a proxy's 407   → stop the batch
    │   ├── QuotaExceededError                 402, daily cap           → stop, keep state
    │   ├── RateLimitError                     429/503; .retry_after    → retriable
    │   ├── ProviderUnavailableError (OSError) 5xx, timeouts, resets    → retriable
    │   └── ProviderResponseError              unparsable payload (.raw) → dead letter
    ├── GateError                              wraps store errors; .backend, .permanent
    └── ExportError

Retriability is a class attribute, ``retriable``, so orchestrators and retry
libraries test one flag (a ``GateError`` that is ``permanent``, a refused setting, sets it
false on itself).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AuthenticationError",
    "ConfigurationError",
    "ExportError",
    "GateError",
    "GeotoolkitError",
    "ProviderError",
    "ProviderResponseError",
    "ProviderUnavailableError",
    "QueryError",
    "QuotaExceededError",
    "RateLimitError",
]


class GeotoolkitError(Exception):
    """Base class of every error geotoolkit raises."""

    retriable: bool = False

    def __reduce__(self) -> tuple[Any, ...]:
        # Errors travel (from dask workers, orchestrator tasks): pickle them with their
        # attributes, without calling an __init__ that takes required keyword arguments.
        return _restore, (type(self), self.args, self.__dict__)


def _restore(cls: type[GeotoolkitError], args: tuple[Any, ...],
             state: dict[str, Any]) -> GeotoolkitError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class ConfigurationError(GeotoolkitError, ValueError):
    """Bad arguments, a bad gate URL, a missing user agent."""


class ProviderError(GeotoolkitError):
    """An answer (or the lack of one) from a geocoding provider."""

    def __init__(
        self, message: str, *, provider: str | None = None, status_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status_code = status_code


class QueryError(ProviderError, ValueError):
    """The provider rejected the query itself (400-class): a dead letter."""


class AuthenticationError(ProviderError):
    """401/403: the key or user agent is refused; 407: a proxy on the way wants credentials
    (``HTTPS_PROXY=http://user:password@proxy:port``). Stops the batch."""


class _Waitable(ProviderError):
    """A provider error that may say how long until trying again helps: ``retry_after``."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        provider: str | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message, provider=provider, status_code=status_code)
        self.retry_after = retry_after


class QuotaExceededError(_Waitable):
    """402 or a daily/monthly cap reached. Stops the batch; state is kept.

    ``retry_after``: for a cap the gate counts, the seconds until its period ends (the
    next midnight in the cap's time zone); ``None`` when not known (a provider's 402).
    """


class RateLimitError(_Waitable):
    """429/503, or (non-blocking mode) a wait longer than the caller's budget.

    ``retry_after`` is the number of seconds to wait before trying again, already
    clamped to the configured cap; ``None`` when the server gave no usable hint.
    """

    retriable = True


class ProviderUnavailableError(ProviderError, OSError):
    """5xx, timeouts and connection resets: retried."""

    retriable = True


class ProviderResponseError(ProviderError):
    """A payload that cannot be parsed. ``raw`` holds (a prefix of) the body."""

    def __init__(
        self,
        message: str,
        *,
        raw: str = "",
        provider: str | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message, provider=provider, status_code=status_code)
        self.raw = raw[:1000]


class GateError(GeotoolkitError):
    """The shared gate's store failed; ``backend`` names it (sqlite, redis, ...).

    ``permanent``: the store refused a setting (credentials, permissions, a database or a
    db index that does not exist), which no retry heals, unlike an outage: such an error
    is not ``retriable``.
    """

    retriable = True

    def __init__(self, message: str, *, backend: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.backend = backend
        self.permanent = permanent
        self.retriable = not permanent


class ExportError(GeotoolkitError):
    """Writing results (GeoPackage, GeoParquet) failed."""
