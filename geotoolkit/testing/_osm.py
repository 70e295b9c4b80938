"""The OpenStreetMap family: Nominatim (``/search``, ``/reverse``) and LocationIQ (``/v1``).

Nominatim's results are objects with ``lat`` before ``lon``, both strings with 7
decimals; the precision is in ``category``/``type`` (``class`` in ``format=json``),
``addresstype`` and ``place_rank``. ``/reverse`` answers one object, or
``{"error": "Unable to geocode"}``. LocationIQ speaks the same with its own conventions:
``format=json``, ``matchquality`` on request, a no-match is ``404 {"error": "Unable to
geocode"}``, a spent day is ``429 {"error": "Rate Limited Day"}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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
from geotoolkit.testing._places import NOMINATIM_FIELDS, Hit
from geotoolkit.testing._reply import Answer

__all__ = ["LocationIQ", "Nominatim"]

_LICENCE: Final = "Data © OpenStreetMap contributors, ODbL 1.0. http://osm.org/copyright (simulated)"
_FORMATS: Final = frozenset({"jsonv2", "json"})
_NOT_FOUND: Final = "Unable to geocode"

# Per level: osm_type, category, type, addresstype, place_rank, importance.
_KINDS: Final[Mapping[str, tuple[str | None, str, str, str, int, float]]] = {
    "address": ("node", "building", "house", "building", 30, 0.5),
    "street": ("way", "highway", "residential", "road", 26, 0.1),
    "postcode": (None, "place", "postcode", "postcode", 21, 0.01),
    "locality": ("node", "place", "town", "town", 16, 0.45),
    "country": ("node", "place", "country", "country", 4, 0.7),
}
# LocationIQ's matchquality per level: matchcode, matchtype, matchlevel.
_QUALITY: Final[Mapping[str, tuple[str, str, str]]] = {
    "address": ("exact", "point", "building"), "street": ("fallback", "centroid", "street"),
    "postcode": ("fallback", "centroid", "postalcode"), "locality": ("fallback", "centroid", "city"),
    "country": ("fallback", "centroid", "country")}


def _town_key(hit: Hit) -> str:
    return "town" if hit.municipality == "Vaduz" else "village"


def _address(hit: Hit) -> dict[str, str]:
    """Nominatim's ``address`` (addressdetails) for a hit."""
    if hit.level == "country":
        return {"country": "Liechtenstein", "country_code": "li"}
    out: dict[str, str] = {}
    if hit.housenumber:
        out["house_number"] = hit.housenumber
    if hit.street:
        out["road"] = hit.street
    if hit.hashed:
        out["municipality"] = hit.municipality or ""
    elif hit.locality:
        out[_town_key(hit)] = hit.locality
        if hit.level == "address":
            out["municipality"] = hit.municipality or ""
        else:
            out["county"] = hit.region or ""
    if hit.postcode:
        out["postcode"] = hit.postcode
    return {**out, "country": "Liechtenstein", "country_code": "li"}


def _display(hit: Hit) -> str:
    if hit.hashed:
        return hit.label
    if hit.level == "address":
        return f"{hit.housenumber}, {hit.street}, {hit.locality}, {hit.postcode}, Liechtenstein"
    if hit.level == "street":
        return f"{hit.street}, {hit.locality}, {hit.region}, {hit.postcode}, Liechtenstein"
    if hit.level == "postcode":
        return f"{hit.postcode}, {hit.locality}, {hit.region}, Liechtenstein"
    if hit.level == "locality":
        return f"{hit.name}, {hit.region}, Liechtenstein"
    return "Liechtenstein"


def place(hit: Hit, fmt: str = "jsonv2", addressdetails: bool = True) -> dict[str, Any]:
    """One Nominatim result: ``lat`` before ``lon``, both strings with 7 decimals."""
    osm_type, category, kind, addresstype, rank, importance = _KINDS[hit.level]
    if hit.hashed:
        category, kind, addresstype = "place", "house", "place"
        importance = round(0.2 + (hit.id % 1000) / 5000, 5)
    if hit.level == "locality" and hit.municipality != "Vaduz":
        kind = addresstype = "village"
    out: dict[str, Any] = {"place_id": hit.id, "licence": _LICENCE}
    if osm_type is not None:
        out["osm_type"] = osm_type
        out["osm_id"] = hit.id * 7 if hit.hashed else 9_000_000_000 + hit.id % 100_000_000
    out.update({"lat": f"{hit.lat:.7f}", "lon": f"{hit.lon:.7f}",
                "category" if fmt == "jsonv2" else "class": category, "type": kind,
                "place_rank": rank, "importance": importance, "addresstype": addresstype,
                "name": hit.name, "display_name": _display(hit)})
    if addressdetails:
        out["address"] = _address(hit)
    min_lon, min_lat, max_lon, max_lat = hit.bbox
    out["boundingbox"] = [f"{min_lat:.7f}", f"{max_lat:.7f}", f"{min_lon:.7f}", f"{max_lon:.7f}"]
    return out


def _flag(params: Mapping[str, str], name: str, default: str = "1") -> bool:
    return params.get(name, default).strip().casefold() not in ("0", "false")


