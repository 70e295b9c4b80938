"""Offline test helpers: a local Nominatim-compatible provider simulator.

>>> from geotoolkit.testing import ProviderSimulator
>>> with ProviderSimulator(rate_limit=1) as sim:   # doctest: +SKIP
...     print(sim.url)

It enforces the rate limiters real providers run (``limiter="gcra"``, ``"token-bucket"``,
``"fixed-window"``, ... in :mod:`geotoolkit.testing.limiters`), commits the faults real
servers and proxies commit (magic tokens such as ``#trickle``, ``#huge``, ``#echo400`` in
the address, in :mod:`geotoolkit.testing.faults`) and goes down on demand
(``sim.outage("refuse")``). ``unused_url()`` and ``refusing_url()`` give a loopback URL
where nothing listens.

Run it from a terminal with ``python -m geotoolkit.testing --port 8080 --rate-limit 1``.
"""

from geotoolkit.testing._places import KNOWN_ADDRESSES, KnownAddress
from geotoolkit.testing.faults import FAULTS
from geotoolkit.testing.limiters import LIMITERS
from geotoolkit.testing.simulator import (
    RESET_STATUS,
    LimiterName,
    OutageMode,
    ProviderSimulator,
    RetryAfterMode,
    SimulatedRequest,
    refusing_url,
    unused_url,
)

__all__ = [
    "FAULTS",
    "KNOWN_ADDRESSES",
    "LIMITERS",
    "RESET_STATUS",
    "KnownAddress",
    "LimiterName",
    "OutageMode",
    "ProviderSimulator",
    "RetryAfterMode",
    "SimulatedRequest",
    "refusing_url",
    "unused_url",
]
