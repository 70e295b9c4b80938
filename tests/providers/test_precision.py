"""The precision vocabularies: data, consulted in order, never raising, mirrored in the docs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geotoolkit.providers import PROVIDERS, precision
from geotoolkit.providers.precision import (
    MAPBOX_CONFIDENCE,
    SCORES,
    VOCABULARIES,
    Vocabulary,
    precision_of,
    render_markdown,
)
from geotoolkit.results import PRECISIONS

DOCS = Path(__file__).parents[2] / "docs" / "providers.md"
# st.deferred, not st.recursive (see test_hostile.py).
ANY_JSON: st.SearchStrategy[object] = st.deferred(
    lambda: st.none() | st.booleans() | st.integers() | st.floats() | st.text()
    | st.lists(ANY_JSON, max_size=3) | st.dictionaries(st.text(), ANY_JSON, max_size=3))


def test_public_names_are_pinned() -> None:
    assert sorted(precision.__all__) == ["MAPBOX_CONFIDENCE", "SCORES", "VOCABULARIES",
                                         "Vocabulary", "precision_of", "render_markdown"]


def test_every_provider_has_a_vocabulary_and_a_documented_score() -> None:
    assert set(PROVIDERS) | {"census batch"} == set(VOCABULARIES) == set(SCORES)
    for vocabularies in VOCABULARIES.values():
        for vocabulary in vocabularies:
            assert vocabulary.words and set(vocabulary.words.values()) <= set(PRECISIONS)
    assert all(0 < v <= 1 for v in MAPBOX_CONFIDENCE.values())


def test_the_docs_show_the_tables_as_generated() -> None:
    text = DOCS.read_text()
    start = text.index("<!-- precision-tables")
    body = text[text.index("\n", start) + 1:text.index("<!-- /precision-tables -->")]
    assert body == render_markdown()


@pytest.mark.parametrize(("provider", "values", "expected"), [
    ("nominatim", {"osm_type/category/type": "way/place/house", "place_rank": 30}, "interpolated"),
    ("nominatim", {"osm_type/category/type": "node/place/house",
                   "category/type": "place/house"}, "address"),
    ("nominatim", {"addresstype": "amenity", "category/type": "amenity/cafe",
                   "place_rank": 30}, "address"),
    ("nominatim", {"category/type": "highway/residential"}, "street"),
    ("nominatim", {"category/type": "boundary/administrative", "place_rank": 8}, "region"),
    ("nominatim", {"place_rank": 4}, "country"),
    ("nominatim", {"place_rank": 99}, "unknown"),
    # What a real Nominatim 5.3.3 answers for a river, a peak, a park, a forest, a stone (see
    # nominatim_cases.py): search ranks of towns and villages, but no part of an address.
    ("nominatim", {"category/type": "waterway/river", "addresstype": "river", "place_rank": 18},
     "feature"),
    ("nominatim", {"category/type": "natural/peak", "addresstype": "peak", "place_rank": 18},
     "feature"),
    ("nominatim", {"category/type": "leisure/park", "addresstype": "park", "place_rank": 24},
     "feature"),
    ("nominatim", {"category/type": "landuse/forest", "addresstype": "forest", "place_rank": 24},
     "feature"),
    ("nominatim", {"category/type": "natural/stone", "addresstype": "natural", "place_rank": 30},
     "feature"),
    ("nominatim", {"category/type": "landuse/residential", "addresstype": "residential",
                   "place_rank": 24}, "locality"),  # an address part (address rank 24)
    ("nominatim", {"category/type": "leisure/playground", "addresstype": "leisure",
                   "place_rank": 30}, "address"),  # a POI at its own point
    ("locationiq", {"matchquality.matchlevel": "venue", "class/type": "waterway/river"},
     "feature"),
    ("locationiq", {"matchquality.matchlevel": "marine"}, "feature"),
    ("photon", {"type": "other", "osm_key/osm_value": "natural/peak"}, "feature"),
    ("google", {"geometry.location_type": "APPROXIMATE",
                "types": ["natural_feature", "establishment"]}, "feature"),
    ("google", {"geometry.location_type": "GEOMETRIC_CENTER",
                "types": ["establishment", "park", "point_of_interest"]}, "feature"),
    ("google", {"geometry.location_type": "ROOFTOP",
                "types": ["establishment", "point_of_interest"]}, "address"),
    ("opencage", {"components._type": "river", "components._category": "natural/water"},
     "feature"),
    ("pelias", {"layer": "marinearea"}, "feature"),
    ("google", {"geometry.location_type": "RANGE_INTERPOLATED",
                "types": ["street_address"]}, "interpolated"),
    ("google", {"types": ["political", "sublocality", "locality"]}, "locality"),
    ("google", {"types": ["route", "postal_code"]}, "street"),  # the finest of the types
    ("here", {"resultType": "locality", "localityType": "postalCode"}, "postcode"),
    ("here", {"resultType": "houseNumber", "houseNumberType": "interpolated"}, "interpolated"),
    # A HERE place in its "Natural and Geographical" categories (350-...): a lake, a peak.
    ("here", {"resultType": "place", "categories[].id": "350"}, "feature"),
    ("here", {"resultType": "place", "categories[].id": "100"}, "address"),  # a restaurant
    # HERE answered the nearest known house instead of the one asked: the right street only.
    ("here", {"resultType": "houseNumber", "houseNumberType": "PA", "houseNumberFallback": True},
     "street"),
    ("here", {"resultType": "houseNumber", "houseNumberType": "PA", "houseNumberFallback": False},
     "address"),
    ("arcgis", {"Addr_type": "Locality", "Type": "State or Province"}, "region"),
    ("arcgis", {"Addr_type": "StreetAddress"}, "interpolated"),
    ("arcgis", {"Addr_type": "MGRS"}, "unknown"),
    # A POI is a business or a landmark at its own point, or a mountain, a lake, a park:
    # ArcGIS's Type tells them apart (its Land Features and Water Features categories).
    ("arcgis", {"Addr_type/Type": "POI/Mountain", "Addr_type": "POI", "Type": "Mountain"},
     "feature"),
    ("arcgis", {"Addr_type/Type": "POI/Lake", "Addr_type": "POI", "Type": "Lake"}, "feature"),
    ("arcgis", {"Addr_type/Type": "POI/Park", "Addr_type": "POI", "Type": "Park"}, "feature"),
    ("arcgis", {"Addr_type/Type": "POI/Museum", "Addr_type": "POI", "Type": "Museum"}, "address"),
    # Mapbox v6: "approximate" places an address at its 9-digit (ZIP+4) postcode's centroid
    ("mapbox", {"coordinates.accuracy": "approximate", "feature_type": "address"}, "postcode"),
    ("photon", {"type": "other", "osm_key/osm_value": "place/postcode"}, "postcode"),
    ("pelias", {"match_type": "fallback", "layer": "street"}, "street"),
    ("census", {"addressMatches[]": "match"}, "interpolated"),
    ("opencage", {"components._type": "restaurant"}, "unknown"),
    ("no such provider", {"type": "house"}, "unknown"),
])
def test_words_map_to_our_precision(provider: str, values: dict[str, Any], expected: str) -> None:
    assert precision_of(provider, values) == expected


def test_words_are_matched_case_insensitively() -> None:
    assert precision_of("arcgis", {"Addr_type": "pointaddress"}) == "address"
    assert precision_of("here", {"resultType": " HOUSENUMBER "}) == "address"


@settings(max_examples=200, deadline=None)
@given(values=st.dictionaries(st.sampled_from(sorted({v.field for vs in VOCABULARIES.values()
                                                      for v in vs})), ANY_JSON))
def test_any_value_gives_a_precision_and_never_raises(values: dict[str, Any]) -> None:
    for provider in VOCABULARIES:
        assert precision_of(provider, values) in PRECISIONS


def test_a_table_with_a_word_that_is_not_a_precision_is_refused() -> None:
    with pytest.raises(ValueError, match="not precisions"):
        Vocabulary("type", {"house": "building"})
