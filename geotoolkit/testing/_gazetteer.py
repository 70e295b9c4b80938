"""The simulator's small world: Liechtenstein's addresses, streets, postcodes and towns.

Pure data, stdlib only. Every point is ``(lon, lat)`` with at most 7 decimals (the served
text parses back exactly), inside :data:`BBOX`. The tables are approximate but plausible:

- :data:`KNOWN_ADDRESSES`: 20 real addresses (the building level);
- :data:`STREETS`: each street of those addresses, and a few more without any known
  house (``Duxweg``, ``Austrasse``...), with a centre (the street level: a known street
  with a house number that does not exist, ``"Duxweg 999, Schaan"``, lands there);
- :data:`POSTCODES`: one centroid per postal code (``"9490 Vaduz"``);
- :data:`LOCALITIES`: the eleven municipalities (``"Vaduz"``), with their postal names;
- :data:`COUNTRY`: Liechtenstein itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "BBOX",
    "COUNTRY",
    "KNOWN_ADDRESSES",
    "LOCALITIES",
    "POSTCODES",
    "STREETS",
    "Country",
    "KnownAddress",
    "Locality",
    "Postcode",
    "Street",
    "split_house_number",
]

#: Liechtenstein's bounding box: ``(min_lon, min_lat, max_lon, max_lat)``.
BBOX: Final = (9.47, 47.05, 9.64, 47.27)


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


def split_house_number(street: str) -> tuple[str, str | None]:
    """``("Städtle", "38")`` from ``"Städtle 38"``; ``(street, None)`` without a number.

    >>> split_house_number("Peter- und Paul-Strasse 28"), split_house_number("Duxweg")
    (('Peter- und Paul-Strasse', '28'), ('Duxweg', None))
    """
    head, _, tail = street.rpartition(" ")
    if head and any(c.isdigit() for c in tail):
        return head, tail
    return street, None


@dataclass(frozen=True)
class Street:
    """A street of one municipality: its centre and its known houses by number."""

    id: int
    name: str
    postcode: str
    locality: str
    municipality: str
    lon: float
    lat: float
    houses: dict[str, KnownAddress] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Postcode:
    """A postal code's centroid."""

    code: str
    locality: str
    municipality: str
    lon: float
    lat: float


@dataclass(frozen=True)
class Locality:
    """A municipality's centroid, with the names it is searched by."""

    id: int
    name: str
    postcode: str
    region: str  # "Oberland" or "Unterland"
    lon: float
    lat: float
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Country:
    """The country: its centroid and its codes."""

    name: str
    code: str  # ISO 3166-1 alpha-2
    alpha3: str
    lon: float
    lat: float


COUNTRY: Final = Country("Liechtenstein", "LI", "LIE", 9.5554000, 47.1660000)

LOCALITIES: tuple[Locality, ...] = (
    Locality(1, "Vaduz", "9490", "Oberland", 9.5227962, 47.1392862),
    Locality(2, "Schaan", "9494", "Oberland", 9.5097000, 47.1659000),
    Locality(3, "Triesen", "9495", "Oberland", 9.5276000, 47.1069000),
    Locality(4, "Balzers", "9496", "Oberland", 9.5020000, 47.0660000),
    Locality(5, "Eschen", "9492", "Unterland", 9.5228000, 47.2107000),
    Locality(6, "Mauren", "9493", "Unterland", 9.5437000, 47.2190000),
    Locality(7, "Ruggell", "9491", "Unterland", 9.5263000, 47.2380000),
    Locality(8, "Gamprin", "9487", "Unterland", 9.5100000, 47.2210000, ("Gamprin-Bendern",)),
    Locality(9, "Triesenberg", "9497", "Oberland", 9.5425000, 47.1180000),
    Locality(10, "Planken", "9498", "Oberland", 9.5440000, 47.1855000),
    Locality(11, "Schellenberg", "9488", "Unterland", 9.5470000, 47.2310000),
)

