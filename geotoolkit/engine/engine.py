"""The one engine: async, gated, rate-aware, written once for every front end."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import math
import random
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import httpx

from geotoolkit.clock import SystemClock
from geotoolkit.engine import http
from geotoolkit.engine.settings import EngineSettings
from geotoolkit.errors import (
    AuthenticationError,
    ConfigurationError,
    GateError,
    GeotoolkitError,
    ProviderResponseError,
    ProviderUnavailableError,
    QueryError,
    QuotaExceededError,
    RateLimitError,
)
from geotoolkit.gate.base import HEARTBEAT_SECONDS, FleetStats, Gate, GateState, Reservation
from geotoolkit.gate.fleet import Counts, SlotTiming
from geotoolkit.policy import RatePolicy
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
from geotoolkit.redact import redact
from geotoolkit.results import Failure, Match, NoMatch, Outcome, Query, with_attempts
from geotoolkit.store.base import ResultStore, StoreError

__all__ = ["Engine"]

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


class _Stop(Exception):
    """Internal: another worker hit an error that stops the batch."""


#: Errors about the whole run: they stop the batch (finished rows are already stored).
#: A RateLimitError reaching a worker is the non-blocking budget (429s are handled inside).
_STOPS: tuple[type[BaseException], ...] = (
    AuthenticationError, QuotaExceededError, RateLimitError, GateError, StoreError,
    ConfigurationError)

_PASS_THROUGH: tuple[type[BaseException], ...] = (_Stop, *_STOPS)

#: Labels and reasons longer than this are cut (a hostile answer cannot fill the cache).
MAX_TEXT_CHARS = 2_000


def _describe(exc: BaseException) -> str:
    """``"ValueError: text"`` for an unexpected error, bounded in length."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:MAX_TEXT_CHARS]


