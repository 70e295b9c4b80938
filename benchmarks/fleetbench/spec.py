"""What the benchmark runs: the limiters, the cells of the matrix, row counts and targets.

A *cell* is one limiter, one gate, K workers, the fleet's configured rate (the real
limit times ``overclaim``) and, optionally, an uncoordinated other client taking
``other_share`` of the limit on the same key. Row counts are chosen so that every cell
lasts long enough to reach a steady state (see ``default_rows``); measured at 300 rows,
the K = 16 matrix on three gates with the reference takes about 24 minutes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "ALL_LIMITERS",
    "HAPROXY_LIMITERS",
    "LIMITERS",
    "NGINX_LIMITERS",
    "TRAEFIK_LIMITERS",
    "CellSpec",
    "LimiterSpec",
    "Target",
    "default_rows",
    "limiter_names",
    "target_of",
]


@dataclass(frozen=True)
class LimiterSpec:
    """One real-world limiter, enforced by the simulator or by a proxy in front of it (nginx,
    HAProxy, Traefik)."""

    name: str  #: the id on the command line and in JSON
    label: str  #: in tables and docs
    limiter: str | None = None  #: the simulator's ``limiter=`` (None: a proxy limits)
    window_seconds: float = 1.0
    burst: int | None = None
    nginx_burst: int | None = None  #: nginx ``limit_req ... burst=`` (None: not nginx)
    nginx_status: int | None = 429  #: nginx ``limit_req_status`` (None: its default, 503)
    nginx_nodelay: bool = True  #: nginx ``nodelay`` (False: the burst is queued, delayed)
    nginx_retry_after: int | None = None  #: nginx's 429 with ``Retry-After`` (None: none)
    haproxy: bool = False  #: HAProxy's ``http_req_rate`` over a second
    traefik_burst: int | None = None  #: Traefik ``rateLimit`` ``burst`` (None: not Traefik)

    @property
    def nginx(self) -> bool:
        return self.nginx_burst is not None

    @property
    def proxy(self) -> str | None:
        """The proxy that limits (``None``: the simulator does)."""
        if self.traefik_burst is not None:
            return "traefik"
        return "nginx" if self.nginx else "haproxy" if self.haproxy else None

    @property
    def aligned(self) -> bool:
        """A calendar window longer than a second: the simulator's clock is offset so that
        the first request of a cell arrives exactly at the start of a window (as a cron
        job starting at :00 does), so every cell sees the same window edges."""
        return self.limiter == "fixed-window" and self.window_seconds > 1.0

    def simulator_settings(self, rate: float) -> dict[str, Any]:
        """``ProviderSimulator`` settings (a proxy's cells: the simulator does not limit)."""
        if self.limiter is None:
            return {"rate_limit": None}
        return {"rate_limit": rate, "limiter": self.limiter,
                "window_seconds": self.window_seconds, "burst": self.burst}


LIMITERS: dict[str, LimiterSpec] = {spec.name: spec for spec in (
    LimiterSpec("gcra-b1", "leaky bucket burst 1", "gcra", burst=1),
    LimiterSpec("gcra-b0", "leaky bucket burst 0", "gcra", burst=0),
    LimiterSpec("token", "token bucket (capacity = rate)", "token-bucket"),
    LimiterSpec("fixed-1s", "fixed window per second", "fixed-window", window_seconds=1.0),
    LimiterSpec("fixed-60s", "fixed window per minute", "fixed-window", window_seconds=60.0),
    LimiterSpec("sliding-log", "sliding log (1 s)", "sliding-log", window_seconds=1.0),
)}

NGINX_LIMITERS: dict[str, LimiterSpec] = {spec.name: spec for spec in (
    LimiterSpec("nginx-b1", "nginx limit_req burst=1 nodelay", nginx_burst=1),
    LimiterSpec("nginx-b0", "nginx limit_req (burst 0)", nginx_burst=0),
    # As a gateway configured to say when to come back: the 429 carries Retry-After: 1,
    # as the simulator's leaky bucket and Traefik answer.
    LimiterSpec("nginx-ra-b0", "nginx limit_req (burst 0), 429 with Retry-After: 1",
                nginx_burst=0, nginx_retry_after=1),
    # As nginx ships: no limit_req_status, so a refusal is its 503 page, no Retry-After.
    LimiterSpec("nginx503-b0", "nginx limit_req (burst 0), its default 503", nginx_burst=0,
                nginx_status=None),
    LimiterSpec("nginx503-b5", "nginx limit_req burst=5 nodelay, its default 503", nginx_burst=5,
                nginx_status=None),
    # burst without nodelay: up to 5 requests ahead of the rate wait in nginx's queue.
    LimiterSpec("nginx-delay5", "nginx limit_req burst=5 (delayed, not nodelay)", nginx_burst=5,
                nginx_nodelay=False),
    LimiterSpec("nginx503-delay5", "nginx limit_req burst=5 (delayed), its default 503",
                nginx_burst=5, nginx_status=None, nginx_nodelay=False),
)}

HAPROXY_LIMITERS: dict[str, LimiterSpec] = {spec.name: spec for spec in (
    LimiterSpec("haproxy", "HAProxy http_req_rate(1s), refused requests count", haproxy=True),
)}
TRAEFIK_LIMITERS: dict[str, LimiterSpec] = {spec.name: spec for spec in (
    # Traefik's default burst (1), per client address: a token bucket of one token that
    # holds a request up to 1/(2R) for its token, else 429 with Retry-After and X-Retry-In.
    LimiterSpec("traefik-b1", "Traefik rateLimit (burst 1, per IP)", traefik_burst=1),
)}
#: Every limiter by name: the simulator's, nginx's, HAProxy's and Traefik's.
ALL_LIMITERS: dict[str, LimiterSpec] = {**LIMITERS, **NGINX_LIMITERS, **HAPROXY_LIMITERS,
                                        **TRAEFIK_LIMITERS}


def limiter_names(text: str) -> list[str]:
    """The limiters a comma-separated ``--limiters`` names; ``ValueError`` for any unknown.

    >>> limiter_names("gcra-b0, nginx-ra-b0,")
    ['gcra-b0', 'nginx-ra-b0']
    >>> limiter_names("gcra-b9")
    Traceback (most recent call last):
    ...
    ValueError: unknown limiters: gcra-b9
    """
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in ALL_LIMITERS]
    if unknown:
        raise ValueError(f"unknown limiters: {', '.join(unknown)}")
    return names


