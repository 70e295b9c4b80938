"""Every limiter behind the real server: statuses and Retry-After on an injected clock."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from email.utils import parsedate_to_datetime

import httpx
import pytest
from sim_support import T0, VADUZ, FakeClock, search

from geotoolkit.testing import LIMITERS, ProviderSimulator


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderSimulator]:
    with ProviderSimulator() as simulator:
        yield simulator


@pytest.fixture
def clock(server: ProviderSimulator) -> FakeClock:
    """A fresh clock, limiter and log for each test (one server for the module)."""
    fake = FakeClock()
    server.configure(clock=fake, rate_limit=None, window_seconds=1.0, limiter="sliding-window",
                     burst=None, retry_after="auto", daily_cap=None)
    server.reset()
    return fake


@pytest.fixture(scope="module")
def client(server: ProviderSimulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=5.0) as c:
        yield c


# (offset seconds, status, Retry-After) per request of one key
Script = list[tuple[float, int, str | None]]

SCRIPTS: dict[str, tuple[dict[str, object], Script]] = {
    "gcra, burst 0: one per 1/r": (
        {"limiter": "gcra", "rate_limit": 2.0, "burst": 0},
        [(0.0, 200, None), (0.25, 429, "1"), (0.5, 200, None), (0.9, 429, "1"), (1.0, 200, None)],
    ),
    "gcra, burst 1: two at once": (
        {"limiter": "gcra", "rate_limit": 1.0, "burst": 1},
        [(0.0, 200, None), (0.0, 200, None), (0.0, 429, "1"), (1.0, 200, None), (1.0, 429, "1")],
    ),
    "leaky bucket: a slow rate still says 1": (
        {"limiter": "leaky-bucket", "rate_limit": 0.1, "burst": 0},
        [(0.0, 200, None), (5.0, 429, "1"), (10.0, 200, None)],
    ),
    "token bucket: until the next token": (
        {"limiter": "token-bucket", "rate_limit": 0.4, "burst": 1},
        [(0.0, 200, None), (0.0, 429, "3"), (2.0, 429, "1"), (2.5, 200, None)],
    ),
    "token bucket: capacity = rate": (
        {"limiter": "token-bucket", "rate_limit": 2.0},
        [(0.0, 200, None), (0.0, 200, None), (0.0, 429, "1"), (0.5, 200, None)],
    ),
    "fixed window per minute: until the minute ends": (
        {"limiter": "fixed-window", "rate_limit": 0.05, "window_seconds": 60.0},  # 3 a minute
        [(0.0, 200, None), (1.0, 200, None), (2.0, 200, None), (2.5, 429, "38"),
         (39.0, 429, "1"), (40.0, 200, None)],  # T0 is 20 s into its minute
    ),
    "fixed window per second": (
        {"limiter": "fixed-window", "rate_limit": 1.0, "window_seconds": 1.0},
        [(0.2, 200, None), (0.9, 429, "1"), (1.0, 200, None)],
    ),
    "sliding log: rejections count": (
        {"limiter": "sliding-log", "rate_limit": 1.0},
        [(0.0, 200, None), (0.5, 429, "1"), (1.2, 429, "1"), (2.3, 200, None)],
    ),
    "sliding window: rejections do not count": (
        {"limiter": "sliding-window", "rate_limit": 0.2, "window_seconds": 10.0},
        [(0.0, 200, None), (1.0, 200, None), (3.0, 429, "7"), (9.0, 429, "1"), (10.0, 200, None)],
    ),
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_limiter_script(
    name: str, server: ProviderSimulator, client: httpx.Client, clock: FakeClock
) -> None:
    settings, script = SCRIPTS[name]
    server.configure(**settings)
    seen = []
    for offset, _, _ in script:
        clock.set(offset)
        response = search(client, VADUZ, key="k")
        seen.append((offset, response.status_code, response.headers.get("retry-after")))
        if response.status_code == 429:
            assert response.json()["error"]["code"] == 429
    assert seen == script
    assert server.count(200) == sum(1 for _, status, _ in script if status == 200)


@pytest.mark.parametrize("limiter", sorted(LIMITERS))
def test_limits_are_per_key(
    limiter: str, server: ProviderSimulator, client: httpx.Client, clock: FakeClock
) -> None:
    server.set_rate_limit(1.0, limiter=limiter)  # type: ignore[arg-type]
    assert search(client, VADUZ, key="a").status_code == 200
    assert search(client, VADUZ, key="a").status_code == 429
    assert search(client, VADUZ, key="b").status_code == 200
    assert search(client, VADUZ).status_code == 200  # no key: a key of its own
    assert search(client, VADUZ).status_code == 429
    assert search(client, VADUZ, key="b").status_code == 429
    assert [r.status for r in server.requests_for("a")] == [200, 429]


@pytest.mark.parametrize("limiter", sorted(LIMITERS))
@pytest.mark.parametrize(("mode", "header"), [(30, "30"), (0, "0"), ("missing", None)])
def test_fixed_retry_after_modes_apply_to_every_limiter(
    limiter: str, mode: int | str, header: str | None,
    server: ProviderSimulator, client: httpx.Client, clock: FakeClock,
) -> None:
    server.configure(limiter=limiter, rate_limit=1.0, retry_after=mode)
    search(client, VADUZ)
    response = search(client, VADUZ)
    assert response.status_code == 429
    assert response.headers.get("retry-after") == header


@pytest.mark.parametrize(("limiter", "seconds"), [("gcra", 1), ("token-bucket", 2),
                                                  ("fixed-window", 40)])
def test_http_date_is_what_the_limiter_would_say(
    limiter: str, seconds: int, server: ProviderSimulator, client: httpx.Client, clock: FakeClock
) -> None:
    rate = 0.05 if limiter == "fixed-window" else 0.4
    window = 60.0 if limiter == "fixed-window" else 1.0
    server.configure(limiter=limiter, rate_limit=rate, window_seconds=window, burst=1,
                     retry_after="http-date")
    for _ in range(3):
        search(client, VADUZ)
    clock.set(0.5)
    response = search(client, VADUZ)
    assert response.status_code == 429
    retry_at = parsedate_to_datetime(response.headers["retry-after"])
    date = parsedate_to_datetime(response.headers["date"])
    assert (retry_at - date).total_seconds() == seconds
    assert date.timestamp() == int(T0 + 0.5)


@pytest.mark.parametrize("limiter", sorted(LIMITERS))
def test_a_scripted_429_never_counts(
    limiter: str, server: ProviderSimulator, client: httpx.Client, clock: FakeClock
) -> None:
    server.configure(limiter=limiter, rate_limit=1.0, burst=0)
    for token in ("#429x1", "#retryafterhugex1", "#retryafterjunkx1"):  # on a frozen clock
        assert search(client, f"Weg 1 {token}").status_code == 429
    assert search(client, "Weg 2").status_code == 200  # the three 429s left no trace
    assert search(client, "Weg 3").status_code == 429


@pytest.mark.parametrize("limiter", sorted(LIMITERS))
def test_rejected_requests_never_count_as_successes(
    limiter: str, server: ProviderSimulator, client: httpx.Client, clock: FakeClock
) -> None:
    server.configure(limiter=limiter, rate_limit=1.0, burst=0, daily_cap=2)
    codes = []
    for offset in (0.0, 0.0, 0.0, 100.0, 200.0):
        clock.set(offset)
        codes.append(search(client, VADUZ).status_code)
    assert codes == [200, 429, 429, 200, 402]


def test_switching_limiters_at_run_time(
    server: ProviderSimulator, client: httpx.Client, clock: FakeClock
) -> None:
    server.set_rate_limit(1.0, limiter="gcra", burst=2)
    assert [search(client, VADUZ).status_code for _ in range(4)] == [200, 200, 200, 429]
    server.burst = 3  # same limiter: the history stays
    assert [search(client, VADUZ).status_code for _ in range(2)] == [200, 429]
    server.limiter = "token-bucket"  # another kind: a fresh state
    assert server.limiter == "token-bucket" and server.burst == 3
    assert [search(client, VADUZ).status_code for _ in range(4)] == [200, 200, 200, 429]
    server.set_rate_limit(None)
    assert search(client, VADUZ).status_code == 200
    with pytest.raises(ValueError):
        server.limiter = "polite"  # type: ignore[assignment]
    with pytest.raises(ValueError):
        server.burst = -1
    assert server.limiter == "token-bucket"


@pytest.mark.parametrize(("limiter", "burst"), [("gcra", 4), ("token-bucket", 5),
                                                ("fixed-window", None), ("sliding-log", None)])
def test_limit_holds_under_concurrency(
    limiter: str, burst: int | None, server: ProviderSimulator, client: httpx.Client,
    clock: FakeClock,
) -> None:
    server.configure(limiter=limiter, rate_limit=5.0, burst=burst)  # frozen clock: 5 admitted
    statuses: list[int] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        for i in range(4):
            code = search(client, f"Weg {n}-{i}", key="shared").status_code
            with lock:
                statuses.append(code)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200] * 5 + [429] * 19
