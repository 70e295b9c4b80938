"""``geotoolkit gate status``: the fleet on real SQLite, Redis and PostgreSQL gates.

Each gate is populated through the gate API itself (reservations with reports and cap
counts, worker heartbeats, a 429 cut of the adaptive factor, a pause with its cause, a
learned rate), then the command's text and JSON are read back. ``--watch`` runs a
bounded number of refreshes with an injected ``sleep`` (which changes the gate between
two refreshes): nothing waits.
"""

from __future__ import annotations

import io
import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from geotoolkit.frontends.cli import main
from geotoolkit.frontends.fleet_watch import run_status
from geotoolkit.gate import Cap, Gate, Report, gate_key, open_gate
from geotoolkit.gate.fleet import DISCOVERED, AimdState
from geotoolkit.gate.strategy import fleet_key

API_KEY = "sk-LIVE-4f9a7c2e11d3b8"
CAUSE = "Retry-After from api.example.com: 30 s"


@pytest.fixture
def host() -> str:
    return f"status-{uuid.uuid4().hex[:12]}.example"


@dataclass
class Served:
    url: str
    gate: Gate


def _sqlite(tmp_path: Path) -> Iterator[Served]:
    url = f"sqlite:///{tmp_path / 'gate.sqlite'}"
    gate = open_gate(url)
    yield Served(url, gate)
    gate.close()


def _redis(url: str, host: str) -> Iterator[Served]:
    import redis

    gate = open_gate(url, fallback=False)
    try:
        yield Served(url, gate)
    finally:
        gate.close()
        client = redis.Redis.from_url(url)
        stale = list(client.scan_iter(match=f"geotoolkit:{host}:*"))
        if stale:
            client.delete(*stale)
        client.close()


def _postgres(dsn: str, host: str) -> Iterator[Served]:
    import psycopg

    from geotoolkit.gate.postgres import init_schema

    init_schema(dsn)
    gate = open_gate(dsn, fallback=False)
    try:
        yield Served(dsn, gate)
    finally:
        gate.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            for table in ("geotoolkit_gate", "geotoolkit_gate_counters", "geotoolkit_gate_usage",
                          "geotoolkit_gate_values"):
                conn.execute(f"DELETE FROM {table} WHERE key LIKE %s", (f"geotoolkit:{host}:%",))


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis),
                        pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request: pytest.FixtureRequest, tmp_path: Path, host: str) -> Iterator[Served]:
    """A real gate of each backend, and its URL for the command."""
    if request.param == "sqlite":
        yield from _sqlite(tmp_path)
    elif request.param == "redis":
        yield from _redis(request.getfixturevalue("redis_url"), host)
    else:
        yield from _postgres(request.getfixturevalue("postgres_dsn"), host)


def populate(gate: Gate, host: str) -> tuple[str, str]:
    """A busy key (reports, caps, two workers, a cut factor, a pause, a learned rate) and a
    quiet one; returns both."""
    busy, quiet = gate_key(host, API_KEY), gate_key(host)
    # Two of its 10 requests throttled 5 s ago: past the fleet's first second, where a
    # 429's count is read. (At 2.5 s a loaded CI run on PostgreSQL once read it inside the
    # first second, likely through the gate's estimate of the store's clock; not confirmed.)
    gate.record(busy, Report(2, 0, 2, at=time.time() - 5.0))
    gate.reserve(busy, 0.0, report=Report(8, 8), cap=Cap(100))
    gate.reserve(busy, 0.0, cap=Cap(1000, "month"))
    gate.record(busy, Report(), worker="w1")
    gate.record(busy, Report(), worker="w2")
    gate.pause(busy, 0.0, rate_limited=True)  # a first 429 only pauses ...
    gate.pause(busy, 0.0, rate_limited=True)  # ... one that keeps coming cuts the factor
    gate.pause(busy, 30.0, cause=CAUSE)
    assert gate.set_value(fleet_key(busy), DISCOVERED, AimdState(4.0).to_text(), ttl_seconds=600)
    gate.reserve(quiet, 1.0)
    return busy, quiet


