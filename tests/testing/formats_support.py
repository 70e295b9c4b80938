"""Shared by the simulator's format tests: every provider pointed at one simulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from geotoolkit.providers import (
    ArcGIS,
    Census,
    Geonorge,
    Google,
    Here,
    LocationIQ,
    Mapbox,
    Nominatim,
    OpenCage,
    Pelias,
    Photon,
)
from geotoolkit.results import Outcome, Query

KEY = "sk-sim-0123456789"
AGENT = "geotoolkit-tests/1.0 (tests@example.org)"

#: geotoolkit's provider, built against a base URL (each with its key, where it has one).
FACTORIES: dict[str, Callable[[str], Any]] = {
    "nominatim": lambda url: Nominatim(url, user_agent=AGENT, api_key=KEY),
    "locationiq": lambda url: LocationIQ(url, api_key=KEY),
    "photon": lambda url: Photon(url),
    "pelias": lambda url: Pelias(url, api_key=KEY),
    "opencage": lambda url: OpenCage(url, api_key=KEY),
    "google": lambda url: Google(url, api_key=KEY),
    "mapbox": lambda url: Mapbox(url, api_key=KEY),
    "here": lambda url: Here(url, api_key=KEY),
    "arcgis": lambda url: ArcGIS(url, api_key=KEY),
    "geonorge": lambda url: Geonorge(url),
    "census": lambda url: Census(url),
}
#: The providers whose APIs take a key.
KEYED = ("nominatim", "locationiq", "pelias", "opencage", "google", "mapbox", "here", "arcgis")


def geocode(client: httpx.Client, provider: Any, query: Query) -> Outcome:
    """Build with the provider, send with httpx, parse with the provider."""
    request = provider.build_request(query)
    response = client.send(request)
    response.read()
    outcome: Outcome = provider.parse_response(query, response)
    return outcome
