"""What the renderers show of precision and chains (too coarse, the stage), and the map."""

from __future__ import annotations

import html
import io
import sys
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest

from geotoolkit import ConfigurationError
from geotoolkit.display.map import PRECISION_COLOURS, ResultMap, explore
from geotoolkit.display.model import ProgressModel, counts_text, stage_text, summary_line
from geotoolkit.display.text import TextProgress
from geotoolkit.display.widget import ProgressPanel
from geotoolkit.orchestration.frame import outcomes_frame
from geotoolkit.progress import (
    BatchFinished,
    BatchStarted,
    Event,
    ItemFinished,
    StageSink,
    StageStarted,
    Tally,
)
from geotoolkit.results import Match, NoMatch

CHAIN: list[Event] = [
    StageStarted(1, 2, "census", 4, at=0.0),
    BatchStarted(total=4, unique=4, rate=5.0, host="census.example", at=0.0),
    ItemFinished("matched", precision="address", at=1.0),
    ItemFinished("too_coarse", precision="locality", passed_on=True, at=1.0),
    ItemFinished("no_match", rows=2, passed_on=True, at=1.0),
    StageStarted(2, 2, "nominatim", 3, at=1.0),
    BatchStarted(total=3, unique=2, rate=1.0, host="nominatim.example", at=1.0),
    ItemFinished("matched", precision="street", at=2.0),
]


def test_a_chain_is_counted_once_per_row_and_shows_its_stage() -> None:
    tally = Tally()
    for event in CHAIN:
        tally.update(event)
    assert (tally.total, tally.done, tally.passed_on, tally.matched) == (4, 2, 3, 2)
    assert (tally.rate, tally.host) == (1.0, "nominatim.example")  # the running stage's
    model = ProgressModel(time_fn=lambda: 2.0, tally=tally)
    assert stage_text(model.view()) == "stage 2/2: nominatim (3 rows)"
    stream = io.StringIO()
    text = TextProgress(stream, time_fn=lambda: 2.0)
    for event in CHAIN:
        text(event)
    assert "| stage 2/2: nominatim (3 rows) |" in text.line()
    panel = ProgressPanel(display=False, time_fn=lambda: 2.0)
    for event in CHAIN:
        panel(event)
    panel.flush()
    assert "stage 2/2: nominatim (3 rows)" in panel.title.value
    assert "stage 2/2: nominatim (3 rows)" in panel.text()


def test_too_coarse_is_counted_apart_everywhere() -> None:
    events: list[Event] = [BatchStarted(total=3, unique=3), ItemFinished("matched"),
                           ItemFinished("too_coarse", precision="locality"),
                           ItemFinished("no_match"),
                           BatchFinished(1, 1, 0, elapsed_seconds=1.0, too_coarse=1)]
    tally = Tally()
    panel = ProgressPanel(display=False)
    for event in events:
        tally.update(event)
        panel(event)
    assert summary_line(tally) == ("3/3 rows: 1 matched, 1 too coarse, 1 no match, 0 failed; "
                                   "0 throttled; 1.0 s; done")
    assert "1 too coarse" in panel.counts.value and panel.bar.bar_style == "warning"
    view = ProgressModel(tally=tally).view()
    assert view.dead_letters == 2 and counts_text(view).startswith("1 matched, 1 too coarse")
    plain = Tally()
    plain.update(ItemFinished("matched"))
    assert "too coarse" not in counts_text(ProgressModel(tally=plain).view())


def test_the_stage_sink_holds_back_a_stage_finish_but_not_an_error() -> None:
    seen: list[Event] = []
    sink = StageSink(seen.append, min_precision="street", fallback_on=("no_match", "failed"))
    sink.last = False
    sink(BatchStarted(total=3, unique=3, at=5.0))
    sink(ItemFinished("failed", attempts=0))  # never sent: not passed on
    sink(ItemFinished("failed", attempts=2))
    sink(ItemFinished("matched", precision="postcode"))  # too coarse, not in fallback_on
    sink(BatchFinished(1, 0, 2, elapsed_seconds=1.0, at=6.0))
    assert [type(e).__name__ for e in seen] == ["BatchStarted", "ItemFinished", "ItemFinished",
                                                "ItemFinished"]
    assert [(e.status, e.passed_on) for e in seen[1:]] == [  # type: ignore[union-attr]
        ("failed", False), ("failed", True), ("too_coarse", False)]
    sink(BatchFinished(0, 0, 0, elapsed_seconds=1.0, at=7.0, error="AuthenticationError: 403"))
    end = seen[-1]
    assert isinstance(end, BatchFinished) and end.error == "AuthenticationError: 403"
    assert (end.failed, end.too_coarse, end.elapsed_seconds) == (1, 1, 2.0)


