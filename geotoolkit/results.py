"""Queries and per-row outcomes: plain frozen dataclasses.

Coordinates are always ``lon, lat``, in that order.
"""

from __future__ import annotations

import math
import numbers
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

__all__ = [
    "PRECISIONS",
    "REVERSE_DECIMALS",
    "STRUCTURED_FIELDS",
    "Failure",
    "Match",
    "NoMatch",
    "Outcome",
    "Place",
    "Precision",
    "Query",
    "ReverseQuery",
    "normalise_address",
    "query_from_value",
    "reverse_query",
    "text_problem",
]

#: Structured query fields, in the order used for keys and labels.
STRUCTURED_FIELDS = ("housenumber", "street", "city", "county", "state", "postalcode", "country")


def normalise_address(text: str) -> str:
    """Casefold, NFKC-normalise and collapse whitespace and commas.

    >>> normalise_address("  Städtle 38 ,  9490   VADUZ ")
    'städtle 38, 9490 vaduz'
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    parts = [" ".join(p.split()) for p in text.split(",")]
    return ", ".join(p for p in parts if p)


@dataclass(frozen=True)
class Query:
    """One address to geocode: free text, or structured fields, not both."""

    text: str | None = None
    housenumber: str | None = None
    street: str | None = None
    city: str | None = None
    county: str | None = None
    state: str | None = None
    postalcode: str | None = None
    country: str | None = None

    def structured(self) -> dict[str, str]:
        """The structured fields that are set."""
        return {k: v for k in STRUCTURED_FIELDS if (v := getattr(self, k))}

    def key(self) -> str:
        """A normalised key: equal for addresses that differ only in case or spacing."""
        if self.text is not None:
            return normalise_address(self.text)
        return "|".join(f"{k}={normalise_address(v)}" for k, v in self.structured().items())

    def __str__(self) -> str:
        if self.text is not None:
            return self.text
        return ", ".join(self.structured().values())


#: Reverse queries are cached by their coordinates rounded to this many decimals of a
#: degree (1e-6 degrees: about 0.1 m), so GPS jitter below that shares one answer.
REVERSE_DECIMALS = 6


@dataclass(frozen=True)
class ReverseQuery:
    """A point to turn into an address, ``lon`` first (EPSG:4326 degrees).

    ``key()`` rounds to ``decimals`` (default :data:`REVERSE_DECIMALS`): two points
    closer than that share one cache entry.

    >>> ReverseQuery(9.5219512, 47.1397409).key()
    'reverse:9.521951,47.139741'
    """

    lon: float
    lat: float
    decimals: int = REVERSE_DECIMALS

    def key(self) -> str:
        lon, lat = (round(v, self.decimals) + 0.0 for v in (self.lon, self.lat))  # no -0.0
        return f"reverse:{lon:.{self.decimals}f},{lat:.{self.decimals}f}"

    def __str__(self) -> str:
        return f"({self.lon}, {self.lat})"


def reverse_query(lon: object, lat: object) -> ReverseQuery | str:
    """A ReverseQuery for a point, or the reason it can never be sent.

    >>> reverse_query(9.52, 47.14)
    ReverseQuery(lon=9.52, lat=47.14, decimals=6)
    >>> reverse_query(47.14, 99.0)
    'latitude 99.0 out of range [-90, 90]'
    >>> reverse_query(0, 0.0)  # a missing fix written as zeros, not a point to look up
    'null island (0, 0)'
    """
    if _missing(lon) or _missing(lat):
        return "missing coordinates"
    if isinstance(lon, bool) or isinstance(lat, bool) or not (
            isinstance(lon, numbers.Real) and isinstance(lat, numbers.Real)):
        return "coordinates are not numbers"
    try:
        x, y = float(lon), float(lat)
    except (OverflowError, ValueError):  # an integer too large for a float
        return "coordinates are not usable numbers (too large for a float)"
    if not (math.isfinite(x) and math.isfinite(y)):
        return f"coordinates are not finite ({x}, {y})"
    if not -180.0 <= x <= 180.0:
        return f"longitude {x} out of range [-180, 180]"
    if not -90.0 <= y <= 90.0:
        return f"latitude {y} out of range [-90, 90]"
    if x == 0.0 and y == 0.0:  # as validate.check_lonlat: the core modules import no other
        return "null island (0, 0)"
    return ReverseQuery(x, y)


def _missing(value: object) -> bool:
    """None, NaN of any float type, pandas' NA and NaT (without importing pandas)."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    try:
        return bool(value != value)  # NaN is the only value not equal to itself
    except Exception:  # an array, or a type whose comparison does not give a truth value
        return False


