"""A local Prefect API server for the Prefect recipe test, started early and in the background.

Running a Prefect 3 flow needs an API server, and starting one (importing Prefect's
server, migrating a fresh SQLite database) costs 15-40 s of CPU. So when the collected
tests include one that uses the ``prefect_api`` fixture, the server is launched at the end
of collection -- ``prefect server start --no-services --no-ui`` on 127.0.0.1, with its
own ``PREFECT_HOME`` and database in a temporary directory and analytics off -- and boots
while the rest of the suite runs. The fixture waits until it answers ``/api/health``.
Nothing leaves the machine.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

STARTUP_TIMEOUT_SECONDS = 240.0

#: Environment of both the server and this process while the Prefect test runs.
PREFECT_ENV = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_UI_ENABLED": "false",
    "PREFECT_LOGGING_TO_API_ENABLED": "false",
}


def _lower_priority() -> None:
    """In the server process: boot on idle CPU, so the tests running meanwhile keep theirs."""
    os.nice(10)


class PrefectServer:
    """``prefect server start`` in a subprocess, on a free loopback port, in a temp home."""

    def __init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="geotoolkit-prefect-"))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.env = {**PREFECT_ENV, "PREFECT_HOME": str(self.home),
                    "PREFECT_SERVER_DATABASE_CONNECTION_URL":
                        f"sqlite+aiosqlite:///{self.home / 'prefect.db'}"}
        server_env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        self.log = (self.home / "server.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
             "--port", str(self.port), "--no-services", "--no-ui", "--log-level", "WARNING"],
            env={**server_env, **self.env}, stdout=self.log, stderr=subprocess.STDOUT,
            preexec_fn=_lower_priority if hasattr(os, "nice") else None)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def wait_ready(self) -> None:
        """Poll ``/api/health`` until the server answers (it is still booting)."""
        import httpx

        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Prefect server exited: {self._log_tail()}")
            try:
                if httpx.get(f"{self.api_url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)  # readiness polling of a booting server, not a test's timing
        raise RuntimeError(f"the Prefect server did not start: {self._log_tail()}")

    def _log_tail(self) -> str:
        return (self.home / "server.log").read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)


_server: list[PrefectServer] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    wanted = any("prefect_api" in getattr(item, "fixturenames", ()) for item in session.items)
    if wanted and importlib_available("prefect"):
        _server.append(PrefectServer())


def pytest_sessionfinish(session: pytest.Session) -> None:
    while _server:
        _server.pop().stop()


def importlib_available(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


@pytest.fixture(scope="session")
def prefect_api() -> Iterator[str]:
    """The API URL of the local Prefect server; this process is configured to use it."""
    if not importlib_available("prefect"):
        pytest.skip("prefect is not installed (the orchestrators extra)")
    if not _server:  # collected in an unusual way: start it now
        _server.append(PrefectServer())
    server = _server[0]
    server.wait_ready()
    with pytest.MonkeyPatch.context() as env:
        for name, value in {**server.env, "PREFECT_API_URL": server.api_url}.items():
            env.setenv(name, value)
        # Imported only now, so Prefect reads this environment (its home above all).
        from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

        with temporary_settings(updates={PREFECT_API_URL: server.api_url,
                                         PREFECT_HOME: server.home}):
            yield server.api_url
