"""The notebook ProgressPanel: widget state after sequences of progress events.

Time is injected (a list the test advances), so redraw throttling and pause
countdowns are checked without sleeping.
"""

from __future__ import annotations

import pytest

from geotoolkit.display.widget import ProgressPanel
from geotoolkit.progress import (
    BatchFinished,
    BatchStarted,
    Event,
    FleetSampled,
    ItemFinished,
    Throttled,
)

pytestmark = pytest.mark.widget

HOST = "geo.example.org"
SECRET = "s3cret-api-key-4242"


class FakeTime:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make_panel(clock: FakeTime | None = None, max_hz: float = 10.0) -> ProgressPanel:
    return ProgressPanel(display=False, time_fn=clock or FakeTime(), max_hz=max_hz)


def feed(panel: ProgressPanel, events: list[Event], clock: FakeTime | None = None) -> ProgressPanel:
    """Send ``events``, 0.2 s apart on ``clock`` when given (each one then redraws)."""
    for event in events:
        if clock is not None:
            clock.now += 0.2
        panel(event)
    return panel


def batch(matched: int, no_match: int = 0, failed: int = 0, **finish: object) -> list[Event]:
    total = matched + no_match + failed
    events: list[Event] = [BatchStarted(total=total, unique=total, rate=20.0, host=HOST, at=0.0)]
    statuses = ["matched"] * matched + ["no_match"] * no_match + ["failed"] * failed
    events += [ItemFinished(status=s, at=0.1 * (i + 1)) for i, s in enumerate(statuses)]  # type: ignore[arg-type]
    events.append(BatchFinished(matched, no_match, failed, elapsed_seconds=12.34, **finish))  # type: ignore[arg-type]
    return events


def test_success_ends_green_with_full_bar() -> None:
    panel = feed(make_panel(), batch(20))
    assert (panel.bar.value, panel.bar.max) == (20, 20)
    assert panel.bar.bar_style == "success"
    assert "done in 12.3 s" in panel.title.value
    assert "20 matched" in panel.counts.value


def test_dead_letters_end_amber() -> None:
    panel = feed(make_panel(), batch(18, no_match=1, failed=1))
    assert panel.bar.bar_style == "warning"
    assert "1 no match" in panel.counts.value and "1 failed" in panel.counts.value


def test_error_ends_red_and_says_why() -> None:
    panel = feed(make_panel(), batch(3, error="AuthenticationError: 403 from geo.example.org"))
    assert panel.bar.bar_style == "danger"
    assert "stopped: AuthenticationError" in panel.title.value


def test_interrupted_run_says_interrupted() -> None:
    panel = feed(make_panel(), batch(2, interrupted=True))
    assert "interrupted" in panel.title.value
    assert panel.bar.bar_style == "warning"
    assert repr(panel).endswith("interrupted")


def test_running_bar_shows_done_of_total_rate_and_eta() -> None:
    clock = FakeTime()
    panel = feed(make_panel(clock), batch(4)[:3], clock)  # started + 2 of 4 items at 0.1 s, 0.2 s
    assert (panel.bar.value, panel.bar.max, panel.bar.bar_style) == (2, 4, "")
    assert "2/4 (50%) 10.0 rows/s ETA 0 s" in panel.status.value
    assert "running" in panel.title.value


def test_retry_after_pause_counts_down_with_its_cause() -> None:
    clock = FakeTime()
    panel = feed(make_panel(clock), batch(3)[:2], clock)
    clock.now += 0.2
    panel(Throttled(wait_seconds=12.0, cause="retry-after", host=HOST, status_code=429,
                    retry_after=12.0, at=1.0))
    assert f"paused 12 s: Retry-After from {HOST}: 12 s" in panel.pause.value
    clock.now += 5.0
    panel.refresh()
    assert f"paused 7 s: Retry-After from {HOST}: 12 s" in panel.pause.value
    clock.now += 8.0
    panel.refresh()
    assert panel.pause.value == ""


def test_fleet_sample_drives_the_gauge() -> None:
    clock = FakeTime()
    panel = feed(make_panel(clock), batch(3)[:2], clock)
    clock.now += 0.2
    panel(FleetSampled(pace=19.5, allowed_rate=20.0, requests=100, successes=95, throttled=5,
                       window_seconds=5.0, pause_remaining=3.0, pause_cause="fleet pacing",
                       workers_active=3, at=2.0))
    assert "fleet 19.5/20 req/s, throttled 5%, 3 workers" in panel.fleet.value
    assert (panel.gauge.value, panel.gauge.max, panel.gauge.description) == (19.5, 20.0, "fleet")
    assert "paused 3 s: fleet pacing" in panel.pause.value


