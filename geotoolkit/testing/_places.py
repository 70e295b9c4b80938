"""Deterministic answers for the provider simulator: known addresses and hashed points.

Pure functions, stdlib only (plus ``normalise_address``). Coordinates are ``lon, lat``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from geotoolkit.results import normalise_address
from geotoolkit.testing._tokens import strip_tokens

__all__ = [
    "BBOX",
    "KNOWN_ADDRESSES",
    "NOMINATIM_FIELDS",
    "KnownAddress",
    "Place",
    "query_repr",
    "resolve",
]

#: Liechtenstein's bounding box: ``(min_lon, min_lat, max_lon, max_lat)``.
BBOX = (9.47, 47.05, 9.64, 47.27)

#: Nominatim's structured-search parameters, in the order used for keys and labels.
NOMINATIM_FIELDS = ("street", "city", "county", "state", "postalcode", "country")

_LICENCE = "Data © OpenStreetMap contributors, ODbL 1.0. http://osm.org/copyright (simulated)"
_MARGIN = 0.0005  # keep hashed points strictly inside the box


@dataclass(frozen=True)
class KnownAddress:
    """A real address in Liechtenstein with its approximate location."""

    id: int
    street: str  # "Städtle 38" (house number last, as written in Liechtenstein)
    postcode: str
    locality: str  # postal locality, e.g. "Gamprin-Bendern"
    municipality: str  # one of the eleven municipalities, e.g. "Gamprin"
    lon: float
    lat: float

    @property
    def address(self) -> str:
        """The full address as written in ``notebooks/data/addresses.csv``."""
        return f"{self.street}, {self.postcode} {self.locality}, Liechtenstein"


# Approximate real locations (lon, lat, 7 decimals), all inside BBOX.
KNOWN_ADDRESSES: tuple[KnownAddress, ...] = (
    KnownAddress(1, "Städtle 38", "9490", "Vaduz", "Vaduz", 9.5219500, 47.1397400),
    KnownAddress(2, "Peter-Kaiser-Platz 1", "9490", "Vaduz", "Vaduz", 9.5216300, 47.1405200),
    KnownAddress(3, "Städtle 32", "9490", "Vaduz", "Vaduz", 9.5212900, 47.1385100),
    KnownAddress(4, "Äulestrasse 20", "9490", "Vaduz", "Vaduz", 9.5205400, 47.1418600),
    KnownAddress(5, "Zollstrasse 2", "9490", "Vaduz", "Vaduz", 9.5193100, 47.1380700),
    KnownAddress(6, "Landstrasse 19", "9494", "Schaan", "Schaan", 9.5097200, 47.1661300),
    KnownAddress(7, "Feldkircher Strasse 100", "9494", "Schaan", "Schaan", 9.5136800, 47.1770400),
    KnownAddress(8, "Bahnhofstrasse 2", "9494", "Schaan", "Schaan", 9.5086500, 47.1654900),
    KnownAddress(9, "Dorfstrasse 24", "9495", "Triesen", "Triesen", 9.5290200, 47.1068300),
    KnownAddress(10, "Landstrasse 126", "9495", "Triesen", "Triesen", 9.5265700, 47.1101500),
    KnownAddress(11, "Landstrasse 86", "9496", "Balzers", "Balzers", 9.5010400, 47.0660200),
    KnownAddress(12, "St. Martins-Ring 2", "9492", "Eschen", "Eschen", 9.5224800, 47.2105300),
    KnownAddress(13, "Essanestrasse 116", "9492", "Eschen", "Eschen", 9.5199600, 47.2068900),
    KnownAddress(
        14, "Peter- und Paul-Strasse 28", "9493", "Mauren", "Mauren", 9.5439700, 47.2189600
    ),
    KnownAddress(15, "Poststrasse 1", "9491", "Ruggell", "Ruggell", 9.5264900, 47.2379800),
    KnownAddress(
        16, "Kirchstrasse 1", "9487", "Gamprin-Bendern", "Gamprin", 9.5057300, 47.2125100
    ),
    KnownAddress(17, "Landstrasse 4", "9497", "Triesenberg", "Triesenberg", 9.5430100, 47.1180200),
    KnownAddress(18, "Im Malbun 10", "9497", "Triesenberg", "Triesenberg", 9.6090300, 47.1019800),
    KnownAddress(19, "Dorfstrasse 48", "9498", "Planken", "Planken", 9.5445100, 47.1855400),
    KnownAddress(
        20, "Kirchstrasse 5", "9488", "Schellenberg", "Schellenberg", 9.5469800, 47.2305600
    ),
)


# --------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class Place:
    """One simulated search result."""

    lon: float
    lat: float
    place_id: int
    osm_id: int
    name: str
    display_name: str
    category: str
    type: str
    addresstype: str
    place_rank: int
    importance: float
    address: Mapping[str, str] = field(default_factory=dict)

    @property
    def lon_text(self) -> str:
        return f"{self.lon:.7f}"

    @property
    def lat_text(self) -> str:
        return f"{self.lat:.7f}"

    def to_json(self, fmt: str = "jsonv2", addressdetails: bool = True) -> dict[str, Any]:
        """The Nominatim object: ``lat`` before ``lon``, both strings with 7 decimals."""
        d = 0.0001
        out: dict[str, Any] = {
            "place_id": self.place_id,
            "licence": _LICENCE,
            "osm_type": "node",
            "osm_id": self.osm_id,
            "lat": self.lat_text,
            "lon": self.lon_text,
        }
        if fmt == "jsonv2":
            out["category"] = self.category
            out["type"] = self.type
            out["place_rank"] = self.place_rank
            out["importance"] = self.importance
            out["addresstype"] = self.addresstype
            out["name"] = self.name
        else:  # format=json names the category "class", like Nominatim
            out["class"] = self.category
            out["type"] = self.type
            out["place_rank"] = self.place_rank
            out["importance"] = self.importance
            out["addresstype"] = self.addresstype
            out["name"] = self.name
        out["display_name"] = self.display_name
        if addressdetails:
            out["address"] = dict(self.address)
        out["boundingbox"] = [
            f"{self.lat - d:.7f}",
            f"{self.lat + d:.7f}",
            f"{self.lon - d:.7f}",
            f"{self.lon + d:.7f}",
        ]
        return out


def _split_house_number(street: str) -> tuple[str, str | None]:
    head, _, tail = street.rpartition(" ")
    if head and any(c.isdigit() for c in tail):
        return head, tail
    return street, None


def _known_place(known: KnownAddress) -> Place:
    road, number = _split_house_number(known.street)
    address = {"road": road}
    if number:
        address = {"house_number": number, **address}
    address.update(
        {
            "village" if known.municipality != "Vaduz" else "town": known.locality,
            "municipality": known.municipality,
            "postcode": known.postcode,
            "country": "Liechtenstein",
            "country_code": "li",
        }
    )
    return Place(
        lon=known.lon,
        lat=known.lat,
        place_id=300_000_000 + known.id,
        osm_id=9_000_000_000 + known.id,
        name=known.street,
        display_name=(
            f"{number + ', ' if number else ''}{road}, {known.locality}, "
            f"{known.postcode}, Liechtenstein"
        ),
        category="building" if number else "highway",
        type="house" if number else "residential",
        addresstype="building" if number else "road",
        place_rank=30 if number else 26,
        importance=0.5,
        address=address,
    )


def _index() -> tuple[dict[str, KnownAddress], dict[tuple[str, str], KnownAddress]]:
    text: dict[str, KnownAddress] = {}
    structured: dict[tuple[str, str], KnownAddress] = {}
    for k in KNOWN_ADDRESSES:
        road, number = _split_house_number(k.street)
        streets = {k.street, f"{number} {road}"} if number else {k.street}
        places = {k.locality, k.municipality}
        for street in streets:
            for place in places:
                for form in (
                    f"{street}, {k.postcode} {place}, Liechtenstein",
                    f"{street}, {k.postcode} {place}",
                    f"{street}, {place}, Liechtenstein",
                    f"{street}, {place}",
                    f"{street} {k.postcode} {place}",
                    f"{street} {place}",
                ):
                    text.setdefault(normalise_address(form), k)
            for where in (*places, k.postcode):
                structured.setdefault((normalise_address(street), normalise_address(where)), k)
    return text, structured


_TEXT_INDEX, _STRUCTURED_INDEX = _index()


def _is_no_match(normalised: str) -> bool:
    return "nowhere" in normalised or "no match" in normalised


def query_repr(text: str | None, structured: Mapping[str, str]) -> str | None:
    """The normalised query as logged: the free text, or ``field=value|field=value``."""
    if text is not None and text.strip():
        return normalise_address(text)
    parts = [
        f"{name}={normalise_address(structured[name])}"
        for name in NOMINATIM_FIELDS
        if structured.get(name, "").strip()
    ]
    return "|".join(parts) or None


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


def _hashed_place(key: str, label: str) -> Place:
    lon, lat, place_id = _hashed_point(key)
    near = KNOWN_ADDRESSES[place_id % len(KNOWN_ADDRESSES)]  # cheap, deterministic
    address = {
        "road": label.split(",")[0].strip(),
        "municipality": near.municipality,
        "postcode": near.postcode,
        "country": "Liechtenstein",
        "country_code": "li",
    }
    display = label if label.casefold().endswith("liechtenstein") else f"{label}, Liechtenstein"
    return Place(
        lon=lon,
        lat=lat,
        place_id=place_id,
        osm_id=place_id * 7,
        name=address["road"],
        display_name=display,
        category="place",
        type="house",
        addresstype="place",
        place_rank=30,
        importance=round(0.2 + (place_id % 1000) / 5000, 5),
        address=address,
    )


def resolve(text: str | None, structured: Mapping[str, str] | None = None) -> Place | None:
    """The place served for a query (magic tokens ignored), or ``None`` for no match."""
    structured = structured or {}
    if text is not None and text.strip():
        label = " ".join(strip_tokens(text).split()).strip(" ,")
        key = normalise_address(label)
        if not key or _is_no_match(key):
            return None
        known = _TEXT_INDEX.get(key)
        if known is not None:
            return _known_place(known)
        return _hashed_place(key, label)
    fields = {
        name: " ".join(strip_tokens(structured[name]).split()).strip(" ,")
        for name in NOMINATIM_FIELDS
        if structured.get(name)
    }
    fields = {name: value for name, value in fields.items() if value}
    if not fields:
        return None
    normalised = {name: normalise_address(value) for name, value in fields.items()}
    if any(_is_no_match(value) for value in normalised.values()):
        return None
    street = normalised.get("street", "")
    for where in (normalised.get("city"), normalised.get("postalcode")):
        if street and where:
            hit = _STRUCTURED_INDEX.get((street, where))
            if hit is not None:
                return _known_place(hit)
    key = "|".join(f"{name}={value}" for name, value in normalised.items())
    return _hashed_place(key, ", ".join(fields.values()))
