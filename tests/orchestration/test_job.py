"""The one way through: checks before anything opens, usage policies, the gate and cache opened
for the run only, and the frame rules (no silent overwrite of the user's columns)."""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import pandas as pd
import pytest
from shapely.geometry import Point

from geotoolkit import ConfigurationError, MemoryGate, Query, geocode
from geotoolkit.orchestration.job import Columns, FrameJob, gate_backend, opened
from geotoolkit.orchestration.options import GeocodeOptions
from geotoolkit.providers import LARGE_BATCH_ROWS, Nominatim, UsagePolicyWarning
from geotoolkit.store import StoreError
from geotoolkit.testing import ProviderSimulator

AGENT = "geotoolkit-tests/1.0 (tests@example.org)"
PUBLIC = Nominatim(user_agent=AGENT)


def options(**given: object) -> GeocodeOptions:
    given.setdefault("provider", Nominatim("http://127.0.0.1:9", user_agent=AGENT))
    given.setdefault("gate", "memory://")
    given.setdefault("cache", False)
    return GeocodeOptions(**given)  # type: ignore[arg-type]


def frame(**columns: list[object]) -> pd.DataFrame:
    return pd.DataFrame(columns or {"address": ["Vaduz"]})


# -- where the addresses are ---------------------------------------------------------------


def test_columns_from_front_end_arguments() -> None:
    assert Columns.from_arguments() == Columns("address")
    assert Columns.from_arguments(None, street="s", city="c", country="LI") == Columns(
        None, {"street": "s", "city": "c"}, "LI")
    with pytest.raises(ConfigurationError, match="not both"):
        Columns.from_arguments("address", street="s")
    arguments = {"street": "s", "rate": 2}
    assert Columns.take(None, arguments).structured == {"street": "s"} and arguments == {"rate": 2}


def test_a_missing_column_is_named_with_a_hint_for_its_case() -> None:
    with pytest.raises(KeyError, match=r"'address' not in the frame \(did you mean 'Address'\?\)"):
        FrameJob(frame(Address=["Vaduz"]), Columns("address"), options())
    # a spreadsheet's header cell with a space after the name: the hint shows it
    with pytest.raises(KeyError, match=r"'address' not in the frame \(did you mean 'address '\?\)"):
        FrameJob(frame(**{"id": [1], "address ": ["Vaduz"]}), Columns("address"), options())


def test_a_country_that_is_neither_a_code_nor_a_column_says_both() -> None:
    with pytest.raises(ConfigurationError, match=r"neither an ISO .* nor a column of the input "
                                                 r"\(did you mean the column 'land'\?\)"):
        FrameJob(frame(address=["Vaduz"], land=["LI"]), Columns("address", country="Land"),
                 options())
    with pytest.raises(ConfigurationError, match=r"'XX' is neither .* of the input$"):
        FrameJob(frame(address=["Vaduz"]), Columns("address", country="XX"), options())
    assert FrameJob(frame(address=["Vaduz"]), Columns("address", country="li"), options()).items


def test_a_column_labelled_by_a_number_is_found() -> None:
    numbered = pd.DataFrame({0: ["Vaduz"], 1: ["x"]})  # e.g. read with header=None
    assert FrameJob(numbered, Columns(0), options()).items == [Query("Vaduz")]  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="available columns: street"):
        FrameJob(frame(street=["x"]), Columns(None, {"city": "town"}), options())


def test_duplicate_column_names_are_a_clear_error() -> None:
    df = pd.DataFrame([["Vaduz", "a", "b"]], columns=["address", "x", "x"])
    with pytest.raises(ConfigurationError, match="duplicate column names: 'x'"):
        FrameJob(df, Columns("address"), options())


def test_the_users_own_lon_lat_or_geometry_are_never_overwritten_in_silence() -> None:
    own = frame(address=["Vaduz"], lon=[1.0], lat=[2.0])
    with pytest.raises(ConfigurationError, match=r"lon, lat.*overwrite_columns=True"):
        FrameJob(own, Columns("address"), options())
    FrameJob(own, Columns("address"), options(overwrite_columns=True))  # explicit: allowed
    shapes = gpd.GeoDataFrame({"address": ["Vaduz"]}, geometry=[Point(9.5, 47.1)], crs=4326)
    with pytest.raises(ConfigurationError, match="geometry"):
        FrameJob(shapes, Columns("address"), options())
    empty = gpd.GeoDataFrame({"address": ["Vaduz"]}, geometry=[None], crs=4326)
    FrameJob(empty, Columns("address"), options())  # no geometry of theirs to lose
    beside = gpd.GeoDataFrame({"address": ["Vaduz"], "geometry": ["their text"], "geom": [None]},
                              geometry="geom", crs=4326)
    with pytest.raises(ConfigurationError, match="own geometry column"):
        FrameJob(beside, Columns("address"), options())  # an empty active one, and theirs


@pytest.mark.parametrize("name", ["geocode_label", "geocode_reason", "geocode_street",
                                  "geocode_coarse_lon", "geocode_fixed"])