class Nominatim(Dialect):
    """Nominatim: ``/search`` (free text ``q`` or structured fields) and ``/reverse``."""

    name = "nominatim"
    key_param = "key"
    paths: ClassVar[Mapping[str, Endpoint]] = {
        "/search": "forward", "/search.php": "forward", "/reverse": "reverse",
        "/reverse.php": "reverse", "/status": "status", "/status.php": "status"}
    mark_paths: ClassVar[Mapping[str, tuple[str | int, ...]]] = {
        "label": ("display_name",), "lon": ("lon",), "lat": ("lat",)}
    formats: ClassVar[frozenset[str]] = _FORMATS
    default_format: ClassVar[str] = "jsonv2"
    reverse_format: ClassVar[str] = "xml"  # Nominatim's documented default for /reverse

    def claims(self, path: str, params: Mapping[str, str]) -> bool:
        # Photon's /reverse takes no format; Nominatim's JSON answers need one.
        return not (path == "/reverse" and "format" not in params)

    def _format(self, params: Mapping[str, str], default: str) -> str:
        fmt = params.get("format", default)
        if fmt not in self.formats:
            raise BadRequest(f"unsupported format {fmt!r}: use {' or '.join(sorted(self.formats))}")
        return fmt

    def parse(self, endpoint: Endpoint, request: Incoming) -> Lookup:
        params = request.params
        default = self.default_format if endpoint == "forward" else self.reverse_format
        options = {"format": self._format(params, default),
                   "addressdetails": "1" if _flag(params, "addressdetails") else "0",
                   "matchquality": "1" if _flag(params, "matchquality", "0") else "0"}
        if endpoint == "reverse":
            point = (coordinate(params.get("lon"), "lon", 180.0),
                     coordinate(params.get("lat"), "lat", 90.0))
            return Lookup("reverse", point=point, options=options)
        limit = params.get("limit")
        if limit is not None and not limit.strip().lstrip("-").isdigit():
            raise BadRequest(f"parameter 'limit' must be an integer, got {limit!r}")
        text = params.get("q")
        has_text = text is not None and bool(text.strip())
        fields = {k: params[k] for k in NOMINATIM_FIELDS if params.get(k, "").strip()}
        if has_text and fields:
            raise BadRequest("structured query parameters can not be used together with 'q'")
        if not has_text and not fields:
            raise BadRequest("nothing to search for: give 'q' or structured parameters")
        return Lookup("forward", text=text if has_text else None, fields={} if has_text else fields,
                      countries=countries(params.get("countrycodes")), options=options)

    def item(self, lookup: Lookup, hit: Hit) -> dict[str, Any]:
        out = place(hit, lookup.options.get("format", "jsonv2"),
                    lookup.options.get("addressdetails") != "0")
        if lookup.options.get("matchquality") == "1":
            code, kind, level = _QUALITY[hit.level]
            if hit.level == "street" and not hit.exact:
                code = "fallback"
            out["matchquality"] = {"matchcode": code, "matchtype": kind, "matchlevel": level}
        return out

    def document(self, lookup: Lookup, items: list[dict[str, Any]]) -> object:
        if lookup.endpoint == "reverse":
            return items[0] if items else {"error": _NOT_FOUND}
        return items


class LocationIQ(Nominatim):
    """LocationIQ ``/v1/search`` and ``/v1/reverse``: Nominatim's answers, its own refusals."""

    name = "locationiq"
    base_suffix = "/v1"
    paths: ClassVar[Mapping[str, Endpoint]] = {
        "/v1/search": "forward", "/v1/search.php": "forward", "/v1/reverse": "reverse",
        "/v1/reverse.php": "reverse", "/search": "forward", "/reverse": "reverse"}
    default_format = reverse_format = "json"
    _MESSAGES: ClassVar[Mapping[str, str]] = {
        "missing_key": "Invalid key", "invalid_key": "Invalid key",
        "rate_limited": "Rate Limited Second", "quota": "Rate Limited Day",
        "unavailable": "Unknown error - Please try again after some time",
        "bad_request": "Invalid Request", "not_found": "Invalid Request"}

    def claims(self, path: str, params: Mapping[str, str]) -> bool:
        """``/v1/...`` with a key; on the bare paths: ``matchquality`` (LocationIQ's own
        option), or a ``key`` with ``format=json`` (geotoolkit's Nominatim asks jsonv2)."""
        if path.startswith("/v1/"):
            pelias = "text" in params or any(k.startswith(("point.", "boundary.")) for k in params)
            return not pelias and ("key" in params or "format" in params or "q" in params)
        own = "matchquality" in params or ("key" in params and params.get("format") == "json")
        return path in ("/search", "/reverse") and own

    def status_of(self, kind: ErrorKind) -> int:
        return {"invalid_key": 401, "quota": 429}.get(kind, super().status_of(kind))

    def error_body(self, kind: ErrorKind, status: int, message: str) -> object:
        return {"error": self._MESSAGES.get(kind, message)}

    def answer_status(self, lookup: Lookup, hits: tuple[Hit | None, ...]) -> int:
        return 200 if hits and hits[0] is not None else 404

    def answer(self, lookup: Lookup, hits: tuple[Hit | None, ...]) -> Answer:
        if hits and hits[0] is not None:
            return super().answer(lookup, hits)
        normal = super().answer(lookup, hits)  # the fallback, for faults that need a result
        body = json.dumps({"error": _NOT_FOUND}).encode()
        return Answer(lambda marks: normal.build(marks) if marks else body, status=404)
