"""The Prefect and Dagster recipes of docs/recipes.md, run for real against the simulator.

The simulator answers the third address ``429`` with ``Retry-After: 1`` once. With
``max_wait_seconds=0.5`` the batch raises ``RateLimitError(retry_after=1.0)``; the
orchestrator reruns the task after that delay -- capped to 0.2 s here, so the test is
fast -- and the rerun takes the first two rows from the cache.

Prefect needs an API server: ``prefect_api`` (conftest.py) is a local one, started in the
background at the end of collection, with ``PREFECT_HOME`` in a temporary directory and
analytics off.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import geopandas as gpd
import pytest
from recipe_support import UA, expected_sends, load_recipe, sent, write_addresses

from geotoolkit.errors import AuthenticationError
from geotoolkit.testing import ProviderSimulator

pytestmark = pytest.mark.orchestrators

MAX_DELAY = 0.2


@pytest.fixture
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator(retry_after=1) as simulator:
        yield simulator


def _options(sim: ProviderSimulator, tmp_path: Path) -> dict[str, Any]:
    # memory:// gate: each attempt gets a fresh gate, so the run retries exactly once. The
    # instance publishes no rate; "unlimited": the only wait is the one the 429 asks for.
    return {"base_url": sim.url, "user_agent": UA, "gate": "memory://", "rate": math.inf,
            "cache": f"sqlite:///{tmp_path}/results.sqlite", "max_wait_seconds": 0.5,
            "max_delay_seconds": MAX_DELAY, "concurrency": 1}


# -- Prefect ---------------------------------------------------------------------------

class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_prefect_retries_the_task_after_the_delay_the_rate_limit_asked_for(
        prefect_api: str, sim: ProviderSimulator, tmp_path: Path) -> None:
    recipe = load_recipe("prefect_geocode.py", tmp_path)
    records = _Records()
    logger = logging.getLogger("prefect.task_runs")
    logger.addHandler(records)
    try:
        summary = recipe.geocode_files([str(write_addresses(tmp_path))], str(tmp_path),
                                       **_options(sim, tmp_path))
    finally:
        logger.removeHandler(records)
    assert summary == [{"geocoded": 5, "dead_letters": 0}]
    assert sent(sim) == expected_sends()
    retries = [m for m in records.messages if "Retry 1/20" in m]
    assert len(retries) == 1 and not any("Retry 2/20" in m for m in records.messages)
    assert "RateLimitError" in retries[0] and "asks to wait 1.0 s" in retries[0]
    assert re.search(rf"will start {MAX_DELAY} second\(s\) from now", retries[0])
    out = gpd.read_parquet(tmp_path / "addresses.parquet")
    assert (out["geocode_status"] == "matched").all() and out.crs.to_epsg() == 4326


# -- Dagster ---------------------------------------------------------------------------


@pytest.fixture
def dagster_instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    dagster = pytest.importorskip("dagster")
    home = tmp_path / "dagster-home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("DAGSTER_DISABLE_TELEMETRY", "1")
    with dagster.DagsterInstance.ephemeral() as instance:
        yield instance


def test_dagster_op_requests_a_retry_after_the_delay_the_rate_limit_asked_for(
        dagster_instance: Any, sim: ProviderSimulator, tmp_path: Path) -> None:
    recipe = load_recipe("dagster_geocode.py", tmp_path)
    target = tmp_path / "out.parquet"
    config = {"source": str(write_addresses(tmp_path)), "target": str(target),
              **_options(sim, tmp_path)}
    result = recipe.geocode_job.execute_in_process(
        run_config={"ops": {"geocode_csv": {"config": config}}}, instance=dagster_instance)
    assert result.success
    assert result.output_for_node("geocode_csv") == {"geocoded": 5, "dead_letters": 0}
    retries = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert [e.event_specific_data.seconds_to_wait for e in retries] == [MAX_DELAY]
    assert "RateLimitError" in str(retries[0].event_specific_data.error)
    assert sent(sim) == expected_sends()
    assert (gpd.read_parquet(target)["geocode_status"] == "matched").all()
    assert os.environ["DAGSTER_HOME"] == str(tmp_path / "dagster-home")


def test_prefect_does_not_retry_what_a_retry_cannot_fix(
        prefect_api: str, tmp_path: Path) -> None:
    recipe = load_recipe("prefect_geocode.py", tmp_path)
    records = _Records()
    logger = logging.getLogger("prefect.task_runs")
    logger.addHandler(records)
    with ProviderSimulator(valid_keys={"the-right-key"}) as sim:  # we send none: 401
        try:
            with pytest.raises(AuthenticationError):
                recipe.geocode_files([str(write_addresses(tmp_path))], str(tmp_path),
                                     **_options(sim, tmp_path))
        finally:
            logger.removeHandler(records)
        assert sim.count(401) == 1 and len(sim.requests) == 1
    assert not any("Retry 1/" in m for m in records.messages)
    # The task had retries left: its log says why none was made, and what to do.
    assert [m for m in records.messages if m.startswith("not retried")] == [
        "not retried: AuthenticationError, a refused key, user agent or proxy credentials: "
        "fix them, then run again"]
    assert not (tmp_path / "addresses.parquet").exists()


def test_a_dagster_op_that_a_retry_cannot_fix_fails_saying_so(
        dagster_instance: Any, tmp_path: Path) -> None:
    recipe = load_recipe("dagster_geocode.py", tmp_path)
    with ProviderSimulator(valid_keys={"the-right-key"}) as sim:  # we send none: 401
        config = {"source": str(write_addresses(tmp_path)), "target": str(tmp_path / "out.parquet"),
                  **_options(sim, tmp_path)}
        result = recipe.geocode_job.execute_in_process(
            run_config={"ops": {"geocode_csv": {"config": config}}}, instance=dagster_instance,
            raise_on_error=False)
        assert sim.count(401) == 1 and len(sim.requests) == 1
    assert not result.success
    assert not [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    error = failure.event_specific_data.error
    while error.cause is not None and "AuthenticationError" not in error.message:
        error = error.cause
    assert "AuthenticationError: nominatim refused" in error.message
    assert "not retried: AuthenticationError, a refused key" in error.message
