"""The hostile world against the real server: what a plain httpx client sees for each fault."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from sim_support import VADUZ, search

from geotoolkit.testing import FAULTS, RESET_STATUS, ProviderSimulator
from geotoolkit.testing._reply import PaddedBody
from geotoolkit.testing.faults import find_tokens, parse_fault, strip_tokens

KEY = "sk-live-0123456789"


@pytest.fixture(scope="module")
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator(trickle_interval_seconds=0.01, trickle_chunk_bytes=64) as simulator:
        yield simulator


@pytest.fixture(autouse=True)
def fresh(sim: ProviderSimulator) -> None:
    sim.configure(fault=None, huge_body_bytes=50_000_000, trickle_interval_seconds=0.01,
                  trickle_chunk_bytes=64)
    sim.reset()


@pytest.fixture(scope="module")
def client(sim: ProviderSimulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.url, timeout=5.0) as c:
        yield c


def raw_get(sim: ProviderSimulator, target: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", sim.port), timeout=5.0)
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    return sock


def lon_of(response: httpx.Response) -> float:
    return float(response.json()[0]["lon"])


# --------------------------------------------------------------------------- tokens


def test_tokens_are_found_counted_and_stripped(sim: ProviderSimulator) -> None:
    tokens = find_tokens("Weg 1 #trickleheaders #resetbodyx2 #STATUS=451x1 #statusx #huge")
    assert [(t.name, t.times) for t in tokens] == [
        ("trickleheaders", None), ("resetbody", 2), ("status=451", 1), ("huge", None)]
    assert strip_tokens("Weg 1 #trickle #status=418").split() == ["Weg", "1"]
    assert sim.expected("Städtle 38, 9490 Vaduz #status=418 #huge") == sim.expected(VADUZ)
    assert find_tokens("#status=199 #status=600 #hugex") == []


def test_fault_names() -> None:
    assert parse_fault("#Trickle") == "trickle"
    assert parse_fault(" status=504 ") == "status=504"
    for bad in ("#nope", "trickle x2", "status=99", "#503x2", ""):
        with pytest.raises(ValueError):
            parse_fault(bad)
    assert {"trickle", "huge", "badgzip", "echo400", "status=NNN"} <= set(FAULTS)


# --------------------------------------------------------------------------- slow answers


def test_trickle_sends_a_valid_body_in_many_reads(
    sim: ProviderSimulator, client: httpx.Client
) -> None:
    with client.stream("GET", "/search", params={"q": f"{VADUZ} #trickle"}) as response:
        reads = [chunk for chunk in response.iter_raw() if chunk]
    body = b"".join(reads)
    assert response.status_code == 200
    assert len(body) == int(response.headers["content-length"]) > 64 * 5
    assert len(reads) >= 3  # one chunk per interval (neighbours may coalesce)
    assert max(len(r) for r in reads) < len(body)
    assert float(json.loads(body)[0]["lon"]) == sim.expected(VADUZ)[0]  # type: ignore[index]
    assert sim.requests[-1].status == 200


def test_trickled_headers_arrive_in_pieces(sim: ProviderSimulator, client: httpx.Client) -> None:
    sim.trickle_chunk_bytes = 16
    with raw_get(sim, "/search?q=Weg+1+%23trickleheaders") as sock:
        received, reads = b"", 0
        while b"\r\n\r\n" not in received:
            piece = sock.recv(65536)
            assert piece, "closed before the end of the headers"
            received, reads = received + piece, reads + 1
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert reads >= 3
    response = search(client, "Weg 2 #trickleheaders")
    assert response.status_code == 200 and lon_of(response) == sim.expected("Weg 2")[0]  # type: ignore[index]


def test_stop_interrupts_a_trickle() -> None:
    sim = ProviderSimulator(trickle_interval_seconds=60.0).start()
    port = sim.port
    try:
        sock = raw_get(sim, "/search?q=Weg+1+%23trickle")
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(65536)  # the head came at once; the body waits 60 s a chunk
    finally:
        sim.stop()
    with sock:
        try:
            rest = sock.recv(65536)
        except ConnectionResetError:
            rest = b""
    assert rest == b""  # dropped, not answered
    handlers = [t for t in threading.enumerate()
                if t.name == f"geotoolkit-simulator-handler:{port}"]
    assert handlers == []


# --------------------------------------------------------------------------- bodies


def test_huge_body_is_50_mb_of_valid_json_streamed(client: httpx.Client) -> None:
    with client.stream("GET", "/search", params={"q": "Weg 1 #huge"}) as response:
        size = sum(len(chunk) for chunk in response.iter_raw())
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert size == int(response.headers["content-length"]) == 50_000_000


def test_huge_body_parses(sim: ProviderSimulator, client: httpx.Client) -> None:
    sim.huge_body_bytes = 100_000
    response = search(client, f"{VADUZ} #huge")
    assert len(response.content) == 100_000
    [hit] = response.json()
    assert len(hit["display_name"]) > 99_000 and set(hit["display_name"]) == {"x"}
    assert (float(hit["lon"]), float(hit["lat"])) == sim.expected(VADUZ)
    head = client.head("/search", params={"q": "Weg 1 #huge"})
    assert head.content == b"" and head.headers["content-length"] == "100000"


def test_padded_body_is_produced_in_small_chunks() -> None:
    body = PaddedBody(b"[", 50_000_000, b"]")
    sizes = [len(chunk) for chunk in body.chunks()]
    assert sum(sizes) == body.length == 50_000_002
    assert max(sizes) == 65536


def test_bad_gzip(sim: ProviderSimulator, client: httpx.Client) -> None:
    with pytest.raises(httpx.DecodingError):
        search(client, "Weg 1 #badgzip")
    with client.stream("GET", "/search", params={"q": "Weg 2 #badgzip"}) as response:
        raw = b"".join(response.iter_raw())
    assert response.headers["content-encoding"] == "gzip"
    assert json.loads(raw)[0]["lon"]  # the body is plain JSON, not gzip
    assert sim.requests[-1].status == 200


def test_overflowing_coordinates(client: httpx.Client) -> None:
    response = search(client, "Weg 1 #overflow")
    hit = response.json()[0]
    assert response.status_code == 200
    assert isinstance(hit["lat"], int) and len(str(hit["lat"])) == 400
    with pytest.raises(OverflowError):
        float(hit["lon"])


def test_bignum_is_refused_by_json(client: httpx.Client) -> None:
    response = search(client, "Weg 1 #bignum")
    assert response.status_code == 200
    with pytest.raises(ValueError, match="digits"):
        response.json()


def test_html_page(client: httpx.Client) -> None:
    response = search(client, "Weg 1 #html")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert b"<html>" in response.content
    with pytest.raises(json.JSONDecodeError):
        response.json()


def test_reset_body_closes_halfway(sim: ProviderSimulator, client: httpx.Client) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        search(client, "Weg 1 #resetbody")
    assert sim.requests[-1].status == RESET_STATUS
    with raw_get(sim, "/search?q=Weg+2+%23resetbody") as sock:
        data = b""
        while piece := sock.recv(65536):
            data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    assert 0 < len(body) < length
    assert search(client, VADUZ).status_code == 200  # the client recovers


# --------------------------------------------------------------------------- errors


def test_huge_and_junk_retry_after(client: httpx.Client) -> None:
    huge = search(client, "Weg 1 #retryafterhuge")
    assert huge.status_code == 429
    value = huge.headers["retry-after"]
    assert value.isdigit() and len(value) == 4000
    with pytest.raises(OverflowError):
        float(int(value))
    junk = search(client, "Weg 1 #retryafterjunk")
    assert junk.status_code == 429
    assert not junk.headers["retry-after"].strip().isdigit()


def test_echo400_echoes_the_key(sim: ProviderSimulator, client: httpx.Client) -> None:
    response = search(client, "Weg 1 #echo400", key=KEY)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert KEY in message and "/search?" in message and "format=jsonv2" in message
    assert sim.requests[-1].status == 400 and sim.requests[-1].key == KEY


@pytest.mark.parametrize("code", [418, 451, 502, 504, 299])
def test_any_status(code: int, client: httpx.Client) -> None:
    response = search(client, f"Weg 1 #status={code}")
    assert response.status_code == code
    assert response.json()["error"]["code"] == code


def test_status_without_body(client: httpx.Client) -> None:
    response = search(client, "Weg 1 #status=204")
    assert response.status_code == 204 and response.content == b""
    assert search(client, VADUZ).status_code == 200  # the connection is still usable


def test_counted_faults_then_the_answer(sim: ProviderSimulator, client: httpx.Client) -> None:
    q = f"{VADUZ} #status=502x2 #htmlx1 #resetbodyx1"
    statuses = []
    for _ in range(5):
        try:
            statuses.append(search(client, q).status_code)
        except httpx.RemoteProtocolError:
            statuses.append(RESET_STATUS)
    assert statuses == [502, 502, 200, RESET_STATUS, 200]
    assert [r.status for r in sim.requests] == statuses
    assert lon_of(search(client, q)) == sim.expected(VADUZ)[0]  # type: ignore[index]


# --------------------------------------------------------------------------- simulator-wide


def test_fault_for_every_search_switched_from_another_thread(
    sim: ProviderSimulator, client: httpx.Client
) -> None:
    switch = threading.Thread(target=setattr, args=(sim, "fault", "#status=503"))
    switch.start()
    switch.join()
    assert sim.fault == "status=503"
    assert [search(client, f"Weg {i}").status_code for i in range(3)] == [503] * 3
    assert search(client, "Weg 1 #html").headers["content-type"].startswith("text/html")
    assert client.get("/status").status_code == 200  # searches only
    sim.fault = "trickle"
    assert lon_of(search(client, VADUZ)) == sim.expected(VADUZ)[0]  # type: ignore[index]
    sim.fault = None
    assert search(client, "Weg 9").status_code == 200
    with pytest.raises(ValueError):
        sim.fault = "gremlins"
    assert sim.fault is None


def test_faults_come_after_the_rate_limit(sim: ProviderSimulator, client: httpx.Client) -> None:
    sim.configure(rate_limit=1.0, limiter="gcra", clock=lambda: 1_000.0)
    try:
        assert search(client, "Weg 1 #html").status_code == 200
        assert search(client, "Weg 2 #html").status_code == 429
    finally:
        sim.configure(rate_limit=None, limiter="sliding-window", clock=time.time)
