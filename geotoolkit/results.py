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
    "STRUCTURED_FIELDS",
    "Failure",
    "Match",
    "NoMatch",
    "Outcome",
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


@dataclass(frozen=True)
class Match:
    """A geocoded point, ``lon`` first."""

    lon: float
    lat: float
    label: str = ""
    provider: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    attempts: int = 1
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
