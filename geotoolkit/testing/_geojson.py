"""The GeoJSON family: Photon, Pelias and Mapbox v6 (FeatureCollections, ``[lon, lat]``).

- Photon ``/api?q=`` and ``/reverse?lon=&lat=``: the level in ``type`` (``house``,
  ``street``, ``city``, ``country``; a postcode is ``other`` with ``boundary/postal_code``).
- Pelias ``/v1/search?text=``, ``/v1/search/structured`` and ``/v1/reverse?point.lat=&
  point.lon=``: the level in ``layer``, a ``confidence``, ``match_type``; the key is
  ``api_key``; a bad query is a 400 with ``geocoding.errors``.
- Mapbox ``/search/geocode/v6/forward`` (``q`` or structured input) and ``/reverse?
  longitude=&latitude=``: ``feature_type``, ``coordinates.accuracy`` and ``match_code``;
  the key is ``access_token``; throttling says ``X-Rate-Limit-Reset`` (the batch endpoint
  lives in ``_batch``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar, Final

from geotoolkit.testing._dialect import (
    BadRequest,
    Dialect,
    Endpoint,
    ErrorKind,
    Incoming,
    Lookup,
    coordinate,
    countries,
)
from geotoolkit.testing._gazetteer import COUNTRY
from geotoolkit.testing._places import Hit
from geotoolkit.testing._reply import Reply

__all__ = ["MAPBOX_ATTRIBUTION", "Mapbox", "Pelias", "Photon", "feature", "mapbox_collection"]

MAPBOX_ATTRIBUTION: Final = "NOTICE: © 2025 Mapbox and its suppliers. All rights reserved. (simulated)"
_GEOJSON_MARKS: Final[Mapping[str, tuple[str | int, ...]]] = {
    "lon": ("geometry", "coordinates", 0), "lat": ("geometry", "coordinates", 1)}


def feature(hit: Hit, properties: dict[str, Any], *, bbox: bool) -> dict[str, Any]:
    """A GeoJSON Point feature (``bbox`` for areas: streets, postcodes, towns, the country)."""
    out: dict[str, Any] = {"type": "Feature",
                           "geometry": {"type": "Point", "coordinates": [hit.lon, hit.lat]},
                           "properties": properties}
    if bbox and hit.level != "address":
        out["bbox"] = list(hit.bbox)
    return out


def _collection(items: list[dict[str, Any]], **extra: object) -> dict[str, Any]:
    return {"type": "FeatureCollection", "features": items, **extra}


# --------------------------------------------------------------------------- Photon

# Per level: osm_type, osm_key, osm_value, type.
_PHOTON: Final[Mapping[str, tuple[str, str, str, str]]] = {
    "address": ("N", "place", "house", "house"), "street": ("W", "highway", "residential", "street"),
    "postcode": ("R", "boundary", "postal_code", "other"),
    "locality": ("R", "place", "town", "city"), "country": ("R", "place", "country", "country")}


class Photon(Dialect):
    """Photon: ``/api`` and ``/reverse``; no keys, errors are ``{"message": ...}``."""

    name = "photon"
    paths: ClassVar[Mapping[str, Endpoint]] = {"/api": "forward", "/api/": "forward",
                                               "/reverse": "reverse"}
    mark_paths: ClassVar[Mapping[str, tuple[str | int, ...]]] = {
        **_GEOJSON_MARKS, "label": ("properties", "name")}

    def claims(self, path: str, params: Mapping[str, str]) -> bool:
        return path != "/reverse" or "format" not in params

    def parse(self, endpoint: Endpoint, request: Incoming) -> Lookup:
        params = request.params
        if endpoint == "reverse":
            point = (coordinate(params.get("lon"), "lon", 180.0),
                     coordinate(params.get("lat"), "lat", 90.0))
            return Lookup("reverse", point=point)
        text = params.get("q", "")
        if not text.strip():
            raise BadRequest("missing search term 'q': /?q=berlin")
        return Lookup("forward", text=text)

    def item(self, lookup: Lookup, hit: Hit) -> dict[str, Any]:
        osm_type, key, value, kind = _PHOTON[hit.level]
        if hit.level == "locality" and hit.municipality != "Vaduz":
            value = "village"
        props: dict[str, Any] = {"osm_type": osm_type, "osm_id": 9_000_000_000 + hit.id % 100_000_000,
                                 "osm_key": key, "osm_value": value, "type": kind}
        if hit.level in ("address", "street"):
            props.update({"housenumber": hit.housenumber, "street": hit.street})
        if hit.level != "address":
            props["name"] = hit.name
        if hit.level not in ("locality", "country"):
            props.update({"postcode": hit.postcode, "city": hit.locality})
        if hit.region:
            props["county"] = hit.region
        props.update({"countrycode": COUNTRY.code, "country": COUNTRY.name})
        if hit.level != "address":
            west, south, east, north = hit.bbox
            props["extent"] = [west, north, east, south]
        return feature(hit, {k: v for k, v in props.items() if v is not None}, bbox=False)

    def mark(self, item: dict[str, Any], marks: Mapping[str, str]) -> None:
        item["properties"].setdefault("name", "")
        super().mark(item, marks)

    def document(self, lookup: Lookup, items: list[dict[str, Any]]) -> object:
        return _collection(items)

    def error_body(self, kind: ErrorKind, status: int, message: str) -> object:
        return {"message": message}


# --------------------------------------------------------------------------- Pelias

# Per level: layer, confidence, match_type, accuracy.
_PELIAS: Final[Mapping[str, tuple[str, float, str, str]]] = {
    "address": ("address", 1.0, "exact", "point"), "street": ("street", 0.8, "fallback", "centroid"),
    "postcode": ("postalcode", 0.7, "fallback", "centroid"),
    "locality": ("locality", 0.6, "fallback", "centroid"),
    "country": ("country", 0.5, "fallback", "centroid")}
# /v1/search/structured parameter -> our (Nominatim's) field.
_PELIAS_FIELDS: Final = {"address": "street", "locality": "city", "county": "county",
                         "region": "state", "postalcode": "postalcode", "country": "country"}


class Pelias(Dialect):
    """Pelias ``/v1/search``, ``/v1/search/structured`` and ``/v1/reverse``."""

    name = "pelias"
    key_param = "api_key"
    paths: ClassVar[Mapping[str, Endpoint]] = {
        "/v1/search": "forward", "/v1/search/structured": "forward", "/v1/reverse": "reverse"}
    mark_paths: ClassVar[Mapping[str, tuple[str | int, ...]]] = {
        **_GEOJSON_MARKS, "label": ("properties", "label")}

    def parse(self, endpoint: Endpoint, request: Incoming) -> Lookup:
        params = request.params
        filter_ = countries(params.get("boundary.country"))
        if endpoint == "reverse":
            for name in ("point.lat", "point.lon"):
                if not params.get(name, "").strip():
                    raise BadRequest(f"missing param '{name}'")
            point = (coordinate(params["point.lon"], "point.lon", 180.0),
                     coordinate(params["point.lat"], "point.lat", 90.0))
            return Lookup("reverse", point=point, countries=filter_)
        if request.path.endswith("/structured"):
            fields = {_PELIAS_FIELDS[k]: v for k, v in params.items()
                      if k in _PELIAS_FIELDS and v.strip()}
            if not fields:
                raise BadRequest("at least one of the following fields is required: venue, address, "
                                 "neighbourhood, borough, locality, county, region, postalcode, country")
            return Lookup("forward", fields=fields, countries=filter_)
        text = params.get("text", "")
        if not text.strip():
            raise BadRequest("invalid param 'text': text length, must be >0")
        return Lookup("forward", text=text, countries=filter_)

    def item(self, lookup: Lookup, hit: Hit) -> dict[str, Any]:
        layer, confidence, match_type, accuracy = _PELIAS[hit.level]
        if hit.hashed:
            confidence = 0.9
        source_id = f"{hit.level}/{hit.id}"
        props: dict[str, Any] = {
            "id": source_id, "gid": f"openstreetmap:{layer}:{source_id}", "layer": layer,
            "source": "openstreetmap", "source_id": source_id, "name": hit.street_line or hit.name,
            "housenumber": hit.housenumber, "street": hit.street, "postalcode": hit.postcode,
            "confidence": confidence, "match_type": match_type, "accuracy": accuracy,
            "country": COUNTRY.name, "country_a": COUNTRY.alpha3, "country_code": COUNTRY.code,
            "region": hit.region, "locality": hit.locality if hit.level != "country" else None,
            "label": hit.label}
        if hit.distance_m is not None:
            props["distance"] = round(hit.distance_m / 1000, 3)
            props.pop("match_type")
        return feature(hit, {k: v for k, v in props.items() if v is not None}, bbox=True)

    def document(self, lookup: Lookup, items: list[dict[str, Any]]) -> object:
        return {"geocoding": _pelias_meta(lookup), **_collection(items)}

    def error_body(self, kind: ErrorKind, status: int, message: str) -> object:
        if kind in ("bad_request", "not_found"):
            return {"geocoding": {**_pelias_meta(None), "errors": [message]},
                    **_collection([])}
        return {"message": message}


def _pelias_meta(lookup: Lookup | None) -> dict[str, Any]:
    query: dict[str, Any] = {"size": 1, "private": False}
    if lookup is not None and lookup.text:
        query["text"] = lookup.text
    return {"version": "0.2", "attribution": "https://geocode.earth/guidelines (simulated)",
            "query": query, "engine": {"name": "Pelias", "author": "Mapzen", "version": "1.0"},
            "timestamp": 1717322400000}


# --------------------------------------------------------------------------- Mapbox

_MAPBOX_TYPES: Final = {"address": "address", "street": "street", "postcode": "postcode",
                        "locality": "place", "country": "country"}
# v6 structured input -> our (Nominatim's) field (address_number joins the street).
_MAPBOX_FIELDS: Final = {"address_number": "housenumber", "street": "street", "place": "city",
                         "locality": "city", "region": "state", "postcode": "postalcode",
                         "country": "country", "address_line1": "street"}


def _mapbox_context(hit: Hit) -> dict[str, Any]:
    context: dict[str, Any] = {}
    if hit.level == "address":
        context["address"] = {"mapbox_id": f"address.{hit.id}", "address_number": hit.housenumber,
                              "street_name": hit.street, "name": hit.street_line}
    if hit.street and hit.level != "street":
        context["street"] = {"name": hit.street}
    if hit.postcode and hit.level != "postcode":
        context["postcode"] = {"name": hit.postcode}
    if hit.locality and hit.level != "locality":
        context["place"] = {"mapbox_id": f"place.{hit.municipality}", "name": hit.locality}
    if hit.region:
        context["region"] = {"name": hit.region}
    if hit.level != "country":
        context["country"] = {"name": COUNTRY.name, "country_code": COUNTRY.code,
                              "country_code_alpha_3": COUNTRY.alpha3}
    return {k: {n: v for n, v in part.items() if v is not None} for k, part in context.items()}


def mapbox_feature(hit: Hit) -> dict[str, Any]:
    """One Mapbox v6 feature for ``hit``."""
    town = " ".join(p for p in (hit.postcode, hit.locality) if p)
    props: dict[str, Any] = {
        "mapbox_id": f"{hit.level}.{hit.id}", "feature_type": _MAPBOX_TYPES[hit.level],
        "full_address": hit.label, "name": hit.street_line or hit.name,
        "name_preferred": hit.street_line or hit.name,
        "place_formatted": ", ".join(p for p in (town, COUNTRY.name) if p and hit.level != "country"),
        "coordinates": {"longitude": hit.lon, "latitude": hit.lat}, "context": _mapbox_context(hit)}
    if hit.level == "address":
        props["coordinates"]["accuracy"] = "rooftop"
        props["match_code"] = {"address_number": "matched", "street": "matched",
                               "postcode": "matched", "place": "matched", "country": "inferred",
                               "confidence": "medium" if hit.hashed else "exact"}
    else:
        props["bbox"] = list(hit.bbox)
    out = feature(hit, props, bbox=False)
    return {"type": "Feature", "id": props["mapbox_id"], **{k: v for k, v in out.items() if k != "type"}}


def mapbox_collection(items: list[dict[str, Any]]) -> dict[str, Any]:
    return _collection(items, attribution=MAPBOX_ATTRIBUTION)


class Mapbox(Dialect):
    """Mapbox Geocoding v6: ``/search/geocode/v6/forward`` and ``/reverse``."""

    name = "mapbox"
    key_param = "access_token"
    paths: ClassVar[Mapping[str, Endpoint]] = {
        "/search/geocode/v6/forward": "forward", "/search/geocode/v6/reverse": "reverse"}
    mark_paths: ClassVar[Mapping[str, tuple[str | int, ...]]] = {
        **_GEOJSON_MARKS, "label": ("properties", "full_address")}
    _MESSAGES: ClassVar[Mapping[str, str]] = {
        "missing_key": "Not Authorized - No Token", "invalid_key": "Not Authorized - Invalid Token",
        "rate_limited": "Too Many Requests", "not_found": "Not Found"}

    def parse(self, endpoint: Endpoint, request: Incoming) -> Lookup:
        return parse_mapbox(endpoint, request.params)

    def item(self, lookup: Lookup, hit: Hit) -> dict[str, Any]:
        return mapbox_feature(hit)

    def document(self, lookup: Lookup, items: list[dict[str, Any]]) -> object:
        return mapbox_collection(items)

    def status_of(self, kind: ErrorKind) -> int:
        return {"invalid_key": 401, "bad_request": 422}.get(kind, super().status_of(kind))

    def error_body(self, kind: ErrorKind, status: int, message: str) -> object:
        return {"message": self._MESSAGES.get(kind, message)}

    def throttle(self, reply: Reply, retry_after: str | None, *, now: float, seconds: int,
                 limit: int | None, window_seconds: float, auto: bool) -> Reply:
        """Mapbox's 429: ``X-Rate-Limit-Interval/-Limit/-Reset`` (a Unix time), and in
        ``auto`` mode no ``Retry-After`` (as Mapbox); ``missing``: no hint at all."""
        if reply.status != 429:
            return super().throttle(reply, retry_after, now=now, seconds=seconds, limit=limit,
                                    window_seconds=window_seconds, auto=auto)
        if retry_after is None and not auto:
            return reply
        headers = (("X-Rate-Limit-Interval", str(max(1, round(window_seconds)))),
                   ("X-Rate-Limit-Limit", str(limit or 1)),
                   ("X-Rate-Limit-Reset", str(math.ceil(now) + seconds)))
        return replace(reply, headers=reply.headers + headers,
                       retry_after=None if auto else retry_after)


def parse_mapbox(endpoint: Endpoint, params: Mapping[str, Any]) -> Lookup:
    """A v6 forward or reverse query (URL parameters, or one object of a batch)."""
    filter_ = countries(_text(params.get("country")))
    if endpoint == "reverse" or ("longitude" in params and "latitude" in params and "q" not in params):
        point = (coordinate(_text(params.get("longitude")), "longitude", 180.0),
                 coordinate(_text(params.get("latitude")), "latitude", 90.0))
        return Lookup("reverse", point=point, countries=filter_)
    text = _text(params.get("q"))
    if text and text.strip():
        if len(text) > 256:
            raise BadRequest(f"Query too long - {len(text)}/256 characters")
        return Lookup("forward", text=text, countries=filter_)
    fields = {_MAPBOX_FIELDS[k]: _text(v) for k, v in params.items()
              if k in _MAPBOX_FIELDS and _text(v).strip()}
    if not fields:
        raise BadRequest("Missing required parameter: q (or structured input)")
    return Lookup("forward", fields=fields)


def _text(value: object) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)
