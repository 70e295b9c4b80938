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
from geotoolkit.providers import _fields as f
from geotoolkit.providers._common import HTTPProvider, one_line
from geotoolkit.providers.precision import precision_of
from geotoolkit.results import Failure, NoMatch, Outcome, Place, Query, ReverseQuery

__all__ = ["GOOGLE", "Google"]

GOOGLE = "https://maps.googleapis.com"


class Google(HTTPProvider):
    """Google ``/maps/api/geocode/json``, sans-I/O; ``geometry.location`` is ``{lat, lng}``.

    Google answers HTTP 200 and says what happened in ``status``: ``OK``,
    ``ZERO_RESULTS`` (NoMatch), ``OVER_QUERY_LIMIT`` (RateLimitError: pause and
    retry; its ``status_code`` is 429, as it is Google's 429, so the fleet paces down as
    after any 429), ``OVER_DAILY_LIMIT`` (QuotaExceededError: stop), ``REQUEST_DENIED``
    (AuthenticationError: stop), ``INVALID_REQUEST`` (a Failure) and
    ``UNKNOWN_ERROR`` (retried). Structured queries are joined into ``address``;
    a ``country`` also becomes a ``components`` filter.

    Reverse: the same endpoint with ``latlng=LAT,LNG``, **latitude first** (the query's
    ``lon, lat`` are swapped here, once); the first result is the most precise one
    Google has at the point, and ``ZERO_RESULTS`` is a ``NoMatch``.

    The precision comes from ``geometry.location_type`` (``ROOFTOP``,
    ``RANGE_INTERPOLATED``) and the result's ``types``; Google gives no score. The
    place holds ``place_id``, the ``address_components`` and ``geometry.bounds``
    (else the ``viewport``) as the bbox.

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
    >>> Google(api_key="example").build_request(ReverseQuery(10.75, 59.91)).url.params["latlng"]
    '59.910000,10.750000'
    """

    name = "google"
    default_base_url = GOOGLE
    key_param = "key"
    key_required = True
    supports_reverse = True

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 language: str | None = None, region: str | None = None,
                 user_agent: str | None = None, rate: float | None = None) -> None:
        super().__init__(base_url, api_key=api_key, user_agent=user_agent, rate=rate)
        self.language, self.region = language, region

    def _options(self) -> dict[str, Any]:
        return {"language": self.language, "region": self.region}

    def _build(self, query: Query) -> httpx.Request:
        params = {"address": one_line(query)}
        if query.country:
            params["components"] = f"country:{query.country}"
        if self.language:
            params["language"] = self.language
        if self.region:
            params["region"] = self.region
        return self._get("/maps/api/geocode/json", params)

    def _build_reverse(self, query: ReverseQuery) -> httpx.Request:
        lon, lat = self._point(query)
        params = {"latlng": f"{lat},{lon}"}  # LAT first
        if self.language:
            params["language"] = self.language
        return self._get("/maps/api/geocode/json", params)

    def _parse_body(self, body: Any) -> Outcome:
        if not isinstance(body, Mapping) or not isinstance(body.get("status"), str):
            raise self._bad("answer without a status", body)
        status = body["status"]
        message = self._reason(f.text(body.get("error_message")) or "")
        if status == "OK":
            return self._first(body.get("results"), body)
        if status == "ZERO_RESULTS":
            return NoMatch(provider=self.name)
        if status == "INVALID_REQUEST":
            return Failure(reason=f"google: invalid request {message}".strip(),
                           error="QueryError", provider=self.name)
        raise self._status_error(self._reason(status[:100]), message)

    def _first(self, results: object, body: object) -> Outcome:
        if not isinstance(results, list) or not results or not isinstance(results[0], Mapping):
            raise self._bad("status OK without results", body)
        result = results[0]
        geometry = result.get("geometry")
        location = geometry.get("location") if isinstance(geometry, Mapping) else None
        if not isinstance(location, Mapping):
            raise self._bad("result without geometry.location", result)
        words = {"geometry.location_type": f.dig(geometry, "location_type"),
                 "types": result.get("types")}
        return self._match(location.get("lng"), location.get("lat"),
                           result.get("formatted_address"), result,
                           precision=precision_of(self.name, words), place=_place(result))

    def _status_error(self, status: str, message: str) -> Exception:
        text = f"google {status}" + (f": {message}" if message else "")
        if status == "OVER_QUERY_LIMIT":  # Google's 429, in a 200: the fleet must read it as one
            return RateLimitError(text, provider=self.name, status_code=429)
        if status == "OVER_DAILY_LIMIT":
            return QuotaExceededError(text, provider=self.name, status_code=200)
        if status == "REQUEST_DENIED":
            return AuthenticationError(text, provider=self.name, status_code=200)
        if status == "UNKNOWN_ERROR":
            return ProviderUnavailableError(text, provider=self.name, status_code=200)
        return self._bad(f"unknown status {status!r}", status)


def _place(result: Mapping[str, Any]) -> Place:
    parts: dict[str, object] = {}
    components = result.get("address_components")
    for component in components[:50] if isinstance(components, list) else ():
        types = f.dig(component, "types")
        for kind in types[:10] if isinstance(types, list) else ():
            if isinstance(kind, str):  # the country by its ISO code, the rest by name
                parts.setdefault(kind, f.dig(component, "short_name" if kind == "country"
                                             else "long_name"))
    box = f.dig(result, "geometry", "bounds") or f.dig(result, "geometry", "viewport")
    return f.place(
        place_id=result.get("place_id"), housenumber=parts.get("street_number"),
        street=parts.get("route"), postcode=parts.get("postal_code"),
        locality=f.first_text(parts, "locality", "postal_town", "sublocality"),
        region=f.first_text(parts, "administrative_area_level_1", "administrative_area_level_2"),
        country_code=parts.get("country"),
        bbox=f.bbox(f.dig(box, "southwest", "lng"), f.dig(box, "southwest", "lat"),
                    f.dig(box, "northeast", "lng"), f.dig(box, "northeast", "lat")))
