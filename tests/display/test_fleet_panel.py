"""The fleet panel: widget values after direct refreshes over real memory and SQLite gates.

Gates run on a FakeClock, the panel is refreshed by hand (``start=False``) and the
widgets are read back; the background refresh is checked with an event the source
sets, never by sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import geotoolkit
from geotoolkit.clock import FakeClock
from geotoolkit.display.fleet_panel import FleetPanel
from geotoolkit.display.fleet_text import FleetText
from geotoolkit.errors import GateError
from geotoolkit.frontends.fleet_watch import Selection, select, status_source
from geotoolkit.gate import Cap, Gate, MemoryGate, Report, SQLiteGate, gate_key
from geotoolkit.gate.fleet import DISCOVERED, AimdState
from geotoolkit.gate.strategy import fleet_key

pytestmark = pytest.mark.widget

API_KEY = "sk-LIVE-0c7d55e1a9f2"
HOST = "api.opencagedata.com"  # published: 1 request/s
START = 1_709_251_200.0  # 2024-03-01T00:00:00Z


@pytest.fixture(params=["memory", "sqlite"])
def gate(request: pytest.FixtureRequest, tmp_path: Path) -> Gate:
    clock = FakeClock(start=START)
    if request.param == "memory":
        return MemoryGate(clock=clock)
    return SQLiteGate(tmp_path / "gate.sqlite", clock=clock)


def panel_over(gate: Gate, selection: Selection | None = None, **options: Any) -> FleetPanel:
    return FleetPanel(status_source(gate, selection or select()), display=False, start=False,
                      time_fn=lambda: START, **options)


def test_refresh_draws_each_keys_figures(gate: Gate) -> None:
    key = gate_key(HOST, API_KEY)
    gate.reserve(key, 1.0, report=Report(4, 4, 0), cap=Cap(2500))
    gate.record(key, Report(), worker="w1")
    panel = panel_over(gate, title="sqlite:///team/gate.sqlite")
    card = panel.cards[key]
    assert panel.keys.children == (card.box,)
    assert "gate sqlite:///team/gate.sqlite | 1 key | 2024-03-01 00:00:00 UTC" in panel.header.value
    assert key in card.title.value
    assert (card.gauge.max, card.gauge.value, card.gauge.bar_style) == (1.0, 1.0, "info")
    assert "pace 4/1 req/s (400% of allowed: 1 req/s x factor 1, published)" in card.pace.value
    assert "factor 1 | throttled per success 0 (4 successes over 1 s) | 1 worker active" in card.details.value
    assert card.pause.layout.display == "none" and card.pause.value == ""
    assert "counted toward caps: 1 on 2024-03-01 (UTC day), 0 in 2024-03 (UTC month)" in card.caps.value
    assert API_KEY not in panel.text()


def test_a_refresh_shows_what_changed_on_the_gate(gate: Gate) -> None:
    key, other = gate_key(HOST, API_KEY), gate_key("geo.internal")
    gate.reserve(key, 1.0, report=Report(8, 6, 2))
    panel = panel_over(gate)
    card = panel.cards[key]
    assert card.gauge.bar_style == "danger"  # 2 429s per 6 successes
    gate.pause(key, 30.0, cause=f"Retry-After from {HOST}: 30 s (key={API_KEY})")
    gate.set_value(fleet_key(key), DISCOVERED, AimdState(2.5).to_text(), ttl_seconds=600)
    gate.record(key, Report(), worker="w1")
    gate.record(key, Report(), worker="w2")
    gate.reserve(other, 1.0)
    panel.refresh()
    assert panel.refreshes == 2
    assert card.pause.layout.display is None
    assert f"paused 30 s: Retry-After from {HOST}: 30 s (key=***)" in card.pause.value
    assert "x factor 1, learned)" in card.pace.value and card.gauge.max == 2.5
    assert "2 workers active" in card.details.value
    assert len(panel.keys.children) == 2
    assert "allowed rate unknown" in panel.cards[other].pace.value
    assert API_KEY not in panel.text() and API_KEY not in repr(panel._repr_mimebundle_())


def test_a_provider_selects_its_keys(gate: Gate) -> None:
    from geotoolkit.providers import OpenCage

    mine, theirs = gate_key(HOST, API_KEY), gate_key(HOST, "sk-LIVE-someone-else")
    for key in (mine, theirs, gate_key("geo.internal")):
        gate.reserve(key, 1.0)
    assert set(panel_over(gate, select("opencage")).cards) == {mine, theirs}
    own = panel_over(gate, select(OpenCage(api_key=API_KEY, rate=4.0)))
    assert set(own.cards) == {mine} and "4 req/s x factor 1, configured)" in own.cards[mine].pace.value


def test_a_failing_gate_is_shown_and_the_last_figures_kept() -> None:
    calls: list[int] = []
    rows = [{"key": "geotoolkit:geo.example:anonymous", "pace": 0.5, "rate": 1.0,
             "allowed_rate": 1.0, "rate_factor": 1.0, "now": START}]

    def source() -> Sequence[Mapping[str, Any]]:
        calls.append(1)
        if len(calls) > 1:
            raise GateError("Redis gate at redis://:hunter2@gate:6379/0 failed: timeout",
                            backend="redis")
        return rows

    panel = FleetPanel(source, display=False, start=False, title="redis://:hunter2@gate:6379/0")
    panel.refresh()
    assert "unreachable, showing the last figures read: GateError" in panel.header.value
    assert "hunter2" not in panel.header.value and "redis://:***@gate" in panel.header.value
    assert list(panel.cards) == ["geotoolkit:geo.example:anonymous"]
    assert "pace 0.5/1 req/s" in panel.cards["geotoolkit:geo.example:anonymous"].pace.value


def test_a_gate_unreachable_from_the_start_is_not_said_to_hold_no_key(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The text (what fleet_panel prints where the panel cannot show) said both 'unreachable'
    and 'no key on this gate has a pacing state yet', though nothing was ever read; the
    panel's heading said only the first. Both now say the same."""
    def source() -> Sequence[Mapping[str, Any]]:
        raise GateError("Redis gate at redis://127.0.0.1:1/0 failed to list its keys: "
                        "ConnectionError: Connection refused", backend="redis")

    shown = FleetText(source, title="redis://127.0.0.1:1/0", time_fn=lambda: START)
    printed = capsys.readouterr().out
    panel = FleetPanel(source, display=False, start=False, title="redis://127.0.0.1:1/0",
                       time_fn=lambda: START)
    assert printed.strip() == shown.text() == panel.header_text() == panel.text()
    assert "unreachable, showing the last figures read: GateError" in printed
    assert "no key on this gate" not in printed


