"""A real nginx ``limit_req`` on loopback, in front of the provider simulator (or of a
real Nominatim, ``benchmarks/nominatim_fleet.py``).

Started from a generated configuration in a temporary directory, bound to 127.0.0.1
only, in the foreground (``daemon off``), stopped at the end of the block. The zone is
keyed on the API key (``$arg_key``; or another variable, ``zone_key``), at the cell's
rate, with ``burst=B nodelay`` (or no burst), answering 429 (nginx sends no
``Retry-After``; with ``retry_after``, a named location answers the refusal with one).
Its access log, written unbuffered, is the limiter's own record of every request:
arrival time (``$msec`` less ``$request_time``, millisecond resolution), status, key and
address.

Install it with ``apt-get install -y nginx-light`` (Debian; ``nginx`` works too).
"""

from __future__ import annotations

from pathlib import Path

from fleetbench.proxy import Proxy, binary

__all__ = ["Nginx", "configuration", "nginx_binary"]

_CONFIG = """\
daemon off;
master_process on;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    log_format bench '$msec $request_time $status {zone_key} $arg_q';
    limit_req_zone {zone_key} zone=bench:1m rate={rate};
{status}    upstream simulator {{ server 127.0.0.1:{upstream}; keepalive 32; }}
    server {{
        listen 127.0.0.1:{port};
        access_log {dir}/access.log bench;
        location / {{
            limit_req zone=bench{burst}{nodelay};
            proxy_pass http://simulator;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
        }}
{refused}    }}
}}
"""

#: With ``retry_after``: the refusal is answered from a named location that adds the header
#: (``add_header`` in the proxied location would not reach nginx's own error pages).
_REFUSED = """        error_page {status} = @refused;
        location @refused {{
            default_type application/json;
            add_header Retry-After {seconds} always;
            return {status} '{{"error": "rate limited"}}';
        }}
"""


def nginx_binary() -> str | None:
    return binary("nginx")


def _rate(rate: float) -> str:
    """nginx takes whole requests per second or per minute."""
    return f"{rate:g}r/s" if float(rate).is_integer() else f"{round(rate * 60)}r/m"


def configuration(directory: Path, rate: float, upstream: int, port: int, burst: int,
                  zone_key: str = "$arg_key", *, status: int | None = 429, nodelay: bool = True,
                  retry_after: int | None = None) -> str:
    """The configuration of an nginx in ``directory`` (see ``Nginx``).

    >>> text = configuration(Path("/x"), 10.0, 8000, 8001, 0, retry_after=1)
    >>> "limit_req zone=bench nodelay;" in text, "limit_req_status 429;" in text
    (True, True)
    >>> for line in text.splitlines()[text.splitlines().index("        error_page 429 = @refused;"):][:6]:
    ...     print(line.strip())
    error_page 429 = @refused;
    location @refused {
    default_type application/json;
    add_header Retry-After 1 always;
    return 429 '{"error": "rate limited"}';
    }
    >>> "@refused" in configuration(Path("/x"), 10.0, 8000, 8001, 1)
    False
    """
    refused = (_REFUSED.format(status=status or 503, seconds=retry_after)
               if retry_after is not None else "")
    return _CONFIG.format(
        dir=directory, rate=_rate(rate), upstream=upstream, port=port, zone_key=zone_key,
        burst=f" burst={burst}" if burst else "", nodelay=" nodelay" if nodelay else "",
        status=f"    limit_req_status {status};\n" if status else "", refused=refused)


class Nginx(Proxy):
    """nginx in front of ``127.0.0.1:upstream``, limiting each key to ``rate`` with ``burst``.

    ``zone_key``: what a key is, an nginx variable (``$arg_key``: the API key parameter;
    ``$remote_addr``: each client address, for a provider without keys such as Nominatim).
    ``status``: the refusal's status (``None``: nginx's default, 503, an HTML page);
    ``nodelay=False``: requests within the burst are delayed (queued) to the rate, not
    passed at once; only those beyond it are refused. ``retry_after``: the refusal carries
    ``Retry-After`` with these seconds, as gateways configured to send one do (nginx itself
    sends none).
    """

    name, package = "nginx", "nginx-light"

    def __init__(self, upstream: int, rate: float, burst: int, workdir: Path,
                 zone_key: str = "$arg_key", *, status: int | None = 429,
                 nodelay: bool = True, retry_after: int | None = None) -> None:
        super().__init__(upstream, workdir)
        self.config = self.dir / "nginx.conf"
        self.config.write_text(configuration(
            self.dir, rate, upstream, self.port, burst, zone_key, status=status,
            nodelay=nodelay, retry_after=retry_after))

    def command(self) -> list[str]:
        return [self.binary, "-p", str(self.dir), "-e", str(self.dir / "error.log"), "-c", str(self.config)]

    @staticmethod
    def arrival_first(line: str) -> str:
        """An access log line with its arrival (``$msec`` less ``$request_time``) first.

        >>> Nginx.arrival_first("100.250 0.050 200 k q")
        '100.2000 200 k q'
        """
        parts = line.split(" ", 2)
        try:
            return f"{float(parts[0]) - float(parts[1]):.4f} {parts[2]}"
        except (ValueError, IndexError):
            return line
