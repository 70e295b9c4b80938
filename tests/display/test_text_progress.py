"""Terminal renderers: the one-line TextProgress, JSON lines and the summary line."""

from __future__ import annotations

import fcntl
import io
import json
import os
import struct
import termios
from pathlib import Path

import pytest

from geotoolkit.display.model import summary_line
from geotoolkit.display.sinks import progress_sink
from geotoolkit.display.text import JsonLinesProgress, TextProgress
from geotoolkit.errors import ConfigurationError
from geotoolkit.progress import (
    BatchFinished,
    BatchStarted,
    FleetSampled,
    ItemFinished,
    Tally,
    Throttled,
)
from geotoolkit.redact import redact

pytestmark = pytest.mark.widget

HOST = "geo.example.org"


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_text() -> tuple[TextProgress, io.StringIO, FakeTime]:
    stream, clock = io.StringIO(), FakeTime()
    return TextProgress(stream, time_fn=clock, interactive=True), stream, clock


def last_line(stream: io.StringIO) -> str:
    return stream.getvalue().split("\r")[-1].rstrip()


def test_text_line_shows_progress_and_estimated_pace() -> None:
    text, stream, clock = make_text()
    text(BatchStarted(total=4, unique=4, rate=2.0, host=HOST, at=0.0))
    clock.now = 1.0
    text(ItemFinished(status="matched", attempts=1, at=1.0))
    assert last_line(stream) == "geocoding 1/4 (25%) 1.0 rows/s ETA 3 s | pace 1.0/2 req/s, throttled 0%"


def test_text_line_shows_pause_countdown_with_cause() -> None:
    text, stream, clock = make_text()
    text(BatchStarted(total=4, unique=4, rate=2.0, host=HOST, at=0.0))
    clock.now = 1.0
    text(Throttled(wait_seconds=12.0, cause="retry-after", host=HOST, retry_after=12.0, at=1.0))
    assert last_line(stream).endswith(f"| paused 12 s: Retry-After from {HOST}: 12 s")


def test_text_line_shows_fleet_gauge_when_sampled() -> None:
    text, stream, clock = make_text()
    text(BatchStarted(total=10, unique=10, rate=20.0, host=HOST, at=0.0))
    clock.now = 1.0
    text(FleetSampled(pace=19.8, allowed_rate=20.0, requests=50, successes=49, throttled=1,
                      window_seconds=5.0, workers_active=2, at=1.0))
    assert "| fleet 19.8/20 req/s, throttled 2%, 2 workers" in last_line(stream)


def test_text_redraws_at_most_ten_times_a_second_and_always_finishes() -> None:
    text, stream, clock = make_text()
    text(BatchStarted(total=50, unique=50, host=HOST))
    for i in range(50):
        clock.now += 0.001
        text(ItemFinished(status="matched", at=0.01 * (i + 1)))
    assert stream.getvalue().count("\r") == 1  # everything within 0.05 s: one redraw
    text(BatchFinished(50, 0, 0, elapsed_seconds=0.5))
    out = stream.getvalue()
    assert out.count("\r") == 2 and out.endswith("\n")
    assert last_line(stream) == "50/50 rows: 50 matched, 0 no match, 0 failed; 0 throttled; 0.5 s; done"


def test_shorter_line_erases_the_longer_one_before_it() -> None:
    text, stream, clock = make_text()
    text(BatchStarted(total=2, unique=2, rate=1.0, host=HOST))
    clock.now = 1.0
    text(Throttled(wait_seconds=9.0, cause="retry-after", host=HOST, retry_after=9.0))
    long_line = stream.getvalue().split("\r")[-1]
    clock.now = 20.0
    text(ItemFinished(status="matched", at=20.0))
    short = stream.getvalue().split("\r")[-1]
    assert len(short) >= len(long_line) and "paused" not in short