@dataclass(frozen=True)
class CellSpec:
    """One cell of the matrix (``k == 0``: the plain reference pacer, no gate)."""

    limiter: LimiterSpec
    gate: str
    k: int
    rows: int
    rate: float = 10.0
    overclaim: float = 1.0
    other_share: float = 0.0
    warm: bool = False

    @property
    def reference(self) -> bool:
        return self.k == 0

    @property
    def configured(self) -> float:
        """The rate the fleet is told (requests/s for the whole fleet)."""
        return self.rate * self.overclaim

    @property
    def share_left(self) -> float:
        """The rate the fleet can have: the limit less the other client's share."""
        return self.rate * (1.0 - self.other_share)

    @property
    def variant(self) -> str:
        parts = ["warm" if self.warm else "cold"]
        if self.overclaim != 1.0:
            parts.append(f"overclaim {self.overclaim:g}x")
        if self.other_share:
            parts.append(f"other {self.other_share:.0%}")
        return ", ".join(parts)


def default_rows(limiter: LimiterSpec, k: int, other_share: float, rate: float) -> int:
    """Rows per cell (at R = 10/s: about 10 s of work for K = 1 and 4, 30 s for K = 16
    and the reference: 300 rows, the size of the issue's own trial, so that one pause of
    a second, which a no-burst limiter's ``Retry-After: 1`` costs, weighs as it did there).

    The fixed window per minute is the exception at K = 16 and for the reference: 65 s
    of work at the limit (650 rows at R = 10), so that a full window of quota is at stake
    and the run crosses a window edge (at 60 s, the cell being aligned). At K = 1 and 4
    it gets the short runs like the others, which cross no edge. With another client,
    the fleet's share is smaller and the row count shrinks with it (same duration),
    except on the per-minute window: there the fleet runs at its own pace until the
    minute's quota runs out, so it keeps its 650 rows (fewer would end before the
    quota binds).
    """
    seconds = 30.0 if k in (0, 16) else 10.0
    if limiter.aligned and k in (0, 16):
        return max(10, round((limiter.window_seconds + 5.0) * rate))
    return max(10, round(seconds * rate * (1.0 - other_share)))


@dataclass(frozen=True)
class Target:
    """The issue's target for a cell: utilisation at least, 429s per success at most."""

    util_min: float
    per_ok_max: float | None
    edge_429_max: int | None = None  #: the fixed window per minute: no storm at the edge

    def describe(self) -> str:
        text = f"util >= {self.util_min:.2f}"
        if self.per_ok_max is not None:
            text += f", 429/ok <= {self.per_ok_max:g}"
        if self.edge_429_max is not None:
            text += f", edge 429s <= {self.edge_429_max}"
        return text


def target_of(cell: CellSpec) -> Target | None:
    """The issue's target for K = 16 cold cells (``None``: no target for this cell).

    Every cell must also lose no row and send nothing inside a published pause.
    """
    if cell.k != 16 or cell.warm:
        return None
    if cell.other_share:
        return Target(0.85, 0.05)  # of the share left
    if cell.overclaim != 1.0:
        return Target(0.93, 0.03)
    name = cell.limiter.name
    if name in ("gcra-b1", "nginx-b1"):
        return Target(0.98, 0.005)
    if name in ("gcra-b0", "nginx-b0", "nginx-ra-b0"):
        return Target(0.93, 0.02)
    if name == "fixed-60s":
        return Target(0.97, None, edge_429_max=0)
    return None