def _blank(value: object) -> bool:
    return _missing(value) or (isinstance(value, str) and not value.strip())


def text_problem(text: str, what: str = "address") -> str | None:
    """Why ``text`` cannot be sent anywhere, or ``None`` when it can.

    Text that is not valid Unicode (a lone surrogate, e.g. from a badly decoded
    file) cannot be encoded for a URL, a cache key or a file; a NUL character is
    refused by PostgreSQL and by most servers.

    >>> text_problem("Vaduz") is None
    True
    >>> text_problem("Vad" + chr(0xDCFC) + "z")
    'address is not valid text (lone surrogate U+DCFC at position 3)'
    """
    for position, char in enumerate(text):
        if "\ud800" <= char <= "\udfff":
            return (f"{what} is not valid text (lone surrogate U+{ord(char):04X} at position "
                    f"{position})")
        if char == "\x00":
            return f"{what} contains a NUL character (at position {position})"
    return None


def _not_text(what: str, value: object) -> str:
    """Why a cell that is no text is not sent; for a number (a column of postcodes or house
    numbers that pandas read as numbers), how to read it as text instead.

    >>> _not_text("postalcode", 9490.0)
    'postalcode is not text (float); read the column as text, e.g. pd.read_csv(..., dtype=str)'
    """
    kind = f"{what} is not text ({type(value).__name__})"
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        return f"{kind}; read the column as text, e.g. pd.read_csv(..., dtype=str)"
    return kind


def _cell_text(name: str, cell: object) -> str:
    """A structured cell as text, or raise ValueError with the reason."""
    if isinstance(cell, bool) or not isinstance(cell, str | numbers.Integral):
        raise ValueError(_not_text(name, cell))
    text = str(cell).strip()
    problem = text_problem(text, name)
    if problem is not None:
        raise ValueError(problem)
    return text


def query_from_value(value: object) -> Query | str:
    """Turn a cell (or a mapping of structured fields) into a Query.

    Returns a reason string instead when the value can never be geocoded:
    ``None``, NaN, ``pd.NA``, empty or whitespace-only text, non-strings, text that
    is not valid Unicode or holds a NUL character, free text without a letter or digit
    (``-``, ``?``, a zero-width space), a spreadsheet's error value (``#N/A``) or
    ``NULL``.

    >>> query_from_value("  Vaduz ").text
    'Vaduz'
    >>> query_from_value(float("nan"))
    'missing address'
    >>> query_from_value(b"Vaduz")
    'address is not text (bytes)'
    >>> query_from_value(9490)
    'address is not text (int); read the column as text, e.g. pd.read_csv(..., dtype=str)'
    """
    if isinstance(value, Query):
        return value
    if isinstance(value, Mapping):
        parts: dict[str, str] = {}
        try:
            for name in STRUCTURED_FIELDS:
                cell = value.get(name)
                if not _blank(cell):
                    parts[name] = _cell_text(name, cell)
        except ValueError as exc:
            return str(exc)
        return Query(**parts) if parts else "missing address"
    if _blank(value):
        return "missing address" if not isinstance(value, str) else "empty address"
    if not isinstance(value, str):
        return _not_text("address", value)
    text = value.strip()
    return text_problem(value) or _placeholder(text) or _no_word(text) or Query(text=text)


#: What a spreadsheet shows in a cell whose formula failed (a VLOOKUP that found nothing:
#: ``#N/A``), and SQL's NULL as database tools export it into text: no address, and sent
#: as one, a provider may well find a place for the words.
_SPREADSHEET_ERRORS = frozenset({"#N/A", "#VALUE!", "#REF!", "#DIV/0!", "#NAME?", "#NUM!",
                                 "#NULL!", "#CALC!", "#SPILL!", "#FIELD!", "#BLOCKED!"})


