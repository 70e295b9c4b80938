"""Every docstring example in the package runs (offline: the simulator is on 127.0.0.1)."""

import doctest
import importlib
import importlib.util
import pkgutil
import sys
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


#: The fleet benchmark's modules with examples (its measures, its limiters' log parsers):
#: not in the package, but what its figures rest on.
BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
BENCHMARK_MODULES = sorted(
    f"fleetbench.{path.stem}" for path in (BENCHMARKS / "fleetbench").glob("*.py")
    if any(">>> " in line and "+SKIP" not in line for line in path.read_text(encoding="utf-8").splitlines())
)


def test_the_benchmark_examples_are_found() -> None:
    assert {"fleetbench.measure", "fleetbench.proxy", "fleetbench.haproxy"} <= set(BENCHMARK_MODULES)


@pytest.mark.parametrize("name", BENCHMARK_MODULES)
def test_benchmark_docstring_examples(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    try:
        module = importlib.import_module(name)
    finally:  # the benchmark's modules stay out of the other tests' imports
        for loaded in [m for m in sys.modules if m == "fleetbench" or m.startswith("fleetbench.")]:
            del sys.modules[loaded]
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has '>>> ' in its source but doctest found no example"
    assert result.failed == 0, f"{result.failed} failing examples in {name}"
