"""Photon: komoot's OpenStreetMap search-as-you-type geocoder, public or self-hosted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from geotoolkit.providers import _fields as f
from geotoolkit.providers._common import HTTPProvider, one_line
from geotoolkit.providers._geojson import first_feature, point_of
from geotoolkit.providers.precision import precision_of
from geotoolkit.results import NoMatch, Outcome, Place, Query, ReverseQuery

__all__ = ["PUBLIC_PHOTON", "Photon"]

PUBLIC_PHOTON = "https://photon.komoot.io"


class Photon(HTTPProvider):
    """Photon ``/api`` and ``/reverse`` (GeoJSON, coordinates ``[lon, lat]``), sans-I/O.

    Reverse: ``/reverse?lon=…&lat=…`` (named parameters, WGS84 degrees); the nearest
    OSM object comes first; no features is a ``NoMatch``.

    Photon has no structured search here: structured queries are joined into text.
    The precision comes from ``type`` (then ``osm_key``/``osm_value``); Photon gives
    no score. ``extent`` (``[min_lon, max_lat, max_lon, min_lat]``) becomes the bbox.

    Parameters
    ----------
    base_url
        The instance; default komoot's public one (fair use, throttled).
    language
        Preferred language of labels (``lang``: ``default``, ``en``, ``de``, ``fr``).
    user_agent
        Identifies your application (default: geotoolkit's own).
    rate
        Requests/s; default: the registry's value for the public host, else none.

    Examples
    --------
    >>> Photon().build_request(Query(text="Oslo")).url.params["q"]
    'Oslo'
    >>> Photon().build_request(ReverseQuery(10.75, 59.91)).url.query.decode()
    'lon=10.750000&lat=59.910000&limit=1'
    """

    name = "photon"
    default_base_url = PUBLIC_PHOTON
    supports_reverse = True

    def __init__(self, base_url: str | None = None, *, language: str | None = None,
                 user_agent: str | None = None, rate: float | None = None) -> None:
        super().__init__(base_url, user_agent=user_agent, rate=rate)
        self.language = language

    def _options(self) -> dict[str, Any]:
        return {"language": self.language}

    def _build(self, query: Query) -> httpx.Request:
        params = {"q": one_line(query), "limit": "1"}
        if self.language:
            params["lang"] = self.language
        return self._get("/api", params)

    def _build_reverse(self, query: ReverseQuery) -> httpx.Request:
        lon, lat = self._point(query)
        params = {"lon": lon, "lat": lat, "limit": "1"}
        if self.language:
            params["lang"] = self.language
        return self._get("/reverse", params)

    def _parse_body(self, body: Any) -> Outcome:
        try:
            feature = first_feature(body)
            if feature is None:
                return NoMatch(provider=self.name)
            lon, lat = point_of(feature)
        except TypeError as exc:
            raise self._bad(str(exc), body) from exc
        props = feature.get("properties")
        words = {"type": f.dig(props, "type"),
                 "osm_key/osm_value": f"{f.dig(props, 'osm_key')}/{f.dig(props, 'osm_value')}"}
        return self._match(lon, lat, _label(props), feature,
                           precision=precision_of(self.name, words), place=_place(props))


def _place(props: object) -> Place:
    kind = f.dig(props, "type")
    extent = f.dig(props, "extent")  # [min_lon, max_lat, max_lon, min_lat]
    return f.place(
        osm_type=f.osm_type(f.dig(props, "osm_type")), osm_id=f.osm_id(f.dig(props, "osm_id")),
        housenumber=f.dig(props, "housenumber"),
        street=f.first_text(props, "street", *(("name",) if kind == "street" else ())),
        postcode=f.dig(props, "postcode"),
        locality=f.first_text(props, "city", *(("name",) if kind == "city" else ()), "locality",
                              "district"),
        region=f.first_text(props, "state", "county"), country_code=f.dig(props, "countrycode"),
        bbox=f.bbox(extent[0], extent[3], extent[2], extent[1])
        if isinstance(extent, list) and len(extent) == 4 else None)


def _label(props: object) -> str:
    if not isinstance(props, Mapping):
        return ""
    street = " ".join(t for k in ("street", "housenumber") if (t := f.text(props.get(k))))
    place = " ".join(t for k in ("postcode", "city") if (t := f.text(props.get(k))))
    parts = [f.text(props.get("name")), street, place, f.text(props.get("country"))]
    return ", ".join(p for p in dict.fromkeys(parts) if p)
