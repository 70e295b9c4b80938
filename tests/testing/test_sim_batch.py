"""Batch endpoints: the Census CSV upload (built and parsed by geotoolkit's CensusBatch) and
Mapbox v6 batch geocoding, with their failure modes and their cost to the rate limiter."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from formats_support import KEY
from sim_support import FakeClock

from geotoolkit.errors import ProviderUnavailableError, QueryError, RateLimitError
from geotoolkit.providers import CensusBatch, Mapbox
from geotoolkit.results import Failure, Match, NoMatch, Query
from geotoolkit.testing import ProviderSimulator

KNOWN = "Städtle 38, 9490 Vaduz"
ROWS = [Query(text=KNOWN), Query(text="Irgendwo 7, 9490 Vaduz"),
        Query(text="Nowhere Street 999, 0000 Atlantis"),
        Query(housenumber="19", street="Landstrasse", city="Schaan", postalcode="9494")]
BATCH = "/search/geocode/v6/batch"


@pytest.fixture(scope="module")
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator() as simulator:
        yield simulator


@pytest.fixture
def clock(sim: ProviderSimulator) -> FakeClock:
    fake = FakeClock()
    sim.configure(clock=fake, rate_limit=None, batch_cost="request", batch_hang_over=None,
                  fault=None, limiter="sliding-window", burst=None, window_seconds=1.0,
                  valid_keys=None, hang_seconds=30.0)
    sim.reset()
    return fake


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5.0) as c:
        yield c


def census(client: httpx.Client, sim: ProviderSimulator, queries: list[Query]) -> dict[str, Any]:
    batch = CensusBatch(sim.url)
    (request,) = batch.build_batch_requests(queries)
    return batch.parse_batch_response(client.send(request))


def mapbox(client: httpx.Client, sim: ProviderSimulator, queries: list[dict[str, Any]]
           ) -> httpx.Response:
    return client.post(f"{sim.url}{BATCH}", params={"access_token": KEY}, json=queries)


@pytest.mark.usefixtures("clock")
def test_census_batch_answers_every_record_by_id(sim: ProviderSimulator, client: httpx.Client) -> None:
    outcomes = census(client, sim, ROWS * 3)  # 12 records: ids "0".."11"
    assert sorted(outcomes, key=int) == [str(i) for i in range(12)]
    first = outcomes["0"]
    assert isinstance(first, Match) and first.precision == "interpolated"
    assert (first.lon, first.lat) == sim.expected(KNOWN)
    assert first.raw["match_type"] == "Exact" and first.place.housenumber == "38"
    hashed = outcomes["1"]
    assert isinstance(hashed, Match) and hashed.raw["match_type"] == "Non_Exact"
    assert (hashed.lon, hashed.lat) == sim.expected("Irgendwo 7, 9490 Vaduz")
    assert isinstance(outcomes["2"], NoMatch)
    structured = outcomes["3"]
    assert isinstance(structured, Match) and structured.place.street == "LANDSTRASSE"
    (logged,) = sim.requests
    assert (logged.provider, logged.rows, logged.status, logged.query) == ("census", 12, 200, None)


@pytest.mark.usefixtures("clock")
def test_census_answers_in_its_own_order(sim: ProviderSimulator, client: httpx.Client) -> None:
    batch = CensusBatch(sim.url)
    (request,) = batch.build_batch_requests(ROWS * 3)
    response = client.send(request)
    assert response.headers["content-type"].startswith("text/csv")
    ids = [row[0] for row in csv.reader(io.StringIO(response.text))]
    assert ids == sorted(str(i) for i in range(12))  # "10" before "2": not the upload's order
    assert ids != [str(i) for i in range(12)]


@pytest.mark.usefixtures("clock")
def test_one_malformed_record_and_a_tie(sim: ProviderSimulator, client: httpx.Client) -> None:
    outcomes = census(client, sim, [Query(text=f"{KNOWN} #badrow"), Query(text=KNOWN),
                                    Query(text="Landstrasse 19, Schaan #tie")])
    assert isinstance(outcomes["0"], Failure) and "coordinates" in outcomes["0"].reason
    assert isinstance(outcomes["1"], Match)
    tie = outcomes["2"]
    assert isinstance(tie, NoMatch) and "tie" in tie.reason


@pytest.mark.usefixtures("clock")
def test_whole_batch_server_errors(sim: ProviderSimulator, client: httpx.Client) -> None:
    with pytest.raises(RateLimitError):  # a 503: retry the batch
        census(client, sim, [Query(text=KNOWN), Query(text="Irgendwo 9, Vaduz #503x1")])
    assert isinstance(census(client, sim, [Query(text=KNOWN), Query(text="Irgendwo 9, Vaduz #503x1")])
                      ["0"], Match)
    sim.fault = "status=502"
    with pytest.raises(ProviderUnavailableError):
        census(client, sim, [Query(text=KNOWN)])
    assert [r.status for r in sim.requests] == [503, 200, 502]


@pytest.mark.usefixtures("clock")
def test_a_poisoned_record_fails_every_batch_it_is_in(sim: ProviderSimulator,
                                                      client: httpx.Client) -> None:
    rows = [Query(text=KNOWN), Query(text="Irgendwo 3, Vaduz #poison")]
    for _ in range(3):
        with pytest.raises(ProviderUnavailableError):
            census(client, sim, rows)
    assert isinstance(census(client, sim, rows[:1])["0"], Match)  # without it, the batch passes
    assert [r.status for r in sim.requests] == [500, 500, 500, 200]


def test_a_large_upload_hangs(sim: ProviderSimulator, clock: FakeClock) -> None:
    sim.batch_hang_over = 3
    with httpx.Client(timeout=5.0) as fast:
        assert len(census(fast, sim, ROWS[:3])) == 3  # three records: answered
    with httpx.Client(timeout=0.3) as patient, pytest.raises(httpx.ReadTimeout):
        census(patient, sim, ROWS)  # four: silence for hang_seconds
    assert [r.rows for r in sim.requests] == [3, 4]


@pytest.mark.usefixtures("clock")
def test_census_batch_refusals(sim: ProviderSimulator, client: httpx.Client) -> None:
    too_many = "".join(f'"{i}","Weg {i}","","",""\n' for i in range(10_001))
    response = client.post(f"{sim.url}/locations/addressbatch", data={"benchmark": "4"},
                           files={"addressFile": ("a.csv", too_many.encode(), "text/csv")})
    with pytest.raises(QueryError, match="10000"):
        CensusBatch(sim.url).parse_batch_response(response)
    no_file = client.post(f"{sim.url}/locations/addressbatch", data={"benchmark": "4"})
    assert no_file.status_code == 400 and "addressFile" in no_file.text
    assert client.get(f"{sim.url}/locations/addressbatch").status_code == 405


@pytest.mark.parametrize(("cost", "second"), [("request", 200), ("row", 429)])
def test_batches_cost_one_or_one_per_row(sim: ProviderSimulator, client: httpx.Client,
                                         clock: FakeClock, cost: str, second: int) -> None:
    sim.configure(rate_limit=1.0, limiter="token-bucket", burst=5, batch_cost=cost)
    batch = CensusBatch(sim.url)
    statuses = [client.send(batch.build_batch_requests(ROWS[:3])[0]).status_code for _ in range(2)]
    assert statuses == [200, second]  # 3 rows from a bucket of 5, then 3 more
    assert [r.rows for r in sim.requests] == [3, 3]
    clock.set(1.0)  # one token back: 3 in all, enough for a second batch of 3
    assert client.send(batch.build_batch_requests(ROWS[:3])[0]).status_code == 200


# --------------------------------------------------------------------------- Mapbox


def _read(collection: dict[str, Any]) -> Any:
    return Mapbox("http://mapbox.invalid", api_key=KEY).parse_response(
        Query(text="batch"), httpx.Response(200, json=collection))


@pytest.mark.usefixtures("clock")
def test_mapbox_batch_one_collection_per_query_in_order(sim: ProviderSimulator,
                                                        client: httpx.Client) -> None:
    queries = [{"q": KNOWN, "limit": 1}, {"q": "Nowhere Street 999"},
               {"address_number": "999", "street": "Duxweg", "place": "Schaan"},
               {"longitude": 9.52197, "latitude": 47.13976}, {"q": "9490 Vaduz", "country": "de"},
               {"q": "Vaduz"}]
    response = mapbox(client, sim, queries)
    assert response.status_code == 200
    batch = response.json()["batch"]
    outcomes = [_read(collection) for collection in batch]
    assert [o.status for o in outcomes] == ["matched", "no_match", "matched", "matched",
                                            "no_match", "matched"]
    assert [o.precision for o in outcomes if isinstance(o, Match)] == [
        "address", "street", "address", "locality"]
    assert (outcomes[0].lon, outcomes[0].lat) == sim.expected(KNOWN)  # type: ignore[union-attr]
    (logged,) = sim.requests
    assert (logged.provider, logged.rows, logged.key) == ("mapbox", 6, KEY)


@pytest.mark.usefixtures("clock")
def test_mapbox_batch_failure_modes(sim: ProviderSimulator, client: httpx.Client) -> None:
    bad = mapbox(client, sim, [{"q": KNOWN}, {"q": f"{KNOWN} #badrow"}]).json()["batch"]
    assert isinstance(_read(bad[0]), Match) and isinstance(_read(bad[1]), Failure)
    assert mapbox(client, sim, [{"q": KNOWN}, {"q": "Weg 1 #poison"}]).status_code == 500
    assert mapbox(client, sim, [{"q": KNOWN}] * 1001).status_code == 422
    assert mapbox(client, sim, [{"nothing": 1}]).status_code == 422
    refused = client.post(f"{sim.url}{BATCH}", params={"access_token": KEY}, content=b"[not json")
    assert refused.status_code == 422 and "message" in refused.json()
    huge = mapbox(client, sim, [{"q": "Weg 1 #overflow"}, {"q": KNOWN}]).json()["batch"]
    assert isinstance(_read(huge[0]), Failure) and isinstance(_read(huge[1]), Match)


def test_mapbox_batch_costs_its_rows(sim: ProviderSimulator, client: httpx.Client,
                                     clock: FakeClock) -> None:
    sim.configure(rate_limit=2.0, window_seconds=10.0, batch_cost="row", valid_keys={KEY})
    assert mapbox(client, sim, [{"q": KNOWN}] * 15).status_code == 200  # 15 of 20
    throttled = mapbox(client, sim, [{"q": KNOWN}] * 6)
    assert throttled.status_code == 429 and "x-rate-limit-reset" in throttled.headers
    assert mapbox(client, sim, [{"q": KNOWN}] * 5).status_code == 200
    unauthorised = client.post(f"{sim.url}{BATCH}", json=[{"q": KNOWN}])
    assert unauthorised.status_code == 401
    assert [r.outcome for r in sim.requests] == ["ok", "rate_limited", "ok", "missing_key"]
