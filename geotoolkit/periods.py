"""Cap periods: a day or a month of one time zone's calendar (stdlib ``zoneinfo`` only).

A provider's quota resets at *its* midnight: Google Maps Platform's at midnight
Pacific Time, many national services' at local midnight, others' at 00:00 UTC. A
period is the local calendar's day or month; its end is the next local midnight,
found with ``zoneinfo`` (a day across a DST change lasts 23 or 25 hours).

>>> la = "America/Los_Angeles"
>>> period_of(1_772_956_800.0, "day", la)  # 2026-03-08 00:00 PST, the day DST begins
('2026-03-08@America/Los_Angeles', 1773039600.0)
>>> (1_773_039_600.0 - 1_772_956_800.0) / 3600  # the next day begins 23 hours later
23.0
>>> reset_text(1_773_039_600.0, la)
'2026-03-09 00:00 America/Los_Angeles (07:00 UTC)'
"""

from __future__ import annotations

import difflib
import functools
import zoneinfo
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Literal

from geotoolkit.errors import ConfigurationError

__all__ = ["Period", "check_zone", "period_of", "reset_text"]

Period = Literal["day", "month"]

#: Names of UTC in the IANA database: a cap in any of them counts in ``"UTC"``'s periods.
_UTC_NAMES = frozenset({"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Zulu",
                        "Etc/Zulu", "GMT", "Etc/GMT", "Etc/GMT0", "Etc/GMT+0", "Etc/GMT-0", "GMT0",
                        "GMT+0", "GMT-0", "Etc/Greenwich", "Greenwich"})


def check_zone(tz: object) -> str:
    """An IANA time zone name, checked (``ConfigurationError`` naming a bad one, with the
    nearest known name), spelt as the database spells it (a zone's name is part of its cap
    counters' names: ``america/los_angeles``, which a case-insensitive file system finds
    too, must count with ``America/Los_Angeles``); every name of UTC is ``"UTC"``.

    >>> check_zone("America/Los_Angeles"), check_zone("Etc/UTC"), check_zone("europe/zurich")
    ('America/Los_Angeles', 'UTC', 'Europe/Zurich')
    >>> check_zone("America/Los_Angles")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    geotoolkit.errors.ConfigurationError: unknown time zone 'America/Los_Angles' (did you mean ...
    """
    if not isinstance(tz, str):
        raise ConfigurationError(f"a time zone must be an IANA name (a string), got {tz!r}")
    names = _names()
    name = names.get(tz.lower(), tz)
    if name in _UTC_NAMES:
        return "UTC"
    try:
        zoneinfo.ZoneInfo(name)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError) as exc:  # a path, an unknown name
        near = difflib.get_close_matches(tz.lower(), list(names), n=1)
        hint = f"did you mean {names[near[0]]!r}?" if near else \
            "give an IANA name such as 'America/Los_Angeles' or 'UTC'"
        raise ConfigurationError(f"unknown time zone {tz!r} ({hint})") from exc
    return name


@functools.cache
def _names() -> dict[str, str]:
    """The zone names the system knows, by their lower case (read once)."""
    return {name.lower(): name for name in zoneinfo.available_timezones()}


def _zone(tz: str) -> tzinfo:
    return UTC if tz == "UTC" else zoneinfo.ZoneInfo(tz)


def period_of(now: float, period: Period, tz: str = "UTC") -> tuple[str, float]:
    """The ``period`` ("day" or "month") of ``tz``'s calendar containing ``now``:
    ``(label, resets_at)``. The label names the period's counter: the local date
    (``2024-02-29``, ``2024-03``), and in a zone other than UTC the zone after an ``@``
    (fleets capping one key in different zones count apart). ``resets_at``: the next
    local midnight (epoch seconds).

    >>> period_of(1_709_251_199.5, "day")      # 2024-02-29T23:59:59.5Z
    ('2024-02-29', 1709251200.0)
    >>> period_of(1_709_251_200.0, "month")
    ('2024-03', 1711929600.0)
    >>> period_of(1_709_251_200.0, "month", "Europe/Zurich")  # 01:00 in Zurich, March 1st
    ('2024-03@Europe/Zurich', 1711922400.0)
    """
    zone = _zone(tz)
    local = datetime.fromtimestamp(now, zone)
    if period == "month":
        label = local.strftime("%Y-%m")
        year, month = local.year + local.month // 12, local.month % 12 + 1
        following = datetime(year, month, 1, tzinfo=zone)
    else:
        label = local.strftime("%Y-%m-%d")
        day = local.date() + timedelta(days=1)
        following = datetime(day.year, day.month, day.day, tzinfo=zone)
    # A midnight that a DST change skips is the change's instant (zoneinfo reads it with
    # the offset before it); one that comes twice is its first.
    resets_at = following.timestamp()
    return (label if tz == "UTC" else f"{label}@{tz}"), resets_at


def reset_text(resets_at: float, tz: str = "UTC") -> str:
    """When a period ends, in its zone, with the UTC time when that is another zone.

    >>> reset_text(1_709_251_200.0)
    '2024-03-01 00:00 UTC'
    >>> reset_text(1_709_251_200.0 + 8 * 3600, "America/Los_Angeles")
    '2024-03-01 00:00 America/Los_Angeles (08:00 UTC)'
    """
    utc = datetime.fromtimestamp(resets_at, UTC)
    if tz == "UTC":
        return utc.strftime("%Y-%m-%d %H:%M UTC")
    local = datetime.fromtimestamp(resets_at, _zone(tz))
    return f"{local:%Y-%m-%d %H:%M} {tz} ({utc:%H:%M} UTC)"
