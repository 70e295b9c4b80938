"""pyproject.toml is the source of truth; environment.yml must mirror it."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# conda-forge names that differ from PyPI's
CONDA_NAMES = {"redis": "redis-py", "psycopg[binary]": "psycopg", "dask[distributed]": "dask"}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~ ]", r, maxsplit=1)[0].strip().lower() for r in requirements}


def test_environment_yml_mirrors_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = _names(project["dependencies"])
    for reqs in project["optional-dependencies"].values():
        wanted |= {n for n in _names(reqs) if not n.startswith("geotoolkit")}
    conda = set()
    for line in (ROOT / "environment.yml").read_text().splitlines():
        found = re.match(r"\s+- ([A-Za-z0-9_.\-\[\]]+)", line)
        if found:
            conda.add(re.split(r"[<>=]", found.group(1))[0].lower())
    expected = {CONDA_NAMES.get(n, n) for n in wanted}
    assert expected - conda == set(), f"missing from environment.yml: {expected - conda}"


def test_readme_commands_are_the_ones_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "bash .ci/run" in readme
    assert "python3 -m geotoolkit demo notebooks/data/addresses.csv -o addresses.gpkg" in readme
    assert "pytest" in (ROOT / ".ci" / "run").read_text()
    assert (ROOT / "notebooks" / "data" / "addresses.csv").is_file()


def test_the_api_reference_is_up_to_date() -> None:
    """docs/api.md is generated from the docstrings: regenerate it when they change."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_api.py"), "--check"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"run `python docs/gen_api.py`:\n{done.stdout}{done.stderr}"


def test_the_license_is_an_spdx_expression() -> None:
    """``license = { text = "MIT" }`` made every build warn that the table form is deprecated
    and unsupported from 2027-02-18 (setuptools 77+, which an isolated build fetches)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["project"]["license"] == "MIT"
    assert "setuptools>=77" in config["build-system"]["requires"]  # PEP 639 from setuptools 77


def _bounds(requirements: list[str]) -> dict[str, str]:
    """Each requirement's name (the conda-forge one) and its version bound, as written."""
    found = {}
    for requirement in requirements:
        name, bound = re.match(r"([A-Za-z0-9_.\-\[\]]+)\s*(.*)", requirement).groups()  # type: ignore[union-attr]
        if not name.lower().startswith("geotoolkit"):
            found[CONDA_NAMES.get(name.lower(), name.lower())] = bound.replace(" ", "")
    return found


def test_environment_yml_has_pyprojects_version_bounds() -> None:
    """Names alone were checked: a bound raised in pyproject.toml would leave conda users on
    a version the code no longer supports."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = _bounds(project["dependencies"])
    for reqs in project["optional-dependencies"].values():
        wanted |= _bounds(reqs)
    wanted["python"] = project["requires-python"]
    lines = (ROOT / "environment.yml").read_text().splitlines()
    conda = _bounds([m.group(1) for line in lines if (m := re.match(r"\s+- ([^\s#:]+)\s*$", line))])
    assert {name: conda.get(name) for name in wanted} == wanted


def test_the_readme_layout_names_every_benchmark() -> None:
    """fleetbench/, fleet_timeline.py and share_reference.py were missing from it."""
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("benchmarks/    "):readme.index("docs/          ")]
    entries = [p.name + ("/" if p.is_dir() else "") for p in (ROOT / "benchmarks").iterdir()
               if not p.name.startswith((".", "_"))]
    assert [e for e in entries if e.rstrip("/") not in layout] == []
