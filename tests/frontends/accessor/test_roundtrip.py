"""Property: lon/lat survive accessor -> GeoPackage -> read-back (pyogrio), bit for bit."""

from __future__ import annotations

import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyogrio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from geotoolkit.export import write_geopackage
from geotoolkit.providers.base import Provider

LON = st.floats(min_value=-180.0, max_value=180.0, allow_nan=False)
LAT = st.floats(min_value=-90.0, max_value=90.0, allow_nan=False)
POINTS = st.lists(st.tuples(LON, LAT).filter(lambda p: p != (0.0, 0.0)), min_size=1, max_size=6)


def _bits(values: Any) -> list[bytes]:
    """The IEEE-754 bytes, with -0.0 read as 0.0: SQLite (so GeoPackage) stores a REAL
    that is a whole number as an integer, and integers have no negative zero."""
    return [struct.pack("<d", float(v) + 0.0) for v in values]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(points=POINTS)
@example(points=[(-0.0, 1.0), (180.0, -90.0), (-180.0, 90.0), (5e-324, 1e-300)])
def test_lon_lat_survive_the_geopackage(points: list[tuple[float, float]], fake_provider: Provider,
                                        coordinates: Callable[..., Any]) -> None:
    names = [f"place {i}" for i in range(len(points))]
    server = coordinates({n: (repr(lon), repr(lat)) for n, (lon, lat) in zip(names, points,
                                                                               strict=True)})
    df = pd.DataFrame({"address": names})
    out = df.geocode.run(provider=fake_provider, gate="memory://", cache=False, progress=False,
                         transport=server.transport())
    assert _bits(out["lon"]) == _bits(p[0] for p in points)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.gpkg"
        assert write_geopackage(out, path) == (len(points), 0)
        back = pyogrio.read_dataframe(path, layer="geocoded")
    assert back.crs.to_epsg() == 4326
    assert _bits(back["lon"]) == _bits(p[0] for p in points)
    assert _bits(back["lat"]) == _bits(p[1] for p in points)
    assert _bits(back.geometry.x) == _bits(p[0] for p in points)
    assert _bits(back.geometry.y) == _bits(p[1] for p in points)
