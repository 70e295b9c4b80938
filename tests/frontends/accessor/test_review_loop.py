"""The review loop: dead_letters() -> correct -> retry() re-sends only those rows and returns the
whole result, merged; and the map. Against scripted loopback servers (the real parser runs)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from gazetteer import Gazetteer

from geotoolkit import ConfigurationError
from geotoolkit.export import PRECISION_DTYPE, read_results, write_results

PLACES = {"Städtle 38, 9490 Vaduz": (9.52195, 47.13974, "address"),
          "Landstrasse 19, 9494 Schaan": (9.50972, 47.16613, "address"),
          "Vaduz": (9.5215, 47.1415, "locality"),
          "Zollstrasse 2, 9490 Vaduz": (9.51931, 47.13807, "address")}
ROWS = ["Städtle 38, 9490 Vaduz", "Landstrase 19, 9494 Schaan", "Vaduz", "Nowhere 1",
        "Städtle 38, 9490 Vaduz"]


@pytest.fixture
def server() -> Any:
    with Gazetteer(PLACES) as gazetteer:
        yield gazetteer


@pytest.fixture
def options(server: Gazetteer, tmp_path: Path) -> dict[str, Any]:
    return {"provider": server.provider(), "gate": "memory://", "progress": False,
            "cache": f"sqlite:///{tmp_path}/cache.sqlite", "min_precision": "street"}


@pytest.fixture
def result(options: dict[str, Any]) -> Any:
    df = pd.DataFrame({"address": ROWS, "id": [11, 12, 13, 14, 15]},
                      index=pd.Index(["a", "b", "c", "d", "e"], name="key"))
    return df.geocode.run(**options)


def test_retry_sends_only_the_corrected_rows_and_returns_the_whole_result(
        server: Gazetteer, options: dict[str, Any], result: Any) -> None:
    letters = result.geocode.dead_letters()
    assert list(letters.index) == ["b", "c", "d"]
    assert list(letters["geocode_status"]) == ["no_match", "too_coarse", "no_match"]
    sent = len(server.queries)
    fixed = letters.loc[["b", "d"], ["address"]]
    fixed.loc["b", "address"] = "Landstrasse 19, 9494 Schaan"
    fixed.loc["d", "address"] = "Zollstrasse 2, 9490 Vaduz"
    merged = result.geocode.retry(fixed, **options)
    assert sorted(server.queries[sent:]) == ["landstrasse 19, 9494 schaan",
                                             "zollstrasse 2, 9490 vaduz"]
    assert list(merged.index) == list(result.index) and merged.index.name == "key"
    assert list(merged["id"]) == [11, 12, 13, 14, 15]  # the input columns and their order stay
    assert list(merged["address"]) == [ROWS[0], "Landstrasse 19, 9494 Schaan", "Vaduz",
                                       "Zollstrasse 2, 9490 Vaduz", ROWS[4]]
    assert list(merged["geocode_status"]) == ["matched", "matched", "too_coarse", "matched",
                                              "matched"]
    assert list(merged["geocode_fixed"]) == [False, True, False, True, False]
    assert list(merged["geocode_attempts"]) == [1, 2, 1, 2, 1]
    assert (merged.geometry["b"].x, merged.geometry["b"].y) == (9.50972, 47.16613)
    assert merged.loc["b", "geocode_reason"] != merged.loc["b", "geocode_reason"]  # NaN: matched
    assert merged["geocode_precision"].dtype == PRECISION_DTYPE and merged.crs.to_epsg() == 4326
    assert list(merged.columns[:2]) == ["address", "id"]
    assert merged.geocode.dead_letters().index.tolist() == ["c"]


def test_retry_without_rows_resends_the_dead_letters_but_not_what_the_cache_settled(
        server: Gazetteer, options: dict[str, Any], result: Any) -> None:
    sent = len(server.queries)
    again = result.geocode.retry(**options)
    assert server.queries[sent:] == []  # no-matches and the coarse match are cached
    assert list(again["geocode_attempts"]) == list(result["geocode_attempts"])  # nothing sent
    assert not again["geocode_fixed"].any()
    looser = result.geocode.retry(**{**options, "min_precision": "locality"})
    assert server.queries[sent:] == []
    assert looser.loc["c", "geocode_status"] == "matched" and looser.geometry["c"] is not None


def test_a_retry_with_another_provider_names_it(options: dict[str, Any], result: Any) -> None:
    with Gazetteer({"Nowhere 1": (9.5, 47.1, "address")}, name="other") as other:
        merged = result.geocode.retry(result.geocode.dead_letters().loc[["d"]],
                                      **{**options, "provider": other.provider(rate=50)})
    assert merged.loc["d", "geocode_status"] == "matched"
    assert merged.loc["d", "geocode_attempts"] == 2 and not merged.loc["d", "geocode_fixed"]


def test_a_spreadsheet_round_trip_keeps_the_loop_going(
        server: Gazetteer, options: dict[str, Any], result: Any, tmp_path: Path) -> None:
    sheet = tmp_path / "letters.csv"
    result.geocode.dead_letters().to_csv(sheet)
    edited = pd.read_csv(sheet, index_col=0)
    edited.loc["b", "address"] = "Landstrasse 19, 9494 Schaan"
    merged = result.geocode.retry(edited, **options)
    assert merged.loc["b", "geocode_status"] == "matched" and merged["geocode_fixed"].sum() == 1


def test_retry_refuses_rows_or_columns_it_cannot_match_back(options: dict[str, Any],
                                                            result: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"not in the result: 'zz'.*index_col=0"):
        result.geocode.retry(pd.DataFrame({"address": ["x"]}, index=["zz"]), **options)
    with pytest.raises(ConfigurationError, match=r"a DataFrame.*series\.to_frame\(\)\), got Series"):
        result.geocode.retry(result.geocode.dead_letters()["address"], **options)
    with pytest.raises(ConfigurationError, match="a DataFrame of rows of the result, got dict"):
        result.geocode.retry({"b": "Landstrasse 19, 9494 Schaan"}, **options)
    with pytest.raises(ConfigurationError, match="columns the result does not: 'note'"):
        result.geocode.retry(pd.DataFrame({"address": ["x"], "note": ["?"]}, index=["b"]),
                             **options)
    duplicated = result.reset_index(drop=True).set_axis([0, 0, 1, 2, 3])
    with pytest.raises(ConfigurationError, match="duplicate labels"):
        duplicated.geocode.retry(**options)
    with pytest.raises(KeyError, match="not a geocoding result"):
        pd.DataFrame({"address": ["x"]}).geocode.retry(**options)


def test_retry_takes_the_same_options_as_run() -> None:
    run = inspect.signature(pd.DataFrame.geocode.run).parameters  # type: ignore[attr-defined]
    retry = inspect.signature(pd.DataFrame.geocode.retry).parameters  # type: ignore[attr-defined]
    assert set(run) - {"background"} <= set(retry)
    assert {"provider", "min_precision", "full_results", "fallback_on", "street"} <= set(retry)


def test_results_with_precision_survive_the_geopackage_and_geoparquet(
        options: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    df = pd.DataFrame({"address": ROWS})
    result = df.geocode.run(**options, full_results=True)
    for name in ("out.gpkg", "out.parquet"):
        assert write_results(result, tmp_path / name) == (2, 3)
        back = read_results(tmp_path / name)
        assert len(back) == 5 and back["geocode_precision"].dtype == PRECISION_DTYPE
        assert back["geocode_osm_id"].dtype == "Int64" and back.crs.to_epsg() == 4326
        coarse = back[back["geocode_status"] == "too_coarse"]
        assert coarse[["geocode_coarse_lon", "geocode_coarse_lat"]].values.tolist() == [
            [9.5215, 47.1415]]
        assert coarse.geometry.isna().all() and coarse["lon"].isna().all()
        assert sorted(back["address"]) == sorted(ROWS)
    again = read_results(tmp_path / "out.gpkg")
    assert list(again["geocode_status"]) == list(result["geocode_status"])  # the rows' order
    assert list(again.index) == list(result.index)


def test_a_spreadsheet_round_trip_changes_only_what_the_analyst_edited(
        server: Gazetteer, options: dict[str, Any], tmp_path: Path) -> None:
    """read_csv gives back other types than the result's: a postcode "0155" as 155, a date
    as text, a whole number with a gap as float, a category as text. Those cells came
    back into the result as such (the postcode's zero lost, the columns object) and every
    row of the sheet counted as fixed; only the analyst's edit is a change now."""
    df = pd.DataFrame({"address": pd.array(ROWS, dtype="string"),
                       "zip": pd.array(["0154", "0155", "0156", "0157", "0158"], dtype="string"),
                       "floor": pd.array([1, 2, None, 4, 5], dtype="Int64"),
                       "kind": pd.Categorical(["home", "shop", "home", "shop", "home"]),
                       "seen": pd.to_datetime(["2024-01-0" + str(d) for d in range(1, 6)])},
                      index=pd.Index(["a", "b", "c", "d", "e"], name="key"))
    result = df.geocode.run(**options)
    sheet = tmp_path / "letters.csv"
    result.geocode.dead_letters().to_csv(sheet)
    edited = pd.read_csv(sheet, index_col=0)
    edited.loc["b", "address"] = "Landstrasse 19, 9494 Schaan"
    merged = result.geocode.retry(edited, **options)
    assert merged.loc["b", "geocode_status"] == "matched"
    assert list(merged["geocode_fixed"]) == [False, True, False, False, False]
    assert list(merged["zip"]) == ["0154", "0155", "0156", "0157", "0158"]
    for name in df.columns:
        assert merged[name].dtype == result[name].dtype, name
    pd.testing.assert_frame_equal(merged[list(df.columns)].drop(index="b"),
                                  result[list(df.columns)].drop(index="b"))