def _clean(outcome: Outcome, hide: Callable[[str], str]) -> Outcome:
    """Provider text (labels, reasons) redacted and bounded before it is stored or shown."""
    if isinstance(outcome, Match):
        label = hide(outcome.label[:MAX_TEXT_CHARS])
        return outcome if label == outcome.label else dataclasses.replace(outcome, label=label)
    if isinstance(outcome, NoMatch | Failure):
        reason = hide(outcome.reason[:MAX_TEXT_CHARS])
        return outcome if reason == outcome.reason else dataclasses.replace(outcome, reason=reason)
    return outcome


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
    ``FleetSampled``. With ``settings.cap``, at most that many requests are sent
    per UTC day (or month) by every worker on the key
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
        settings: EngineSettings | None = None,
        *,
        gate: Gate,
        store: ResultStore | None = None,
        sample_seconds: float = 0.5,
        **overrides: Any,
    ) -> None:
        if not sample_seconds > 0:
            raise ConfigurationError("sample_seconds must be > 0")
        settings = settings or EngineSettings()
        if overrides:  # Engine(provider, gate=..., rate=2.0): settings by keyword
            settings = dataclasses.replace(settings, **overrides)
        self.provider, self.gate, self.store, self.settings = provider, gate, store, settings
        self.rate = settings.rate_policy or RatePolicy(rate=provider.default_rate)
        self.clock = settings.clock or SystemClock()
        self.rng = settings.rng or random.Random()
        self.sample_seconds = sample_seconds
        self.progress: ProgressSink | None = None
        #: This run's id on the gate (random, new for every run).
        self.worker_id = ""
        self._counts = Counts()
        self._timing = SlotTiming()  # the store's clock, the usual round trip and lateness
        self._sampling = False
        self._next_sample = self._last_beat = -math.inf
        self._error: BaseException | None = None
        self._client: httpx.AsyncClient

    # -- the batch -------------------------------------------------------------

    async def run(self, items: Sequence[Query | str], progress: ProgressSink | None = None
                  ) -> list[Outcome]:
        """Settle ``items`` (a Query each, or a reason string for unusable input).

        ``progress`` receives the run's events (``geotoolkit.progress``).
        """
        self.progress = progress
        async with http.make_client(concurrency=self.settings.concurrency,
                                    timeout=self.settings.timeout,
                                    transport=self.settings.transport) as client:
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
            self._record_outcome(key, outcome, groups, results, cached=True)
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
                    outcome = await self._outcome_of(query)
                except _Stop:
                    return
                except _STOPS as exc:  # about the whole run: auth, quota, budget, gate, cache
                    if self._error is None:
                        self._error = exc
                    return
                if self.store is not None and not isinstance(outcome, Failure):
                    try:
                        await self._call(self.store.blocking, self.store.put, key, outcome)
                    except _STOPS as exc:
                        self._error = self._error or exc
                        return
                self._record_outcome(key, outcome, groups, results)
                await self._maybe_sample()

        await asyncio.gather(*(worker() for _ in range(self.settings.concurrency)))

    def _record_outcome(self, key: str, outcome: Outcome, groups: dict[str, list[int]],
                        results: list[Outcome | None], *, cached: bool = False) -> None:
        for index in groups[key]:
            results[index] = outcome
        self._emit(ItemFinished(status=outcome.status, rows=len(groups[key]),
                                attempts=0 if cached else outcome.attempts, cached=cached,
                                at=self.clock.now(),
                                precision=outcome.precision if isinstance(outcome, Match) else None))

    def _finish(self, results: list[Outcome | None], started: float,
                error: BaseException | None) -> None:
        counts = {"matched": 0, "no_match": 0, "failed": 0}
        for r in results:
            if r is not None:
                counts[r.status] += 1
        now = self.clock.now()
        interrupted = isinstance(error, asyncio.CancelledError | KeyboardInterrupt)
        message = None if error is None or interrupted else self._redact(
            f"{type(error).__name__}: {error}")
        self._emit(BatchFinished(
            matched=counts["matched"], no_match=counts["no_match"], failed=counts["failed"],
            elapsed_seconds=now - started, interrupted=interrupted, at=now, error=message))

    # -- one query -------------------------------------------------------------

    async def _outcome_of(self, query: Query) -> Outcome:
        """The outcome of one query. Anything one row raises (building, sending or parsing)
        is that row's Failure; only errors about the whole run (``_STOPS``) propagate."""
        try:
            return await self._resolve(query)
        except _PASS_THROUGH:
            raise
        except Exception as exc:  # one row never decides the fate of the batch
            log.debug("row failed", exc_info=True)
            return Failure(reason=self._redact(_describe(exc)), error=type(exc).__name__,
                           provider=self.provider.name)

    async def _resolve(self, query: Query) -> Outcome:
        try:
            request = self.provider.build_request(query)
        except QueryError as exc:  # refused before any request: too long, not encodable
            return Failure(reason=self._redact(str(exc)), error="QueryError",
                           provider=self.provider.name)
        last: GeotoolkitError | None = None
        attempts = self.settings.max_attempts
        for attempt in range(1, attempts + 1):
            await self._wait_for_slot()
            self._counts.requests += 1
            try:
                response = await http.send(
                    self._client, request, self.provider.name,
                    deadline_seconds=self.settings.request_deadline_seconds,
                    max_bytes=self.settings.max_response_bytes)
                outcome = self.provider.parse_response(query, response)
                self._counts.successes += 1
                return _clean(with_attempts(outcome, attempt), self._redact)
            except ProviderResponseError as exc:  # an answer that cannot be used: not retried
                self._counts.successes += 1
                return Failure(reason=self._redact(str(exc)), error=type(exc).__name__,
                               provider=self.provider.name, attempts=attempt)
            except RateLimitError as exc:
                last = exc
                self._counts.throttled += 1
                wait = self.settings.backoff.wait(attempt, exc.retry_after, self.rng)
                await self._publish_pause(exc, wait)
            except ProviderUnavailableError as exc:
                last = exc
                wait = self.settings.backoff.delay(attempt, self.rng)
            if attempt < attempts:
                self._check_budget(wait)
                await self._sleep_until(self.clock.now() + wait)
        return Failure(reason=self._redact(f"gave up after {attempts} attempts: {last}"),
                       error=type(last).__name__, provider=self.provider.name, attempts=attempts)

    def _redact(self, text: str) -> str:
        return redact(text, self.provider.secrets)

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
            self.rate.horizon_seconds, report=self._counts.take(), cap=self.settings.cap_rule)
        try:
            return await self._call(self.gate.blocking, reserve)
        except QuotaExceededError as exc:
            exc.provider = exc.provider or self.provider.name
            raise

    def _check_budget(self, wait: float) -> None:
        budget = self.settings.max_wait_seconds
        if budget is not None and wait > budget:
            raise RateLimitError(
                f"{self.provider.host} asks to wait {wait:.1f} s, more than "
                f"max_wait_seconds={budget:g}",
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

