"""Fixtures for accessor tests: a simulator, a provider on it, and a coordinate server."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from geotoolkit.providers import Nominatim
from geotoolkit.testing import ProviderSimulator

UA = "geotoolkit-tests/1.0 (tests@example.org)"


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


@pytest.fixture
def fake_provider() -> Nominatim:
    """A provider whose requests go to an injected MockTransport (never the network)."""
    return Nominatim("http://coordinates.test", user_agent=UA)
