"""The pure validation core and its package data (country bounding boxes)."""

from __future__ import annotations

import doctest
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import geotoolkit.frontends.accessor
import geotoolkit.store
import geotoolkit.store.memory
import geotoolkit.validate
from geotoolkit import ConfigurationError
from geotoolkit.validate import (
    BBox,
    check_lonlat,
    check_point,
    country_bboxes,
    country_code,
    country_name,
    in_country,
)

# (code, lon, lat) of capitals and far-flung places, all of which must be inside.
INSIDE = [
    ("LI", 9.5209, 47.1410), ("CH", 7.4474, 46.9480), ("AT", 16.3738, 48.2082),
    ("FR", 2.3522, 48.8566), ("FR", 55.4504, -20.8823), ("DE", 13.4050, 52.5200),
    ("ES", -3.7038, 40.4168), ("ES", -15.4134, 28.1235), ("PT", -25.6687, 37.7412),
    ("GB", -0.1276, 51.5072), ("IE", -6.2603, 53.3498), ("NO", 15.6356, 78.2232),
    ("IS", -21.8174, 64.1265), ("IT", 12.4964, 41.9028), ("GR", 23.7275, 37.9838),
    ("TR", 32.8597, 39.9334), ("RU", 37.6173, 55.7558), ("RU", 20.4522, 54.7104),
    ("RU", -172.5, 64.4), ("RU", 177.5, 64.7), ("US", -77.0369, 38.9072),
    ("US", -149.9003, 61.2181), ("US", -157.8583, 21.3069), ("US", 173.2, 52.9),
    ("CA", -75.6972, 45.4215), ("MX", -99.1332, 19.4326), ("BR", -47.8825, -15.7942),
    ("AR", -58.3816, -34.6037), ("CL", -70.6693, -33.4489), ("CL", -109.3497, -27.1127),
    ("PE", -77.0428, -12.0464), ("CO", -74.0721, 4.7110), ("EC", -90.3, -0.7),
    ("ZA", 28.1881, -25.7461), ("EG", 31.2357, 30.0444), ("NG", 7.4951, 9.0579),
    ("KE", 36.8219, -1.2921), ("ET", 38.7578, 8.9806), ("MA", -6.8498, 34.0209),
    ("IN", 77.2090, 28.6139), ("CN", 116.4074, 39.9042), ("JP", 139.6503, 35.6762),
    ("KR", 126.9780, 37.5665), ("ID", 106.8456, -6.2088), ("AU", 149.1300, -35.2809),
    ("NZ", 174.7762, -41.2865), ("NZ", -176.5597, -43.9535), ("FJ", 178.4419, -18.1416),
    ("FJ", -178.8, -18.0), ("KI", 173.0, 1.33), ("KI", -157.4, 1.87), ("TV", 179.19, -8.52),
    ("SG", 103.8198, 1.3521), ("AQ", 166.67, -77.85), ("GL", -51.7216, 64.1814),
]


def test_every_iso_code_has_a_sane_box() -> None:
    boxes = country_bboxes()
    assert len(boxes) == 250  # the 249 ISO 3166-1 alpha-2 codes and XK
    for code, parts in boxes.items():
        assert len(code) == 2 and code.isupper() and parts
        for b in parts:
            assert -180 <= b.min_lon <= 180 and -180 <= b.max_lon <= 180, code
            assert -90 <= b.min_lat < b.max_lat <= 90, code
            assert b.min_lon != b.max_lon, code


def test_only_antimeridian_countries_wrap() -> None:
    wrapping = {c for c, parts in country_bboxes().items() if any(b.min_lon > b.max_lon for b in parts)}
    assert wrapping == {"RU", "US", "FJ", "NZ", "KI", "UM"}


@pytest.mark.parametrize(("code", "lon", "lat"), INSIDE)
def test_known_places_are_inside_their_country(code: str, lon: float, lat: float) -> None:
    assert in_country(lon, lat, code)
    assert check_point(lon, lat, code) is None


@pytest.mark.parametrize(("code", "lon", "lat"), [
    ("LI", 16.37, 48.21), ("US", 2.35, 48.86), ("RU", 0.0, 60.0), ("NZ", 150.0, -40.0),
    ("FJ", 170.0, -18.0), ("JP", -122.4, 37.8), ("AU", -47.9, -15.8)])
def test_foreign_places_are_outside(code: str, lon: float, lat: float) -> None:
    assert not in_country(lon, lat, code)
    assert check_point(lon, lat, code).startswith(f"outside {code}")  # type: ignore[union-attr]


def test_bbox_wraps_across_the_antimeridian() -> None:
    box = BBox(170.0, -50.0, -170.0, -30.0)
    assert box.contains(180.0, -40.0) and box.contains(-180.0, -40.0)
    assert box.contains(-169.95, -40.0, margin=0.1) and not box.contains(-169.95, -40.0)
    assert not box.contains(0.0, -40.0) and not box.contains(175.0, -29.0)


def test_country_codes_and_names() -> None:
    assert country_code(" li ") == "LI" and country_code("new zealand") == "NZ"
    assert country_code("Atlantis") is None and country_code(None) is None
    assert country_name("nz") == "New Zealand"
    with pytest.raises(ConfigurationError, match="alpha-2"):
        country_name("XX")


@pytest.mark.parametrize(("lon", "lat", "reason"), [
    (0.0, 0.0, "null island (0, 0)"), (-0.0, 0.0, "null island (0, 0)"),
    (180.5, 1.0, "longitude 180.5 out of range [-180, 180]"),
    (1.0, -90.5, "latitude -90.5 out of range [-90, 90]"),
    (math.nan, 1.0, "coordinates are not finite (nan, 1.0)"),
    (1.0, -math.inf, "coordinates are not finite (1.0, -inf)"),
    (True, 1.0, "coordinates are not numbers"), ("9.5", 47.1, "coordinates are not numbers"),
])
def test_check_lonlat_reasons(lon: float, lat: float, reason: str) -> None:
    assert check_lonlat(lon, lat) == reason


def test_swapped_pairs_are_reported_never_fixed() -> None:
    reason = check_point(47.1397, 9.5219, "LI")
    assert reason == ("coordinates look swapped: (lon, lat) = (47.1397, 9.5219) is outside LI "
                      "(Liechtenstein) but (9.5219, 47.1397) is inside; not swapped automatically")
    assert check_point(35.68, 139.77, "JP").startswith("coordinates look swapped")  # type: ignore[union-attr]
    assert check_point(35.68, 139.77) == "latitude 139.77 out of range [-90, 90]"


@given(st.floats(), st.floats(), st.sampled_from([None, "LI", "RU", "US", "FJ", "AQ"]))
def test_check_point_never_raises_and_passes_only_valid_points(
        lon: float, lat: float, country: str | None) -> None:
    reason = check_point(lon, lat, country)
    if reason is None:
        assert math.isfinite(lon) and math.isfinite(lat)
        assert -180 <= lon <= 180 and -90 <= lat <= 90 and (lon, lat) != (0.0, 0.0)
        assert country is None or in_country(lon, lat, country)
    else:
        assert isinstance(reason, str) and reason


@pytest.mark.parametrize("module", [geotoolkit.validate, geotoolkit.frontends.accessor, geotoolkit.store,
                                    geotoolkit.store.memory])
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.failed == 0 and result.attempted > 0
