"""A base class for the HTTP providers: configuration, secrets, the parse template."""

from __future__ import annotations

import math
from collections.abc import Mapping
from importlib import metadata
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx

from geotoolkit.errors import ConfigurationError, ProviderResponseError
from geotoolkit.keys import gate_key
from geotoolkit.providers.base import (
    check_user_agent,
    client_error,
    decode_json,
    namespace,
    raise_for_status,
)
from geotoolkit.providers.policies import POLICIES
from geotoolkit.results import Failure, Match, Outcome, Query

__all__ = ["DEFAULT_USER_AGENT", "HTTPProvider", "lonlat", "one_line", "parse_base_url", "policy_rate"]


def _version() -> str:
    try:
        return metadata.version("geotoolkit")
    except metadata.PackageNotFoundError:
        return "0"


#: Sent to providers that do not require an application-specific User-Agent.
DEFAULT_USER_AGENT = f"geotoolkit/{_version()}"


def one_line(query: Query) -> str:
    """A query as one line of text: free text as is, structured fields joined.

    >>> one_line(Query(housenumber="1", street="Karl Johans gate", city="Oslo"))
    '1 Karl Johans gate, Oslo'
    """
    if query.text is not None:
        return query.text
    fields = query.structured()
    street = " ".join(v for v in (fields.pop("housenumber", None), fields.pop("street", None)) if v)
    return ", ".join(v for v in (street, *fields.values()) if v)


class HTTPProvider:
    """Shared plumbing: base URL, API key (never shown), user agent, rate, gate key.

    Subclasses set ``name``, ``default_base_url`` and ``key_param`` and implement
    ``build_request`` and ``_parse_body``; they may override ``_check`` to map
    provider-specific statuses before the common ones.
    """

    name: ClassVar[str]
    default_base_url: ClassVar[str]
    key_param: ClassVar[str | None] = None
    key_required: ClassVar[bool] = False
    user_agent_required: ClassVar[bool] = False

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 user_agent: str | None = None, rate: float | None = None) -> None:
        self.base_url, self.host = parse_base_url(base_url or self.default_base_url)
        self._api_key = api_key.strip() if isinstance(api_key, str) and api_key.strip() else None
        if self._requires_key() and self._api_key is None:
            raise ConfigurationError(f"{self.name} requires an api_key")
        if user_agent is None and not self.user_agent_required:
            self.user_agent = DEFAULT_USER_AGENT
        else:
            self.user_agent = check_user_agent(user_agent, self.name)
        self.default_rate: float | None = policy_rate(self.name, self.host, rate)

    def _requires_key(self) -> bool:
        return self.key_required

    @property
    def gate_key(self) -> str:
        """The fleet gate key: host and a hash of the API key."""
        return gate_key(self.host, self._api_key)

    def cache_namespace(self) -> str:
        """What besides the address changes an answer: provider, host, options."""
        return namespace(self.name, self.host, *self._options().values())

    def _options(self) -> dict[str, Any]:
        """The options that change answers (shown in repr and the cache namespace)."""
        return {}

    def _get(self, path: str, params: dict[str, str]) -> httpx.Request:
        if self._api_key is not None and self.key_param is not None:
            params = {**params, self.key_param: self._api_key}
        return httpx.Request("GET", f"{self.base_url}{path}", params=params,
                             headers=self._headers())

    def _headers(self) -> dict[str, str]:
        return {"User-Agent": self.user_agent, "Accept": "application/json"}

    def build_request(self, query: Query) -> httpx.Request:
        raise NotImplementedError

    def parse_response(self, query: Query, response: httpx.Response) -> Outcome:
        """Return an outcome, or raise the ProviderError that stops or retries."""
        try:
            early = self._check(response)
            if early is not None:
                return early
            raise_for_status(response, self.name)
            if response.status_code >= 400:
                return client_error(response, self.name)
            return self._parse_body(decode_json(response, self.name))
        except ProviderResponseError as exc:
            return Failure(reason=str(exc), error=type(exc).__name__, provider=self.name)

    def _check(self, response: httpx.Response) -> Outcome | None:
        """Provider-specific statuses, before the shared mapping; ``None`` to go on."""
        return None

    def _parse_body(self, body: Any) -> Outcome:
        raise NotImplementedError

    def _match(self, lon: object, lat: object, label: object, raw: Any) -> Match:
        """A Match from the provider's coordinate values, checked to be a real lon/lat."""
        try:
            point = lonlat(lon, lat)
        except (TypeError, ValueError) as exc:
            raise self._bad(f"result without a usable lon/lat ({exc})", raw) from exc
        return Match(lon=point[0], lat=point[1], label="" if label is None else str(label),
                     provider=self.name, raw=dict(raw) if isinstance(raw, Mapping) else {})

    def _bad(self, message: str, raw: object, status_code: int = 200) -> ProviderResponseError:
        return ProviderResponseError(f"{self.name}: {message}", raw=str(raw)[:1000],
                                     provider=self.name, status_code=status_code)

    def __repr__(self) -> str:
        parts = [repr(self.base_url)]
        parts += [f"{k}={v!r}" for k, v in self._options().items() if v not in (None, (), "")]
        if self._api_key is not None:
            parts.append("api_key='***'")
        return f"{type(self).__name__}({', '.join(parts)})"


def parse_base_url(base_url: str) -> tuple[str, str]:
    parts = urlsplit(base_url) if isinstance(base_url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"base_url must be an http(s) URL, got {base_url!r}")
    return base_url.rstrip("/"), parts.netloc.lower().rsplit("@", 1)[-1]


def policy_rate(name: str, host: str, rate: float | None) -> float | None:
    if rate is not None:
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not (
                math.isfinite(rate) and rate > 0):
            raise ConfigurationError(f"rate must be positive, got {rate!r}")
        return float(rate)
    policy = POLICIES.get(name)
    if policy is not None and host in policy.hosts:
        return policy.rate_per_second
    return None


def lonlat(lon: object, lat: object) -> tuple[float, float]:
    """Finite floats from JSON numbers or numeric strings, within the WGS84 ranges."""
    if isinstance(lon, bool) or isinstance(lat, bool):
        raise TypeError("a boolean is not a coordinate")
    x, y = float(lon), float(lat)  # type: ignore[arg-type]
    if not (math.isfinite(x) and -180.0 <= x <= 180.0):
        raise ValueError(f"lon {x!r} out of range")
    if not (math.isfinite(y) and -90.0 <= y <= 90.0):
        raise ValueError(f"lat {y!r} out of range")
    return x, y
