"""The CLI's provider chain, --min-precision and the review loop (--only-dead-letters), end to
end against scripted loopback servers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pyogrio
import pytest
from gazetteer import Gazetteer

from geotoolkit.frontends.cli import main

UA = "geotoolkit-tests/1.0 (tests@example.org)"
FIRST = {"Städtle 38, 9490 Vaduz": (9.52195, 47.13974, "address"),
         "Vaduz": (9.5215, 47.1415, "street")}
SECOND = {"Landstrasse 19, 9494 Schaan": (9.50972, 47.16613, "address"),
          "Vaduz": (9.5215, 47.1415, "locality"),
          "Zollstrasse 2, 9490 Vaduz": (9.51931, 47.13807, "address")}
ADDRESSES = ["Städtle 38, 9490 Vaduz", "Landstrasse 19, 9494 Schaan", "Vaduz", "Zolstrasse 2"]


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    path = tmp_path / "in.csv"
    pd.DataFrame({"id": range(len(ADDRESSES)), "address": ADDRESSES}).to_csv(path, index=False)
    return path


def _argv(first: Gazetteer, second: Gazetteer, *extra: str) -> list[str]:
    return ["--provider", "photon,nominatim", "--base-url", f"photon={first.url}",
            "--base-url", f"nominatim={second.url}", "--user-agent", UA, "--gate", "memory://",
            "--progress", "none", *extra]


def test_a_chain_with_min_precision_then_the_review_loop(
        csv_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, after = tmp_path / "out.gpkg", tmp_path / "after.gpkg"
    cache = f"sqlite:///{tmp_path}/cache.sqlite"
    with Gazetteer(FIRST, name="first") as first, Gazetteer(SECOND, name="second") as second:
        assert main(["geocode", str(csv_path), "-o", str(out),
                     *_argv(first, second, "--min-precision", "address", "--cache", cache)]) == 0
        assert sorted(first.queries) == sorted(a.lower() for a in ADDRESSES)
        assert sorted(second.queries) == ["landstrasse 19, 9494 schaan", "vaduz", "zolstrasse 2"]
        printed = capsys.readouterr().out
        assert "4/4 rows: 2 matched, 1 too coarse, 1 no match, 0 failed" in printed
        geocoded = pyogrio.read_dataframe(out, layer="geocoded")
        assert dict(zip(geocoded["id"], geocoded["geocode_provider"], strict=True)) == {
            "0": "photon", "1": "nominatim"}
        letters = pyogrio.read_dataframe(out, layer="dead_letters", read_geometry=False)
        assert list(letters["geocode_status"]) == ["too_coarse", "no_match"]
        # photon's street is kept: finer than nominatim's locality
        assert letters.loc[0, "geocode_precision"] == "street"
        assert pd.isna(letters.loc[1, "geocode_precision"])
        assert letters.loc[0, "geocode_coarse_lon"] == 9.5215

        with sqlite3.connect(out) as db:  # the analyst corrects a dead letter in place
            db.execute("UPDATE dead_letters SET address = 'Zollstrasse 2, 9490 Vaduz' "
                       "WHERE address = 'Zolstrasse 2'")
        sent = (len(first.queries), len(second.queries))
        assert main(["geocode", str(out), "--only-dead-letters", "-o", str(after),
                     *_argv(first, second, "--min-precision", "address", "--cache", cache)]) == 0
        assert first.queries[sent[0]:] == ["zollstrasse 2, 9490 vaduz"]  # Vaduz: from the cache
        assert second.queries[sent[1]:] == ["zollstrasse 2, 9490 vaduz"]
    printed = capsys.readouterr().out
    assert f"(the dead letters of {out}) -> {after} (geocoded: 3, dead_letters: 1)" in printed
    merged = pd.concat([pyogrio.read_dataframe(after, layer="geocoded"),
                        pyogrio.read_dataframe(after, layer="dead_letters", read_geometry=False)])
    assert sorted(merged["id"]) == ["0", "1", "2", "3"]  # no row lost or duplicated
    fixed = merged.set_index("id")
    assert fixed.loc["3", "geocode_status"] == "matched" and fixed.loc["3", "geocode_attempts"] == 4
    assert fixed.loc["3", "address"] == "Zollstrasse 2, 9490 Vaduz"
    assert fixed.loc["2", "geocode_status"] == "too_coarse" and fixed.loc["2", "geocode_attempts"] == 2


def test_chain_flags_are_checked_before_anything_is_sent(
        csv_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = str(tmp_path / "out.gpkg")
    monkeypatch.setenv("GTK_KEY", "sk-secret")
    with Gazetteer(FIRST) as first, Gazetteer(SECOND) as second:
        assert main(["geocode", str(csv_path), "-o", out, *_argv(first, second),
                     "--api-key-env", "GTK_KEY"]) == 2
        assert "single --provider only" in capsys.readouterr().err
        assert main(["geocode", str(csv_path), "-o", out, *_argv(first, second), "--rate", "3"]) == 2
        assert "rate= with a provider chain" in capsys.readouterr().err
        assert main(["geocode", str(csv_path), "-o", out, "--provider", "photon,nominatim",
                     "--base-url", first.url, "--user-agent", UA]) == 2
        assert "NAME=URL" in capsys.readouterr().err
        assert first.queries == [] and second.queries == []
    with pytest.raises(SystemExit):
        main(["geocode", str(csv_path), "-o", out, "--provider", "photon,nowhere"])
    assert "unknown provider 'nowhere'" in capsys.readouterr().err
    assert main(["geocode", str(csv_path), "--only-dead-letters", "-o", out, "--user-agent", UA]) == 2
    assert "cannot tell the output format of" in capsys.readouterr().err  # a CSV is no result
