"""Pelias: the open-source geocoder, self-hosted or hosted (Geocode Earth)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from geotoolkit.providers import _fields as f
from geotoolkit.providers._common import HTTPProvider
from geotoolkit.providers._geojson import first_feature, point_of
from geotoolkit.providers.base import json_or_none
from geotoolkit.providers.precision import precision_of
from geotoolkit.results import Failure, NoMatch, Outcome, Place, Query, ReverseQuery

__all__ = ["GEOCODE_EARTH", "Pelias"]

GEOCODE_EARTH = "https://api.geocode.earth"

# Pelias /v1/search/structured parameter for each of our Query fields.
_STRUCTURED = {"city": "locality", "county": "county", "state": "region",
               "postalcode": "postalcode", "country": "country"}


class Pelias(HTTPProvider):
    """Pelias ``/v1/search``, ``/v1/search/structured`` and ``/v1/reverse`` (GeoJSON ``[lon, lat]``).

    Reverse: ``/v1/reverse?point.lat=…&point.lon=…`` (named parameters); the nearest
    feature comes first, its ``confidence`` derived from the distance; no features is
    a ``NoMatch``.

    The precision comes from ``layer`` (``match_type: interpolated`` marks an address
    placed by the interpolation service); the score is Pelias's ``confidence`` (0-1);
    the place id is the ``gid`` and the bbox the feature's ``bbox``.

    Parameters
    ----------
    base_url
        The instance, for example ``http://localhost:4000``; default Geocode Earth,
        which requires an ``api_key`` (sent as ``api_key``). A self-hosted
        instance needs none.
    api_key
        Never shown in reprs, logs or gate keys.
    country_codes
        Limit results to these ISO 3166 codes (``boundary.country``).
    language
        Preferred label language (``lang``).
    user_agent, rate
        As for every provider.

    Examples
    --------
    >>> p = Pelias("http://localhost:4000")
    >>> p.build_request(Query(city="Oslo", country="NO")).url.path
    '/v1/search/structured'
    >>> p.build_request(ReverseQuery(10.75, 59.91)).url.query.decode()
    'point.lat=59.910000&point.lon=10.750000&size=1'
    """

    name = "pelias"
    default_base_url = GEOCODE_EARTH
    key_param = "api_key"
    supports_reverse = True

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None,
                 country_codes: tuple[str, ...] | list[str] | None = None,
                 language: str | None = None, user_agent: str | None = None,
                 rate: float | None = None) -> None:
        self.country_codes = tuple(c.upper() for c in country_codes or ())
        self.language = language
        super().__init__(base_url, api_key=api_key, user_agent=user_agent, rate=rate)

    def _requires_key(self) -> bool:
        return self.host == "api.geocode.earth"

    def _options(self) -> dict[str, Any]:
        return {"country_codes": self.country_codes, "language": self.language}

    def _build(self, query: Query) -> httpx.Request:
        params = {"size": "1"}
        if self.country_codes:
            params["boundary.country"] = ",".join(self.country_codes)
        if self.language:
            params["lang"] = self.language
        if query.text is not None:
            return self._get("/v1/search", {"text": query.text, **params})
        return self._get("/v1/search/structured", {**_structured(query), **params})

    def _build_reverse(self, query: ReverseQuery) -> httpx.Request:
        lon, lat = self._point(query)
        params = {"point.lat": lat, "point.lon": lon, "size": "1"}
        if self.country_codes:
            params["boundary.country"] = ",".join(self.country_codes)
        if self.language:
            params["lang"] = self.language
        return self._get("/v1/reverse", params)

    def _check(self, response: httpx.Response) -> Outcome | None:
        if 400 <= response.status_code < 500 and response.status_code not in (401, 402, 403, 429):
            errors = _errors(json_or_none(response))
            if errors:
                return self._query_failure(errors, response.status_code)
        return None

    def _parse_body(self, body: Any) -> Outcome:
        errors = _errors(body)
        try:
            feature = first_feature(body)
            if feature is None:
                return self._query_failure(errors, 200) if errors else NoMatch(provider=self.name)
            lon, lat = point_of(feature)
        except TypeError as exc:
            raise self._bad(str(exc), body) from exc
        props = feature.get("properties")
        words = {"match_type": f.dig(props, "match_type"), "layer": f.dig(props, "layer")}
        return self._match(lon, lat, f.dig(props, "label"), feature,
                           precision=precision_of(self.name, words),
                           score=f.scaled(f.dig(props, "confidence"), 1.0),
                           place=_place(feature, props))

    def _query_failure(self, errors: list[str], status: int) -> Failure:
        return Failure(reason=self._reason(f"pelias rejected the query (HTTP {status}): "
                                           f"{'; '.join(errors)}"),
                       error="QueryError", provider=self.name)


def _place(feature: Mapping[str, Any], props: object) -> Place:
    box = feature.get("bbox")  # GeoJSON: [min_lon, min_lat, max_lon, max_lat]
    return f.place(
        place_id=f.dig(props, "gid"), housenumber=f.dig(props, "housenumber"),
        street=f.dig(props, "street"), postcode=f.dig(props, "postalcode"),
        locality=f.first_text(props, "locality", "localadmin", "borough"),
        region=f.first_text(props, "region", "macroregion", "county"),
        country_code=f.first_text(props, "country_code", "country_a"),
        bbox=f.bbox(*box) if isinstance(box, list) and len(box) == 4 else None)


def _structured(query: Query) -> dict[str, str]:
    fields = query.structured()
    address = " ".join(v for v in (fields.pop("housenumber", None), fields.pop("street", None)) if v)
    params = {_STRUCTURED[k]: v for k, v in fields.items() if k in _STRUCTURED}
    return {"address": address, **params} if address else params


def _errors(body: Any) -> list[str]:
    meta = body.get("geocoding") if isinstance(body, Mapping) else None
    errors = meta.get("errors") if isinstance(meta, Mapping) else None
    return [str(e)[:500] for e in errors[:10]] if isinstance(errors, list) else []
