"""Precision in the result, min_precision (too_coarse), full_results and the provider chain,
against real scripted servers on 127.0.0.1 parsed by geotoolkit's own Nominatim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from gazetteer import PLACES, Gazetteer, gazetteers

from geotoolkit import ConfigurationError, QuotaExceededError
from geotoolkit.display.model import summary_line
from geotoolkit.orchestration.frame import PRECISION_DTYPE
from geotoolkit.orchestration.job import Columns, FrameJob, settle
from geotoolkit.orchestration.options import GeocodeOptions
from geotoolkit.progress import BatchFinished, Event, ItemFinished, StageStarted, Tally
from geotoolkit.providers import Nominatim
from geotoolkit.results import Query
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

ADDRESSES = [*PLACES, "Nowhere 1"]


def run(df: pd.DataFrame, events: list[Event] | None = None, **given: Any) -> Any:
    given.setdefault("gate", "memory://")
    given.setdefault("cache", False)
    job = FrameJob(df, Columns("address"), GeocodeOptions(**given))
    return job.run_sync(events.append if events is not None else None)


@pytest.fixture
def server() -> Any:
    with Gazetteer(PLACES) as gazetteer:
        yield gazetteer


def frame(addresses: list[str] | None = None) -> pd.DataFrame:
    addresses = ADDRESSES if addresses is None else addresses
    return pd.DataFrame({"address": addresses}, index=[f"r{i}" for i in range(len(addresses))])


def test_every_result_has_an_ordered_precision_and_a_score(server: Gazetteer) -> None:
    out = run(frame(), provider=server.provider())
    assert out["geocode_precision"].dtype == PRECISION_DTYPE and PRECISION_DTYPE.ordered
    assert list(out["geocode_precision"].astype(object).fillna("-")) == [
        "address", "street", "postcode", "locality", "region", "country", "unknown", "-"]
    assert out["geocode_score"].dtype == np.float64 and out["geocode_score"].isna().all()
    assert list(out.loc[out["geocode_precision"] <= "street", "address"]) == ADDRESSES[:2]
    assert (out["geocode_status"][:-1] == "matched").all()  # no minimum: every match kept


def test_min_precision_makes_coarse_matches_dead_letters_that_keep_their_point(
        server: Gazetteer) -> None:
    events: list[Event] = []
    out = run(frame(), events, provider=server.provider(), min_precision="street")
    status = dict(zip(out["address"], out["geocode_status"], strict=True))
    assert [status[a] for a in ADDRESSES] == ["matched", "matched", *["too_coarse"] * 5, "no_match"]
    coarse = out[out["geocode_status"] == "too_coarse"]
    assert coarse.geometry.isna().all() and coarse[["lon", "lat"]].isna().all().all()
    assert coarse.loc["r3", ["geocode_coarse_lon", "geocode_coarse_lat"]].tolist() == [9.5215, 47.1415]
    assert coarse.loc["r3", "geocode_reason"] == "precision locality is coarser than street"
    assert out.loc[["r0", "r1"], ["geocode_coarse_lon", "geocode_coarse_lat"]].isna().all().all()
    assert list(out.geocode.dead_letters().index) == ["r2", "r3", "r4", "r5", "r6", "r7"]
    tally = Tally()
    for event in events:
        tally.update(event)
    assert (tally.matched, tally.too_coarse, tally.no_match, tally.done) == (2, 5, 1, 8)
    finished = events[-1]
    assert isinstance(finished, BatchFinished) and finished.too_coarse == 5 and finished.matched == 2
    assert summary_line(tally).startswith("8/8 rows: 2 matched, 5 too coarse, 1 no match, 0 failed;")
    assert {e.status for e in events if isinstance(e, ItemFinished)} == {
        "matched", "too_coarse", "no_match"}


def test_a_river_is_a_feature_that_no_town_level_minimum_keeps() -> None:
    """A river's centroid answered for "Rhein" is a match of precision feature, coarser than
    a country: min_precision locality (or country) makes it a dead letter, as a town passes."""
    places = {"Rhein": (9.51, 47.2, "feature"), "Vaduz": PLACES["Vaduz"],
              "Liechtenstein": PLACES["Liechtenstein"]}
    with Gazetteer(places) as server:
        kept = run(frame(list(places)), provider=server.provider())
        town = run(frame(list(places)), provider=server.provider(), min_precision="locality")
        country = run(frame(list(places)), provider=server.provider(), min_precision="country")
        feature = run(frame(list(places)), provider=server.provider(), min_precision="feature")
    assert list(kept["geocode_precision"]) == ["feature", "locality", "country"]
    assert (kept["geocode_status"] == "matched").all()
    assert kept.loc["r0", "geocode_precision"] > "country"  # ordered: coarser than a country
    assert list(town["geocode_status"]) == ["too_coarse", "matched", "too_coarse"]
    assert town.loc["r0", "geocode_reason"] == "precision feature is coarser than locality"
    assert town.loc["r0", ["geocode_coarse_lon", "geocode_coarse_lat"]].tolist() == [9.51, 47.2]
    assert list(country["geocode_status"]) == ["too_coarse", "matched", "matched"]
    assert (feature["geocode_status"] == "matched").all()


def test_a_rerun_with_another_min_precision_sends_nothing(server: Gazetteer, tmp_path: Path) -> None:
    cache = f"sqlite:///{tmp_path}/cache.sqlite"
    first = run(frame(), provider=server.provider(), cache=cache, min_precision="street")
    sent = len(server.queries)
    assert sent == len(ADDRESSES)
    second = run(frame(), provider=server.provider(), cache=cache, min_precision="locality")
    third = run(frame(), provider=server.provider(), cache=cache)
    assert len(server.queries) == sent  # the cache keeps matches, not verdicts
    assert (first["geocode_status"] == "too_coarse").sum() == 5
    assert (second["geocode_status"] == "too_coarse").sum() == 3  # region, country, unknown
    assert (third["geocode_status"] == "matched").sum() == 7
    assert list(second["geocode_precision"]) == list(first["geocode_precision"])


def test_full_results_adds_typed_place_columns(server: Gazetteer) -> None:
    out = run(frame([ADDRESSES[0], "Nowhere 1"]), provider=server.provider(), full_results=True)
    row = out.loc["r0"]
    assert row["geocode_osm_type"] == "node" and row["geocode_osm_id"] == 4242
    assert out["geocode_osm_id"].dtype == "Int64" and pd.isna(out.loc["r1", "geocode_osm_id"])
    assert (row["geocode_housenumber"], row["geocode_street"], row["geocode_postcode"],
            row["geocode_locality"], row["geocode_country_code"]) == (
        "38", "Städtle", "9490", "Vaduz", "LI")
    assert [row[f"geocode_bbox_{c}"] for c in ("min_lon", "min_lat", "max_lon", "max_lat")] == \
        pytest.approx([9.52095, 47.13874, 9.52295, 47.14074])
    assert out["geocode_bbox_min_lon"].dtype == np.float64 and isinstance(row["geocode_place_id"], str)
    assert "geocode_place_id" not in run(frame(ADDRESSES[:1]), provider=server.provider()).columns


# -- the chain ------------------------------------------------------------------------------


FIRST = {"Städtle 38, 9490 Vaduz": (9.52195, 47.13974, "address"),
         "Vaduz": (9.5215, 47.1415, "locality"),
         "Kirchstrasse 5, Schellenberg": (9.547, 47.2305, "locality"),
         "Zollstrasse 2, Vaduz": (9.5193, 47.1381, "postcode")}
SECOND = {"Landstrasse 19, Schaan": (9.5097, 47.1661, "address"),
          "Kirchstrasse 5, Schellenberg": (9.54698, 47.23056, "address"),
          "Zollstrasse 2, Vaduz": (9.5193, 47.1381, "locality")}
CHAIN = ["Städtle 38, 9490 Vaduz", "Landstrasse 19, Schaan", "Kirchstrasse 5, Schellenberg",
         "Zollstrasse 2, Vaduz", "Vaduz", "Nowhere 1", ""]


def test_a_chain_sends_each_provider_only_what_the_one_before_left(tmp_path: Path) -> None:
    events: list[Event] = []
    with gazetteers(FIRST, SECOND) as (first, second):
        chain = [first.provider(), second.provider()]
        out = run(frame(CHAIN), events, provider=chain, min_precision="street",
                  cache=f"sqlite:///{tmp_path}/c.sqlite")
        # (sorted: four requests are in flight at once) the empty cell is never sent
        assert sorted(first.queries) == sorted(q.lower() for q in CHAIN[:-1])
        assert sorted(second.queries) == ["kirchstrasse 5, schellenberg", "landstrasse 19, schaan",
                                          "nowhere 1", "vaduz", "zollstrasse 2, vaduz"]
        names = [f"nominatim@{first.url[7:]}", f"nominatim@{second.url[7:]}"]
        assert list(out["geocode_status"]) == ["matched", "matched", "matched", "too_coarse",
                                               "too_coarse", "no_match", "failed"]
        assert list(out["geocode_provider"]) == [names[0], names[1], names[1], names[0], names[0],
                                                 names[0], names[0]]  # a tie: the earlier
        # the best answer is kept: postcode (first) is finer than locality (second)
        assert out.loc["r3", "geocode_precision"] == "postcode"
        assert out.loc["r5", "geocode_reason"] == f"{names[0]}: no match; {names[1]}: no match"
        assert list(out["geocode_attempts"]) == [1, 2, 2, 2, 2, 2, 0]
        stages = [e for e in events if isinstance(e, StageStarted)]
        assert [(s.stage, s.stages, s.provider, s.rows) for s in stages] == [
            (1, 2, names[0], 7), (2, 2, names[1], 5)]
        tally = Tally()
        for event in events:
            tally.update(event)
        assert (tally.total, tally.done, tally.passed_on) == (7, 7, 5)
        assert (tally.matched, tally.too_coarse, tally.no_match, tally.failed) == (3, 2, 1, 1)
        assert [type(e).__name__ for e in events].count("BatchFinished") == 1
        # a rerun sends nothing already settled, at any stage
        sent = (len(first.queries), len(second.queries))
        again = run(frame(CHAIN), provider=chain, min_precision="street",
                    cache=f"sqlite:///{tmp_path}/c.sqlite")
        assert (len(first.queries), len(second.queries)) == sent
        pd.testing.assert_frame_equal(again.drop(columns="geocode_attempts"),
                                      out.drop(columns="geocode_attempts"))


def test_failures_go_on_only_when_fallback_on_says_so() -> None:
    with Gazetteer({}, name="down", failing=["Vaduz"]) as down, Gazetteer(
            {"Vaduz": (9.5215, 47.1415, "locality")}, name="up") as up:
        chain = [down.provider(), up.provider()]
        kept = run(frame(["Vaduz"]), provider=chain, max_attempts=1)
        assert kept.loc["r0", "geocode_status"] == "failed" and up.queries == []
        passed = run(frame(["Vaduz"]), provider=chain, max_attempts=1,
                     fallback_on=("no_match", "failed"))
        assert passed.loc["r0", "geocode_status"] == "matched" and up.queries == ["vaduz"]


# The first provider places a Landstrasse in Chur (Switzerland) and a Zollstrasse on Null
# Island; the second finds both in Liechtenstein, but puts "Vaduz" in Zurich.
WRONG_PLACES = {"Landstrasse 19, Schaan": (9.53, 46.85, "address"),
                "Zollstrasse 2, Vaduz": (0.0, 0.0, "address"),
                "Vaduz": (9.5215, 47.1415, "locality")}
RIGHT_PLACES = {"Landstrasse 19, Schaan": (9.5096, 47.1651, "address"),
                "Zollstrasse 2, Vaduz": (9.52, 47.14, "address"),
                "Vaduz": (8.55, 47.37, "address")}


def test_a_match_the_checks_refuse_is_a_failure_for_the_chain_too() -> None:
    """A point outside ``country`` (or on Null Island) ends its row as ``failed``: the chain
    passes it on when ``fallback_on`` has "failed", and never prefers it to a usable
    answer of another stage (it used to count as a match there, so the next provider was
    never asked and a valid too-coarse point was dropped for an invalid one)."""
    df = frame(["Landstrasse 19, Schaan", "Zollstrasse 2, Vaduz", "Vaduz"])
    with gazetteers(WRONG_PLACES, RIGHT_PLACES) as (first, second):
        chain = [first.provider(), second.provider()]
        job = FrameJob(df, Columns("address", country="LI"), GeocodeOptions(
            provider=chain, gate="memory://", cache=False, min_precision="street",
            fallback_on=("no_match", "too_coarse", "failed")))
        events: list[Event] = []
        out = job.run_sync(events.append)
        names = [f"nominatim@{first.url[7:]}", f"nominatim@{second.url[7:]}"]
        assert sorted(second.queries) == ["landstrasse 19, schaan", "vaduz", "zollstrasse 2, vaduz"]
        assert list(out["geocode_status"]) == ["matched", "matched", "too_coarse"]
        tally = Tally()
        for event in events:  # the panel counts each row once, as it ends
            tally.update(event)
        assert (tally.total, tally.done, tally.passed_on) == (3, 3, 3)
        assert (tally.matched, tally.too_coarse, tally.failed) == (2, 1, 0)
        assert list(out["geocode_provider"]) == [names[1], names[1], names[0]]
        assert (out.loc["r2", "geocode_coarse_lon"], out.loc["r2", "geocode_coarse_lat"]) == (
            9.5215, 47.1415)  # the valid town centre, not Zurich's "address"
        second.queries.clear()
        kept = FrameJob(df, Columns("address", country="LI"), GeocodeOptions(
            provider=chain, gate="memory://", cache=False)).run_sync(None)
        assert second.queries == []  # failures stay by default, as documented
        assert list(kept["geocode_status"]) == ["failed", "failed", "matched"]
        assert kept.loc["r0", "geocode_reason"].startswith("outside LI")


def test_a_dead_letter_that_kept_one_providers_match_says_what_each_provider_said() -> None:
    """A too-coarse (or refused) dead letter of a chain named only its own provider's
    answer, where a no-match lists every provider's: the second's was lost."""
    with gazetteers(WRONG_PLACES, RIGHT_PLACES) as (first, second):
        out = FrameJob(frame(["Vaduz"]), Columns("address", country="LI"), GeocodeOptions(
            provider=[first.provider(), second.provider()], gate="memory://", cache=False,
            min_precision="street")).run_sync(None)
    names = [f"nominatim@{first.url[7:]}", f"nominatim@{second.url[7:]}"]
    assert out.loc["r0", "geocode_status"] == "too_coarse"
    assert out.loc["r0", "geocode_reason"] == (
        f"{names[0]}: precision locality is coarser than street; "
        f"{names[1]}: outside LI (Liechtenstein): (lon, lat) = (8.55, 47.37)")


AGENT = "geotoolkit-tests/1.0 (tests@example.org)"


def test_a_provider_whose_quota_runs_out_hands_its_rows_to_the_next_one() -> None:
    addresses = [k.address for k in KNOWN_ADDRESSES[:8]]
    with ProviderSimulator(daily_cap=3) as capped, ProviderSimulator() as spare:
        chain = [Nominatim(capped.url, user_agent=AGENT, rate=100),
                 Nominatim(spare.url, user_agent=AGENT, rate=100)]
        events: list[Event] = []
        out = run(frame(addresses), events, provider=chain, concurrency=1)
        names = [f"nominatim@{capped.url[7:]}", f"nominatim@{spare.url[7:]}"]
        assert list(out["geocode_status"]) == ["matched"] * 8  # the run goes on, nothing lost
        assert list(out["geocode_provider"]) == [names[0]] * 3 + [names[1]] * 5
        assert len(spare.requests) == 5  # only the rows the first one left
        tally = Tally()
        for event in events:
            tally.update(event)
        assert (tally.done, tally.passed_on, tally.matched) == (8, 5, 8)
        finished = [e for e in events if isinstance(e, BatchFinished)]
        assert len(finished) == 1 and finished[0].error is None
    # one API, two keys: the second takes what the first one's quota left
    with ProviderSimulator(daily_cap=5) as sim:
        keys = [Nominatim(sim.url, user_agent=AGENT, api_key=k, rate=100) for k in ("k-1", "k-2")]
        out = run(frame(addresses), provider=keys, concurrency=1)
        label = f"nominatim@{sim.url[7:]}"
        assert list(out["geocode_status"]) == ["matched"] * 8
        assert list(out["geocode_provider"]) == [f"{label}#1"] * 5 + [f"{label}#2"] * 3
        assert [r.key for r in sim.requests] == ["k-1"] * 6 + ["k-2"] * 3  # the 6th: a 402
    # the last provider's quota still ends the run: nobody is left to take the rows
    with ProviderSimulator(daily_cap=3) as capped, ProviderSimulator(daily_cap=2) as last:
        chain = [Nominatim(capped.url, user_agent=AGENT, rate=100),
                 Nominatim(last.url, user_agent=AGENT, rate=100)]
        with pytest.raises(QuotaExceededError):
            run(frame(addresses), provider=chain, concurrency=1)
        assert len(last.requests) == 3  # two answered, the third refused: the run stops


def test_settle_follows_the_chain_for_plain_lists() -> None:
    import asyncio

    with gazetteers(FIRST, SECOND) as (first, second):
        options = GeocodeOptions(provider=[first.provider(), second.provider()], gate="memory://",
                                 cache=False)
        outcomes = asyncio.run(settle([Query("Landstrasse 19, Schaan"), "empty address"], options))
    assert [o.status for o in outcomes] == ["matched", "failed"]
    assert outcomes[0].provider.endswith(second.url[7:])


def test_a_chain_refuses_one_rate_for_all() -> None:
    with gazetteers(FIRST, SECOND) as (first, second), pytest.raises(
            ConfigurationError, match=r"rate= with a provider chain.*Nominatim\(\.\.\., rate=2\)"):
        run(frame(["Vaduz"]), provider=[first.provider(), second.provider()], rate=5)
    assert first.queries == [] and second.queries == []
