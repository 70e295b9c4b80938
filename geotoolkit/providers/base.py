"""The sans-I/O provider protocol and helpers shared by providers."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, runtime_checkable

import httpx

from geotoolkit.errors import (
    AuthenticationError,
    ConfigurationError,
    ProviderResponseError,
    ProviderUnavailableError,
    QuotaExceededError,
    RateLimitError,
)
from geotoolkit.policy import parse_retry_after
from geotoolkit.results import Failure, Outcome, Query

__all__ = [
    "Provider",
    "check_user_agent",
    "decode_json",
    "raise_for_status",
    "response_date",
]

_LIBRARY_AGENTS = re.compile(
    r"^\s*(python-httpx|python-requests|python-urllib|python/|urllib3|aiohttp|curl|wget|"
    r"go-http-client|java/|okhttp|libwww-perl|geopy)", re.I)


@runtime_checkable
class Provider(Protocol):
    """A geocoding service, sans-I/O: it builds requests and parses responses."""

    name: str
    host: str
    default_rate: float | None

    @property
    def gate_key(self) -> str:
        """The fleet gate key: provider host and a hash of the API key."""
        ...

    def cache_namespace(self) -> str:
        """What besides the address changes an answer: provider, host, parameters."""
        ...

    def build_request(self, query: Query) -> httpx.Request: ...

    def parse_response(self, query: Query, response: httpx.Response) -> Outcome:
        """Return an outcome, or raise the ProviderError that stops or retries."""
        ...


def check_user_agent(user_agent: str | None, provider: str) -> str:
    """Refuse an empty user agent or an HTTP library's default one."""
    if not isinstance(user_agent, str) or not user_agent.strip():
        raise ConfigurationError(
            f"{provider} requires a user_agent that identifies your application "
            "(for example 'acme-geocoder/1.0 (ops@acme.example)')")
    if _LIBRARY_AGENTS.match(user_agent):
        raise ConfigurationError(
            f"{provider} rejects stock library user agents like {user_agent.strip()!r}: "
            "name your application and a contact")
    return user_agent.strip()


def namespace(*parts: object) -> str:
    """A short stable digest of the parts that change a provider's answers."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def response_date(response: httpx.Response) -> datetime | None:
    """The response's ``Date`` header as an aware datetime, if valid."""
    value = response.headers.get("date")
    if not value:
        return None
    try:
        return parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None


def raise_for_status(response: httpx.Response, provider: str) -> None:
    """Map the statuses every provider shares to exceptions; let 200 and 4xx through."""
    status = response.status_code
    if status in (401, 403):
        raise AuthenticationError(
            f"{provider} refused the credentials (HTTP {status})",
            provider=provider, status_code=status)
    if status == 402:
        raise QuotaExceededError(
            f"{provider} quota exhausted (HTTP 402)", provider=provider, status_code=status)
    if status in (429, 503):
        hint = parse_retry_after(response.headers.get("retry-after"), now=response_date(response))
        raise RateLimitError(
            f"{provider} is throttling (HTTP {status})",
            retry_after=hint, provider=provider, status_code=status)
    if status >= 500:
        raise ProviderUnavailableError(
            f"{provider} is unavailable (HTTP {status})", provider=provider, status_code=status)


def decode_json(response: httpx.Response, provider: str) -> Any:
    """The JSON body, or ProviderResponseError carrying a prefix of the raw text."""
    try:
        return response.json()
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProviderResponseError(
            f"{provider} sent a body that is not JSON (HTTP {response.status_code})",
            raw=response.text[:1000], provider=provider, status_code=response.status_code,
        ) from exc


def client_error(response: httpx.Response, provider: str) -> Failure:
    """A 4xx other than auth/quota/throttle: the query itself was refused."""
    message = ""
    try:
        body = response.json()
        if isinstance(body, Mapping):
            err = body.get("error", body.get("message", ""))
            message = err.get("message", "") if isinstance(err, Mapping) else str(err)
    except ValueError:
        message = response.text[:200]
    reason = f"{provider} rejected the query (HTTP {response.status_code})"
    return Failure(reason=f"{reason}: {message}" if message else reason, error="QueryError",
                   provider=provider)