def test_without_its_summary_the_line_is_cleared_when_the_batch_ends_well() -> None:
    """The CLI prints the result line on a terminal: the progress line on the same screen
    said it again, just above. It is cleared; a stopped batch's summary is still written."""
    stream, clock = io.StringIO(), FakeTime()
    text = TextProgress(stream, time_fn=clock, interactive=True, summary=False)
    text(BatchStarted(total=2, unique=2, host=HOST))
    clock.now = 1.0
    text(ItemFinished(status="matched", at=1.0))
    drawn = stream.getvalue().split("\r")[-1]
    text(BatchFinished(2, 0, 0, elapsed_seconds=1.0))
    assert stream.getvalue().endswith("\r" + " " * len(drawn) + "\r")
    assert "rows:" not in stream.getvalue()
    for end in (BatchFinished(1, 0, 0, elapsed_seconds=1.0, error="QuotaExceededError: spent"),
                BatchFinished(1, 0, 0, elapsed_seconds=1.0, interrupted=True)):
        stream, clock = io.StringIO(), FakeTime()
        text = TextProgress(stream, time_fn=clock, interactive=True, summary=False)
        text(BatchStarted(total=2, unique=2, host=HOST))
        text(end)
        assert stream.getvalue().endswith("\n") and "/2 rows: 1 matched" in last_line(stream)
    logged = io.StringIO()  # a log keeps its last line whatever the caller prints
    text = TextProgress(logged, time_fn=clock, interactive=False, summary=False)
    text(BatchStarted(total=1, unique=1, host=HOST))
    text(BatchFinished(1, 0, 0, elapsed_seconds=1.0))
    assert logged.getvalue().splitlines()[-1].endswith("; done")
    assert progress_sink("text", summary=False).summary is False  # type: ignore[union-attr]


def test_json_lines_one_object_per_event_with_secrets_redacted() -> None:
    stream = io.StringIO()
    sink = JsonLinesProgress(stream)
    sink(BatchStarted(total=1, unique=1, host=HOST))
    sink(BatchFinished(0, 0, 1, elapsed_seconds=0.1,
                       error=f"AuthenticationError: https://{HOST}/search?key=hunter2"))
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [r["event"] for r in records] == ["BatchStarted", "BatchFinished"]
    assert records[0]["total"] == 1 and records[0]["host"] == HOST
    assert "hunter2" not in stream.getvalue() and "key=***" in records[1]["error"]


def test_summary_line_states() -> None:
    tally = Tally()
    tally.update(BatchStarted(total=3, unique=3))
    tally.update(ItemFinished(status="matched", at=2.0))
    assert summary_line(tally).endswith("; running")
    tally.update(BatchFinished(1, 0, 0, elapsed_seconds=2.0, error="QuotaExceededError: daily cap"))
    assert summary_line(tally).endswith("; stopped: QuotaExceededError: daily cap")


def test_redact_hides_keys_and_userinfo() -> None:
    text = redact("https://bob:pw@h.example/s?q=a&api_key=XYZ&token=T0K https://h2/x?key=K")
    assert all(s not in text for s in ("pw", "XYZ", "T0K", "key=K"))
    assert "q=a" in text


def test_progress_sink_choices() -> None:
    assert progress_sink(False) is None
    assert isinstance(progress_sink("text"), TextProgress)
    assert isinstance(progress_sink("json"), JsonLinesProgress)
    with pytest.raises(ValueError, match="progress must be"):
        progress_sink("fancy")


def test_asking_for_the_panel_without_ipywidgets_says_how_to_get_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """progress='widget' where ipywidgets cannot be imported raised a bare
    ``ModuleNotFoundError``; now a ConfigurationError says what to install or choose."""
    import sys

    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    monkeypatch.delitem(sys.modules, "geotoolkit.display.widget", raising=False)
    with pytest.raises(ConfigurationError, match=r"pip install ipywidgets.*progress='text'"):
        progress_sink("widget")


def test_adapted_rate_is_rounded_and_countdown_never_shows_zero() -> None:
    text, stream, clock = make_text()
    text(BatchStarted(total=10, unique=10, rate=5.0, host=HOST, at=0.0))
    clock.now = 1.0
    text(FleetSampled(pace=3.04, allowed_rate=3.50076, requests=12, successes=10, throttled=2,
                      window_seconds=4.0, pause_remaining=0.4, pause_cause="fleet pacing",
                      workers_active=1, at=1.0))
    line = last_line(stream)
    assert "fleet 3.0/3.5 req/s, throttled 17%, 1 worker" in line
    assert line.endswith("| paused 1 s: fleet pacing")


