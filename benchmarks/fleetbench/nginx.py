"""A real nginx ``limit_req`` on loopback, in front of the provider simulator.

Started from a generated configuration in a temporary directory, bound to 127.0.0.1
only, in the foreground (``daemon off``), stopped at the end of the block. The zone is
keyed on the API key (``$arg_key``), at the cell's rate, with ``burst=B nodelay`` (or
no burst), answering 429 (nginx sends no ``Retry-After``). Its access log, written
unbuffered, is the limiter's own record of every request: arrival time (``$msec``
less ``$request_time``, millisecond resolution), status, key and address.

Install it with ``apt-get install -y nginx-light`` (Debian; ``nginx`` works too).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import unquote_plus

__all__ = ["Nginx", "NginxMissing", "nginx_binary"]

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
    log_format bench '$msec $request_time $status $arg_key $arg_q';
    limit_req_zone $arg_key zone=bench:1m rate={rate};
    limit_req_status 429;
    upstream simulator {{ server 127.0.0.1:{upstream}; keepalive 32; }}
    server {{
        listen 127.0.0.1:{port};
        access_log {dir}/access.log bench;
        location / {{
            limit_req zone=bench{burst} nodelay;
            proxy_pass http://simulator;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
        }}
    }}
}}
"""


class NginxMissing(RuntimeError):
    """nginx is not installed."""


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _rate(rate: float) -> str:
    """nginx takes whole requests per second or per minute."""
    return f"{rate:g}r/s" if float(rate).is_integer() else f"{round(rate * 60)}r/m"


class Nginx:
    """nginx in front of ``127.0.0.1:upstream``, limiting each key to ``rate`` with ``burst``."""

    def __init__(self, upstream: int, rate: float, burst: int, workdir: Path) -> None:
        binary = nginx_binary()
        if binary is None:
            raise NginxMissing("nginx is not installed (apt-get install -y nginx-light)")
        self.binary, self.port = binary, _free_port()
        self.dir = workdir / f"nginx-{self.port}"
        (self.dir / "tmp").mkdir(parents=True)
        self.dir.chmod(0o755)
        self.config = self.dir / "nginx.conf"
        self.config.write_text(_CONFIG.format(
            dir=self.dir, rate=_rate(rate), upstream=upstream, port=self.port,
            burst=f" burst={burst}" if burst else ""))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Nginx:
        self.process = subprocess.Popen(
            [self.binary, "-p", str(self.dir), "-e", str(self.dir / "error.log"), "-c", str(self.config)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10.0
        while True:  # a server's readiness has no event to wait on: try to connect
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited: {self.process.stderr.read().decode()[-500:]}"
                                   if self.process.stderr else "nginx exited")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.__exit__(None, None, None)
                    raise RuntimeError("nginx did not start listening within 10 s") from None
                time.sleep(0.05)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: fast shutdown
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self, key: str) -> list[tuple[float, int, str]]:
        """``(arrival, status, address)`` of every request with ``key``, in arrival order."""
        path = self.dir / "access.log"
        rows = []
        for line in path.read_text().splitlines() if path.exists() else []:
            parts = line.split(" ", 4)
            if len(parts) == 5 and parts[3] == key:
                rows.append((float(parts[0]) - float(parts[1]), int(parts[2]), unquote_plus(parts[4])))
        return sorted(rows)
