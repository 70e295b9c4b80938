"""A real rate-limiting proxy on loopback, in front of the provider simulator.

What nginx and HAProxy share: a configuration generated into a temporary directory, a
server bound to 127.0.0.1 only and run in the foreground, ready once it accepts a
connection, stopped at the end of the block; its access log is the limiter's own record of
every request (arrival time, status, key, address). Subclasses write the configuration,
the command line and the log format (``nginx``, ``haproxy``).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import IO
from urllib.parse import unquote_plus

__all__ = ["Proxy", "ProxyMissing", "binary", "free_port", "parse_log"]


class ProxyMissing(RuntimeError):
    """The proxy is not installed."""


def binary(name: str) -> str | None:
    """The proxy's executable: on the PATH, else where Debian puts it."""
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/local/sbin/{name}") if Path(p).exists()), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def parse_log(lines: list[str], key: str) -> list[tuple[float, int, str]]:
    """``(arrival, status, address)`` of ``key``'s requests from log lines of the form
    ``ARRIVAL STATUS KEY QUERY`` (arrival in seconds, the query still URL-encoded), in
    arrival order; other lines are skipped.

    >>> parse_log(["1.5 200 k a+b", "1.25 429 k c%2Cd", "1.0 200 other x", "junk"], "k")
    [(1.25, 429, 'c,d'), (1.5, 200, 'a b')]
    """
    rows = []
    for line in lines:
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[2] == key:
            try:
                rows.append((float(parts[0]), int(parts[1]), unquote_plus(parts[3])))
            except ValueError:
                continue
    return sorted(rows)


class Proxy:
    """A proxy in front of ``127.0.0.1:upstream`` (the simulator), limiting each key."""

    name = "proxy"
    package = ""  #: the Debian package that installs it

    def __init__(self, upstream: int, workdir: Path) -> None:
        found = binary(self.name)
        if found is None:
            raise ProxyMissing(f"{self.name} is not installed (apt-get install -y {self.package})")
        self.binary, self.upstream, self.port = found, upstream, free_port()
        self.dir = workdir / f"{self.name}-{self.port}"
        (self.dir / "tmp").mkdir(parents=True)
        self.dir.chmod(0o755)
        self.process: subprocess.Popen[bytes] | None = None
        self._stdout: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def stdout_path(self) -> Path | None:
        """Where the proxy's standard output goes (``None``: nowhere)."""
        return None

    @staticmethod
    def arrival_first(line: str) -> str:
        """One line of the access log as ``ARRIVAL STATUS KEY QUERY`` (see ``parse_log``)."""
        return line

    def log(self, key: str) -> list[tuple[float, int, str]]:
        """``(arrival, status, address)`` of every request with ``key``, in arrival order
        (from ``access.log`` in the proxy's directory)."""
        path = self.dir / "access.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return parse_log([self.arrival_first(line) for line in lines], key)

    def __enter__(self) -> Proxy:
        path = self.stdout_path()
        self._stdout = None if path is None else path.open("wb")
        self.process = subprocess.Popen(
            self.command(), stdout=self._stdout or subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10.0
        while True:  # a server's readiness has no event to wait on: try to connect
            if self.process.poll() is not None:
                error = self.process.stderr.read().decode()[-500:] if self.process.stderr else ""
                self.__exit__(None, None, None)
                raise RuntimeError(f"{self.name} exited: {error}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.__exit__(None, None, None)
                    raise RuntimeError(f"{self.name} did not start listening within 10 s") from None
                time.sleep(0.05)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: a fast stop, the log written
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._stdout is not None:
            self._stdout.close()
            self._stdout = None
