"""Batch endpoints in the engine: many queries per request, settled row by row.

A provider with a batch endpoint describes it in a
:class:`~geotoolkit.providers.protocol.BatchPolicy` (Census ``addressbatch``: 10,000
records, one request; Mapbox v6 batch and ArcGIS ``geocodeAddresses``: 1,000 queries,
each counted). When the engine's ``batch_size`` is not 1, the pending unique queries
(after the cache and the grouping of equal queries) are cut into chunks of
``batch_size`` (at most the provider's ``max_queries``); each chunk is one job of a
worker:

- **Slots by the provider's cost rule**: a batch reserves ``policy.slots(n)`` gate slots
  at once (1 for ``cost="request"``, ``n`` for ``cost="query"``), and a daily or
  monthly cap counts that many, so pacing and caps stay true across a fleet that mixes
  batches and single requests.
- **Same retries as a single request**: a 429/503 publishes the fleet pause and never
  fails a row; 5xx, resets and timeouts are retried with backoff and feed the fleet's
  circuit (keyed by the batch's first row, so one bad batch retried and split does not
  open it on its own).
- **Split to isolate a poison row**: a batch that fails as a whole (5xx or timeout after
  its attempts, an answer that cannot be read, a request that cannot be built, or every
  row a ``Failure``) is split in halves, recursively; each half gets
  :data:`SPLIT_ATTEMPTS` attempts, and a part of one row goes to the single-address
  endpoint with the row's full ``max_attempts``. One bad address costs about
  ``2 * log2(n)`` extra requests, never the other rows. A batch's (or a half's) attempts
  are kept across the runs of a non-blocking batch like a row's
  (:mod:`~geotoolkit.engine.tally`), under :func:`part_key`, so reruns go on splitting.
- **Row by row**: a batch answer's matched, no-match and failed rows each get their own
  outcome (a row the answer leaves out goes again alone, through the single endpoint);
  settled rows are stored (one transaction when the store has ``put_many``)
  and reported (``ItemFinished``) as soon as their batch or half settles, so a run
  killed mid-batch sends again only the rows not settled.
- **Deadlines scale**: a request of ``n`` queries may take
  ``request_deadline_seconds + n * BATCH_SECONDS_PER_ROW`` (a full Census upload:
  30 + 500 s) and read ``max(max_response_bytes, n * BATCH_BYTES_PER_ROW)`` bytes.

A query the batch endpoint does not take (a point, where the policy says
``reverse=False``) goes alone, through the single-query endpoint.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from geotoolkit.engine.pacer import call_gate
from geotoolkit.engine.settings import EngineSettings
from geotoolkit.errors import ProviderUnavailableError, QueryError
from geotoolkit.providers.protocol import MISSING_FROM_BATCH, BatchPolicy, batch_policy
from geotoolkit.results import Failure, Outcome, Query, ReverseQuery, with_attempts
from geotoolkit.store.base import Attempts, ResultStore

if TYPE_CHECKING:
    from geotoolkit.engine.engine import Engine

__all__ = ["BATCH_BYTES_PER_ROW", "BATCH_SECONDS_PER_ROW", "SPLIT_ATTEMPTS", "Batches",
           "batch_size", "deadline_seconds", "longest_deadline_seconds", "max_response_bytes",
           "part_key", "store"]

log = logging.getLogger("geotoolkit.engine")

#: A batch request of ``n`` queries gets ``n`` times this much more time than one query.
BATCH_SECONDS_PER_ROW = 0.05
#: ... and may read ``n`` times this many bytes (when more than ``max_response_bytes``).
BATCH_BYTES_PER_ROW = 20_000
#: Attempts of each half of a split batch (the first batch has ``max_attempts``).
SPLIT_ATTEMPTS = 2

Item = tuple[str, Query | ReverseQuery]
Keep = Callable[[Sequence[tuple[str, Outcome]]], Awaitable[None]]


def batch_size(provider: object, settings: EngineSettings) -> int:
    """Queries per request: ``settings.batch_size`` (default the provider's maximum), cut to
    the provider's ``max_queries``; 1 without a batch endpoint."""
    policy = batch_policy(provider)
    if policy is None:
        return 1
    return min(settings.batch_size or policy.max_queries, policy.max_queries)


def deadline_seconds(settings: EngineSettings, rows: int = 1) -> float:
    """The total deadline of a request carrying ``rows`` queries.

    >>> deadline_seconds(EngineSettings(), 1), deadline_seconds(EngineSettings(), 10_000)
    (30.0, 530.0)
    """
    extra = BATCH_SECONDS_PER_ROW * rows if rows > 1 else 0.0
    return settings.request_deadline_seconds + extra


def longest_deadline_seconds(provider: object, settings: EngineSettings) -> float:
    """The deadline of the largest request a run may send to ``provider``."""
    return deadline_seconds(settings, batch_size(provider, settings))


def max_response_bytes(settings: EngineSettings, rows: int = 1) -> int:
    """The largest answer read for a request carrying ``rows`` queries."""
    return max(settings.max_response_bytes, BATCH_BYTES_PER_ROW * rows if rows > 1 else 0)


async def store(results: ResultStore, items: Sequence[tuple[str, Outcome]]) -> None:
    """Store settled outcomes: in one transaction when the store can (``put_many``)."""
    put_many = getattr(results, "put_many", None)
    if len(items) > 1 and callable(put_many):
        await call_gate(results.blocking, put_many, list(items))
        return
    for key, outcome in items:
        await call_gate(results.blocking, results.put, key, outcome)


class Batches:
    """One run's use of a provider's batch endpoint; see the module docstring.

    ``keep`` stores and reports settled rows; ``pass_through`` are the errors that stop
    the run (never read as a batch failing).
    """

    def __init__(self, engine: Engine, policy: BatchPolicy, size: int, keep: Keep,
                 pass_through: tuple[type[BaseException], ...]) -> None:
        self.engine, self.policy, self.size = engine, policy, size
        self.keep, self.pass_through = keep, pass_through

    @classmethod
    def plan(cls, engine: Engine, keep: Keep,
             pass_through: tuple[type[BaseException], ...]) -> Batches | None:
        """The batches of a run, or ``None`` when the provider has no batch endpoint or
        ``batch_size`` is 1."""
        policy = batch_policy(engine.provider)
        size = batch_size(engine.provider, engine.settings)
        if policy is None or size < 2:
            return None
        return cls(engine, policy, size, keep, pass_through)

    def fits(self, query: Query | ReverseQuery) -> bool:
        """Whether the batch endpoint takes ``query`` (points only where the policy says so)."""
        return isinstance(query, Query) or self.policy.reverse

    def jobs(self, pending: Sequence[Item]) -> list[list[Item]]:
        """Chunks of at most ``size`` queries, then the queries that go alone."""
        fit = [item for item in pending if self.fits(item[1])]
        alone = [[item] for item in pending if not self.fits(item[1])]
        return [fit[i:i + self.size] for i in range(0, len(fit), self.size)] + alone

    async def settle(self, job: Sequence[Item]) -> None:
        """Settle every row of ``job`` (a chunk, or one query)."""
        await self._settle(list(job), self.engine.settings.max_attempts, 0)

    async def _settle(self, part: list[Item], attempts: int, carried: int) -> None:
        """``part`` as one batch of ``attempts`` attempts, else its halves; ``carried``:
        the batch requests that carried these rows before (their ``attempts``)."""
        if len(part) == 1:  # alone: the single endpoint, the row's own retries
            key, query = part[0]
            outcome = await self.engine._outcome_of(key, query)
            await self.keep([(key, with_attempts(outcome, outcome.attempts + carried))])
            return
        outcomes, sent, why = await self._batch(part, attempts)
        if outcomes is not None:
            answered = list(zip(part, outcomes, strict=True))
            left_out = [item for item, outcome in answered if _missing(outcome)]
            await self.keep([(key, self.engine._tidy(outcome, carried + sent))
                             for (key, _), outcome in answered if not _missing(outcome)])
            for item in left_out:  # alone, through the single endpoint: its own answer
                await self._settle([item], attempts, carried + sent)
            return
        log.info("%s batch of %d failed as a whole (%s): split in halves", self.engine.provider.name,
                 len(part), why)
        middle = len(part) // 2
        for half in (part[:middle], part[middle:]):
            await self._settle(half, SPLIT_ATTEMPTS, carried + sent)

    async def _batch(self, part: list[Item], attempts: int
                     ) -> tuple[list[Outcome] | None, int, str]:
        """Send ``part`` as one request: its outcomes (``None``: failed as a whole), the
        requests sent and why it failed."""
        engine, queries = self.engine, [query for _, query in part]
        try:
            request = engine.provider.build_batch_request(queries)
        except QueryError as exc:  # none can be sent, or the body is too big
            return None, 0, engine._redact(str(exc))
        except self.pass_through:
            raise
        except Exception as exc:  # a provider's bug: the rows get their chance alone
            return None, 0, engine._redact(f"{type(exc).__name__}: {exc}")
        parse = functools.partial(engine.provider.parse_batch_response, queries)
        exchange = functools.partial(engine._exchange, request, parse, rows=len(part))
        key = part_key(part)  # its attempts are kept across runs, as a row's
        await engine.tally.fetch(key)
        await engine._wait_out(key)
        outcomes, sent, error = await engine._attempts(
            request, exchange, attempts=attempts, key=part[0][0],
            cost=self.policy.slots(len(part)), final=(Exception,),
            start=engine.tally.start(key), failed=functools.partial(engine._failed, key))
        if outcomes is not None:
            return _whole(outcomes, len(part), sent)
        if error is None or isinstance(error, ProviderUnavailableError):
            # spent: a rerun of the batch splits it at once
            await engine.tally.note(key, Attempts(attempts, sent))
            return None, sent, f"gave up after {attempts} attempts: {engine._redact(str(error))}"
        return None, sent, engine._redact(f"{type(error).__name__}: {error}")  # not retried


def part_key(part: Sequence[Item]) -> str:
    """The key a batch (or a part of one) keeps its attempts under: a digest of its rows'
    cache keys, the same in every run that sends the same rows together."""
    digest = hashlib.sha256("\n".join(key for key, _ in part).encode()).hexdigest()[:32]
    return f"batch:{digest}"


def _missing(outcome: Outcome) -> bool:
    """Whether the batch answer left this query out (it goes again alone)."""
    return isinstance(outcome, Failure) and outcome.reason == MISSING_FROM_BATCH


def _whole(outcomes: list[Outcome], rows: int, sent: int) -> tuple[list[Outcome] | None, int, str]:
    """The answer's outcomes, or ``None`` when they say the batch failed as a whole."""
    if len(outcomes) != rows:
        return None, sent, f"{len(outcomes)} outcomes for {rows} queries"
    failures = [outcome for outcome in outcomes if isinstance(outcome, Failure)]
    if len(failures) == rows:
        return None, sent, f"every row failed ({failures[0].reason})"
    return outcomes, sent, ""
