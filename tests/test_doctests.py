"""Every docstring example in the package runs (offline: the simulator is on 127.0.0.1)."""

import doctest
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

import geotoolkit


def _has_examples(info: pkgutil.ModuleInfo) -> bool:
    """Whether the module's source holds a docstring example that runs (read, not imported;
    an example marked ``doctest: +SKIP`` does not)."""
    spec = importlib.util.find_spec(info.name)
    origin = spec.origin if spec is not None else None
    lines = Path(origin).read_text(encoding="utf-8").splitlines() if origin is not None else []
    return any(">>> " in line and "+SKIP" not in line for line in lines)


#: The modules with examples: a module without any would pass a doctest run vacuously.
MODULES = sorted(
    m.name for m in pkgutil.walk_packages(geotoolkit.__path__, "geotoolkit.")
    if not m.name.endswith("__main__") and _has_examples(m)
)


def test_the_examples_are_found() -> None:
    assert {"geotoolkit.policy", "geotoolkit.frontends.accessor", "geotoolkit.results"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra that is not installed
        pytest.skip(f"{name}: {exc}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has '>>> ' in its source but doctest found no example"
    assert result.failed == 0, f"{result.failed} failing examples in {name}"