def test_without_fleet_samples_the_gauge_is_estimated_from_events() -> None:
    clock = FakeTime()
    panel = make_panel(clock)
    feed(panel, [BatchStarted(total=4, unique=4, rate=2.0, host=HOST, at=0.0),
                 Throttled(wait_seconds=1.0, cause="backoff", host=HOST, status_code=503, at=0.5),
                 ItemFinished(status="matched", attempts=2, at=1.0),
                 ItemFinished(status="matched", attempts=1, at=1.5)], clock)
    assert panel.gauge.description == "pace"
    assert "pace 2.0/2 req/s, throttled 33%" in panel.fleet.value
    assert "worker" not in panel.fleet.value  # unknown until the fleet is sampled


def test_backoff_cause_names_status_and_host() -> None:
    clock = FakeTime()
    panel = feed(make_panel(clock), batch(2)[:1], clock)
    clock.now += 0.2
    panel(Throttled(wait_seconds=2.0, cause="backoff", host=HOST, status_code=503))
    assert f"backoff after 503 from {HOST}" in panel.pause.value


def test_redraws_are_coalesced_to_ten_per_second_and_final_state_drawn() -> None:
    clock = FakeTime()
    panel = make_panel(clock)
    renders_at_start = panel.renders
    events = batch(200)
    for event in events[:-1]:
        panel(event)
        clock.now += 0.0009  # 201 events within 0.18 s
    assert panel.renders - renders_at_start <= 2
    assert panel.bar.value < 200  # the latest items are coalesced, not yet drawn
    panel(events[-1])
    assert panel.bar.value == 200 and panel.bar.bar_style == "success"


def test_refresh_draws_coalesced_changes_once_due() -> None:
    clock = FakeTime()
    panel = feed(make_panel(clock), batch(5)[:4])
    drawn = panel.bar.value
    clock.now += 0.2
    panel.refresh()
    assert drawn < panel.bar.value == 3


def test_flush_draws_coalesced_changes_at_once() -> None:
    clock = FakeTime()
    panel = feed(make_panel(clock), batch(5)[:4])  # all at the same instant: one redraw
    assert panel.bar.value == 0
    panel.flush()
    assert panel.bar.value == 3


def test_pause_line_is_hidden_when_not_paused() -> None:
    clock = FakeTime()
    panel = feed(make_panel(clock), batch(2)[:1], clock)
    assert panel.pause.layout.display == "none"
    clock.now += 0.2
    panel(Throttled(wait_seconds=3.0, cause="retry-after", host=HOST, retry_after=3.0))
    assert panel.pause.layout.display is None


def test_text_repr_shows_the_outcome() -> None:
    panel = feed(make_panel(), batch(18, no_match=1, failed=1)[:-1] + [
        Throttled(wait_seconds=1.0, cause="retry-after", host=HOST, retry_after=1.0)] * 3 + [
        BatchFinished(18, 1, 1, elapsed_seconds=12.34)])
    text = "geocoded 20/20 rows: 18 matched, 1 no match, 1 failed; 3 throttled; 12.3 s; done"
    assert repr(panel) == text
    bundle = panel._repr_mimebundle_()
    assert bundle["text/plain"] == text
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == panel.widget.model_id


def test_repr_while_running() -> None:
    panel = feed(make_panel(), batch(3)[:2])
    assert repr(panel).startswith("geocoding 1/3 rows:")
    assert repr(panel).endswith("running")


def test_no_api_key_reaches_the_widgets() -> None:
    """Events carry hosts only, but an error text may quote a URL: it is redacted."""
    url = f"https://user:{SECRET}@{HOST}/search?q=Vaduz&key={SECRET}"
    clock = FakeTime()
    panel = make_panel(clock)
    feed(panel, [BatchStarted(total=2, unique=2, rate=1.0, host=HOST),
                 Throttled(wait_seconds=5.0, cause="retry-after", host=HOST, retry_after=5.0),
                 ItemFinished(status="matched")], clock)
    shown_while_paused = panel.text() + panel.pause.value
    panel(BatchFinished(1, 0, 0, elapsed_seconds=1.0, error=f"AuthenticationError: 403 for {url}"))
    shown = [shown_while_paused, panel.text(), repr(panel), str(panel._repr_mimebundle_())]
    shown += [w.value for w in (panel.title, panel.status, panel.fleet, panel.pause, panel.counts)]
    assert HOST in shown_while_paused
    assert all(SECRET not in text for text in shown)
    assert "key=***" in panel.title.value


