"""The one engine: async, gated, rate-aware, written once for every front end.

The engine keeps the batch (grouping equal queries, the cache, the workers), the
retries and the outcomes; a provider's batch endpoint is used through
:mod:`~geotoolkit.engine.batching` (chunks, slots by the provider's cost rule,
splitting). When to send is the :class:`~geotoolkit.engine.pacer.Pacer`'s business
(slots on the fleet's gate); whether the provider is reachable at all is the
:class:`~geotoolkit.engine.circuit.Circuit`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import random
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar

import httpx

from geotoolkit.clock import SystemClock
from geotoolkit.engine import batching, http
from geotoolkit.engine.circuit import Circuit
from geotoolkit.engine.pacer import Departure, Pacer, Stopped, call_gate
from geotoolkit.engine.rows import RowQueue, SetAside
from geotoolkit.engine.settings import EngineSettings
from geotoolkit.engine.tally import Tally
from geotoolkit.errors import (
    AuthenticationError,
    ConfigurationError,
    GateError,
    ProviderResponseError,
    ProviderUnavailableError,
    QueryError,
    QuotaExceededError,
    RateLimitError,
)
from geotoolkit.gate.base import Gate
from geotoolkit.policy import RatePolicy
from geotoolkit.progress import BatchFinished, BatchStarted, Event, ItemFinished, ProgressSink
from geotoolkit.providers.base import Provider
from geotoolkit.redact import redact
from geotoolkit.results import Failure, Match, Outcome, Place, Query, ReverseQuery, with_attempts
from geotoolkit.store.base import Attempts, ResultStore, StoreError

__all__ = ["MAX_TEXT_CHARS", "Engine"]

log = logging.getLogger("geotoolkit.engine")

AnyQuery = Query | ReverseQuery
T = TypeVar("T")

#: Errors about the whole run: they stop the batch (finished rows are already stored).
#: A RateLimitError reaching a worker is the non-blocking budget (429s are handled inside);
#: a ProviderUnavailableError is an open circuit that did not close in time, or nothing but
#: 429s and 503s for as long (``Circuit.refused``).
_STOPS: tuple[type[BaseException], ...] = (
    AuthenticationError, QuotaExceededError, RateLimitError, GateError, StoreError,
    ConfigurationError, ProviderUnavailableError)


_PASS_THROUGH: tuple[type[BaseException], ...] = (Stopped, SetAside, *_STOPS)

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
    """Provider text (labels, the place's fields, reasons) redacted and bounded before it
    is stored or shown."""
    if isinstance(outcome, Match):
        label = hide(outcome.label[:MAX_TEXT_CHARS])
        place = _clean_place(outcome.place, hide)
        if label == outcome.label and place is outcome.place:
            return outcome
        return dataclasses.replace(outcome, label=label, place=place)
    reason = hide(outcome.reason[:MAX_TEXT_CHARS])
    return outcome if reason == outcome.reason else dataclasses.replace(outcome, reason=reason)


def _clean_place(place: Place, hide: Callable[[str], str]) -> Place:
    """``place`` with its text fields (a street, a postcode, the provider's id) redacted
    and bounded: a server that echoes the key there must not put it in the cache or a file."""
    changed: dict[str, Any] = {}
    for item in dataclasses.fields(place):
        value = getattr(place, item.name)
        if isinstance(value, str):
            cleaned = hide(value[:MAX_TEXT_CHARS])
            if cleaned != value:
                changed[item.name] = cleaned
    return dataclasses.replace(place, **changed) if changed else place


def _failed_attempt(error: BaseException | None) -> str:
    """A failed attempt, as a non-blocking wait names it: by its status, else its kind."""
    code = getattr(error, "status_code", None)
    return f"a failed attempt (HTTP {code})" if code else f"a failed attempt ({type(error).__name__})"


class Engine:
    """Geocode queries through a provider, paced by a fleet gate.

    Every input gets exactly one outcome, in input order. Distinct queries (after
    normalisation) are sent once; settled ones found in ``store`` are not sent. Before
    every attempt the pacer reserves a slot on the gate; after a 429/503 it publishes
    a pause *before* sleeping (``wait = backoff.wait(attempt, retry_after)``). Anything
    one row raises is that row's Failure; authentication and quota errors, the
    non-blocking budget (``max_wait_seconds``), the gate, the cache, and a circuit that
    stayed open stop the batch (finished outcomes are already in ``store``).

    The fleet: requests, successes and 429/503s are counted on the gate with the next
    gate call; a 429 feeds the gate's adaptive pacing. Every ``sample_seconds`` the run
    refreshes its heartbeat and emits ``FleetSampled``. With ``settings.cap``, at most
    that many requests are sent per day (or month) of the cap's zone by every worker on the key
    together; reaching it raises ``QuotaExceededError``.

    A provider with a batch endpoint gets the pending queries in batches of
    ``settings.batch_size`` (default: its maximum; 1 turns batching off): see
    :mod:`geotoolkit.engine.batching`.

    ``settings`` is an :class:`~geotoolkit.engine.EngineSettings` (or the user's
    GeocodeOptions); keyword ``overrides`` replace some of its fields (tests:
    ``Engine(provider, gate=g, rate=2.0, clock=fake)``).
    """

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
        if overrides:
            settings = dataclasses.replace(settings, **overrides)
        self.provider, self.gate, self.store, self.settings = provider, gate, store, settings
        self.rate = settings.rate_policy or RatePolicy(rate=provider.default_rate)
        self.clock = settings.clock or SystemClock()
        self.rng = settings.rng or random.Random()
        self.sample_seconds = sample_seconds
        self._progress: ProgressSink | None = None
        self._error: BaseException | None = None
        self._hand_off: tuple[type[BaseException], ...] = ()
        self._refused: Callable[[int, Outcome], bool] | None = None
        self._queue: RowQueue | None = None  # a run's single queries (not batches)
        self.tally = Tally(store)  # rows' attempts across the runs of a batch
        #: The indices (in ``run``'s items) of the rows the last run handed off (see ``run``).
        self.handed_off: list[int] = []
        self._client: httpx.AsyncClient
        self.pacer = self._new_pacer()
        self.circuit = Circuit(self.pacer, failures=settings.circuit_failures,
                               timeout_seconds=settings.circuit_timeout_seconds,
                               lease_seconds=batching.longest_deadline_seconds(provider, settings)
                               + 30.0)

    def _new_pacer(self) -> Pacer:
        return Pacer(self.gate, self.provider.gate_key, self.rate, clock=self.clock,
                     cap=self.settings.cap_rule, max_wait_seconds=self.settings.max_wait_seconds,
                     host=self.provider.host, provider=self.provider.name,
                     sample_seconds=self.sample_seconds, emit=self._emit,
                     stopping=lambda: self._error is not None)

    @property
    def worker_id(self) -> str:
        """This run's id on the gate (random, new for every run)."""
        return self.pacer.worker_id

    # -- the batch -------------------------------------------------------------

    async def run(self, items: Sequence[AnyQuery | str], progress: ProgressSink | None = None,
                  *, hand_off: tuple[type[BaseException], ...] = (),
                  forget_attempts: bool = True,
                  refused: Callable[[int, Outcome], bool] | None = None) -> list[Outcome]:
        """Settle ``items`` (a Query or ReverseQuery each, or a reason string for unusable
        input). ``progress`` receives the run's events (``geotoolkit.progress``).

        ``hand_off``: errors about the provider (its quota spent, an outage that outlasted
        the circuit) that end this provider's part instead of the run, for a stage of a
        chain with another provider after it. The rows not settled when one comes are a
        Failure saying so (never sent: 0 attempts), reported ``passed_on``, and their
        indices in ``items`` are :attr:`handed_off`.

        A row's attempts are kept in ``store`` across runs that raise (see
        :mod:`~geotoolkit.engine.tally`), and forgotten when a run returns, unless
        ``forget_attempts`` is false: a caller whose batch goes on after this run (the
        stages of a chain) then calls ``tally.forget()`` when it ends.

        ``refused(index, match)``: whether the caller will refuse that row's match (its
        point outside the row's country, on Null Island): such rows are reported
        ``failed``, as they end, not ``matched``.
        """
        self._progress = progress
        self._hand_off, self.handed_off = hand_off, []
        self._refused = refused
        http.warm_up()  # before the first slot, not between a slot and its send
        async with http.make_client(concurrency=self.settings.concurrency,
                                    timeout=self.settings.timeout,
                                    transport=self.settings.transport,
                                    secrets=self.provider.secrets) as client:
            self._client = client
            outcomes = await self._run(items)
        if forget_attempts:
            await self.tally.forget()
        return outcomes

    async def _run(self, items: Sequence[AnyQuery | str]) -> list[Outcome]:
        started = self.clock.now()
        results: list[Outcome | None] = [None] * len(items)
        groups, queries = self._group(items, results)
        cached = await self._lookup(list(groups))
        await self.tally.recall(k for k in groups if k not in cached)
        cached.update(self.tally.verdicts(self.provider.name))  # gave up in an earlier run
        self._emit(BatchStarted(total=len(items), unique=len(groups), cached=len(cached),
                                rate=self.rate.rate, host=self.provider.host, at=started))
        for outcome in results:
            if outcome is not None:
                self._emit(ItemFinished(status=outcome.status, attempts=0, at=started))
        for key, outcome in cached.items():
            self._record_outcome(key, outcome, groups, results, cached=True)
        pending = [(k, queries[k]) for k in groups if k not in cached]
        known = [(k, queries[k]) for k, o in cached.items() if isinstance(o, Match)]
        self._error = None
        try:
            async with self.pacer.joined():
                await self._work(pending, groups, results, known)
        except BaseException as exc:
            self._finish(results, started, exc)
            raise
        if isinstance(self._error, self._hand_off):
            self._hand_over(self._error, results)
            self._error = None
        self._finish(results, started, self._error)
        if self._error is not None:
            raise self._error
        return [r for r in results if r is not None]

    def _hand_over(self, error: BaseException, results: list[Outcome | None]) -> None:
        """The rows ``error`` left unsettled: a Failure each, passed on to the next provider."""
        self.handed_off = [i for i, r in enumerate(results) if r is None]
        reason = self._redact(f"not sent: {self.provider.name} stopped ({_describe(error)})")
        log.warning("%s stopped (%s); %d rows go on to the next provider", self.provider.name,
                    self._redact(_describe(error)), len(self.handed_off))
        for index in self.handed_off:
            results[index] = Failure(reason=reason, error=type(error).__name__,
                                     provider=self.provider.name, attempts=0)
        if self.handed_off:
            self._emit(ItemFinished(status="failed", rows=len(self.handed_off), attempts=0,
                                    at=self.clock.now(), passed_on=True))

    def _group(
        self, items: Sequence[AnyQuery | str], results: list[Outcome | None]
    ) -> tuple[dict[str, list[int]], dict[str, AnyQuery]]:
        groups: dict[str, list[int]] = {}
        queries: dict[str, AnyQuery] = {}
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
        return dict(await call_gate(self.store.blocking, self.store.get_many, keys))

    async def _work(self, pending: list[tuple[str, AnyQuery]],
                    groups: dict[str, list[int]], results: list[Outcome | None],
                    known: list[tuple[str, AnyQuery]]) -> None:
        """Settle ``pending`` with ``concurrency`` workers: one query per job, or one
        batch per job when the provider's batch endpoint is used. ``known``: queries the
        cache holds matches for (probes, see ``RowQueue``)."""
        async def keep(settled: Sequence[tuple[str, Outcome]]) -> None:
            await self._keep(settled, groups, results)

        async def one(job: Sequence[tuple[str, AnyQuery]]) -> None:
            for key, query in job:
                self.circuit.taken(failed_before=queue is not None and queue.tried(key))
                try:
                    outcome = await self._outcome_of(key, query)
                except SetAside as aside:
                    if queue is None:  # only single queries give way
                        raise
                    queue.set_aside((key, query), aside)
                    continue
                if queue is not None and isinstance(outcome, Match):
                    queue.answered(key, query)
                await keep([(key, outcome)])

        batches = batching.Batches.plan(self, keep, _PASS_THROUGH)
        jobs: Iterator[Sequence[tuple[str, AnyQuery]]]
        if batches:
            self._queue = queue = None
            jobs, settle = iter(batches.jobs(pending)), batches.settle
        else:
            self._queue = queue = RowQueue(pending, self.settings.concurrency, known)
            jobs, settle = queue, one

        async def worker() -> None:
            for job in jobs:
                if self._error is not None:
                    return
                try:
                    await settle(job)
                except Stopped:
                    return
                except _STOPS as exc:  # about the whole run: auth, quota, budget, gate, cache
                    self._error = self._error or exc
                    return

        await asyncio.gather(*(worker() for _ in range(self.settings.concurrency)))

    async def _keep(self, settled: Sequence[tuple[str, Outcome]], groups: dict[str, list[int]],
                    results: list[Outcome | None]) -> None:
        """Store settled outcomes (failures are not stored), then report them row by row."""
        kept = [(key, outcome) for key, outcome in settled if not isinstance(outcome, Failure)]
        if self.store is not None and kept:
            await batching.store(self.store, kept)
        for key, outcome in settled:
            self._record_outcome(key, outcome, groups, results)
        await self.pacer.sample()

    def _record_outcome(self, key: str, outcome: Outcome, groups: dict[str, list[int]],
                        results: list[Outcome | None], *, cached: bool = False) -> None:
        rows = groups[key]
        for index in rows:
            results[index] = outcome
        attempts = 0 if cached else outcome.attempts
        refused = [] if self._refused is None or not isinstance(outcome, Match) else \
            [i for i in rows if self._refused(i, outcome)]
        if len(refused) < len(rows):  # the requests are counted once, with the refused rows if any
            self._emit(ItemFinished(status=outcome.status, rows=len(rows) - len(refused),
                                    attempts=0 if refused else attempts, cached=cached,
                                    at=self.clock.now(),
                                    precision=outcome.precision if isinstance(outcome, Match) else None))
        if refused:
            self._emit(ItemFinished(status="failed", rows=len(refused), attempts=attempts,
                                    cached=cached, at=self.clock.now()))

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

    async def _outcome_of(self, key: str, query: AnyQuery) -> Outcome:
        """The outcome of one query. Anything one row raises (building, sending or parsing)
        is that row's Failure; only errors about the whole run (``_STOPS``) propagate."""
        try:
            return await self._resolve(key, query)
        except _PASS_THROUGH:
            raise
        except Exception as exc:  # one row never decides the fate of the batch
            log.debug("row failed", exc_info=True)
            return Failure(reason=self._redact(_describe(exc)), error=type(exc).__name__,
                           provider=self.provider.name)

    async def _resolve(self, key: str, query: AnyQuery) -> Outcome:
        try:
            request = self.provider.build_request(query)
        except QueryError as exc:  # refused before any request: too long, not encodable
            return Failure(reason=self._redact(str(exc)), error="QueryError",
                           provider=self.provider.name)
        exchange = functools.partial(self._send, query, request)
        attempts = self.settings.max_attempts
        await self._wait_out(key)
        outcome, sent, error = await self._attempts(
            request, exchange, attempts=attempts, key=key, final=(ProviderResponseError,),
            start=self.tally.start(key), failed=functools.partial(self._failed, key))
        if outcome is not None:
            return self._tidy(outcome, sent)
        name = type(error).__name__
        if isinstance(error, ProviderResponseError):  # an answer that cannot be used
            reason = self._redact(str(error))
        elif error is None:  # spent in earlier runs of the batch (max_attempts was lowered)
            reason, name = f"gave up after {attempts} attempts", ProviderUnavailableError.__name__
        else:
            reason = self._redact(f"gave up after {attempts} attempts: {error}")
        failure = Failure(reason=reason[:MAX_TEXT_CHARS], error=name,
                          provider=self.provider.name, attempts=sent)
        await self.tally.note(key, Attempts(attempts, sent, error=name,
                                            reason=failure.reason))
        return failure

    async def _wait_out(self, key: str) -> None:
        """Wait out the backoff an earlier run of the batch left ``key``'s row (in
        non-blocking mode, raise if it is longer than the budget)."""
        wait = self.tally.not_before(key) - self.clock.now()
        if wait > 0:
            self.pacer.check_budget(wait, after="an earlier run's failed attempt")
            await self.pacer.sleep_until(self.clock.now() + wait)

    async def _failed(self, key: str, attempt: int, sent: int, wait: float) -> None:
        """``key``'s row failed attempt ``attempt`` and backs off ``wait`` seconds: kept
        before the run may raise for the wait (non-blocking mode), so its rerun goes on."""
        await self.tally.note(key, Attempts(attempt, sent, self.clock.now() + wait))

    async def _attempts(self, request: httpx.Request, exchange: Callable[[], Awaitable[T]], *,
                        attempts: int, key: str, cost: int = 1,
                        final: tuple[type[Exception], ...] = (),
                        start: tuple[int, int] = (0, 0),
                        failed: Callable[[int, int, float], Awaitable[None]] | None = None,
                        ) -> tuple[T | None, int, BaseException | None]:
        """Send ``request`` through ``exchange`` until it is answered: ``(answer, requests
        sent, None)``, or ``(None, sent, error)`` with the error that ended the attempts (one
        of ``final``, never retried, or the last transport failure after ``attempts``).

        Before every try the circuit and a slot (``cost`` slots for a batch counted per
        query); a 429 pauses the fleet and never counts as an attempt; a transport failure
        feeds the circuit (``key``: the row, or a batch's first row) and, unless the circuit
        opens, backs off. A single query whose send failed, found the circuit open while
        rows not yet tried wait, gives way to them (``SetAside``): rows the provider always
        fails (a 500 for one address, the first rows of a rerun, as failures are not
        cached) would otherwise be the only probes, each failing, and hold every row
        behind them until ``circuit_timeout_seconds`` ended the run. Errors about the whole
        run (``_PASS_THROUGH``) propagate.

        ``start``: the ``(attempts, sent)`` of earlier runs; ``failed(attempt, sent, wait)``
        is awaited after each failed attempt that backs off, before the budget is checked.
        """
        last: BaseException | None = None
        throttles = 0  # attempts count toward ``attempts``; sent is every try
        attempt, sent = self._queue.counts.get(key, start) if self._queue else start
        while attempt < attempts:
            if last is not None and self.circuit.is_open and self._queue and self._queue.untried:
                raise SetAside(attempt, sent)
            epoch = await self._may_send(cost)
            if epoch is None:
                continue  # the circuit opened meanwhile: wait for it, the rows keep their place
            probe = self._queue.probe_for(key) if self._queue and self.circuit.probing else None
            if probe is not None and self._queue is not None:
                await self._probe_with(self._queue, probe, epoch)
                continue
            departure = self._arm(request, epoch, cost)
            attempt, sent = attempt + 1, sent + 1
            try:
                return await exchange(), sent, None
            except http.SendVoided:  # held up after its check, and a pause came: not sent
                attempt, sent = attempt - 1, sent - 1
                continue
            except RateLimitError as exc:  # a signal to slow down, never a verdict on the rows
                attempt, throttles = attempt - 1, throttles + 1
                await self._throttled(exc, throttles, departure.factor, departure.resumes)
                continue
            except ProviderUnavailableError as exc:
                last = exc
                if self._queue is not None:
                    self._queue.failed.add(key)
                if await self.circuit.failed(key, exc, suspect=self._suspect(key)):
                    attempt -= 1  # the outage is not the rows' fault: they keep their attempts
                    continue
                wait = self.settings.backoff.delay(attempt, self.rng)
            except _PASS_THROUGH:
                raise
            except final as exc:
                return None, sent, exc
            if attempt < attempts:
                if failed is not None:
                    await failed(attempt, sent, wait)
                self.pacer.check_budget(wait, after=_failed_attempt(last))
                await self.pacer.sleep_until(self.clock.now() + wait)
        return None, sent, last

    def _suspect(self, key: str) -> bool:
        """Whether ``key``'s failures are likely its own, not an outage (see
        ``RowQueue.suspect`` and ``Circuit.failed``)."""
        return self._queue is not None and self._queue.suspect(key)

    async def _probe_with(self, queue: RowQueue, probe: tuple[str, AnyQuery], epoch: int) -> None:
        """The circuit's probe, held by a row that failed before (it may be a row the
        provider always fails: a rerun sends only those), made with a query the provider
        answered instead. An answer closes the circuit, and the rows that failed are
        suspects from then on: their failures no longer open it, they count toward their
        attempts and the rows end. A failure reopens it, as the row's own would have,
        without costing the row an attempt."""
        key, query = probe
        try:
            request = self.provider.build_request(query)
        except Exception:
            queue.forget(key)
            return
        departure = self._arm(request, epoch)
        try:
            await self._send(query, request)
        except http.SendVoided:
            return
        except RateLimitError as exc:  # an answer (it closed the circuit), and a pause
            await self._throttled(exc, 1, departure.factor, departure.resumes)
        except ProviderUnavailableError as exc:
            await self.circuit.failed(key, exc)
            return
        except _PASS_THROUGH:
            raise
        except Exception:  # an answer all the same: the provider is there
            log.debug("probe answered with an error", exc_info=True)
        if not self.circuit.is_open:
            queue.suspects |= queue.failed

    async def _throttled(self, exc: RateLimitError, throttles: int,
                         factor: float | None = None, resumes: int | None = None) -> None:
        """A 429/503: publish the pause (before sleeping), then sleep it out.

        The wait grows with the 429s this row met in a row (``max(jittered backoff,
        Retry-After capped)``), so a server that keeps saying ``1`` still gets an ever
        longer backoff; the pause on the gate holds the whole fleet meanwhile. ``factor``:
        the fleet's factor the refused send was spaced at (the gate's evidence).

        ``resumes`` (not ``None``): the refused send was the fleet's first after a pause,
        after that many such refusals in a row. The pause was not enough, whichever row
        met it (another client took the quota as it reopened, at the same phase each time
        if it sends on a schedule; or the server's ``Retry-After`` is too short): the wait
        is at least that one and a jittered backoff more (``Backoff.beyond(resumes + 1)``,
        doubling with each in a row, within the backoff's caps), so the fleet's pauses
        grow until a success and do not end at the same phase twice; the pace is not cut
        (``Gate.pause``).

        A 503 is read as a 429: nginx ``limit_req`` as it ships (no ``limit_req_status``)
        refuses the sends over its rate with 503, so the pace is cut as the gate reads the
        evidence. Discovering the rate, only once the provider has answered this worker
        (``Circuit.has_answered``): before, a 503 may be an outage's (a backend down
        answers every send 503), and its cut would be the rate the gate keeps for the
        next runs on the key. (At a configured rate a cold cut climbs back as answers come.)
        """
        self.pacer.count(throttled=1)
        limited = exc.status_code == 429 or (exc.status_code == 503 and (
            self.circuit.has_answered or not self.pacer.rate.discovering))
        backoff = self.settings.backoff
        wait = backoff.wait(throttles, exc.retry_after, self.rng)
        if resumes is not None and limited:
            wait = max(wait, backoff.beyond(resumes + 1, exc.retry_after, self.rng))
            # A 503 on the first send after a pause is an outage going on: it backs off
            # as a refused resume does, and cuts nothing.
            await self.pacer.throttled(exc, wait, rate_limited=exc.status_code == 429,
                                       resumed=True)
        else:
            await self.pacer.throttled(exc, wait, rate_limited=limited, factor=factor)
        self.circuit.refused(exc)  # nothing but refusals for too long: the batch ends
        self.pacer.check_budget(wait, refusal=exc)
        await self.pacer.sleep_until(self.clock.now() + wait)

    def _arm(self, request: httpx.Request, epoch: int, cost: int = 1) -> Departure:
        """The request's last steps (``Departure``): as it enters the client, spaced from
        the fleet's previous send as it left and still clear of pauses since its slot's
        check in ``epoch``? As its headers leave, late enough to push the next?"""
        departure = self.pacer.departure(self.clock.now(), epoch, cost)
        request.extensions[http.BEFORE_SEND] = departure.check
        request.extensions["trace"] = departure.trace  # httpcore's: when the bytes leave
        return departure

    async def _may_send(self, cost: int = 1) -> int | None:
        """Wait for the circuit (closed, or this worker's probe) and a slot (``cost`` slots
        for a batch counted per query); return the slot's pause epoch, or None when the
        circuit turned out open after the slot (a new pause epoch), so nothing is sent."""
        await self.circuit.admit()
        epoch = await self.pacer.slot(cost)
        if self.circuit.probing:
            return epoch
        if self.circuit.stale(epoch):
            await self.circuit.refresh(epoch)
        return None if self.circuit.is_open else epoch

    async def _send(self, query: AnyQuery, request: httpx.Request) -> Outcome:
        return await self._exchange(request, functools.partial(self.provider.parse_response, query))

    async def _exchange(self, request: httpx.Request, parse: Callable[[httpx.Response], T], *,
                        rows: int = 1) -> T:
        """One exchange; any answer at all (even an error status) shows the provider is up.

        ``rows``: the queries the request carries (a batch gets a longer deadline and a
        larger body: ``batching.deadline_seconds``, ``batching.max_response_bytes``).
        """
        response = await http.send(
            self._client, request, self.provider.name,
            deadline_seconds=batching.deadline_seconds(self.settings, rows),
            max_bytes=batching.max_response_bytes(self.settings, rows))
        try:
            outcome = parse(response)
        except ProviderUnavailableError:
            raise  # a 5xx: the provider is there but failing (a transport failure of its own)
        except RateLimitError:
            await self.circuit.answered(refused=True)
            raise
        except QuotaExceededError as exc:  # the key's quota: stop every worker on it too
            await self.circuit.answered()
            await self.pacer.stop_fleet(exc, self.provider.secrets)
            raise
        except BaseException:
            await self.circuit.answered()
            raise
        await self.circuit.answered()
        self.pacer.count(successes=1)
        return outcome

    def _tidy(self, outcome: Outcome, attempts: int) -> Outcome:
        """``outcome`` with its attempts, its provider text redacted and bounded."""
        return _clean(with_attempts(outcome, attempts), self._redact)

    def _redact(self, text: str) -> str:
        return redact(text, self.provider.secrets)

    def _emit(self, event: Event) -> None:
        if self._progress is None:
            return
        try:
            self._progress(event)
        except Exception:  # a broken renderer must not break the batch
            log.exception("progress sink failed on %s", type(event).__name__)
