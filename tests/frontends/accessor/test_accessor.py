"""df.geocode.run() end to end against the provider simulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from shapely.geometry import Point

import geotoolkit
from geotoolkit import ConfigurationError
from geotoolkit.progress import BatchFinished, BatchStarted, Event
from geotoolkit.providers import Nominatim
from geotoolkit.testing import ProviderSimulator

Run = Callable[..., Any]
KNOWN = "Städtle 38, 9490 Vaduz, Liechtenstein"
HASHED = "Irgendwo 7, 9490 Vaduz"


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {"address": [KNOWN, HASHED, "Nowhere Lane 1", None], "n": [1, 2, 3, 4]},
        index=pd.Index(["a", "b", "c", "d"], name="key"))


def test_result_is_a_validated_wgs84_frame(sim: ProviderSimulator, run: Run) -> None:
    df = _frame()
    before = df.copy(deep=True)
    out = run(df, "address")
    assert isinstance(out, gpd.GeoDataFrame) and out is not df
    assert out.crs.to_epsg() == 4326
    assert out.index.equals(df.index) and out.index.name == "key"
    assert list(out.columns[:2]) == ["address", "n"]
    assert out["lon"].dtype == np.float64 and out["lat"].dtype == np.float64
    assert list(out["geocode_status"]) == ["matched", "matched", "no_match", "failed"]
    for key, address in (("a", KNOWN), ("b", HASHED)):
        assert (out.at[key, "lon"], out.at[key, "lat"]) == sim.expected(address)
        point = out.geometry[key]
        assert isinstance(point, Point) and (point.x, point.y) == sim.expected(address)
        assert out.at[key, "geocode_provider"] == "nominatim" and out.at[key, "geocode_label"]
        assert pd.isna(out.at[key, "geocode_reason"])
    assert out.geometry[["c", "d"]].isna().all() and out[["lon", "lat"]].loc[["c", "d"]].isna().all().all()
    assert out.at["c", "geocode_reason"] == "no match"
    assert out.at["d", "geocode_reason"] == "missing address"
    pd.testing.assert_frame_equal(df, before)  # the input is never mutated
    assert len(sim.requests) == 3


def test_default_column_and_duplicate_index(sim: ProviderSimulator, run: Run) -> None:
    df = pd.DataFrame({"address": [KNOWN, HASHED, KNOWN]}, index=[7, 7, 3])
    out = run(df)
    assert list(out.index) == [7, 7, 3]
    assert list(out["lon"]) == [sim.expected(KNOWN)[0], sim.expected(HASHED)[0],  # type: ignore[index]
                                sim.expected(KNOWN)[0]]  # type: ignore[index]


@pytest.mark.parametrize(("name", "plain"), [
    ("site", lambda gdf: pd.DataFrame(gdf)),
    ("geometry", lambda gdf: pd.DataFrame(gdf).rename(columns={"geometry": "shape"}))])
def test_a_geodataframe_is_told_how_to_keep_its_own_geometry(
        sim: ProviderSimulator, run: Run, name: str, plain: Callable[[Any], Any]) -> None:
    """The refusal said "its own geometry column(s) ... rename them", naming no column; but
    a renamed active geometry stays active, and the frame was refused again. It names the
    column and how to keep it: as a plain column of a DataFrame."""
    gdf = gpd.GeoDataFrame({"address": [KNOWN], name: [Point(760000, 5220000)]}, geometry=name,
                           crs="EPSG:2056")
    with pytest.raises(ConfigurationError) as refused:
        run(gdf, "address")
    assert f"its own geometry {name!r} (the GeoDataFrame's active geometry)" in str(refused.value)
    with pytest.raises(ConfigurationError):
        run(gdf.rename_geometry("elsewhere"), "address")  # why renaming is no advice
    advice = "pd.DataFrame(gdf)" if name == "site" else \
        "pd.DataFrame(gdf).rename(columns={'geometry': 'shape'})"
    assert f"pass {advice} to keep it as a plain column" in str(refused.value)
    assert sim.requests == []
    out = run(plain(gdf), "address")  # as the refusal says
    kept = "site" if name == "site" else "shape"
    assert out[kept].tolist() == [Point(760000, 5220000)] and out.geometry.name == "geometry"
    assert (out.geometry[0].x, out.geometry[0].y) == sim.expected(KNOWN)


def test_geodataframe_input_keeps_its_rows_and_is_not_mutated(sim: ProviderSimulator, run: Run) -> None:
    gdf = gpd.GeoDataFrame({"address": [KNOWN, HASHED]},
                           geometry=[Point(760000, 5220000), Point(761000, 5221000)],
                           crs="EPSG:2056", index=[10, 20])
    before = gdf.copy(deep=True)
    with pytest.raises(ConfigurationError, match="overwrite_columns=True"):
        run(gdf, "address")  # its own geometry is never replaced in silence
    assert sim.requests == []
    out = run(gdf, "address", overwrite_columns=True)
    assert out.crs.to_epsg() == 4326 and list(out.index) == [10, 20]
    assert (out.geometry[10].x, out.geometry[10].y) == sim.expected(KNOWN)
    assert gdf.crs.to_epsg() == 2056
    pd.testing.assert_frame_equal(pd.DataFrame(gdf), pd.DataFrame(before))
    assert list(out.geocode.dead_letters().index) == []


def test_missing_column_raises_key_error_naming_the_columns(run: Run, sim: ProviderSimulator) -> None:
    df = _frame()
    with pytest.raises(KeyError, match=r"'adress'.*available columns: address, n"):
        run(df, "adress")
    with pytest.raises(KeyError, match=r"'town'.*address, n"):
        run(df, street="address", city="town")
    assert sim.requests == []


def test_a_column_given_as_itself_or_a_list_is_refused_naming_what_to_pass(
        run: Run, sim: ProviderSimulator, provider: Nominatim) -> None:
    """``df.geocode.run(df["address"])`` raised pandas' "The truth value of a Series is
    ambiguous" (ValueError), and a list of names a KeyError for the list."""
    df = _frame()
    with pytest.raises(ConfigurationError, match=r"^column takes the name of a column, e\.g\. "
                                                 r"column='address', got a Series$"):
        run(df, df["address"])
    with pytest.raises(ConfigurationError, match=r"^column takes the name of a column, e\.g\. "
                                                 r"column='address', got a list \(the parts of "
                                                 r"an address: street=, city=, postalcode=\.\.\.\)$"):
        run(df, ["address", "n"])
    with pytest.raises(ConfigurationError, match=r"^street takes .* street='address', got a Series"):
        run(df, street=df["address"])
    points = pd.DataFrame({"x": [9.52], "y": [47.14]})
    with pytest.raises(ConfigurationError, match=r"^lon takes .* lon='x', got a Series$"):
        points.geocode.reverse(lon=points["x"], lat="y", provider=provider, gate="memory://",
                               cache=False, progress=False)
    assert sim.requests == []


