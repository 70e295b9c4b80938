"""The provider simulator, over real HTTP on 127.0.0.1 (httpx sync client, no sleeping)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_support import T0, VADUZ, FakeClock, search

from geotoolkit.testing import (
    KNOWN_ADDRESSES,
    RESET_STATUS,
    ProviderSimulator,
    RetryAfterMode,
    SimulatedRequest,
)

ROOT = Path(__file__).resolve().parents[2]
ADDRESSES_CSV = ROOT / "notebooks" / "data" / "addresses.csv"
MIN_LON, MIN_LAT, MAX_LON, MAX_LAT = 9.47, 47.05, 9.64, 47.27


@pytest.fixture
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator() as simulator:
        yield simulator


@pytest.fixture
def client(sim: ProviderSimulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.url, timeout=5.0) as c:
        yield c


def in_bbox(lon: float, lat: float) -> bool:
    return MIN_LON <= lon <= MAX_LON and MIN_LAT <= lat <= MAX_LAT


# --------------------------------------------------------------------------- answers


def test_binds_loopback_only(sim: ProviderSimulator) -> None:
    assert sim.url == f"http://127.0.0.1:{sim.port}"
    assert sim.port > 0


def test_match_payload_shape(sim: ProviderSimulator, client: httpx.Client) -> None:
    response = search(client, VADUZ, addressdetails="1")
    assert response.status_code == 200
    assert response.http_version == "HTTP/1.1"
    assert response.headers["content-type"].startswith("application/json")
    assert "date" in response.headers
    body = response.json()
    assert isinstance(body, list) and len(body) == 1
    hit = body[0]
    assert isinstance(hit["place_id"], int)
    for name in ("display_name", "category", "type"):
        assert isinstance(hit[name], str) and hit[name]
    assert isinstance(hit["importance"], float)
    assert hit["address"]["country_code"] == "li"
    assert hit["address"]["postcode"] == "9490"
    # Nominatim: strings with 7 decimals, latitude first.
    assert isinstance(hit["lat"], str) and isinstance(hit["lon"], str)
    assert len(hit["lat"].split(".")[1]) == 7 and len(hit["lon"].split(".")[1]) == 7
    keys = list(hit)
    assert keys.index("lat") < keys.index("lon")
    lon, lat = float(hit["lon"]), float(hit["lat"])
    assert sim.expected(VADUZ) == (lon, lat)
    known = KNOWN_ADDRESSES[0]
    assert (lon, lat) == (known.lon, known.lat)


def test_known_address_matches_in_other_spellings(sim: ProviderSimulator) -> None:
    assert sim.expected("städtle   38 ,9490 VADUZ") == sim.expected(VADUZ)
    assert sim.expected("Städtle 38, Vaduz") == sim.expected(VADUZ)


def test_unknown_address_gets_stable_point_in_bbox(
    sim: ProviderSimulator, client: httpx.Client
) -> None:
    first = search(client, "Irgendwo 7, Vaduz").json()[0]
    again = search(client, "  IRGENDWO 7 ,  vaduz ").json()[0]
    other = search(client, "Irgendwo 8, Vaduz").json()[0]
    point = (float(first["lon"]), float(first["lat"]))
    assert point == (float(again["lon"]), float(again["lat"]))
    assert point != (float(other["lon"]), float(other["lat"]))
    assert point == sim.expected("Irgendwo 7, Vaduz")
    assert in_bbox(*point)


@given(st.text(max_size=60))
def test_expected_is_in_bbox_or_none(text: str) -> None:
    point = ProviderSimulator().expected(text)
    assert point is None or in_bbox(*point)


@pytest.mark.parametrize("q", ["Nowhere Street 999, 0000 Atlantis", "No  Match road 1"])
def test_no_match_answers_empty_list(
    sim: ProviderSimulator, client: httpx.Client, q: str
) -> None:
    response = search(client, q)
    assert response.status_code == 200
    assert response.json() == []
    assert sim.expected(q) is None


def test_structured_query(sim: ProviderSimulator, client: httpx.Client) -> None:
    fields = {"street": "Städtle 38", "city": "Vaduz", "country": "Liechtenstein"}
    hit = search(client, **fields).json()[0]
    point = (float(hit["lon"]), float(hit["lat"]))
    assert point == sim.expected(fields) == sim.expected(VADUZ)
    other = {"street": "Irgendwo 7", "city": "Vaduz"}
    hit = search(client, **other).json()[0]
    assert (float(hit["lon"]), float(hit["lat"])) == sim.expected(other)
    assert sim.requests[0].query == "street=städtle 38|city=vaduz|country=liechtenstein"


def test_format_json_and_options(client: httpx.Client) -> None:
    hit = client.get("/search", params={"q": VADUZ, "format": "json"}).json()[0]
    assert "class" in hit and "category" not in hit
    hit = search(client, VADUZ, addressdetails="0").json()[0]
    assert "address" not in hit
    assert search(client, VADUZ, countrycodes="de,at").json() == []
    assert len(search(client, VADUZ, countrycodes="ch,li").json()) == 1


@pytest.mark.parametrize(
    "params",
    [
        {"format": "jsonv2"},
        {"format": "jsonv2", "q": "   "},
        {"format": "xml", "q": VADUZ},
        {"format": "jsonv2", "q": VADUZ, "city": "Vaduz"},
        {"format": "jsonv2", "q": VADUZ, "limit": "many"},
    ],
)
def test_bad_requests_get_400(client: httpx.Client, params: dict[str, str]) -> None:
    response = client.get("/search", params=params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == 400 and error["message"]


def test_status_endpoint(client: httpx.Client) -> None:
    response = client.get("/status")
    assert response.status_code == 200
    assert response.text == "OK"
    assert client.get("/nope").status_code == 404


def test_connection_is_kept_alive(client: httpx.Client) -> None:
    for _ in range(3):
        response = search(client, VADUZ)
        assert response.headers.get("connection", "").lower() != "close"


# --------------------------------------------------------------------------- auth & quota


def test_authentication() -> None:
    with (
        ProviderSimulator(valid_keys={"good"}) as sim,
        httpx.Client(base_url=sim.url, timeout=5.0) as client,
    ):
        missing = search(client, VADUZ)
        wrong = search(client, VADUZ, key="bad")
        right = search(client, VADUZ, key="good")
    assert missing.status_code == 401 and "error" in missing.json()
    assert wrong.status_code == 403 and "error" in wrong.json()
    assert right.status_code == 200
    assert [r.status for r in sim.requests] == [401, 403, 200]
    assert [r.key for r in sim.requests] == [None, "bad", "good"]


def test_daily_cap_gives_402_per_key() -> None:
    with (
        ProviderSimulator(daily_cap=2) as sim,
        httpx.Client(base_url=sim.url, timeout=5.0) as client,
    ):
        codes = [search(client, f"Weg {i}", key="a").status_code for i in range(3)]
        other = search(client, "Weg 9", key="b")
        refused = search(client, "Weg 3", key="a")
    assert codes == [200, 200, 402]
    assert other.status_code == 200
    assert refused.status_code == 402 and refused.json()["error"]["code"] == 402


# --------------------------------------------------------------------------- rate limits


def _limited(retry_after: RetryAfterMode, clock: FakeClock) -> ProviderSimulator:
    # two requests per 10 s window, per key
    return ProviderSimulator(
        rate_limit=0.2, window_seconds=10.0, retry_after=retry_after, clock=clock
    )


@pytest.mark.parametrize(
    ("mode", "header"),
    [("auto", "7"), (0, "0"), (1, "1"), (86400, "86400"), ("missing", None)],
)
def test_429_retry_after_delta_forms(mode: RetryAfterMode, header: str | None) -> None:
    clock = FakeClock()
    with _limited(mode, clock) as sim, httpx.Client(base_url=sim.url, timeout=5.0) as client:
        codes = []
        for offset in (0.0, 1.0, 3.0):
            clock.set(offset)
            codes.append(search(client, VADUZ).status_code)
        clock.set(3.0)
        response = search(client, VADUZ)
    assert codes == [200, 200, 429]
    assert response.status_code == 429
    assert response.json()["error"]["code"] == 429
    assert response.headers.get("retry-after") == header
    assert "date" in response.headers
    assert sim.count(status=429) == 2


def test_429_reset_headers_say_the_reset_instead_of_retry_after() -> None:
    clock = FakeClock(1_800_000_000.25)
    with _limited("reset-headers", clock) as sim, httpx.Client(base_url=sim.url, timeout=5.0) as client:
        codes = [search(client, VADUZ).status_code for _ in range(3)]
        response = search(client, VADUZ)
    assert codes == [200, 200, 429] and response.status_code == 429
    assert "retry-after" not in response.headers
    # the window of 10 s opened at the first request: it reopens in 10 s, as "auto" says
    assert response.headers["ratelimit"] == '"default";r=0;t=10'
    assert response.headers["ratelimit-policy"] == '"default";q=2;w=10'
    assert response.headers["x-ratelimit-limit"] == "2"
    assert response.headers["x-ratelimit-remaining"] == "0"
    assert response.headers["x-ratelimit-reset"] == str(1_800_000_001 + 10)


def test_429_retry_after_http_date() -> None:
    clock = FakeClock()
    with (
        _limited("http-date", clock) as sim,
        httpx.Client(base_url=sim.url, timeout=5.0) as client,
    ):
        for offset in (0.0, 1.0):
            clock.set(offset)
            assert search(client, VADUZ).status_code == 200
        clock.set(3.0)
        response = search(client, VADUZ)
    assert response.status_code == 429
    retry_at = parsedate_to_datetime(response.headers["retry-after"])
    date = parsedate_to_datetime(response.headers["date"])
    assert retry_at.tzinfo is not None
    assert (retry_at - date).total_seconds() == 7
    assert date.timestamp() == int(T0 + 3.0)


def test_sliding_window_with_fake_clock() -> None:
    clock = FakeClock()
    with (
        ProviderSimulator(rate_limit=2, clock=clock) as sim,
        httpx.Client(base_url=sim.url, timeout=5.0) as client,
    ):

        def at(offset: float, key: str = "k") -> httpx.Response:
            clock.set(offset)
            return search(client, VADUZ, key=key)

        assert at(0.0).status_code == 200
        assert at(0.9).status_code == 200
        assert at(1.0).status_code == 200  # the request at 0.0 left the window
        limited = at(1.5)  # 0.9 and 1.0 are in (0.5, 1.5]
        assert limited.status_code == 429
        assert limited.headers["retry-after"] == "1"  # frees at 1.9: 0.4 s, rounded up
        assert at(1.5, key="other").status_code == 200  # limits are per key
        assert at(1.9).status_code == 200
        assert at(1.95).status_code == 429
    assert [r.time - T0 for r in sim.requests_for("k")] == pytest.approx(
        [0.0, 0.9, 1.0, 1.5, 1.9, 1.95]
    )


def test_rejected_requests_do_not_count_toward_the_window() -> None:
    clock = FakeClock()
    with _limited("auto", clock) as sim, httpx.Client(base_url=sim.url, timeout=5.0) as client:
        statuses = []
        for offset in (0.0, 1.0, 9.0, 10.0):
            clock.set(offset)
            statuses.append(search(client, VADUZ).status_code)
    # At 10.0 the window (0, 10] holds only the request at 1.0: the 429 at 9.0 did not count.
    assert statuses == [200, 200, 429, 200]
    assert sim.count(status=429) == 1


def test_anonymous_requests_share_one_window() -> None:
    clock = FakeClock()
    with (
        ProviderSimulator(rate_limit=1, clock=clock) as sim,
        httpx.Client(base_url=sim.url, timeout=5.0) as client,
    ):
        assert search(client, VADUZ).status_code == 200
        assert search(client, "Irgendwo 1").status_code == 429
    assert sim.count(status=429, key=None) == 1


def test_limit_is_enforced_under_concurrency() -> None:
    clock = FakeClock()  # frozen: every request falls into the same window
    with (
        ProviderSimulator(rate_limit=10, clock=clock) as sim,
        httpx.Client(base_url=sim.url, timeout=5.0) as client,
    ):
        statuses: list[int] = []
        lock = threading.Lock()

        def worker(n: int) -> None:
            for i in range(5):
                code = search(client, f"Weg {n}-{i}", key="shared").status_code
                with lock:
                    statuses.append(code)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(statuses) == [200] * 10 + [429] * 30
    assert sim.count(status=200) == 10


def test_runtime_reconfiguration_and_reset() -> None:
    clock = FakeClock()
    with (
        ProviderSimulator(clock=clock) as sim,
        httpx.Client(base_url=sim.url, timeout=5.0) as client,
    ):
        assert search(client, VADUZ).status_code == 200
        sim.set_rate_limit(1, window_seconds=1)
        assert search(client, VADUZ).status_code == 200
        assert search(client, VADUZ).status_code == 429
        sim.retry_after = "missing"
        assert "retry-after" not in search(client, VADUZ).headers
        sim.reset()
        assert sim.requests == []
        assert search(client, VADUZ).status_code == 200  # limiter state cleared
        sim.rate_limit = None
        assert search(client, VADUZ).status_code == 200
    assert sim.rate_limit is None and sim.window_seconds == 1


def test_invalid_configuration_is_refused() -> None:
    with pytest.raises(ValueError):
        ProviderSimulator(rate_limit=0)
    with pytest.raises(ValueError):
        ProviderSimulator(retry_after="soon")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ProviderSimulator(error_503_rate=1.5)
    sim = ProviderSimulator()
    with pytest.raises(ValueError):
        sim.window_seconds = 0


# --------------------------------------------------------------------------- failures


def test_random_503_is_seeded_and_carries_retry_after() -> None:
    def pattern(seed: int) -> list[int]:
        with (
            ProviderSimulator(error_503_rate=0.5, seed=seed) as sim,
            httpx.Client(base_url=sim.url, timeout=5.0) as client,
        ):
            responses = [search(client, f"Weg {i}") for i in range(16)]
        for r in responses:
            if r.status_code == 503:
                assert r.headers["retry-after"] == "1"
        return [r.status_code for r in responses]

    first = pattern(7)
    assert first == pattern(7)
    assert set(first) == {200, 503}


def test_503_n_times_then_success(sim: ProviderSimulator, client: httpx.Client) -> None:
    q = "Städtle 38, Vaduz #503x2"
    responses = [search(client, q) for _ in range(3)]
    assert [r.status_code for r in responses] == [503, 503, 200]
    assert responses[0].headers["retry-after"] == "1"
    hit = responses[2].json()[0]
    assert (float(hit["lon"]), float(hit["lat"])) == sim.expected("Städtle 38, Vaduz")
    assert sim.expected(q) == sim.expected(VADUZ)
    # counted per exact query: another query starts afresh
    assert search(client, "Weg 1 #503X2").status_code == 503


def test_always_503_and_500(client: httpx.Client) -> None:
    assert [search(client, "Weg 1 #503").status_code for _ in range(3)] == [503] * 3
    response = search(client, "Weg 1 #500")
    assert response.status_code == 500
    assert "retry-after" not in response.headers


def test_429_token_then_success() -> None:
    with (
        ProviderSimulator(retry_after="http-date") as sim,
        httpx.Client(base_url=sim.url, timeout=5.0) as client,
    ):
        first = search(client, "Weg 1 #429x1")
        second = search(client, "Weg 1 #429x1")
    assert first.status_code == 429
    parsedate_to_datetime(first.headers["retry-after"])
    assert second.status_code == 200
    assert sim.count(status=429) == 1


def test_sequenced_tokens(client: httpx.Client) -> None:
    codes = [search(client, "Weg 2 #503x1 #429x1").status_code for _ in range(3)]
    assert codes == [503, 429, 200]


def test_malformed_body(client: httpx.Client) -> None:
    response = search(client, "Weg 1 #malformed")
    assert response.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.text)


def test_error_body(client: httpx.Client) -> None:
    response = search(client, "Weg 1 #ERROR")
    assert response.status_code == 200
    assert response.json() == {"error": "Unable to geocode"}


def test_reset_drops_the_connection(sim: ProviderSimulator, client: httpx.Client) -> None:
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        search(client, "Weg 1 #reset")
    assert sim.requests[-1].status == RESET_STATUS
    assert search(client, VADUZ).status_code == 200  # the client recovers


def handlers(port: int) -> list[threading.Thread]:
    """The simulator's request handlers still running (one per open connection)."""
    return [t for t in threading.enumerate()
            if t.name == f"geotoolkit-simulator-handler:{port}" and t.is_alive()]


