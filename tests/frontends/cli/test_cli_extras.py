"""An optional dependency missing (an extra not installed) is said, with the command that
installs it from the checkout, before anything is sent."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from geotoolkit.errors import ConfigurationError
from geotoolkit.frontends.cli import main
from geotoolkit.gate import open_gate
from geotoolkit.store import open_store
from geotoolkit.testing import ProviderSimulator


@pytest.fixture
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator() as simulator:
        yield simulator


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    path = tmp_path / "in.csv"
    pd.DataFrame({"address": ["Städtle 38, 9490 Vaduz", "Landstrasse 19, 9494 Schaan"]}).to_csv(
        path, index=False)
    return path


def _without(monkeypatch: pytest.MonkeyPatch, module: str, *adapters: str) -> None:
    """As in an environment without ``module``: importing it (or an adapter of ours that
    imports it) raises ModuleNotFoundError."""
    monkeypatch.setitem(sys.modules, module, None)
    for adapter in adapters:
        monkeypatch.delitem(sys.modules, adapter, raising=False)


def _geocode(sim: ProviderSimulator, csv_path: Path, out: Path, *extra: str) -> list[str]:
    return ["geocode", str(csv_path), "-o", str(out), "--base-url", sim.url, "--user-agent",
            "geotoolkit-tests/1.0", "--rate", "unlimited", "--progress", "none", *extra]


@pytest.mark.parametrize(("module", "adapters", "flags", "extra"), [
    ("redis", ["geotoolkit.gate.redis"], ["--gate", "redis://127.0.0.1:6379/0",
                                          "--cache", "none"], "redis"),
    ("psycopg", ["geotoolkit.gate.postgres"], ["--gate", "postgresql://postgres@127.0.0.1/test",
                                               "--cache", "none"], "postgres"),
    ("psycopg", ["geotoolkit.store.postgres"], ["--gate", "memory://",
                                                "--cache", "postgresql://postgres@127.0.0.1/test"],
     "postgres"),
])
def test_a_server_gate_or_cache_without_its_client_says_which_extra(
        sim: ProviderSimulator, csv_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], module: str, adapters: list[str], flags: list[str],
        extra: str) -> None:
    """``--gate redis://...`` in a fresh environment (the redis extra not installed) ended
    in a 40-line traceback, ``ModuleNotFoundError: No module named 'redis'``; so did a
    PostgreSQL gate or cache without psycopg. Now: exit 2, the extra to install, nothing sent."""
    _without(monkeypatch, module, *adapters)
    assert main(_geocode(sim, csv_path, tmp_path / "out.gpkg", *flags)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"needs {module}" in err and f"pip install -e '.[{extra}]'" in err, err
    assert sim.count() == 0
    assert not (tmp_path / "out.gpkg").exists()


def test_open_gate_and_open_store_say_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _without(monkeypatch, "redis", "geotoolkit.gate.redis")
    _without(monkeypatch, "psycopg", "geotoolkit.gate.postgres", "geotoolkit.store.postgres")
    with pytest.raises(ConfigurationError, match=r"needs redis.*\.\[redis\]"):
        open_gate("redis://127.0.0.1:6379/0")
    with pytest.raises(ConfigurationError, match=r"needs psycopg.*\.\[postgres\]"):
        open_gate("postgresql://postgres@127.0.0.1/test")
    with pytest.raises(ConfigurationError, match=r"needs psycopg.*\.\[postgres\]"):
        open_store("postgresql://postgres@127.0.0.1/test")


def test_gate_init_without_psycopg_says_which_extra(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _without(monkeypatch, "psycopg", "geotoolkit.gate.postgres")
    assert main(["gate", "init", "postgresql://postgres@127.0.0.1/test"]) == 2
    assert "pip install -e '.[postgres]'" in capsys.readouterr().err


def test_geoparquet_without_pyarrow_is_refused_before_the_run(
        sim: ProviderSimulator, csv_path: Path, tmp_path: Path) -> None:
    """``-o out.parquet`` without pyarrow sent every row, then stopped (exit 1) at the
    export, naming ``pip install 'geotoolkit[parquet]'``, which fetches an unrelated
    package of that name from PyPI. Now it is refused before anything is sent (exit 2),
    with the install from the checkout. In a process of its own: pandas, imported there
    without pyarrow, works as it does in such an environment."""
    argv = _geocode(sim, csv_path, tmp_path / "out.parquet", "--gate", "memory://",
                    "--cache", "none")
    code = ("import sys; sys.modules['pyarrow'] = None\n"
            "from geotoolkit.frontends.cli import main\n"
            f"sys.exit(main({argv!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "pip install -e '.[parquet]'" in done.stderr and "geotoolkit[" not in done.stderr
    assert "Traceback" not in done.stderr
    assert sim.count() == 0


def test_no_message_names_the_unrelated_pypi_package() -> None:
    """The map, GeoParquet and dask messages said ``pip install 'geotoolkit[map]'`` (and
    ``[parquet]``, ``[dask]``): in a fresh environment that installs geotoolkit 0.2.1, an
    unrelated package of that name on PyPI (tests/test_docs_commands.py keeps the docs from
    saying it; the messages were not read)."""
    import re

    package = Path(__file__).resolve().parents[3] / "geotoolkit"
    said = [f"{path.relative_to(package)}: {line.strip()}" for path in package.rglob("*.py")
            for line in path.read_text(encoding="utf-8").splitlines()
            if re.search(r"pip install (?:-U |--upgrade )?['\"]?geotoolkit\b", line)]
    assert said == []


def test_a_misspelt_cache_url_says_what_the_flag_takes(
        sim: ProviderSimulator, csv_path: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--cache sqlite:/c.sqlite`` (one slash) was told to ``use None (the default SQLite
    file), False, ...``: Python values, which the flag does not take (``--cache False`` is
    refused in turn). Now the message names the URLs and ``none``, as ``--cache`` does."""
    assert main(_geocode(sim, csv_path, tmp_path / "out.gpkg", "--gate", "memory://",
                         "--cache", "sqlite:/c.sqlite")) == 2
    err = capsys.readouterr().err
    assert "use sqlite:///path, memory://, postgresql://... or none (no cache)" in err, err
    assert "use None" not in err
    assert sim.count() == 0
