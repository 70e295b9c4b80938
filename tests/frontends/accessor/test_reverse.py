"""gdf.geocode.reverse() end to end against the simulator on loopback: every provider with a
reverse endpoint, reprojection, the distance column, the cache, chains, export and the map."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pyogrio
import pytest
from pyproj import Geod, Transformer
from shapely.geometry import LineString, Point

from geotoolkit import ConfigurationError, RateLimitError
from geotoolkit.clock import SystemClock
from geotoolkit.export import PRECISION_DTYPE, read_results, write_results
from geotoolkit.frontends.accessor import GeocodeAccessor
from geotoolkit.frontends.background import GeocodeJob
from geotoolkit.progress import BatchFinished, BatchStarted, Event
from geotoolkit.providers import PROVIDERS as REGISTRY
from geotoolkit.providers import (
    ArcGIS,
    Geonorge,
    Google,
    Here,
    LocationIQ,
    Mapbox,
    Nominatim,
    OpenCage,
    Pelias,
    Photon,
    can_reverse,
)
from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

UA = "geotoolkit-tests/1.0 (tests@example.org)"
SECRET = "sk-reverse-0123456789-secret"
STAEDTLE = (9.5219500, 47.1397400)  # Städtle 38, 9490 Vaduz
NEAR_STAEDTLE = (9.52197, 47.13976)  # about 3 m away
NEAR_DUXWEG = (9.5125, 47.1705)  # near a street, far from any known house
IN_THE_HILLS = (9.600, 47.200)  # only the nearest town
OUTSIDE = (10.0, 47.0)  # outside Liechtenstein: nothing there
SAFETY = 30.0

#: Every provider with a reverse endpoint, pointed at the simulator.
PROVIDERS: dict[str, Callable[[str], Any]] = {
    "nominatim": lambda url: Nominatim(url, user_agent=UA, api_key=SECRET),
    "locationiq": lambda url: LocationIQ(url, api_key=SECRET),
    "photon": lambda url: Photon(url),
    "pelias": lambda url: Pelias(url, api_key=SECRET),
    "opencage": lambda url: OpenCage(url, api_key=SECRET),
    "google": lambda url: Google(url, api_key=SECRET),
    "mapbox": lambda url: Mapbox(url, api_key=SECRET),
    "here": lambda url: Here(url, api_key=SECRET),
    "arcgis": lambda url: ArcGIS(url, api_key=SECRET),
    "geonorge": lambda url: Geonorge(url),
}


@pytest.fixture(scope="module")
def keyed_sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator(valid_keys={SECRET}) as simulator:
        yield simulator


def fixes(*lonlat: tuple[float, float] | None, crs: str = "EPSG:4326") -> gpd.GeoDataFrame:
    geometry = [None if p is None else Point(*p) for p in lonlat]  # shapely: x = lon, y = lat
    return gpd.GeoDataFrame({"fix": [f"f{i}" for i in range(len(lonlat))]}, geometry=geometry,
                            crs=crs)


def reverse(frame: gpd.GeoDataFrame, provider: Any, **options: Any) -> Any:
    defaults = {"gate": "memory://", "cache": False, "progress": False, "rate": 100}
    return frame.geocode.reverse(provider=provider, **{**defaults, **options})


def sent(sim: ProviderSimulator) -> list[str | None]:
    return [r.query for r in sim.requests]


def test_every_reverse_capable_provider_is_covered() -> None:
    assert sorted(PROVIDERS) == sorted(n for n, cls in REGISTRY.items() if can_reverse(cls))


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_every_provider_end_to_end(keyed_sim: ProviderSimulator, name: str) -> None:
    keyed_sim.reset()
    frame = fixes(NEAR_STAEDTLE, OUTSIDE, None)
    out = reverse(frame, PROVIDERS[name](keyed_sim.url), full_results=True, batch_size=1)
    assert list(out.geocode_status) == ["matched", "no_match", "failed"]
    assert out.geocode_provider.tolist() == [name] * 3
    assert (out.geocode_lon.iloc[0], out.geocode_lat.iloc[0]) == STAEDTLE
    assert out.geocode_precision.iloc[0] == "address" and out.geocode_housenumber.iloc[0] == "38"
    assert "Städtle" in out.geocode_label.iloc[0] or "38" in out.geocode_label.iloc[0]
    assert 2.0 < out.geocode_distance_m.iloc[0] < 3.5  # about 3 m from the fix
    assert out.geocode_reason.iloc[2] == "missing geometry"
    assert sent(keyed_sim) == ["reverse:9.521970,47.139760", "reverse:10.000000,47.000000"]
    assert {r.provider for r in keyed_sim.requests} == {name}
    assert all(SECRET not in str(v) for v in out.astype(str).to_numpy().ravel())


def test_swiss_lv95_fixes_in_liechtenstein_are_reprojected(keyed_sim: ProviderSimulator) -> None:
    keyed_sim.reset()
    to_lv95 = Transformer.from_crs("EPSG:4326", "EPSG:2056", always_xy=True)
    lv95 = [to_lv95.transform(*p) for p in (STAEDTLE, NEAR_DUXWEG)]
    frame = fixes(*lv95, crs="EPSG:2056")
    out = reverse(frame, PROVIDERS["photon"](keyed_sim.url))
    assert out.crs.to_epsg() == 4326 and frame.crs.to_epsg() == 2056
    assert [(round(g.x, 7), round(g.y, 7)) for g in out.geometry] == [STAEDTLE, NEAR_DUXWEG]
    assert list(out.geocode_precision.astype(str)) == ["address", "street"]
    assert out.geocode_label.iloc[0] == "Städtle 38, 9490 Vaduz, Liechtenstein"
    assert sent(keyed_sim) == ["reverse:9.521950,47.139740", "reverse:9.512500,47.170500"]
    assert out.geocode_distance_m.iloc[0] < 0.01


def test_null_island_is_a_dead_letter_never_sent(keyed_sim: ProviderSimulator) -> None:
    keyed_sim.reset()  # (0, 0) is a fix that was missing, written as zeros: in any CRS, any form
    web_mercator = fixes(STAEDTLE, (0.0, 0.0)).to_crs("EPSG:3857")
    out = reverse(web_mercator, PROVIDERS["photon"](keyed_sim.url))
    columns = pd.DataFrame({"x": ["0", "0.0", "9.52195"], "y": ["0", "-0", "47.13974"]})
    plain = reverse(columns, PROVIDERS["photon"](keyed_sim.url), lon="x", lat="y")
    assert list(out.geocode_status) == ["matched", "failed"]
    assert list(plain.geocode_status) == ["failed", "failed", "matched"]
    for letter in (out.iloc[1], plain.iloc[0], plain.iloc[1]):
        assert letter.geocode_reason == "null island (0, 0)" and letter.geocode_attempts == 0
    assert sent(keyed_sim) == ["reverse:9.521950,47.139740"] * 2  # only the real fixes


def test_the_distance_column_shows_how_far_the_answer_is(keyed_sim: ProviderSimulator) -> None:
    geod = Geod(ellps="WGS84")
    east = geod.fwd(*STAEDTLE, 90.0, 100.0)[:2]  # 100 m east of Städtle 38: still its nearest
    out = reverse(fixes(east, IN_THE_HILLS), PROVIDERS["nominatim"](keyed_sim.url))
    assert out.geocode_label.iloc[0] == "38, Städtle, Vaduz, 9490, Liechtenstein"
    assert out.geocode_distance_m.iloc[0] == pytest.approx(100.0, abs=1e-3)
    town = out.iloc[1]  # only a town up there: kilometres away, and the column says so
    assert town.geocode_precision == "locality" and town.geocode_distance_m > 3000
    expected = geod.inv(*IN_THE_HILLS, town.geocode_lon, town.geocode_lat)[2]
    assert town.geocode_distance_m == pytest.approx(expected)


def test_a_rerun_sends_nothing_and_near_fixes_share_one_request(tmp_path: Path) -> None:
    jitter = (STAEDTLE[0] + 4e-7, STAEDTLE[1] - 3e-7)  # rounds to the same 6 decimals
    frame = fixes(STAEDTLE, jitter, NEAR_DUXWEG, STAEDTLE)
    cache = f"sqlite:///{tmp_path}/reverse.sqlite"
    with ProviderSimulator() as sim:
        first = reverse(frame, Photon(sim.url), cache=cache)
        assert sent(sim) == ["reverse:9.521950,47.139740", "reverse:9.512500,47.170500"]
        again = reverse(frame, Photon(sim.url), cache=cache)
        assert len(sim.requests) == 2  # every point came from the cache
        coarse = reverse(fixes((9.52201, 47.13971), (9.52204, 47.13974)), Photon(sim.url),
                         cache=cache, decimals=4)
        assert sent(sim)[2:] == ["reverse:9.522000,47.139700"]  # 4 m apart: one request
    pd.testing.assert_frame_equal(pd.DataFrame(first), pd.DataFrame(again))
    assert first.geocode_distance_m.iloc[1] > 0 == first.geocode_distance_m.iloc[0]
    assert coarse.geocode_status.tolist() == ["matched", "matched"]


def test_background_returns_a_job_whose_result_is_the_frame(keyed_sim: ProviderSimulator) -> None:
    job = reverse(fixes(NEAR_STAEDTLE, OUTSIDE), PROVIDERS["photon"](keyed_sim.url),
                  background=True)
    assert isinstance(job, GeocodeJob)
    out = job.result(timeout=SAFETY)
    assert list(out.geocode_status) == ["matched", "no_match"] and job.status() == "done"
    assert repr(job).startswith("<GeocodeJob done: 2/2 rows: 1 matched, 1 no match")


class Later(SystemClock):
    """The real clock, read two minutes ahead: "rerun once the pause is over"."""

    def now(self) -> float:
        return super().now() + 121.0


def test_non_blocking_raises_instead_of_waiting_and_the_rerun_sends_only_the_rest(
        tmp_path: Path) -> None:
    frame = fixes(*((k.lon + 1e-5, k.lat) for k in KNOWN_ADDRESSES[:12]))
    options = {"rate": 50, "max_wait_seconds": 5, "gate": f"sqlite:///{tmp_path}/gate.sqlite",
               "cache": f"sqlite:///{tmp_path}/results.sqlite"}
    with ProviderSimulator(rate_limit=4, retry_after=120) as sim:
        provider = Nominatim(sim.url, user_agent=UA)
        with pytest.raises(RateLimitError) as raised:
            reverse(frame, provider, **options)
        assert 100 < (raised.value.retry_after or 0) <= 120
        settled = {r.query for r in sim.requests if r.status == 200}
        assert 1 <= len(settled) < 12
        sim.reset()
        sim.rate_limit = None
        out = reverse(frame, provider, **options, clock=Later())
        resent = [r.query for r in sim.requests]
    assert (out.geocode_status == "matched").all()
    assert len(resent) == len(set(resent)) == 12 - len(settled)
    assert not settled & set(resent)


def test_a_fallback_chain_asks_the_next_provider_for_what_the_first_left(
        keyed_sim: ProviderSimulator) -> None:
    keyed_sim.reset()
    chain = [Geonorge(keyed_sim.url, rate=math.inf),  # Geonorge answers addresses only
             Photon(keyed_sim.url, rate=math.inf)]
    out = reverse(fixes(NEAR_STAEDTLE, NEAR_DUXWEG), chain, rate=None)  # their own rates
    assert list(out.geocode_provider) == ["geonorge", "photon"]
    assert list(out.geocode_precision.astype(str)) == ["address", "street"]
    assert [r.provider for r in keyed_sim.requests] == ["geonorge", "geonorge", "photon"]


def test_min_precision_and_the_dead_letters_keep_where_the_fix_was(
        keyed_sim: ProviderSimulator) -> None:
    line = LineString([(9.5, 47.1), (9.6, 47.2)])
    frame = fixes(NEAR_STAEDTLE, IN_THE_HILLS, OUTSIDE, None)
    frame.loc[3, "geometry"] = line
    out = reverse(frame, PROVIDERS["photon"](keyed_sim.url), min_precision="street")
    assert list(out.geocode_status) == ["matched", "too_coarse", "no_match", "failed"]
    letters = out.geocode.dead_letters()
    assert isinstance(letters, gpd.GeoDataFrame) and list(letters.index) == [1, 2, 3]
    assert list(letters.geometry) == [Point(*IN_THE_HILLS), Point(*OUTSIDE), line]
    assert letters.geocode_reason.tolist()[0::2] == [
        "precision locality is coarser than street",
        "not a point (LineString): reverse geocoding takes Points"]
    assert letters.geocode_distance_m.iloc[0] > 3000  # the coarse answer is kept, with its distance
    assert list(letters.columns[:3]) == ["fix", "geocode_status", "geocode_reason"]


def test_geopackage_and_geoparquet_hold_a_reverse_result(keyed_sim: ProviderSimulator,
                                                         tmp_path: Path) -> None:
    out = reverse(fixes(NEAR_STAEDTLE, OUTSIDE, None, NEAR_DUXWEG),
                  PROVIDERS["opencage"](keyed_sim.url))
    gpkg = tmp_path / "places.gpkg"
    assert write_results(out, gpkg) == (2, 2)
    layers = dict(pyogrio.list_layers(gpkg).tolist())
    assert layers["geocoded"] == "Point"
    letters = pyogrio.read_dataframe(gpkg, layer="dead_letters")
    assert list(letters.geometry) == [Point(*OUTSIDE), None]  # the fixes, where they were
    back = read_results(gpkg)
    assert sorted(back.fix) == ["f0", "f1", "f2", "f3"]
    assert back.geocode_precision.dtype == PRECISION_DTYPE
    assert back.set_index("fix").geocode_distance_m.round(6).to_dict() == pytest.approx(
        out.set_index("fix").geocode_distance_m.round(6).to_dict(), nan_ok=True)
    parquet = tmp_path / "places.parquet"
    assert write_results(out, parquet) == (2, 2)
    again = read_results(parquet)
    assert list(again.index) == list(out.index) and list(again.geometry) == list(out.geometry)
    assert again.geocode.dead_letters().index.tolist() == [1, 2]
    for blob in (gpkg.read_bytes(), parquet.read_bytes()):
        assert SECRET.encode() not in blob


def test_explore_maps_the_fixes_with_the_address_and_distance(keyed_sim: ProviderSimulator) -> None:
    out = reverse(fixes(NEAR_STAEDTLE, NEAR_DUXWEG, OUTSIDE), PROVIDERS["photon"](keyed_sim.url))
    shown = out.geocode.explore()
    assert repr(shown) == "<ResultMap: 1 dead letters>"
    page = shown._repr_html_()
    assert "leaflet" in page.lower() and "geocode_distance_m" in page
    assert shown.map.location == pytest.approx([NEAR_STAEDTLE[1], NEAR_STAEDTLE[0]])  # medians


def test_progress_events_and_a_plain_frame_with_named_columns(keyed_sim: ProviderSimulator) -> None:
    events: list[Event] = []
    df = pd.DataFrame({"lon": [NEAR_STAEDTLE[0], "x"], "lat": [NEAR_STAEDTLE[1], 47.1]})
    out = df.geocode.reverse(lon="lon", lat="lat", provider=PROVIDERS["photon"](keyed_sim.url),
                             gate="memory://", cache=False, progress=events.append)
    assert list(out.columns[:2]) == ["lon", "lat"]  # the input's own, kept
    assert list(out.geocode_status) == ["matched", "failed"]
    assert out.geocode_reason.iloc[1] == "lon (lon) is not a number: 'x'"
    started = [e for e in events if isinstance(e, BatchStarted)]
    finished = [e for e in events if isinstance(e, BatchFinished)]
    assert started[0].total == 2 and finished[-1].matched == 1


def test_the_signature_lists_every_option_and_retry_is_refused(keyed_sim: ProviderSimulator) -> None:
    params = inspect.signature(GeocodeAccessor.reverse).parameters
    assert list(params)[:8] == ["self", "lon", "lat", "crs", "decimals", "country", "progress",
                                "background"]
    assert {"provider", "rate", "gate", "cache", "min_precision", "full_results",
            "max_wait_seconds"} <= set(params)
    assert "column" not in params and "street" not in params
    out = reverse(fixes(OUTSIDE), PROVIDERS["photon"](keyed_sim.url))
    with pytest.raises(ConfigurationError, match="run reverse\\(\\) again"):
        out.geocode.retry(provider=PROVIDERS["photon"](keyed_sim.url))