# -- the map --------------------------------------------------------------------------------


def _result() -> gpd.GeoDataFrame:
    df = pd.DataFrame({"address": ["Städtle 38", "Vaduz", "Nowhere <b>", "Äulestrasse"]})
    outcomes = [Match(9.52195, 47.13974, "Städtle 38, Vaduz", "sim", precision="address"),
                Match(9.5215, 47.1415, "Vaduz", "sim", precision="locality"),
                NoMatch(provider="sim"),
                Match(9.5205, 47.1418, "Äulestrasse", "sim", precision="street")]
    return outcomes_frame(df, outcomes, min_precision="street")


def test_explore_colours_points_by_precision_and_lists_the_dead_letters(tmp_path: Path) -> None:
    pytest.importorskip("folium")
    shown = _result().geocode.explore()
    assert isinstance(shown, ResultMap)
    page = shown._repr_html_()
    assert list(shown.dead_letters["address"]) == ["Vaduz", "Nowhere <b>"]
    assert "2 dead letters" in page and "precision locality is coarser than street" in page
    assert "Nowhere &lt;b&gt;" in page and "Nowhere <b>" not in shown.table_html()  # escaped
    rendered = shown.map.get_root().render()
    for colour in (PRECISION_COLOURS["address"], PRECISION_COLOURS["street"]):
        assert colour in rendered
    assert PRECISION_COLOURS["country"] not in rendered  # only the precisions present
    assert "too coarse" in rendered and "geocode_precision" in rendered
    saved = shown.save(tmp_path / "map.html")
    assert "2 dead letters" in saved.read_text(encoding="utf-8")


def test_the_map_shows_hostile_text_as_text_not_html() -> None:
    """folium's tooltips set their fields as innerHTML: an address, a column name or a
    provider's label must reach them escaped, or it runs in whoever opens the map."""
    folium = pytest.importorskip("folium")
    payload = '<img src=x onerror="alert(1)">'
    df = pd.DataFrame({"address": ["Städtle 38", "Vaduz " + payload],
                       payload: ["a", {"k": payload}]})
    outcomes = [Match(9.52195, 47.13974, payload, "sim", precision="address"),
                Match(9.5215, 47.1415, "Vaduz", "sim", precision="locality")]
    shown = outcomes_frame(df, outcomes, min_precision="street").geocode.explore()
    layers = [c for c in shown.map._children.values() if isinstance(c, folium.GeoJson)]
    assert len(layers) == 2  # the match, and the too-coarse point
    for layer in layers:
        tooltip = next(c for c in layer._children.values()
                       if isinstance(c, folium.GeoJsonTooltip))
        assert html.escape(payload) in tooltip.fields
        cells = [(k, v) for f in layer.data["features"] for k, v in f["properties"].items()]
        texts = [*tooltip.fields, *tooltip.aliases, *(str(x) for kv in cells for x in kv)]
        assert not [t for t in texts if "<" in t]


def test_the_map_opens_on_every_point_it_draws() -> None:
    """Addresses across a country: the map opened at zoom 12 on the median lat and the
    median lon (a spot in the mountains between Oslo, Bergen and Tromsø), no point in
    sight; it now fits the drawn points (matches and too-coarse ones), as gdf.explore()."""
    pytest.importorskip("folium")
    df = pd.DataFrame({"address": ["Karl Johans gate 1, Oslo", "Bryggen, Bergen", "Tromsø"]})
    outcomes = [Match(10.7522, 59.9139, "Oslo", "sim", precision="address"),
                Match(5.3240, 60.3975, "Bergen", "sim", precision="street"),
                Match(18.9553, 69.6492, "Tromsø", "sim", precision="locality")]
    shown = outcomes_frame(df, outcomes, min_precision="street").geocode.explore()
    bounds = shown.map.get_bounds()
    assert bounds == [[59.9139, 5.324], [69.6492, 18.9553]]  # the coarse Tromsø included
    page = shown.map.get_root().render()
    assert "fitBounds" in page and "[[59.9139, 5.324], [69.6492, 18.9553]]" in page


