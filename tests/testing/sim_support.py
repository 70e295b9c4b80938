"""Helpers for the simulator's tests: a settable clock and a search request."""

from __future__ import annotations

import httpx

T0 = 1_700_000_000.0
VADUZ = "Städtle 38, 9490 Vaduz, Liechtenstein"


class FakeClock:
    """A settable clock: tests move time forward instead of sleeping."""

    def __init__(self, start: float = T0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def set(self, offset: float) -> None:
        self.now = T0 + offset


def search(client: httpx.Client, q: str | None = None, **params: str) -> httpx.Response:
    query: dict[str, str] = {"format": "jsonv2", **params}
    if q is not None:
        query["q"] = q
    return client.get("/search", params=query)
