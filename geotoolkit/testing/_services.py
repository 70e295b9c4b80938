"""Geocoding services with their own shapes: ArcGIS, Geonorge and the US Census (one by one).

- ArcGIS ``.../findAddressCandidates`` (``SingleLine`` or ``Address``, ``City``...) and
  ``.../reverseGeocode?location=x,y`` (longitude first): ``Addr_type`` (``PointAddress``,
  ``StreetName``, ``Postal``, ``Locality`` refined by ``Type``) and a ``score``; errors
  are HTTP 200 with ``{"error": {"code": 498 | 499 | 429 | 400 | 500, ...}}``; the key is
  ``token``; ``outSR`` 4326 or 3857 (Web Mercator); only the ``outFields`` asked for.
- Geonorge ``/sok`` and ``/punktsok?lat=&lon=&radius=`` (metres): address points only
  (``objtype`` ``Vegadresse``), so coarser queries find nothing; no keys.
- Census ``/locations/onelineaddress`` and ``/locations/address``: street addresses
  only, each placed on a TIGER line; no keys (the batch endpoint is in ``_batch``).
"""

from __future__ import annotations

import json
import math
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
    point_pair,
)
from geotoolkit.testing._gazetteer import COUNTRY
from geotoolkit.testing._nearest import nearest_address
from geotoolkit.testing._places import Hit, resolve
from geotoolkit.testing._reply import Reply, json_reply

__all__ = ["ArcGIS", "Census", "Geonorge", "census_match"]

# --------------------------------------------------------------------------- ArcGIS

_MERCATOR: Final = frozenset({"3857", "102100", "102113", "900913"})
_WGS84: Final = frozenset({"4326", ""})
_ARCGIS_FIELDS: Final = {"Address": "street", "City": "city", "Subregion": "county",
                         "Region": "state", "Postal": "postalcode", "CountryCode": "country"}
# Per level: Addr_type, score.
_ARCGIS: Final[Mapping[str, tuple[str, float]]] = {
    "address": ("PointAddress", 100.0), "street": ("StreetName", 90.0),
    "postcode": ("Postal", 100.0), "locality": ("Locality", 100.0), "country": ("Locality", 100.0)}
_ARCGIS_ERRORS: Final[Mapping[str, tuple[int, str]]] = {
    "missing_key": (499, "Token Required"), "invalid_key": (498, "Invalid token."),
    "rate_limited": (429, "Too many requests."), "unavailable": (500, "Unable to process request."),
    "bad_request": (400, "Unable to complete operation."), "quota": (402, "Credits exhausted."),
}
_NO_ADDRESS: Final = "Unable to find address for the specified location."


def _mercator(lon: float, lat: float) -> tuple[float, float]:
    x = math.radians(lon) * 6378137.0
    y = math.log(math.tan(math.pi / 4 + math.radians(lat) / 2)) * 6378137.0
    return round(x, 2), round(y, 2)


def _arcgis_type(hit: Hit) -> str:
    if hit.level == "country":
        return "Country"
    if hit.level == "locality":
        return "City" if hit.municipality == "Vaduz" else "Village"
    return ""


def _arcgis_attributes(hit: Hit, addr_type: str, score: float) -> dict[str, Any]:
    return {"Match_addr": hit.label, "LongLabel": hit.label, "ShortLabel": hit.street_line or hit.name,
            "Addr_type": addr_type, "Type": _arcgis_type(hit), "Score": score,
            "AddNum": hit.housenumber or "", "Address": hit.street_line or "",
            "StPreDir": "", "StPreType": "", "StName": hit.street or "", "StType": "", "StDir": "",
            "Postal": hit.postcode or "", "City": hit.locality if hit.level != "country" else "",
            "Subregion": hit.region or "", "Region": hit.region or "",
            "CntryName": COUNTRY.name, "Country": COUNTRY.alpha3, "CountryCode": COUNTRY.alpha3}


