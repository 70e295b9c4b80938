"""The simulator's decisions: the state that answers a request, under one lock.

A request is parsed and looked up first, outside the lock (:func:`parse_request`: which
provider, its key, what it asks, what the world holds). Then, under the lock, in order:
an outage (reset / hang), the endpoint (404, 405), authentication (a missing or a wrong
key, for APIs that have keys), the rate limit (429), the daily cap (402), the request's
parameters (400), random 503s (``error_503_rate``), magic tokens (else the simulator-wide
``fault``; in a batch, the first row with an active token decides, and ``batch_hang_over``
hangs big uploads), and the answer. Each refusal is in the provider's own form (Google
says ``OVER_QUERY_LIMIT`` in a 200, ArcGIS an error object). Bodies are rendered later.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Final
from urllib.parse import parse_qsl, urlsplit

from geotoolkit.testing._config import (
    Config,
    OutageMode,
    RetryAfterMode,
    format_retry_after,
    quota_of,
    reset_headers,
)
from geotoolkit.testing._dialect import BadRequest, Dialect, Endpoint, ErrorKind, Incoming, Lookup
from geotoolkit.testing._places import Hit
from geotoolkit.testing._reply import TEXT, Reply, error_reply
from geotoolkit.testing._routes import route
from geotoolkit.testing._tokens import ROW_MARKERS
from geotoolkit.testing.faults import REFUNDED, SUCCEEDS, Situation, fault_reply, find_tokens
from geotoolkit.testing.limiters import Limiter, make_limiter

__all__ = ["OUTCOMES", "Config", "Decider", "Decision", "OutageMode", "Request", "RetryAfterMode",
           "parse_request"]

#: What a request came to, as logged (``SimulatedRequest.outcome``).
OUTCOMES: Final = ("ok", "fault", "outage", "missing_key", "invalid_key", "rate_limited", "quota",
                   "unavailable", "bad_request", "not_found", "method")


@dataclass(frozen=True)
class Request:
    """One request, parsed and looked up (outside the lock)."""

    method: str
    target: str
    path: str
    params: dict[str, str] = field(hash=False)
    dialect: Dialect | None = None
    endpoint: Endpoint | None = None
    key: str | None = None
    lookup: Lookup | None = None
    bad: str | None = None  #: why the provider refuses the parameters (400)
    hits: tuple[Hit | None, ...] = ()

    @property
    def provider(self) -> str | None:
        return None if self.dialect is None else self.dialect.name

    @property
    def query(self) -> str | None:
        return None if self.lookup is None else self.lookup.query

    @property
    def rows(self) -> int | None:
        """Records in a batch (``None`` for a single request)."""
        return len(self.lookup.rows) if self.lookup is not None and self.endpoint == "batch" else None


def parse_request(method: str, target: str, content_type: str = "", body: bytes = b"") -> Request:
    """Route, parse and look up one request: pure, and done before taking the lock."""
    split = urlsplit(target)
    params = dict(parse_qsl(split.query, keep_blank_values=True))
    found = route(split.path, params)
    if found is None:
        return Request(method, target, split.path, params, key=params.get("key"))
    dialect, endpoint, inner = found
    base = Request(method, target, split.path, params, dialect, endpoint, dialect.key(params))
    if endpoint == "status" or method not in dialect.methods(endpoint):
        return base
    try:
        lookup = dialect.parse(endpoint, Incoming(method, inner, params, body, content_type))
    except BadRequest as exc:
        return replace(base, bad=str(exc) or "bad request")
    return replace(base, lookup=lookup, hits=dialect.find_all(lookup))


@dataclass(frozen=True)
class Decision:
    """A reply and what the request came to (for the log)."""

    reply: Reply
    outcome: str


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

    def _seconds(self, cfg: Config, now: float, key: str | None) -> int:
        limiter = self.limiter(cfg)
        return 1 if limiter is None else limiter.check(key, now).retry_after

    def _throttled(self, cfg: Config, now: float, req: Request, kind: ErrorKind, message: str,
                   seconds: int | None = None) -> Decision:
        """A 429 or 503 in the provider's form, with its hints (Retry-After, or Mapbox's)."""
        assert req.dialect is not None
        wait = self._seconds(cfg, now, req.key) if seconds is None else seconds
        reply = req.dialect.throttle(
            req.dialect.error(kind, message), format_retry_after(cfg.retry_after, now, wait),
            now=now, seconds=wait, window_seconds=cfg.window_seconds, auto=cfg.retry_after == "auto",
            limit=quota_of(cfg))
        return Decision(self._with_reset(cfg, now, reply, wait), kind)

    @staticmethod
    def _with_reset(cfg: Config, now: float, reply: Reply, seconds: int) -> Reply:
        """A 429 without ``Retry-After`` in the ``reset-headers`` mode: the quota's reset
        in the headers that say it instead (``reset_headers``)."""
        if cfg.retry_after != "reset-headers" or reply.status != 429 or reply.retry_after:
            return reply
        return replace(reply, headers=(*reply.headers, *reset_headers(
            now, seconds, quota_of(cfg), cfg.window_seconds)))

    def decide(self, cfg: Config, now: float, req: Request, epoch: int) -> Decision:
        """The reply to ``req`` arriving at ``now`` (recorded in the limiter and counters)."""
        if cfg.outage is not None:
            dropped = Reply(0, delivery="hang", epoch=epoch) if cfg.outage == "hang" else Reply(
                0, delivery="rst", epoch=epoch)
            return Decision(dropped, "outage")
        dialect = req.dialect
        if dialect is None:
            return Decision(error_reply(404, f"no such endpoint: {req.path}"), "not_found")
        if req.endpoint == "status":
            return Decision(Reply(200, b"OK", content_type=TEXT), "ok")
        assert req.endpoint is not None
        if req.method not in dialect.methods(req.endpoint):
            allowed = " and ".join(sorted(dialect.methods(req.endpoint)))
            return Decision(dialect.error("method", f"only {allowed} here"), "method")
        return self._refusal(cfg, now, req) or self._serve(cfg, now, req)

    def _cost(self, cfg: Config, req: Request) -> int:
        rows = req.rows
        return max(1, rows) if rows is not None and cfg.batch_cost == "row" else 1

    def _refusal(self, cfg: Config, now: float, req: Request) -> Decision | None:
        dialect, key = req.dialect, req.key
        assert dialect is not None
        if cfg.valid_keys is not None and dialect.key_param is not None:
            if not key:
                message = f"missing API key (the '{dialect.key_param}' parameter)"
                return Decision(dialect.error("missing_key", message), "missing_key")
            if key not in cfg.valid_keys:
                return Decision(dialect.error("invalid_key", "invalid API key"), "invalid_key")
        cost = self._cost(cfg, req)
        limiter = self.limiter(cfg)
        if limiter is not None:
            verdict = limiter.admit(key, now, cost)
            if not verdict.admitted:
                return self._throttled(cfg, now, req, "rate_limited", "rate limit exceeded",
                                       verdict.retry_after)
        if cfg.daily_cap is not None and self._successes.get(key, 0) + cost > cfg.daily_cap:
            message = f"daily quota of {cfg.daily_cap} requests exhausted"
            return Decision(dialect.error("quota", message), "quota")
        return None

    def _serve(self, cfg: Config, now: float, req: Request) -> Decision:
        dialect = req.dialect
        assert dialect is not None and req.endpoint is not None
        if req.bad is not None or req.lookup is None:
            return Decision(dialect.error("bad_request", req.bad or "bad request"), "bad_request")
        if cfg.error_503_rate > 0 and self._rng.random() < cfg.error_503_rate:
            return self._throttled(cfg, now, req, "unavailable", "service unavailable")
        fault = self._batch_fault(req) if req.endpoint == "batch" else self._active_token(
            req.query or "", req.lookup.row.raw)
        fault = fault or cfg.fault
        answer = dialect.answer(req.lookup, req.hits)
        cost = self._cost(cfg, req)
        if fault is None:
            self._count_success(req.key, cost)
            rows = req.rows or 0
            if cfg.batch_hang_over is not None and rows > cfg.batch_hang_over:
                return Decision(Reply(answer.status, render=answer.render, hang_seconds=cfg.hang_seconds,
                                      content_type=answer.content_type), "ok")
            return Decision(Reply(answer.status, render=answer.render,
                                  content_type=answer.content_type), "ok")
        limiter = self.limiter(cfg)
        if fault in REFUNDED and limiter is not None:
            limiter.refund(req.key)  # a scripted 429 never counts toward the limit
        if fault in SUCCEEDS:
            self._count_success(req.key, cost)
        wait = self._seconds(cfg, now, req.key)
        situation = Situation(
            answer=answer, target=req.target, params=req.params,
            retry_after=format_retry_after(cfg.retry_after, now, wait),
            hang_seconds=cfg.hang_seconds,
            trickle_interval_seconds=cfg.trickle_interval_seconds,
            trickle_chunk_bytes=cfg.trickle_chunk_bytes, huge_body_bytes=cfg.huge_body_bytes,
            error=lambda status, message, retry_after: self._with_reset(cfg, now, replace(
                dialect.error("status", message, status), retry_after=retry_after), wait),
            in_body_error=dialect.in_body_error())
        return Decision(fault_reply(fault, situation), "fault")

    def _batch_fault(self, req: Request) -> str | None:
        """The first row with an active token decides the whole batch's fault."""
        assert req.lookup is not None
        for row in req.lookup.rows:
            fault = self._active_token(row.query or "", row.raw)
            if fault is not None:
                return fault
        return None

    def _count_success(self, key: str | None, cost: int = 1) -> None:
        self._successes[key] = self._successes.get(key, 0) + cost

    def _active_token(self, query: str, raw: str) -> str | None:
        tokens = [t for t in find_tokens(raw) if t.name not in ROW_MARKERS]
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
