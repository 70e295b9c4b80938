"""Degrade, never hammer: local pacing at a share of the rate while the store is down.

``FallbackGate`` wraps a server gate (Redis, PostgreSQL). When the store fails
(``GateError``), it warns once, then serves the process from a local
``MemoryGate`` paced at ``interval / share`` -- a conservative share of the rate,
since the rest of the fleet is presumably doing the same. Every
``retry_seconds`` it tries the store again; when the store answers, it logs the
recovery, pushes any pause still active locally to the store, and goes back to it.

A store that refuses a setting before it ever answered (a wrong password, an ACL user
without the rights, a database or a db index that does not exist, a read-only replica or
standby: ``GateError.permanent``)
is no outage: its error is raised, so a misconfigured gate stops the run before anything
is sent, instead of leaving every worker pacing alone at a quarter of the rate.

Cap counters: while degraded, the local gate counts on from the store's last
known count, so a cap still holds during an outage; sends made while degraded
are not added to the store's counter afterwards (the fleet may overshoot a cap
by what other processes sent meanwhile). Stats read while degraded are this
process's own, and so are shared values: a lease claimed while degraded is
claimed locally (the fleet cannot be asked), values set while degraded are not
pushed to the store afterwards.
"""

from __future__ import annotations

import logging
import math
import threading
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from geotoolkit.clock import Clock, SystemClock
from geotoolkit.errors import ConfigurationError, GateError
from geotoolkit.gate.base import (
    Cap,
    Claim,
    FleetStats,
    Gate,
    GateState,
    Period,
    Report,
    Reservation,
    Usage,
    publish_pause,
    pusher,
)
from geotoolkit.gate.memory import MemoryGate
from geotoolkit.redact import redact

__all__ = ["FallbackGate", "GateUnavailableWarning"]

T = TypeVar("T")

logger = logging.getLogger("geotoolkit.gate")


class GateUnavailableWarning(RuntimeWarning):
    """The shared gate's store is unreachable: pacing locally at a reduced rate."""


