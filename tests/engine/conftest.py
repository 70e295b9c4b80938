"""The engine's tests against the provider simulator on a shared fake clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from geotoolkit import FakeClock
from geotoolkit.testing import ProviderSimulator


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1_790_000_000.0)


@pytest.fixture
def sim(clock: FakeClock) -> Iterator[ProviderSimulator]:
    """The simulator on loopback, on the test's fake clock (a hang lasts 5 s of it)."""
    with ProviderSimulator(clock=clock.now, hang_seconds=5.0) as simulator:
        yield simulator