def test_column_and_structured_together_is_refused(run: Run) -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        run(_frame(), "address", street="address")


def test_structured_queries_reach_the_provider_as_structured_params(
        sim: ProviderSimulator, run: Run) -> None:
    df = pd.DataFrame({"street_col": ["Städtle", "Landstrasse"], "hn": ["38", 19],
                       "town": ["Vaduz", "Schaan"], "zip": ["9490", "9494"], "cc": ["LI", "li"]})
    out = run(df, street="street_col", housenumber="hn", city="town", postalcode="zip",
              country="cc")
    params = sorted((r.params for r in sim.requests), key=lambda p: p["city"])
    assert [p.get("q") for p in params] == [None, None]
    assert params[0] == {**params[0], "street": "19 Landstrasse", "city": "Schaan",
                         "postalcode": "9494", "country": "li"}
    assert params[1]["street"] == "38 Städtle" and params[1]["country"] == "LI"
    expected = sim.expected({"street": "38 Städtle", "city": "Vaduz", "postalcode": "9490",
                             "country": "LI"})
    assert (out.at[0, "lon"], out.at[0, "lat"]) == expected
    assert expected == sim.expected(KNOWN)  # the simulator's known place, found structurally
    assert list(out["geocode_status"]) == ["matched", "matched"]