def _signalling(gate: Gate, refreshed: threading.Event) -> Callable[[], list[dict[str, Any]]]:
    source = status_source(gate, select())

    def read() -> list[dict[str, Any]]:
        rows = list(source())
        refreshed.set()
        return [dict(row) for row in rows]

    return read


def test_the_background_refresh_runs_until_stop(gate: Gate) -> None:
    key = gate_key(HOST)
    gate.reserve(key, 1.0)
    refreshed = threading.Event()
    stopped: list[bool] = []
    panel = FleetPanel(_signalling(gate, refreshed), display=False, refresh_seconds=0.01,
                       on_stop=lambda: stopped.append(True))
    try:
        refreshed.clear()
        gate.pause(key, 20.0, cause="maintenance")
        assert refreshed.wait(10.0) and panel.running
        assert refreshed.wait(10.0)  # a refresh after the pause was published
    finally:
        panel.stop()
    assert not panel.running and stopped == [True]
    count = panel.refreshes
    panel.stop()  # idempotent: on_stop ran once
    assert stopped == [True] and panel.refreshes == count


def test_a_with_block_stops_the_panel(gate: Gate) -> None:
    gate.reserve(gate_key(HOST), 1.0)
    with panel_over(gate) as panel:
        panel.start()
        assert panel.running
    assert not panel.running


def test_outside_a_notebook_fleet_panel_prints_the_text_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'gate.sqlite'}"
    opened = SQLiteGate(tmp_path / "gate.sqlite")
    opened.reserve(gate_key(HOST, API_KEY), 1.0, report=Report(2, 1, 1))
    opened.close()
    shown = geotoolkit.fleet_panel(gate=url, provider="opencage", refresh_seconds=5.0)
    assert isinstance(shown, FleetText)
    out = capsys.readouterr().out
    assert out.startswith(f"gate {url} | 1 key | ")
    assert "throttled per success 1 (1 per 1 over " in out and API_KEY not in out
    shown.stop()
    assert capsys.readouterr().out == ""


def test_refresh_seconds_must_be_positive(gate: Gate) -> None:
    from geotoolkit.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="refresh_seconds"):
        panel_over(gate, refresh_seconds=0.0)


def test_close_stops_the_refresh_and_closes_the_widgets(gate: Gate) -> None:
    """``close()``, as on the run's progress panel and every ipywidget: no thread left
    refreshing, the gate opened for the panel closed, the widgets gone from the page."""
    gate.reserve(gate_key(HOST), 1.0)
    stopped: list[bool] = []
    panel = FleetPanel(status_source(gate, select()), display=False, refresh_seconds=0.01,
                       on_stop=lambda: stopped.append(True))
    cards = list(panel.cards.values())
    assert panel.running and cards
    panel.close()
    assert not panel.running and stopped == [True]
    assert panel.widget.comm is None and panel.header.comm is None
    assert all(card.box.comm is None and card.gauge.comm is None for card in cards)
    assert not [t for t in threading.enumerate() if t.name == "geotoolkit-fleet-panel"]


