"""Mapbox Geocoding API v6 (forward), with an access token."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from geotoolkit.errors import RateLimitError
from geotoolkit.providers import _fields as f
from geotoolkit.providers._common import HTTPProvider
from geotoolkit.providers._geojson import first_feature, point_of
from geotoolkit.providers.base import response_date
from geotoolkit.providers.precision import MAPBOX_CONFIDENCE, precision_of
from geotoolkit.results import NoMatch, Outcome, Place, Query

__all__ = ["MAPBOX", "Mapbox"]

MAPBOX = "https://api.mapbox.com"

# Mapbox v6 structured-input parameter for each of our Query fields.
# The Place field a feature of this type fills with its own name.
_OWN_FIELD = {"street": "street", "postcode": "postcode", "place": "locality",
              "locality": "locality", "region": "region"}
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
    #: Documented: ``q`` is at most 256 characters (and 20 words).
    max_query_chars = 256

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

    def _build(self, query: Query) -> httpx.Request:
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
        words = {"coordinates.accuracy": f.dig(props, "coordinates", "accuracy"),
                 "feature_type": f.dig(props, "feature_type")}
        confidence = f.dig(props, "match_code", "confidence")
        return self._match(lon, lat, f.first_text(props, "full_address", "name"), feature,
                           precision=precision_of(self.name, words),
                           score=MAPBOX_CONFIDENCE.get(confidence.lower())
                           if isinstance(confidence, str) else None,
                           place=_place(feature, props))


def _place(feature: Mapping[str, Any], props: object) -> Place:
    context = f.dig(props, "context")
    box = f.dig(props, "bbox") or feature.get("bbox")  # [min_lon, min_lat, max_lon, max_lat]
    parts: dict[str, object] = {
        "street": f.text(f.dig(context, "address", "street_name"))
        or f.text(f.dig(context, "street", "name")),
        "postcode": f.dig(context, "postcode", "name"),
        "locality": f.text(f.dig(context, "place", "name"))
        or f.text(f.dig(context, "locality", "name")),
        "region": f.dig(context, "region", "name")}
    own = _OWN_FIELD.get(str(f.dig(props, "feature_type")))
    if own is not None and not f.text(parts[own]):  # a street, postcode or town names itself
        parts[own] = f.dig(props, "name")
    return f.place(
        place_id=f.first_text(props, "mapbox_id") or f.text(feature.get("id")),
        housenumber=f.dig(context, "address", "address_number"),
        country_code=f.dig(context, "country", "country_code"),
        bbox=f.bbox(*box) if isinstance(box, list) and len(box) == 4 else None, **parts)


def _reset_hint(response: httpx.Response) -> float | None:
    """Seconds until ``X-Rate-Limit-Reset`` (a Unix time), measured from the ``Date`` header."""
    date = response_date(response)
    reset = f.number(response.headers.get("x-rate-limit-reset", ""))
    if date is None or reset is None:
        return None
    return max(0.0, reset - date.timestamp())
