"""The primitive store under every fleet gate: atomic operations on the store's own clock.

A ``GateStore`` (memory, SQLite, Redis, PostgreSQL) knows nothing of adaptive
rates, caps, stats windows or heartbeats: it offers only the operations that
must run on the store's clock (Redis ``TIME``, PostgreSQL ``clock_timestamp()``,
the host clock for SQLite and memory), each atomic:

==============  =====================================================================
``Reserve``      GCRA with the pause epoch: ``slot = max(now, tat, pause_until)``;
                 within ``horizon`` seconds ``tat = slot + interval`` (reserved).
                 -> ``Slot(wait, now, reserved, epoch)``
``Pause``        ``pause_until = max(pause_until, now + seconds)`` (never shorter); a
                 new pause bumps the epoch and restarts ``tat`` at its end, extending a
                 running one pushes ``tat``; the cause is kept with it.
                 -> ``Paused(now, pause_until, previous_until, epoch)``
``ReadState``    -> ``StoreState(now, tat, pause_until, epoch, cause)``
``AddCounters``  add to named integer counters (each lives ``ttl_seconds`` from its
                 last change; an expired one restarts at 0) -> ``{name: new value}``
``ReadCounters`` -> ``{name: value}`` for the live counters among ``names``
``SetValue``     store a string for ``ttl_seconds``; ``only_if_absent`` (a lease) or
                 ``only_if=<expected>`` (compare-and-set) -> ``bool`` (stored)
``ReadValues``   -> ``{name: value}``, the live values whose names start with ``prefix``
``DeleteValue``  ``only_if=<expected>`` -> ``bool`` (a live value was deleted)
==============  =====================================================================

``store.run([op, ...])`` runs several operations in **one round trip** (one Lua
script call, one PostgreSQL pipeline, one SQLite transaction, one lock) and
returns their results in order. On SQL stores a batch is one transaction: a
strategy keeps the rows it writes in one order (values, durable counters,
counters, pacing state) so two batches never wait for each other in a cycle.
``durable`` counters (cap counts: billed quota) survive a crash where the store
can tell (a logged PostgreSQL table); the others are ephemeral.

``keys(prefix)`` lists the gate keys with a pacing state on the store (a Redis
``SCAN`` with a ``MATCH``, never ``KEYS``; a SQL ``SELECT DISTINCT``).

The strategy over these primitives is ``geotoolkit.gate.strategy.FleetGate``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from geotoolkit.clock import Clock
from geotoolkit.errors import ConfigurationError
from geotoolkit.gate.base import GateState, _check, check_value, gcra_acquire, gcra_pause, is_new_pause

__all__ = [
    "FAR",
    "AddCounters",
    "DeleteValue",
    "GateStore",
    "Op",
    "Pause",
    "Paused",
    "Primitives",
    "ReadCounters",
    "ReadState",
    "ReadValues",
    "Reserve",
    "SetValue",
    "Slot",
    "StoreState",
    "describe",
    "pause_step",
    "reserve_step",
]

#: Stand-in for an infinite horizon (Lua's ``tonumber`` does not parse "inf").
FAR = 1e15


# -- operations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Reserve:
    """Reserve the next send slot at ``interval`` seconds after it, within ``horizon``."""

    writes: ClassVar[bool] = True
    key: str
    interval: float
    horizon: float = 60.0

    def __post_init__(self) -> None:
        _check(self.interval)
        if math.isnan(self.horizon):
            raise ConfigurationError("the gate horizon must be a number")
        object.__setattr__(self, "horizon", max(-FAR, min(FAR, float(self.horizon))))


@dataclass(frozen=True)
class Pause:
    """Publish a pause of ``seconds`` (never shortening one) with its ``cause``."""

    writes: ClassVar[bool] = True
    key: str
    seconds: float
    cause: str = ""

    def __post_init__(self) -> None:
        _check(0.0, self.seconds)


@dataclass(frozen=True)
class ReadState:
    """Read the pacing state (and the store's clock)."""

    writes: ClassVar[bool] = False
    key: str


@dataclass(frozen=True)
class AddCounters:
    """Add ``counts`` (name, delta pairs, sorted by name) to the key's counters."""

    writes: ClassVar[bool] = True
    key: str
    counts: tuple[tuple[str, int], ...]
    ttl_seconds: float
    durable: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "ttl_seconds", check_value("counter", "", self.ttl_seconds))
        names = [name for name, _ in self.counts]
        if len(set(names)) != len(names) or any(
                isinstance(d, bool) or not isinstance(d, int) for _, d in self.counts):
            raise ConfigurationError("counter names must be unique and deltas whole numbers")
        object.__setattr__(self, "counts", tuple(sorted(self.counts)))  # one lock order

    @classmethod
    def of(cls, key: str, counts: Mapping[str, int], ttl_seconds: float, *,
           durable: bool = False) -> AddCounters:
        """From a mapping.

        >>> AddCounters.of("k", {"b": 1, "a": 2}, 10).counts
        (('a', 2), ('b', 1))
        """
        return cls(key, tuple(counts.items()), ttl_seconds, durable)


