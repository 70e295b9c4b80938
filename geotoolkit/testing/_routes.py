"""Which provider a request is for: its path (and, where providers share one, its parameters).

Every provider is served at the path its own API uses, on the simulator's root URL (so
``Provider(base_url=sim.url)`` works), and under ``/<name>`` as well (``sim.base_url(name)``:
never ambiguous). Three bare paths are shared, and decided by what only one API sends:

- ``/search``, ``/reverse``: LocationIQ when ``matchquality`` is present (its own option)
  or a ``key`` comes with ``format=json``; else Nominatim when ``format`` is present, and
  ``/reverse`` without ``format`` is Photon's (which has none);
- ``/v1/search``, ``/v1/reverse``: Pelias (``text``, ``point.lat``...); LocationIQ when
  it sends ``key``, ``format`` or ``q`` and nothing of Pelias's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from geotoolkit.testing._batch import CensusBatch, MapboxBatch
from geotoolkit.testing._commercial import Google, Here, OpenCage
from geotoolkit.testing._dialect import Dialect, Endpoint
from geotoolkit.testing._geojson import Pelias, Photon
from geotoolkit.testing._osm import LocationIQ, Nominatim
from geotoolkit.testing._services import ArcGIS, Geonorge

__all__ = ["DIALECTS", "FORMATS", "dialect", "route"]

#: Every dialect, in the order bare paths are tried (the sniffing ones first).
DIALECTS: Final[tuple[Dialect, ...]] = (
    LocationIQ(), Photon(), Nominatim(), Pelias(), OpenCage(), Google(), MapboxBatch(), Here(),
    ArcGIS(), Geonorge(), CensusBatch(),
)

_BY_NAME: Final[Mapping[str, Dialect]] = {d.name: d for d in DIALECTS}

#: The providers whose APIs the simulator speaks, by geotoolkit's provider names.
FORMATS: Final = tuple(sorted(_BY_NAME))


def dialect(name: str) -> Dialect:
    """The dialect of provider ``name`` (``KeyError`` when there is none)."""
    return _BY_NAME[name]


def route(path: str, params: Mapping[str, str]) -> tuple[Dialect, Endpoint, str] | None:
    """``(dialect, endpoint, path within its mount)`` for a request, or ``None`` (404)."""
    head, slash, rest = path.lstrip("/").partition("/")
    mounted = _BY_NAME.get(head)
    if mounted is not None:
        inner = "/" + rest if slash else "/"
        endpoint = mounted.endpoint(inner)
        return None if endpoint is None else (mounted, endpoint, inner)
    for candidate in DIALECTS:
        endpoint = candidate.endpoint(path)
        if endpoint is not None and candidate.claims(path, params):
            return candidate, endpoint, path
    return None

