"""Commercial JSON APIs: OpenCage, Google and HERE, each with its own envelope and refusals.

- OpenCage ``/geocode/v1/json?q=`` (``q=lat,lng`` reverses): ``components._type`` and a
  ``confidence``; ``status.code`` mirrors the HTTP status (401, 402, 403, 429, 503).
- Google ``/maps/api/geocode/json?address=`` (``latlng=lat,lng`` reverses): HTTP 200 with
  ``status`` ``OK``, ``ZERO_RESULTS``, ``REQUEST_DENIED``, ``OVER_QUERY_LIMIT``,
  ``OVER_DAILY_LIMIT``, ``INVALID_REQUEST`` or ``UNKNOWN_ERROR``; the precision in
  ``geometry.location_type`` and ``types``.
- HERE ``/v1/geocode?q=`` (or ``qq=``) and ``/v1/revgeocode?at=lat,lng``: ``resultType``,
  ``houseNumberType``, ``localityType``; gateway refusals are ``{"error",
  "error_description"}``, the API's own ``{"status", "title", ...}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from geotoolkit.testing._dialect import (
    BadRequest,
    Dialect,
    Endpoint,
    ErrorKind,
    Incoming,
    Lookup,
    countries,
    point_pair,
)
from geotoolkit.testing._gazetteer import COUNTRY
from geotoolkit.testing._places import Hit
from geotoolkit.testing._reply import Reply, json_reply

__all__ = ["Google", "Here", "OpenCage"]

_LAT_LNG: Final = re.compile(r"\s*[-+]?\d+(?:\.\d+)?\s*[, +]\s*[-+]?\d+(?:\.\d+)?\s*")


def _corners(hit: Hit) -> dict[str, dict[str, float]]:
    west, south, east, north = hit.bbox
    return {"northeast": {"lat": north, "lng": east}, "southwest": {"lat": south, "lng": west}}


# --------------------------------------------------------------------------- OpenCage

# Per level: _type, _category, confidence.
_OPENCAGE: Final[Mapping[str, tuple[str, str, int]]] = {
    "address": ("building", "building", 10), "street": ("road", "road", 9),
    "postcode": ("postcode", "postcode", 7), "locality": ("village", "place", 6),
    "country": ("country", "place", 1)}


class OpenCage(Dialect):
    """OpenCage ``/geocode/v1/json``: forward, or reverse when ``q`` is ``lat,lng``."""

    name = "opencage"
    key_param = "key"
    paths: ClassVar[Mapping[str, Endpoint]] = {"/geocode/v1/json": "forward"}
    mark_paths: ClassVar[Mapping[str, tuple[str | int, ...]]] = {
        "label": ("formatted",), "lon": ("geometry", "lng"), "lat": ("geometry", "lat")}
    _MESSAGES: ClassVar[Mapping[str, str]] = {
        "missing_key": "missing API key", "invalid_key": "invalid API key",
        "quota": "quota exceeded", "rate_limited": "Too Many Requests",
        "unavailable": "Internal server error"}

    def status_of(self, kind: ErrorKind) -> int:
        return {"invalid_key": 401}.get(kind, super().status_of(kind))

    def parse(self, endpoint: Endpoint, request: Incoming) -> Lookup:
        params = request.params
        text = params.get("q", "")
        filter_ = countries(params.get("countrycode"))
        if not text.strip():
            raise BadRequest("invalid or missing query (q) parameter")
        if _LAT_LNG.fullmatch(text):
            try:
                point = point_pair(text, "q", lon_first=False, separators=", +")
            except BadRequest:  # two numbers that are no coordinates: search them as text
                return Lookup("forward", text=text, countries=filter_)
            return Lookup("reverse", point=point, countries=filter_)
        return Lookup("forward", text=text, countries=filter_)

    def item(self, lookup: Lookup, hit: Hit) -> dict[str, Any]:
        kind, category, confidence = _OPENCAGE[hit.level]
        if hit.level == "locality" and hit.municipality == "Vaduz":
            kind = "town"
        components: dict[str, Any] = {
            "ISO_3166-1_alpha-2": COUNTRY.code, "ISO_3166-1_alpha-3": COUNTRY.alpha3,
            "_category": category, "_type": kind, "country": COUNTRY.name, "country_code": "li"}
        if hit.housenumber:
            components["house_number"] = hit.housenumber
        if hit.street:
            components["road"] = hit.street
        if hit.postcode:
            components["postcode"] = hit.postcode
        if hit.locality:
            components["town" if hit.municipality == "Vaduz" else "village"] = hit.locality
        if hit.region:
            components["county"] = hit.region
        return {"bounds": _corners(hit), "components": components,
                "confidence": 9 if hit.hashed else confidence, "formatted": hit.label,
                "geometry": {"lat": hit.lat, "lng": hit.lon}}

    def document(self, lookup: Lookup, items: list[dict[str, Any]]) -> object:
        return _opencage_envelope(items, 200, "OK")

    def error_body(self, kind: ErrorKind, status: int, message: str) -> object:
        return _opencage_envelope([], status, self._MESSAGES.get(kind, message))


def _opencage_envelope(results: list[dict[str, Any]], code: int, message: str) -> dict[str, Any]:
    return {
        "documentation": "https://opencagedata.com/api",
        "licenses": [{"name": "see attribution guide", "url": "https://opencagedata.com/credits"}],
        "results": results, "status": {"code": code, "message": message},
        "stay_informed": {"blog": "https://blog.opencagedata.com"},
        "thanks": "For using an OpenCage API (simulated)",
        "timestamp": {"created_http": "Mon, 02 Jun 2025 10:00:00 GMT", "created_unix": 1748858400},
        "total_results": len(results)}


# --------------------------------------------------------------------------- Google

_GOOGLE: Final[Mapping[str, tuple[str, list[str]]]] = {
    "address": ("ROOFTOP", ["street_address"]), "street": ("GEOMETRIC_CENTER", ["route"]),
    "postcode": ("APPROXIMATE", ["postal_code"]), "locality": ("APPROXIMATE", ["locality", "political"]),
    "country": ("APPROXIMATE", ["country", "political"])}
_GOOGLE_STATUS: Final[Mapping[str, tuple[str, str]]] = {
    "missing_key": ("REQUEST_DENIED", "You must use an API key to authenticate each request to "
                    "Google Maps Platform APIs."),
    "invalid_key": ("REQUEST_DENIED", "The provided API key is invalid."),
    "rate_limited": ("OVER_QUERY_LIMIT", "You have exceeded your rate-limit for this API."),
    "quota": ("OVER_DAILY_LIMIT", "You have exceeded your daily request quota for this API."),
    "unavailable": ("UNKNOWN_ERROR", "The request could not be processed due to a server error."),
    "bad_request": ("INVALID_REQUEST", "Invalid request."),
}
_BY_HTTP: Final = {400: "INVALID_REQUEST", 401: "REQUEST_DENIED", 403: "REQUEST_DENIED",
                   429: "OVER_QUERY_LIMIT"}


def _component(long: str, types: list[str], short: str | None = None) -> dict[str, Any]:
    return {"long_name": long, "short_name": short or long, "types": types}


class Google(Dialect):
    """Google Geocoding ``/maps/api/geocode/json``: ``address=`` or ``latlng=lat,lng``."""

    name = "google"
    key_param = "key"
    paths: ClassVar[Mapping[str, Endpoint]] = {"/maps/api/geocode/json": "forward"}
    mark_paths: ClassVar[Mapping[str, tuple[str | int, ...]]] = {
        "label": ("formatted_address",), "lon": ("geometry", "location", "lng"),
        "lat": ("geometry", "location", "lat")}

    def status_of(self, kind: ErrorKind) -> int:
        return 200 if kind in _GOOGLE_STATUS else super().status_of(kind)

    def parse(self, endpoint: Endpoint, request: Incoming) -> Lookup:
        params = request.params
        filter_ = None
        for part in params.get("components", "").split("|"):
            name, _, value = part.partition(":")
            if name.strip() == "country" and value.strip():
                filter_ = countries(value)
        if params.get("latlng", "").strip():
            point = point_pair(params["latlng"], "latlng", lon_first=False)
            return Lookup("reverse", point=point)
        text = params.get("address", "")
        if not text.strip() and filter_ is None:
            raise BadRequest("Invalid request. Missing the 'address', 'components', 'latlng' or "
                             "'place_id' parameter.")
        return Lookup("forward", text=text if text.strip() else COUNTRY.name, countries=filter_)

    def item(self, lookup: Lookup, hit: Hit) -> dict[str, Any]:
        location_type, types = _GOOGLE[hit.level]
        parts = []
        if hit.housenumber:
            parts.append(_component(hit.housenumber, ["street_number"]))
        if hit.street:
            parts.append(_component(hit.street, ["route"]))
        if hit.locality:
            parts.append(_component(hit.locality, ["locality", "political"]))
        if hit.region:
            parts.append(_component(hit.region, ["administrative_area_level_1", "political"]))
        parts.append(_component(COUNTRY.name, ["country", "political"], COUNTRY.code))
        if hit.postcode:
            parts.append(_component(hit.postcode, ["postal_code"]))
        geometry: dict[str, Any] = {"location": {"lat": hit.lat, "lng": hit.lon},
                                    "location_type": location_type, "viewport": _corners(hit)}
        if hit.level != "address":
            geometry["bounds"] = _corners(hit)
        out: dict[str, Any] = {"address_components": parts, "formatted_address": hit.label,
                               "geometry": geometry}
        if not hit.exact:
            out["partial_match"] = True
        return {**out, "place_id": f"ChIJsim{hit.level}{hit.id}", "types": list(types)}

    def document(self, lookup: Lookup, items: list[dict[str, Any]]) -> object:
        return {"results": items, "status": "OK" if items else "ZERO_RESULTS"}

    def error_body(self, kind: ErrorKind, status: int, message: str) -> object:
        code, text = _GOOGLE_STATUS.get(kind, (_BY_HTTP.get(status, "UNKNOWN_ERROR"), message))
        return {"error_message": message if kind == "bad_request" else text, "results": [],
                "status": code}

    def in_body_error(self) -> Reply:
        return json_reply(200, self.error_body("unavailable", 200, ""))


# --------------------------------------------------------------------------- HERE

# Per level: resultType, its refinement, queryScore.
_HERE: Final[Mapping[str, tuple[str, dict[str, str], float]]] = {
    "address": ("houseNumber", {"houseNumberType": "PA"}, 1.0),
    "street": ("street", {}, 0.85), "postcode": ("locality", {"localityType": "postalCode"}, 0.7),
    "locality": ("locality", {"localityType": "city"}, 0.6),
    "country": ("administrativeArea", {"administrativeAreaType": "country"}, 0.5)}
_QUALIFIED: Final = {"houseNumber": "housenumber", "street": "street", "city": "city",
                     "district": "city", "county": "county", "state": "state",
                     "postalCode": "postalcode", "country": "country"}
_GATEWAY: Final[Mapping[str, tuple[str, str]]] = {
    "missing_key": ("Unauthorized", "No credentials found"),
    "invalid_key": ("Unauthorized", "apiKey invalid. apiKey not found."),
    "rate_limited": ("Too Many Requests", "Rate limit for this service has been reached")}


class Here(Dialect):
    """HERE Geocoding & Search v7: ``/v1/geocode`` and ``/v1/revgeocode``."""

    name = "here"
    key_param = "apiKey"
    paths: ClassVar[Mapping[str, Endpoint]] = {"/v1/geocode": "forward", "/v1/revgeocode": "reverse"}
    mark_paths: ClassVar[Mapping[str, tuple[str | int, ...]]] = {
        "label": ("title",), "lon": ("position", "lng"), "lat": ("position", "lat")}

    def status_of(self, kind: ErrorKind) -> int:
        return {"invalid_key": 401}.get(kind, super().status_of(kind))

    def parse(self, endpoint: Endpoint, request: Incoming) -> Lookup:
        params = request.params
        filter_ = None
        scope = params.get("in", "")
        if scope.startswith("countryCode:"):
            filter_ = countries(scope.partition(":")[2])
        if endpoint == "reverse":
            if not params.get("at", "").strip():
                raise BadRequest("Illegal input for parameter 'at'")
            return Lookup("reverse", point=point_pair(params["at"], "at", lon_first=False),
                          countries=filter_)
        text = params.get("q", "")
        if text.strip():
            return Lookup("forward", text=text, countries=filter_)
        fields: dict[str, str] = {}
        for part in params.get("qq", "").split(";"):
            name, _, value = part.partition("=")
            if name.strip() in _QUALIFIED and value.strip():
                fields.setdefault(_QUALIFIED[name.strip()], value.strip())
        if not fields:
            raise BadRequest("Illegal input for parameter 'q'")
        return Lookup("forward", fields=fields, countries=filter_)

    def item(self, lookup: Lookup, hit: Hit) -> dict[str, Any]:
        result_type, refinement, score = _HERE[hit.level]
        address = {"label": hit.label, "countryCode": COUNTRY.alpha3, "countryName": COUNTRY.name,
                   "county": hit.region, "city": hit.locality, "street": hit.street,
                   "postalCode": hit.postcode, "houseNumber": hit.housenumber}
        west, south, east, north = hit.bbox
        out: dict[str, Any] = {
            "title": hit.label, "id": f"here:sim:{hit.level}:{hit.id}", "resultType": result_type,
            **refinement, "address": {k: v for k, v in address.items() if v is not None},
            "position": {"lat": hit.lat, "lng": hit.lon},
            "mapView": {"west": west, "south": south, "east": east, "north": north}}
        if hit.distance_m is not None:
            out["distance"] = round(hit.distance_m)
        else:
            out["scoring"] = {"queryScore": score if hit.exact else 0.8, "fieldScore": {}}
        return out

    def document(self, lookup: Lookup, items: list[dict[str, Any]]) -> object:
        return {"items": items}

    def error_body(self, kind: ErrorKind, status: int, message: str) -> object:
        if kind in _GATEWAY:
            error, description = _GATEWAY[kind]
            return {"error": error, "error_description": description}
        return {"status": status, "title": message, "correlationId": "00000000-sim",
                "requestId": "REQ-sim"}
