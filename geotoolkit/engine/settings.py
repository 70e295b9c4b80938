"""The engine's settings: one frozen, validated value object, each option documented once.

:class:`EngineSettings` holds what the engine needs besides its adapters (provider,
gate, store): pacing, retries, deadlines and the test seams. The user-facing
:class:`~geotoolkit.orchestration.options.GeocodeOptions` extends it with the provider,
the gate and the cache, so every option is declared in exactly one place. Each field
carries its documentation (``doc``) and, where the command line has a flag for it,
the flag's argparse settings (``cli``); docstrings and ``--help`` are built from them.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from geotoolkit.clock import Clock
from geotoolkit.errors import ConfigurationError
from geotoolkit.gate.base import Cap
from geotoolkit.policy import Backoff, RatePolicy

__all__ = ["EngineSettings", "option", "option_docs"]


def option(default: Any = dataclasses.MISSING, *, doc: str, cli: Mapping[str, Any] | None = None,
           factory: Any = dataclasses.MISSING, seam: bool = False) -> Any:
    """A dataclass field with its documentation and, optionally, its command-line flag.

    ``cli`` holds argparse keyword arguments (``type``, ``metavar``, ``choices``); the
    flag is the field name with dashes. ``seam`` marks injection points for tests
    (hidden from reprs and comparisons, never on the command line).
    """
    metadata = {"doc": doc, "cli": None if cli is None else dict(cli), "seam": seam}
    return field(default=default, default_factory=factory, metadata=metadata,
                 repr=not seam, compare=not seam)


def option_docs(cls: type, extra: Mapping[str, str] | None = None) -> str:
    """``cls.__doc__`` with a numpydoc ``Parameters`` section built from the fields' ``doc``
    metadata (and ``extra`` parameters), placed before its ``Examples`` section, if any."""
    lines = ["Parameters", "----------"]
    every = cls.__dataclass_fields__.values()  # type: ignore[attr-defined]  # InitVars too
    docs = {f.name: f.metadata["doc"] for f in every if "doc" in f.metadata}
    for name, doc in {**docs, **(extra or {})}.items():
        lines += [name, f"    {doc}"]
    section = "\n".join("    " + line for line in lines) + "\n\n"
    text = cls.__doc__ or ""
    head, marker, tail = text.partition("    Examples\n")
    return f"{head}{section}{marker}{tail}" if marker else f"{text}\n\n{section}"


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")


def _seconds(name: str, value: object, *, optional: bool = False, positive: bool = False) -> None:
    if value is None and optional:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):  # type: ignore[operator]
        kind = "> 0" if positive else ">= 0"
        raise ConfigurationError(f"{name} must be a finite number of seconds {kind}, got {value!r}")


def rate_arg(text: str) -> float:
    """A ``--rate`` value: requests per second, or ``unlimited`` (no pacing at all).

    >>> rate_arg("2.5"), rate_arg("unlimited")
    (2.5, inf)

    Anything else is no rate (argparse's "invalid rate_arg value" named this function):

    >>> rate_arg("fast")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 'fast' is not a rate: give requests per second (such as 1.5) \
or 'unlimited'
    """
    if text.strip().lower() in ("unlimited", "inf"):
        return math.inf
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a rate: give requests per second (such as 1.5) or 'unlimited'") from None


def _rate(value: object) -> RatePolicy | None:
    if value is None or isinstance(value, RatePolicy):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"rate must be requests per second, a number (rate=math.inf "
                                 f"for no limit (--rate unlimited)), got {value!r}")
    return RatePolicy(rate=float(value))


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """How the engine paces, retries and waits; validated when built.

    Examples
    --------
    >>> EngineSettings(rate=2).rate
    RatePolicy(rate=2.0, safety_margin=0.01, horizon_seconds=60.0)
    >>> EngineSettings(concurrency=0)
    Traceback (most recent call last):
    ...
    geotoolkit.errors.ConfigurationError: concurrency must be a positive integer, got 0
    """

    rate: RatePolicy | float | None = option(
        None, cli={"type": rate_arg, "metavar": "R"},
        doc="Requests per second for the whole fleet on the key (every worker together); "
            "default: the provider's published limit, and where none is published (a "
            "self-hosted instance) the fleet discovers it: it starts at 1 request/s (or at "
            "the rate an earlier run learned on the gate), climbs while answers come back "
            "clean and settles under the rate where 429s begin. 'unlimited' (math.inf): "
            "no pacing at all.")
    concurrency: int = option(
        4, cli={"type": int, "metavar": "N"},
        doc="Requests in flight at once in this process (default 4).")
    batch_size: int | None = option(
        None, cli={"type": int, "metavar": "N"},
        doc="Queries per request for a provider with a batch endpoint (Census up to 10,000; "
            "Mapbox and ArcGIS geocodeAddresses up to 1,000); default: the provider's maximum "
            "(a larger value is cut to it); 1 turns batching off: one query per request.")
    max_attempts: int = option(
        6, cli={"type": int, "metavar": "N"},
        doc="Attempts per address on server errors and timeouts (default 6).")
    backoff: Backoff = option(
        factory=Backoff,
        doc="Jittered exponential backoff; after a 429/503 the wait is "
            "max(backoff, Retry-After capped at backoff.retry_after_cap_seconds).")
    timeout: httpx.Timeout | float | None = option(
        None, cli={"type": float, "metavar": "S"},
        doc="Seconds for each network operation (connect, each read); default 5 s to connect, "
            "20 s per read.")
    request_deadline_seconds: float = option(
        30.0, cli={"type": float, "metavar": "S"},
        doc="Total seconds for one request (connect, send and the whole body); a server that "
            "trickles its answer is a timeout, then a retry (default 30).")
    max_response_bytes: int = option(
        5_000_000, cli={"type": int, "metavar": "BYTES"},
        doc="The largest answer read (after decompression); a larger one fails its row "
            "(default 5 MB).")
    max_wait_seconds: float | None = option(
        None, cli={"type": float, "metavar": "S"},
        doc="Non-blocking mode: instead of waiting longer than this, raise RateLimitError "
            "carrying retry_after (the CLI exits 75); default: wait as long as asked.")
    cap: Cap | int | None = option(
        None, cli={"type": int, "metavar": "N"},
        doc="At most this many requests per UTC day on the key, for the whole fleet "
            "(Cap(n, 'month') for a monthly cap; Cap(n, tz='America/Los_Angeles') for a "
            "quota that resets at the provider's own midnight); reaching it stops the run; "
            "default: no cap.")
    circuit_failures: int = option(
        5, cli={"type": int, "metavar": "N"},
        doc="Consecutive transport failures (refused, reset, timed out, 5xx) that open the "
            "key's circuit for the whole fleet (default 5).")
    circuit_timeout_seconds: float = option(
        600.0, cli={"type": float, "metavar": "S"},
        doc="How long an open circuit may stay open, or a worker meet nothing but 429s and "
            "503s, before the run ends with ProviderUnavailableError (default 600).")
    clock: Clock | None = option(None, seam=True, doc="Injected time (tests).")
    transport: httpx.AsyncBaseTransport | None = option(
        None, seam=True, doc="Injected HTTP transport (tests).")
    rng: random.Random | None = option(None, seam=True, doc="Injected randomness (tests).")

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", _rate(self.rate))
        if isinstance(self.cap, int) and not isinstance(self.cap, bool):
            object.__setattr__(self, "cap", Cap(self.cap))
        elif self.cap is not None and not isinstance(self.cap, Cap):
            raise ConfigurationError(f"cap must be a whole number or a Cap, got {self.cap!r}")
        _positive_int("concurrency", self.concurrency)
        if self.batch_size is not None:
            _positive_int("batch_size", self.batch_size)
        _positive_int("max_attempts", self.max_attempts)
        _positive_int("max_response_bytes", self.max_response_bytes)
        _positive_int("circuit_failures", self.circuit_failures)
        _seconds("request_deadline_seconds", self.request_deadline_seconds, positive=True)
        _seconds("circuit_timeout_seconds", self.circuit_timeout_seconds)
        _seconds("max_wait_seconds", self.max_wait_seconds, optional=True)
        if not isinstance(self.backoff, Backoff):
            raise ConfigurationError(f"backoff must be a Backoff, got {self.backoff!r}")
        if isinstance(self.timeout, httpx.Timeout):
            for part in ("connect", "read", "write", "pool"):  # None: no limit on that part
                _seconds(f"timeout.{part}", getattr(self.timeout, part), optional=True, positive=True)
        elif self.timeout is not None:
            _seconds("timeout", self.timeout, positive=True)

    @property
    def rate_policy(self) -> RatePolicy | None:
        """``rate`` as a RatePolicy (``None``: not given)."""
        return self.rate if isinstance(self.rate, RatePolicy) else None

    @property
    def cap_rule(self) -> Cap | None:
        """``cap`` as a Cap (``None``: no cap)."""
        return self.cap if isinstance(self.cap, Cap) else None


EngineSettings.__doc__ = option_docs(EngineSettings)
