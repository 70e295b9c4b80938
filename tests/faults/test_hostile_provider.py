"""The fault suite: a hostile provider and hostile input, end to end on real loopback servers.

Each scenario runs a whole batch (``df.geocode.run``) against the simulator's faults and
checks what a batch that runs overnight on a shared key needs: every input row ends
matched, no_match or failed-with-reason; rows finished before the fault are in the
cache; nothing waits past its deadline (deadlines are small here, so a hang would fail
the test by its pytest timeout guard, not by a timing assertion); the API key appears
in no result, cache file, output file, log record or exception text.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from geotoolkit import ProviderUnavailableError
from geotoolkit.errors import AuthenticationError
from geotoolkit.export import write_results
from geotoolkit.policy import Backoff
from geotoolkit.providers import PROVIDERS, Nominatim, get_provider
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

pytestmark = pytest.mark.faults

SECRET = "sk-fault-0123456789abcdef-key"
UA = "geotoolkit-faults/1.0 (tests@example.org)"
GOOD = [k.address for k in KNOWN_ADDRESSES[:4]]
FAST = {"request_deadline_seconds": 1.0, "max_attempts": 2, "rate": 200.0, "concurrency": 4,
        "backoff": Backoff(initial_seconds=0.01, max_seconds=0.05, retry_after_cap_seconds=0.1),
        "gate": "memory://",
        "max_response_bytes": 200_000}


@pytest.fixture
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator(valid_keys={SECRET}, trickle_interval_seconds=0.2,
                           huge_body_bytes=2_000_000, hang_seconds=5.0) as simulator:
        yield simulator


def run(sim: ProviderSimulator, addresses: list[Any], cache: Path, **options: Any) -> pd.DataFrame:
    provider = Nominatim(sim.url, user_agent=UA, api_key=SECRET)
    frame = pd.DataFrame({"address": pd.Series(addresses, dtype=object)})
    settings = {**FAST, **options}
    return frame.geocode.run(provider=provider, cache=f"sqlite:///{cache}", progress=False,
                             **settings)


def assert_settled(result: pd.DataFrame, rows: int) -> None:
    assert len(result) == rows
    assert set(result["geocode_status"]) <= {"matched", "no_match", "failed"}
    failed = result[result["geocode_status"] == "failed"]
    assert failed["geocode_reason"].str.len().gt(0).all()


def assert_no_secret(*blobs: str | bytes) -> None:
    for blob in blobs:
        data = blob.encode() if isinstance(blob, str) else blob
        assert SECRET.encode() not in data


def cached_keys(cache: Path) -> int:
    with sqlite3.connect(cache) as db:
        return int(db.execute("SELECT count(*) FROM results").fetchone()[0])


HOSTILE = ["#trickle", "#trickleheaders", "#huge", "#badgzip", "#overflow", "#bignum",
           "#echo400", "#resetbody", "#html", "#status=418", "#status=504", "#malformed", "#reset"]
#: 429s with hostile Retry-After headers: a 429 is never a verdict on a row, so these
#: rows match once the server stops throttling (three times here).
THROTTLING = ["#retryafterhugex3", "#retryafterjunkx3"]


@pytest.mark.parametrize("token", HOSTILE)
def test_one_hostile_answer_fails_one_row_and_the_batch_goes_on(
        sim: ProviderSimulator, tmp_path: Path, token: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    addresses = [GOOD[0], f"Landstrasse 1, 9490 Vaduz {token}", GOOD[1], GOOD[2]]
    cache = tmp_path / "cache.sqlite"
    result = run(sim, addresses, cache)
    assert_settled(result, len(addresses))
    others = result.drop(index=1)
    assert (others["geocode_status"] == "matched").all()  # the rows around it are fine
    assert cached_keys(cache) >= 3  # finished rows are in the cache
    out = tmp_path / "out.gpkg"
    write_results(result, out)
    assert_no_secret(result.to_csv(), cache.read_bytes(), out.read_bytes(), caplog.text)


@pytest.mark.parametrize("token", THROTTLING)
def test_a_hostile_retry_after_slows_the_row_down_and_never_fails_it(
        sim: ProviderSimulator, tmp_path: Path, token: str) -> None:
    result = run(sim, [GOOD[0], f"{GOOD[1]} {token}", GOOD[2]], tmp_path / "c.sqlite")
    assert (result["geocode_status"] == "matched").all()
    assert result["geocode_attempts"].tolist() == [1, 4, 1]


def test_a_trickling_server_is_a_timeout_then_a_retry_not_a_hang(sim: ProviderSimulator,
                                                                 tmp_path: Path) -> None:
    result = run(sim, [f"{GOOD[0]} #trickle", GOOD[1]], tmp_path / "c.sqlite")
    row = result.iloc[0]
    assert row["geocode_status"] == "failed" and "deadline" in row["geocode_reason"]
    assert row["geocode_attempts"] == 2
    trickled = [r for r in sim.requests if r.query and "#trickle" in r.query]
    assert len(trickled) == 2  # timed out, retried, timed out


def test_a_huge_answer_fails_its_row_without_reading_it(sim: ProviderSimulator, tmp_path: Path) -> None:
    result = run(sim, [f"{GOOD[0]} #huge"], tmp_path / "c.sqlite")
    row = result.iloc[0]
    assert row["geocode_status"] == "failed" and "more than 200,000 bytes" in row["geocode_reason"]
    assert len(row["geocode_label"]) == 0


@pytest.mark.parametrize("address", [
    "Landstrasse " + "9" * 70_000, "Vad" + chr(0xDCFC) + "uz", pd.NA, None, "Vaduz\x00", "  ",
], ids=["64kb", "surrogate", "pd.NA", "None", "nul", "blank"])
def test_input_that_cannot_be_sent_is_refused_before_any_request(
        sim: ProviderSimulator, tmp_path: Path, address: Any) -> None:
    cache = tmp_path / "c.sqlite"
    result = run(sim, [GOOD[0], address, GOOD[1]], cache)
    assert_settled(result, 3)
    assert result["geocode_status"].tolist() == ["matched", "failed", "matched"]
    assert len(sim.requests) == 2  # the bad row never reached the network
    reason = result["geocode_reason"].iloc[1]
    assert reason and "NAType" not in reason
    if address is pd.NA or address is None:
        assert reason == "missing address"
    assert write_results(result, tmp_path / "out.gpkg") == (2, 1)  # the export holds it too


def test_a_provider_that_refuses_connections_ends_with_a_clear_error_and_keeps_finished_rows(
        sim: ProviderSimulator, tmp_path: Path) -> None:
    cache = tmp_path / "c.sqlite"
    run(sim, GOOD[:2], cache)  # settled before the outage
    sim.outage("refuse")
    with pytest.raises(ProviderUnavailableError, match="unreachable") as info:
        run(sim, [*GOOD[:2], *(f"Teststrasse {i}, 9490 Vaduz" for i in range(40))], cache,
            circuit_failures=3, circuit_timeout_seconds=2.0)
    assert_no_secret(str(info.value))
    assert cached_keys(cache) == 2  # what was finished before is still there


def test_a_provider_that_resets_connections_ends_saying_so(sim: ProviderSimulator,
                                                          tmp_path: Path) -> None:
    """httpx's ReadError for a reset says nothing: the error and the rows' reasons said
    "connection failed (ReadError)", not what the OSError under it says."""
    sim.outage("reset")
    with pytest.raises(ProviderUnavailableError, match="unreachable") as info:
        run(sim, [f"Teststrasse {i}, 9490 Vaduz" for i in range(8)], tmp_path / "c.sqlite",
            circuit_failures=3, circuit_timeout_seconds=1.0)
    assert "Connection reset by peer)" in str(info.value)  # "(ReadError: [Errno 104] ...)"
    assert_no_secret(str(info.value))


def test_a_provider_that_answers_nothing_but_503_ends_with_a_clear_error_and_keeps_finished_rows(
        sim: ProviderSimulator, tmp_path: Path) -> None:
    # A backend down behind a proxy answers 503 for ever (here 60 times, seconds longer
    # than the bound): throttling, never a verdict on the rows, so only the bound on
    # refusals with no answer ends the batch.
    cache = tmp_path / "c.sqlite"
    with pytest.raises(ProviderUnavailableError, match=r"nothing but refusals \(HTTP 503\)") as info:
        run(sim, [*GOOD[:3], "Teststrasse 1, 9490 Vaduz #503x60"], cache, concurrency=1,
            circuit_timeout_seconds=0.5)
    assert_no_secret(str(info.value))
    assert cached_keys(cache) == 3  # the rows answered before it are kept
    refused = [r for r in sim.requests if r.status == 503]
    assert len(refused) >= 2  # it waited and asked again before it gave up


def test_a_provider_that_comes_back_lets_the_batch_finish(sim: ProviderSimulator,
                                                          tmp_path: Path) -> None:
    sim.outage("reset")
    addresses = [f"Teststrasse {i}, 9490 Vaduz" for i in range(12)]
    threading.Timer(1.5, lambda: sim.outage(None)).start()  # the provider returns
    result = run(sim, addresses, tmp_path / "c.sqlite", circuit_failures=3,
                 circuit_timeout_seconds=60.0, max_attempts=3)
    assert (result["geocode_status"] == "matched").all()
    reset = [r for r in sim.requests if r.status == 0]
    assert len(reset) < 12  # a few failures and probes, not attempts for every row


#: Providers given the key (the simulator asks it of those that take one).
KEYED = {"arcgis", "google", "here", "locationiq", "mapbox", "nominatim", "opencage", "pelias"}


def _provider(sim: ProviderSimulator, name: str) -> Any:
    key = {"api_key": SECRET} if name in KEYED else {}
    return get_provider(name, base_url=sim.base_url(name), user_agent=UA, **key)


@pytest.mark.parametrize("status", [408, 425])
@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_a_not_now_status_in_the_providers_own_error_form_is_retried(
        sim: ProviderSimulator, tmp_path: Path, name: str, status: int) -> None:
    """A 408 or 425 says "not now", not "not this query": the Census (408, 425) and
    OpenCage (425) read one whose body carries their error form as the query refused, and
    the row failed at once with "rejected the query"."""
    address = f"{KNOWN_ADDRESSES[0].address} #status={status}x1"
    frame = pd.DataFrame({"address": [address]})
    result = frame.geocode.run(provider=_provider(sim, name), cache=f"sqlite:///{tmp_path / 'c.sqlite'}",
                               progress=False, batch_size=1, **FAST)
    assert result["geocode_status"].tolist() == ["matched"], result["geocode_reason"].tolist()
    assert result["geocode_attempts"].tolist() == [2]


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_a_proxys_407_in_the_providers_own_error_form_stops_the_run(
        sim: ProviderSimulator, tmp_path: Path, name: str) -> None:
    """A 407 wants the proxy's credentials: no row's fault. One whose body carried the
    Census's or OpenCage's error form failed every row as "rejected the query"."""
    frame = pd.DataFrame({"address": [f"{KNOWN_ADDRESSES[1].address} #status=407", GOOD[2]]})
    with pytest.raises(AuthenticationError, match=r"proxy .*HTTP 407") as info:
        frame.geocode.run(provider=_provider(sim, name), cache=None, progress=False,
                          batch_size=1, **{**FAST, "concurrency": 1})
    assert_no_secret(str(info.value))