_POSTAL_NAMES: Final = {"9487": "Gamprin-Bendern"}

POSTCODES: tuple[Postcode, ...] = tuple(
    Postcode(code, _POSTAL_NAMES.get(code, town.name), town.name, lon, lat)
    for code, town, lon, lat in (
        ("9490", LOCALITIES[0], 9.5215478, 47.1412006),
        ("9494", LOCALITIES[1], 9.5110000, 47.1690000),
        ("9495", LOCALITIES[2], 9.5300000, 47.1040000),
        ("9496", LOCALITIES[3], 9.4990000, 47.0640000),
        ("9492", LOCALITIES[4], 9.5250000, 47.2070000),
        ("9493", LOCALITIES[5], 9.5460000, 47.2160000),
        ("9491", LOCALITIES[6], 9.5280000, 47.2420000),
        ("9487", LOCALITIES[7], 9.5070000, 47.2150000),
        ("9497", LOCALITIES[8], 9.5450000, 47.1150000),
        ("9498", LOCALITIES[9], 9.5460000, 47.1840000),
        ("9488", LOCALITIES[10], 9.5480000, 47.2330000),
    )
)

# Street centres (lon, lat): the streets of the known addresses, then streets with no
# known house. The latter lie well over 200 m from every known address.
_STREET_CENTRES: Final[tuple[tuple[str, str, float, float], ...]] = (
    ("Städtle", "Vaduz", 9.5216000, 47.1392000),
    ("Peter-Kaiser-Platz", "Vaduz", 9.5218000, 47.1407000),
    ("Äulestrasse", "Vaduz", 9.5225000, 47.1425000),
    ("Zollstrasse", "Vaduz", 9.5180000, 47.1375000),
    ("Landstrasse", "Schaan", 9.5105000, 47.1675000),
    ("Feldkircher Strasse", "Schaan", 9.5150000, 47.1760000),
    ("Bahnhofstrasse", "Schaan", 9.5080000, 47.1648000),
    ("Dorfstrasse", "Triesen", 9.5295000, 47.1075000),
    ("Landstrasse", "Triesen", 9.5260000, 47.1095000),
    ("Landstrasse", "Balzers", 9.5015000, 47.0670000),
    ("St. Martins-Ring", "Eschen", 9.5228000, 47.2100000),
    ("Essanestrasse", "Eschen", 9.5195000, 47.2075000),
    ("Peter- und Paul-Strasse", "Mauren", 9.5435000, 47.2185000),
    ("Poststrasse", "Ruggell", 9.5260000, 47.2385000),
    ("Kirchstrasse", "Gamprin", 9.5060000, 47.2120000),
    ("Landstrasse", "Triesenberg", 9.5425000, 47.1185000),
    ("Im Malbun", "Triesenberg", 9.6085000, 47.1025000),
    ("Dorfstrasse", "Planken", 9.5440000, 47.1860000),
    ("Kirchstrasse", "Schellenberg", 9.5465000, 47.2300000),
    ("Duxweg", "Schaan", 9.5122867, 47.1702446),
    ("Austrasse", "Vaduz", 9.5255000, 47.1310000),
    ("Fürst-Franz-Josef-Strasse", "Vaduz", 9.5300000, 47.1450000),
    ("Messinastrasse", "Triesen", 9.5180000, 47.0985000),
)


def _streets() -> tuple[Street, ...]:
    towns = {town.name: town for town in LOCALITIES}
    streets: list[Street] = []
    for number, (name, municipality, lon, lat) in enumerate(_STREET_CENTRES, start=1):
        town = towns[municipality]
        postal = _POSTAL_NAMES.get(town.postcode, town.name)
        street = Street(number, name, town.postcode, postal, municipality, lon, lat)
        for known in KNOWN_ADDRESSES:
            road, house = split_house_number(known.street)
            if (road, known.municipality) == (name, municipality) and house is not None:
                street.houses[house] = known
        streets.append(street)
    return tuple(streets)


STREETS: tuple[Street, ...] = _streets()
