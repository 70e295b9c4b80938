"""Outcomes to (Geo)DataFrames: validated WGS84 Points built explicitly from (lon, lat).

:func:`outcomes_frame` builds a result from one outcome per row. The review loop:
:func:`retry` sends some rows of a result again (:func:`retry_rows` picks and corrects
them) and :func:`merge_retried` folds them back into the whole result.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import geopandas as gpd
import numpy as np
import pandas as pd

from geotoolkit.export import input_columns
from geotoolkit.export.dtypes import PRECISION_DTYPE, is_result_dtype_column, result_dtypes
from geotoolkit.results import Match, Outcome, Place
from geotoolkit.schema import (
    COARSE_COLUMNS,
    FULL_RESULT_COLUMNS,
    GEOCODE_COLUMNS,
    REVIEW_COLUMNS,
    too_coarse,
)
from geotoolkit.validate import check_point, row_countries

if TYPE_CHECKING:
    from geotoolkit.orchestration.job import Columns
    from geotoolkit.orchestration.options import GeocodeOptions
    from geotoolkit.progress import ProgressSink

__all__ = ["PRECISION_DTYPE", "merge_retried", "outcomes_frame", "result_dtypes", "retry",
           "retry_rows"]

Countries = str | Sequence[object] | None

_PLACE_TEXT = ("place_id", "osm_type", "housenumber", "street", "postcode", "locality", "region",
               "country_code")


class OutcomeColumns:
    """Result columns filled from outcomes one by one: what forward and reverse results
    share (provider, attempts, status, label, reason, precision, score, the place's parts
    with ``full_results``). ``names``: the columns of this kind of result."""

    def __init__(self, names: Sequence[str], n: int, *, min_precision: str | None,
                 full_results: bool) -> None:
        self.min_precision, self.full_results = min_precision, full_results
        names = [*names, *(FULL_RESULT_COLUMNS if full_results else ())]
        self.values: dict[str, list[Any]] = {name: [None] * n for name in names}
        self.values["geocode_attempts"] = [0] * n

    def answered(self, i: int, outcome: Outcome) -> Match | None:
        """Fill row ``i`` with what every outcome has; the Match, whose point is the
        caller's to check and place (None: not a match, nothing more to fill)."""
        v = self.values
        v["geocode_provider"][i], v["geocode_attempts"][i] = outcome.provider, outcome.attempts
        v["geocode_status"][i], v["geocode_label"][i] = outcome.status, ""
        if not isinstance(outcome, Match):
            v["geocode_reason"][i] = outcome.reason
            return None
        v["geocode_label"][i], v["geocode_precision"][i] = outcome.label, outcome.precision
        v["geocode_score"][i] = outcome.score
        if self.full_results:
            self._place(i, outcome.place)
        return outcome

    def flag(self, i: int, status: str, reason: str) -> None:
        self.values["geocode_status"][i], self.values["geocode_reason"][i] = status, reason

    def coarse(self, i: int, match: Match) -> bool:
        """Whether the match is coarser than ``min_precision`` (then flagged ``too_coarse``)."""
        if not too_coarse(match.precision, self.min_precision):
            return False
        self.flag(i, "too_coarse", f"precision {match.precision} is coarser than "
                                   f"{self.min_precision}")
        return True

    def _place(self, i: int, place: Place) -> None:
        for name in _PLACE_TEXT:
            self.values[f"geocode_{name}"][i] = getattr(place, name)
        self.values["geocode_osm_id"][i] = place.osm_id
        box = place.bbox or (None, None, None, None)
        for name, value in zip(FULL_RESULT_COLUMNS[-4:], box, strict=True):
            self.values[name][i] = value


class _Columns(OutcomeColumns):
    """The geocode columns of the distinct (outcome, country) pairs, filled one by one."""

    def __init__(self, n: int, *, min_precision: str | None, full_results: bool) -> None:
        names = [*GEOCODE_COLUMNS, *(COARSE_COLUMNS if min_precision else ())]
        super().__init__(names, n, min_precision=min_precision, full_results=full_results)

    def fill(self, i: int, outcome: Outcome, country: str | None) -> None:
        match = self.answered(i, outcome)
        if match is None:
            return
        v = self.values
        problem = check_point(match.lon, match.lat, country)
        if problem is not None:  # flagged: to the dead letters, never into the geometry
            self.flag(i, "failed", problem)
        elif self.coarse(i, match):
            v["geocode_coarse_lon"][i], v["geocode_coarse_lat"][i] = match.lon, match.lat
        else:
            v["lon"][i], v["lat"][i] = match.lon, match.lat

    def frame(self, rows: np.ndarray, index: pd.Index) -> pd.DataFrame:
        """One row per input row: ``rows`` indexes the distinct pairs."""
        columns = {name: pd.Series(values, dtype=object).take(rows).to_numpy()
                   for name, values in self.values.items()}
        return result_dtypes(pd.DataFrame(columns, index=index))


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


