"""A base class for the HTTP providers: configuration, secrets, the parse template."""

from __future__ import annotations

import math
from collections.abc import Mapping
from importlib import metadata
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx

from geotoolkit.errors import (
    ConfigurationError,
    GeotoolkitError,
    ProviderResponseError,
    QueryError,
)
from geotoolkit.keys import gate_key
from geotoolkit.providers._fields import label as clean_label
from geotoolkit.providers.base import (
    DEFAULT_MAX_QUERY_CHARS,
    check_query,
    check_user_agent,
    client_error,
    decode_json,
    namespace,
    raise_for_status,
    safe_text,
)
from geotoolkit.providers.policies import POLICIES
from geotoolkit.results import Failure, Match, Outcome, Place, Precision, Query

# What data (not our code's intent) can make a parser raise: a hostile or broken answer.
_DATA_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError,
                RecursionError, UnicodeError)

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
    ``_build`` and ``_parse_body``; they may override ``_check`` to map
    provider-specific statuses before the common ones.

    ``build_request`` refuses (``QueryError``) text that cannot be encoded and queries
    longer than ``max_query_chars``; ``parse_response`` turns every answer it cannot
    read into a ``Failure`` (never a foreign exception), and text from a response is
    redacted of ``secrets`` before it enters a reason or an exception.
    """

    name: str
    default_base_url: ClassVar[str]
    key_param: ClassVar[str | None] = None
    key_required: ClassVar[bool] = False
    user_agent_required: ClassVar[bool] = False
    #: The longest query text sent (see ``DEFAULT_MAX_QUERY_CHARS``: a GET URL's budget).
    max_query_chars: int = DEFAULT_MAX_QUERY_CHARS

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

    @property
    def secrets(self) -> tuple[str, ...]:
        """The API key this provider sends, or ``()``: hidden from every text it produces."""
        return () if self._api_key is None else (self._api_key,)

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
        """The request for ``query``; ``QueryError`` for one that must not be sent."""
        check_query(query, self.name, self.max_query_chars)
        try:
            return self._build(query)
        except GeotoolkitError:
            raise
        except (httpx.InvalidURL, UnicodeError, ValueError, TypeError) as exc:
            raise QueryError(f"{self.name} cannot send this address: "
                             f"{safe_text(exc, self.secrets, 200)}", provider=self.name) from exc

    def _build(self, query: Query) -> httpx.Request:
        raise NotImplementedError

    def parse_response(self, query: Query, response: httpx.Response) -> Outcome:
        """Return an outcome, or raise the ProviderError that stops or retries.

        Whatever the response holds, nothing but a ``ProviderError`` is raised: an
        answer that cannot be read is a ``Failure`` (``error="ProviderResponseError"``).
        """
        try:
            early = self._check(response)
            if early is not None:
                return early
            raise_for_status(response, self.name)
            if response.status_code >= 400:
                return client_error(response, self.name, self.secrets)
            return self._parse_body(decode_json(response, self.name, self.secrets))
        except ProviderResponseError as exc:
            return Failure(reason=str(exc), error=type(exc).__name__, provider=self.name)
        except GeotoolkitError:
            raise
        except _DATA_ERRORS as exc:
            return Failure(reason=self._reason(f"{self.name} sent an answer it could not read "
                                               f"({type(exc).__name__}: {exc})"),
                           error="ProviderResponseError", provider=self.name)

    def _reason(self, text: object) -> str:
        """Text (from a response, in part) fit for a reason: redacted and capped."""
        return safe_text(text, self.secrets)

    def _check(self, response: httpx.Response) -> Outcome | None:
        """Provider-specific statuses, before the shared mapping; ``None`` to go on."""
        return None

    def _parse_body(self, body: Any) -> Outcome:
        raise NotImplementedError

    def _match(self, lon: object, lat: object, label: object, raw: Any, *,
               precision: Precision = "unknown", score: float | None = None,
               place: Place | None = None) -> Match:
        """A Match from the provider's coordinate values, checked to be a real lon/lat.

        The label is capped (``MAX_LABEL_CHARS``); ``score`` must already be in [0, 1].
        """
        try:
            point = lonlat(lon, lat)
        except (TypeError, ValueError, OverflowError) as exc:
            raise self._bad(f"result without a usable lon/lat ({exc})", raw) from exc
        return Match(lon=point[0], lat=point[1], label=clean_label(label), provider=self.name,
                     raw=dict(raw) if isinstance(raw, Mapping) else {}, precision=precision,
                     score=score, place=Place() if place is None else place)

    def _bad(self, message: str, raw: object, status_code: int = 200) -> ProviderResponseError:
        """A ProviderResponseError whose message and raw excerpt are redacted and capped."""
        return ProviderResponseError(f"{self.name}: {self._reason(message)}",
                                     raw=safe_text(_excerpt(raw), self.secrets, 1000),
                                     provider=self.name, status_code=status_code)

    def __repr__(self) -> str:
        parts = [repr(self.base_url)]
        parts += [f"{k}={v!r}" for k, v in self._options().items() if v not in (None, (), "")]
        if self._api_key is not None:
            parts.append("api_key='***'")
        return f"{type(self).__name__}({', '.join(parts)})"


def _excerpt(raw: object) -> str:
    """The start of ``str(raw)``; never raises (deep nesting, huge numbers)."""
    try:
        return str(raw)[:1000]
    except (RecursionError, ValueError):
        return f"<{type(raw).__name__} that cannot be shown>"


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
    """Finite floats from JSON numbers or numeric strings, within the WGS84 ranges.

    Raises ``TypeError`` or ``ValueError`` (never ``OverflowError``) for anything else.

    >>> lonlat("10.75", 59.91)
    (10.75, 59.91)
    """
    if isinstance(lon, bool) or isinstance(lat, bool):
        raise TypeError("a boolean is not a coordinate")
    if not isinstance(lon, int | float | str) or not isinstance(lat, int | float | str):
        raise TypeError("a coordinate must be a number or a numeric string")
    if (isinstance(lon, str) and len(lon) > 64) or (isinstance(lat, str) and len(lat) > 64):
        raise ValueError("a coordinate string that long is not a number")
    try:
        x, y = float(lon), float(lat)
    except OverflowError as exc:
        raise ValueError("a coordinate too large to be a number") from exc
    if not (math.isfinite(x) and -180.0 <= x <= 180.0):
        raise ValueError(f"lon {x!r} out of range")
    if not (math.isfinite(y) and -90.0 <= y <= 90.0):
        raise ValueError(f"lat {y!r} out of range")
    return x, y
