"""Reading a provider's answer safely: values that are never trusted, never raise.

Every helper takes whatever JSON gave (or a hostile server sent) and returns a clean
value or ``None``: strings capped in length, finite floats, a checked bounding box,
ISO country codes, OSM references spelled out. A provider's parser builds its
``Place``, ``label`` and ``score`` only through these.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from geotoolkit.providers._iso3166 import country_code
from geotoolkit.results import Place

__all__ = [
    "MAX_LABEL_CHARS",
    "MAX_TEXT_CHARS",
    "bbox",
    "country_code",
    "decimal",
    "dig",
    "first_text",
    "label",
    "number",
    "osm_id",
    "osm_type",
    "place",
    "scaled",
    "text",
]

#: A label longer than this is cut: a hostile answer cannot push megabytes into a row.
MAX_LABEL_CHARS = 1000
#: The same cap for each structured field of a ``Place``.
MAX_TEXT_CHARS = 1000
# A numeric string longer than this is not a number anyone means (float() would take it).
_MAX_NUMBER_CHARS = 64
# A number written as JSON writes one (ASCII digits, a sign, a fraction, an exponent), with
# blanks around it. float() takes more: "4_7" (47.0), other scripts' digits ("٤٧"), "nan",
# "infinity"; none of them is a coordinate or a score a provider means.
_DECIMAL = re.compile(r"[ \t]*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t]*",
                      re.ASCII)

_OSM_TYPES = {"n": "node", "node": "node", "w": "way", "way": "way", "r": "relation",
              "relation": "relation"}


def dig(value: object, *path: str) -> object:
    """``value[path[0]][path[1]]...``, or ``None`` where a level is missing or not an object.

    >>> dig({"a": {"b": 1}}, "a", "b"), dig({"a": [1]}, "a", "b"), dig(None, "a")
    (1, None, None)
    """
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def text(value: object, limit: int = MAX_TEXT_CHARS) -> str | None:
    """A string (or an integer, e.g. a house number) as stripped, capped text; else ``None``.

    >>> text("  Oslo "), text(38), text(True), text({"x": 1}), text("   ")
    ('Oslo', '38', None, None, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        try:
            value = str(value)
        except ValueError:  # more digits than Python converts (sys.int_info.str_digits_check_threshold)
            return None
    if not isinstance(value, str):
        return None
    value = value.strip()[:limit].strip()
    return value or None


def first_text(mapping: object, *keys: str) -> str | None:
    """The first usable :func:`text` among ``mapping[key]`` for ``keys``, in order."""
    for key in keys:
        found = text(dig(mapping, key))
        if found is not None:
            return found
    return None


def label(value: object) -> str:
    """A label: text capped at :data:`MAX_LABEL_CHARS`, ``""`` when there is none."""
    return text(value, MAX_LABEL_CHARS) or ""


def number(value: object) -> float | None:
    """A finite float from a JSON number or numeric string; ``None`` for anything else.

    Never raises: booleans, huge integers (``float()`` overflows), ``NaN``/``Infinity``
    and over-long strings are all ``None``.

    >>> number("59.91"), number(10**400), number(float("nan")), number(True), number("x")
    (59.91, None, None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        result = decimal(value) if isinstance(value, str) else float(value)
    except (ValueError, OverflowError):
        return None
    return result if math.isfinite(result) else None


def decimal(text: str) -> float:
    """The float a numeric string writes as JSON would (``"-9.5"``, ``"4.7e1"``); ``ValueError``
    for anything else ``float()`` would take (``"4_7"``, ``"nan"``, digits of other scripts)
    and for strings over 64 characters.

    >>> decimal(" 47.141"), decimal("-1E2")
    (47.141, -100.0)
    >>> decimal("4_7")
    Traceback (most recent call last):
    ...
    ValueError: '4_7' is not a decimal number
    """
    if len(text) > _MAX_NUMBER_CHARS:
        raise ValueError("a numeric string that long is not a number")
    if not _DECIMAL.fullmatch(text):
        raise ValueError(f"{text!r} is not a decimal number")
    return float(text)


def scaled(value: object, top: float) -> float | None:
    """``value / top`` when ``0 <= value <= top``, else ``None`` (a score in ``[0, 1]``).

    >>> scaled(87, 100), scaled(7, 10), scaled(11, 10), scaled("high", 10)
    (0.87, 0.7, None, None)
    """
    found = number(value)
    if found is None or not 0.0 <= found <= top:
        return None
    return found / top


def bbox(min_lon: object, min_lat: object, max_lon: object,
         max_lat: object) -> tuple[float, float, float, float] | None:
    """``(min_lon, min_lat, max_lon, max_lat)`` if every value is a real coordinate.

    ``min_lon > max_lon`` is kept: the box crosses the antimeridian (as in GeoJSON).
    ``min_lat > max_lat`` is not a box: ``None``.

    >>> bbox("10.75", 59.91, 10.76, "59.92")
    (10.75, 59.91, 10.76, 59.92)
    >>> bbox(10.75, 59.92, 10.76, 59.91) is None, bbox(200, 0, 10, 1) is None
    (True, True)
    """
    values = [number(v) for v in (min_lon, min_lat, max_lon, max_lat)]
    if any(v is None for v in values):
        return None
    west, south, east, north = (float(v) for v in values if v is not None)
    if not (-180.0 <= west <= 180.0 and -180.0 <= east <= 180.0):
        return None
    if not (-90.0 <= south <= north <= 90.0):
        return None
    return west, south, east, north


def osm_type(value: object) -> str | None:
    """``node``/``way``/``relation`` from Nominatim's words or Photon's ``N``/``W``/``R``.

    >>> osm_type("N"), osm_type("way"), osm_type("P")
    ('node', 'way', None)
    """
    return _OSM_TYPES.get(value.strip().lower()) if isinstance(value, str) else None


def osm_id(value: object) -> int | None:
    """A positive OSM id from an integer or a string of digits (LocationIQ sends strings)."""
    if isinstance(value, str) and value.strip().isdecimal() and len(value.strip()) <= 20:
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63:
        return value
    return None


def place(**fields: Any) -> Place:
    """A :class:`~geotoolkit.results.Place` whose text fields pass :func:`text`.

    ``country_code`` passes :func:`country_code` (alpha-2 or alpha-3 in, alpha-2 out);
    ``osm_type``, ``osm_id`` and ``bbox`` are expected already checked.
    """
    for name in ("place_id", "housenumber", "street", "postcode", "locality", "region"):
        fields[name] = text(fields.get(name))
    fields["country_code"] = country_code(fields.get("country_code"))
    return Place(**fields)