def test_explore_without_the_map_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "folium", None)  # an import of it now fails
    with pytest.raises(ConfigurationError, match=r"pip install -e '\.\[map\]' in geotoolkit's checkout"):
        explore(_result(), _result().geocode.dead_letters())


def test_explore_a_result_without_dead_letters_or_matches() -> None:
    pytest.importorskip("folium")
    df = pd.DataFrame({"address": ["Städtle 38"]})
    matched = outcomes_frame(df, [Match(9.52195, 47.13974, "x", "sim", precision="address")])
    assert "No dead letters" in matched.geocode.explore()._repr_html_()
    nothing = outcomes_frame(df, [NoMatch(provider="sim")])
    assert "1 dead letter" in nothing.geocode.explore()._repr_html_()


def _many(n: int) -> gpd.GeoDataFrame:
    df = pd.DataFrame({"address": [f"Landstrasse {i}, Vaduz" for i in range(n)]})
    outcomes = [Match(9.5 + i * 1e-5, 47.1 + i * 1e-5, f"Landstrasse {i}", "sim",
                      precision="address") for i in range(n)]
    return outcomes_frame(df, outcomes)


def _features(shown: ResultMap) -> int:
    import folium

    layers = [c for c in shown.map._children.values() if isinstance(c, folium.GeoJson)]
    return sum(len(layer.data["features"]) for layer in layers)


def test_a_huge_result_draws_a_sample_and_says_so() -> None:
    """400 000 points made a map of hundreds of MB in the notebook (20 000 were 12 MB): it
    draws at most ``max_points`` (5 000 by default) and says how many of how many."""
    pytest.importorskip("folium")
    shown = _many(6_000).geocode.explore()
    assert _features(shown) == 5_000
    assert "5,000 of 6,000 points" in shown._repr_html_() and "max_points=None" in shown._repr_html_()
    few = _many(120)
    assert _features(few.geocode.explore(max_points=50)) == 50
    assert _features(few.geocode.explore(max_points=None)) == 120
    assert "points" not in few.geocode.explore(max_points=None).table_html()
    with pytest.raises(ConfigurationError, match="max_points"):
        few.geocode.explore(max_points=0)


def test_a_wide_result_keeps_its_map_page_small() -> None:
    """Every column went into every point of the page, though the tooltip shows a few: a
    50 000-row result with 30 columns of its own and full_results made a 15.8 MB notebook
    output. The points carry only what the map shows (the tooltip's and popup's columns)."""
    pytest.importorskip("folium")
    narrow = _many(2_000)
    wide = narrow.copy()
    for k in range(30):
        wide[f"col{k}"] = [f"some value {k} of row {i} here" for i in range(len(wide))]
    narrow_page, wide_page = (len(f.geocode.explore()._repr_html_()) for f in (narrow, wide))
    assert wide_page < 1.5 * narrow_page, (narrow_page, wide_page)  # 3.5 times before
    shown = wide.geocode.explore(max_points=None)
    properties = next(iter(_layers(shown))).data["features"][0]["properties"]
    assert {"address", "col0", "col1", "col2", "geocode_label", "geocode_provider",
            "geocode_precision"} <= set(properties)  # the tooltip's columns
    assert "col29" not in properties and "geocode_attempts" not in properties
    popup = wide.geocode.explore(max_points=None, popup=["col29"])
    assert "col29" in next(iter(_layers(popup))).data["features"][0]["properties"]
    everything = wide.geocode.explore(max_points=None, tooltip=True)
    assert "col29" in next(iter(_layers(everything))).data["features"][0]["properties"]


def _layers(shown: ResultMap) -> list[Any]:
    import folium

    return [c for c in shown.map._children.values() if isinstance(c, folium.GeoJson)]
