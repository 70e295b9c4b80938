"""Mapbox Geocoding API v6 (forward), with an access token."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from geotoolkit.errors import RateLimitError
from geotoolkit.providers._common import HTTPProvider
from geotoolkit.providers._geojson import first_feature, point_of
from geotoolkit.providers.base import response_date
from geotoolkit.results import NoMatch, Outcome, Query

__all__ = ["MAPBOX", "Mapbox"]

MAPBOX = "https://api.mapbox.com"

# Mapbox v6 structured-input parameter for each of our Query fields.
_STRUCTURED = {"housenumber": "address_number", "street": "street", "city": "place",
               "state": "region", "postalcode": "postcode", "country": "country"}


class Mapbox(HTTPProvider):
    """Mapbox ``/search/geocode/v6/forward``, sans-I/O; GeoJSON ``[lon, lat]``.

    Structured queries use v6 structured input (``address_number``, ``street``,
    ``place``, ``region``, ``postcode``, ``country``). A 429 without
    ``Retry-After`` takes its hint from ``X-Rate-Limit-Reset``.

    Parameters
    ----------
    api_key
        Required, sent as ``access_token``; never shown in reprs, logs or gate keys.
    permanent
        Ask for permanent results (``permanent=true``, a paid feature). Mapbox's
        terms forbid storing temporary results, which includes geotoolkit's cache.
    country_codes
        Restrict to these ISO 3166-1 alpha-2 codes.
    language
        Label language.
    base_url, user_agent, rate
        As for every provider; the default rate is 1,000 requests/minute.

    Examples
    --------
    >>> Mapbox(api_key="pk.example").build_request(Query(text="Oslo")).url.path
    '/search/geocode/v6/forward'
    """

    name = "mapbox"
    default_base_url = MAPBOX
    key_param = "access_token"
    key_required = True

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 permanent: bool = False, country_codes: Sequence[str] | None = None,
                 language: str | None = None, user_agent: str | None = None,
                 rate: float | None = None) -> None:
        super().__init__(base_url, api_key=api_key, user_agent=user_agent, rate=rate)
        self.permanent = bool(permanent)
        self.country_codes = tuple(c.lower() for c in country_codes or ())
        self.language = language

    def _options(self) -> dict[str, Any]:
        return {"permanent": self.permanent or None, "country_codes": self.country_codes,
                "language": self.language}

    def build_request(self, query: Query) -> httpx.Request:
        params = {"limit": "1", "permanent": "true" if self.permanent else "false"}
        if self.country_codes:
            params["country"] = ",".join(self.country_codes)
        if self.language:
            params["language"] = self.language
        if query.text is not None:
            params["q"] = query.text
        else:
            params.update({_STRUCTURED[k]: v for k, v in query.structured().items()
                           if k in _STRUCTURED})
        return self._get("/search/geocode/v6/forward", params)

    def _check(self, response: httpx.Response) -> Outcome | None:
        if response.status_code == 429 and "retry-after" not in response.headers:
            raise RateLimitError("mapbox is throttling (HTTP 429)", retry_after=_reset_hint(response),
                                 provider=self.name, status_code=429)
        return None

    def _parse_body(self, body: Any) -> Outcome:
        try:
            feature = first_feature(body)
            if feature is None:
                return NoMatch(provider=self.name)
            lon, lat = point_of(feature)
        except TypeError as exc:
            raise self._bad(str(exc), body) from exc
        props = feature.get("properties")
        label = (props.get("full_address") or props.get("name")) if isinstance(props, Mapping) else ""
        return self._match(lon, lat, label, feature)


def _reset_hint(response: httpx.Response) -> float | None:
    """Seconds until ``X-Rate-Limit-Reset`` (a Unix time), measured from the ``Date`` header."""
    date = response_date(response)
    try:
        reset = float(response.headers.get("x-rate-limit-reset", ""))
    except ValueError:
        return None
    if date is None or not math.isfinite(reset):
        return None
    return max(0.0, reset - date.timestamp())