def outcomes_frame(df: pd.DataFrame, outcomes: Sequence[Outcome], *, country: Countries = None,
                   min_precision: str | None = None, full_results: bool = False
                   ) -> gpd.GeoDataFrame:
    """A copy of ``df`` with the geocode columns and Point geometry in EPSG:4326.

    Every match is validated before its Point is built (finite, in range, not
    (0, 0), and inside ``country`` when given: one ISO alpha-2 code, or one code or
    country name per row, unknown values skipping the check). Rows that did not
    match, or whose coordinates were flagged, get an empty geometry, NaN ``lon``
    and ``lat``, and say why in ``geocode_reason``. With ``min_precision``, a match
    coarser than that (or of unknown precision) is ``too_coarse``: a dead letter
    whose point is kept in ``geocode_coarse_lon``/``geocode_coarse_lat`` only.
    ``full_results`` adds the :data:`~geotoolkit.schema.FULL_RESULT_COLUMNS`. The
    input's active geometry (if any) is replaced; ``df`` itself is never modified.
    """
    n = len(df)
    if len(outcomes) != n:
        raise ValueError(f"{len(outcomes)} outcomes for {n} rows")
    rows, pairs = _distinct(outcomes, row_countries(country, n))
    columns = _Columns(len(pairs), min_precision=min_precision, full_results=full_results)
    for j, (outcome, code) in enumerate(pairs):
        columns.fill(j, outcome, code)
    added = columns.frame(rows, df.index)
    merged = pd.concat([input_columns(df).reset_index(drop=True), added.reset_index(drop=True)],
                       axis=1)
    merged.index = df.index
    return _with_points(merged)


def _with_points(frame: pd.DataFrame) -> gpd.GeoDataFrame:
    """``frame`` with Points built from its ``lon``/``lat`` where the row matched."""
    points = gpd.points_from_xy(frame["lon"], frame["lat"], crs="EPSG:4326")
    points[frame["geocode_status"].to_numpy() != "matched"] = None
    return gpd.GeoDataFrame(frame, geometry=points, crs="EPSG:4326")


def retry_rows(result: pd.DataFrame, fixed: pd.DataFrame | None) -> tuple[pd.DataFrame, list[bool]]:
    """The rows of ``result`` to send again (its input columns, corrected from ``fixed``),
    and which of them the analyst changed.

    ``fixed`` holds rows of ``result`` by index label (for example its dead letters,
    edited); its input columns replace the result's, its geocode columns are ignored.
    ``None``: every dead letter as it stands.
    """
    from geotoolkit.errors import ConfigurationError
    from geotoolkit.export import dead_letters
    from geotoolkit.export.dtypes import is_reverse_result

    letters = dead_letters(result)  # refuses a frame that is not a result
    if is_reverse_result(result):  # its cells are coordinates: sent as addresses, they "match"
        raise ConfigurationError(
            "this is a reverse-geocoding result, and a retry sends addresses: reverse geocode it "
            "again instead (geotoolkit reverse FILE -o OUT, or result.geocode.reverse(...)); "
            "settled points come from the cache")
    if not result.index.is_unique:
        raise ConfigurationError("the result's index has duplicate labels, so corrected rows "
                                 "cannot be matched back: result.reset_index() first")
    fixed = letters if fixed is None else fixed
    if not isinstance(fixed, pd.DataFrame):
        hint = " (one column of them: series.to_frame())" if isinstance(fixed, pd.Series) else ""
        raise ConfigurationError(f"fixed must be a DataFrame of rows of the result{hint}, got "
                                 f"{type(fixed).__name__}")
    if not fixed.index.is_unique:
        raise ConfigurationError("fixed has duplicate index labels: give each row once")
    missing = fixed.index.difference(result.index)
    if len(missing):
        shown = ", ".join(map(repr, list(missing)[:5]))
        raise ConfigurationError(
            f"fixed has rows that are not in the result: {shown}; keep the result's index "
            "(read a spreadsheet back with index_col=0)")
    own = input_columns(result)
    unknown = [c for c in input_columns(fixed).columns if c not in own.columns]
    if unknown:
        raise ConfigurationError(f"fixed has columns the result does not: {', '.join(map(repr, unknown))}")
    rows = own.loc[fixed.index].copy()
    changed = pd.Series(False, index=rows.index)
    for name in input_columns(fixed).columns:
        rows[name], edited = _corrected(rows[name], fixed[name])
        changed |= edited
    return rows, changed.tolist()


