"""Every dotted ``geotoolkit...`` name the docs cite resolves to a real module or object."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                obj = getattr(obj, attribute)
        except AttributeError:
            return False
        return True
    return False


#: Every page a reader meets: the README, docs/ and the notebooks (their cells' text).
PAGES = [DOCS.parent / "README.md", *sorted(DOCS.glob("*.md")),
         *sorted((DOCS.parent / "notebooks").glob("*.ipynb"))]


def _text(page: Path) -> str:
    if page.suffix == ".ipynb":
        cells = json.loads(page.read_text(encoding="utf-8"))["cells"]
        return "\n".join("".join(cell["source"]) for cell in cells)
    return page.read_text(encoding="utf-8")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_cited_name_exists(page: Path) -> None:
    """A docstring said ``geotoolkit.widget.ProgressPanel``, a module that never existed.

    Any dotted name counts, in backticks or not, called or not
    (``geotoolkit.gate.status.fleet_status(gate, ...)``); README.md, fleet-gate.md,
    architecture.md, fleet-benchmark.md and the notebooks were not read before."""
    names = set(re.findall(r"(?<![\w/.-])(geotoolkit(?:\.[A-Za-z_]\w*)+)", _text(page)))
    assert not sorted(n for n in names if not _resolves(n))


def test_a_name_that_does_not_exist_is_caught() -> None:
    assert _resolves("geotoolkit.gate.status.fleet_status")
    assert not _resolves("geotoolkit.widget.ProgressPanel")
    assert not _resolves("geotoolkit.gate.status.fleet_state")