def _placeholder(text: str) -> str | None:
    """Why a free-text cell that stands for no value is not sent.

    >>> _placeholder("#N/A")
    "address is a spreadsheet's error value '#N/A' (its formula failed)"
    >>> _placeholder("NULL"), _placeholder("Nullstrasse 1") is None
    ("missing address (the cell reads 'NULL')", True)
    """
    if text.upper() in _SPREADSHEET_ERRORS:
        return f"address is a spreadsheet's error value {text!r} (its formula failed)"
    if text == "NULL":
        return "missing address (the cell reads 'NULL')"
    return None


def _no_word(text: str) -> str | None:
    """Why a free-text cell without a single letter or digit is not sent: a placeholder
    (``-``, ``?``, ``.``) or invisible characters (a zero-width space, a stray byte order
    mark), which a provider would answer with some place or nothing.

    >>> _no_word("-"), _no_word(" ?! "), _no_word("7") is None
    ("address has no letter or digit: '-'", "address has no letter or digit: ' ?! '", True)
    """
    if any(char.isalnum() for char in text):
        return None
    return f"address has no letter or digit: {text[:20]!r}"


#: How precise a match is, the same words for every provider, finest first:
#: ``address`` (a building, a house number, or a place at one), ``interpolated`` (an
#: address estimated along a street), ``street``, ``postcode``, ``locality`` (town,
#: village, suburb, neighbourhood), ``region`` (county, state, province), ``country``,
#: ``feature`` (a named place outside the address hierarchy: a river, lake, forest, park,
#: peak; its point is somewhere on it and says nothing of an address, so it ranks below
#: ``country`` and no ``min_precision`` but ``feature`` keeps it), and ``unknown`` where
#: the provider says nothing usable.
PRECISIONS = ("address", "interpolated", "street", "postcode", "locality", "region", "country",
              "feature", "unknown")
Precision = Literal["address", "interpolated", "street", "postcode", "locality", "region",
                    "country", "feature", "unknown"]


@dataclass(frozen=True)
class Place:
    """The provider's structured answer for a match (``full_results=True`` shows it).

    ``place_id`` is the provider's own id (for Nominatim-like providers also
    ``osm_type`` and ``osm_id``); the address components; ``bbox`` is
    ``(min_lon, min_lat, max_lon, max_lat)`` where the provider gives one.
    """

    place_id: str | None = None
    osm_type: str | None = None
    osm_id: int | None = None
    housenumber: str | None = None
    street: str | None = None
    postcode: str | None = None
    locality: str | None = None
    region: str | None = None
    country_code: str | None = None
    bbox: tuple[float, float, float, float] | None = None


@dataclass(frozen=True)
class Match:
    """A geocoded point, ``lon`` first.

    ``precision`` is one of :data:`PRECISIONS`; ``score`` the provider's confidence or
    relevance scaled to ``[0, 1]`` (``None`` when it gives none); ``place`` the
    structured answer.
    """

    lon: float
    lat: float
    label: str = ""
    provider: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    attempts: int = 1
    precision: Precision = "unknown"
    score: float | None = None
    place: Place = field(default_factory=Place)
    status: Literal["matched"] = field(default="matched", init=False)


@dataclass(frozen=True)
class NoMatch:
    """The provider answered, and found nothing. Never retried."""

    reason: str = "no match"
    provider: str = ""
    attempts: int = 1
    status: Literal["no_match"] = field(default="no_match", init=False)


@dataclass(frozen=True)
class Failure:
    """The row could not be geocoded; ``reason`` says why, ``error`` is the exception name."""

    reason: str
    error: str | None = None
    provider: str = ""
    attempts: int = 0
    status: Literal["failed"] = field(default="failed", init=False)


Outcome = Match | NoMatch | Failure


def with_attempts(outcome: Outcome, attempts: int) -> Outcome:
    """Copy ``outcome`` with its attempt count set."""
    values = {f.name: getattr(outcome, f.name) for f in fields(outcome) if f.init}
    values["attempts"] = attempts
    return type(outcome)(**values)
