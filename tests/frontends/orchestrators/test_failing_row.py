"""Non-blocking mode settles every row, even one the provider always fails.

A row answered HTTP 500 every time backs off between its attempts; in non-blocking mode a
backoff longer than the budget ends the run with ``RateLimitError(retry_after)``. Its
attempts are kept in the cache (``AttemptLog``), so each rerun goes on from there and after
``max_attempts`` in all the row is failed and the batch returns, on every store backend.
The simulator and the engine share one fake clock: "the orchestrator waits retry_after"
is ``clock.advance(retry_delay(exc))``.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from geotoolkit import FakeClock, Match, MemoryGate, Query, RateLimitError, RatePolicy, geocode
from geotoolkit.frontends.orchestrators import retry_delay
from geotoolkit.providers import Nominatim
from geotoolkit.results import Failure, Outcome
from geotoolkit.store import MemoryStore, SQLiteStore, StoreError
from geotoolkit.store.base import Attempts
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

UA = "geotoolkit-tests/1.0 (tests@example.org)"
GOOD = [k.address for k in KNOWN_ADDRESSES[:3]]
BAD = "Nowhere 1, Vaduz #status=500"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1_790_000_000.0)


@pytest.fixture
def sim(clock: FakeClock) -> Iterator[ProviderSimulator]:
    with ProviderSimulator(clock=clock.now) as simulator:
        yield simulator


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, clock: FakeClock, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        opened: Any = MemoryStore(clock=clock)
    elif request.param == "sqlite":
        opened = SQLiteStore(tmp_path / "cache.sqlite", clock=clock)
    else:
        from geotoolkit.store.postgres import PostgresStore

        opened = PostgresStore(request.getfixturevalue("schema_dsn"), clock=clock)
    yield opened
    opened.close()


def _options(sim: ProviderSimulator, clock: FakeClock, cache: Any, **more: Any) -> dict[str, Any]:
    options = {"provider": Nominatim(sim.url, user_agent=UA), "gate": MemoryGate(clock=clock),
               "rate": RatePolicy(rate=50.0, safety_margin=0.0), "clock": clock, "cache": cache,
               "max_wait_seconds": 0.5, "concurrency": 2, "rng": random.Random(7)}
    options.update(more)
    return options


def _loop(addresses: list[str], options: dict[str, Any], clock: FakeClock,
          runs: int = 30) -> tuple[int, list[Outcome], list[float]]:
    """Run non-blocking until a run returns, waiting each ``retry_after`` (as an
    orchestrator does): (runs it took, the outcomes, the delays asked)."""
    return _until_done(lambda: geocode(addresses, **options), clock, runs)


def _until_done(run: Callable[[], Any], clock: FakeClock,
                runs: int = 30) -> tuple[int, Any, list[float]]:
    delays: list[float] = []
    for n in range(1, runs + 1):
        try:
            return n, run(), delays
        except RateLimitError as exc:
            delay = retry_delay(exc)
            assert delay is not None
            delays.append(delay)
            clock.advance(delay)
    raise AssertionError(f"still raising after {runs} runs (delays {delays})")


def _statuses(sim: ProviderSimulator) -> Counter[tuple[str, int]]:
    return Counter((r.params["q"], r.status) for r in sim.requests)


def _key(sim: ProviderSimulator, address: str) -> str:
    return f"{Nominatim(sim.url, user_agent=UA).cache_namespace()}:{Query(text=address).key()}"


def test_a_row_the_provider_always_fails_ends_failed_after_max_attempts_in_all(
        sim: ProviderSimulator, clock: FakeClock, store: Any) -> None:
    options = _options(sim, clock, store)
    runs, outcomes, delays = _loop([*GOOD, BAD], options, clock)
    assert 2 <= runs <= 6 and len(delays) == runs - 1  # it raised at least once, then ended
    *good, bad = outcomes
    assert all(isinstance(o, Match) and o.attempts == 1 for o in good)
    assert isinstance(bad, Failure) and bad.attempts == 6
    assert bad.reason.startswith("gave up after 6 attempts: ") and "HTTP 500" in bad.reason
    sent = _statuses(sim)
    assert sent[(BAD, 500)] == 6  # six attempts in all, over the runs
    assert all(sent[(a, 200)] == 1 for a in GOOD)  # settled rows came from the cache
    assert store.get_attempts([_key(sim, BAD)]) == {}  # the batch ended: forgotten

    # A fresh run (the batch ended) tries the failed row from its first attempt again.
    fresh = _options(sim, clock, store, rng=random.Random(1))
    with pytest.raises(RateLimitError):
        geocode([*GOOD, BAD], **fresh)
    kept = store.get_attempts([_key(sim, BAD)])[_key(sim, BAD)]
    assert _statuses(sim)[(BAD, 500)] == 6 + kept.attempts and 1 <= kept.attempts < 6


def test_the_accessor_ends_the_same_way(sim: ProviderSimulator, clock: FakeClock,
                                        tmp_path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame({"address": [*GOOD, BAD]})
    options = _options(sim, clock, f"sqlite:///{tmp_path}/results.sqlite", progress=False)
    runs, result, _ = _until_done(lambda: frame.geocode.run("address", **options), clock)
    assert 2 <= runs <= 6
    assert list(result["geocode_status"]) == ["matched"] * 3 + ["failed"]
    assert result["geocode_attempts"].iloc[-1] == 6 and _statuses(sim)[(BAD, 500)] == 6


def test_the_rerun_waits_out_the_rows_backoff_and_retry_after_covers_it(
        sim: ProviderSimulator, clock: FakeClock, store: Any) -> None:
    options = _options(sim, clock, store, rng=random.Random(2), max_attempts=4)
    with pytest.raises(RateLimitError) as first:
        geocode([BAD], **options)
    kept = store.get_attempts([_key(sim, BAD)])[_key(sim, BAD)]
    assert first.value.retry_after == pytest.approx(kept.not_before - clock.now())
    before = len(sim.requests)
    clock.advance(0.25)  # an orchestrator that came back too early: nothing is sent
    with pytest.raises(RateLimitError) as early:
        geocode([BAD], **options)
    assert len(sim.requests) == before
    assert early.value.retry_after == pytest.approx(kept.not_before - clock.now())
    clock.advance(early.value.retry_after or 0.0)  # on time: the next attempt goes out
    _runs, (outcome,), _ = _loop([BAD], options, clock)
    assert isinstance(outcome, Failure) and outcome.attempts == 4
    assert _statuses(sim)[(BAD, 500)] == 4


def test_attempts_add_up_to_a_match_and_429s_never_count(
        sim: ProviderSimulator, clock: FakeClock, store: Any) -> None:
    flaky = "Nowhere 2, Vaduz #status=500x2"  # two 500s, then an answer
    throttled = f"{GOOD[0]} #429x3"  # three 429s: a wait each, never an attempt
    options = _options(sim, clock, store, max_attempts=3, rng=random.Random(5))
    _runs, outcomes, _ = _loop([flaky, throttled], options, clock)
    assert [o.status for o in outcomes] == ["no_match", "matched"]  # no row failed
    assert outcomes[0].attempts == 3  # sent over the runs: 500, 500, the answer
    sent = _statuses(sim)
    assert sent[(flaky, 500)] == 2 and sent[(throttled, 429)] == 3


def test_a_chain_keeps_every_stages_attempts_until_the_whole_batch_ends(
        sim: ProviderSimulator, clock: FakeClock, tmp_path: Path) -> None:
    """A row both providers fail: the first stage's part ends before the second raises, and
    its counts stay until the chain returns (else each rerun would start it over)."""
    with ProviderSimulator(clock=clock.now) as second:
        chain = [Nominatim(sim.url, user_agent=UA, rate=50.0),
                 Nominatim(second.url, user_agent=UA, rate=50.0)]
        options = _options(sim, clock, SQLiteStore(tmp_path / "c.sqlite", clock=clock),
                           provider=chain, rate=None, fallback_on=("failed",), max_attempts=3)
        _runs, (*good, bad), _ = _loop([*GOOD, BAD], options, clock)
        options["cache"].close()
        assert _statuses(sim)[(BAD, 500)] == 3 and _statuses(second)[(BAD, 500)] == 3
    assert all(o.status == "matched" for o in good)
    assert isinstance(bad, Failure) and bad.attempts == 6


def test_a_batch_the_provider_always_fails_is_split_across_runs_and_ends(
        sim: ProviderSimulator, clock: FakeClock) -> None:
    """Census's batch endpoint: the poison row fails the whole batch (HTTP 500). The batch's
    attempts are kept too (under a digest of its rows' keys), so reruns go on to split it,
    settle the other rows and give the poison row its own attempts alone."""
    from geotoolkit.providers import Census

    addresses = [*GOOD, *(k.address for k in KNOWN_ADDRESSES[3:6]), "Nowhere 1, Vaduz #poison"]
    options = _options(sim, clock, MemoryStore(clock=clock), provider=Census(sim.url),
                       concurrency=1)
    _runs, outcomes, _ = _loop(addresses, options, clock)
    *good, poison = outcomes
    assert all(isinstance(o, Match) for o in good)
    assert isinstance(poison, Failure) and poison.reason.startswith("gave up after 6 attempts")
    sent = Counter((r.path, r.rows, r.status) for r in sim.requests)
    assert sent[("/locations/addressbatch", 7, 500)] == 6  # the whole batch: 6 attempts in all
    assert sent[("/locations/onelineaddress", None, 500)] == 6  # then the poison row alone


class Watched(FakeClock):
    """A fake clock that, as the engine sleeps, reads what the store keeps of a row."""

    def __init__(self, store: Any, key: Callable[[], str]) -> None:
        super().__init__(start=1_790_000_000.0)
        self.store, self.key, self.seen = store, key, []  # type: ignore[var-annotated]

    async def sleep(self, seconds: float) -> None:
        if seconds > 0.05:  # a backoff, not the fleet sampler's tick
            kept = self.store.get_attempts([self.key()]).get(self.key())
            self.seen.append(None if kept is None else kept.attempts)
        await super().sleep(seconds)


def test_each_failed_attempt_is_kept_before_the_backoff(tmp_path: Path) -> None:
    """Blocking mode too: a kill during a backoff loses no attempt made."""
    store = SQLiteStore(tmp_path / "cache.sqlite")
    try:
        with ProviderSimulator() as sim:
            key = _key(sim, BAD)
            clock = Watched(store, lambda: key)
            options = _options(sim, clock, store, max_wait_seconds=None, max_attempts=4)
            (outcome,) = geocode([BAD], **options)
        assert isinstance(outcome, Failure) and outcome.attempts == 4
        assert [n for n in clock.seen if n is not None] == [1, 2, 3]  # one per backoff
        assert store.get_attempts([key]) == {}
    finally:
        store.close()


class NoLog:
    """A store of one's own: results only, no attempt log."""

    blocking = False

    def __init__(self) -> None:
        self.inner = MemoryStore()

    def get_many(self, keys: Sequence[str]) -> Mapping[str, Outcome]:
        return self.inner.get_many(keys)

    def put(self, key: str, outcome: Outcome) -> None:
        self.inner.put(key, outcome)


class BrokenLog(NoLog):
    """A store whose attempt log fails (a read-only table, a server gone)."""

    def get_attempts(self, keys: Sequence[str]) -> Mapping[str, Attempts]:
        raise StoreError("attempts table is read-only", backend="test")

    def put_attempts(self, key: str, attempts: Attempts) -> None:
        raise StoreError("attempts table is read-only", backend="test")

    def clear_attempts(self, keys: Sequence[str]) -> None:
        raise StoreError("attempts table is read-only", backend="test")


@pytest.mark.parametrize("kind", [NoLog, BrokenLog])
def test_a_store_without_a_working_attempt_log_still_settles_and_keeps_rows(
        sim: ProviderSimulator, clock: FakeClock, kind: type[NoLog],
        caplog: pytest.LogCaptureFixture) -> None:
    cache = kind()
    options = _options(sim, clock, cache, max_wait_seconds=None, max_attempts=3)
    with caplog.at_level(logging.WARNING, logger="geotoolkit.engine"):
        outcomes = geocode([*GOOD, BAD], **options)
    assert [o.status for o in outcomes] == ["matched"] * 3 + ["failed"]
    assert set(cache.inner.get_many([_key(sim, a) for a in GOOD])) == {_key(sim, a) for a in GOOD}
    warned = [r for r in caplog.records if "rows' attempts" in r.getMessage()]
    assert len(warned) == (1 if kind is BrokenLog else 0)  # once, not for every row


@pytest.mark.postgres
def test_a_worker_who_may_not_create_the_log_still_settles_and_keeps_rows(
        sim: ProviderSimulator, clock: FakeClock, schema_dsn: str, dml_only: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    """A team cache made by an earlier version (no attempt log yet), a worker who may only
    read and write its tables: rows are cached as before; counts stay in the run."""
    import psycopg

    from geotoolkit.pgschema import schema_mark
    from geotoolkit.store import postgres
    from geotoolkit.store.postgres import PostgresStore

    v2_mark = schema_mark("geotoolkit cache schema", (postgres._SCHEMA, postgres._MIGRATE))
    with psycopg.connect(schema_dsn, autocommit=True) as conn:  # as an earlier version made it
        conn.execute(postgres._SCHEMA)
        conn.execute(f"COMMENT ON TABLE {postgres.TABLE} IS '{v2_mark}'")
    owner = PostgresStore(schema_dsn)
    try:
        with dml_only(schema_dsn) as dsn:
            worker = PostgresStore(dsn, clock=clock, timeout_seconds=2.0)
            options = _options(sim, clock, worker, max_wait_seconds=None, max_attempts=2)
            try:
                with caplog.at_level(logging.WARNING, logger="geotoolkit.engine"):
                    outcomes = geocode([*GOOD, BAD], **options)
            finally:
                worker.close()
        assert [o.status for o in outcomes] == ["matched"] * 3 + ["failed"]
        assert len(owner.get_many([_key(sim, a) for a in GOOD])) == 3
        assert len([r for r in caplog.records if "rows' attempts" in r.getMessage()]) == 1
    finally:
        owner.close()


def test_the_cli_exits_75_until_the_failing_row_is_spent_then_0(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """End to end on loopback: a cron loop that waits each ``retry_after`` ends with exit 0
    and the row in the dead letters. The wall clock is moved on by ``retry_after`` between
    runs (``SystemClock`` read ahead), not slept."""
    import geopandas as gpd
    import pandas as pd

    from geotoolkit.clock import SystemClock
    from geotoolkit.frontends.cli import EX_TEMPFAIL, main

    ahead = [0.0]
    real_now = SystemClock.now
    monkeypatch.setattr(SystemClock, "now", lambda self: real_now(self) + ahead[0])
    source, target = tmp_path / "addresses.csv", tmp_path / "out.parquet"
    pd.DataFrame({"address": [*GOOD, BAD]}).to_csv(source, index=False)
    codes = []
    with ProviderSimulator() as sim:
        args = ["geocode", str(source), "-o", str(target), "--user-agent", UA, "--base-url",
                sim.url, "--rate", "unlimited", "--max-wait-seconds", "0", "--max-attempts", "4",
                "--progress", "none", "--gate", "memory://",
                "--cache", f"sqlite:///{tmp_path}/results.sqlite"]
        for _ in range(10):
            codes.append(main(args))
            err = capsys.readouterr().err
            if codes[-1] != EX_TEMPFAIL:
                break
            ahead[0] += float(err.split("retry_after=")[-1].split()[0])  # cron comes back then
        sent = _statuses(sim)
    # every backoff is over the budget of 0: one attempt per run
    assert codes == [EX_TEMPFAIL] * 3 + [0]
    assert sent[(BAD, 500)] == 4 and all(sent[(a, 200)] == 1 for a in GOOD)
    back = gpd.read_parquet(target)
    assert list(back["geocode_status"]) == ["matched"] * 3 + ["failed"]
    assert back["geocode_reason"].iloc[-1].startswith("gave up after 4 attempts: ")
    assert back["geocode_attempts"].iloc[-1] == 4
