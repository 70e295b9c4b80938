"""Deterministic answers for the provider simulator: what a query or a point finds.

A query finds a :class:`Hit` at one of five levels, from the tables of ``_gazetteer``:

- a known address -> ``address`` (the building);
- a known street with a house number that does not exist (``"Duxweg 999, Schaan"``), or
  no number at all -> ``street`` (the street's centre);
- a postcode alone (``"9490 Vaduz"``, ``"9490"``) -> ``postcode`` (its centroid);
- a town alone (``"Vaduz"``) -> ``locality``; the country alone -> ``country``;
- anything else -> a stable hashed point inside Liechtenstein, at the ``address`` level
  (so any address list geocodes), unless it says "nowhere" or "no match" (``None``).

Points are looked up in ``_nearest``. Pure functions, stdlib only (plus
``normalise_address``). Coordinates are ``lon, lat``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Final, Literal

from geotoolkit.results import normalise_address
from geotoolkit.testing._gazetteer import (
    BBOX,
    COUNTRY,
    KNOWN_ADDRESSES,
    LOCALITIES,
    POSTCODES,
    STREETS,
    KnownAddress,
    Locality,
    Street,
    split_house_number,
)
from geotoolkit.testing._tokens import strip_tokens

__all__ = [
    "BBOX",
    "KNOWN_ADDRESSES",
    "NOMINATIM_FIELDS",
    "Hit",
    "KnownAddress",
    "Level",
    "address_hit",
    "locality_hit",
    "query_repr",
    "resolve",
    "street_hit",
]

#: Nominatim's structured-search parameters, in the order used for keys and labels.
NOMINATIM_FIELDS = ("street", "city", "county", "state", "postalcode", "country")

Level = Literal["address", "street", "postcode", "locality", "country"]

_MARGIN = 0.0005  # keep hashed points strictly inside the box
_HALF_SIZE: Final[Mapping[str, float]] = {"address": 0.0001, "street": 0.002, "postcode": 0.02,
                                          "locality": 0.03}
_COUNTRY_NAMES: Final = frozenset({"liechtenstein", "fürstentum liechtenstein", "li", "lie"})
_POSTCODE_RE: Final = re.compile(r"(\d{4})(?: (.+))?")


@dataclass(frozen=True)
class Hit:
    """One place the simulator found, provider-neutral; each format renders it its own way."""

    level: Level
    lon: float
    lat: float
    id: int  #: unique in the simulator's world
    name: str  #: its own name: "Städtle 38", "Duxweg", "9490", "Vaduz", "Liechtenstein"
    housenumber: str | None = None
    street: str | None = None
    postcode: str | None = None
    locality: str | None = None  #: the postal locality ("Gamprin-Bendern")
    municipality: str | None = None  #: one of the eleven ("Gamprin")
    region: str | None = None  #: "Oberland" or "Unterland"
    hashed: bool = False  #: a point made up for an unknown address
    text: str | None = None  #: the query's own words, for a hashed point
    exact: bool = True  #: False: coarser than asked (the street of a house that does not exist)
    distance_m: float | None = None  #: reverse geocoding: from the point asked about

    @property
    def bbox(self) -> tuple[float, float, float, float]:
        """``(min_lon, min_lat, max_lon, max_lat)`` around the hit (the country's box)."""
        if self.level == "country":
            return BBOX
        d = _HALF_SIZE[self.level]
        return (round(self.lon - d, 7), round(self.lat - d, 7), round(self.lon + d, 7),
                round(self.lat + d, 7))

    @property
    def street_line(self) -> str | None:
        """``"Städtle 38"`` (house number last, as written in Liechtenstein)."""
        if self.street is None:
            return None
        return f"{self.street} {self.housenumber}" if self.housenumber else self.street

    @property
    def label(self) -> str:
        """The whole place in one line: ``"Städtle 38, 9490 Vaduz, Liechtenstein"``."""
        if self.hashed and self.text:
            text = self.text
            return text if text.casefold().endswith("liechtenstein") else f"{text}, Liechtenstein"
        town = " ".join(p for p in (self.postcode, self.locality) if p)
        parts = (self.street_line, town, COUNTRY.name)
        return ", ".join(p for p in parts if p)


# --------------------------------------------------------------------------- hits


def address_hit(known: KnownAddress) -> Hit:
    road, number = split_house_number(known.street)
    return Hit("address", known.lon, known.lat, 300_000_000 + known.id, known.street,
               housenumber=number, street=road, postcode=known.postcode,
               locality=known.locality, municipality=known.municipality,
               region=_TOWNS[known.municipality].region)


def street_hit(street: Street, *, exact: bool) -> Hit:
    return Hit("street", street.lon, street.lat, 400_000_000 + street.id, street.name,
               street=street.name, postcode=street.postcode, locality=street.locality,
               municipality=street.municipality, region=_TOWNS[street.municipality].region,
               exact=exact)


def _postcode_hit(code: str) -> Hit:
    found = _POSTCODE_INDEX[code]
    return Hit("postcode", found.lon, found.lat, 500_000_000 + int(code), code, postcode=code,
               locality=found.locality, municipality=found.municipality,
               region=_TOWNS[found.municipality].region)


def locality_hit(town: Locality) -> Hit:
    return Hit("locality", town.lon, town.lat, 600_000_000 + town.id, town.name,
               postcode=None, locality=town.name, municipality=town.name, region=town.region)


def _country_hit() -> Hit:
    return Hit("country", COUNTRY.lon, COUNTRY.lat, 700_000_000, COUNTRY.name)


def _hashed_point(key: str) -> tuple[float, float, int]:
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    fx = int.from_bytes(digest[0:8], "big") / 2**64
    fy = int.from_bytes(digest[8:16], "big") / 2**64
    min_lon, min_lat, max_lon, max_lat = BBOX
    lon = min_lon + _MARGIN + fx * (max_lon - min_lon - 2 * _MARGIN)
    lat = min_lat + _MARGIN + fy * (max_lat - min_lat - 2 * _MARGIN)
    place_id = 100_000_000 + int.from_bytes(digest[16:20], "big") % 100_000_000
    # Round through the served text, so that the served strings parse back exactly.
    return float(f"{lon:.7f}"), float(f"{lat:.7f}"), place_id


def _hashed_hit(key: str, label: str) -> Hit:
    lon, lat, place_id = _hashed_point(key)
    near = KNOWN_ADDRESSES[place_id % len(KNOWN_ADDRESSES)]  # cheap, deterministic
    road = label.split(",")[0].strip()
    return Hit("address", lon, lat, place_id, road, street=road, postcode=near.postcode,
               locality=near.locality, municipality=near.municipality,
               region=_TOWNS[near.municipality].region, hashed=True, text=label)


# --------------------------------------------------------------------------- indexes


_TOWNS: Final = {town.name: town for town in LOCALITIES}
_TOWN_INDEX: Final = {normalise_address(name): town for town in LOCALITIES
                      for name in (town.name, *town.aliases)}
_TOWN_NAMES: Final = sorted(_TOWN_INDEX, key=len, reverse=True)  # longest first
_POSTCODE_INDEX: Final = {p.code: p for p in POSTCODES}
_STREET_INDEX: Final = {(normalise_address(s.name), s.municipality): s for s in STREETS}


def _text_index() -> dict[str, KnownAddress]:
    text: dict[str, KnownAddress] = {}
    for k in KNOWN_ADDRESSES:
        road, number = split_house_number(k.street)
        streets = {k.street, f"{number} {road}"} if number else {k.street}
        for street in streets:
            for place in {k.locality, k.municipality}:
                for form in (
                    f"{street}, {k.postcode} {place}, Liechtenstein",
                    f"{street}, {k.postcode} {place}",
                    f"{street}, {place}, Liechtenstein",
                    f"{street}, {place}",
                    f"{street} {k.postcode} {place}",
                    f"{street} {place}",
                ):
                    text.setdefault(normalise_address(form), k)
    return text


_TEXT_INDEX: Final = _text_index()


def _is_no_match(normalised: str) -> bool:
    return "nowhere" in normalised or "no match" in normalised


# --------------------------------------------------------------------------- forward


@dataclass(frozen=True)
class _Parts:
    """What a query names, normalised: ``None`` where it names nothing."""

    street: str | None = None
    town: str | None = None
    postcode: str | None = None
    country: bool = False


def _peel(street: str, parts: _Parts) -> tuple[str, _Parts]:
    """``"duxweg 999 9494 schaan"`` -> ``("duxweg 999", town and postcode)`` (no commas)."""
    if parts.town is None:
        for name in _TOWN_NAMES:
            if street.endswith(" " + name):
                street, parts = street[: -len(name) - 1], replace(parts, town=name)
                break
    head, _, tail = street.rpartition(" ")
    if parts.postcode is None and head and tail in _POSTCODE_INDEX:
        street, parts = head, replace(parts, postcode=tail)
    return street, parts


def _parse_text(key: str) -> _Parts | None:
    """The parts of a normalised free-text query; ``None`` when it names more than that."""
    parts = _Parts()
    for part in key.split(", "):
        found = _POSTCODE_RE.fullmatch(part)
        if part in _COUNTRY_NAMES:
            parts = replace(parts, country=True)
        elif found and found[1] in _POSTCODE_INDEX and parts.postcode is None:
            if found[2] is not None and found[2] not in _TOWN_INDEX:
                return None
            parts = replace(parts, postcode=found[1], town=found[2] or parts.town)
        elif part in _TOWN_INDEX and parts.town is None:
            parts = replace(parts, town=part)
        elif parts.street is None and parts.town is None and parts.postcode is None:
            parts = replace(parts, street=part)
        else:
            return None
    if parts.street is not None:
        street, parts = _peel(parts.street, parts)
        parts = replace(parts, street=street)
    return parts


def _split_number(street: str) -> tuple[str, str | None]:
    road, number = split_house_number(street)
    if number is None:
        head, _, rest = street.partition(" ")
        if rest and any(c.isdigit() for c in head):
            return rest, head
    return road, number


def _locate(parts: _Parts) -> Hit | None:
    """The gazetteer's place for ``parts``; ``None`` when the gazetteer does not know it."""
    town = _TOWN_INDEX.get(parts.town) if parts.town else None
    if parts.town and town is None:
        return None
    municipality = town.name if town else (
        _POSTCODE_INDEX[parts.postcode].municipality if parts.postcode else None)
    if parts.street:
        if municipality is None:
            return None
        road, number = _split_number(parts.street)
        street = _STREET_INDEX.get((road, municipality))
        if street is None:
            return None
        houses = {n.casefold(): known for n, known in street.houses.items()}
        if number is not None and number in houses:
            return address_hit(houses[number])
        return street_hit(street, exact=number is None)
    if parts.postcode:
        return _postcode_hit(parts.postcode)
    if town is not None:
        return locality_hit(town)
    return _country_hit() if parts.country else None


def _clean(value: str) -> str:
    return " ".join(strip_tokens(value).split()).strip(" ,")


def _resolve_text(text: str) -> Hit | None:
    label = _clean(text)
    key = normalise_address(label)
    if not key or _is_no_match(key):
        return None
    known = _TEXT_INDEX.get(key)
    if known is not None:
        return address_hit(known)
    parts = _parse_text(key)
    found = _locate(parts) if parts is not None else None
    return found or _hashed_hit(key, label)


def resolve(text: str | None, structured: Mapping[str, str] | None = None) -> Hit | None:
    """The hit for a query (magic tokens ignored), or ``None`` for no match.

    ``structured`` uses Nominatim's names (:data:`NOMINATIM_FIELDS`), plus an optional
    ``housenumber`` that is put before the street, as Nominatim's own clients do.
    """
    if text is not None and text.strip():
        return _resolve_text(text)
    fields = _structured_fields(structured or {})
    if not fields:
        return None
    normalised = {name: normalise_address(value) for name, value in fields.items()}
    if any(_is_no_match(value) for value in normalised.values()):
        return None
    postcode = normalised.get("postalcode") or None
    parts = _Parts(street=normalised.get("street") or None, town=normalised.get("city") or None,
                   postcode=postcode, country=normalised.get("country") in _COUNTRY_NAMES)
    named = parts.street or parts.town or parts.postcode or parts.country
    if named and (postcode is None or postcode in _POSTCODE_INDEX):
        found = _locate(parts)
        if found is not None:
            return found
    key = "|".join(f"{name}={value}" for name, value in normalised.items())
    return _hashed_hit(key, ", ".join(fields.values()))


def _structured_fields(structured: Mapping[str, str]) -> dict[str, str]:
    """Nominatim's fields, tokens stripped, empty ones dropped; a house number joins the street."""
    merged = dict(structured)
    number = _clean(merged.pop("housenumber", "") or "")
    if number:
        merged["street"] = f"{number} {merged.get('street', '')}".strip()
    fields = {name: _clean(merged[name]) for name in NOMINATIM_FIELDS if merged.get(name)}
    return {name: value for name, value in fields.items() if value}


def query_repr(text: str | None, structured: Mapping[str, str] | Iterable[tuple[str, str]]
               ) -> str | None:
    """The normalised query as logged: the free text, or ``field=value|field=value``."""
    if text is not None and text.strip():
        return normalise_address(text)
    pairs = structured.items() if isinstance(structured, Mapping) else structured
    order = {name: i for i, name in enumerate(NOMINATIM_FIELDS)}
    ranked = sorted(((n, v) for n, v in pairs if v.strip()),
                    key=lambda item: order.get(item[0], len(order)))
    return "|".join(f"{name}={normalise_address(value)}" for name, value in ranked) or None