class FallbackGate:
    """A server gate with a local, slower fallback while its store is unreachable.

    ``degraded`` tells whether calls are currently served locally; ``backend``
    then reads e.g. ``"redis (fallback: local)"``.
    """

    def __init__(
        self,
        inner: Gate,
        *,
        share: float = 0.25,
        clock: Clock | None = None,
        retry_seconds: float = 5.0,
    ) -> None:
        if not (math.isfinite(share) and 0 < share <= 1):
            raise ConfigurationError("share must be in (0, 1]")
        if not (math.isfinite(retry_seconds) and retry_seconds >= 0):
            raise ConfigurationError("retry_seconds must be finite and >= 0")
        self.inner = inner
        self.share = float(share)
        self.retry_seconds = float(retry_seconds)
        self._clock = clock or SystemClock()
        self._local = MemoryGate(clock=self._clock)
        self._local.log_events = False  # a shadow of the inner gate's events until degraded
        self._usage: dict[tuple[str, str, str], Usage] = {}  # last count seen on the store
        self._lock = threading.Lock()
        self._degraded = False
        self._answered = False  # the store has answered this process at least once
        self._next_retry = 0.0
        self.blocking: bool = inner.blocking
        self.backend: str = inner.backend

    @property
    def degraded(self) -> bool:
        """True while calls are served by the local fallback."""
        return self._degraded

    # -- transitions --------------------------------------------------------------

    def _use_inner(self) -> bool:
        with self._lock:
            if not self._degraded:
                return True
            now = self._clock.now()
            if now < self._next_retry:
                return False
            # This call probes the store; concurrent ones stay local meanwhile.
            self._next_retry = now + self.retry_seconds
            return True

    def _degrade(self, exc: GateError) -> None:
        with self._lock:
            self._next_retry = self._clock.now() + self.retry_seconds
            if self._degraded:
                logger.debug("gate %s still unavailable: %s", self.inner.backend, redact(exc))
                return
            self._degraded = True
            self._local.log_events = True  # it decides now
            self.backend = f"{self.inner.backend} (fallback: local)"
        message = redact(
            f"the {self.inner.backend} gate is unavailable ({exc}); pacing this process "
            f"locally at {self.share:.0%} of the rate, retrying every {self.retry_seconds:g} s"
        )
        logger.warning(message)
        # Issued where no frame is the user's (a gate call runs in a worker thread): named
        # after the gate, not after concurrent/futures/thread.py.
        warnings.warn_explicit(message, GateUnavailableWarning, filename="geotoolkit.gate",
                               lineno=0, module=__name__)

    def _recover(self) -> None:
        with self._lock:
            if not self._degraded:
                return
            self._degraded = False
            self._local.log_events = False
            self.backend = self.inner.backend
        logger.warning("the %s gate is reachable again: shared pacing resumed", self.backend)

    def _push_pauses(self) -> None:
        """Publish the pauses decided while degraded (raises GateError if still down)."""
        keys = self._local.keys()
        for key in keys:
            remaining = self._local.state(key).pause_remaining
            if remaining > 0:
                self.inner.pause(key, remaining, cause=self._local.stats(key).pause_cause)

    def _route(self, inner: Callable[[], T], local: Callable[[], T]) -> T:
        if not self._use_inner():
            return local()
        try:
            if self._degraded:
                self._push_pauses()
            result = inner()
        except GateError as exc:
            if exc.permanent and not self._answered:
                raise  # a setting, not an outage: no retry heals it
            self._degrade(exc)
            return local()
        self._answered = True
        if self._degraded:
            self._recover()
        return result

    # -- the Gate protocol ----------------------------------------------------------

    def reserve(self, key: str, interval: float, horizon: float = 60.0, *,
                report: Report | None = None, cap: Cap | None = None, cost: int = 1,
                spacing: float = 0.0, discover: bool = False) -> Reservation:
        pace: dict[str, Any] = {"cost": cost} if cost != 1 else {}  # an inner gate may predate
        pace |= {"spacing": spacing} if spacing else {}  # these arguments: passed only when set
        pace |= {"discover": True} if discover else {}

        def inner() -> Reservation:
            reservation = self.inner.reserve(key, interval, horizon, report=report, cap=cap, **pace)
            if cap is not None and reservation.usage is not None:
                self._usage[(key, cap.period, cap.tz)] = reservation.usage
            return reservation

        def local() -> Reservation:
            known = self._usage.get((key, cap.period, cap.tz)) if cap is not None else None
            if known is not None:
                self._local.seed_usage(key, known)
            return self._local.reserve(key, interval / self.share, horizon, report=report, cap=cap,
                                       cost=cost, spacing=spacing, discover=discover)

        return self._route(inner, local)

    def acquire(self, key: str, interval: float, horizon: float = 60.0) -> float:
        return self.reserve(key, interval, horizon).wait

    def claim(self, key: str, interval: float) -> Claim:
        return self._route(lambda: self.inner.claim(key, interval),
                           lambda: self._local.claim(key, interval / self.share))

    def push(self, key: str, seconds: float) -> None:
        self._route(lambda: pusher(self.inner)(key, seconds),  # an inner gate may predate push
                    lambda: self._local.push(key, seconds / self.share))

    def pause(self, key: str, seconds: float, *, cause: str = "", rate_limited: bool = False,
              report: Report | None = None, factor: float | None = None,
              resumed: bool = False) -> float:
        # Always remembered locally too: a pause published just before the store
        # went down still holds this process back while degraded.
        # (Not the refused factor: the pacer read it from the store. A refused resume is
        # no evidence of the pace on either gate.)
        local = self._local.pause(key, seconds, cause=cause, rate_limited=rate_limited,
                                  resumed=resumed)
        return self._route(
            lambda: publish_pause(self.inner, key, seconds, cause=cause,  # may predate them
                                  rate_limited=rate_limited, report=report, factor=factor,
                                  resumed=resumed),
            lambda: local)

    def state(self, key: str) -> GateState:
        return self._route(lambda: self.inner.state(key), lambda: self._local.state(key))

    def record(self, key: str, report: Report, *, worker: str | None = None,
               leaving: bool = False) -> FleetStats:
        return self._route(
            lambda: self.inner.record(key, report, worker=worker, leaving=leaving),
            lambda: self._local.record(key, report, worker=worker, leaving=leaving))

    def stats(self, key: str) -> FleetStats:
        return self._route(lambda: self.inner.stats(key), lambda: self._local.stats(key))

    def usage(self, key: str, period: Period = "day", tz: str = "UTC") -> Usage:
        zone = {"tz": tz} if tz != "UTC" else {}  # an inner gate may predate zones
        return self._route(lambda: self.inner.usage(key, period, **zone),
                           lambda: self._local.usage(key, period, tz))

    def set_value(self, key: str, name: str, value: str, *, ttl_seconds: float,
                  only_if_absent: bool = False) -> bool:
        return self._route(
            lambda: self.inner.set_value(key, name, value, ttl_seconds=ttl_seconds,
                                         only_if_absent=only_if_absent),
            lambda: self._local.set_value(key, name, value, ttl_seconds=ttl_seconds,
                                          only_if_absent=only_if_absent))

    def values(self, key: str, prefix: str = "") -> dict[str, str]:
        return self._route(lambda: self.inner.values(key, prefix),
                           lambda: self._local.values(key, prefix))

    def delete_value(self, key: str, name: str, *, only_if: str | None = None) -> bool:
        return self._route(lambda: self.inner.delete_value(key, name, only_if=only_if),
                           lambda: self._local.delete_value(key, name, only_if=only_if))

    def keys(self, prefix: str = "") -> list[str]:
        """The gate keys on the store (this process's own while degraded)."""
        inner = getattr(self.inner, "keys", None)
        if inner is None:
            return self._local.keys(prefix)
        return self._route(lambda: list(inner(prefix)), lambda: self._local.keys(prefix))

    def snapshot(self, key: str, tz: str = "UTC") -> tuple[FleetStats, Usage, Usage]:
        """A key's stats and its day's and month's cap counts (see ``FleetGate.snapshot``)."""
        zone = {"tz": tz} if tz != "UTC" else {}  # an inner gate may predate zones

        def inner() -> tuple[FleetStats, Usage, Usage]:
            snapshot = getattr(self.inner, "snapshot", None)
            if snapshot is not None:
                found: tuple[FleetStats, Usage, Usage] = snapshot(key, **zone)
                return found
            return (self.inner.stats(key), self.inner.usage(key, "day", **zone),
                    self.inner.usage(key, "month", **zone))

        return self._route(inner, lambda: self._local.snapshot(key, tz))

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self._local.close()

    def __repr__(self) -> str:
        state = ", degraded" if self._degraded else ""
        return f"FallbackGate({self.inner!r}, share={self.share!r}{state})"