def test_timeout_hangs_and_stop_does_not_wait() -> None:
    """Two requests hang for a minute; ``stop()`` releases them and drops their connections
    instead of waiting for its join deadline (5 s) and leaving them running."""
    sim = ProviderSimulator(hang_seconds=60.0)
    sim.start()
    port = sim.port
    try:
        with httpx.Client(base_url=sim.url, timeout=0.2) as client:
            with pytest.raises(httpx.ReadTimeout):
                search(client, "Weg 1 #timeout")
            # start another hang and stop while it is still pending
            with pytest.raises(httpx.ReadTimeout):
                search(client, "Weg 2 #timeout")
        assert handlers(port)  # the hangs are still held on the server's side
    finally:
        sim.stop()
    assert not sim.running
    assert handlers(port) == []


def test_timeout_answers_after_the_hang() -> None:
    with (
        ProviderSimulator(hang_seconds=0.1) as sim,
        httpx.Client(base_url=sim.url, timeout=5.0) as client,
    ):
        response = search(client, "Städtle 38, Vaduz #timeout")
    assert response.status_code == 200
    hit = response.json()[0]
    assert (float(hit["lon"]), float(hit["lat"])) == sim.expected(VADUZ)


def test_latency_is_added() -> None:
    with (
        ProviderSimulator(latency_seconds=0.15) as sim,
        httpx.Client(base_url=sim.url, timeout=5.0) as client,
    ):
        started = time.monotonic()
        search(client, VADUZ)
        assert time.monotonic() - started >= 0.15


