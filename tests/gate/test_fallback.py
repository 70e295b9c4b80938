"""FallbackGate: degrade to slower local pacing when the store is down, then recover."""

from __future__ import annotations

import logging
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from geotoolkit.clock import FakeClock
from geotoolkit.errors import ConfigurationError, GateError, QuotaExceededError
from geotoolkit.gate import (
    Cap,
    Claim,
    FleetStats,
    Gate,
    GateState,
    MemoryGate,
    Report,
    Reservation,
    Usage,
    gate_key,
)
from geotoolkit.gate.base import Period
from geotoolkit.gate.fallback import FallbackGate, GateUnavailableWarning
from geotoolkit.gate.fleet import AIMD, AimdState
from geotoolkit.gate.redis import RedisGate
from geotoolkit.gate.strategy import fleet_key

KEY = gate_key("api.example.com", "sk-test")


class FlakyGate:
    """A MemoryGate whose store can be switched off: every call then raises GateError."""

    backend = "flaky"
    blocking = True

    def __init__(self, clock: FakeClock) -> None:
        self.store = MemoryGate(clock=clock)
        self.down = False
        self.calls = 0
        self.closed = False

    def _call(self) -> None:
        self.calls += 1
        if self.down:
            raise GateError("the flaky store is down", backend="flaky")

    def reserve(self, key: str, interval: float, horizon: float = 60.0, *,
                report: Report | None = None, cap: Cap | None = None,
                **pace: Any) -> Reservation:
        self._call()
        return self.store.reserve(key, interval, horizon, report=report, cap=cap, **pace)

    def acquire(self, key: str, interval: float, horizon: float = 60.0) -> float:
        return self.reserve(key, interval, horizon).wait

    def claim(self, key: str, interval: float) -> Claim:
        self._call()
        return self.store.claim(key, interval)

    def pause(self, key: str, seconds: float, **kwargs: Any) -> float:
        self._call()
        return self.store.pause(key, seconds, **kwargs)

    def state(self, key: str) -> GateState:
        self._call()
        return self.store.state(key)

    def record(self, key: str, report: Report, **kwargs: Any) -> FleetStats:
        self._call()
        return self.store.record(key, report, **kwargs)

    def stats(self, key: str) -> FleetStats:
        self._call()
        return self.store.stats(key)

    def usage(self, key: str, period: Period = "day") -> Usage:
        self._call()
        return self.store.usage(key, period)

    def set_value(self, key: str, name: str, value: str, **kwargs: Any) -> bool:
        self._call()
        return self.store.set_value(key, name, value, **kwargs)

    def values(self, key: str, prefix: str = "") -> dict[str, str]:
        self._call()
        return self.store.values(key, prefix)

    def delete_value(self, key: str, name: str, **kwargs: Any) -> bool:
        self._call()
        return self.store.delete_value(key, name, **kwargs)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_a_healthy_inner_gate_is_used_as_is(clock: FakeClock) -> None:
    inner = FlakyGate(clock)
    gate = FallbackGate(inner, clock=clock)
    assert isinstance(gate, Gate)
    assert [gate.acquire(KEY, 1.0) for _ in range(3)] == [0.0, 1.0, 2.0]
    assert gate.pause(KEY, 10.0) == 10.0
    assert gate.state(KEY) == inner.store.state(KEY)
    assert not gate.degraded
    assert gate.backend == "flaky"
    assert gate.blocking
    gate.close()
    assert inner.closed


