"""Provider test helpers: every provider built the same way, and fixture envelopes.

Fixture files live in ``fixtures/<provider>/<case>.json`` (answers to an address),
``fixtures/<provider>/reverse/<case>.json`` (answers to a point) and
``fixtures/<provider>/batch/<case>.json`` (answers to a batch); each is a whole HTTP
response modelled on the provider's public documentation (no network here)::

    {"expect": "Match" | "NoMatch" | "Failure" | "<ProviderError subclass>",
     "status": 200, "headers": {...}, "json": ... | "text": "...",
     "retry_after": 30.0, "reason_contains": "..."}   # optional expectations
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from geotoolkit.providers import PROVIDERS, Provider, get_provider
from geotoolkit.results import PRECISIONS, Match, Place

FIXTURES = Path(__file__).parent / "fixtures"
SECRET = "sk-TEST-SECRET-7f3a9"
AGENT = "geotoolkit-tests/1.0 (tests@example.org)"

#: Providers that cannot run at their default host without a key.
KEYED = frozenset({"locationiq", "opencage", "google", "mapbox", "here", "arcgis", "pelias"})

#: The match fixtures' point, lon first: Oslo, or (Census) Suitland, Maryland.
OSLO = (10.7522454, 59.9138688)
SUITLAND = (-76.92744, 38.845985)
EXPECTED_POINT = {name: SUITLAND if name == "census" else OSLO for name in PROVIDERS}


def make(name: str, **options: Any) -> Provider:
    """A provider by name with a test key (when it takes one) and user agent."""
    if name in KEYED:
        options.setdefault("api_key", SECRET)
    options.setdefault("user_agent", AGENT)
    return get_provider(name, **options)


def load(provider: str, case: str, kind: str = "") -> dict[str, Any]:
    """The envelope of ``case``; ``kind`` is ``""`` (forward), ``"reverse"`` or ``"batch"``."""
    folder = FIXTURES / provider / kind if kind else FIXTURES / provider
    envelope: dict[str, Any] = json.loads((folder / f"{case}.json").read_text())
    return envelope


def response_of(envelope: dict[str, Any], request: httpx.Request | None = None) -> httpx.Response:
    """The fixture envelope as an httpx.Response value."""
    content: Callable[[], dict[str, Any]] = (
        (lambda: {"json": envelope["json"]}) if "json" in envelope
        else (lambda: {"text": envelope["text"]}))
    return httpx.Response(envelope["status"], headers=envelope["headers"], request=request,
                          **content())


def cases(provider: str, kind: str = "") -> list[str]:
    folder = FIXTURES / provider / kind if kind else FIXTURES / provider
    return sorted(p.stem for p in folder.glob("*.json"))


def check_match_invariants(match: Match) -> None:
    """What every Match promises, whatever the provider said."""
    assert match.precision in PRECISIONS
    assert match.score is None or 0.0 <= match.score <= 1.0
    assert isinstance(match.place, Place) and len(match.label) <= 1000
    code = match.place.country_code
    assert code is None or (len(code) == 2 and code.isupper() and code.isalpha())
    if match.place.bbox is not None:
        west, south, east, north = match.place.bbox
        assert -180 <= west <= 180 and -180 <= east <= 180 and -90 <= south <= north <= 90
    assert match.place.osm_type in (None, "node", "way", "relation")


def check_match(match: Match, envelope: dict[str, object]) -> None:
    """The fixture's expected precision, score and place fields (those it names)."""
    assert match.precision == envelope["precision"]
    expected_score = envelope["score"]
    if expected_score is None:
        assert match.score is None
    else:
        assert match.score == pytest.approx(expected_score)
    check_match_invariants(match)
    place = envelope["place"]
    assert isinstance(place, dict)
    for field, value in place.items():
        got = getattr(match.place, field)
        if field == "bbox" and value is not None:
            assert got == pytest.approx(tuple(value)), field
        else:
            assert got == value, (field, got, value)