def test_the_text_fallback_closes_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Code written in a notebook (``panel.close()``) also runs outside one, on the text."""
    SQLiteGate(tmp_path / "gate.sqlite").close()
    shown = geotoolkit.fleet_panel(gate=f"sqlite:///{tmp_path / 'gate.sqlite'}")
    assert isinstance(shown, FleetText)
    shown.close()
    assert capsys.readouterr().out.startswith("gate sqlite:")


def test_a_misspelt_sqlite_path_is_no_gate_and_nothing_is_created(tmp_path: Path) -> None:
    """Watching created the directories and an empty gate file at a wrong path, and showed
    'no key on this gate has a pacing state yet' (``gate status`` already refused it)."""
    from geotoolkit.errors import ConfigurationError

    wrong = tmp_path / "tema" / "gate.sqlite"
    with pytest.raises(ConfigurationError, match="no gate at"):
        geotoolkit.fleet_panel(gate=f"sqlite:///{wrong}")
    assert not (tmp_path / "tema").exists()


def _run_cells(cells: Sequence[tuple[str | None, str]]) -> str:
    """Run ``(cell id, source)`` pairs in one real kernel, as a front end sends them
    (JupyterLab names the cell in the request's metadata; nbclient and older front ends
    do not); returns what the last one printed."""
    import os
    import queue

    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    client = manager.client()
    client.start_channels()
    printed: list[str] = []
    try:
        client.wait_for_ready(timeout=60)
        for cell_id, code in cells:
            content = {"code": code, "silent": False, "store_history": True,
                       "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}
            msg = client.session.msg("execute_request", content,
                                     metadata={"cellId": cell_id} if cell_id else {})
            client.shell_channel.send(msg)
            while True:  # the reply, then the idle status that follows its outputs
                reply = client.get_shell_msg(timeout=60)
                if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                    break
            assert reply["content"]["status"] == "ok", reply["content"]
            printed.clear()
            while True:
                try:
                    out = client.get_iopub_msg(timeout=10)
                except queue.Empty:
                    break
                if out["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
                    continue
                if out["msg_type"] == "stream":
                    printed.append(out["content"]["text"])
                if out["msg_type"] == "status" and out["content"]["execution_state"] == "idle":
                    break
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return "".join(printed)


@pytest.mark.notebook
@pytest.mark.parametrize("ids", [True, False], ids=["cell ids", "no cell ids"])
def test_running_the_cell_again_stops_the_panel_it_showed_before(tmp_path: Path, ids: bool) -> None:
    """Each run of ``geotoolkit.fleet_panel(...)``'s cell left the panel before it refreshing
    on its thread, out of sight, its gate open: after five runs, five threads read the gate
    every second. Now a panel stops when the cell that showed it runs again (the same
    cell id, or without ids the same source); a panel of another cell keeps going."""
    SQLiteGate(tmp_path / "gate.sqlite").close()
    show = (f"panels.append(geotoolkit.fleet_panel(gate='sqlite:///{tmp_path / 'gate.sqlite'}',"
            " refresh_seconds=0.05)); panels[-1]")
    report = ("import threading\n"
              "print([p.running for p in panels],"
              " sum(t.name == 'geotoolkit-fleet-panel' for t in threading.enumerate()))")
    printed = _run_cells([
        ("setup" if ids else None, "import geotoolkit\npanels = []"),
        ("a" if ids else None, show),
        ("b" if ids else None, show.replace("; panels[-1]", "\npanels[-1]")),  # another cell
        ("a" if ids else None, show),  # cell a again (the same source without ids)
        ("report" if ids else None, report),
    ])
    assert printed.strip() == "[False, True, True] 2"


def test_a_fleet_stop_is_shown_with_its_cause_and_end_until_it_is_resumed(gate: Gate) -> None:
    from geotoolkit.errors import QuotaExceededError
    from geotoolkit.gate.stop import STOP_VALUE, FleetStop

    key = gate_key(HOST, API_KEY)
    gate.reserve(key, 1.0)
    panel = panel_over(gate)
    card = panel.cards[key]
    assert card.stop.layout.display == "none" and card.stop.value == ""
    error = QuotaExceededError(f"opencage quota exhausted (HTTP 402): key {API_KEY} spent",
                               retry_after=7200.0, status_code=402)
    stop = FleetStop.of(error, START, (API_KEY,))  # as the engine publishes it: redacted
    gate.set_value(key, STOP_VALUE, stop.to_json(), ttl_seconds=7200)
    panel.refresh()
    assert card.stop.layout.display is None
    assert "STOPPED 7200 s: quota spent: opencage quota exhausted (HTTP 402)" in card.stop.value
    assert "until 2024-03-01 02:00:00 UTC" in card.stop.value
    assert API_KEY not in panel.text() and "STOPPED 7200 s" in panel.text()
    gate.delete_value(key, STOP_VALUE)  # what `geotoolkit gate resume` does
    panel.refresh()
    assert card.stop.layout.display == "none"