class ArcGIS(Dialect):
    """ArcGIS GeocodeServer: ``findAddressCandidates`` and ``reverseGeocode`` (f=json)."""

    name = "arcgis"
    key_param = "token"
    suffix_paths = True
    paths: ClassVar[Mapping[str, Endpoint]] = {"/findAddressCandidates": "forward",
                                               "/reverseGeocode": "reverse"}
    mark_paths: ClassVar[Mapping[str, tuple[str | int, ...]]] = {
        "label": ("address",), "lon": ("location", "x"), "lat": ("location", "y")}

    def status_of(self, kind: ErrorKind) -> int:
        return 200 if kind in _ARCGIS_ERRORS and kind != "quota" else super().status_of(kind)

    def error_body(self, kind: ErrorKind, status: int, message: str) -> object:
        code, text = _ARCGIS_ERRORS.get(kind, (status, message))
        details = [message] if kind == "bad_request" else []
        return {"error": {"code": code, "message": text, "details": details}}

    def in_body_error(self) -> Reply:
        return json_reply(200, self.error_body("unavailable", 200, ""))

    def parse(self, endpoint: Endpoint, request: Incoming) -> Lookup:
        params = request.params
        if params.get("f", "html").casefold() not in ("json", "pjson"):
            raise BadRequest("Only f=json is simulated")
        out_sr = params.get("outSR", "").strip()
        out_sr = str(json.loads(out_sr).get("wkid", "")) if out_sr.startswith("{") else out_sr
        if out_sr not in _WGS84 | _MERCATOR:
            raise BadRequest(f"Invalid outSR {out_sr!r} (simulated: 4326 or 3857)")
        options = {"outSR": out_sr or "4326", "outFields": params.get("outFields", "")}
        if endpoint == "reverse":
            return Lookup("reverse", point=_arcgis_point(params.get("location")), options=options)
        text = params.get("SingleLine", "")
        filter_ = countries(params.get("CountryCode") or params.get("sourceCountry"))
        if text.strip():
            return Lookup("forward", text=text, countries=filter_, options=options)
        fields = {_ARCGIS_FIELDS[k]: v for k, v in params.items() if k in _ARCGIS_FIELDS and v.strip()}
        if not fields:
            raise BadRequest("SingleLine or Address is required.")
        return Lookup("forward", fields=fields, countries=filter_, options=options)

    def _location(self, lookup: Lookup, hit: Hit) -> dict[str, float]:
        if lookup.options.get("outSR") in _MERCATOR:
            x, y = _mercator(hit.lon, hit.lat)
            return {"x": x, "y": y}
        return {"x": hit.lon, "y": hit.lat}

    def item(self, lookup: Lookup, hit: Hit) -> dict[str, Any]:
        addr_type, score = _ARCGIS[hit.level]
        score = 95.0 if hit.hashed else (85.0 if not hit.exact else score)
        attributes = _arcgis_attributes(hit, addr_type, score)
        if lookup.endpoint == "reverse":
            return {"address": {**attributes, "X": hit.lon, "Y": hit.lat},
                    "location": {**self._location(lookup, hit), "spatialReference": _sr(lookup)}}
        wanted = {f.strip().casefold() for f in lookup.options.get("outFields", "").split(",")}
        if "*" not in wanted:
            attributes = {k: v for k, v in attributes.items() if k.casefold() in wanted}
        west, south, east, north = hit.bbox
        return {"address": hit.label, "location": self._location(lookup, hit), "score": score,
                "attributes": attributes,
                "extent": {"xmin": west, "ymin": south, "xmax": east, "ymax": north}}

    def mark(self, item: dict[str, Any], marks: Mapping[str, str]) -> None:
        if "score" in item:
            return super().mark(item, marks)
        reverse = {"label": ("address", "Match_addr"), "lon": ("location", "x"), "lat": ("location", "y")}
        for name, value in marks.items():
            first, second = reverse[name]
            item[first][second] = value
        return None

    def document(self, lookup: Lookup, items: list[dict[str, Any]]) -> object:
        if lookup.endpoint == "reverse":
            return items[0] if items else self.error_body("bad_request", 200, _NO_ADDRESS)
        return {"spatialReference": _sr(lookup), "candidates": items}


def _sr(lookup: Lookup) -> dict[str, int]:
    if lookup.options.get("outSR") in _MERCATOR:
        return {"wkid": 102100, "latestWkid": 3857}
    return {"wkid": 4326, "latestWkid": 4326}