@dataclass(frozen=True)
class ReadCounters:
    """Read the live counters among ``names`` (absent or expired ones are left out)."""

    writes: ClassVar[bool] = False
    key: str
    names: tuple[str, ...]
    durable: bool = False


@dataclass(frozen=True)
class SetValue:
    """Store ``value`` under (key, name) for ``ttl_seconds``, maybe conditionally."""

    writes: ClassVar[bool] = True
    key: str
    name: str
    value: str
    ttl_seconds: float
    only_if_absent: bool = False
    only_if: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "ttl_seconds", check_value(self.name, self.value, self.ttl_seconds))
        if self.only_if_absent and self.only_if is not None:
            raise ConfigurationError("only_if_absent and only_if exclude each other")


@dataclass(frozen=True)
class ReadValues:
    """Read the live values whose names start with ``prefix``."""

    writes: ClassVar[bool] = False
    key: str
    prefix: str = ""


@dataclass(frozen=True)
class DeleteValue:
    """Delete (key, name); with ``only_if``, only while it holds that value."""

    writes: ClassVar[bool] = True
    key: str
    name: str
    only_if: str | None = None


Op = Reserve | Pause | ReadState | AddCounters | ReadCounters | SetValue | ReadValues | DeleteValue


# -- results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """A reservation: wait ``wait`` seconds (store clock ``now``); ``reserved`` within the horizon."""

    wait: float
    now: float
    reserved: bool
    epoch: int


@dataclass(frozen=True)
class Paused:
    """A published pause: it ends at ``pause_until``; ``previous_until`` is the one it met."""

    now: float
    pause_until: float
    previous_until: float
    epoch: int

    @property
    def remaining(self) -> float:
        return self.pause_until - self.now

    @property
    def started(self) -> bool:
        """This call started the pause (none was running): it opened epoch ``epoch``."""
        return is_new_pause(self.now, self.previous_until, self.pause_until)


@dataclass(frozen=True)
class StoreState:
    """A key's pacing state on the store's clock, with the running pause's cause."""

    now: float
    tat: float = 0.0
    pause_until: float = 0.0
    epoch: int = 0
    cause: str = ""

    def gate_state(self, rate_factor: float | None = None, pushed: float = 0.0) -> GateState:
        return GateState(now=self.now, tat=self.tat, pause_until=self.pause_until, epoch=self.epoch,
                         rate_factor=rate_factor, pushed=pushed)


# -- the protocol -------------------------------------------------------------------------------


@runtime_checkable
class GateStore(Protocol):
    """Atomic primitives on one store; see the module docstring.

    ``clock`` is the store's clock when it is this host's (memory, SQLite) and
    ``None`` for a server (its clock is known from the ``now`` of its replies).
    Failures of the store raise ``GateError`` (never a foreign exception); bad
    arguments raise ``ConfigurationError`` before anything is sent.
    """

    backend: str
    blocking: bool

    @property
    def clock(self) -> Clock | None:
        """The store's clock when it is this host's; ``None`` for a server."""
        ...

    def run(self, ops: Sequence[Op]) -> list[Any]:
        """Run ``ops`` in order, in one round trip; their results, in order."""
        ...

    def keys(self, prefix: str = "") -> list[str]:
        """The gate keys starting with ``prefix`` that have a pacing state, sorted."""
        ...

    def close(self) -> None: ...