def test_a_column_pandas_read_as_numbers_says_how_to_read_it_as_text(
        sim: ProviderSimulator, run: Run, tmp_path: Any) -> None:
    """``pd.read_csv`` reads postcodes with a blank cell as floats (``9490.0``) and a column
    of numbers as ints: every row failed with "postalcode is not text (float)" or "address
    is not text (int)", and nothing said what to do."""
    path = tmp_path / "in.csv"
    path.write_text("town,zip,code\nVaduz,9490,9490\nSchaan,,9494\n", encoding="utf-8")
    df = pd.read_csv(path)
    out = run(df, city="town", postalcode="zip")
    hint = "; read the column as text, e.g. pd.read_csv(..., dtype=str)"
    assert out["geocode_reason"].tolist()[0] == f"postalcode is not text (float){hint}"
    assert out["geocode_status"].tolist() == ["failed", "matched"]  # Schaan: the town alone
    assert run(df, "code")["geocode_reason"].tolist() == [f"address is not text (int){hint}"] * 2
    assert [r.params["city"] for r in sim.requests] == ["Schaan"]
    done = run(pd.read_csv(path, dtype=str), city="town", postalcode="zip")  # as it says
    assert done["geocode_status"].tolist() == ["matched", "matched"]


def test_equal_addresses_after_normalisation_are_sent_once(sim: ProviderSimulator, run: Run) -> None:
    df = pd.DataFrame({"address": [KNOWN, f"  {KNOWN.upper()} ", KNOWN.replace(", ", " , ")]})
    out = run(df)
    assert len(sim.requests) == 1
    assert out["lon"].nunique() == 1 and (out["geocode_status"] == "matched").all()


def test_rerun_sends_nothing_for_settled_rows(sim: ProviderSimulator, run: Run) -> None:
    df = pd.DataFrame({"address": [KNOWN, HASHED, "Nowhere Lane 1", "Nowhere 2 #malformed"]})
    first = run(df)
    assert len(sim.requests) == 4
    second = run(df)
    sent_again = [r.query for r in sim.requests[4:]]
    assert sent_again == ["nowhere 2 #malformed"]  # failures are never cached
    pd.testing.assert_frame_equal(first.drop(columns="geocode_attempts"),
                                  second.drop(columns="geocode_attempts"))
    assert second.at[3, "geocode_status"] == "failed"


def test_cache_false_sends_again(sim: ProviderSimulator, run: Run) -> None:
    df = pd.DataFrame({"address": [KNOWN]})
    run(df, cache=False)
    run(df, cache=False)
    assert len(sim.requests) == 2


def test_rerun_on_a_result_frame_replaces_the_geocode_columns(sim: ProviderSimulator, run: Run) -> None:
    out = run(pd.DataFrame({"address": [KNOWN]}))
    again = run(out)
    assert list(again.columns) == list(out.columns)
    assert again.at[0, "lon"] == out.at[0, "lon"]


def test_progress_goes_to_the_given_sink(sim: ProviderSimulator, run: Run) -> None:
    events: list[Event] = []
    run(pd.DataFrame({"address": [KNOWN, KNOWN, HASHED]}), progress=events.append)
    assert isinstance(events[0], BatchStarted) and events[0].total == 3 and events[0].unique == 2
    assert isinstance(events[-1], BatchFinished) and events[-1].matched == 3


def test_bad_progress_choice_is_refused(run: Run) -> None:
    with pytest.raises(ValueError, match="progress"):
        run(pd.DataFrame({"address": [KNOWN]}), progress="fancy")


def test_empty_frame(run: Run, sim: ProviderSimulator) -> None:
    out = run(pd.DataFrame({"address": pd.Series([], dtype=object)}))
    assert len(out) == 0 and out.crs.to_epsg() == 4326 and "geocode_status" in out.columns
    assert sim.requests == []


def test_accessor_is_registered_by_importing_geotoolkit() -> None:
    assert isinstance(pd.DataFrame().geocode, geotoolkit.GeocodeAccessor)
    assert isinstance(gpd.GeoDataFrame().geocode, geotoolkit.GeocodeAccessor)


def test_provider_is_required(run: Run) -> None:
    with pytest.raises(ConfigurationError, match="provider"):
        run(pd.DataFrame({"address": [KNOWN]}), provider=42)


def test_api_key_stays_out_of_the_result(sim: ProviderSimulator, run: Run) -> None:
    sim.valid_keys = {"k3y-very-secret"}
    p = Nominatim(sim.url, user_agent="geotoolkit-tests/1.0", api_key="k3y-very-secret")
    out = run(pd.DataFrame({"address": [KNOWN, "Nowhere 1"]}), provider=p)
    assert sim.requests[0].key == "k3y-very-secret"
    text = out.to_csv() + out.geocode.dead_letters().to_csv() + repr(out)
    assert "k3y-very-secret" not in text
