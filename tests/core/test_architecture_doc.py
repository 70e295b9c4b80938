"""docs/architecture.md cannot drift from the import contracts in pyproject.toml.

Every contract has a section (its heading names the contract's id) that names every
layer and module the contract names; the layers are described in the contract's order;
the overview at the top shows every module of every layer; every folder and module at the
top of ``geotoolkit/`` appears in the folder layout.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def _contracts() -> list[dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _layers(contract: dict[str, Any]) -> list[list[str]]:
    """Each layer of a layers contract as its modules (``a | b`` and ``a : b`` are siblings)."""
    return [[m.strip() for m in re.split(r"[|:]", layer) if m.strip()]
            for layer in contract.get("layers", [])]


def _named(contract: dict[str, Any]) -> list[str]:
    """Every module (ours or third-party) a contract names."""
    names = [m for layer in _layers(contract) for m in layer]
    for field in ("source_modules", "forbidden_modules", "ancestors", "modules"):
        names += contract.get(field, [])
    return names


def _sections(doc: str) -> dict[str, str]:
    """The doc's ``###`` sections by the contract id in backticks that opens their heading."""
    found: dict[str, str] = {}
    for match in re.finditer(r"^### `([^`]+)`[^\n]*\n(.*?)(?=^#{1,3} |\Z)", doc, re.M | re.S):
        found[match.group(1)] = match.group(0)
    return found


def drift(doc: str, contracts: list[dict[str, Any]], package: Path) -> list[str]:
    """What ``doc`` misses of ``contracts`` and of the layout of ``package`` (empty: none)."""
    problems: list[str] = []
    sections = _sections(doc)
    for contract in contracts:
        section = sections.get(contract["id"])
        if section is None:
            problems.append(f"no section '### `{contract['id']}`' for contract {contract['name']!r}")
            continue
        for name in _named(contract):
            if f"`{name}`" not in section:
                problems.append(f"{contract['id']}: `{name}` is not named in its section")
        firsts = [min((section.find(f"`{m}`") for m in layer if f"`{m}`" in section), default=-1)
                  for layer in _layers(contract)]
        if any(i < 0 for i in firsts) or firsts != sorted(firsts):
            problems.append(f"{contract['id']}: the layers are not described top to bottom")
    overview = re.search(r"```\n(.*?)```", doc, re.S)
    layers_contract = next((c for c in contracts if c["id"] == "layers"), None)
    if overview and layers_contract:
        for layer in _layers(layers_contract):
            for module in layer:
                short = module.rpartition(".")[2]
                if not re.search(rf"(?<![\w]){re.escape(short)}(?!\w)", overview.group(1)):
                    problems.append(f"the overview of the layers does not show {short}")
    for entry in sorted(package.iterdir()):
        if entry.name.startswith(("_", ".")) or entry.name == "py.typed":
            continue
        shown = f"{entry.name}/" if entry.is_dir() else entry.name
        listed = entry.is_dir() or entry.suffix == ".py"
        if listed and not re.search(rf"(?<![\w/]){re.escape(shown)}", doc):
            problems.append(f"the folder layout does not show geotoolkit/{shown}")
        elif entry.is_dir():
            problems += _folder_drift(doc, entry)
    return problems


def _folder_drift(doc: str, folder: Path) -> list[str]:
    """The public modules of ``folder`` its entry in the layout leaves out (its lines, up to
    the next folder's), where that entry lists modules at all."""
    entry = re.search(rf"^  {re.escape(folder.name)}/ +(.*?)(?=^  \S|^\S)", doc, re.M | re.S)
    if entry is None or ".py" not in entry.group(1):
        return []
    return [f"the folder layout does not show geotoolkit/{folder.name}/{module.name}"
            for module in sorted(folder.glob("*.py"))
            if not module.name.startswith("_")
            and not re.search(rf"(?<![\w/]){re.escape(module.name)}", entry.group(1))]


def test_the_doc_names_every_contract_layer_and_module() -> None:
    assert drift(DOC.read_text(encoding="utf-8"), _contracts(), ROOT / "geotoolkit") == []


def test_the_contracts_are_read_as_the_project_declares_them() -> None:
    contracts = {c["id"]: c for c in _contracts()}
    assert {"layers", "pure-core", "engine-protocols", "display"} <= set(contracts)
    layers = _layers(contracts["layers"])
    assert [layer[0] for layer in layers[:3]] == [
        "geotoolkit.frontends", "geotoolkit.orchestration", "geotoolkit.engine"]
    assert {"geotoolkit.providers", "geotoolkit.gate", "geotoolkit.store",
            "geotoolkit.export"} <= set(layers[3])
    assert "geotoolkit.errors" in layers[4] and "pandas" in _named(contracts["pure-core"])


def test_drift_is_caught_when_the_doc_forgets_a_module_a_layer_or_a_folder(tmp_path: Path) -> None:
    doc = DOC.read_text(encoding="utf-8")
    contracts = _contracts()
    forgot_module = doc.replace("`geotoolkit.urls`", "`urls`")
    assert any("`geotoolkit.urls`" in p for p in drift(forgot_module, contracts, ROOT / "geotoolkit"))
    overview = re.search(r"```\n(.*?)```", doc, re.S)
    assert overview is not None
    forgot_in_overview = doc.replace(overview.group(1), overview.group(1).replace(" : periods", ""))
    assert "the overview of the layers does not show periods" in drift(
        forgot_in_overview, contracts, ROOT / "geotoolkit")
    forgot_section = doc.replace("### `engine-protocols`", "### engine protocols")
    assert any("engine-protocols" in p for p in drift(forgot_section, contracts, ROOT / "geotoolkit"))
    sections = _sections(doc)
    layers = sections["layers"]
    swapped = layers.replace("`geotoolkit.frontends`", "`tmp`").replace(
        "`geotoolkit.engine`", "`geotoolkit.frontends`").replace("`tmp`", "`geotoolkit.engine`")
    assert any("top to bottom" in p
               for p in drift(doc.replace(layers, swapped), contracts, ROOT / "geotoolkit"))
    package = tmp_path / "geotoolkit"
    (package / "newlayer").mkdir(parents=True)
    (package / "policy.py").touch()
    assert drift(doc, contracts, package) == ["the folder layout does not show geotoolkit/newlayer/"]
    (package / "engine").mkdir()
    for name in ("engine.py", "rows.py", "queue.py", "_private.py"):  # queue.py is not listed
        (package / "engine" / name).touch()
    assert "the folder layout does not show geotoolkit/engine/queue.py" in drift(
        doc, contracts, package)
    assert not any("engine/rows.py" in p or "_private" in p for p in drift(doc, contracts, package))
