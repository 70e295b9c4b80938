"""Every dotted ``geotoolkit...`` name the docs cite resolves to a real module or object."""

from __future__ import annotations

import importlib
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


@pytest.mark.parametrize("page", ["api.md", "getting-started.md", "testing.md", "recipes.md",
                                  "orchestrators.md", "providers.md", "reverse.md"])
def test_every_cited_name_exists(page: str) -> None:
    """A docstring said ``geotoolkit.widget.ProgressPanel``, a module that never existed."""
    text = (DOCS / page).read_text(encoding="utf-8")
    names = set(re.findall(r"`(geotoolkit(?:\.\w+)+)(?:\(\))?`", text))
    assert not sorted(n for n in names if not _resolves(n))
