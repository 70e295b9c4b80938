"""GeoJSON FeatureCollection answers (Photon, Pelias, Mapbox): ``[lon, lat]`` order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["first_feature", "point_of"]


def first_feature(body: Any) -> Mapping[str, Any] | None:
    """The first feature of a FeatureCollection, ``None`` when empty; TypeError if not one."""
    if not isinstance(body, Mapping) or not isinstance(body.get("features"), list):
        raise TypeError("not a GeoJSON FeatureCollection")
    features = body["features"]
    if not features:
        return None
    feature = features[0]
    if not isinstance(feature, Mapping):
        raise TypeError("a feature is not an object")
    return feature


def point_of(feature: Mapping[str, Any]) -> tuple[object, object]:
    """``(lon, lat)`` of a Point feature: GeoJSON puts longitude first."""
    geometry = feature.get("geometry")
    coords = geometry.get("coordinates") if isinstance(geometry, Mapping) else None
    if not isinstance(coords, list) or len(coords) < 2:
        raise TypeError("feature without Point coordinates")
    return coords[0], coords[1]
