"""The engine sends batches: Census and Mapbox batch endpoints of the real simulator.

The simulator and the engine share one FakeClock (backoff and Retry-After waits pass
in virtual time); only the deadline of a hung upload is wall time, kept short.
Assertions are on outcomes, the simulator's request log, progress events and the
gate's counters, never on durations.
"""

from __future__ import annotations

import asyncio
import math
import random
from typing import Any

import pytest

from geotoolkit import (
    Backoff,
    Failure,
    FakeClock,
    Match,
    MemoryGate,
    NoMatch,
    Query,
    RatePolicy,
)
from geotoolkit.engine import Engine
from geotoolkit.engine.batching import SPLIT_ATTEMPTS, deadline_seconds, max_response_bytes
from geotoolkit.engine.settings import EngineSettings
from geotoolkit.errors import ConfigurationError, QuotaExceededError
from geotoolkit.gate.base import Cap
from geotoolkit.progress import Event, ItemFinished, Throttled
from geotoolkit.providers import Census, Mapbox
from geotoolkit.results import ReverseQuery
from geotoolkit.store.memory import MemoryStore
from geotoolkit.testing import ProviderSimulator

BATCH = "/locations/addressbatch"
KNOWN = "Städtle 38, 9490 Vaduz"
NOWHERE = "Nowhere Street 999, 0000 Atlantis"




def streets(n: int, start: int = 1) -> list[str]:
    return [f"Landstrasse {i}, 9490 Vaduz" for i in range(start, start + n)]


def engine(provider: Any, clock: FakeClock, **kwargs: Any) -> Engine:
    options: dict[str, Any] = {
        "gate": MemoryGate(clock=clock), "rate": RatePolicy(rate=math.inf), "clock": clock,
        "concurrency": 2, "rng": random.Random(3), "backoff": Backoff(initial_seconds=0.5),
    }
    options.update(kwargs)
    return Engine(provider, **options)


def run(eng: Engine, addresses: list[str]) -> tuple[list[Any], list[Event]]:
    events: list[Event] = []
    outcomes = asyncio.run(eng.run([Query(text=a) for a in addresses], events.append))
    return outcomes, events


def finished(events: list[Event]) -> list[ItemFinished]:
    return [e for e in events if isinstance(e, ItemFinished)]


# -- one batch, row by row -----------------------------------------------------------------------


def test_a_census_batch_gives_every_row_its_own_outcome(sim: ProviderSimulator, clock: FakeClock) -> None:
    addresses = [KNOWN, NOWHERE, "Irgendwo 7, 9490 Vaduz #badrow", "Landstrasse 3, 9490 Vaduz #tie",
                 *streets(16, start=10)]
    outcomes, events = run(engine(Census(sim.url), clock), addresses)
    (request,) = sim.requests
    assert (request.path, request.rows, request.status) == (BATCH, 20, 200)
    assert isinstance(outcomes[0], Match) and (outcomes[0].lon, outcomes[0].lat) == sim.expected(KNOWN)
    assert isinstance(outcomes[1], NoMatch) and isinstance(outcomes[3], NoMatch)  # no match, a tie
    assert isinstance(outcomes[2], Failure)  # the malformed record, and only it
    assert outcomes[2].reason == ("census: unusable coordinates 'not-a-point' "
                                  '(not two numbers "lon,lat")')  # the record, not our code
    assert all(isinstance(o, Match) for o in outcomes[4:])
    assert [(o.lon, o.lat) for o in outcomes[4:]] == [sim.expected(a) for a in addresses[4:]]
    assert {o.attempts for o in outcomes} == {1}
    rows = finished(events)  # progress advances per settled row
    assert len(rows) == 20 and sum(e.rows for e in rows) == 20
    assert sorted(e.status for e in rows) == sorted(o.status for o in outcomes)


def test_a_record_the_batch_answer_leaves_out_goes_again_alone(sim: ProviderSimulator,
                                                               clock: FakeClock) -> None:
    addresses = [KNOWN, f"{streets(1)[0]} #absent", *streets(6, start=10)]
    outcomes, events = run(engine(Census(sim.url), clock), addresses)
    batch, alone = sim.requests
    assert (batch.path, batch.rows) == (BATCH, 8)
    assert (alone.path, alone.query) == ("/locations/onelineaddress",
                                         "landstrasse 1, 9490 vaduz #absent")  # alone
    assert all(isinstance(o, Match) for o in outcomes)  # not "missing from the batch answer"
    assert outcomes[1].attempts == 2  # the batch that left it out, and its own request
    assert sum(e.rows for e in finished(events)) == 8


def test_equal_queries_ride_once_and_settle_every_row(sim: ProviderSimulator, clock: FakeClock) -> None:
    addresses = [*streets(5), *streets(5), KNOWN]
    outcomes, events = run(engine(Census(sim.url), clock), addresses)
    (request,) = sim.requests
    assert request.rows == 6
    assert outcomes[:5] == outcomes[5:10] and all(isinstance(o, Match) for o in outcomes)
    assert sum(e.rows for e in finished(events)) == 11 and len(finished(events)) == 6


