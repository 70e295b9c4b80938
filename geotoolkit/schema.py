"""The columns of a result frame: one definition for the frame builder, export and front ends.

Stdlib only. Coordinates are ``lon, lat``, in that order.
"""

from __future__ import annotations

__all__ = ["DEAD_LETTER_COLUMNS", "GEOCODE_COLUMNS", "STATUSES"]

#: Every row ends with one of these statuses.
STATUSES = ("matched", "no_match", "failed")

#: Columns added to the input frame.
GEOCODE_COLUMNS = ("lon", "lat", "geocode_status", "geocode_label", "geocode_provider",
                   "geocode_reason", "geocode_attempts")

#: The geocode columns kept in the dead letters (the input columns come first).
DEAD_LETTER_COLUMNS = ("geocode_status", "geocode_reason", "geocode_attempts",
                       "geocode_provider", "geocode_label")