# --------------------------------------------------------------------------- log


def test_request_log(sim: ProviderSimulator, client: httpx.Client) -> None:
    search(client, VADUZ, key="a")
    search(client, "Weg 1", key="a")
    search(client, "Weg 2", key="b")
    search(client, "Weg 3")
    client.get("/status")
    log = sim.requests
    assert all(isinstance(r, SimulatedRequest) for r in log)
    assert len(log) == 5
    assert [r.query for r in sim.requests_for("a")] == [
        "städtle 38, 9490 vaduz, liechtenstein",
        "weg 1",
    ]
    assert len(sim.requests_for("b")) == 1
    assert sim.requests_for(None)[0].path == "/search"
    assert log[-1].path == "/status" and log[-1].query is None
    assert log[0].params["q"] == VADUZ and log[0].params["key"] == "a"
    assert sim.count(status=200) == 5
    assert sim.count(key="a") == 2
    log.clear()  # a snapshot: the simulator's log is untouched
    assert len(sim.requests) == 5


def test_log_uses_injected_clock() -> None:
    clock = FakeClock(start=123.5)
    with (
        ProviderSimulator(clock=clock) as sim,
        httpx.Client(base_url=sim.url, timeout=5.0) as client,
    ):
        response = search(client, VADUZ)
    assert sim.requests[0].time == 123.5
    assert parsedate_to_datetime(response.headers["date"]).timestamp() == 123


