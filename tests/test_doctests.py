"""Every docstring example in the package runs (offline: the simulator is on 127.0.0.1)."""

import doctest
import importlib
import pkgutil

import pytest

import geotoolkit

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(geotoolkit.__path__, "geotoolkit.")
    if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra that is not installed
        pytest.skip(f"{name}: {exc}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} failing examples in {name}"
