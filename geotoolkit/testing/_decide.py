"""The simulator's decisions: one frozen configuration, and the state that answers a request.

Order of checks for ``/search``: an outage (reset / hang), authentication (401 missing key,
403 wrong key), rate limit (429), daily cap (402), parameters (400), random 503
(``error_503_rate``), magic tokens (else the simulator-wide ``fault``), answer. Everything
here runs under the simulator's lock, at arrival; bodies are rendered afterwards.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Final, Literal, get_args
from urllib.parse import parse_qsl, urlsplit

from geotoolkit.testing._places import NOMINATIM_FIELDS, query_repr
from geotoolkit.testing._reply import TEXT, Answer, Reply, error_reply
from geotoolkit.testing.faults import (
    REFUNDED,
    SUCCEEDS,
    Situation,
    fault_reply,
    find_tokens,
    parse_fault,
)
from geotoolkit.testing.limiters import LIMITERS, Limiter, LimiterName, make_limiter

__all__ = ["Config", "Decider", "OutageMode", "Request", "RetryAfterMode", "parse_target"]

#: ``retry_after`` configuration: a mode, or a fixed delta-seconds value.
RetryAfterMode = Literal["auto", "http-date", "missing"] | int

#: A whole-server outage: refuse connections, reset them, or accept and never answer.
OutageMode = Literal["refuse", "reset", "hang"]

_SEARCH_PATHS: Final = frozenset({"/search", "/search.php"})
_STATUS_PATHS: Final = frozenset({"/status", "/status.php"})
_FORMATS: Final = frozenset({"jsonv2", "json"})


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class Config:
    """Every setting of a simulator; replaced whole on each change (from any thread)."""

    rate_limit: float | None
    window_seconds: float
    retry_after: RetryAfterMode
    latency_seconds: float
    error_503_rate: float
    valid_keys: frozenset[str] | None
    daily_cap: int | None
    hang_seconds: float
    clock: Callable[[], float]
    limiter: LimiterName = "sliding-window"
    burst: int | None = None
    fault: str | None = None
    trickle_interval_seconds: float = 0.5
    trickle_chunk_bytes: int = 16
    huge_body_bytes: int = 50_000_000
    outage: OutageMode | None = None

    def __post_init__(self) -> None:
        if self.rate_limit is not None:
            _positive("rate_limit", self.rate_limit)
        _positive("window_seconds", self.window_seconds)
        ra = self.retry_after
        if isinstance(ra, bool) or not (
            (isinstance(ra, int) and ra >= 0) or ra in ("auto", "http-date", "missing")
        ):
            raise ValueError(
                "retry_after must be 'auto', 'http-date', 'missing' or a non-negative int, "
                f"got {ra!r}"
            )
        if not self.latency_seconds >= 0:
            raise ValueError(f"latency_seconds must be >= 0, got {self.latency_seconds!r}")
        if not 0 <= self.error_503_rate <= 1:
            raise ValueError(f"error_503_rate must be in [0, 1], got {self.error_503_rate!r}")
        if self.daily_cap is not None and self.daily_cap < 0:
            raise ValueError(f"daily_cap must be >= 0 or None, got {self.daily_cap!r}")
        if not self.hang_seconds >= 0:
            raise ValueError(f"hang_seconds must be >= 0, got {self.hang_seconds!r}")
        if not callable(self.clock):
            raise ValueError("clock must be callable")
        self._check_new_settings()

    def _check_new_settings(self) -> None:
        if self.limiter not in LIMITERS:
            raise ValueError(f"limiter must be one of {sorted(LIMITERS)}, got {self.limiter!r}")
        burst = self.burst
        if burst is not None and (isinstance(burst, bool) or not isinstance(burst, int) or burst < 0):
            raise ValueError(f"burst must be a whole number >= 0 or None, got {burst!r}")
        if self.fault is not None:
            object.__setattr__(self, "fault", parse_fault(self.fault))
        _positive("trickle_interval_seconds", self.trickle_interval_seconds)
        for name in ("trickle_chunk_bytes", "huge_body_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        if self.outage is not None and self.outage not in get_args(OutageMode):
            raise ValueError(f"outage must be one of {get_args(OutageMode)} or None, got {self.outage!r}")


@dataclass(frozen=True)
class Request:
    """One request target, parsed (outside the lock)."""

    target: str
    path: str
    params: dict[str, str] = field(hash=False)
    key: str | None
    text: str | None
    structured: dict[str, str] = field(hash=False)
    query: str | None  #: normalised free text, or ``street=…|city=…``


def parse_target(target: str) -> Request:
    """Parse ``/search?q=…&key=…`` as the simulator sees it."""
    split = urlsplit(target)
    params = dict(parse_qsl(split.query, keep_blank_values=True))
    text = params.get("q")
    structured = {k: params[k] for k in NOMINATIM_FIELDS if params.get(k, "").strip()}
    return Request(target, split.path, params, params.get("key"), text, structured,
                   query_repr(text, structured))


def format_retry_after(mode: RetryAfterMode, now: float, seconds: int) -> str | None:
    """The header for ``mode``: ``seconds`` is what the limiter would say (``auto``)."""
    if mode == "missing":
        return None
    if isinstance(mode, int):
        return str(mode)
    if mode == "auto":
        return str(seconds)
    return formatdate(now + seconds, usegmt=True)


class Decider:
    """The mutable side of the simulator: limiter state, daily counts, token counts, RNG."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._limiter: Limiter | None = None
        self.reset()

    def reset(self) -> None:
        if self._limiter is not None:
            self._limiter.clear()
        self._successes: dict[str | None, int] = {}
        self._query_counts: dict[str, int] = {}
        self._rng = random.Random(self._seed)

    def limiter(self, cfg: Config) -> Limiter | None:
        """The limiter for ``cfg`` (kept across parameter changes; new when its kind changes)."""
        if cfg.rate_limit is None:
            return None
        current = self._limiter
        if current is None or current.name != cfg.limiter:
            current = self._limiter = make_limiter(
                cfg.limiter, cfg.rate_limit, window_seconds=cfg.window_seconds, burst=cfg.burst)
        elif (current.rate, current.window_seconds, current.burst) != (
                cfg.rate_limit, cfg.window_seconds, cfg.burst):
            current.configure(cfg.rate_limit, window_seconds=cfg.window_seconds, burst=cfg.burst)
        return current

    def _retry_after(self, cfg: Config, now: float, key: str | None) -> str | None:
        limiter = self.limiter(cfg)
        seconds = 1 if limiter is None else limiter.check(key, now).retry_after
        return format_retry_after(cfg.retry_after, now, seconds)

    def decide(self, cfg: Config, now: float, req: Request, epoch: int) -> Reply:
        """The reply to ``req`` arriving at ``now`` (recorded in the limiter and counters)."""
        if cfg.outage is not None:
            return Reply(0, delivery="hang" if cfg.outage == "hang" else "rst", epoch=epoch)
        if req.path in _STATUS_PATHS:
            return Reply(200, b"OK", content_type=TEXT)
        if req.path not in _SEARCH_PATHS:
            return error_reply(404, f"no such endpoint: {req.path}")
        return self._search(cfg, now, req)

    def _refusal(self, cfg: Config, now: float, req: Request) -> Reply | None:
        key = req.key
        if cfg.valid_keys is not None:
            if not key:
                return error_reply(401, "missing API key (the 'key' parameter)")
            if key not in cfg.valid_keys:
                return error_reply(403, "invalid API key")
        limiter = self.limiter(cfg)
        if limiter is not None:
            verdict = limiter.admit(key, now)
            if not verdict.admitted:
                header = format_retry_after(cfg.retry_after, now, verdict.retry_after)
                return error_reply(429, "rate limit exceeded", header)
        if cfg.daily_cap is not None and self._successes.get(key, 0) >= cfg.daily_cap:
            return error_reply(402, f"daily quota of {cfg.daily_cap} requests exhausted")
        return None

    @staticmethod
    def _bad_parameters(req: Request) -> Reply | None:
        fmt = req.params.get("format", "jsonv2")
        if fmt not in _FORMATS:
            return error_reply(400, f"unsupported format {fmt!r}: use 'jsonv2' or 'json'")
        limit = req.params.get("limit")
        if limit is not None and not limit.strip().lstrip("-").isdigit():
            return error_reply(400, f"parameter 'limit' must be an integer, got {limit!r}")
        has_text = req.text is not None and bool(req.text.strip())
        if has_text and req.structured:
            return error_reply(400, "structured query parameters can not be used together with 'q'")
        if not has_text and not req.structured:
            return error_reply(400, "nothing to search for: give 'q' or structured parameters")
        return None

    def _search(self, cfg: Config, now: float, req: Request) -> Reply:
        refused = self._refusal(cfg, now, req) or self._bad_parameters(req)
        if refused is not None:
            return refused
        if cfg.error_503_rate > 0 and self._rng.random() < cfg.error_503_rate:
            return error_reply(503, "service unavailable", self._retry_after(cfg, now, req.key))
        has_text = req.text is not None and bool(req.text.strip())
        answer = Answer(
            text=req.text if has_text else None,
            structured={} if has_text else req.structured,
            fmt=req.params.get("format", "jsonv2"),
            addressdetails=req.params.get("addressdetails", "1").strip() not in ("0", "false"),
            countrycodes=req.params.get("countrycodes"),
        )
        raw = req.text if req.text is not None and has_text else " ".join(req.structured.values())
        fault = self._active_token(req.query or "", raw) or cfg.fault
        if fault is None:
            self._count_success(req.key)
            return Reply(200, render=answer.render)
        return self._fault(cfg, now, req, fault, answer)

    def _fault(self, cfg: Config, now: float, req: Request, name: str, answer: Answer) -> Reply:
        limiter = self.limiter(cfg)
        if name in REFUNDED and limiter is not None:
            limiter.refund(req.key)  # a scripted 429 never counts toward the limit
        if name in SUCCEEDS:
            self._count_success(req.key)
        situation = Situation(
            answer=answer,
            target=req.target,
            params=req.params,
            retry_after=self._retry_after(cfg, now, req.key),
            hang_seconds=cfg.hang_seconds,
            trickle_interval_seconds=cfg.trickle_interval_seconds,
            trickle_chunk_bytes=cfg.trickle_chunk_bytes,
            huge_body_bytes=cfg.huge_body_bytes,
        )
        return fault_reply(name, situation)

    def _count_success(self, key: str | None) -> None:
        self._successes[key] = self._successes.get(key, 0) + 1

    def _active_token(self, query: str, raw: str) -> str | None:
        tokens = find_tokens(raw)
        if not tokens:
            return None
        n = self._query_counts.get(query, 0) + 1
        self._query_counts[query] = n
        offset = 0
        for token in tokens:
            if token.times is None or n <= offset + token.times:
                return token.name
            offset += token.times
        return None
