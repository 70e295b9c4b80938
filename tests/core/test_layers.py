"""The architecture on the real package: the import contracts themselves run in .ci/run
(``lint-imports``, pyproject.toml); here, what they cannot see (what importing loads)."""

from __future__ import annotations

import subprocess
import sys

import geotoolkit

HEAVY = ["httpx", "pandas", "geopandas", "ipywidgets", "redis", "psycopg", "shapely", "numpy",
         "pyproj", "pyogrio", "platformdirs"]


def _fresh(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_importing_the_core_loads_no_third_party_module() -> None:
    code = f"""
import sys
import geotoolkit.policy, geotoolkit.errors, geotoolkit.results, geotoolkit.clock
import geotoolkit.validate, geotoolkit.progress, geotoolkit.redact, geotoolkit.urls
import geotoolkit.keys, geotoolkit.schema, geotoolkit.files, geotoolkit.watchdog
import geotoolkit.periods, geotoolkit.pgschema
print(",".join(m for m in {HEAVY!r} if m in sys.modules))
"""
    assert _fresh(code) == ""


def test_importing_geotoolkit_registers_the_accessor_before_or_after_pandas() -> None:
    after = "import geotoolkit, sys; assert 'pandas' not in sys.modules\n" \
            "import pandas as pd; print(hasattr(pd.DataFrame, 'geocode'))"
    before = "import pandas as pd, geotoolkit; print(hasattr(pd.DataFrame, 'geocode'))"
    assert _fresh(after) == "True" and _fresh(before) == "True"


def test_public_api_is_pinned_and_loads_lazily() -> None:
    assert geotoolkit.__all__ == sorted([
        "AuthenticationError", "Backoff", "Cap", "Clock", "ConfigurationError", "ExportError",
        "FakeClock", "Failure", "Gate", "GateError", "GeocodeAccessor", "GeocodeOptions",
        "GeotoolkitError", "Match", "MemoryGate", "NoMatch", "Outcome", "Place", "ProviderError",
        "ProviderResponseError", "ProviderUnavailableError", "Query", "QueryError",
        "QuotaExceededError", "RateLimitError", "RatePolicy", "SQLiteGate", "SystemClock",
        "__version__", "dask", "errors", "fleet_panel", "geocode", "open_gate", "orchestrators",
        "parse_rate_limit_reset", "parse_retry_after", "providers", "write_results",
    ])
    for name in geotoolkit.__all__:
        assert getattr(geotoolkit, name) is not None, name
    assert sorted(geotoolkit._EXPORTS) == sorted(
        set(geotoolkit.__all__) - {"__version__", "dask", "errors", "orchestrators", "providers"})
