"""Google Maps Platform Geocoding API, with an API key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from geotoolkit.errors import (
    AuthenticationError,
    ProviderUnavailableError,
    QuotaExceededError,
    RateLimitError,
)
from geotoolkit.providers._common import HTTPProvider, one_line
from geotoolkit.results import Failure, NoMatch, Outcome, Query

__all__ = ["GOOGLE", "Google"]

GOOGLE = "https://maps.googleapis.com"


class Google(HTTPProvider):
    """Google ``/maps/api/geocode/json``, sans-I/O; ``geometry.location`` is ``{lat, lng}``.

    Google answers HTTP 200 and says what happened in ``status``: ``OK``,
    ``ZERO_RESULTS`` (NoMatch), ``OVER_QUERY_LIMIT`` (RateLimitError: pause and
    retry), ``OVER_DAILY_LIMIT`` (QuotaExceededError: stop), ``REQUEST_DENIED``
    (AuthenticationError: stop), ``INVALID_REQUEST`` (a Failure) and
    ``UNKNOWN_ERROR`` (retried). Structured queries are joined into ``address``;
    a ``country`` also becomes a ``components`` filter.

    Parameters
    ----------
    api_key
        Required, sent as ``key``; never shown in reprs, logs or gate keys.
    language, region
        Label language and region bias (ccTLD, e.g. ``no``).
    base_url, user_agent, rate
        As for every provider; the default rate is 50/s (3,000 per minute).

    Examples
    --------
    >>> Google(api_key="example").build_request(Query(text="Oslo")).url.params["address"]
    'Oslo'
    """

    name = "google"
    default_base_url = GOOGLE
    key_param = "key"
    key_required = True

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 language: str | None = None, region: str | None = None,
                 user_agent: str | None = None, rate: float | None = None) -> None:
        super().__init__(base_url, api_key=api_key, user_agent=user_agent, rate=rate)
        self.language, self.region = language, region

    def _options(self) -> dict[str, Any]:
        return {"language": self.language, "region": self.region}

    def build_request(self, query: Query) -> httpx.Request:
        params = {"address": one_line(query)}
        if query.country:
            params["components"] = f"country:{query.country}"
        if self.language:
            params["language"] = self.language
        if self.region:
            params["region"] = self.region
        return self._get("/maps/api/geocode/json", params)

    def _parse_body(self, body: Any) -> Outcome:
        if not isinstance(body, Mapping) or not isinstance(body.get("status"), str):
            raise self._bad("answer without a status", body)
        status, message = body["status"], str(body.get("error_message", "")).strip()
        if status == "OK":
            return self._first(body.get("results"), body)
        if status == "ZERO_RESULTS":
            return NoMatch(provider=self.name)
        if status == "INVALID_REQUEST":
            return Failure(reason=f"google: invalid request {message}".strip(),
                           error="QueryError", provider=self.name)
        raise self._status_error(status, message)

    def _first(self, results: object, body: object) -> Outcome:
        if not isinstance(results, list) or not results or not isinstance(results[0], Mapping):
            raise self._bad("status OK without results", body)
        result = results[0]
        geometry = result.get("geometry")
        location = geometry.get("location") if isinstance(geometry, Mapping) else None
        if not isinstance(location, Mapping):
            raise self._bad("result without geometry.location", result)
        return self._match(location.get("lng"), location.get("lat"),
                           result.get("formatted_address"), result)

    def _status_error(self, status: str, message: str) -> Exception:
        text = f"google {status}" + (f": {message}" if message else "")
        if status == "OVER_QUERY_LIMIT":
            return RateLimitError(text, provider=self.name, status_code=200)
        if status == "OVER_DAILY_LIMIT":
            return QuotaExceededError(text, provider=self.name, status_code=200)
        if status == "REQUEST_DENIED":
            return AuthenticationError(text, provider=self.name, status_code=200)
        if status == "UNKNOWN_ERROR":
            return ProviderUnavailableError(text, provider=self.name, status_code=200)
        return self._bad(f"unknown status {status!r}", status)