class Primitives:
    """One operation per call, for stores that implement ``run``: ``store.reserve(...)``."""

    def run(self, ops: Sequence[Op]) -> list[Any]:  # pragma: no cover - implemented by stores
        raise NotImplementedError

    def reserve(self, key: str, interval: float, horizon: float = 60.0) -> Slot:
        slot: Slot = self.run([Reserve(key, interval, horizon)])[0]
        return slot

    def pause(self, key: str, seconds: float, cause: str = "") -> Paused:
        paused: Paused = self.run([Pause(key, seconds, cause)])[0]
        return paused

    def read_state(self, key: str) -> StoreState:
        state: StoreState = self.run([ReadState(key)])[0]
        return state

    def add_counters(self, key: str, counts: Mapping[str, int], ttl_seconds: float, *,
                     durable: bool = False) -> dict[str, int]:
        values: dict[str, int] = self.run(
            [AddCounters.of(key, counts, ttl_seconds, durable=durable)])[0]
        return values

    def read_counters(self, key: str, names: Sequence[str], *, durable: bool = False) -> dict[str, int]:
        values: dict[str, int] = self.run([ReadCounters(key, tuple(names), durable)])[0]
        return values

    def set_value(self, key: str, name: str, value: str, *, ttl_seconds: float,
                  only_if_absent: bool = False, only_if: str | None = None) -> bool:
        return bool(self.run([SetValue(key, name, value, ttl_seconds, only_if_absent, only_if)])[0])

    def values(self, key: str, prefix: str = "") -> dict[str, str]:
        values: dict[str, str] = self.run([ReadValues(key, prefix)])[0]
        return values

    def delete_value(self, key: str, name: str, *, only_if: str | None = None) -> bool:
        return bool(self.run([DeleteValue(key, name, only_if)])[0])


def describe(ops: Sequence[Op]) -> str:
    """What a batch does, for error messages.

    >>> describe([ReadState("k"), Reserve("k", 1.0)])
    'read the state and acquire'
    """
    names = {Reserve: "acquire", Pause: "pause", ReadState: "read the state",
             AddCounters: "count", ReadCounters: "read the counters", SetValue: "set a value",
             ReadValues: "read the values", DeleteValue: "delete a value"}
    return " and ".join(dict.fromkeys(names[type(op)] for op in ops))


# -- the pacing steps, for stores that compute them in Python (memory, SQLite) -------------------


def reserve_step(now: float, tat: float, until: float, op: Reserve) -> tuple[float, float, bool]:
    """``(wait, new_tat, reserved)``; ``new_tat == tat`` when not reserved.

    >>> reserve_step(100.0, 0.0, 0.0, Reserve("k", 2.0))
    (0.0, 102.0, True)
    >>> reserve_step(100.0, 180.0, 0.0, Reserve("k", 2.0, horizon=60.0))
    (80.0, 180.0, False)
    """
    wait, new_tat = gcra_acquire(now, tat, until, op.interval, op.horizon)
    return wait, new_tat, wait <= op.horizon


def pause_step(now: float, tat: float, until: float, epoch: int, cause: str,
               op: Pause) -> tuple[float, float, int, str]:
    """``(tat, pause_until, epoch, cause)`` after ``op``.

    >>> pause_step(100.0, 90.0, 0.0, 0, "", Pause("k", 5.0, "429"))
    (105.0, 105.0, 1, '429')
    >>> pause_step(101.0, 107.0, 105.0, 1, "429", Pause("k", 1.0, "503"))   # shorter: nothing
    (107.0, 105.0, 1, '429')
    """
    new_tat, new_until = gcra_pause(now, tat, until, op.seconds)
    if new_until <= until:
        return tat, until, epoch, cause
    return new_tat, new_until, epoch + int(is_new_pause(now, until, new_until)), op.cause