def cut_factor(gate: Gate, key: str) -> float:
    """The factor the 429s of ``populate`` left, as the gate holds it. Seven successes of
    evidence cut it to 6/7, but the window spans two seconds or more: its eight successes
    over it, against the 1/s assumed with no interval known, floor the cut at 0.98 (so
    does the best pace, if ``populate`` took long enough to fill two whole seconds)."""
    factor = gate.state(key).rate_factor
    assert factor == pytest.approx(6 / 7) or factor == pytest.approx(0.98)
    return factor


def blocks(text: str) -> dict[str, str]:
    """Each key's block of the text output, by key."""
    found: dict[str, str] = {}
    for block in re.split(r"\n(?=geotoolkit:)", text):
        first, _, rest = block.partition("\n")
        found[first] = rest
    return found


def test_text_shows_each_keys_fleet(served: Served, host: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    busy, quiet = populate(served.gate, host)
    factor = cut_factor(served.gate, busy)
    assert main(["gate", "status", served.url, "--provider", host]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith(f"gate {served.url} ({served.gate.backend}) | provider {host} | 2 keys | ")
    shown = blocks(out)
    assert set(shown) - {out.partition("\n")[0]} == {busy, quiet}
    assert re.search(rf"pace [\d.]+/{4 * factor:.3g} req/s \(\d+% of allowed: 4 req/s x factor "
                     rf"{factor:.3g}, learned\)", shown[busy])
    assert f"factor {factor:.3g} | throttled per success 0.25 (2 per 8 over " in shown[busy]
    assert "| 2 workers active" in shown[busy]
    assert re.search(rf"paused (29|30) s: {re.escape(CAUSE)}", shown[busy])
    day, month = served.gate.usage(busy, "day").period, served.gate.usage(busy, "month").period
    assert f"counted toward caps: 1 on {day} (UTC day), 1 in {month} (UTC month)" in shown[busy]
    assert "(allowed rate unknown)" in shown[quiet] and "0 workers active" in shown[quiet]
    assert "paused" not in shown[quiet]
    assert API_KEY not in out and "LIVE" not in out


def test_json_is_one_document_with_every_figure(served: Served, host: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    busy, quiet = populate(served.gate, host)
    factor = cut_factor(served.gate, busy)
    assert main(["gate", "status", served.url, "--provider", host, "--json"]) == 0
    out = capsys.readouterr().out
    document = json.loads(out)
    assert (document["gate"], document["backend"], document["provider"]) == (
        served.url, served.gate.backend, host)
    keys = {k["key"]: k for k in document["keys"]}
    assert set(keys) == {busy, quiet}
    status = keys[busy]
    assert (status["requests"], status["successes"], status["throttled"]) == (10, 8, 2)
    assert status["throttled_per_success"] == 0.25 and status["workers_active"] == 2
    assert status["rate_factor"] == pytest.approx(factor)
    assert (status["rate"], status["rate_source"]) == (4.0, "learned")
    assert status["allowed_rate"] == pytest.approx(4 * factor)
    assert status["pause_cause"] == CAUSE and 29 < status["pause_remaining"] <= 30
    assert (status["day"]["used"], status["month"]["used"]) == (1, 1)
    assert status["host"] == host
    assert keys[quiet]["rate"] is None and keys[quiet]["allowed_rate"] is None
    assert API_KEY not in out


def test_a_provider_name_selects_its_public_keys_at_their_published_rate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'gate.sqlite'}"
    gate = open_gate(url)
    try:
        gate.reserve(gate_key("api.opencagedata.com", API_KEY), 1.0)
        gate.reserve(gate_key("nominatim.openstreetmap.org"), 1.0)
        gate.reserve(gate_key("locationiq.com", API_KEY), 1.0)
    finally:
        gate.close()
    assert main(["gate", "status", url, "--provider", "opencage"]) == 0
    out = capsys.readouterr().out
    assert list(blocks(out))[1:] == [gate_key("api.opencagedata.com", API_KEY)]
    assert "(0% of allowed: 1 req/s x factor 1, published)" in out
    assert main(["gate", "status", url, "--provider", "locationiq", "--rate", "5"]) == 0
    out = capsys.readouterr().out
    assert list(blocks(out))[1:] == [gate_key("locationiq.com", API_KEY)]
    assert "5 req/s x factor 1, configured)" in out
    assert main(["gate", "status", url, "--provider", "here"]) == 0
    assert "no key of here on this gate has a pacing state yet" in capsys.readouterr().out


class Ticks:
    """An injected ``sleep``: records the waits, and changes the gate after the first."""

    def __init__(self, gate: Gate, key: str, interrupt_after: int | None = None) -> None:
        self.gate, self.key, self.waits = gate, key, list[float]()
        self.interrupt_after = interrupt_after

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.interrupt_after is not None and len(self.waits) >= self.interrupt_after:
            raise KeyboardInterrupt
        if len(self.waits) == 1:
            self.gate.pause(self.key, 60.0, cause=CAUSE)


def test_watch_refreshes_until_the_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'gate.sqlite'}"
    gate, key = open_gate(url), gate_key("geo.example", API_KEY)
    gate.reserve(key, 1.0)
    ticks = Ticks(gate, key)
    assert main(["gate", "status", url, "--watch", "5", "--count", "3"], sleep=ticks) == 0
    out = capsys.readouterr().out
    assert ticks.waits == [5.0, 5.0]
    readings = out.split(f"gate {url} (sqlite)")[1:]
    assert len(readings) == 3
    assert "paused" not in readings[0]
    assert all(re.search(rf"paused (59|60) s: {re.escape(CAUSE)}", r) for r in readings[1:])
    assert "\x1b" not in out  # not a terminal: plain blocks, one after another
    gate.close()


def test_watch_json_is_json_lines_and_ctrl_c_exits_0(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'gate.sqlite'}"
    gate, key = open_gate(url), gate_key("geo.example")
    gate.reserve(key, 1.0)
    ticks = Ticks(gate, key, interrupt_after=2)
    assert main(["gate", "status", url, "--watch", "--json"], sleep=ticks) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ticks.waits == [2.0, 2.0]  # the default interval; Ctrl-C in the second wait
    assert [json.loads(line)["keys"][0]["pause_cause"] for line in lines] == ["", CAUSE]
    gate.close()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_watch_redraws_in_place_on_a_terminal(tmp_path: Path) -> None:
    from geotoolkit.frontends.cli import _parser

    url = f"sqlite:///{tmp_path / 'gate.sqlite'}"
    gate, key = open_gate(url), gate_key("geo.example")
    gate.reserve(key, 1.0)
    screen = Terminal()
    args = _parser().parse_args(["gate", "status", url, "--watch", "1", "--count", "2"])
    assert run_status(args, sleep=Ticks(gate, key), out=screen) == 0
    frames = screen.getvalue().split("\x1b[H\x1b[2J")
    assert frames[0] == "" and len(frames) == 3 and "paused" in frames[2]
    gate.close()


def test_gate_env_and_no_secret_in_any_output(redis_url: str, host: str,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A Redis user with a password (an ACL user on the test server) and a key from an API key."""
    import redis

    user, password = f"watch-{uuid.uuid4().hex[:8]}", f"pw-{uuid.uuid4().hex}"
    admin = redis.Redis.from_url(redis_url)
    admin.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["*"], commands=["+@all"])
    secret_url = re.sub(r"^redis://", f"redis://{user}:{password}@", redis_url)
    key = gate_key(host, API_KEY)
    try:
        gate = open_gate(secret_url, fallback=False)
        gate.reserve(key, 1.0)
        gate.pause(key, 10.0, cause=f"429 from {host}?key={API_KEY}")  # a cause echoing the key
        gate.close()
        outputs = []
        for argv in (["gate", "status", secret_url, "--provider", host],
                     ["gate", "status", secret_url, "--provider", host, "--json"]):
            assert main(argv) == 0
            outputs.append("".join(capsys.readouterr()))
        monkeypatch.setenv("WATCH_GATE", secret_url)
        assert main(["gate", "status", "--gate-env", "WATCH_GATE", "--provider", host]) == 0
        outputs.append("".join(capsys.readouterr()))
        wrong = secret_url.replace(password, password + "-wrong")
        assert main(["gate", "status", wrong]) == 2
        outputs.append("".join(capsys.readouterr()))
        everything = "\n".join(outputs)
        assert password not in everything
        assert API_KEY not in everything
        assert f"redis://{user}:***@" in outputs[0] and key in outputs[0]
        assert "key=***" in outputs[0] and "unreachable" in outputs[-1]
    finally:
        admin.acl_deluser(user)
        stale = list(admin.scan_iter(match=f"geotoolkit:{host}:*"))
        if stale:
            admin.delete(*stale)
        admin.close()


@pytest.mark.parametrize(("url", "message"), [
    ("ftp://gate.example/x", "not a gate URL: ftp://gate.example/x"),
    # one slash: the path would be lost and the default gate file shown under this name
    ("sqlite:/tmp/team-gate.sqlite", "not a gate URL: sqlite:/tmp/team-gate.sqlite"),
    ("redis://:hunter2@127.0.0.1:1/0", "gate redis://:***@127.0.0.1:1/0 unreachable"),
    ("postgresql://u:hunter2@127.0.0.1:1/x", "gate postgresql://u:***@127.0.0.1:1/x unreachable"),
])
def test_a_bad_or_unreachable_gate_exits_2(url: str, message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "status", url]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"geotoolkit: {message}") and "hunter2" not in err


def test_a_missing_sqlite_gate_is_an_error_not_a_new_file(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "typo.sqlite"
    assert main(["gate", "status", f"sqlite:///{path}"]) == 2
    assert f"{path} does not exist" in capsys.readouterr().err and not path.exists()


def test_the_default_gate_before_any_run_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """On a machine where nothing ran yet, ``geotoolkit gate status`` said only that
    ~/.cache/geotoolkit/gate.sqlite does not exist."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("GEOTOOLKIT_GATE_URL", raising=False)
    assert main(["gate", "status"]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "no run on this machine has used the default gate" in err
    assert not (tmp_path / "cache").exists()


def test_a_sqlite_gate_that_cannot_be_opened_exits_2(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "notes.txt"  # a file given by mistake: not a database
    path.write_bytes(b"meeting notes, not a gate\n" * 200)
    assert main(["gate", "status", f"sqlite:///{path}", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"geotoolkit: gate sqlite:///{path} unreachable")
    assert "file is not a database" in err
    assert path.read_bytes() == b"meeting notes, not a gate\n" * 200


def test_help_is_plain_text_with_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["gate", "status", "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for part in ("--provider NAME", "--watch [SECONDS]", "(default 2)", "--json", "--gate-env VAR",
                 "--rate R", "default: every key"):
        assert part in text, part
    assert "--count" not in text and "\x1b" not in text
    with pytest.raises(SystemExit) as exit_:
        main(["gate", "status", "memory://", "--watch", "0"])
    assert exit_.value.code == 2


def test_caps_are_shown_in_the_zone_asked_with_their_reset(
    served: Served, host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fleet capping its key at Pacific midnight: ``--cap-tz`` shows that count, and when
    it resets in the zone and in UTC; without it, the UTC count (apart)."""
    key = gate_key(host, API_KEY)
    la = "America/Los_Angeles"
    for _ in range(3):
        served.gate.reserve(key, 0.0, cap=Cap(10, tz=la))
    served.gate.reserve(key, 0.0, cap=Cap(10))
    usage = served.gate.usage(key, "day", la)
    reset = datetime.fromtimestamp(usage.resets_at, ZoneInfo(la))
    utc = datetime.fromtimestamp(usage.resets_at, UTC)
    assert main(["gate", "status", served.url, "--provider", host, "--cap-tz", la]) == 0
    shown = blocks(capsys.readouterr().out)[key]
    assert f"counted toward caps: 3 on {usage.label} (America/Los_Angeles day), 0 in " \
           f"{usage.label[:7]} (America/Los_Angeles month)" in shown
    assert (f"the day resets at {reset:%Y-%m-%d} 00:00 America/Los_Angeles "
            f"({utc:%H:%M} UTC)") in shown
    assert main(["gate", "status", served.url, "--provider", host, "--json",
                 "--cap-tz", la]) == 0
    [status] = json.loads(capsys.readouterr().out)["keys"]
    assert status["day"] == {"period": usage.period, "used": 3, "resets_at": usage.resets_at,
                             "tz": la}
    assert main(["gate", "status", served.url, "--provider", host]) == 0
    assert "counted toward caps: 1 on " in blocks(capsys.readouterr().out)[key]


def test_an_unknown_cap_zone_is_refused_naming_it(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'gate.sqlite'}"
    assert main(["gate", "status", url, "--cap-tz", "America/Los_Angles"]) == 2
    assert "unknown time zone 'America/Los_Angles'" in capsys.readouterr().err
