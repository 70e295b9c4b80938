"""Geonorge: Kartverket's open address search for Norway (no key)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import httpx

from geotoolkit.errors import ConfigurationError
from geotoolkit.providers import _fields as f
from geotoolkit.providers._common import HTTPProvider, one_line
from geotoolkit.providers.precision import precision_of
from geotoolkit.results import Match, NoMatch, Outcome, Place, Query, ReverseQuery

__all__ = ["GEONORGE", "Geonorge"]

GEONORGE = "https://ws.geonorge.no/adresser/v1"

_NUMBER = re.compile(r"^\s*(\d+)\s*([A-Za-zÆØÅæøå]?)\s*$")
_GEOGRAPHIC = frozenset({"EPSG:4258", "EPSG:4326"})  # ETRS89 and WGS84: lon/lat degrees
#: How far around a point ``punktsok`` looks for addresses, in metres, by default.
DEFAULT_RADIUS_M = 100.0
# punktsok answers this many addresses; the nearest is the match.
_REVERSE_CANDIDATES = "10"


class Geonorge(HTTPProvider):
    """Geonorge ``/sok``, sans-I/O; ``adresser[].representasjonspunkt`` is ``{lat, lon, epsg}``.

    Structured queries use ``adressenavn``, ``nummer``/``bokstav``, ``postnummer``
    and ``poststed``; fields Geonorge has no parameter for (county, state,
    country) are dropped. Coordinates are requested in EPSG:4258 and checked.

    Every answer is an address point (``objtype`` ``Vegadresse`` or
    ``Matrikkeladresse``): precision ``address``. Geonorge gives no score, no id and
    no bbox; the place's locality is the ``poststed`` (else the municipality).

    Reverse: ``/punktsok?lat=…&lon=…&radius=…`` (named parameters) with
    ``koordsys=4258``, the input point's reference system: ETRS89 degrees, within a
    metre of WGS84 in Norway. It answers the addresses within ``radius`` metres with
    their ``meterDistanseTilPunkt``; the nearest is the match, none is a ``NoMatch``.

    Parameters
    ----------
    radius
        How far (metres) around a point to look for an address; default 100.
    base_url, user_agent, rate
        As for every provider; no key. No rate is published: the default is a
        conservative 5/s.

    Examples
    --------
    >>> q = Query(street="Karl Johans gate", housenumber="1B", city="Oslo")
    >>> dict(Geonorge().build_request(q).url.params)["bokstav"]
    'B'
    >>> params = Geonorge().build_request(ReverseQuery(10.75, 59.91)).url.params
    >>> params["lat"], params["lon"], params["radius"], params["koordsys"]
    ('59.910000', '10.750000', '100', '4258')
    """

    name = "geonorge"
    default_base_url = GEONORGE
    supports_reverse = True

    def __init__(self, base_url: str | None = None, *, radius: float = DEFAULT_RADIUS_M,
                 user_agent: str | None = None, rate: float | None = None) -> None:
        super().__init__(base_url, user_agent=user_agent, rate=rate)
        if isinstance(radius, bool) or not isinstance(radius, int | float) or not 0 < radius <= 10_000:
            raise ConfigurationError(f"radius must be between 0 and 10 000 metres, got {radius!r}")
        self.radius = float(radius)

    def _options(self) -> dict[str, Any]:
        return {} if self.radius == DEFAULT_RADIUS_M else {"radius": self.radius}

    def _build(self, query: Query) -> httpx.Request:
        params = {"treffPerSide": "1", "utkoordsys": "4258"}
        params.update(_structured(query) or {"sok": one_line(query)})
        return self._get("/sok", params)

    def _build_reverse(self, query: ReverseQuery) -> httpx.Request:
        lon, lat = self._point(query)
        return self._get("/punktsok", {"lat": lat, "lon": lon, "radius": f"{self.radius:g}",
                                       "koordsys": "4258", "utkoordsys": "4258",
                                       "treffPerSide": _REVERSE_CANDIDATES})

    def _parse_body(self, body: Any) -> Outcome:
        found = self._addresses(body)
        return self._address(found[0]) if found else NoMatch(provider=self.name)

    def _parse_reverse(self, body: Any) -> Outcome:
        """The nearest of the addresses around the point (``meterDistanseTilPunkt``)."""
        found = self._addresses(body)
        if not found:
            return self._nothing_here()
        return self._address(min(found[:1000], key=_distance))

    def _addresses(self, body: Any) -> list[Any]:
        found = body.get("adresser") if isinstance(body, Mapping) else None
        if not isinstance(found, list):
            raise self._bad("answer without an adresser list", body)
        return found

    def _address(self, address: object) -> Match:
        point = address.get("representasjonspunkt") if isinstance(address, Mapping) else None
        if not isinstance(address, Mapping) or not isinstance(point, Mapping):
            raise self._bad("address without representasjonspunkt", address)
        epsg = point.get("epsg")
        if not isinstance(epsg, str) or epsg not in _GEOGRAPHIC:
            raise self._bad(f"coordinates in {epsg}, not lon/lat degrees", point)
        return self._match(point.get("lon"), point.get("lat"), _label(address), address,
                           precision=precision_of(self.name, {"objtype": address.get("objtype")}),
                           place=_place(address))


def _distance(address: object) -> float:
    """``meterDistanseTilPunkt``; unknown or unusable distances sort last."""
    distance = f.number(f.dig(address, "meterDistanseTilPunkt"))
    return distance if distance is not None and distance >= 0 else float("inf")


def _place(address: Mapping[str, Any]) -> Place:
    number = " ".join(t for k in ("nummer", "bokstav") if (t := f.text(address.get(k))))
    return f.place(housenumber=number.replace(" ", "") or None,
                   street=address.get("adressenavn"), postcode=address.get("postnummer"),
                   locality=f.first_text(address, "poststed", "kommunenavn"),
                   country_code="NO")


def _structured(query: Query) -> dict[str, str]:
    if query.text is not None:
        return {}
    params: dict[str, str] = {}
    if query.housenumber:
        number = _NUMBER.match(query.housenumber)
        if number is None:
            return {}  # an unusual house number: let free-text search make sense of it
        params["nummer"] = number[1]
        if number[2]:
            params["bokstav"] = number[2].upper()
    for field, param in (("street", "adressenavn"), ("postalcode", "postnummer"),
                         ("city", "poststed")):
        if value := getattr(query, field):
            params[param] = value
    return params if set(params) - {"nummer", "bokstav"} else {}


def _label(address: Mapping[str, Any]) -> str:
    place = " ".join(t for k in ("postnummer", "poststed") if (t := f.text(address.get(k))))
    return ", ".join(p for p in (f.text(address.get("adressetekst")), place) if p)
