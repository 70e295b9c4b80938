"""Load the code blocks of docs/recipes.md as modules, and the data the recipe tests share."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pandas as pd

from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

RECIPES = Path(__file__).resolve().parents[3] / "docs" / "recipes.md"
UA = "geotoolkit-tests/1.0 (tests@example.org)"
#: The third address is answered 429 with ``Retry-After: 1`` once, then normally.
ADDRESSES = [k.address for k in KNOWN_ADDRESSES[:5]]
ADDRESSES[2] += " #429x1"


def recipe_source(name: str) -> str:
    """The fenced Python block of docs/recipes.md that starts with ``# file: <name>``."""
    blocks = re.findall(r"```python\n(.*?)```", RECIPES.read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if b.startswith(f"# file: {name}\n")]
    if len(found) != 1:
        raise LookupError(f"{len(found)} blocks named {name} in {RECIPES}")
    return found[0]


def load_recipe(name: str, directory: Path) -> ModuleType:
    """Save the recipe as ``directory/name`` and import it (real source: Prefect hashes it)."""
    path = directory / name
    path.write_text(recipe_source(name), encoding="utf-8")
    module_name = f"geotoolkit_recipe_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def write_addresses(directory: Path) -> Path:
    source = directory / "addresses.csv"
    pd.DataFrame({"address": ADDRESSES}).to_csv(source, index=False)
    return source


def sent(sim: ProviderSimulator) -> Counter[tuple[str, int]]:
    """How often each address was sent, per answered status."""
    return Counter((r.params["q"], r.status) for r in sim.requests)


def expected_sends() -> Counter[tuple[str, int]]:
    """Every address once, plus the one 429: nothing settled before the retry is sent again."""
    return Counter([(a, 200) for a in ADDRESSES] + [(ADDRESSES[2], 429)])
