"""What a newcomer reads in ``geotoolkit ... --help``: command-line words, not Python ones."""

from __future__ import annotations

from pathlib import Path

import pytest

import geotoolkit
from geotoolkit.frontends.cli import main


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def _option(text: str, flag: str) -> str:
    """The help of one option, its lines joined: from its flag to the next option."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {flag}"))
    end = next((i for i in range(start + 1, len(lines))
                if not lines[i].startswith("   ")), len(lines))
    return " ".join(" ".join(lines[start:end]).split())


@pytest.mark.parametrize("command", ["geocode", "reverse", "demo"])
def test_run_options_speak_of_the_command_line(capsys: pytest.CaptureFixture[str],
                                               command: str) -> None:
    """``--cap`` said 'per UTC day' (``--cap-tz`` moves the day) and offered
    ``Cap(n, 'month')``, which no flag takes; ``--max-wait-seconds`` said it raises
    RateLimitError, where the command exits 75; on/off flags ended in '(default False)'."""
    text = _help(capsys, command)
    cap = _option(text, "--cap N")
    assert "UTC day" not in cap and "Cap(" not in cap and "--cap-tz" in cap
    wait = _option(text, "--max-wait-seconds S")
    assert "RateLimitError" not in wait and "75" in wait and "retry_after=" in wait
    assert "(default False)" not in text
    progress = _option(text, "--progress")  # it explained auto and json only
    assert all(f"{choice}:" in progress for choice in ("text", "json", "none")) and "auto" in progress


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """``geotoolkit --version`` said 'the following arguments are required: COMMAND'."""
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"geotoolkit {geotoolkit.__version__}"


@pytest.mark.parametrize("agent", [None, " "])
def test_a_missing_user_agent_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             agent: str | None) -> None:
    """``geotoolkit geocode in.csv -o out.gpkg`` said 'nominatim requires user_agent': the
    Python keyword, where the command line takes --user-agent. Refused before any request
    (the provider is public Nominatim: this test must never reach it)."""
    source = tmp_path / "in.csv"
    source.write_text("address\nStädtle 38, 9490 Vaduz\n", encoding="utf-8")
    argv = ["geocode", str(source), "-o", str(tmp_path / "out.gpkg"), "--gate", "memory://",
            "--cache", "none"]
    assert main(argv if agent is None else [*argv, "--user-agent", agent]) == 2
    err = capsys.readouterr().err
    assert "nominatim requires" in err and "--user-agent" in err
    assert not (tmp_path / "out.gpkg").exists()


def test_a_browsers_user_agent_is_refused_for_public_nominatim(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``geotoolkit geocode in.csv --user-agent "Mozilla/5.0 ..."`` was sent to the public
    Nominatim, whose policy asks for a User-Agent that identifies the application. Refused
    before any request (this test must never reach it), saying what to give."""
    source = tmp_path / "in.csv"
    source.write_text('address\n"Städtle 38, 9490 Vaduz"\n', encoding="utf-8")
    # --rate 5 is refused for public Nominatim too (after the provider is built): without
    # the check, the run still stops before sending anything.
    argv = ["geocode", str(source), "-o", str(tmp_path / "out.gpkg"), "--gate", "memory://",
            "--rate", "5", "--user-agent",
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko)"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "browser" in err and "--user-agent" in err and "Traceback" not in err
    assert not (tmp_path / "out.gpkg").exists()


@pytest.mark.parametrize("command", ["geocode", "reverse", "demo"])
def test_output_says_what_becomes_of_an_existing_file(capsys: pytest.CaptureFixture[str],
                                                      command: str) -> None:
    """-o named the formats only: whether a second run on the same file appends to it,
    refuses it or replaces it (it does, with every layer of it) was said nowhere."""
    output = _option(_help(capsys, command), "-o OUTPUT, --output OUTPUT")
    assert "an existing file is replaced whole, other layers and all" in output
    assert "never appended to" in output


@pytest.mark.parametrize("command", ["geocode", "reverse", "demo"])
def test_a_rate_that_is_no_number_says_what_a_rate_is(capsys: pytest.CaptureFixture[str],
                                                      command: str) -> None:
    """``--rate fast`` said ``invalid rate_arg value: 'fast'``: the name of a Python function,
    and not what the flag takes. Now it says: requests per second, or unlimited."""
    with pytest.raises(SystemExit) as exit_:
        main([command, "in.csv", "-o", "out.gpkg", "--rate", "fast"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "rate_arg" not in err
    assert "argument --rate: 'fast' is not a rate: give requests per second (such as 1.5) or " \
           "'unlimited'" in err, err
