"""OpenCage: a commercial geocoder aggregating open data, with an API key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from geotoolkit.errors import ProviderUnavailableError
from geotoolkit.providers._common import HTTPProvider, one_line
from geotoolkit.results import Failure, NoMatch, Outcome, Query

__all__ = ["OPENCAGE", "OpenCage"]

OPENCAGE = "https://api.opencagedata.com"


class OpenCage(HTTPProvider):
    """OpenCage ``/geocode/v1/json``, sans-I/O; ``results[].geometry`` is ``{lat, lng}``.

    The answer's ``status.code`` mirrors the HTTP status: 402 (quota spent) stops
    the batch with ``QuotaExceededError``, 429 pauses the fleet (``RateLimitError``),
    401/403 raise ``AuthenticationError``, 408 is retried. Structured queries
    are joined into text (OpenCage has a single ``q`` parameter).

    Parameters
    ----------
    api_key
        Required, sent as ``key``; never shown in reprs, logs or gate keys.
    country_codes
        Restrict to these ISO 3166-1 alpha-2 codes (``countrycode``).
    language
        IETF language tag for labels.
    base_url, user_agent, rate
        As for every provider; the default rate is the free trial's 1 request/s.

    Examples
    --------
    >>> OpenCage(api_key="example").build_request(Query(text="Oslo")).url.path
    '/geocode/v1/json'
    """

    name = "opencage"
    default_base_url = OPENCAGE
    key_param = "key"
    key_required = True

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 country_codes: Sequence[str] | None = None, language: str | None = None,
                 user_agent: str | None = None, rate: float | None = None) -> None:
        super().__init__(base_url, api_key=api_key, user_agent=user_agent, rate=rate)
        self.country_codes = tuple(c.lower() for c in country_codes or ())
        self.language = language

    def _options(self) -> dict[str, Any]:
        return {"country_codes": self.country_codes, "language": self.language}

    def build_request(self, query: Query) -> httpx.Request:
        params = {"q": one_line(query), "limit": "1", "no_annotations": "1"}
        if self.country_codes:
            params["countrycode"] = ",".join(self.country_codes)
        if self.language:
            params["language"] = self.language
        return self._get("/geocode/v1/json", params)

    def parse_response(self, query: Query, response: httpx.Response) -> Outcome:
        code = _body_code(response) or response.status_code
        if code == 408:
            raise ProviderUnavailableError("opencage timed out (408)", provider=self.name,
                                           status_code=408)
        if code >= 400 > response.status_code:  # trust the body's status over a proxy's 200
            response = httpx.Response(code, headers=response.headers, content=response.content)
        return super().parse_response(query, response)

    def _check(self, response: httpx.Response) -> Outcome | None:
        status = response.status_code
        if 400 <= status < 500 and status not in (401, 402, 403, 429):
            message = _body_status(response).get("message")
            if isinstance(message, str) and message:
                return Failure(reason=f"opencage rejected the query (HTTP {status}): {message}",
                               error="QueryError", provider=self.name)
        return None

    def _parse_body(self, body: Any) -> Outcome:
        results = body.get("results") if isinstance(body, Mapping) else None
        if not isinstance(results, list):
            raise self._bad("answer without a results list", body)
        if not results:
            return NoMatch(provider=self.name)
        result = results[0]
        geometry = result.get("geometry") if isinstance(result, Mapping) else None
        if not isinstance(geometry, Mapping):
            raise self._bad("result without geometry", result)
        return self._match(geometry.get("lng"), geometry.get("lat"), result.get("formatted"), result)


def _body_status(response: httpx.Response) -> Mapping[str, Any]:
    """The answer's ``status`` object (``{"code": 402, "message": ...}``), or ``{}``."""
    try:
        body = response.json()
    except ValueError:
        return {}
    status = body.get("status") if isinstance(body, Mapping) else None
    return status if isinstance(status, Mapping) else {}


def _body_code(response: httpx.Response) -> int | None:
    code = _body_status(response).get("code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None
