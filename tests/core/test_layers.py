"""The architecture, enforced: the pure core imports only the stdlib and itself."""

import ast
import subprocess
import sys
from pathlib import Path

import geotoolkit

PACKAGE = Path(geotoolkit.__file__).parent
CORE = ["errors", "clock", "policy", "results", "progress", "validate", "gate/base"]
HEAVY = ["httpx", "pandas", "geopandas", "ipywidgets", "redis", "psycopg", "shapely", "numpy"]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_core_modules_import_only_stdlib_and_core() -> None:
    core_modules = {"geotoolkit." + name.replace("/", ".") for name in CORE}
    for name in CORE:
        for imported in _imports(PACKAGE / f"{name}.py"):
            top = imported.split(".")[0]
            if top == "geotoolkit":
                assert imported in core_modules, f"{name} imports {imported}"
            else:
                assert top in sys.stdlib_module_names or top == "__future__", (
                    f"core module {name} imports {imported}")


def test_core_loads_without_heavy_libraries() -> None:
    """Load the core files directly (not via the package __init__) in a fresh interpreter."""
    code = f"""
import importlib.util, sys, types
pkg = types.ModuleType("geotoolkit"); pkg.__path__ = [{str(PACKAGE)!r}]
sys.modules["geotoolkit"] = pkg
gate = types.ModuleType("geotoolkit.gate"); gate.__path__ = [{str(PACKAGE / "gate")!r}]
sys.modules["geotoolkit.gate"] = gate
import importlib
for name in {[ "geotoolkit." + n.replace("/", ".") for n in CORE]!r}:
    importlib.import_module(name)
heavy = [m for m in {HEAVY!r} if m in sys.modules]
print(",".join(heavy))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_engine_depends_on_protocols_not_backends() -> None:
    imported = _imports(PACKAGE / "engine.py")
    assert not any(m.startswith(("geotoolkit.gate.redis", "geotoolkit.gate.postgres",
                                 "geotoolkit.gate.sqlite", "geotoolkit.widget",
                                 "geotoolkit.accessor", "redis", "psycopg")) for m in imported)


def test_public_api_is_pinned() -> None:
    assert sorted(geotoolkit.__all__) == sorted([
        "AuthenticationError", "Backoff", "Clock", "ConfigurationError", "ExportError",
        "FakeClock", "Failure", "Gate", "GateError", "GeocodeAccessor", "GeotoolkitError",
        "Match", "MemoryGate",
        "NoMatch", "Outcome", "ProviderError", "ProviderResponseError",
        "ProviderUnavailableError", "Query", "QueryError", "QuotaExceededError",
        "RateLimitError", "RatePolicy", "SQLiteGate", "SystemClock", "__version__", "errors",
        "geocode", "open_gate", "parse_retry_after", "providers",
    ])
    for name in geotoolkit.__all__:
        assert hasattr(geotoolkit, name), name
