"""The one engine: async, gated, rate-aware, written once for every front end."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import random
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

import httpx

from geotoolkit import http
from geotoolkit.clock import Clock, SystemClock
from geotoolkit.errors import (
    ConfigurationError,
    GeotoolkitError,
    ProviderUnavailableError,
    QuotaExceededError,
    RateLimitError,
)
from geotoolkit.gate.base import HEARTBEAT_SECONDS, Cap, FleetStats, Gate, GateState, Reservation
from geotoolkit.gate.fleet import Counts, SlotTiming
from geotoolkit.policy import Backoff, RatePolicy
from geotoolkit.progress import (
    BatchFinished,
    BatchStarted,
    Event,
    FleetSampled,
    ItemFinished,
    ProgressSink,
    Throttled,
)
from geotoolkit.providers.base import Provider
from geotoolkit.results import Failure, Outcome, Query, with_attempts

__all__ = ["Engine", "ResultStore"]

log = logging.getLogger("geotoolkit.engine")

#: Waits longer than this are cut in steps (samples and heartbeats go on meanwhile).
_LONG_WAIT_SECONDS = HEARTBEAT_SECONDS / 4
#: A wait for a slot shorter than this is not used to sample the fleet.
_SAMPLE_MARGIN_SECONDS = 0.1
#: The most a long interval adds to ``Engine.late_send_seconds``.
_MAX_EXTRA_LATE_SECONDS = 0.01
T = TypeVar("T")


class _Stamped(Protocol):
    @property
    def now(self) -> float: ...


R = TypeVar("R", bound=_Stamped)


class ResultStore(Protocol):
    """Where settled outcomes persist (cache and checkpoint), keyed by cache key."""

    blocking: bool

    def get_many(self, keys: Sequence[str]) -> Mapping[str, Outcome]: ...

    def put(self, key: str, outcome: Outcome) -> None: ...


class _Stop(Exception):
    """Internal: another worker hit an error that stops the batch."""


class Engine:
    """Geocode queries through a provider, paced by a fleet gate.

    Every input gets exactly one outcome, in input order. Distinct queries (after
    normalisation) are sent once; settled ones found in ``store`` are not sent.
    Before every attempt the engine reserves a slot with ``gate.acquire``; after
    a 429/503 it publishes ``gate.pause(wait)`` *before* sleeping, where
    ``wait = backoff.wait(attempt, retry_after)``. Authentication and quota
    errors stop the batch (finished outcomes are already in ``store``). With
    ``max_wait_seconds``, a wait longer than that budget raises
    ``RateLimitError(retry_after=...)`` instead of sleeping.

    The fleet: requests, successes and 429/503s are counted on the gate with the
    next gate call (no extra round trip); a 429 feeds the gate's adaptive pacing
    (the whole fleet slows down when 429s keep arriving, then probes back up).
    Every ``sample_seconds`` (of ``clock``) the run refreshes its heartbeat on
    the gate (one run is one worker, under a random id) and emits
    ``FleetSampled``. With ``daily_cap``, at most that many requests are sent
    per UTC ``cap_period`` ("day" or "month") by every worker on the key
    together; reaching it raises ``QuotaExceededError`` and the next period's
    run resumes where this one stopped.
    """

    #: A reserved slot fired this much later than usual is given up (see ``_wait_for_slot``):
    #: half the slack the default 3 % safety margin leaves in a one-second window...
    late_send_seconds = 0.015
    #: ... plus this share of the interval between two sends of the fleet, up to 10 ms more.
    #: Giving up a slot costs one interval; the longer it is, the more lateness is worth
    #: the risk of a 429 (which costs a pause of the whole fleet).
    late_send_interval_share = 0.05

    def __init__(
        self,
        provider: Provider,
        *,
        gate: Gate,
        rate: RatePolicy,
        backoff: Backoff | None = None,
        concurrency: int = 4,
        max_attempts: int = 6,
        clock: Clock | None = None,
        timeout: httpx.Timeout | float | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        progress: ProgressSink | None = None,
        store: ResultStore | None = None,
        max_wait_seconds: float | None = None,
        rng: random.Random | None = None,
        daily_cap: int | None = None,
        cap_period: Literal["day", "month"] = "day",
        sample_seconds: float = 0.5,
    ) -> None:
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigurationError(f"concurrency must be a positive integer, got {concurrency!r}")
        if not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be a positive integer, got {max_attempts!r}")
        if max_wait_seconds is not None and not max_wait_seconds >= 0:
            raise ConfigurationError("max_wait_seconds must be >= 0")
        if not sample_seconds > 0:
            raise ConfigurationError("sample_seconds must be > 0")
        self.provider, self.gate, self.rate = provider, gate, rate
        self.backoff = backoff or Backoff()
        self.concurrency, self.max_attempts = concurrency, max_attempts
        self.clock = clock or SystemClock()
        self.timeout, self.transport = timeout, transport
        self.progress, self.store = progress, store
        self.max_wait_seconds = max_wait_seconds
        self.rng = rng or random.Random()
        self.cap = None if daily_cap is None else Cap(daily_cap, cap_period)
        self.sample_seconds = sample_seconds
        #: This run's id on the gate (random, new for every run).
        self.worker_id = ""
        self._counts = Counts()
        self._timing = SlotTiming()  # the store's clock, the usual round trip and lateness
        self._sampling = False
        self._next_sample = self._last_beat = -math.inf
        self._error: BaseException | None = None
        self._client: httpx.AsyncClient

    # -- the batch -------------------------------------------------------------

    async def run(self, items: Sequence[Query | str]) -> list[Outcome]:
        """Settle ``items``: a Query each, or a reason string for unusable input."""
        async with http.make_client(concurrency=self.concurrency, timeout=self.timeout,
                                    transport=self.transport) as client:
            self._client = client
            return await self._run(items)

    async def _run(self, items: Sequence[Query | str]) -> list[Outcome]:
        started = self.clock.now()
        results: list[Outcome | None] = [None] * len(items)
        groups, queries = self._group(items, results)
        cached = await self._lookup(list(groups))
        self._emit(BatchStarted(total=len(items), unique=len(groups), cached=len(cached),
                                rate=self.rate.rate, host=self.provider.host, at=started))
        for outcome in results:
            if outcome is not None:
                self._emit(ItemFinished(status=outcome.status, attempts=0, at=started))
        for key, outcome in cached.items():
            self._settled(key, outcome, groups, results, cached=True)
        pending = iter([(k, queries[k]) for k in groups if k not in cached])
        self._error = None
        try:
            async with self._fleet():
                await self._work(pending, groups, results)
        except BaseException as exc:
            self._finish(results, started, exc)
            raise
        self._finish(results, started, self._error)
        if self._error is not None:
            raise self._error
        return [r for r in results if r is not None]

    def _group(
        self, items: Sequence[Query | str], results: list[Outcome | None]
    ) -> tuple[dict[str, list[int]], dict[str, Query]]:
        groups: dict[str, list[int]] = {}
        queries: dict[str, Query] = {}
        namespace = self.provider.cache_namespace()
        for index, item in enumerate(items):
            if isinstance(item, str):
                results[index] = Failure(reason=item, error="InvalidInput",
                                         provider=self.provider.name)
                continue
            key = f"{namespace}:{item.key()}"
            groups.setdefault(key, []).append(index)
            queries.setdefault(key, item)
        return groups, queries

    async def _lookup(self, keys: list[str]) -> dict[str, Outcome]:
        if self.store is None or not keys:
            return {}
        return dict(await self._call(self.store.blocking, self.store.get_many, keys))

    async def _work(self, pending: Iterator[tuple[str, Query]],
                    groups: dict[str, list[int]], results: list[Outcome | None]) -> None:
        async def worker() -> None:
            for key, query in pending:
                if self._error is not None:
                    return
                try:
                    outcome = await self._settle(query)
                except _Stop:
                    return
                except GeotoolkitError as exc:  # stops the batch: auth, quota, budget, gate
                    if self._error is None:
                        self._error = exc
                    return
                if self.store is not None and not isinstance(outcome, Failure):
                    await self._call(self.store.blocking, self.store.put, key, outcome)
                self._settled(key, outcome, groups, results)
                await self._maybe_sample()

        await asyncio.gather(*(worker() for _ in range(self.concurrency)))

    def _settled(self, key: str, outcome: Outcome, groups: dict[str, list[int]],
                 results: list[Outcome | None], *, cached: bool = False) -> None:
        for index in groups[key]:
            results[index] = outcome
        self._emit(ItemFinished(status=outcome.status, rows=len(groups[key]),
                                attempts=0 if cached else outcome.attempts, cached=cached,
                                at=self.clock.now()))

    def _finish(self, results: list[Outcome | None], started: float,
                error: BaseException | None) -> None:
        counts = {"matched": 0, "no_match": 0, "failed": 0}
        for r in results:
            if r is not None:
                counts[r.status] += 1
        now = self.clock.now()
        interrupted = isinstance(error, asyncio.CancelledError | KeyboardInterrupt)
        self._emit(BatchFinished(
            matched=counts["matched"], no_match=counts["no_match"], failed=counts["failed"],
            elapsed_seconds=now - started, interrupted=interrupted, at=now,
            error=None if error is None or interrupted else f"{type(error).__name__}: {error}"))

    # -- one query -------------------------------------------------------------

    async def _settle(self, query: Query) -> Outcome:
        request = self.provider.build_request(query)
        last: GeotoolkitError | None = None
        for attempt in range(1, self.max_attempts + 1):
            await self._wait_for_slot()
            self._counts.requests += 1
            try:
                response = await http.send(self._client, request, self.provider.name)
                outcome = self.provider.parse_response(query, response)
                self._counts.successes += 1
                return with_attempts(outcome, attempt)
            except RateLimitError as exc:
                last = exc
                self._counts.throttled += 1
                wait = self.backoff.wait(attempt, exc.retry_after, self.rng)
                await self._publish_pause(exc, wait)
            except ProviderUnavailableError as exc:
                last = exc
                wait = self.backoff.delay(attempt, self.rng)
            if attempt < self.max_attempts:
                self._check_budget(wait)
                await self._sleep_until(self.clock.now() + wait)
        return Failure(reason=f"gave up after {self.max_attempts} attempts: {last}",
                       error=type(last).__name__, provider=self.provider.name,
                       attempts=self.max_attempts)

    async def _publish_pause(self, exc: RateLimitError, wait: float) -> None:
        """Publish the pause on the gate (before sleeping), then tell the listeners."""
        host = self.provider.host
        if exc.retry_after is not None:
            cause = f"Retry-After from {host}: {wait:.0f} s"
        else:
            cause = f"backoff after HTTP {exc.status_code} from {host}: {wait:.1f} s"
        pause = functools.partial(self.gate.pause, self.provider.gate_key, wait, cause=cause,
                                  rate_limited=exc.status_code == 429, report=self._counts.take())
        await self._call(self.gate.blocking, pause)
        self._emit(Throttled(
            wait_seconds=wait, host=host, status_code=exc.status_code,
            cause="retry-after" if exc.retry_after is not None else "backoff",
            retry_after=exc.retry_after, at=self.clock.now()))

    async def _wait_for_slot(self) -> None:
        """Reserve a send slot on the gate and wait for it.

        The slot is on the store's clock: it is converted to ours (``SlotTiming``),
        so a slow reply does not make the send late. After waiting, the reservation
        stands only if no pause was published meanwhile (a pause cancels every
        outstanding reservation: same epoch). That check starts one usual gate
        round trip before the slot, so the send is not late by the round trip; a
        check back before the slot is repeated at the slot, so a send always
        follows its check at once and never goes before its slot. A slot fired
        later than this run's usual lateness by more than ``late_send_seconds``
        (plus a share of the interval, see ``late_send_interval_share``) would
        land next to the following slots and break the fleet's spacing (a stalled
        process, a slow gate call), so it is given up, once per request, and a
        new one reserved.
        """
        given_up = False
        while True:
            if self._error is not None:
                raise _Stop
            slot = await self._timed(self._reserve)
            if slot.wait <= 0:
                return
            self._check_budget(slot.wait)
            deadline = self._timing.local(slot.now + slot.wait)
            # Sample only when there is time for it: never between a slot and its send.
            await self._sleep_until(deadline - self._timing.lead,
                                    sample=slot.wait > _SAMPLE_MARGIN_SECONDS)
            if not slot.reserved:
                continue  # nothing was reserved: ask again
            state = await self._timed(self._state)
            if self.clock.now() < deadline:  # back before the slot: check again at it, so
                await self.clock.sleep(deadline - self.clock.now())  # the send follows a check
                state = await self._timed(self._state)  # at once (a pause may come meanwhile)
            if state.pause_remaining > 0 or state.epoch != slot.epoch:
                continue
            on_time = self._timing.on_time(self.clock.now() - deadline, self._late_tolerance)
            if given_up or on_time:
                return
            given_up = True

    @property
    def _late_tolerance(self) -> float:
        extra = min(_MAX_EXTRA_LATE_SECONDS, self.late_send_interval_share * self.rate.interval)
        return self.late_send_seconds + extra

    async def _timed(self, call: Callable[[], Awaitable[R]]) -> R:
        """A gate call whose reply (``.now``: the store's clock) also times the next sends."""
        start = self.clock.now()
        reply = await call()
        self._timing.observe(start, self.clock.now(), reply.now)
        return reply

    async def _state(self) -> GateState:
        return await self._call(self.gate.blocking, self.gate.state, self.provider.gate_key)

    async def _reserve(self) -> Reservation:
        reserve = functools.partial(
            self.gate.reserve, self.provider.gate_key, self.rate.interval,
            self.rate.horizon_seconds, report=self._counts.take(), cap=self.cap)
        try:
            return await self._call(self.gate.blocking, reserve)
        except QuotaExceededError as exc:
            exc.provider = exc.provider or self.provider.name
            raise

    def _check_budget(self, wait: float) -> None:
        if self.max_wait_seconds is not None and wait > self.max_wait_seconds:
            raise RateLimitError(
                f"{self.provider.host} asks to wait {wait:.1f} s, more than "
                f"max_wait_seconds={self.max_wait_seconds:g}",
                retry_after=wait, provider=self.provider.name)

    # -- the fleet -------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _fleet(self) -> AsyncIterator[None]:
        """Join the fleet for the block (a first sample), then leave it (a last one, if due)."""
        self.worker_id = secrets.token_hex(8)
        self._next_sample, self._last_beat = -math.inf, -math.inf
        await self._maybe_sample()
        try:
            yield
        finally:
            await self._maybe_sample()
            await self._record(leaving=True)

    async def _maybe_sample(self) -> None:
        """Sample the fleet if ``sample_seconds`` have passed since the last sample.

        Workers call this at natural points (after a query settles, before a wait);
        no task of its own sleeps on the clock. The heartbeat is refreshed every
        quarter of its lifetime; the samples between are reads.
        """
        now = self.clock.now()
        if self._sampling or now < self._next_sample:
            return
        self._sampling, self._next_sample = True, now + self.sample_seconds
        try:
            beat = now - self._last_beat >= HEARTBEAT_SECONDS / 4
            if beat:
                self._last_beat = now
            stats = await self._record(heartbeat=beat)
            if stats is not None:
                self._emit(self._sampled(stats))
        finally:
            self._sampling = False

    async def _sleep_until(self, deadline: float, *, sample: bool = True) -> None:
        """Sleep until ``deadline`` on the clock; a long wait (a pause) is cut in
        steps so the fleet stays sampled and this run's heartbeat alive."""
        while True:
            if sample:
                await self._maybe_sample()
            remaining = deadline - self.clock.now()
            if remaining <= _LONG_WAIT_SECONDS:
                await self.clock.sleep(remaining)
                return
            await self.clock.sleep(_LONG_WAIT_SECONDS)

    async def _record(self, *, heartbeat: bool = True, leaving: bool = False) -> FleetStats | None:
        """Flush the counts and refresh (or drop) the heartbeat; never fails the batch."""
        record = functools.partial(self.gate.record, self.provider.gate_key, self._counts.take(),
                                   worker=self.worker_id if heartbeat or leaving else None,
                                   leaving=leaving)
        try:
            return await self._call(self.gate.blocking, record)
        except GeotoolkitError as exc:
            log.debug("could not record fleet stats: %s", exc)
            return None

    def _sampled(self, stats: FleetStats) -> FleetSampled:
        rate = self.rate.rate
        return FleetSampled(
            pace=stats.pace, allowed_rate=None if rate is None else rate * stats.rate_factor,
            requests=stats.requests, successes=stats.successes, throttled=stats.throttled,
            window_seconds=stats.window_seconds, pause_remaining=stats.pause_remaining,
            pause_cause=stats.pause_cause, workers_active=stats.workers_active,
            at=self.clock.now())

    # -- plumbing --------------------------------------------------------------

    @staticmethod
    async def _call(blocking: bool, fn: Callable[..., T], *args: Any) -> T:
        if blocking:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    def _emit(self, event: Event) -> None:
        if self.progress is None:
            return
        try:
            self.progress(event)
        except Exception:  # a broken renderer must not break the batch
            log.exception("progress sink failed on %s", type(event).__name__)