def test_the_users_own_geocode_columns_are_never_dropped_in_silence(name: str) -> None:
    """A result drops every column of the names it adds; outside an earlier result (which
    has a geocode_status) such a column is the user's own."""
    own = frame(address=["Vaduz"], **{name: ["mine"]})
    with pytest.raises(ConfigurationError, match=f"own {name} column.*overwrite_columns=True"):
        FrameJob(own, Columns("address"), options())
    FrameJob(own, Columns("address"), options(overwrite_columns=True))  # explicit: allowed
    earlier = frame(address=["Vaduz"], geocode_status=["matched"], **{name: ["ours"]})
    FrameJob(earlier, Columns("address"), options())  # an earlier result's: replaced


def test_an_earlier_result_can_be_geocoded_again() -> None:
    with ProviderSimulator() as sim:
        opts = options(provider=Nominatim(sim.url, user_agent=AGENT), rate=100)
        first = FrameJob(frame(address=["Städtle 38, 9490 Vaduz"]), Columns("address"), opts)
        result = first.run_sync()
        again = FrameJob(result, Columns("address"), opts).run_sync()
    assert list(again.columns) == list(result.columns)
    assert again["geocode_status"].tolist() == ["matched"]


# -- the gate and cache: opened for the run only ---------------------------------------------


def test_what_the_run_opens_it_closes_and_what_it_was_given_it_leaves(tmp_path: Path) -> None:
    gate = MemoryGate()
    with opened(options(gate=gate, cache=f"sqlite:///{tmp_path}/c.sqlite")) as (g, store):
        assert g is gate and store is not None
    with pytest.raises(StoreError, match="closed"):  # ours, not a bare sqlite3 error
        store.get_many(["k"])  # type: ignore[union-attr]
    assert gate.keys() == []  # still usable: not ours to close



def test_a_run_with_nothing_to_send_opens_neither_gate_nor_cache(tmp_path: Path) -> None:
    """Blank cells only (or no rows): each row fails with its reason, and no gate or cache
    file is made (on a server gate: no connection), since nothing was to be sent."""
    given = options(gate=f"sqlite:///{tmp_path}/g.sqlite", cache=f"sqlite:///{tmp_path}/c.sqlite")
    for cells in ([None, "", "  "], []):
        job = FrameJob(frame(address=cells), Columns("address"), given)
        result = job.run_sync()
        assert list(result["geocode_reason"]) == ["missing address", "empty address", "empty address"][
            :len(cells)]
    assert list(tmp_path.iterdir()) == []

# -- usage policies: checked before anything connects ----------------------------------------


@pytest.mark.parametrize(("gate", "backend"), [
    (None, "sqlite"), ("memory://", "memory"), ("sqlite:///x.db", "sqlite"),
    ("redis://127.0.0.1:1/0", "redis"), ("rediss://h/0", "redis"),
    ("postgresql://u@h/db", "postgres"), ("postgres://u@h/db", "postgres"),
])
def test_gate_backend_from_url_without_opening(gate: str | None, backend: str) -> None:
    assert gate_backend(gate) == backend


def test_gate_backend_of_an_instance() -> None:
    assert gate_backend(MemoryGate()) == "memory"


def test_a_fleet_against_public_nominatim_is_refused_before_connecting() -> None:
    # Nothing listens on port 1: the refusal comes before any connection attempt.
    for gate in ("redis://127.0.0.1:1/0", "postgresql://u@127.0.0.1:1/db"):
        with pytest.raises(ConfigurationError, match="single machine"):
            FrameJob(frame(), Columns("address"), options(provider=PUBLIC, gate=gate))
    with pytest.raises(ConfigurationError):
        geocode([Query(text="Vaduz")], provider=PUBLIC, gate="redis://127.0.0.1:1/0")


def test_a_rate_over_public_nominatims_maximum_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ConfigurationError, match="allows 1 request/s at most"):
        FrameJob(frame(), Columns("address"), options(provider=PUBLIC, rate=5))
    FrameJob(frame(), Columns("address"), options(provider=PUBLIC, rate=1, cache="memory://"))


def test_large_or_uncached_batches_warn() -> None:
    big = frame(address=["x"] * 5000)
    with pytest.warns(UsagePolicyWarning) as caught:
        FrameJob(big, Columns("address"), options(provider=PUBLIC))
    messages = " ".join(str(w.message) for w in caught)
    assert "5000 rows" in messages and "cached" in messages
    FrameJob(frame(address=["x"] * 5), Columns("address"),
             options(provider=PUBLIC, cache="memory://"))  # no warning: it would raise


def test_geocode_counts_unusable_rows_toward_the_batch_size() -> None:
    """Unusable rows never reach the network, but they count toward the batch size."""
    with pytest.warns(UsagePolicyWarning, match=f"{LARGE_BATCH_ROWS + 1} rows"):
        out = geocode([None] * (LARGE_BATCH_ROWS + 1), provider=PUBLIC, gate="memory://",
                      cache="memory://")
    assert {o.status for o in out} == {"failed"}


def test_warnings_point_at_the_caller_not_at_geotoolkit() -> None:
    with pytest.warns(UsagePolicyWarning) as caught:
        FrameJob(frame(address=["x"] * (LARGE_BATCH_ROWS + 1)), Columns("address"),
                 options(provider=PUBLIC, cache="memory://"))
    assert [w.filename for w in caught] == [__file__]
