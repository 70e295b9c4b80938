"""The columns of a result frame and the status rules: one definition for the frame builder,
the orchestration, export and front ends.

Stdlib only. Coordinates are ``lon, lat``, in that order.

A match is *too coarse* when its precision is coarser than the run's ``min_precision``
(a precision of ``unknown`` counts as coarser than any minimum):

>>> too_coarse("locality", "street"), too_coarse("address", "street"), too_coarse("unknown", "country")
(True, False, True)
>>> too_coarse("locality", None)
False
"""

from __future__ import annotations

from collections.abc import Iterable

from geotoolkit.results import PRECISIONS

__all__ = [
    "COARSE_COLUMNS",
    "DEAD_LETTER_COLUMNS",
    "FULL_RESULT_COLUMNS",
    "GEOCODE_COLUMNS",
    "REVIEW_COLUMNS",
    "STATUSES",
    "final_status",
    "passes_on",
    "result_columns",
    "too_coarse",
]

#: Every row ends with one of these statuses; all but ``matched`` are dead letters.
STATUSES = ("matched", "too_coarse", "no_match", "failed")

#: Columns added to every result: ``geocode_precision`` is an ordered categorical over
#: :data:`~geotoolkit.results.PRECISIONS` (finest first), ``geocode_score`` a float in
#: ``[0, 1]`` (NaN where the provider gives none).
GEOCODE_COLUMNS = ("lon", "lat", "geocode_status", "geocode_precision", "geocode_score",
                   "geocode_label", "geocode_provider", "geocode_reason", "geocode_attempts")

#: With ``min_precision``: the point a too-coarse match had (NaN in every other row), kept
#: apart from ``lon``/``lat`` so that a dead letter never has coordinates or a geometry.
COARSE_COLUMNS = ("geocode_coarse_lon", "geocode_coarse_lat")

#: With ``full_results=True``: the provider's structured answer (``geocode_osm_id`` is a
#: nullable Int64, the bounding box four floats, the rest text).
FULL_RESULT_COLUMNS = ("geocode_place_id", "geocode_osm_type", "geocode_osm_id",
                       "geocode_housenumber", "geocode_street", "geocode_postcode",
                       "geocode_locality", "geocode_region", "geocode_country_code",
                       "geocode_bbox_min_lon", "geocode_bbox_min_lat", "geocode_bbox_max_lon",
                       "geocode_bbox_max_lat")

#: Added by ``retry()``: whether the analyst changed the row's address before it was re-sent.
REVIEW_COLUMNS = ("geocode_fixed",)

#: The geocode columns kept in the dead letters (the input columns come first).
DEAD_LETTER_COLUMNS = ("geocode_status", "geocode_reason", "geocode_attempts",
                       "geocode_provider", "geocode_label", "geocode_precision", "geocode_score",
                       *COARSE_COLUMNS, *REVIEW_COLUMNS)

_RESULT = frozenset((*GEOCODE_COLUMNS, *COARSE_COLUMNS, *FULL_RESULT_COLUMNS, *REVIEW_COLUMNS))


def result_columns(columns: Iterable[object]) -> list[object]:
    """The columns in ``columns`` that geotoolkit adds to a result (not the input's own)."""
    return [c for c in columns if c in _RESULT]


def too_coarse(precision: str | None, minimum: str | None) -> bool:
    """Whether a match of ``precision`` is coarser than ``minimum`` (``None``: keep all)."""
    if minimum is None:
        return False
    rank = PRECISIONS.index(precision) if precision in PRECISIONS else len(PRECISIONS)
    return rank > PRECISIONS.index(minimum) or precision == "unknown"


def final_status(status: str, precision: str | None, minimum: str | None) -> str:
    """The status a row ends with: a match coarser than ``minimum`` is ``too_coarse``."""
    return "too_coarse" if status == "matched" and too_coarse(precision, minimum) else status


def passes_on(status: str, attempts: int, fallback_on: Iterable[str]) -> bool:
    """Whether a row with this final ``status`` goes on to the next provider of a chain.

    A failure that was never sent (unusable input, a query the provider refuses to
    build: ``attempts == 0``) is not passed on: it would fail anywhere.
    """
    if status not in fallback_on:
        return False
    return status != "failed" or attempts > 0
