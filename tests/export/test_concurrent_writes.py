"""Two writers of one output at once (a second run started on the same ``-o``, a rerun while
a scheduler's retry still runs): each writes a file of its own next to the target and moves
it into place, so the target is always one writer's whole file, never a mix or a loss."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pyogrio
import pytest

from geotoolkit import ExportError
from geotoolkit.export import write_geopackage, write_results
from geotoolkit.export.writers import _host
from geotoolkit.orchestration.frame import outcomes_frame
from geotoolkit.results import Failure, Match

pytest.importorskip("pyarrow")


def _result(who: str, rows: int) -> gpd.GeoDataFrame:
    df = pd.DataFrame({"address": [f"{who} street {i}" for i in range(rows)]})
    outcomes = [Match(lon=9.5 + i / 1000, lat=47.1, label="x", provider="nominatim")
                if i % 4 else Failure(reason="bad", error="QueryError", provider="nominatim")
                for i in range(rows)]
    return outcomes_frame(df, outcomes)


def _layers(path: Path) -> dict[str, int]:
    return {name: pyogrio.read_info(path, layer=name)["features"]
            for name, _ in pyogrio.list_layers(path)}


@pytest.mark.parametrize("name", ["out.gpkg", "out.parquet"])
def test_a_second_writer_between_the_layers_of_the_first_loses_nothing(
        tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both writers used one ``.out.partial.gpkg``: the second, started while the first
    wrote, removed the first's file, wrote and moved its own into place; the first then
    wrote its dead letters into a new file with no ``geocoded`` layer, moved it over the
    second's, and reported its 30 matched rows written: the output held none of them."""
    target = tmp_path / name
    first, second = _result("first", 40), _result("second", 8)
    real = pyogrio.write_dataframe
    calls: list[Any] = []

    def write_then_let_the_second_writer_run(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        calls.append(args[1])
        if len(calls) == 1:  # the first writer's first layer is written: the second runs
            assert write_results(second, target) == (6, 2)

    monkeypatch.setattr(pyogrio, "write_dataframe", write_then_let_the_second_writer_run)
    real_to_parquet = gpd.GeoDataFrame.to_parquet

    def to_parquet_then_let_the_second_writer_run(self: gpd.GeoDataFrame, path: Any,
                                                  **kwargs: Any) -> None:
        real_to_parquet(self, path, **kwargs)
        calls.append(path)
        if len(calls) == 1:
            assert write_results(second, target) == (6, 2)

    monkeypatch.setattr(gpd.GeoDataFrame, "to_parquet", to_parquet_then_let_the_second_writer_run)

    assert write_results(first, target) == (30, 10)
    if name.endswith(".gpkg"):
        assert _layers(target) == {"geocoded": 30, "dead_letters": 10}
        back = pyogrio.read_dataframe(target, layer="geocoded", read_geometry=False)
    else:
        back = gpd.read_parquet(target)
        assert len(back) == 40
    assert back["address"].str.startswith("first").all()
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no partial file left


def test_a_partial_file_a_killed_writer_left_is_removed_by_the_next(tmp_path: Path) -> None:
    """A writer killed mid-write (SIGKILL) leaves its partial file (and SQLite's journal);
    the next write to the same target removes them. A live writer's file is left alone."""
    target = tmp_path / "out.gpkg"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)  # a process that has ended
    host = _host()
    stale = [tmp_path / f".out.{host}-{dead_pid}-0a1b2c3d.partial.gpkg",
             tmp_path / f".out.{host}-{dead_pid}-0a1b2c3d.partial.gpkg-journal"]
    alive = tmp_path / f".out.{host}-{os.getppid()}-0a1b2c3d.partial.gpkg"
    # Another machine's writer on a shared folder: its process cannot be seen from here.
    elsewhere = tmp_path / f".out.0badc0de-{dead_pid}-0a1b2c3d.partial.gpkg"
    for path in [*stale, alive, elsewhere]:
        path.write_bytes(b"half a file")
    assert write_geopackage(_result("next", 8), target) == (6, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [alive.name, elsewhere.name, "out.gpkg"])


@pytest.mark.parametrize("name", ["out.gpkg", "out.parquet"])
def test_a_place_where_the_partial_file_cannot_be_removed_is_an_export_error(
        tmp_path: Path, name: str) -> None:
    """The output folder turned read-only mid-run (a remounted disk): the write failed, and
    so did removing its partial file, with ``OSError: [Errno 30] Read-only file system``
    raised from the cleanup: the command ended in a traceback instead of 'stopped:
    ExportError' (the finished rows were in the cache all along). A path through a file
    fails the same two ways without needing a read-only disk."""
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(ExportError, match="cannot write"):
        write_results(_result("x", 4), tmp_path / "a-file" / name)