# --------------------------------------------------------------------------- lifecycle


def test_start_stop_lifecycle() -> None:
    sim = ProviderSimulator()
    with pytest.raises(RuntimeError):
        _ = sim.url
    sim.start()
    try:
        with pytest.raises(RuntimeError):
            sim.start()
        with httpx.Client(base_url=sim.url, timeout=5.0) as client:
            assert client.get("/status").status_code == 200
    finally:
        sim.stop()
    sim.stop()  # idempotent
    assert not sim.running


def test_stop_with_idle_keepalive_connection() -> None:
    sim = ProviderSimulator().start()
    client = httpx.Client(base_url=sim.url, timeout=5.0)
    try:
        assert search(client, VADUZ).status_code == 200
        port = sim.port
        assert handlers(port)  # the idle keep-alive connection's handler waits for a request
        sim.stop()  # the client still holds its idle connection
        assert handlers(port) == []  # dropped, not left to the join deadline
    finally:
        client.close()


# --------------------------------------------------------------------------- data & CLI


def _csv_rows() -> list[dict[str, Any]]:
    with ADDRESSES_CSV.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_addresses_csv_matches_the_known_table() -> None:
    rows = _csv_rows()
    assert list(rows[0]) == ["id", "address", "city"]
    assert len(rows) >= 20
    assert sum(1 for r in rows if not r["address"].strip()) == 1
    no_match = [r for r in rows if "nowhere" in r["address"].casefold()]
    assert [r["address"] for r in no_match] == ["Nowhere Street 999, 0000 Atlantis"]
    sim = ProviderSimulator()
    known = {k.address: (k.lon, k.lat) for k in KNOWN_ADDRESSES}
    cities = {r["city"] for r in rows}
    assert {"Vaduz", "Schaan", "Triesen", "Balzers", "Eschen", "Mauren"} <= cities
    for row in rows:
        address = row["address"]
        if not address.strip() or row in no_match:
            assert sim.expected(address) is None
        else:
            point = sim.expected(address)
            assert point is not None
            assert point == known[address]
            assert in_bbox(*point)


