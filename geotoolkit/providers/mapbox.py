"""Mapbox Geocoding API v6 (forward, reverse and batch), with an access token."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from geotoolkit.providers import _fields as f
from geotoolkit.providers._batch import Item
from geotoolkit.providers._common import HTTPProvider
from geotoolkit.providers._geojson import first_feature, point_of
from geotoolkit.providers.base import BatchPolicy, decode_json
from geotoolkit.providers.precision import MAPBOX_CONFIDENCE, precision_of
from geotoolkit.results import Failure, NoMatch, Outcome, Place, Query, ReverseQuery

__all__ = ["MAPBOX", "MAPBOX_BATCH", "Mapbox"]

MAPBOX = "https://api.mapbox.com"
#: ``/search/geocode/v6/batch``: up to 1,000 forward or reverse queries per request, each
#: counted as one request against the rate limit and billed as one.
MAPBOX_BATCH = BatchPolicy(max_queries=1000, cost="query", reverse=True)

# Mapbox v6 structured-input parameter for each of our Query fields.
# The Place field a feature of this type fills with its own name.
_OWN_FIELD = {"street": "street", "postcode": "postcode", "place": "locality",
              "locality": "locality", "region": "region"}
_STRUCTURED = {"housenumber": "address_number", "street": "street", "city": "place",
               "state": "region", "postalcode": "postcode", "country": "country"}


class Mapbox(HTTPProvider):
    """Mapbox ``/search/geocode/v6/forward``, ``/reverse`` and ``/batch``, sans-I/O; GeoJSON ``[lon, lat]``.

    Structured queries use v6 structured input (``address_number``, ``street``,
    ``place``, ``region``, ``postcode``, ``country``). A 429 without
    ``Retry-After`` takes its hint from ``X-Rate-Limit-Reset`` (as every provider's does,
    see ``geotoolkit.policy.parse_rate_limit_reset``).

    Reverse: ``/search/geocode/v6/reverse?longitude=…&latitude=…`` (named parameters,
    longitude first as everywhere in Mapbox); the features come finest first
    (address, street, postcode, place, region, country) and the first one is the
    match; no features is a ``NoMatch``.

    Batch (:data:`MAPBOX_BATCH`): ``POST /search/geocode/v6/batch`` with a JSON array
    of query objects (forward ``{"q": …}`` or structured fields, reverse
    ``{"longitude": …, "latitude": …}``), answered by ``{"batch": [FeatureCollection,
    …]}`` in the same order. Each query counts as one request against the rate limit.

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
    >>> request = Mapbox(api_key="pk.example").build_request(ReverseQuery(10.75, 59.91))
    >>> request.url.path, request.url.params["longitude"], request.url.params["latitude"]
    ('/search/geocode/v6/reverse', '10.750000', '59.910000')
    """

    name = "mapbox"
    default_base_url = MAPBOX
    key_param = "access_token"
    key_required = True
    #: Documented: ``q`` is at most 256 characters (and 20 words).
    max_query_chars = 256
    supports_reverse = True
    batch = MAPBOX_BATCH

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
        params = {"limit": "1", "permanent": self._permanent(), **self._filters()}
        return self._get("/search/geocode/v6/forward", {**params, **_forward(query)})

    def _build_reverse(self, query: ReverseQuery) -> httpx.Request:
        lon, lat = self._point(query)
        # No limit: above the default it needs exactly one ``types``; the default gives
        # one feature per level, finest first.
        return self._get("/search/geocode/v6/reverse", {
            "longitude": lon, "latitude": lat, "permanent": self._permanent(), **self._filters()})

    def _permanent(self) -> str:
        return "true" if self.permanent else "false"

    def _filters(self) -> dict[str, str]:
        params = {"country": ",".join(self.country_codes), "language": self.language or ""}
        return {k: v for k, v in params.items() if v}

    def _build_batch(self, items: list[Item]) -> httpx.Request:
        body = [self._batch_object(query) for _, query in items]
        params = {"permanent": self._permanent()}
        if self._api_key is not None:
            params[self.key_param or "access_token"] = self._api_key
        return httpx.Request("POST", f"{self.base_url}/search/geocode/v6/batch", params=params,
                             content=json.dumps(body, ensure_ascii=False).encode(),
                             headers={**self._headers(), "Content-Type": "application/json"})

    def _batch_object(self, query: Query | ReverseQuery) -> dict[str, object]:
        """One query of the batch body: what its own endpoint takes as parameters."""
        if isinstance(query, ReverseQuery):
            lon, lat = self._point(query)
            return {"longitude": float(lon), "latitude": float(lat), **self._filters()}
        return {"limit": 1, **self._filters(), **_forward(query)}  # as the GET: the query's own country wins

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

    def _parse_batch(self, response: httpx.Response, items: list[Item]) -> Mapping[int, Outcome]:
        """``{"batch": [...]}``: the n-th answer is the n-th query sent."""
        body = decode_json(response, self.name, self.secrets)
        answers = body.get("batch") if isinstance(body, Mapping) else None
        if not isinstance(answers, list):
            raise self._bad("batch answer without a batch list", body)
        return {position: self._row(self._batch_row, answer)
                for (position, _), answer in zip(items, answers, strict=False)}

    def _batch_row(self, answer: object) -> Outcome:
        """A FeatureCollection, or an error object for a query Mapbox refused."""
        if isinstance(answer, Mapping) and "features" not in answer:
            message = f.first_text(answer, "message", "error")
            if message is not None:
                return Failure(reason=self._reason(f"mapbox rejected the query: {message}"),
                               error="QueryError", provider=self.name)
        return self._parse_body(answer)


def _forward(query: Query) -> dict[str, str]:
    """Free text as ``q``, or v6 structured input."""
    if query.text is not None:
        return {"q": query.text}
    return {_STRUCTURED[k]: v for k, v in query.structured().items() if k in _STRUCTURED}


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


