"""Points are validated before a Point is built; flagged rows go to the dead letters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from geotoolkit import ConfigurationError
from geotoolkit.providers.base import Provider

ANSWERS: dict[str, tuple[str, str] | None] = {
    "vaduz": ("9.5219500", "47.1397400"),
    "null island": ("0", "0.0"),
    "far east": ("200.5", "47.1"),
    "far south": ("9.5", "-95"),
    "not a number": ("nan", "47.1"),
    "infinite": ("9.5", "inf"),
    "vienna": ("16.3725", "48.2083"),
    "swapped": ("47.13974", "9.52195"),
    "nothing": None,
}


def _run(fake_provider: Provider, server: Any, df: pd.DataFrame, **options: Any) -> Any:
    return df.geocode.run(provider=fake_provider, gate="memory://", cache=False, progress=False,
                          transport=server.transport(), **options)


def test_flagged_rows_go_to_the_dead_letters_with_their_reason(
        fake_provider: Provider, coordinates: Callable[..., Any]) -> None:
    server = coordinates(ANSWERS)
    df = pd.DataFrame({"address": list(ANSWERS)}, index=[f"r{i}" for i in range(len(ANSWERS))])
    out = _run(fake_provider, server, df, country="LI")
    reasons = dict(zip(df["address"], out["geocode_reason"], strict=True))
    status = dict(zip(df["address"], out["geocode_status"], strict=True))
    assert status["vaduz"] == "matched" and pd.isna(reasons["vaduz"])
    assert reasons["null island"] == "null island (0, 0)"
    assert reasons["far east"] == "longitude 200.5 out of range [-180, 180]"
    assert reasons["far south"] == "latitude -95.0 out of range [-90, 90]"
    assert reasons["not a number"].startswith("coordinates are not finite")
    assert reasons["infinite"].startswith("coordinates are not finite")
    assert reasons["vienna"] == "outside LI (Liechtenstein): (lon, lat) = (16.3725, 48.2083)"
    assert reasons["swapped"].startswith("coordinates look swapped: (lon, lat) = (47.13974, 9.52195)")
    assert "not swapped automatically" in reasons["swapped"]
    assert status["nothing"] == "no_match" and reasons["nothing"] == "no match"
    flagged = [a for a in ANSWERS if a not in ("vaduz", "nothing")]
    assert all(status[a] == "failed" for a in flagged)
    # never silently swapped or kept: no geometry, no coordinates
    rows = out[out["geocode_status"] != "matched"]
    assert rows.geometry.isna().all() and rows[["lon", "lat"]].isna().all().all()
    letters = out.geocode.dead_letters()
    assert list(letters.index) == list(rows.index)
    assert list(letters["geocode_reason"]) == list(rows["geocode_reason"])
    assert set(letters.columns) == {"address", "geocode_status", "geocode_reason",
                                    "geocode_attempts", "geocode_provider", "geocode_label",
                                    "geocode_precision", "geocode_score"}
    assert letters.loc[letters["address"] == "swapped", "geocode_label"].item() == "swapped (label)"
    assert (letters["geocode_attempts"] == 1).all()


def test_without_country_only_the_ranges_are_checked(
        fake_provider: Provider, coordinates: Callable[..., Any]) -> None:
    server = coordinates(ANSWERS)
    out = _run(fake_provider, server, pd.DataFrame({"address": ["vienna", "swapped"]}))
    assert list(out["geocode_status"]) == ["matched", "matched"]
    assert (out.at[1, "lon"], out.at[1, "lat"]) == (47.13974, 9.52195)  # as served, unchanged


def test_a_swap_into_an_out_of_range_latitude_is_reported_as_swapped(
        fake_provider: Provider, coordinates: Callable[..., Any]) -> None:
    server = coordinates({"tokyo": ("35.6812", "139.7671")})  # (lat, lon) served as (lon, lat)
    out = _run(fake_provider, server, pd.DataFrame({"address": ["tokyo"]}), country="JP")
    assert out.at[0, "geocode_reason"].startswith("coordinates look swapped")
    plain = _run(fake_provider, server, pd.DataFrame({"address": ["tokyo"]}))
    assert plain.at[0, "geocode_reason"] == "latitude 139.7671 out of range [-90, 90]"


def test_a_country_column_validates_each_row(
        fake_provider: Provider, coordinates: Callable[..., Any]) -> None:
    server = coordinates(ANSWERS)
    df = pd.DataFrame({"address": ["vienna", "vienna", "vaduz", "vaduz"],
                       "cc": ["AT", "LI", "Liechtenstein", "Atlantis"]})
    out = _run(fake_provider, server, df, country="cc")
    assert list(out["geocode_status"]) == ["matched", "failed", "matched", "matched"]
    assert server.sent.count("vienna") == 1  # free text: the country column is not sent


def test_an_unknown_country_code_is_refused_before_sending(
        fake_provider: Provider, coordinates: Callable[..., Any]) -> None:
    server = coordinates(ANSWERS)
    with pytest.raises(ConfigurationError, match="ISO 3166-1 alpha-2"):
        _run(fake_provider, server, pd.DataFrame({"address": ["vaduz"]}), country="XX")
    assert server.sent == []
