"""Reverse geocoding in the simulator's world: what is near a point.

The nearest known address within 200 m, else the nearest street centre within 1 km,
else the nearest town; nothing outside Liechtenstein's box. Pure, stdlib only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Final

from geotoolkit.testing._gazetteer import (
    BBOX,
    KNOWN_ADDRESSES,
    LOCALITIES,
    STREETS,
    KnownAddress,
    Locality,
    Street,
)
from geotoolkit.testing._places import Hit, address_hit, locality_hit, street_hit

__all__ = ["REVERSE_ADDRESS_METERS", "REVERSE_STREET_METERS", "distance_m", "in_bbox", "nearest",
           "nearest_address"]

#: Reverse geocoding: a known address this close is the answer...
REVERSE_ADDRESS_METERS: Final = 200.0
#: ... else a street centre this close; else the nearest town.
REVERSE_STREET_METERS: Final = 1000.0
_EARTH_METERS: Final = 6_371_008.8


def in_bbox(lon: float, lat: float) -> bool:
    """Inside Liechtenstein's box (the simulator's world)."""
    min_lon, min_lat, max_lon, max_lat = BBOX
    return min_lon <= lon <= max_lon and min_lat <= lat <= max_lat


def distance_m(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """Metres between two points (equirectangular: exact enough at this scale)."""
    x = math.radians(lon2 - lon1) * math.cos(math.radians((lat1 + lat2) / 2))
    y = math.radians(lat2 - lat1)
    return math.hypot(x, y) * _EARTH_METERS


def _closest(lon: float, lat: float, points: Iterable[tuple[float, float, object]]
             ) -> tuple[float, object] | None:
    best: tuple[float, object] | None = None
    for x, y, item in points:
        d = distance_m(lon, lat, x, y)
        if best is None or d < best[0]:
            best = (d, item)
    return best


def nearest_address(lon: float, lat: float, radius_m: float) -> Hit | None:
    """The nearest known address within ``radius_m``, with its distance; else ``None``."""
    if not in_bbox(lon, lat):
        return None
    found = _closest(lon, lat, ((k.lon, k.lat, k) for k in KNOWN_ADDRESSES))
    if found is None or found[0] > radius_m:
        return None
    distance, known = found
    assert isinstance(known, KnownAddress)
    return replace(address_hit(known), distance_m=round(distance, 1))


def nearest(lon: float, lat: float) -> Hit | None:
    """Reverse geocoding: the address within 200 m, else the street within 1 km, else the town."""
    if not in_bbox(lon, lat):
        return None
    address = nearest_address(lon, lat, REVERSE_ADDRESS_METERS)
    if address is not None:
        return address
    street = _closest(lon, lat, ((s.lon, s.lat, s) for s in STREETS))
    if street is not None and street[0] <= REVERSE_STREET_METERS:
        assert isinstance(street[1], Street)
        return replace(street_hit(street[1], exact=True), distance_m=round(street[0], 1))
    town = _closest(lon, lat, ((t.lon, t.lat, t) for t in LOCALITIES))
    assert town is not None and isinstance(town[1], Locality)
    return replace(locality_hit(town[1]), distance_m=round(town[0], 1))
