"""How precise a match is: each provider's own words mapped to ours, kept as data.

Every provider says in its own words whether it found the building, estimated the
address along a street, or fell back to the street, the postcode, the town or the
country. :data:`VOCABULARIES` maps those words, provider by provider, to the one
vocabulary of :data:`geotoolkit.results.PRECISIONS`. A parser collects the fields
named here from its answer and calls :func:`precision_of`; the vocabularies are
consulted in order and the first one that knows the word decides. A word no table
knows is ``unknown``: never an error.

Each vocabulary's words are matched case-insensitively; ``*`` after a ``/`` matches
any value of that part (``highway/*``), ``*`` alone any value, and ``a-b`` a number
in that range (Nominatim's ``place_rank``); a boolean is its JSON word, ``true`` or
``false``. A field whose value is a list (Google's
``types``) takes the finest precision any of its words gives.

:func:`render_markdown` draws the tables of ``docs/providers.md`` (a test keeps the
two equal), with how each provider's ``score`` is derived (:data:`SCORES`).

Examples
--------
>>> precision_of("nominatim", {"addresstype": "road", "place_rank": 26})
'street'
>>> precision_of("nominatim", {"category/type": "waterway/river", "addresstype": "river",
...                            "place_rank": 19})
'feature'
>>> precision_of("google", {"geometry.location_type": "APPROXIMATE",
...                         "types": ["locality", "political"]})
'locality'
>>> precision_of("here", {"resultType": "somethingNew"})
'unknown'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import cast

from geotoolkit.results import PRECISIONS, Precision

__all__ = ["MAPBOX_CONFIDENCE", "SCORES", "VOCABULARIES", "Vocabulary", "precision_of",
           "render_markdown"]


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """One field of a provider's answer and what its values mean in our words.

    ``words`` maps the provider's values to one of :data:`PRECISIONS` (checked).
    """

    field: str
    words: Mapping[str, str]
    note: str = ""
    _folded: Mapping[str, Precision] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        wrong = sorted(set(self.words.values()) - set(PRECISIONS))
        if wrong:
            raise ValueError(f"{self.field}: {wrong} are not precisions")
        object.__setattr__(self, "_folded", {k.casefold(): cast(Precision, v)
                                             for k, v in self.words.items()})

    def lookup(self, value: object) -> Precision | None:
        """Our word for ``value`` (the finest, for a list), ``None`` if unknown here."""
        if isinstance(value, list | tuple):
            found = [p for p in (self._one(v) for v in value) if p is not None]
            return min(found, key=PRECISIONS.index) if found else None
        return self._one(value)

    def _one(self, value: object) -> Precision | None:
        if isinstance(value, bool):  # a flag (HERE's houseNumberFallback): its JSON word
            value = "true" if value else "false"
        if isinstance(value, int):
            return self._in_range(value)
        if not isinstance(value, str) or not value:
            return None
        word = value.strip().casefold()
        if word in self._folded:
            return self._folded[word]
        if "/" in word:
            wildcard = word.rsplit("/", 1)[0] + "/*"
            if wildcard in self._folded:
                return self._folded[wildcard]
        return self._folded.get("*")

    def _in_range(self, value: int) -> Precision | None:
        for key, precision in self._folded.items():
            low, _, high = key.partition("-")
            if low.isdecimal() and (high or low).isdecimal() and int(low) <= value <= int(high or low):
                return precision
        return None


def precision_of(provider: str, values: Mapping[str, object]) -> Precision:
    """The precision of one answer: ``values`` holds the provider's fields by name.

    The provider's vocabularies are read in order; the first that knows its field's
    value decides. ``unknown`` when none does (or the provider has no table).
    """
    for vocabulary in VOCABULARIES.get(provider, ()):
        found = vocabulary.lookup(values.get(vocabulary.field))
        if found is not None:
            return found
    return "unknown"


def _words(precision: Precision, *words: str) -> dict[str, str]:
    return dict.fromkeys(words, precision)


_LOCALITIES = ("city", "town", "village", "hamlet", "suburb", "neighbourhood", "quarter",
               "city_district", "district", "borough", "municipality", "croft", "isolated_dwelling",
               "allotments", "city_block", "subdivision", "locality")

_NOMINATIM_INTERPOLATION = Vocabulary(
    "osm_type/category/type", {"way/place/house": "interpolated"},
    "an interpolated house number: Nominatim answers place=house with the id of the "
    "interpolation way (OSM addr:interpolation) or, for TIGER, of the street; a rare "
    "address-only area mapped without a building tag reads the same")
# OSM main tags (key/value) of named things that are not part of an address: Nominatim's
# default ranking (settings/address-levels.json) gives them address rank 0 (a river 19,
# a peak 18, a park 24, a forest 24 as search rank: the scale of towns and suburbs, which
# is why place_rank alone rated them 'locality'). The landuse values that Nominatim does
# rank as address parts (24, a neighbourhood's level) stay localities.
_OSM_FEATURES: dict[str, str] = {
    **_words("feature", "natural/*", "waterway/*", "water/*", "mountain_pass/*", "landuse/*",
             "leisure/park", "leisure/nature_reserve", "leisure/garden", "leisure/common",
             "boundary/protected_area", "boundary/national_park", "boundary/forest",
             "place/sea", "place/ocean", "place/continent", "place/island", "place/islet"),
    **_words("locality", *(f"landuse/{w}" for w in ("residential", "farm", "farmyard",
                                                    "industrial", "commercial", "allotments",
                                                    "retail"))),
}
_OSM_FEATURES_NOTE = ("the main OSM tag of a river, lake, peak, forest, park...: not part of "
                      "any address (Nominatim's address rank 0), whatever its search rank; "
                      "landuse that Nominatim ranks as an address part stays a locality")
_NOMINATIM_CLASS: dict[str, str] = {
    "place/house": "address", "building/*": "address",
    "highway/*": "street",
    "place/postcode": "postcode", "boundary/postal_code": "postcode",
    **{f"place/{w}": "locality" for w in _LOCALITIES},
    **_words("region", "place/county", "place/state", "place/province", "place/region"),
    "place/country": "country",
}
_NOMINATIM_RANK: dict[str, str] = {"28-30": "address", "26-27": "street", "13-25": "locality",
                   "5-12": "region", "4": "country"}

# ArcGIS's POI types (its category names) of named places that are no part of an address:
# the Land Features and Water Features categories, and parks.
_ARCGIS_FEATURES: dict[str, str] = _words("feature", *(f"POI/{w}" for w in (
    "Atoll", "Basin", "Butte", "Canyon", "Cape", "Cave", "Cliff", "Continent", "Desert", "Dune",
    "Flat", "Forest", "Glacier", "Grassland", "Hill", "Island", "Isthmus", "Lava", "Marsh",
    "Meadow", "Mesa", "Mountain", "Mountain Range", "Oasis", "Other Land Feature", "Peninsula",
    "Plain", "Plateau", "Ravine", "Ridge", "Rock", "Scrubland", "Swamp", "Valley", "Volcano",
    "Wetland", "Bay", "Canal", "Channel", "Cove", "Delta", "Estuary", "Fjord", "Gulf",
    "Lagoon", "Lake", "Ocean", "Other Water Feature", "Reef", "Reservoir", "River", "Sea",
    "Sound", "Spring", "Strait", "Stream", "Waterfall", "Park", "Nature Reserve",
    "National Park", "Garden")))

#: Each provider's vocabularies, in the order its parser consults them.
VOCABULARIES: Mapping[str, tuple[Vocabulary, ...]] = MappingProxyType({
    "nominatim": (
        _NOMINATIM_INTERPOLATION,
        Vocabulary("category/type", _OSM_FEATURES, _OSM_FEATURES_NOTE),
        Vocabulary("addresstype", {
            **_words("address", "house_number", "house_name", "building", "highway"),
            "road": "street", "postcode": "postcode",
            **_words("locality", *_LOCALITIES),
            **_words("region", "county", "state_district", "state", "region", "province"),
            "country": "country"},
            "jsonv2's designation of the result (newer Nominatim); a street is 'road', so "
            "'highway' is a feature of address rank 30 on one (a bus stop, a platform), at its "
            "own point; 'place' and POI keys (amenity, shop...) are left to the next fields"),
        Vocabulary("category/type", _NOMINATIM_CLASS, "the main OSM tag (key/value)"),
        Vocabulary("place_rank", _NOMINATIM_RANK,
                   "search rank: 30 houses and POIs, 26-27 streets, 13-25 towns to "
                   "neighbourhoods, 5-12 states and counties, 4 countries"),
    ),
    "locationiq": (
        Vocabulary("matchquality.matchtype", {"interpolated": "interpolated"},
                   "asked for with matchquality=1; point and centroid say nothing of the level"),
        Vocabulary("class/type", _OSM_FEATURES,
                   "as Nominatim's, read before matchlevel, whose words (venue, street, "
                   "city...) have none for a river or a park"),
        Vocabulary("matchquality.matchlevel", {
            **_words("address", "venue", "building"), "street": "street",
            "postalcode": "postcode",
            **_words("locality", "neighbourhood", "borough", "city"),
            **_words("region", "county", "state"), "country": "country",
            **_words("feature", "island", "marine")}),
        Vocabulary("osm_type/class/type", _NOMINATIM_INTERPOLATION.words,
                   "as Nominatim (format=json says class for category)"),
        Vocabulary("class/type", _NOMINATIM_CLASS, "as Nominatim's category/type"),
    ),
    "photon": (
        Vocabulary("osm_key/osm_value", _OSM_FEATURES, "as Nominatim's"),
        Vocabulary("type", {"house": "address", "street": "street",
                            **_words("locality", "locality", "district", "city"),
                            **_words("region", "county", "state"), "country": "country"},
                   "Photon's name for the result's Nominatim address rank; 'other' (rank 0) "
                   "is left to osm_key/osm_value"),
        Vocabulary("osm_key/osm_value", _NOMINATIM_CLASS, "the main OSM tag, as Nominatim's"),
    ),
    "pelias": (
        Vocabulary("match_type", {"interpolated": "interpolated"},
                   "exact and fallback say how the text matched, not the level"),
        Vocabulary("layer", {
            **_words("address", "address", "venue"), "street": "street",
            "postalcode": "postcode",
            **_words("locality", "locality", "localadmin", "borough", "neighbourhood",
                     "microhood"),
            **_words("region", "county", "macrocounty", "region", "macroregion",
                     "dependency"),
            "country": "country", **_words("feature", "ocean", "marinearea", "continent")},
            "Who's on First's ocean, marine area and continent are no part of an address"),
    ),
    "opencage": (
        Vocabulary("components._type", {
            **_words("address", "building", "house"), "road": "street",
            "postcode": "postcode",
            **_words("locality", "city", "town", "village", "hamlet", "suburb",
                     "neighbourhood", "city_district", "quarter", "municipality", "place"),
            **_words("region", "county", "state_district", "state", "region", "province"),
            "country": "country"},
            "other types (POIs such as 'restaurant') are left to _category"),
        Vocabulary("components._category", {"natural/water": "feature"},
                   "a river, lake or sea; other categories (POIs) are unknown"),
    ),
    "google": (
        Vocabulary("geometry.location_type", {"ROOFTOP": "address",
                                               "RANGE_INTERPOLATED": "interpolated"},
                   "GEOMETRIC_CENTER and APPROXIMATE are left to types"),
        Vocabulary("types", {"natural_feature": "feature", "park": "feature"},
                   "a prominent natural feature or a named park is no address, though Google "
                   "also calls it an establishment"),
        Vocabulary("types", {
            **_words("address", "street_address", "premise", "subpremise", "establishment",
                     "point_of_interest"),
            **_words("street", "route", "intersection"),
            **_words("postcode", "postal_code", "postal_code_prefix"),
            **_words("locality", "locality", "sublocality", "sublocality_level_1",
                     "sublocality_level_2", "neighborhood", "postal_town", "colloquial_area"),
            **_words("region", *(f"administrative_area_level_{n}" for n in range(1, 8))),
            "country": "country"},
            "the finest of the result's types"),
    ),
    "mapbox": (
        Vocabulary("coordinates.accuracy", {
            **_words("address", "rooftop", "parcel", "point", "proximate"),
            "interpolated": "interpolated", **_words("street", "street", "intersection"),
            "approximate": "postcode"},
            "address features only; approximate: the address placed at its 9-digit (ZIP+4) "
            "postcode's centroid"),
        Vocabulary("feature_type", {
            **_words("address", "address", "secondary_address"),
            **_words("street", "street", "block"), "postcode": "postcode",
            **_words("locality", "place", "locality", "neighborhood"),
            **_words("region", "district", "region"), "country": "country"}),
    ),
    "here": (
        Vocabulary("categories[].id", {"350": "feature"},
                   "the first part of a place's primary category: 350 is HERE's 'Natural and "
                   "Geographical' (a lake, a mountain, a forest); other places are POIs"),
        Vocabulary("houseNumberFallback", {"true": "street"},
                   "the house number asked for was not found and the nearest known one was "
                   "answered: another house on the right street (shown only when true)"),
        Vocabulary("houseNumberType", {"PA": "address", "MPA": "address",
                                       "interpolated": "interpolated"},
                   "PA: a point address"),
        Vocabulary("localityType", {"postalCode": "postcode", "city": "locality",
                                    "district": "locality", "subdistrict": "locality"}),
        Vocabulary("administrativeAreaType", {"county": "region", "state": "region",
                                              "country": "country"}),
        Vocabulary("resultType", {
            **_words("address", "houseNumber", "place"),
            **_words("street", "street", "intersection", "addressBlock"),
            "postalCodePoint": "postcode", "locality": "locality",
            "administrativeArea": "region"}),
    ),
    "arcgis": (
        Vocabulary("Addr_type/Type", _ARCGIS_FEATURES,
                   "a POI is a business or landmark at its own point, unless its Type is one of "
                   "ArcGIS's Land Features or Water Features, or a park"),
        Vocabulary("Addr_type", {
            **_words("address", "PointAddress", "Subaddress", "BuildingName", "Parcel", "POI"),
            **_words("interpolated", "StreetAddress", "StreetAddressExt", "DistanceMarker"),
            **_words("street", "StreetName", "StreetInt", "StreetBetween", "StreetMidBlock"),
            **_words("postcode", "Postal", "PostalExt", "PostalLoc")},
            "StreetAddress is a house number placed along the street's address range; "
            "Locality is refined by Type; typed coordinates (LatLong, XY-XY, MGRS...) are unknown"),
        Vocabulary("Type", {
            "Country": "country",
            **_words("region", "State or Province", "Province", "State", "Region",
                     "Subregion", "County"),
            **_words("locality", "City", "Town", "Village", "Neighborhood", "District",
                     "Metro Area", "Block", "Sector")},
            "for Addr_type Locality"),
        Vocabulary("Addr_type", {"Locality": "locality"}),
    ),
    "geonorge": (
        Vocabulary("objtype", {"Vegadresse": "address", "Matrikkeladresse": "address"},
                   "a street address or a cadastral address: every answer is an address point"),
    ),
    "census": (
        Vocabulary("addressMatches[]", {"*": "interpolated"},
                   "onelineaddress and address place every match along a TIGER address range"),
    ),
    "census batch": (
        Vocabulary("match type", {"Exact": "interpolated", "Non_Exact": "interpolated"},
                   "Exact or not, the point is interpolated along a TIGER address range"),
    ),
})

#: Mapbox v6 ``match_code.confidence`` as a score (v6 has no numeric relevance).
MAPBOX_CONFIDENCE: Mapping[str, float] = MappingProxyType(
    {"exact": 1.0, "high": 0.75, "medium": 0.5, "low": 0.25})

#: How each provider's ``score`` is derived, for the documentation.
SCORES: Mapping[str, str] = MappingProxyType({
    "nominatim": "none: `importance` measures fame (Wikipedia links), not how well the "
                 "result matches the query",
    "locationiq": "none: as Nominatim (`importance`); `matchquality.matchcode` stays in `raw`",
    "photon": "none: Photon gives no confidence",
    "pelias": "`confidence` (already 0-1: how well the result matches the parsed query)",
    "opencage": "`confidence` / 10; OpenCage's confidence measures the size of the result's "
                "bounding box (10: under 0.25 km across, 1: over 25 km), not how well it "
                "matches; 0 (unknown) gives none",
    "google": "none: Google gives no confidence (`partial_match` stays in `raw`)",
    "mapbox": "`match_code.confidence` (address features): exact 1.0, high 0.75, "
              "medium 0.5, low 0.25; none for other features",
    "here": "`scoring.queryScore` (0-1: how much of the query the result matches)",
    "arcgis": "`score` / 100 (ArcGIS's match score)",
    "geonorge": "none: Geonorge gives no score",
    "census": "none: the Census Geocoder gives no score",
    "census batch": "none",
})


def render_markdown() -> str:
    """The precision and score tables of ``docs/providers.md``, as Markdown."""
    lines = ["| provider | field (in order) | the provider's words → our precision |",
             "| --- | --- | --- |"]
    for provider, vocabularies in VOCABULARIES.items():
        for vocabulary in vocabularies:
            grouped: dict[str, list[str]] = {}
            for word, precision in vocabulary.words.items():
                grouped.setdefault(precision, []).append(f"`{word}`")
            words = "; ".join(f"{', '.join(w)} → **{p}**" for p, w in sorted(
                grouped.items(), key=lambda item: PRECISIONS.index(item[0])))
            note = f" ({vocabulary.note})" if vocabulary.note else ""
            lines.append(f"| {provider} | `{vocabulary.field}` | {words}{note} |")
    lines += ["", "| provider | score |", "| --- | --- |"]
    lines += [f"| {provider} | {how} |" for provider, how in SCORES.items()]
    return "\n".join(lines) + "\n"
