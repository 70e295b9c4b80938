"""Offline test helpers: a local simulator of every provider's geocoding API.

>>> from geotoolkit.testing import ProviderSimulator
>>> with ProviderSimulator(rate_limit=1) as sim:   # doctest: +SKIP
...     provider = Google(base_url=sim.url, api_key="any")
...     print(sim.url)

It speaks each provider's own API (:data:`FORMATS`), forward, reverse and in batches,
and answers from a small Liechtenstein gazetteer at realistic precision.

It enforces the rate limiters real providers run (``limiter="gcra"``, ``"token-bucket"``,
``"fixed-window"``, ... in :mod:`geotoolkit.testing.limiters`), commits the faults real
servers and proxies commit (magic tokens such as ``#trickle``, ``#huge``, ``#echo400`` in
the address, in :mod:`geotoolkit.testing.faults`) and goes down on demand
(``sim.outage("refuse")``). ``unused_url()`` and ``refusing_url()`` give a loopback URL
where nothing listens.

Run it from a terminal with ``python -m geotoolkit.testing --port 8080 --rate-limit 1``.
"""

from geotoolkit.testing._places import KNOWN_ADDRESSES, KnownAddress
from geotoolkit.testing.faults import FAULTS, ROW_MARKERS
from geotoolkit.testing.limiters import LIMITERS
from geotoolkit.testing.simulator import (
    FORMATS,
    RESET_STATUS,
    BatchCost,
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
    "FORMATS",
    "KNOWN_ADDRESSES",
    "LIMITERS",
    "RESET_STATUS",
    "ROW_MARKERS",
    "BatchCost",
    "KnownAddress",
    "LimiterName",
    "OutageMode",
    "ProviderSimulator",
    "RetryAfterMode",
    "SimulatedRequest",
    "refusing_url",
    "unused_url",
]