def test_an_unreachable_redis_degrades_to_local_pacing_with_one_warning(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    gate = FallbackGate(
        RedisGate("redis://:hunter2@127.0.0.1:1/0"), share=0.25, clock=clock, retry_seconds=5.0
    )
    try:
        # as the engine calls a gate: in a worker thread
        with pytest.warns(GateUnavailableWarning, match="redis") as record, ThreadPoolExecutor(1) as pool:
            assert pool.submit(gate.acquire, KEY, 1.0).result() == 0.0
        assert len(record) == 1
        assert record[0].filename == "geotoolkit.gate"  # not concurrent/futures/thread.py
        assert "hunter2" not in str(record[0].message)
        assert gate.degraded
        assert gate.backend == "redis (fallback: local)"
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no second warning, retries included
            # Paced at interval / share: 4 s apart instead of 1 s.
            assert gate.acquire(KEY, 1.0) == 4.0
            assert gate.acquire(KEY, 1.0) == 8.0
            clock.advance(6.0)  # past retry_seconds: Redis is tried again, still down
            assert gate.acquire(KEY, 1.0) == 6.0
            assert gate.degraded
            # A pause is honoured locally.
            assert gate.pause(KEY, 30.0) == 30.0
            assert gate.acquire(KEY, 1.0) == 30.0
            assert gate.state(KEY).pause_remaining == 30.0
        warned = [r for r in caplog.records if r.name == "geotoolkit.gate"]
        assert [r.levelno for r in warned if r.levelno >= logging.WARNING] == [logging.WARNING]
        assert "hunter2" not in caplog.text
    finally:
        gate.close()


def test_recovery_resumes_the_inner_gate_and_publishes_local_pauses(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    inner = FlakyGate(clock)
    gate = FallbackGate(inner, share=0.5, clock=clock, retry_seconds=5.0)
    inner.down = True
    with pytest.warns(GateUnavailableWarning):
        assert gate.acquire(KEY, 2.0) == 0.0
    assert gate.acquire(KEY, 2.0) == 4.0  # 2 s / 0.5
    assert gate.pause(KEY, 30.0) == 30.0  # decided while degraded
    inner.down = False
    calls = inner.calls
    # Not retried before retry_seconds have passed.
    assert gate.acquire(KEY, 2.0) == 30.0
    assert inner.calls == calls
    assert gate.degraded
    clock.advance(5.0)
    # The store answers: the local pause is published first, then the slot is reserved.
    assert gate.acquire(KEY, 2.0) == 25.0
    assert not gate.degraded
    assert gate.backend == "flaky"
    assert inner.store.state(KEY).pause_remaining == 25.0
    assert gate.acquire(KEY, 2.0) == 27.0  # back to the full rate
    assert "reachable again" in caplog.text


def test_it_degrades_again_and_warns_again_after_a_recovery(clock: FakeClock) -> None:
    inner = FlakyGate(clock)
    gate = FallbackGate(inner, clock=clock, retry_seconds=1.0)
    inner.down = True
    with pytest.warns(GateUnavailableWarning):
        gate.state(KEY)
    inner.down = False
    clock.advance(1.0)
    gate.state(KEY)
    assert not gate.degraded
    inner.down = True
    with pytest.warns(GateUnavailableWarning):
        gate.pause(KEY, 1.0)
    assert gate.degraded


def test_errors_other_than_gate_errors_propagate(clock: FakeClock) -> None:
    gate = FallbackGate(FlakyGate(clock), clock=clock)
    with pytest.raises(ConfigurationError):
        gate.acquire(KEY, float("nan"))
    assert not gate.degraded


@pytest.mark.parametrize(
    "kwargs",
    [{"share": 0.0}, {"share": 1.5}, {"share": float("nan")}, {"retry_seconds": -1.0}],
)
def test_bad_settings_are_configuration_errors(clock: FakeClock, kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        FallbackGate(FlakyGate(clock), clock=clock, **kwargs)


def test_a_cap_still_holds_while_degraded(clock: FakeClock) -> None:
    inner = FlakyGate(clock)
    gate = FallbackGate(inner, clock=clock)
    for used in (1, 2, 3):
        reservation = gate.reserve(KEY, 0.0, cap=Cap(5))
        assert reservation.usage is not None and reservation.usage.used == used
    inner.down = True
    with pytest.warns(GateUnavailableWarning):
        assert gate.reserve(KEY, 0.0, cap=Cap(5)).usage.used == 4  # type: ignore[union-attr]
    assert gate.reserve(KEY, 0.0, cap=Cap(5)).usage.used == 5  # type: ignore[union-attr]
    with pytest.raises(QuotaExceededError):
        gate.reserve(KEY, 0.0, cap=Cap(5))



def test_a_cap_in_a_zone_still_holds_while_degraded_on_its_own_count(clock: FakeClock) -> None:
    """The local gate goes on from the store's last count of the zone's day, not from the
    UTC cap's count on the same key."""
    inner = FlakyGate(clock)
    gate = FallbackGate(inner, clock=clock)
    zoned = Cap(3, tz="America/Los_Angeles")
    for _ in range(4):
        gate.reserve(KEY, 0.0, cap=Cap(5))
    gate.reserve(KEY, 0.0, cap=zoned)
    inner.down = True
    with pytest.warns(GateUnavailableWarning):
        usage = gate.reserve(KEY, 0.0, cap=zoned).usage
    assert usage is not None and (usage.used, usage.tz) == (2, "America/Los_Angeles")
    assert gate.reserve(KEY, 0.0, cap=zoned).usage.used == 3  # type: ignore[union-attr]
    with pytest.raises(QuotaExceededError, match="America/Los_Angeles"):
        gate.reserve(KEY, 0.0, cap=zoned)
    assert gate.reserve(KEY, 0.0, cap=Cap(5)).usage.used == 5  # type: ignore[union-attr]

def test_stats_and_heartbeats_are_served_locally_while_degraded(clock: FakeClock) -> None:
    inner = FlakyGate(clock)
    gate = FallbackGate(inner, clock=clock)
    gate.record(KEY, Report(requests=5, successes=5), worker="w")
    inner.down = True
    with pytest.warns(GateUnavailableWarning):
        local = gate.record(KEY, Report(requests=1, successes=1), worker="w")
    assert (local.requests, local.workers_active) == (1, 1)  # this process only
    assert gate.stats(KEY).requests == 1
    assert gate.usage(KEY).used == 0
    inner.down = False
    clock.advance(5.0)
    assert gate.stats(KEY).requests == 5  # the shared stats again
    assert not gate.degraded


def test_claims_are_spaced_locally_at_the_reduced_rate_while_degraded(clock: FakeClock) -> None:
    inner = FlakyGate(clock)
    gate = FallbackGate(inner, share=0.25, clock=clock)
    assert gate.claim(KEY, 1.0).wait == 0.0 and gate.claim(KEY, 1.0).wait == pytest.approx(1.0)
    inner.down = True
    with pytest.warns(GateUnavailableWarning):
        assert gate.claim(KEY, 1.0).wait == 0.0  # this process's own spacing, from now
    assert gate.claim(KEY, 1.0).wait == pytest.approx(4.0)  # a quarter of the rate
    assert gate.claim(KEY, 1.0).pause_remaining == 0.0


def test_a_push_spaces_the_next_claim_on_the_inner_gate_or_locally(clock: FakeClock) -> None:
    """A late send's push goes to the inner gate's ``push`` (a claim of its seconds on a gate
    without one), and to this process's own spacing while degraded."""
    with_push = FallbackGate(MemoryGate(clock=clock), clock=clock)
    assert with_push.claim(KEY, 1.0).wait == 0.0
    with_push.push(KEY, 0.5)
    assert with_push.claim(KEY, 1.0).wait == pytest.approx(1.5)
    inner = FlakyGate(clock)  # no push of its own
    gate = FallbackGate(inner, share=0.25, clock=clock)
    assert gate.claim(KEY, 1.0).wait == 0.0
    gate.push(KEY, 0.5)
    assert gate.claim(KEY, 1.0).wait == pytest.approx(1.5)
    inner.down = True
    with pytest.warns(GateUnavailableWarning):
        assert gate.claim(KEY, 1.0).wait == 0.0  # this process's own spacing, from now
    gate.push(KEY, 0.5)  # at a quarter of the rate: 2 s
    assert gate.claim(KEY, 1.0).wait == pytest.approx(4.0 + 2.0)


def test_shared_values_are_served_locally_while_degraded(clock: FakeClock) -> None:
    inner = FlakyGate(clock)
    gate = FallbackGate(inner, clock=clock, retry_seconds=5.0)
    assert gate.set_value(KEY, "breaker:state", "closed", ttl_seconds=60)
    assert gate.values(KEY) == {"breaker:state": "closed"}
    inner.down = True
    with pytest.warns(GateUnavailableWarning):
        assert gate.values(KEY) == {}  # this process's own values only
    assert gate.set_value(KEY, "breaker:probe", "me", ttl_seconds=60, only_if_absent=True)
    assert not gate.set_value(KEY, "breaker:probe", "other", ttl_seconds=60, only_if_absent=True)
    assert gate.delete_value(KEY, "breaker:probe", only_if="me")
    assert inner.store.values(KEY) == {"breaker:state": "closed"}  # the store saw none of it
    inner.down = False
    clock.advance(5.0)
    assert gate.values(KEY, "breaker:") == {"breaker:state": "closed"}  # the shared values again
    assert not gate.degraded
    assert gate.delete_value(KEY, "breaker:state", only_if="closed")
    assert inner.store.values(KEY) == {}


def test_open_gate_wraps_server_gates_in_a_fallback() -> None:
    from geotoolkit.gate import open_gate
    from geotoolkit.gate.postgres import PostgresGate

    for url, kind in (("redis://127.0.0.1:1/0", RedisGate),
                      ("postgresql://postgres@127.0.0.1:1/test", PostgresGate)):
        wrapped = open_gate(url)
        raw = open_gate(url, fallback=False)
        try:
            assert isinstance(wrapped, FallbackGate) and isinstance(wrapped.inner, kind)
            assert isinstance(raw, kind)
            assert wrapped.backend == raw.backend
        finally:
            wrapped.close()
            raw.close()
    assert isinstance(open_gate("memory://"), MemoryGate)  # nothing to fall back from


# -- a real Redis server, killed and restarted (``redis_server``: see conftest) -------


@pytest.mark.redis
def test_a_real_redis_outage_degrades_and_recovers(redis_server: Any, clock: FakeClock) -> None:
    tol = 0.25  # real time between two calls to the real server
    redis_server.start()
    gate = FallbackGate(RedisGate(redis_server.url), share=0.25, clock=clock, retry_seconds=5.0)
    try:
        assert gate.acquire(KEY, 1.0) == pytest.approx(0.0, abs=tol)
        assert gate.acquire(KEY, 1.0) == pytest.approx(1.0, abs=tol)
        assert gate.backend == "redis"

        redis_server.stop()  # mid-sequence
        with pytest.warns(GateUnavailableWarning):
            assert gate.acquire(KEY, 1.0) == 0.0  # served locally, on the fake clock
        assert gate.degraded
        assert gate.backend == "redis (fallback: local)"
        assert gate.acquire(KEY, 1.0) == 4.0
        assert gate.pause(KEY, 30.0) == 30.0

        redis_server.start()  # same port, empty (no persistence)
        assert gate.acquire(KEY, 1.0) == 30.0  # not retried before retry_seconds
        assert gate.degraded
        clock.advance(6.0)
        # Back on Redis: the pause decided while degraded was published there first.
        assert gate.acquire(KEY, 1.0) == pytest.approx(24.0, abs=tol)
        assert not gate.degraded
        assert gate.backend == "redis"
        assert gate.state(KEY).pause_remaining == pytest.approx(24.0, abs=tol)
    finally:
        gate.close()


def test_a_429s_refused_factor_reaches_the_inner_gate(clock: FakeClock) -> None:
    """The factor a refused send was spaced at is the inner gate's evidence (its ceiling)."""
    inner = MemoryGate(clock=clock)
    gate = FallbackGate(inner, clock=clock)
    gate.pause(KEY, 1.0, cause="429", rate_limited=True, factor=0.6)
    aimd = AimdState.from_text(inner.values(fleet_key(KEY)).get(AIMD))
    assert aimd.throttled_at is not None and aimd.ceiling == 0.6
    assert aimd.target == pytest.approx(0.6 * 0.98)  # climbs back to just under the refused pace


def test_an_inner_gate_whose_pause_predates_the_factor_is_paused_without_it(
        clock: FakeClock) -> None:
    class OldPause(FlakyGate):
        def pause(self, key: str, seconds: float, *, cause: str = "",  # type: ignore[override]
                  rate_limited: bool = False, report: Report | None = None) -> float:
            return super().pause(key, seconds, cause=cause, rate_limited=rate_limited,
                                 report=report)

    inner = OldPause(clock)
    gate = FallbackGate(inner, clock=clock)
    assert gate.pause(KEY, 2.0, cause="429", rate_limited=True, factor=0.6) == 2.0
    assert inner.calls == 1 and inner.state(KEY).pause_remaining == 2.0


def test_a_refused_resume_reaches_both_gates_and_cuts_neither(clock: FakeClock) -> None:
    """While degraded the claims (and their ``resumes``) come from the local gate: a
    refused first send after a pause counts there too, and cuts the pace on neither."""
    inner = FlakyGate(clock)
    gate = FallbackGate(inner, clock=clock)
    gate.pause(KEY, 0.0, cause="429", rate_limited=True, resumed=True)
    assert gate.claim(KEY, 1.0).resumes == 1 and gate.state(KEY).rate_factor == 1.0
    inner.down = True
    with pytest.warns(GateUnavailableWarning):
        gate.pause(KEY, 0.0, cause="429", rate_limited=True, resumed=True)
    claim = gate.claim(KEY, 1.0)
    assert claim.resumes == 2 and claim.rate_factor == 1.0


def test_a_429_event_is_logged_once_by_the_gate_that_decides_it(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """The local gate shadows every pause; its event is logged only while it decides
    (degraded), so a healthy fleet's DEBUG log has one line per event, the inner gate's."""
    inner = FlakyGate(clock)
    gate = FallbackGate(inner, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="geotoolkit.gate"):
        gate.pause(KEY, 1.0, cause="429", rate_limited=True, factor=1.0)
        healthy = [r.getMessage() for r in caplog.records if r.getMessage().startswith("429 event")]
        caplog.clear()
        clock.advance(5.0)
        inner.down = True
        with pytest.warns(GateUnavailableWarning):
            gate.pause(KEY, 1.0, cause="429", rate_limited=True)  # degrades in this call
        clock.advance(5.0)
        gate.pause(KEY, 1.0, cause="429", rate_limited=True, factor=1.0)
    degraded = [r.getMessage() for r in caplog.records if r.getMessage().startswith("429 event")]
    assert len(healthy) == 1 and healthy[0].startswith(f"429 event on {KEY} (memory gate)")
    assert inner.store.stats(KEY).rate_factor < 1.0  # the inner gate's cut, logged
    assert len(degraded) == 1  # the local gate's, deciding while degraded
    assert "sk-test" not in caplog.text


# -- a store that refuses a setting: no outage, the run stops ------------------------------------


def _elsewhere(url: str, *, db: str | None = None, user: str | None = None) -> str:
    """``url`` with another database (a Redis db index, a PostgreSQL database) or user."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    if user is not None:
        netloc = f"{user}@{netloc}"
    return urlunsplit(parts._replace(netloc=netloc, path=f"/{db}" if db else parts.path))


def _stops_the_run(url: str, match: str | None = None) -> GateError:
    """A gate on ``url`` refuses its first reservation for good: the ``GateError`` (matching
    ``match``), permanent, with no ``GateUnavailableWarning`` before it (no pacing alone at
    25 % meanwhile)."""
    from geotoolkit.gate import open_gate

    gate = open_gate(url)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", GateUnavailableWarning)
            with pytest.raises(GateError, match=match) as info:
                gate.reserve(KEY, 0.1)
    finally:
        gate.close()
    assert info.value.permanent
    return info.value


@pytest.mark.parametrize("setting", ["db index", "acl user"])
def test_a_redis_that_refuses_a_setting_stops_the_run_instead_of_pacing_alone(
        redis_url: str, setting: str) -> None:
    """A db index Redis does not have, or an ACL user it does not know, is no outage: the
    gate used to warn and pace this process alone at 25 % for the whole run (every worker
    on the key alike, none of them coordinated). The error is raised, before any send."""
    url = (_elsewhere(redis_url, db="99") if setting == "db index"
           else _elsewhere(redis_url, user="geotoolkit-nobody:hunter2pw"))
    error = _stops_the_run(url)
    assert "hunter2pw" not in str(error)


def test_a_postgres_database_that_does_not_exist_stops_the_run(postgres_dsn: str) -> None:
    if "://" not in postgres_dsn:
        pytest.skip("a key=value DSN")
    _stops_the_run(_elsewhere(postgres_dsn, db="geotoolkit_no_such_database"), match="does not exist")


def test_a_setting_refused_after_the_store_answered_degrades_as_an_outage() -> None:
    """Once the store has answered (the run is under way), a refusal (a password rotated
    mid-run) degrades to local pacing as an outage does: the batch goes on."""
    clock = FakeClock()
    flaky = FlakyGate(clock)
    gate = FallbackGate(flaky, clock=clock)
    gate.reserve(KEY, 0.1)
    flaky.down = True
    original = flaky._call

    def refused() -> None:
        try:
            original()
        except GateError as exc:
            raise GateError(str(exc), backend="flaky", permanent=True) from exc

    flaky._call = refused  # type: ignore[method-assign]
    with pytest.warns(GateUnavailableWarning):
        gate.reserve(KEY, 0.1)
    assert gate.degraded


def test_a_redis_read_only_replica_stops_the_run_instead_of_pacing_alone(redis_server: Any) -> None:
    """A replica's URL given for the primary's answers every write ``READONLY``, for ever:
    the gate warned and paced every worker alone at 25 % for the whole run (found by
    pointing a run at a replica). It is a setting no retry heals, like a wrong db index."""
    import redis

    redis_server.start()
    admin = redis.Redis.from_url(redis_server.url)
    # A replica of a primary that is not there: read-only from now on.
    admin.replicaof("127.0.0.1", redis_server.port + 1 if redis_server.port < 65535 else 1)
    try:
        _stops_the_run(redis_server.url, match="read only replica")
    finally:
        admin.close()


def _serves_ssl(dsn: str) -> bool:
    import psycopg

    try:
        psycopg.connect(dsn, sslmode="require", connect_timeout=2).close()
    except psycopg.OperationalError:
        return False
    return True


@pytest.mark.parametrize("setting", [
    pytest.param({"options": "-cdefault_transaction_read_only=on"}, id="read-only"),
    pytest.param({"options": "-csearch_path=geotoolkit_no_such_schema"}, id="no schema"),
    pytest.param({"sslmode": "bogus"}, id="bad parameter"),
    pytest.param({"options": "-cgeotoolkit_no_such_setting=1"}, id="unknown setting"),
    pytest.param({"sslmode": "require"}, id="ssl the server has not"),
])
def test_a_postgres_that_can_never_serve_the_gate_stops_the_run(
        postgres_dsn: str, setting: dict[str, str]) -> None:
    """A hot standby or a read-only role (every write refused), a ``search_path`` naming
    no schema (nowhere to create the tables), a connection parameter libpq refuses or a
    setting the server does not know: the
    gate warned and paced every worker alone at 25 % for the whole run (found by running
    with each against the shared server; SSL required of a server without it too). No
    retry heals them: the error is raised."""
    from urllib.parse import urlencode

    if "://" not in postgres_dsn:
        pytest.skip("a key=value DSN")
    if setting.get("sslmode") == "require" and _serves_ssl(postgres_dsn):
        pytest.skip("this server has SSL")
    _stops_the_run(f"{postgres_dsn}{'&' if '?' in postgres_dsn else '?'}{urlencode(setting)}")


def test_a_redis_cluster_node_stops_the_run_saying_the_gate_needs_a_standalone_redis(
        redis_server: Any, tmp_path: Any) -> None:
    """A Redis Cluster node's URL: the gate's batch names several keys, which a cluster
    refuses (``CROSSSLOT``, or ``MOVED`` to another node), on every call. The gate warned
    and paced every worker alone at 25 % for the whole run (found with a one-node cluster).
    It stops the run, saying a standalone Redis is needed."""
    import socket

    import redis

    with socket.socket() as sock:  # the cluster bus's port (by default the port + 10000)
        sock.bind(("127.0.0.1", 0))
        bus = sock.getsockname()[1]
    redis_server.start("--cluster-enabled", "yes", "--cluster-port", str(bus),
                       "--cluster-config-file", str(tmp_path / "nodes.conf"))
    admin = redis.Redis.from_url(redis_server.url)
    admin.execute_command("CLUSTER", "ADDSLOTS", *range(16384))  # ADDSLOTSRANGE: Redis 7 only
    assert redis_server.wait_for_log(b"Cluster state changed: ok")
    try:
        _stops_the_run(redis_server.url, match="Redis Cluster")
    finally:
        admin.close()


def test_a_redis_that_runs_no_scripts_stops_the_run_saying_so(redis_server: Any) -> None:
    """A server that knows no ``EVALSHA`` (a Sentinel's port given for the primary's, or
    a managed Redis with scripting disabled) answers every gate call "unknown command":
    the gate warned and paced every worker alone at 25 % for the whole run (found by
    pointing a run at a Sentinel). It stops the run, saying what the gate needs."""

    redis_server.start("--rename-command", "EVALSHA", "", "--rename-command", "EVAL", "")
    _stops_the_run(redis_server.url, match="Lua scripts")


def test_listing_the_keys_of_a_redis_without_scan_says_it_may_be_a_sentinel(
        redis_server: Any) -> None:
    """``geotoolkit gate status`` on a Sentinel's port: "unknown command 'SCAN'" and no
    more (found so). The error says what the address may be, and is permanent."""
    from geotoolkit.gate.redis import RedisGate

    redis_server.start("--rename-command", "SCAN", "")
    gate = RedisGate(redis_server.url)
    try:
        with pytest.raises(GateError, match="Sentinel") as info:
            gate.store.keys("geotoolkit:")
    finally:
        gate.close()
    assert info.value.permanent
