"""Whole-server outages, switched at run time, and recovery on the same URL."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from sim_support import VADUZ, search

from geotoolkit.testing import RESET_STATUS, ProviderSimulator, refusing_url, unused_url


@pytest.fixture
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator() as simulator:
        yield simulator


@pytest.fixture
def client(sim: ProviderSimulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.url, timeout=5.0) as c:
        yield c


class Background:
    """One request in a thread; ``outcome`` is the response or the exception."""

    def __init__(self, url: str, q: str) -> None:
        self.outcome: httpx.Response | Exception | None = None
        self._thread = threading.Thread(target=self._run, args=(url, q))
        self._thread.start()

    def _run(self, url: str, q: str) -> None:
        try:
            with httpx.Client(base_url=url, timeout=30.0) as c:
                self.outcome = search(c, q)
        except Exception as exc:
            self.outcome = exc

    def running(self) -> bool:
        return self._thread.is_alive()

    def result(self) -> httpx.Response | Exception | None:
        self._thread.join()
        return self.outcome


def test_refuse_then_recover_on_the_same_url(sim: ProviderSimulator, client: httpx.Client) -> None:
    url, port = sim.url, sim.port
    assert search(client, VADUZ).status_code == 200  # a keep-alive connection is open
    sim.outage("refuse")
    assert sim.outage_mode == "refuse"
    with pytest.raises(httpx.ConnectError):
        search(client, VADUZ)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/status")
    assert sim.running and sim.port == port
    sim.outage(None)
    assert sim.outage_mode is None
    assert sim.url == url
    assert search(client, VADUZ).status_code == 200
    assert [r.status for r in sim.requests] == [200, 200]  # refused requests never arrived


def test_reset_outage(sim: ProviderSimulator, client: httpx.Client) -> None:
    sim.outage("reset")
    with pytest.raises(httpx.ReadError):
        search(client, "Weg 1", key="k")
    with pytest.raises(httpx.ReadError):
        client.get("/status")
    logged = sim.requests
    assert [(r.status, r.path, r.key) for r in logged] == [
        (RESET_STATUS, "/search", "k"), (RESET_STATUS, "/status", None)]
    sim.outage(None)
    assert search(client, "Weg 1", key="k").status_code == 200


def test_hang_outage_holds_requests_until_recovery(
    sim: ProviderSimulator, client: httpx.Client
) -> None:
    sim.outage("hang")
    pending = Background(sim.url, "Weg 1")
    assert sim.wait_for_requests(1, timeout=10.0)
    assert pending.running()  # arrived, logged, unanswered
    assert sim.requests[0].status == RESET_STATUS
    sim.outage(None)
    assert isinstance(pending.result(), httpx.RemoteProtocolError)  # dropped, never answered
    assert search(client, "Weg 1").status_code == 200


def test_stop_releases_a_hang() -> None:
    sim = ProviderSimulator().start()
    port = sim.port
    sim.outage("hang")
    pending = Background(sim.url, "Weg 1")
    try:
        assert sim.wait_for_requests(1, timeout=10.0)
    finally:
        sim.stop()
    assert isinstance(pending.result(), httpx.TransportError)
    assert not [t for t in threading.enumerate()
                if t.name == f"geotoolkit-simulator-handler:{port}"]


def test_outage_as_a_context_manager_and_every_transition(
    sim: ProviderSimulator, client: httpx.Client
) -> None:
    with sim.outage("refuse"):
        with pytest.raises(httpx.ConnectError):
            search(client, VADUZ)
        sim.outage("reset")  # from refusing to resetting: listening again
        with pytest.raises(httpx.ReadError):
            search(client, VADUZ)
        sim.outage("refuse")
        sim.outage("refuse")  # idempotent
        with pytest.raises(httpx.ConnectError):
            search(client, VADUZ)
    assert sim.outage_mode is None
    assert search(client, VADUZ).status_code == 200


def test_outage_before_start() -> None:
    sim = ProviderSimulator()
    sim.outage("refuse")
    with sim:
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{sim.url}/status")
        sim.outage(None)
        assert httpx.get(f"{sim.url}/status").status_code == 200


def test_invalid_outage_is_refused(sim: ProviderSimulator) -> None:
    with pytest.raises(ValueError):
        sim.outage("flood")  # type: ignore[arg-type]
    assert sim.outage_mode is None


def test_nobody_listens_on_unused_urls() -> None:
    with pytest.raises(httpx.ConnectError):
        httpx.get(unused_url())
    with refusing_url() as url:
        assert url.startswith("http://127.0.0.1:")
        with pytest.raises(httpx.ConnectError):
            httpx.get(url)