def _same(before: pd.Series, after: pd.Series) -> pd.Series:
    """Cell by cell: equal, or both missing."""
    before, after = before.astype(object), after.astype(object)
    return ((before == after) | (before.isna() & after.isna())).astype(bool)


def _corrected(before: pd.Series, after: pd.Series) -> tuple[pd.Series, pd.Series]:
    """The column ``before`` with the analyst's edits from ``after``, and which cells were
    edited. A cell that only changed type on its way through a spreadsheet (a postcode
    ``"0155"`` read back as 155, a date as text, a whole number with a gap as 2.0, a
    category as text) is no edit: it keeps its value, and the column its dtype."""
    same = _same(before, after)
    with contextlib.suppress(TypeError, ValueError, OverflowError):
        same |= _same(before.astype(after.dtype), after)  # the original, read as the sheet was
    if same.all():
        return before, ~same
    merged = before.astype(object).where(same, after.astype(object))
    with contextlib.suppress(TypeError, ValueError, OverflowError):
        typed = merged.astype(before.dtype)  # the edits in the column's own type, if they fit
        if _same(typed, merged).all():
            merged = typed
    return merged, ~same


def merge_retried(result: pd.DataFrame, retried: pd.DataFrame, *, sent: Sequence[int],
                  fixed: Sequence[bool]) -> gpd.GeoDataFrame:
    """``result`` with the rows of ``retried`` (same index labels) replaced by their new answer.

    No row is lost, added or moved. ``sent`` is the requests each retried row took
    this time (0 for an answer from the cache): ``geocode_attempts`` adds them up.
    ``fixed`` says which retried rows the analyst changed: ``geocode_fixed`` keeps
    every row ever changed. Columns only one side has are kept (missing where the
    other side had none).
    """
    base = pd.DataFrame(result.drop(columns=[result.geometry.name])
                        if isinstance(result, gpd.GeoDataFrame) else result)
    new = pd.DataFrame(retried.drop(columns=[retried.geometry.name])
                       if isinstance(retried, gpd.GeoDataFrame) else retried)
    previous = base.loc[new.index, "geocode_attempts"].to_numpy()
    new["geocode_attempts"] = previous + np.asarray(sent, dtype="int64")
    was_fixed = base["geocode_fixed"] if "geocode_fixed" in base.columns else False
    new["geocode_fixed"] = np.asarray(fixed, dtype=bool) | pd.Series(
        was_fixed, index=base.index).loc[new.index].to_numpy(dtype=bool)
    columns = list(dict.fromkeys([*base.columns, *new.columns]))
    merged = base.reindex(columns=columns).astype(object)
    gone = [c for c in columns if c not in new.columns]
    merged.loc[new.index, gone] = None  # e.g. coarse columns a retry without min_precision lacks
    merged.loc[new.index, list(new.columns)] = new.astype(object).to_numpy()
    if "geocode_fixed" not in base.columns:
        merged["geocode_fixed"] = merged["geocode_fixed"].fillna(False)
    ordered = [c for c in columns if c not in (*GEOCODE_COLUMNS, *COARSE_COLUMNS,
                                               *FULL_RESULT_COLUMNS, *REVIEW_COLUMNS)]
    ordered += [c for c in (*GEOCODE_COLUMNS, *COARSE_COLUMNS, *FULL_RESULT_COLUMNS,
                            *REVIEW_COLUMNS) if c in columns]
    typed = _restore(merged[ordered], base, new)
    return _with_points(typed)


def _restore(merged: pd.DataFrame, base: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """The input columns back in their own dtypes where both sides agree; result dtypes."""
    out = result_dtypes(merged)
    for name in out.columns:
        if is_result_dtype_column(name):
            continue
        dtypes = {side[name].dtype for side in (base, new) if name in side.columns}
        if len(dtypes) == 1:
            # mixed values (an int column corrected with text) stay as they are
            with contextlib.suppress(TypeError, ValueError):
                out[name] = out[name].astype(dtypes.pop())
    return out


def retry(result: pd.DataFrame, fixed: pd.DataFrame | None, columns: Columns,
          options: GeocodeOptions, progress: ProgressSink | None = None) -> gpd.GeoDataFrame:
    """Send the rows of ``fixed`` (default: the dead letters) again; the whole result back.

    See :func:`retry_rows` (which rows, corrected how) and :func:`merge_retried` (how
    they are merged).
    """
    from geotoolkit.orchestration.job import FrameJob

    rows, changed = retry_rows(result, fixed)
    job = FrameJob(rows, columns, options)
    retried = job.run_sync(progress)
    return merge_retried(result, retried, sent=job.sent, fixed=changed)
