"""A fleet-wide circuit breaker: a provider that is down costs one probe, not six attempts a row.

After ``failures`` consecutive transport failures (connection refused or reset, DNS,
timeouts, 5xx) spanning at least two different queries, with no answer in between, a
worker opens the key's circuit *on the gate*: a shared value (``circuit``) says since
when and why, and a pause with that cause holds every worker on the key, as a 429
does. When the pause ends, one worker at a time holds the probe lease (a shared value
taken with ``only_if_absent``) and sends; the others wait. Any answer from the provider
(even a 4xx or a 429) closes the circuit; another failure reopens it for twice as long
(up to ``max_interval``). A circuit open for longer than ``timeout_seconds`` ends the
batch with :class:`~geotoolkit.errors.ProviderUnavailableError`; finished rows are kept.
So does a provider that answers a worker nothing but 429s and 503s for longer than that:
a backend down behind a proxy or a load balancer answers 503 for ever, and no refusal
is a verdict on the rows, so without this bound such a batch would wait for ever.

Rows wait while the circuit is open: a failure seen while it is open, or that opens
it, does not count toward the row's attempts. A failed probe does count toward its row's,
and a worker's task whose own send just failed lets another of its rows probe first: rows
the provider always fails (an HTTP 500 for one address) would otherwise open the circuit
once they are all that is left, or claim every probe first, and hold the batch until
``timeout_seconds`` without ever failing. And a row whose send failed, finding the circuit
open while rows not yet tried wait, gives way to them (the engine tries it again a few rows
later): when the workers all held such rows (the first rows of a rerun are those that
failed before, since failures are not cached), their probes failed one after the other
while the rows behind them were never sent. Once it gave way and the circuit closed, the
row's failures are its own (``suspect``) and no longer open the circuit. When no row is
left untried (a rerun sends only the rows that failed before), such a row holding the probe
lease probes with a query the provider answered (a match from the cache or from this run)
instead of itself: an answer closes the circuit and makes every row that failed a suspect,
so they end as failures after their attempts instead of the run giving up.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import weakref
from dataclasses import dataclass
from typing import Any

from geotoolkit.engine.pacer import Pacer, call_gate
from geotoolkit.errors import ProviderUnavailableError, RateLimitError
from geotoolkit.progress import Throttled

__all__ = ["CIRCUIT_VALUE", "PROBE_VALUE", "Circuit", "CircuitState"]

log = logging.getLogger("geotoolkit.engine")

#: The shared values of a circuit on the gate key.
CIRCUIT_VALUE = "circuit"
PROBE_VALUE = "circuit:probe"

#: How often a worker waiting behind another worker's probe looks again.
_POLL_SECONDS = 1.0
#: How a circuit's reason begins: what was seen (a state written by an older version holds
#: the error alone, which was a connection's or a 5xx's: "failing" says both truly).
_SEEN = ("unreachable", "answering ")


def _describe(exc: ProviderUnavailableError) -> str:
    """What a failure says of the provider, then the error: a provider answering 5xx is
    reachable and failing, not "unreachable".

    >>> _describe(ProviderUnavailableError("p is unavailable (HTTP 503)", status_code=503))
    'answering HTTP 503: p is unavailable (HTTP 503)'
    >>> _describe(ProviderUnavailableError("p connection failed (ConnectError)"))
    'unreachable: p connection failed (ConnectError)'
    """
    code = exc.status_code
    seen = "unreachable" if code is None else f"answering HTTP {code}" if code >= 400 \
        else "answering errors"
    return f"{seen}: {exc}"


def _seen(reason: str) -> tuple[str, str]:
    """A circuit's reason split into what was seen and the error.

    >>> _seen("answering HTTP 500: p is unavailable (HTTP 500)")
    ('answering HTTP 500', 'p is unavailable (HTTP 500)')
    >>> _seen("p connection failed")
    ('failing', 'p connection failed')
    """
    seen, sep, error = reason.partition(": ")
    return (seen, error) if sep and seen.startswith(_SEEN) else ("failing", reason)


def _status(reason: str) -> int | None:
    """The HTTP status a circuit's reason says the provider answered, if any."""
    seen = _seen(reason)[0]
    code = seen.removeprefix("answering HTTP ")
    return int(code) if code != seen and code.isdigit() else None


