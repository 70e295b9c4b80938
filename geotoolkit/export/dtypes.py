"""The dtype of every result column: one table for the frame builder, the merge and read-back.

Also the columns of a *reverse* result (``gdf.geocode.reverse()``): the geocode columns
without ``lon``/``lat`` (its geometry is the input point), then the place found
(:data:`REVERSE_POINT_COLUMNS`).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from geotoolkit.results import PRECISIONS
from geotoolkit.schema import COARSE_COLUMNS, GEOCODE_COLUMNS

__all__ = ["PRECISION_DTYPE", "REVERSE_COLUMNS", "REVERSE_POINT_COLUMNS", "is_result_dtype_column",
           "is_reverse_result", "result_dtypes"]

#: What a reverse result adds about the place found: its own point (``geocode_lon``,
#: ``geocode_lat``, EPSG:4326) and its geodesic distance in metres from the input point.
REVERSE_POINT_COLUMNS = ("geocode_lon", "geocode_lat", "geocode_distance_m")

#: The columns a reverse result adds, in order (with ``full_results=True`` the
#: :data:`~geotoolkit.schema.FULL_RESULT_COLUMNS` follow); no ``lon``/``lat``: the
#: geometry is the input point, the place found is in ``geocode_lon``/``geocode_lat``.
REVERSE_COLUMNS = (*(c for c in GEOCODE_COLUMNS if c not in ("lon", "lat")), *REVERSE_POINT_COLUMNS)

#: ``geocode_precision``: ordered finest first, so ``result.geocode_precision <= "street"``
#: selects street-level matches and finer.
PRECISION_DTYPE = pd.CategoricalDtype(list(PRECISIONS), ordered=True)

_TEXT = ("geocode_status", "geocode_label", "geocode_provider", "geocode_reason",
         "geocode_place_id", "geocode_osm_type", "geocode_housenumber", "geocode_street",
         "geocode_postcode", "geocode_locality", "geocode_region", "geocode_country_code")
_FLOAT = ("lon", "lat", "geocode_score", *COARSE_COLUMNS, "geocode_bbox_min_lon",
          "geocode_bbox_min_lat", "geocode_bbox_max_lon", "geocode_bbox_max_lat",
          *REVERSE_POINT_COLUMNS)
_DTYPES: dict[str, Any] = {**dict.fromkeys(_TEXT, "str"), **dict.fromkeys(_FLOAT, "float64"),
                           "geocode_precision": PRECISION_DTYPE, "geocode_attempts": "int64",
                           "geocode_osm_id": "Int64", "geocode_fixed": "bool"}


def is_result_dtype_column(name: object) -> bool:
    """Whether ``name`` is a result column with a fixed dtype."""
    return name in _DTYPES


def is_reverse_result(frame: pd.DataFrame) -> bool:
    """Whether ``frame`` is a reverse-geocoding result (it has ``geocode_distance_m``).

    >>> is_reverse_result(pd.DataFrame(columns=["geocode_status", "geocode_distance_m"]))
    True
    """
    return "geocode_distance_m" in frame.columns and "geocode_status" in frame.columns


def result_dtypes(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its result columns in their dtypes (e.g. after reading a file back).

    Text columns are ``str``; coordinates (a reverse result's ``geocode_lon``,
    ``geocode_lat`` and ``geocode_distance_m`` too), scores and the bounding box ``float64``;
    ``geocode_precision`` the ordered :data:`PRECISION_DTYPE`, ``geocode_osm_id``
    a nullable ``Int64``, ``geocode_attempts`` ``int64`` and ``geocode_fixed`` ``bool``.

    >>> back = result_dtypes(pd.DataFrame({"geocode_precision": ["street", None]}))
    >>> back["geocode_precision"].dtype == PRECISION_DTYPE, back["geocode_precision"].max()
    (True, 'street')
    """
    out = frame.copy()
    for name in [c for c in out.columns if c in _DTYPES]:
        values = out[name]
        if name in _TEXT:  # missing stays missing (NaN), never the text "None"
            values = values.astype(object).where(values.notna(), None)
        elif name == "geocode_precision":
            values = values.astype(object).where(values.isin(PRECISIONS), None)
        elif name in ("geocode_attempts", "geocode_fixed"):
            values = values.astype(object).where(values.notna(), 0)
        out[name] = values.astype(_DTYPES[name])
    return out
