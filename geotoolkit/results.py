"""Queries and per-row outcomes: plain frozen dataclasses.

Coordinates are always ``lon, lat``, in that order.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

__all__ = [
    "PRECISIONS",
    "STRUCTURED_FIELDS",
    "Failure",
    "Match",
    "NoMatch",
    "Outcome",
    "Place",
    "Precision",
    "Query",
    "normalise_address",
    "query_from_value",
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


def _blank(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def query_from_value(value: object) -> Query | str:
    """Turn a cell (or a mapping of structured fields) into a Query.

    Returns a reason string instead when the value can never be geocoded:
    ``None``, NaN, empty or whitespace-only text, non-strings.

    >>> query_from_value("  Vaduz ").text
    'Vaduz'
    >>> query_from_value(float("nan"))
    'missing address'
    >>> query_from_value(42)
    'address is not text (int)'
    """
    if isinstance(value, Query):
        return value
    if isinstance(value, Mapping):
        parts: dict[str, str] = {}
        for name in STRUCTURED_FIELDS:
            cell = value.get(name)
            if _blank(cell):
                continue
            if not isinstance(cell, str | int):
                return f"{name} is not text ({type(cell).__name__})"
            parts[name] = str(cell).strip()
        return Query(**parts) if parts else "missing address"
    if _blank(value):
        return "missing address" if not isinstance(value, str) else "empty address"
    if not isinstance(value, str):
        return f"address is not text ({type(value).__name__})"
    return Query(text=value.strip())


#: How precise a match is, the same words for every provider, finest first:
#: ``address`` (a building, a house number, or a place at one), ``interpolated`` (an
#: address estimated along a street), ``street``, ``postcode``, ``locality`` (town,
#: village, suburb, neighbourhood), ``region`` (county, state, province), ``country``,
#: and ``unknown`` where the provider says nothing usable.
PRECISIONS = ("address", "interpolated", "street", "postcode", "locality", "region", "country",
              "unknown")
Precision = Literal["address", "interpolated", "street", "postcode", "locality", "region",
                    "country", "unknown"]


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