def test_pending_queries_go_in_chunks_of_batch_size(sim: ProviderSimulator, clock: FakeClock) -> None:
    outcomes, _ = run(engine(Census(sim.url), clock, batch_size=4), streets(10))
    assert sorted(r.rows for r in sim.requests if r.path == BATCH) == [2, 4, 4]
    assert all(isinstance(o, Match) for o in outcomes)


def test_batch_size_one_turns_batching_off(sim: ProviderSimulator, clock: FakeClock) -> None:
    outcomes, _ = run(engine(Census(sim.url), clock, batch_size=1), streets(3))
    assert [r.path for r in sim.requests] == ["/locations/onelineaddress"] * 3
    assert all(isinstance(o, Match) for o in outcomes)


def test_a_lone_query_goes_to_the_single_endpoint(sim: ProviderSimulator, clock: FakeClock) -> None:
    outcomes, _ = run(engine(Census(sim.url), clock), [KNOWN])
    assert [r.path for r in sim.requests] == ["/locations/onelineaddress"]
    assert isinstance(outcomes[0], Match)


def test_batch_size_is_validated_and_cut_to_the_provider_maximum() -> None:
    with pytest.raises(ConfigurationError, match="batch_size"):
        EngineSettings(batch_size=0)
    from geotoolkit.engine.batching import batch_size

    assert batch_size(Census(), EngineSettings(batch_size=50_000)) == 10_000
    assert batch_size(Census(), EngineSettings()) == 10_000
    assert batch_size(Mapbox(api_key="k"), EngineSettings()) == 1_000


def test_a_big_upload_gets_a_longer_deadline_and_a_larger_body() -> None:
    settings = EngineSettings(request_deadline_seconds=30.0, max_response_bytes=1_000_000)
    assert deadline_seconds(settings, 1) == 30.0 < deadline_seconds(settings, 100) < deadline_seconds(
        settings, 10_000)
    assert max_response_bytes(settings, 1) == 1_000_000 < max_response_bytes(settings, 10_000)


# -- failures of the whole batch -----------------------------------------------------------------


def test_a_whole_batch_5xx_is_retried_as_a_batch(sim: ProviderSimulator, clock: FakeClock) -> None:
    addresses = [f"{streets(1)[0]} #500x2", *streets(7, start=2)]
    outcomes, _ = run(engine(Census(sim.url), clock), addresses)
    assert [(r.rows, r.status) for r in sim.requests] == [(8, 500), (8, 500), (8, 200)]
    assert all(isinstance(o, Match) and o.attempts == 3 for o in outcomes)


def test_a_poison_row_is_isolated_by_splitting(sim: ProviderSimulator, clock: FakeClock) -> None:
    addresses = streets(32)
    addresses[19] += " #poison"
    outcomes, events = run(engine(Census(sim.url), clock, max_attempts=3), addresses)
    poisoned = outcomes[19]
    assert isinstance(poisoned, Failure) and poisoned.error == "ProviderUnavailableError"
    assert all(isinstance(o, Match) for i, o in enumerate(outcomes) if i != 19)
    batches = [r.rows for r in sim.requests if r.path == BATCH]
    # 3 attempts of 32, then per level the poisoned half twice and its sibling once
    assert batches[:3] == [32, 32, 32] and len(batches) <= 3 + 4 * (SPLIT_ATTEMPTS + 1)
    singles = [r for r in sim.requests if r.path != BATCH]
    alone = [r.query for r in singles if r.status == 500]  # the poison row, with its own attempts
    assert alone == ["landstrasse 20, 9490 vaduz #poison"] * 3 and len(singles) <= 4
    assert len(finished(events)) == 32


def test_a_malformed_answer_splits_the_batch(sim: ProviderSimulator, clock: FakeClock) -> None:
    addresses = streets(8)
    addresses[0] += " #malformedx1"
    outcomes, _ = run(engine(Census(sim.url), clock), addresses)
    assert [r.rows for r in sim.requests] == [8, 4, 4]  # not retried: split at once
    assert all(isinstance(o, Match) for o in outcomes)


def test_a_hang_on_a_large_upload_times_out_then_splits(sim: ProviderSimulator, clock: FakeClock) -> None:
    sim.configure(batch_hang_over=4)
    eng = engine(Census(sim.url), clock, request_deadline_seconds=0.2, max_attempts=2)
    outcomes, _ = run(eng, streets(8))
    assert [r.rows for r in sim.requests] == [8, 8, 4, 4]
    assert all(isinstance(o, Match) for o in outcomes)
    assert {o.attempts for o in outcomes} == {3}  # two timed-out uploads, then its half


def test_rows_that_cannot_be_sent_fail_without_a_request(sim: ProviderSimulator, clock: FakeClock) -> None:
    too_long = "x" * 5_000
    outcomes, events = run(engine(Census(sim.url), clock), [too_long, too_long + "y"])
    assert sim.requests == []
    assert all(isinstance(o, Failure) and o.error == "QueryError" for o in outcomes)
    assert len(finished(events)) == 2