@dataclass(frozen=True)
class CircuitState:
    """An open circuit, times on the store's clock: opened, next probe, current interval."""

    opened_at: float
    probe_at: float
    interval: float
    reason: str

    def to_json(self) -> str:
        return json.dumps([self.opened_at, self.probe_at, self.interval, self.reason])

    @classmethod
    def from_json(cls, text: str | None) -> CircuitState | None:
        """The state a shared value holds; ``None`` when absent or unreadable.

        >>> CircuitState.from_json(CircuitState(1.0, 3.0, 2.0, "refused").to_json())
        CircuitState(opened_at=1.0, probe_at=3.0, interval=2.0, reason='refused')
        >>> CircuitState.from_json("junk") is None
        True
        """
        if not text:
            return None
        try:
            opened, probe, interval, reason = json.loads(text)
            state = cls(float(opened), float(probe), float(interval), str(reason))
        except (ValueError, TypeError):
            return None
        ok = all(math.isfinite(v) for v in (state.opened_at, state.probe_at, state.interval))
        return state if ok else None


class Circuit:
    """One worker's view of the key's circuit; see the module docstring."""

    def __init__(self, pacer: Pacer, *, failures: int = 5, timeout_seconds: float = 600.0,
                 first_interval: float = 2.0, max_interval: float = 60.0,
                 lease_seconds: float = 60.0) -> None:
        self.pacer = pacer
        self.failures, self.timeout_seconds = failures, timeout_seconds
        self.first_interval, self.max_interval = first_interval, max_interval
        self.lease_seconds = lease_seconds
        #: The circuit as last read (``None``: closed, as far as this worker knows).
        self.known: CircuitState | None = None
        self._prober: asyncio.Task[Any] | None = None  # the task holding the probe lease
        self._run: list[str] = []  # the queries of the current run of failures
        self._read_epoch: int | None = None
        self._refused_since: float | None = None  # this worker's first 429/503 since an answer
        self._answered = False  # the provider answered this worker (not a 429/503) this run
        # (the circuit's opened_at, when this worker first saw it open): a run waits out its
        # own timeout, probing, even for a circuit an earlier run left open on the gate.
        self._joined: tuple[float, float] | None = None
        # The tasks whose last send failed let those waiting whose did not probe first.
        self._failing: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
        self._waiting: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()

    # -- what the engine calls --------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self.known is not None

    @property
    def probing(self) -> bool:
        """Whether the calling task holds the probe lease (its next send is the probe)."""
        return self._prober is not None and self._prober is asyncio.current_task()

    async def admit(self) -> None:
        """Return when this worker may send: the circuit is closed, or it holds the probe.

        Waits while another worker probes or the next probe is not due; raises
        ProviderUnavailableError when the circuit stayed open past ``timeout_seconds``.
        """
        task = asyncio.current_task()
        if task is not None:
            self._waiting.add(task)
        try:
            while self.known is not None and not self.probing:
                state = self.known
                now = self._store_now()
                if now - self._open_since(state, now) > self.timeout_seconds:
                    raise self._gave_up(state, now)
                wait = state.probe_at - now
                if wait > 0:
                    self._check_budget(state, wait)
                    await self.pacer.sleep_until(self.pacer.clock.now() + min(wait, _POLL_SECONDS * 5))
                elif self._prober is None and self._may_probe(now, state) and await self._claim():
                    self._prober = asyncio.current_task()
                    await self.refresh()  # still due? another worker may have probed and reopened it
                    if self.known is None or self.known.probe_at <= self._store_now():
                        return
                    await self._release()
                else:
                    await self.pacer.sleep_until(self.pacer.clock.now() + _POLL_SECONDS)
                await self.refresh()
        finally:
            if task is not None:
                self._waiting.discard(task)

    def _may_probe(self, now: float, state: CircuitState) -> bool:
        """Whether the calling task may claim a due probe: at once, unless its own last send
        failed (its row may be one the provider always fails) while a task whose did not
        waits too: then a poll later, if no other task of this worker or of the fleet took
        it meanwhile."""
        task = asyncio.current_task()
        if task not in self._failing or now >= state.probe_at + _POLL_SECONDS:
            return True
        return not any(t not in self._failing for t in self._waiting)

    def taken(self, *, failed_before: bool) -> None:
        """The calling task takes up another row: it is a failing task (probing after the
        others) only if that row's sends failed before."""
        task = asyncio.current_task()
        if task is not None and not failed_before:
            self._failing.discard(task)
        elif task is not None:
            self._failing.add(task)

    def stale(self, epoch: int) -> bool:
        """Whether a pause was published since the circuit was last read (read it again)."""
        return epoch != self._read_epoch

    async def refresh(self, epoch: int | None = None) -> None:
        """Read the circuit from the gate (after a new pause epoch, or while it is open)."""
        values = await self._values()
        self.known = CircuitState.from_json(values.get(CIRCUIT_VALUE))
        if epoch is not None:
            self._read_epoch = epoch
        if self.known is None:
            await self._release()

    async def answered(self, *, refused: bool = False) -> None:
        """The provider answered (anything but a transport failure): it is reachable.
        ``refused``: the answer was a 429 or a 503 (see :meth:`refused`)."""
        self._run.clear()
        task = asyncio.current_task()
        if task is not None:
            self._failing.discard(task)
        if not refused:
            self._refused_since, self._answered = None, True
        if self.probing or self.known is not None:
            await self._close()

    @property
    def has_answered(self) -> bool:
        """Whether the provider has answered this worker in this run with anything but a
        429/503. A 503 then reads as a limiter's (nginx ``limit_req`` as it ships refuses
        the sends over its rate with 503 and passes the others); before, it may be an
        outage's (a backend down answers every send 503), which says nothing of the pace."""
        return self._answered

    def refused(self, exc: RateLimitError) -> None:
        """A 429/503 this worker met: raise ProviderUnavailableError when it has met nothing
        else for longer than ``timeout_seconds`` (on the local clock)."""
        now = self.pacer.clock.now()
        if self._refused_since is None:
            self._refused_since = now
        elif now - self._refused_since > self.timeout_seconds:
            status = f"HTTP {exc.status_code}" if exc.status_code else "throttling"
            raise ProviderUnavailableError(
                f"{self.pacer.host} has answered nothing but refusals ({status}) for "
                f"{now - self._refused_since:.0f} s; giving up after circuit_timeout_seconds="
                f"{self.timeout_seconds:g}. Finished rows are kept: run again to resume.",
                provider=self.pacer.provider, status_code=exc.status_code)

    async def failed(self, query_key: str, exc: ProviderUnavailableError, *,
                     suspect: bool = False) -> bool:
        """A transport failure; return whether the circuit is (now) open for this worker and
        the failure is the outage's, not the row's (it costs the row no attempt).

        Opens it after ``failures`` in a row across two queries; a failed probe reopens
        it for longer, and is its row's attempt (``False``: the row may be one the provider
        always fails). A failure while it is open is simply part of the outage. A
        ``suspect`` row's failure (it failed before, gave way to other rows, and the
        circuit closed meanwhile) does not count toward opening it: it is the row's.
        """
        task = asyncio.current_task()
        if task is not None:
            self._failing.add(task)
        if self.probing:
            await self._reopen(_describe(exc))
            return False
        if self.known is None:
            await self.refresh()  # another worker may have opened it already
        if self.known is not None:
            return True
        if suspect:
            return False
        self._run.append(query_key)
        if len(self._run) >= self.failures and len(set(self._run)) >= 2:
            await self._open(_describe(exc))
            return True
        return False

    # -- the shared state -------------------------------------------------------------------

    async def _open(self, reason: str) -> None:
        now = self._store_now()
        state = CircuitState(now, now + self.first_interval, self.first_interval, reason)
        stored = await self._set(CIRCUIT_VALUE, state.to_json(), ttl_seconds=self._ttl(),
                                 only_if_absent=True)
        if stored:
            log.warning("%s %s (%s): circuit open, probing in %.0f s",
                        self.pacer.host, *_seen(reason), self.first_interval)
            await self._publish(state)
        await self.refresh()

    async def _reopen(self, reason: str) -> None:
        previous = self.known
        now = self._store_now()
        interval = min(self.max_interval, 2 * (previous.interval if previous else self.first_interval))
        opened = previous.opened_at if previous else now
        state = CircuitState(opened, now + interval, interval, reason)
        await self._set(CIRCUIT_VALUE, state.to_json(), ttl_seconds=self._ttl())
        await self._publish(state)
        await self._release()
        self.known = state

    async def _close(self) -> None:
        await self._delete(CIRCUIT_VALUE)
        await self._release()
        if self.known is not None:
            log.warning("%s answers again: circuit closed", self.pacer.host)
        self.known = None

    async def _publish(self, state: CircuitState) -> None:
        wait = max(0.0, state.probe_at - self._store_now())
        seen, error = _seen(state.reason)
        await self.pacer.pause(wait, cause=f"circuit open: {self.pacer.host} {seen} "
                                           f"({error}); next probe in {wait:.0f} s")
        self.pacer.emit(Throttled(wait_seconds=wait, cause="circuit", host=self.pacer.host,
                                  at=self.pacer.clock.now(), status_code=_status(state.reason)))

    async def _claim(self) -> bool:
        return await self._set(PROBE_VALUE, self.pacer.worker_id or "worker",
                               ttl_seconds=self.lease_seconds, only_if_absent=True)

    async def _release(self) -> None:
        if self.probing:
            self._prober = None
            await self._delete(PROBE_VALUE, only_if=self.pacer.worker_id or "worker")

    def _ttl(self) -> float:
        return max(self.timeout_seconds, self.max_interval) * 2 + 60.0

    def _open_since(self, state: CircuitState, now: float) -> float:
        """Since when this worker has known ``state`` open: when it opened, or when this
        worker first met it (a circuit an earlier run gave up on is probed, not inherited
        as already timed out: 'run again to resume' would stop at once, nothing sent)."""
        if self._joined is None or self._joined[0] != state.opened_at:
            self._joined = (state.opened_at, now)
        return max(state.opened_at, self._joined[1])

    def _gave_up(self, state: CircuitState, now: float) -> ProviderUnavailableError:
        seen, error = _seen(state.reason)
        return ProviderUnavailableError(
            f"{self.pacer.host} has been {seen} for {now - state.opened_at:.0f} s "
            f"({error}); giving up after circuit_timeout_seconds="
            f"{self.timeout_seconds:g}. Finished rows are kept: run again to resume.",
            provider=self.pacer.provider)

    def _check_budget(self, state: CircuitState, wait: float) -> None:
        """Non-blocking mode: the wait for the next probe is the circuit's, and says so."""
        budget = self.pacer.max_wait_seconds
        if budget is not None and wait > budget:
            seen, error = _seen(state.reason)
            raise RateLimitError(
                f"{self.pacer.host} is {seen} ({error}): its circuit is open, and the next probe "
                f"is {wait:.1f} s away, more than max_wait_seconds={budget:g}",
                retry_after=wait, provider=self.pacer.provider)

    def _store_now(self) -> float:
        return self.pacer.store_now()

    async def _values(self) -> dict[str, str]:
        gate = self.pacer.gate
        return await call_gate(gate.blocking, gate.values, self.pacer.key, "circuit")

    async def _set(self, name: str, value: str, *, ttl_seconds: float,
                   only_if_absent: bool = False) -> bool:
        gate = self.pacer.gate
        call = functools.partial(gate.set_value, self.pacer.key, name, value,
                                 ttl_seconds=ttl_seconds, only_if_absent=only_if_absent)
        return await call_gate(gate.blocking, call)

    async def _delete(self, name: str, *, only_if: str | None = None) -> None:
        gate = self.pacer.gate
        call = functools.partial(gate.delete_value, self.pacer.key, name, only_if=only_if)
        await call_gate(gate.blocking, call)
