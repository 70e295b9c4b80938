"""A real HAProxy rate limit on loopback, in front of the provider simulator.

The recipe most HAProxy deployments use to limit an API key: a stick table keyed on the
key (``url_param(key)``) storing ``http_req_rate`` over one second, every request tracked
(refused ones count too), and ``deny deny_status 429`` once the rate is over the limit.
HAProxy's rate is not a log of instants nor a bucket: it keeps the count of the current
period and of the previous one and reads ``current + previous x (the share of the
period still to run)``, a sliding window approximated from two fixed ones (the scheme
many gateways and CDNs use). It sends no ``Retry-After`` (as nginx, the client falls back
on its backoff).

Started from a generated configuration in a temporary directory, bound to 127.0.0.1
only, in the foreground (``-db``); its log goes to standard output (``log stdout``), one
line per request: the instant its headers were read, its key and address (captured in
variables when the request is processed: a log line is written after the response, when
the request is gone; the instant in milliseconds) and its status.

Install it with ``apt-get install -y haproxy`` (Debian).
"""

from __future__ import annotations

from pathlib import Path

from fleetbench.proxy import Proxy, binary

__all__ = ["HAProxy", "haproxy_binary"]

_CONFIG = """\
global
    log stdout format raw local0
    maxconn 1024
defaults
    mode http
    log global
    option http-keep-alive
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
frontend bench
    bind 127.0.0.1:{port}
    stick-table type string len 128 size 10k expire 120s store http_req_rate({period})
    http-request set-var(txn.arrival) date(0,ms)
    http-request set-var(txn.key) url_param(key)
    http-request set-var(txn.q) url_param(q)
    http-request track-sc0 url_param(key)
    http-request deny deny_status 429 if {{ sc_http_req_rate(0) gt {limit} }}
    log-format "%[var(txn.arrival)] %ST %[var(txn.key)] %[var(txn.q)]"
    default_backend simulator
backend simulator
    http-reuse always
    server simulator 127.0.0.1:{upstream}
"""


def haproxy_binary() -> str | None:
    return binary("haproxy")


def _limit(rate: float) -> tuple[str, int]:
    """HAProxy counts whole requests over a period: per second, else per minute.

    >>> _limit(10.0), _limit(0.5)
    (('1s', 10), ('60s', 30))
    """
    return ("1s", int(rate)) if float(rate).is_integer() else ("60s", round(rate * 60))


class HAProxy(Proxy):
    """HAProxy in front of ``127.0.0.1:upstream``, each key limited to ``rate`` requests
    over a sliding second (two fixed ones, weighted)."""

    name, package = "haproxy", "haproxy"

    def __init__(self, upstream: int, rate: float, workdir: Path) -> None:
        super().__init__(upstream, workdir)
        period, limit = _limit(rate)
        self.config = self.dir / "haproxy.cfg"
        self.config.write_text(_CONFIG.format(port=self.port, upstream=upstream, period=period,
                                              limit=limit))

    def command(self) -> list[str]:
        return [self.binary, "-db", "-f", str(self.config)]

    def stdout_path(self) -> Path:
        return self.dir / "access.log"

    @staticmethod
    def arrival_first(line: str) -> str:
        """A log line with its arrival in seconds (HAProxy logs milliseconds).

        >>> HAProxy.arrival_first("1700000000123 429 k q")
        '1700000000.123 429 k q'
        """
        head, _, rest = line.partition(" ")
        return f"{int(head) / 1000:.3f} {rest}" if head.isdigit() else line