def test_a_429_on_a_batch_pauses_and_fails_no_row(sim: ProviderSimulator, clock: FakeClock) -> None:
    addresses = [f"{streets(1)[0]} #429x1", *streets(5, start=2)]
    outcomes, events = run(engine(Census(sim.url), clock), addresses)
    assert [(r.rows, r.status) for r in sim.requests] == [(6, 429), (6, 200)]
    assert all(isinstance(o, Match) for o in outcomes)
    assert [e.status_code for e in events if isinstance(e, Throttled)] == [429]


# -- slots and caps by the provider's cost rule --------------------------------------------------


def test_mapbox_counts_a_batch_per_query_at_the_gate(sim: ProviderSimulator, clock: FakeClock) -> None:
    sim.configure(batch_cost="row")
    gate = MemoryGate(clock=clock)
    provider = Mapbox(sim.url, api_key="test-key")
    outcomes, _ = run(engine(provider, clock, gate=gate, cap=100), streets(30))
    (request,) = sim.requests
    assert (request.path, request.rows) == ("/search/geocode/v6/batch", 30)
    assert all(isinstance(o, Match) for o in outcomes)
    assert gate.usage(provider.gate_key).used == 30


def test_a_census_batch_counts_once_at_the_gate(sim: ProviderSimulator, clock: FakeClock) -> None:
    gate = MemoryGate(clock=clock)
    provider = Census(sim.url)
    run(engine(provider, clock, gate=gate, cap=100), streets(30))
    assert gate.usage(provider.gate_key).used == 1


def test_a_batch_costing_more_than_the_cap_is_not_sent(sim: ProviderSimulator, clock: FakeClock) -> None:
    gate = MemoryGate(clock=clock)
    provider = Mapbox(sim.url, api_key="test-key")
    with pytest.raises(QuotaExceededError):
        run(engine(provider, clock, gate=gate, cap=20), streets(30))
    assert sim.requests == [] and gate.usage(provider.gate_key).used == 0


def test_a_per_query_batch_takes_that_many_slots(clock: FakeClock, sim: ProviderSimulator) -> None:
    gate = MemoryGate(clock=clock)
    provider = Mapbox(sim.url, api_key="test-key")
    run(engine(provider, clock, gate=gate, rate=RatePolicy(rate=1.0, safety_margin=0.0)), streets(10))
    # the next send of the fleet is 10 intervals after the batch's slot
    slot = gate.reserve(provider.gate_key, 1.0)
    assert slot.wait >= 9.0


# -- cache and resume ----------------------------------------------------------------------------


def test_a_rerun_sends_only_rows_not_settled(sim: ProviderSimulator, clock: FakeClock) -> None:
    store = MemoryStore(clock=clock)
    gate = MemoryGate(clock=clock)
    addresses = streets(10)
    with pytest.raises(QuotaExceededError):  # the second batch is over the cap: the run stops
        run(engine(Census(sim.url), clock, gate=gate, store=store, batch_size=5, cap=1,
                   concurrency=1), addresses)
    assert [r.rows for r in sim.requests] == [5]
    outcomes, events = run(engine(Census(sim.url), clock, store=store, batch_size=5), addresses)
    assert [r.rows for r in sim.requests] == [5, 5]
    assert all(isinstance(o, Match) for o in outcomes)
    rows = finished(events)
    assert sum(e.cached for e in rows) == 5 and len(rows) == 10


def test_a_reservation_counts_its_cost_against_the_cap(clock: FakeClock) -> None:
    gate = MemoryGate(clock=clock)
    assert gate.reserve("k", 1.0, cap=Cap(10), cost=4).usage.used == 4  # type: ignore[union-attr]
    assert gate.reserve("k", 1.0, cap=Cap(10)).usage.used == 5  # type: ignore[union-attr]
    with pytest.raises(QuotaExceededError):
        gate.reserve("k", 1.0, cap=Cap(10), cost=6)
    assert gate.usage("k").used == 5  # refused: nothing counted


def test_mapbox_batches_points_too_and_census_sends_them_alone(sim: ProviderSimulator,
                                                              clock: FakeClock) -> None:
    points: list[Query | ReverseQuery | str] = [ReverseQuery(9.52197, 47.13976), ReverseQuery(10.0, 47.0),
                                                Query(text=KNOWN)]
    outcomes = asyncio.run(engine(Mapbox(sim.url, api_key="test-key"), clock).run(points))
    (request,) = sim.requests
    assert (request.path, request.rows) == ("/search/geocode/v6/batch", 3)
    assert [o.status for o in outcomes] == ["matched", "no_match", "matched"]
    assert (outcomes[0].lon, outcomes[0].lat) == sim.expected(KNOWN)
    sim.reset()
    census = asyncio.run(engine(Census(sim.url), clock).run([*points, Query(text=NOWHERE)]))
    assert sorted(r.rows or 0 for r in sim.requests) == [2]  # the points are refused, never sent
    assert [o.status for o in census] == ["failed", "failed", "matched", "no_match"]