def _arcgis_point(value: str | None) -> tuple[float, float]:
    """``location``: ``x,y`` (longitude first) or a JSON point ``{"x": .., "y": ..}``."""
    text = (value or "").strip()
    if text.startswith("{"):
        try:
            point = json.loads(text)
            return (coordinate(str(point["x"]), "location", 180.0),
                    coordinate(str(point["y"]), "location", 90.0))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise BadRequest(f"Invalid location {value!r}") from None
    return point_pair(text, "location", lon_first=True)


# --------------------------------------------------------------------------- Geonorge

_GEONORGE_FIELDS: Final = {"adressenavn": "street", "postnummer": "postalcode", "poststed": "city",
                           "kommunenavn": "city"}


class Geonorge(Dialect):
    """Geonorge ``/sok`` and ``/punktsok``: Norway's address register (address points)."""

    name = "geonorge"
    suffix_paths = True
    paths: ClassVar[Mapping[str, Endpoint]] = {"/sok": "forward", "/punktsok": "reverse"}
    mark_paths: ClassVar[Mapping[str, tuple[str | int, ...]]] = {
        "label": ("adressetekst",), "lon": ("representasjonspunkt", "lon"),
        "lat": ("representasjonspunkt", "lat")}

    def error_body(self, kind: ErrorKind, status: int, message: str) -> object:
        return {"code": status, "message": message}

    def parse(self, endpoint: Endpoint, request: Incoming) -> Lookup:
        params = request.params
        per_page = params.get("treffPerSide", "10").strip()
        if not per_page.isdigit() or not 1 <= int(per_page) <= 1000:
            raise BadRequest("treffPerSide må være mellom 1 og 1000")
        epsg = params.get("utkoordsys", "4258").strip()
        if epsg not in ("4258", "4326"):
            raise BadRequest(f"utkoordsys {epsg} is not simulated (use 4258 or 4326)")
        options = {"epsg": f"EPSG:{epsg}", "sok": request.path}
        if endpoint == "reverse":
            for name in ("lat", "lon", "radius"):
                if not params.get(name, "").strip():
                    raise BadRequest(f"{name} må være angitt")
            point = (coordinate(params["lon"], "lon", 180.0), coordinate(params["lat"], "lat", 90.0))
            return Lookup("reverse", point=point, radius_m=coordinate(params["radius"], "radius", 1e6),
                          options=options)
        text = params.get("sok", "")
        if text.strip():
            return Lookup("forward", text=text, options=options)
        fields = {_GEONORGE_FIELDS[k]: v for k, v in params.items() if k in _GEONORGE_FIELDS and v.strip()}
        number = params.get("nummer", "").strip() + params.get("bokstav", "").strip()
        if number and "street" in fields:
            fields["street"] = f"{fields['street']} {number}"
        if not fields:
            raise BadRequest("Minst ett søkekriterium må være angitt")
        return Lookup("forward", fields=fields, options=options)

    def find(self, lookup: Lookup) -> Hit | None:
        """Address points only: a street, a postcode or a town alone finds nothing."""
        if lookup.point is not None:
            return nearest_address(*lookup.point, lookup.radius_m or 0.0)
        hit = resolve(lookup.text, lookup.fields)
        return hit if hit is not None and hit.level == "address" else None

    def item(self, lookup: Lookup, hit: Hit) -> dict[str, Any]:
        number = hit.housenumber or ""
        digits = "".join(c for c in number if c.isdigit())
        out: dict[str, Any] = {
            "adressenavn": hit.street, "adressetekst": hit.street_line or hit.name,
            "adressetilleggsnavn": None, "adressekode": hit.id % 100_000,
            "nummer": int(digits) if digits else None, "bokstav": number[len(digits):],
            "kommunenummer": "0000", "kommunenavn": (hit.municipality or "").upper(),
            "gardsnummer": 1, "bruksnummer": hit.id % 1000, "festenummer": 0, "undernummer": None,
            "bruksenhetsnummer": [], "objtype": "Vegadresse",
            "poststed": (hit.locality or "").upper(), "postnummer": hit.postcode,
            "adressetekstutenadressetilleggsnavn": hit.street_line or hit.name,
            "stedfestingverifisert": True,
            "representasjonspunkt": {"epsg": lookup.options.get("epsg", "EPSG:4258"),
                                     "lat": hit.lat, "lon": hit.lon},
            "oppdateringsdato": "2024-03-11T10:15:06"}
        if hit.distance_m is not None:
            out["meterDistanseTilPunkt"] = hit.distance_m
        return out

    def document(self, lookup: Lookup, items: list[dict[str, Any]]) -> object:
        meta = {"totaltAntallTreff": len(items), "asciiKompatibel": True, "side": 0,
                "treffPerSide": 1, "viserFra": 0, "viserTil": len(items),
                "sokeStreng": lookup.query or ""}
        return {"metadata": meta, "adresser": items}