def test_html_in_hosts_and_errors_is_escaped() -> None:
    panel = feed(make_panel(), batch(1, error="<script>alert(1)</script>"))
    assert "<script>" not in panel.title.value
    assert "&lt;script&gt;" in panel.title.value


def test_display_false_outside_a_notebook_does_not_start_a_ticker() -> None:
    panel = feed(make_panel(), batch(1)[:1])
    assert panel._ticker is None
    panel.close()


def test_a_run_whose_cache_cannot_open_ends_the_panel_stopped(tmp_path: object) -> None:
    """The panel is shown before the run opens its gate and cache: a cache that cannot open
    left it at 'waiting' for ever (saved so in the notebook) above the traceback."""
    import pandas as pd

    import geotoolkit  # noqa: F401  (registers df.geocode)
    from geotoolkit.errors import GeotoolkitError

    panel = make_panel()
    frame = pd.DataFrame({"address": ["Städtle 38, 9490 Vaduz"]})
    blocked = f"{tmp_path}/a-file"
    with open(blocked, "w", encoding="utf-8"):
        pass
    with pytest.raises(GeotoolkitError) as raised:
        frame.geocode.run("address", provider="photon", gate="memory://",
                          cache=f"sqlite:///{blocked}/cache.sqlite", progress=panel)
    view = panel.model.view()
    assert view.state == "stopped" and view.error is not None
    assert view.error.startswith(type(raised.value).__name__)
    assert panel.bar.bar_style == "danger" and repr(panel).startswith("geocoded 0/")


def test_a_run_of_no_rows_ends_with_a_full_bar_as_its_text_says() -> None:
    """0 of 0 rows is done ('0/0 (100%)'), yet the bar stayed empty under the green title."""
    panel = feed(make_panel(), [BatchStarted(total=0, unique=0, host=HOST),
                                BatchFinished(0, 0, 0, elapsed_seconds=0.0)])
    assert "0/0 (100%)" in panel.status.value
    assert panel.bar.value == panel.bar.max and panel.bar.bar_style == "success"
    running = feed(make_panel(), [BatchStarted(total=0, unique=0, host=HOST)])
    assert running.bar.value == 0  # not yet done


def test_a_panel_passed_to_a_second_run_shows_that_run_alone() -> None:
    """A panel of one's own (``ProgressPanel(label="Alice")``) passed to the run of a cell run
    again kept the first run's rows: 'geocoded 6/3 rows: ... done' while the second run
    started, then 'geocoded 9/3 rows', '9/3 (300%)'. A provider chain's stages too."""
    import pandas as pd

    import geotoolkit  # noqa: F401  (registers df.geocode)
    from geotoolkit.providers import Nominatim, Photon
    from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

    addresses = [k.address for k in KNOWN_ADDRESSES]
    panel, seen = make_panel(), []

    def sink(event: Event) -> None:
        panel(event)
        seen.append(repr(panel))

    with ProviderSimulator() as sim:
        options = {"gate": "memory://", "cache": False, "rate": 100, "progress": sink,
                   "provider": Nominatim(sim.url, user_agent="geotoolkit-tests/1.0")}
        pd.DataFrame({"address": [*addresses[:5], "Nowhere 1"]}).geocode.run(**options)
        assert repr(panel).startswith("geocoded 6/6 rows: 5 matched, 1 no match")
        seen.clear()
        pd.DataFrame({"address": addresses[5:8]}).geocode.run(**options)
        assert seen[0].startswith("geocoding 0/3 rows"), seen[0]
        assert repr(panel).startswith("geocoded 3/3 rows: 3 matched, 0 no match")
        assert "3/3 (100%)" in panel.status.value
        assert (panel.bar.value, panel.bar.max, panel.bar.bar_style) == (3, 3, "success")
        chain = [Photon(f"{sim.url}/photon"), options["provider"]]
        pd.DataFrame({"address": [*addresses[8:10], "Nowhere 2"]}).geocode.run(
            **{**options, "provider": chain, "rate": None})
        assert repr(panel).startswith("geocoded 3/3 rows: 2 matched, 1 no match")
        assert (panel.bar.value, panel.bar.max) == (3, 3)
