"""OpenCage: a commercial geocoder aggregating open data, with an API key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from geotoolkit.errors import ProviderUnavailableError, QuotaExceededError
from geotoolkit.policy import parse_rate_limit_reset
from geotoolkit.providers import _fields as f
from geotoolkit.providers._common import HTTPProvider, one_line
from geotoolkit.providers.base import json_or_none, response_date
from geotoolkit.providers.precision import precision_of
from geotoolkit.results import Failure, NoMatch, Outcome, Place, Query, ReverseQuery

__all__ = ["OPENCAGE", "OpenCage"]

OPENCAGE = "https://api.opencagedata.com"


class OpenCage(HTTPProvider):
    """OpenCage ``/geocode/v1/json``, sans-I/O; ``results[].geometry`` is ``{lat, lng}``.

    The answer's ``status.code`` mirrors the HTTP status: 402 (quota spent) stops
    the batch with ``QuotaExceededError``, 429 pauses the fleet (``RateLimitError``),
    401/403 raise ``AuthenticationError``, 408 is retried. Structured queries
    are joined into text (OpenCage has a single ``q`` parameter).

    Reverse: the same endpoint with ``q=LAT,LNG``, **latitude first** (OpenCage reads a
    ``q`` of two numbers as a point; the query's ``lon, lat`` are swapped here, once).
    ``results: []`` (nothing there) is a ``NoMatch``; the result is read as forward.

    The precision comes from ``components._type``; the score is ``confidence / 10``,
    and OpenCage's confidence measures the size of the result's bounding box (10:
    under 0.25 km across), not how well it matches the query.

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
    >>> OpenCage(api_key="example").build_request(ReverseQuery(10.75, 59.91)).url.params["q"]
    '59.910000,10.750000'
    """

    name = "opencage"
    default_base_url = OPENCAGE
    key_param = "key"
    key_required = True
    supports_reverse = True

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 country_codes: Sequence[str] | None = None, language: str | None = None,
                 user_agent: str | None = None, rate: float | None = None) -> None:
        super().__init__(base_url, api_key=api_key, user_agent=user_agent, rate=rate)
        self.country_codes = tuple(c.lower() for c in country_codes or ())
        self.language = language

    def _options(self) -> dict[str, Any]:
        return {"country_codes": self.country_codes, "language": self.language}

    def _build(self, query: Query) -> httpx.Request:
        params = {"q": one_line(query), "limit": "1", "no_annotations": "1"}
        if self.country_codes:
            params["countrycode"] = ",".join(self.country_codes)
        if self.language:
            params["language"] = self.language
        return self._get("/geocode/v1/json", params)

    def _build_reverse(self, query: ReverseQuery) -> httpx.Request:
        lon, lat = self._point(query)
        params = {"q": f"{lat},{lon}", "limit": "1", "no_annotations": "1"}  # LAT first
        if self.language:
            params["language"] = self.language
        return self._get("/geocode/v1/json", params)

    def parse_response(self, query: Query | ReverseQuery, response: httpx.Response) -> Outcome:
        code = _body_code(response) or response.status_code
        if code == 408:
            raise ProviderUnavailableError("opencage timed out (408)", provider=self.name,
                                           status_code=408)
        if code >= 400 > response.status_code:  # trust the body's status over a proxy's 200
            response = httpx.Response(code, headers=response.headers, content=response.content)
        try:
            return super().parse_response(query, response)
        except QuotaExceededError as exc:  # the body's ``rate.reset`` when no header said it
            if exc.retry_after is None:
                exc.retry_after = _body_reset(response)
            raise

    def _check(self, response: httpx.Response) -> Outcome | None:
        status = response.status_code
        if 400 <= status < 500 and status not in (401, 402, 403, 429):
            message = _body_status(response).get("message")
            if isinstance(message, str) and message:
                return Failure(reason=self._reason(f"opencage rejected the query (HTTP {status}): "
                                                   f"{message}"),
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
        components = result.get("components")
        confidence = result.get("confidence")
        return self._match(geometry.get("lng"), geometry.get("lat"), result.get("formatted"), result,
                           precision=precision_of(self.name, {
                               "components._type": f.dig(components, "_type"),
                               "components._category": f.dig(components, "_category")}),
                           score=None if confidence == 0 else f.scaled(confidence, 10),
                           place=_place(result, components))


def _place(result: Mapping[str, Any], components: object) -> Place:
    bounds = result.get("bounds")
    return f.place(
        housenumber=f.dig(components, "house_number"),
        street=f.first_text(components, "road", "street", "pedestrian", "footway"),
        postcode=f.dig(components, "postcode"),
        locality=f.first_text(components, "city", "town", "village", "hamlet", "municipality",
                              "suburb"),
        region=f.first_text(components, "state", "province", "region", "county"),
        country_code=f.first_text(components, "ISO_3166-1_alpha-2", "country_code"),
        bbox=f.bbox(f.dig(bounds, "southwest", "lng"), f.dig(bounds, "southwest", "lat"),
                    f.dig(bounds, "northeast", "lng"), f.dig(bounds, "northeast", "lat")))


def _body_status(response: httpx.Response) -> Mapping[str, Any]:
    """The answer's ``status`` object (``{"code": 402, "message": ...}``), or ``{}``."""
    body = json_or_none(response)
    status = body.get("status") if isinstance(body, Mapping) else None
    return status if isinstance(status, Mapping) else {}


def _body_reset(response: httpx.Response) -> float | None:
    """The seconds to the quota's reset that the body's ``rate.reset`` (a Unix time) says.

    >>> _body_reset(httpx.Response(402, headers={"Date": "Tue, 14 Nov 2023 22:13:20 GMT"},
    ...                            json={"rate": {"remaining": 0, "reset": 1700003600}}))
    3600.0
    """
    body = json_or_none(response)
    rate = body.get("rate") if isinstance(body, Mapping) else None
    reset = rate.get("reset") if isinstance(rate, Mapping) else None
    if isinstance(reset, bool) or not isinstance(reset, int | float):
        return None
    return parse_rate_limit_reset({"X-RateLimit-Reset": str(reset)}, now=response_date(response))


def _body_code(response: httpx.Response) -> int | None:
    code = _body_status(response).get("code")
    valid = isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599
    return code if valid else None
