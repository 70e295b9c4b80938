"""Every ``geotoolkit ...`` command the docs show uses a subcommand and flags that exist."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

import pytest

from geotoolkit.frontends.cli import _parser
from geotoolkit.testing.__main__ import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         *sorted((ROOT / "notebooks").glob("*.ipynb"))]

#: ``geotoolkit SUB ...``, ``python3 -m geotoolkit SUB ...`` or ``python -m geotoolkit.testing ...``
_COMMAND = re.compile(r"(?:(?<=\s)|^)(?:python3? -m )?(geotoolkit(?:\.testing)?)( .*)?$")


def _text(page: Path) -> str:
    if page.suffix == ".ipynb":
        cells = json.loads(page.read_text(encoding="utf-8"))["cells"]
        return "\n".join("".join(cell["source"]) for cell in cells)
    return page.read_text(encoding="utf-8")


def commands(text: str) -> list[str]:
    """The command lines of fenced shell blocks (continuations joined) and of inline code."""
    found = []
    fenced = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
    for lang, block in fenced.findall(text):
        if lang in ("", "bash", "console", "sh", "shell"):
            found += block.replace("\\\n", " ").splitlines()
    found += re.findall(r"`([^`\n]+)`", fenced.sub("", text))
    lines = []
    for line in found:
        line = line.split(" #")[0].strip().rstrip("&").strip()
        match = _COMMAND.search(line)
        if match and (match.group(2) or "").strip()[:1] not in ("", "(", ")", ":", "/"):
            lines.append(match.group(1) + (match.group(2) or ""))
    return lines


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def problems(command: str) -> list[str]:
    """What in ``command`` the parser does not know (empty: nothing)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    parser = build_parser() if words[0] == "geotoolkit.testing" else _parser()
    words = words[1:]
    while words and (choices := _subparsers(parser)):
        if words[0] not in choices:
            if words[0].startswith("-"):
                break  # geotoolkit --version
            return [f"{command!r}: no subcommand {words[0]!r}"]
        parser, words = choices[words[0]], words[1:]
    known = {s for action in parser._actions for s in action.option_strings}
    flags = [w.split("=")[0] for w in words if w.startswith("--")]
    return [f"{command!r}: no flag {flag}" for flag in flags if flag not in known]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_shown_exists(page: Path) -> None:
    assert [p for command in commands(_text(page)) for p in problems(command)] == []


def test_the_commands_are_found_and_a_wrong_one_is_caught() -> None:
    readme = commands(_text(ROOT / "README.md"))
    assert "geotoolkit demo notebooks/data/addresses.csv -o addresses.gpkg" in readme
    assert any(c.startswith("geotoolkit gate status ") for c in readme)
    testing = commands(_text(ROOT / "docs" / "testing.md"))
    assert any(c.startswith("geotoolkit.testing --port") for c in testing)
    assert problems("geotoolkit geocode in.csv -o out.gpkg --max-wait 30") == [
        "'geotoolkit geocode in.csv -o out.gpkg --max-wait 30': no flag --max-wait"]
    assert problems("geotoolkit gate reset sqlite:///g.sqlite") == [
        "'geotoolkit gate reset sqlite:///g.sqlite': no subcommand 'reset'"]
    assert problems("geotoolkit.testing --port 8080 --rate 2") != []
    assert problems("geotoolkit gate status --json --watch 5") == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_installs_come_from_the_checkout(page: Path) -> None:
    """recipes.md said ``pip install 'geotoolkit[orchestrators,...]'``: in a fresh
    environment pip fetched geotoolkit 0.2.1, an unrelated package of that name on PyPI.
    A page may say so (in words), but no command installs geotoolkit by name."""
    text = _text(page)
    assert re.findall(r"pip install (?:-U |--upgrade )?['\"]?geotoolkit\b", text) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_file_named_exists(page: Path) -> None:
    """A page that names ``tests/...``, ``benchmarks/...``, ``docs/...`` or a module path
    (``gate/base.py``, read under ``geotoolkit/``) names a file or folder that is there."""
    text = _text(page)
    named = set(re.findall(r"(?<![\w/.<-])((?:tests|benchmarks|geotoolkit|docs|notebooks|\.ci)/"
                           r"[\w./-]*\w)", text))
    named |= set(re.findall(r"`([\w/]+/[\w.]+\.py)`", text))
    assert sorted(n for n in named
                  if not ((ROOT / n).exists() or (ROOT / "geotoolkit" / n).exists())) == []


@pytest.mark.parametrize("page", [p for p in PAGES if p.name != "api.md"], ids=lambda p: p.name)
def test_every_python_block_parses(page: Path) -> None:
    """The Python a page shows (api.md holds doctest transcripts, run by test_doctests)
    and every notebook cell is Python a reader can paste: it parses."""
    import ast

    if page.suffix == ".ipynb":
        cells = json.loads(page.read_text(encoding="utf-8"))["cells"]
        blocks = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    else:
        blocks = re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"),
                            re.M | re.S)
    for block in blocks:
        ast.parse(block)