def test_cli_runs_until_interrupted() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "geotoolkit.testing", "--port", "0", "--rate-limit", "1",
         "--limiter", "token-bucket", "--burst", "2"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.rsplit(" ", 1)[-1].strip()
        assert url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=url, timeout=5.0) as client:
            codes = [search(client, VADUZ).status_code for _ in range(3)]
        assert codes == [200, 200, 429]  # a bucket of two tokens
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.communicate()


def test_cli_parser_accepts_limiter_burst_and_fault() -> None:
    from geotoolkit.testing.__main__ import build_parser

    args = build_parser().parse_args(
        ["--limiter", "gcra", "--burst", "3", "--fault", "#Trickle", "--trickle-interval-seconds", "2"])
    assert (args.limiter, args.burst, args.fault, args.trickle_interval_seconds) == (
        "gcra", 3, "trickle", 2.0)
    defaults = build_parser().parse_args([])
    assert (defaults.limiter, defaults.burst, defaults.fault) == ("sliding-window", None, None)
    for bad in (["--burst", "-1"], ["--burst", "many"], ["--limiter", "polite"], ["--fault", "nope"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(bad)


def test_cli_on_a_port_in_use_says_so_without_a_traceback(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m geotoolkit.testing --port 8080`` (the docs' command) on a port another
    program holds ended in an OSError traceback; now one line naming --port, exit 1."""
    from geotoolkit.testing.__main__ import main

    with ProviderSimulator() as busy:
        port = int(busy.url.rsplit(":", 1)[1])
        assert main(["--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "--port" in err
    assert "Traceback" not in err


def test_cli_help_says_every_default(capsys: pytest.CaptureFixture[str]) -> None:
    """--port said '0: any free port' but not that 8080 is the default; --rate-limit did not
    say that none means no limit; eight flags had no help at all."""
    from geotoolkit.testing.__main__ import build_parser

    parser = build_parser()
    for action in parser._actions:
        if action.option_strings == ["-h", "--help"]:
            continue
        assert action.help, action.option_strings
        if action.default is not None and action.dest != "keys":
            assert "default" in action.help, action.option_strings


def test_public_names_are_pinned() -> None:
    import geotoolkit.testing as testing
    from geotoolkit.testing import simulator

    assert testing.__all__ == [
        "FAULTS", "FORMATS", "KNOWN_ADDRESSES", "LIMITERS", "RESET_STATUS", "ROW_MARKERS",
        "BatchCost", "KnownAddress", "LimiterName", "OutageMode", "ProviderSimulator",
        "RetryAfterMode", "SimulatedRequest", "refusing_url", "unused_url",
    ]
    for name in simulator.__all__:
        assert getattr(simulator, name) is getattr(testing, name)
