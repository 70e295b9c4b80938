"""The rate-limited provider of one cell, and what its limiter saw.

Either the provider simulator enforcing the cell's limiter itself, or a real proxy on
loopback in front of an unlimited simulator: nginx ``limit_req`` (``nginx-b1``,
``nginx-b0``; ``nginx-ra-b0``, its 429 with ``Retry-After: 1``; and as it ships:
``nginx503-*``, ``nginx-delay5``), HAProxy's
``http_req_rate`` (``haproxy``) or Traefik's ``rateLimit`` (``traefik-b1``). Either way ``arrivals()``
gives every keyed request *as the limiter saw it*: its arrival time (``time.time``
seconds), its status and who sent it (the fleet, the reference pacer or the other
client, told apart by their addresses).
"""

from __future__ import annotations

import math
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from fleetbench.haproxy import HAProxy
from fleetbench.nginx import Nginx
from fleetbench.proxy import Proxy
from fleetbench.spec import LimiterSpec
from fleetbench.traefik import Traefik
from geotoolkit.testing import ProviderSimulator

__all__ = ["FLEET", "OTHER", "REFERENCE", "Arrival", "Target", "who_sent"]

#: Address prefixes, one per sender.
FLEET, REFERENCE, OTHER = "Benchmark street", "Reference road", "Other client lane"


@dataclass(frozen=True)
class Arrival:
    time: float  #: arrival at the limiter, ``time.time`` seconds
    window_time: float  #: the same instant on the limiter's clock (calendar windows)
    status: int
    who: str  #: "fleet", "reference", "other" or "" (unknown)


def who_sent(query: str) -> str:
    text = query.lower()
    for name, prefix in (("fleet", FLEET), ("reference", REFERENCE), ("other", OTHER)):
        if text.startswith(prefix.lower()):
            return name
    return ""


class AlignedClock:
    """``time.time`` for the simulator, shifted once armed so that the first request
    after ``arm()`` is exactly at the start of a ``window``-second calendar window."""

    def __init__(self, window: float | None) -> None:
        self.window, self.offset = window, 0.0
        self._armed = False
        self._lock = threading.Lock()

    def arm(self) -> None:
        with self._lock:
            self._armed = self.window is not None

    def __call__(self) -> float:
        now = time.time()
        with self._lock:
            if self._armed and self.window is not None:
                self._armed = False
                self.offset = math.ceil(now / self.window) * self.window - now
            return now + self.offset


class Target:
    """The limited provider for one cell: a context manager; ``url`` is what clients use."""

    def __init__(self, limiter: LimiterSpec, rate: float, workdir: Path) -> None:
        self.limiter, self.rate, self.workdir = limiter, rate, workdir
        self.clock = AlignedClock(limiter.window_seconds if limiter.aligned else None)
        self.sim = ProviderSimulator(clock=self.clock, **limiter.simulator_settings(rate))
        self.proxy: Proxy | None = None
        self._stack = ExitStack()

    def __enter__(self) -> Target:
        self._stack.enter_context(self.sim)
        if self.limiter.nginx_burst is not None:
            self.proxy = self._stack.enter_context(
                Nginx(self.sim.port, self.rate, self.limiter.nginx_burst, self.workdir,
                      status=self.limiter.nginx_status, nodelay=self.limiter.nginx_nodelay,
                      retry_after=self.limiter.nginx_retry_after))
        elif self.limiter.haproxy:
            self.proxy = self._stack.enter_context(HAProxy(self.sim.port, self.rate, self.workdir))
        elif self.limiter.traefik_burst is not None:
            self.proxy = self._stack.enter_context(
                Traefik(self.sim.port, self.rate, self.limiter.traefik_burst, self.workdir))
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stack.close()

    @property
    def url(self) -> str:
        return self.sim.url if self.proxy is None else self.proxy.url

    def arrivals(self, key: str) -> list[Arrival]:
        """Every request of ``key`` as the limiter saw it, in arrival order. With a proxy,
        call it after the block (the proxy has written its log when it stopped)."""
        if self.proxy is not None:
            return [Arrival(t, t, status, who_sent(query))
                    for t, status, query in self.proxy.log(key)]
        offset = self.clock.offset
        return [Arrival(r.time - offset, r.time, r.status, who_sent(r.params.get("q", "")))
                for r in self.sim.requests_for(key) if r.path == "/search"]