def _run_of_twenty(text: TextProgress, clock: FakeTime) -> None:
    text(BatchStarted(total=20, unique=20, rate=2.0, host=HOST, at=0.0))
    for _ in range(20):
        clock.now += 0.5
        text(ItemFinished(status="matched", attempts=1, at=clock.now))
    text(BatchFinished(20, 0, 0, elapsed_seconds=clock.now))


def test_piped_to_a_file_it_writes_whole_lines_now_and_then_without_carriage_returns(
        tmp_path: Path) -> None:
    """``--progress text > log`` (CI logs): no \\r redraws 10 times a second, but a plain
    line every few seconds and the summary."""
    clock = FakeTime()
    with open(tmp_path / "log.txt", "w", encoding="utf-8") as stream:
        text = TextProgress(stream, time_fn=clock)
        _run_of_twenty(text, clock)
    lines = (tmp_path / "log.txt").read_text(encoding="utf-8").splitlines()
    assert "\r" not in "".join(lines) and "\x1b" not in "".join(lines)
    assert lines[0] == "geocoding 0/20 (0%) 0.0 rows/s | pace -/2 req/s"
    assert lines[-1] == "20/20 rows: 20 matched, 0 no match, 0 failed; 0 throttled; 10.0 s; done"
    assert 2 <= len(lines) <= 4  # 10 s of events: not one line per event


def _pty(columns: int) -> tuple[int, int]:
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return leader, follower


def _read_all(fd: int) -> str:
    chunks = []
    os.set_blocking(fd, False)
    while True:
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8")


def test_on_a_narrow_terminal_the_line_is_cut_to_its_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """A line wider than the terminal wraps, and each ``\\r`` redraw then leaves a line behind."""
    monkeypatch.delenv("COLUMNS", raising=False)
    leader, follower = _pty(columns=30)
    clock = FakeTime()
    with open(follower, "w", encoding="utf-8", closefd=True) as stream:
        text = TextProgress(stream, time_fn=clock)
        text(BatchStarted(total=20, unique=20, rate=2.0, host=HOST, at=0.0))
        clock.now = 1.0
        text(ItemFinished(status="matched", attempts=1, at=1.0))
        out = _read_all(leader)
    os.close(leader)
    redraws = [part for part in out.replace("\n", "").split("\r") if part]
    assert redraws and all(len(part) < 30 for part in redraws)
    assert redraws[-1].startswith("geocoding 1/20 (5%)")


def test_columns_in_the_environment_sets_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "20")
    text, stream, clock = make_text()
    _run_of_twenty(text, clock)
    redraws = stream.getvalue().split("\r")[1:-1]
    assert redraws and all(len(part) <= 19 for part in redraws)
    assert last_line(stream).endswith("; done")  # the summary is never cut


def test_a_narrow_line_keeps_the_pause_and_drops_the_fleet_figures_first() -> None:
    text, _, clock = make_text()
    text(BatchStarted(total=4, unique=4, rate=2.0, host=HOST, at=0.0))
    clock.now = 1.0
    text(Throttled(wait_seconds=12.0, cause="retry-after", host=HOST, retry_after=12.0, at=1.0))
    line = text.line(width=79)
    assert len(line) <= 79 and "pace" not in line
    assert line.startswith("geocoding 0/4 (0%)") and "| paused 12 s: Retry-After" in line


def _strict(line: str) -> dict[str, object]:
    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    record: dict[str, object] = json.loads(line, parse_constant=refuse)
    return record


def test_json_lines_are_strict_json_with_an_unlimited_rate() -> None:
    """``--rate unlimited --progress json`` wrote ``"rate": Infinity``, which jq and log
    shippers refuse."""
    stream = io.StringIO()
    sink = JsonLinesProgress(stream)
    sink(BatchStarted(total=1, unique=1, rate=float("inf"), host=HOST))
    sink(FleetSampled(pace=float("nan"), allowed_rate=float("inf"), requests=0, successes=0,
                      throttled=0, window_seconds=10.0))
    started, sampled = (_strict(line) for line in stream.getvalue().splitlines())
    assert started["rate"] == "Infinity" and started["total"] == 1
    assert sampled["pace"] == "NaN" and sampled["allowed_rate"] == "Infinity"
