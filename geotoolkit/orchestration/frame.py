"""Outcomes to (Geo)DataFrames: validated WGS84 Points built explicitly from (lon, lat)."""

from __future__ import annotations

from collections.abc import Sequence

import geopandas as gpd
import numpy as np
import pandas as pd

from geotoolkit.export import input_columns
from geotoolkit.results import Match, Outcome
from geotoolkit.schema import GEOCODE_COLUMNS
from geotoolkit.validate import check_point, country_code, require_country

__all__ = ["outcomes_frame"]

Countries = str | Sequence[object] | None


def _countries(country: Countries, n: int) -> list[str | None]:
    """One ISO code (or None: no country check) per row."""
    if country is None:
        return [None] * n
    if isinstance(country, str):
        return [require_country(country)] * n
    if len(country) != n:
        raise ValueError(f"{len(country)} countries for {n} rows")
    return [country_code(value) for value in country]


class _Columns:
    """The geocode columns of the distinct (outcome, country) pairs, filled one by one."""

    def __init__(self, n: int) -> None:
        self.lon = np.full(n, np.nan)
        self.lat = np.full(n, np.nan)
        self.status: list[str] = [""] * n
        self.label: list[str] = [""] * n
        self.provider: list[str] = [""] * n
        self.reason: list[str | None] = [None] * n
        self.attempts = np.zeros(n, dtype="int64")

    def fill(self, i: int, outcome: Outcome, country: str | None) -> None:
        self.provider[i], self.attempts[i] = outcome.provider, outcome.attempts
        if not isinstance(outcome, Match):
            self.status[i], self.reason[i] = outcome.status, outcome.reason
            return
        self.label[i] = outcome.label
        problem = check_point(outcome.lon, outcome.lat, country)
        if problem is None:
            self.status[i] = "matched"
            self.lon[i], self.lat[i] = outcome.lon, outcome.lat
        else:  # flagged: to the dead letters, never into the geometry
            self.status[i], self.reason[i] = "failed", problem

    def frame(self, rows: np.ndarray, index: pd.Index) -> pd.DataFrame:
        """One row per input row: ``rows`` indexes the distinct pairs."""
        values = (self.lon, self.lat, self.status, self.label, self.provider, self.reason,
                  self.attempts)
        columns = {name: np.asarray(v, dtype=None if isinstance(v, np.ndarray) else object)[rows]
                   for name, v in zip(GEOCODE_COLUMNS, values, strict=True)}
        out = pd.DataFrame(columns, index=index)
        return out.astype({"geocode_status": "str", "geocode_label": "str",
                           "geocode_provider": "str", "geocode_reason": "str"})


def _distinct(outcomes: Sequence[Outcome], countries: list[str | None]
              ) -> tuple[np.ndarray, list[tuple[Outcome, str | None]]]:
    """Rows sharing an outcome object (duplicate addresses) and a country are checked once."""
    keys = list(zip(map(id, outcomes), countries, strict=True))
    seen: dict[tuple[int, str | None], int] = {}
    rows = [seen.setdefault(key, len(seen)) for key in keys]
    first: dict[tuple[int, str | None], int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    pairs = [(outcomes[i], countries[i]) for i in first.values()]
    return np.asarray(rows, dtype=np.intp), pairs


def outcomes_frame(df: pd.DataFrame, outcomes: Sequence[Outcome], *,
                   country: Countries = None) -> gpd.GeoDataFrame:
    """A copy of ``df`` with the geocode columns and Point geometry in EPSG:4326.

    Every match is validated before its Point is built (finite, in range, not
    (0, 0), and inside ``country`` when given: one ISO alpha-2 code, or one code or
    country name per row, unknown values skipping the check). Rows that did not
    match, or whose coordinates were flagged, get an empty geometry, NaN ``lon``
    and ``lat``, and say why in ``geocode_reason``. The input's active geometry
    (if any) is replaced; ``df`` itself is never modified.
    """
    n = len(df)
    if len(outcomes) != n:
        raise ValueError(f"{len(outcomes)} outcomes for {n} rows")
    rows, pairs = _distinct(outcomes, _countries(country, n))
    columns = _Columns(len(pairs))
    for j, (outcome, code) in enumerate(pairs):
        columns.fill(j, outcome, code)
    added = columns.frame(rows, df.index)
    merged = pd.concat([input_columns(df).reset_index(drop=True), added.reset_index(drop=True)], axis=1)
    merged.index = df.index
    points = gpd.points_from_xy(added["lon"], added["lat"], crs="EPSG:4326")
    points[added["geocode_status"].to_numpy() != "matched"] = None
    return gpd.GeoDataFrame(merged, geometry=points, crs="EPSG:4326")
