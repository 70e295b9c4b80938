"""Offline test helpers: a local Nominatim-compatible provider simulator.

>>> from geotoolkit.testing import ProviderSimulator
>>> with ProviderSimulator(rate_limit=1) as sim:   # doctest: +SKIP
...     print(sim.url)

Run it from a terminal with ``python -m geotoolkit.testing --port 8080 --rate-limit 1``.
"""

from geotoolkit.testing._places import KNOWN_ADDRESSES, KnownAddress
from geotoolkit.testing.simulator import (
    RESET_STATUS,
    ProviderSimulator,
    RetryAfterMode,
    SimulatedRequest,
)

__all__ = [
    "KNOWN_ADDRESSES",
    "RESET_STATUS",
    "KnownAddress",
    "ProviderSimulator",
    "RetryAfterMode",
    "SimulatedRequest",
]