# --------------------------------------------------------------------------- Census


def census_match(hit: Hit) -> tuple[str, str]:
    """``(matched address, TIGER line id)``: ``"38 STÄDTLE, VADUZ, LI, 9490"``."""
    street = " ".join(p for p in (hit.housenumber, hit.street) if p)
    return (f"{street}, {hit.locality}, {COUNTRY.code}, {hit.postcode}".upper(),
            str(700_000_000 + hit.id % 100_000_000))


class Census(Dialect):
    """Census ``/locations/onelineaddress`` and ``/locations/address`` (``format=json``)."""

    name = "census"
    suffix_paths = True
    paths: ClassVar[Mapping[str, Endpoint]] = {"/locations/onelineaddress": "forward",
                                               "/locations/address": "forward"}
    mark_paths: ClassVar[Mapping[str, tuple[str | int, ...]]] = {
        "label": ("matchedAddress",), "lon": ("coordinates", "x"), "lat": ("coordinates", "y")}

    def error_body(self, kind: ErrorKind, status: int, message: str) -> object:
        return {"errors": [message], "status": str(status)}

    def parse(self, endpoint: Endpoint, request: Incoming) -> Lookup:
        params = request.params
        if not params.get("benchmark", "").strip():
            raise BadRequest("Benchmark must be provided")
        if params.get("format", "json") != "json":
            raise BadRequest("Only format=json is simulated")
        if request.path.endswith("/onelineaddress"):
            text = params.get("address", "")
            if not text.strip() or len(text) > 100:
                raise BadRequest("Address cannot be empty and cannot exceed 100 characters")
            return Lookup("forward", text=text, options={"input": text})
        fields = {"street": params.get("street", ""), "city": params.get("city", ""),
                  "state": params.get("state", ""), "postalcode": params.get("zip", "")}
        if not fields["street"].strip():
            raise BadRequest("Street address cannot be empty and cannot exceed 100 characters")
        return Lookup("forward", fields={k: v for k, v in fields.items() if v.strip()},
                      options={"input": ", ".join(v for v in fields.values() if v)})

    def find(self, lookup: Lookup) -> Hit | None:
        """Street addresses only (known or hashed); a town or a postcode alone finds nothing."""
        hit = resolve(lookup.text, lookup.fields)
        return hit if hit is not None and hit.level == "address" else None

    def item(self, lookup: Lookup, hit: Hit) -> dict[str, Any]:
        matched, tiger = census_match(hit)
        number = int("".join(c for c in hit.housenumber or "" if c.isdigit()) or 0)
        low = number - number % 100
        components = {"zip": hit.postcode, "streetName": (hit.street or "").upper(), "preType": "",
                      "city": (hit.locality or "").upper(), "preDirection": "",
                      "suffixDirection": "", "fromAddress": str(low), "state": COUNTRY.code,
                      "suffixType": "", "toAddress": str(low + 98), "suffixQualifier": "",
                      "preQualifier": ""}
        return {"tigerLine": {"side": "L", "tigerLineId": tiger},
                "coordinates": {"x": hit.lon, "y": hit.lat}, "addressComponents": components,
                "matchedAddress": matched}

    def document(self, lookup: Lookup, items: list[dict[str, Any]]) -> object:
        benchmark = {"isDefault": True, "benchmarkDescription": "Public Address Ranges - Current "
                     "Benchmark (simulated)", "id": "4", "benchmarkName": "Public_AR_Current"}
        return {"result": {"input": {"address": {"address": lookup.options.get("input", "")},
                                     "benchmark": benchmark},
                           "addressMatches": items}}

