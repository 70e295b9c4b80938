"""The CLI sends Census batches (``--batch-size``) against the simulator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyogrio
import pytest

from geotoolkit.frontends.cli import main
from geotoolkit.testing import ProviderSimulator

ADDRESSES = [f"Landstrasse {n}, 9490 Vaduz" for n in range(1, 7)] + ["Nowhere Street 999, 0000 Atlantis"]


@pytest.fixture
def sim() -> Iterator[ProviderSimulator]:
    with ProviderSimulator() as simulator:
        yield simulator


def _geocode(sim: ProviderSimulator, tmp_path: Path, *extra: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    source, out = tmp_path / "in.csv", tmp_path / "out.gpkg"
    pd.DataFrame({"id": range(len(ADDRESSES)), "address": ADDRESSES}).to_csv(source, index=False)
    assert main(["geocode", str(source), "-o", str(out), "--provider", "census", "--base-url", sim.url,
                 "--gate", "memory://", "--cache", "none", "--progress", "none", *extra]) == 0
    return (pyogrio.read_dataframe(out, layer="geocoded"),
            pyogrio.read_dataframe(out, layer="dead_letters", read_geometry=False))


def test_batch_size_flag_chunks_the_uploads(sim: ProviderSimulator, tmp_path: Path) -> None:
    geocoded, letters = _geocode(sim, tmp_path, "--batch-size", "3")
    assert sorted((r.path, r.rows) for r in sim.requests) == [
        ("/locations/addressbatch", 3), ("/locations/addressbatch", 3), ("/locations/onelineaddress", None)]
    assert sorted(geocoded["id"].astype(int)) == list(range(6))
    for _, row in geocoded.iterrows():
        assert (row["lon"], row["lat"]) == sim.expected(ADDRESSES[int(row["id"])])
    assert letters["geocode_status"].tolist() == ["no_match"]


def test_batch_size_one_sends_one_address_per_request(sim: ProviderSimulator, tmp_path: Path) -> None:
    geocoded, _ = _geocode(sim, tmp_path, "--batch-size", "1")
    assert [r.path for r in sim.requests] == ["/locations/onelineaddress"] * len(ADDRESSES)
    assert len(geocoded) == 6
