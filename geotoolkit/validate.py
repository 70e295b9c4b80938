"""Coordinate validation before a Point is built: pure functions, stdlib only.

A pair is checked in this order: numbers, finite, ``lon`` in [-180, 180], ``lat`` in
[-90, 90], not "Null Island" (0, 0); then, when a country is given, inside that
country's bounding boxes. Nothing is ever corrected: a pair that looks swapped is
reported as such and left alone.

The boxes come from ``geotoolkit/data/country_bboxes.csv``: approximate extents of
the Natural Earth Admin 0 layers (public domain). A box with ``min_lon > max_lon``
crosses the antimeridian.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

from geotoolkit.errors import ConfigurationError

__all__ = [
    "COUNTRY_MARGIN_DEGREES",
    "BBox",
    "check_lonlat",
    "check_point",
    "country_bboxes",
    "country_code",
    "country_name",
    "in_country",
    "require_country",
    "row_countries",
]

#: Tolerance around a country's boxes, in degrees: the table is approximate.
COUNTRY_MARGIN_DEGREES = 0.1


@dataclass(frozen=True)
class BBox:
    """A lon/lat box; ``min_lon > max_lon`` means it crosses the antimeridian.

    >>> BBox(170.0, -50.0, -170.0, -30.0).contains(179.5, -40.0)
    True
    >>> BBox(170.0, -50.0, -170.0, -30.0).contains(0.0, -40.0)
    False
    """

    min_lon: float
    min_lat: float
    max_lon: float
    max_lat: float

    def contains(self, lon: float, lat: float, margin: float = 0.0) -> bool:
        """Whether ``(lon, lat)`` lies in the box widened by ``margin`` degrees."""
        if not self.min_lat - margin <= lat <= self.max_lat + margin:
            return False
        low, high = self.min_lon - margin, self.max_lon + margin
        if self.min_lon <= self.max_lon:
            return low <= lon <= high
        return lon >= low or lon <= high


@dataclass(frozen=True)
class _Country:
    code: str
    name: str
    boxes: tuple[BBox, ...]


def _rows(text: str) -> list[dict[str, str]]:
    lines = (line for line in io.StringIO(text) if not line.startswith("#"))
    return list(csv.DictReader(lines))


@functools.cache
def _countries() -> Mapping[str, _Country]:
    text = resources.files("geotoolkit").joinpath("data", "country_bboxes.csv").read_text("utf-8")
    names: dict[str, str] = {}
    boxes: dict[str, list[BBox]] = {}
    for row in _rows(text):
        code = row["iso_a2"].strip().upper()
        names.setdefault(code, row["name"].strip())
        boxes.setdefault(code, []).append(BBox(
            float(row["min_lon"]), float(row["min_lat"]), float(row["max_lon"]),
            float(row["max_lat"])))
    return MappingProxyType({c: _Country(c, names[c], tuple(b)) for c, b in boxes.items()})


@functools.cache
def _by_name() -> Mapping[str, str]:
    return MappingProxyType({c.name.casefold(): c.code for c in _countries().values()})


def country_bboxes() -> Mapping[str, tuple[BBox, ...]]:
    """Every country's boxes, by upper-case ISO 3166-1 alpha-2 code.

    >>> country_bboxes()["LI"]
    (BBox(min_lon=9.47, min_lat=47.05, max_lon=9.64, max_lat=47.27),)
    """
    return MappingProxyType({code: c.boxes for code, c in _countries().items()})


def country_code(value: object) -> str | None:
    """The ISO alpha-2 code for a code or an English name (any case); ``None`` if unknown.

    >>> country_code("li"), country_code("Liechtenstein"), country_code("Atlantis")
    ('LI', 'LI', None)
    """
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.upper() in _countries():
        return text.upper()
    return _by_name().get(text.casefold())


def require_country(value: object) -> str:
    """Like :func:`country_code`, but raise ``ConfigurationError`` for unknown values."""
    code = country_code(value)
    if code is None:
        raise ConfigurationError(
            f"country must be an ISO 3166-1 alpha-2 code such as 'LI' or 'FR', got {value!r}")
    return code


def row_countries(country: str | Sequence[object] | None, n: int) -> list[str | None]:
    """One ISO code (or None: no country check) per row: one code for all, or one code or
    country name per row (an unknown value skips the check).

    >>> row_countries("li", 2), row_countries(["Liechtenstein", "nowhere"], 2)
    (['LI', 'LI'], ['LI', None])
    """
    if country is None:
        return [None] * n
    if isinstance(country, str):
        return [require_country(country)] * n
    if len(country) != n:
        raise ValueError(f"{len(country)} countries for {n} rows")
    return [country_code(value) for value in country]


def country_name(code: str) -> str:
    """The English name of a known code.

    >>> country_name("li")
    'Liechtenstein'
    """
    return _countries()[require_country(code)].name


def in_country(lon: float, lat: float, code: str, margin: float = COUNTRY_MARGIN_DEGREES) -> bool:
    """Whether ``(lon, lat)`` lies in one of the country's boxes (widened by ``margin``).

    >>> in_country(9.52, 47.14, "LI"), in_country(47.14, 9.52, "LI")
    (True, False)
    >>> in_country(-176.5, -44.0, "NZ")  # the Chatham Islands, across the antimeridian
    True
    """
    boxes = _countries()[require_country(code)].boxes
    return any(box.contains(lon, lat, margin) for box in boxes)


def check_lonlat(lon: float, lat: float) -> str | None:
    """Return why ``(lon, lat)`` cannot be a WGS84 point, or ``None`` when it can.

    >>> check_lonlat(9.52, 47.14) is None
    True
    >>> check_lonlat(0.0, 0.0)
    'null island (0, 0)'
    >>> check_lonlat(47.14, 99.0)
    'latitude 99.0 out of range [-90, 90]'
    """
    if isinstance(lon, bool) or isinstance(lat, bool):
        return "coordinates are not numbers"
    if not (isinstance(lon, int | float) and isinstance(lat, int | float)):
        return "coordinates are not numbers"
    if not (math.isfinite(lon) and math.isfinite(lat)):
        return f"coordinates are not finite ({lon}, {lat})"
    if not -180.0 <= lon <= 180.0:
        return f"longitude {lon} out of range [-180, 180]"
    if not -90.0 <= lat <= 90.0:
        return f"latitude {lat} out of range [-90, 90]"
    if lon == 0.0 and lat == 0.0:
        return "null island (0, 0)"
    return None


def _swapped(lon: float, lat: float, code: str) -> str:
    name = _countries()[code].name
    return (f"coordinates look swapped: (lon, lat) = ({lon}, {lat}) is outside {code} ({name}) "
            f"but ({lat}, {lon}) is inside; not swapped automatically")


def check_point(lon: float, lat: float, country: str | None = None) -> str | None:
    """Return why ``(lon, lat)`` should not become a Point, or ``None`` when it may.

    With ``country`` (an ISO alpha-2 code), a point outside that country's boxes is
    flagged, and reported as swapped when ``(lat, lon)`` would fall inside.

    >>> check_point(9.52, 47.14, "LI") is None
    True
    >>> check_point(47.14, 9.52, "LI").startswith("coordinates look swapped")
    True
    >>> check_point(16.37, 48.21, "LI")
    'outside LI (Liechtenstein): (lon, lat) = (16.37, 48.21)'
    """
    problem = check_lonlat(lon, lat)
    if country is None:
        return problem
    code = require_country(country)
    if problem is None and in_country(lon, lat, code):
        return None
    if check_lonlat(lat, lon) is None and in_country(lat, lon, code):
        return _swapped(lon, lat, code)
    return problem or f"outside {code} ({_countries()[code].name}): (lon, lat) = ({lon}, {lat})"
