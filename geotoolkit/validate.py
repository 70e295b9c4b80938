"""Coordinate validation before a Point is built: pure functions, stdlib only."""

from __future__ import annotations

import math

__all__ = ["check_lonlat"]


def check_lonlat(lon: float, lat: float) -> str | None:
    """Return why ``(lon, lat)`` cannot be a WGS84 point, or ``None`` when it can.

    >>> check_lonlat(9.52, 47.14) is None
    True
    >>> check_lonlat(0.0, 0.0)
    'null island (0, 0)'
    >>> check_lonlat(47.14, 99.0)
    'latitude 99.0 out of range [-90, 90]'
    """
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
