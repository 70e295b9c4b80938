"""Fixtures for accessor tests: a simulator, a provider on it, and a coordinate server."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from geotoolkit.providers import Nominatim
from geotoolkit.results import Match, NoMatch, Outcome, Query
from geotoolkit.testing import ProviderSimulator

UA = "geotoolkit-tests/1.0 (tests@example.org)"

# The scripted loopback gazetteer of tests/orchestration (precision, chain and review tests).
_SUPPORT = str(Path(__file__).resolve().parents[2] / "orchestration")
if _SUPPORT not in sys.path:
    sys.path.append(_SUPPORT)


@pytest.fixture
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator() as simulator:
        yield simulator


@pytest.fixture
def provider(sim: ProviderSimulator) -> Nominatim:
    return Nominatim(sim.url, user_agent=UA)


@pytest.fixture
def cache_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/results.sqlite"


@pytest.fixture
def run(provider: Nominatim, cache_url: str) -> Callable[..., Any]:
    """``run(df, *args, **options)``: the accessor with test defaults (memory gate, tmp cache)."""

    def call(df: pd.DataFrame, *args: Any, **options: Any) -> Any:
        defaults = {"provider": provider, "gate": "memory://", "cache": cache_url,
                    "progress": False, "rate": None}
        return df.geocode.run(*args, **{**defaults, **options})

    return call


class CoordinateServer:
    """An httpx handler answering like Nominatim with chosen (lon, lat) texts per query."""

    def __init__(self, answers: Mapping[str, tuple[str, str] | None]) -> None:
        self.answers = dict(answers)
        self.sent: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        q = request.url.params["q"]
        self.sent.append(q)
        answer = self.answers.get(q)
        if answer is None:
            return httpx.Response(200, json=[])
        lon, lat = answer
        return httpx.Response(200, json=[{"lat": lat, "lon": lon, "display_name": f"{q} (label)"}])

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


@pytest.fixture
def coordinates() -> Callable[[Mapping[str, tuple[str, str] | None]], CoordinateServer]:
    return CoordinateServer


class RawCoordinates:
    """A tiny sans-I/O provider passing the served coordinates through unchecked.

    Real providers refuse out-of-range values at their border; this one lets the
    accessor's own validation see anything (NaN, 200.5, swapped pairs).
    """

    name = "raw"
    host = "coordinates.test"
    default_rate: float | None = math.inf  # a mock transport: no limit to discover
    gate_key = "coordinates.test"
    secrets: tuple[str, ...] = ()
    max_query_chars = 2000

    def cache_namespace(self) -> str:
        return "raw-coordinates"

    def build_request(self, query: Query) -> httpx.Request:
        return httpx.Request("GET", f"http://{self.host}/search", params={"q": str(query)})

    def parse_response(self, query: Query, response: httpx.Response) -> Outcome:
        body = response.json()
        if not body:
            return NoMatch(provider=self.name)
        first = body[0]
        return Match(lon=float(first["lon"]), lat=float(first["lat"]),
                     label=first["display_name"], provider=self.name)


@pytest.fixture
def fake_provider() -> RawCoordinates:
    """A provider whose requests go to an injected MockTransport (never the network)."""
    return RawCoordinates()
