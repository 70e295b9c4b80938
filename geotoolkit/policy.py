"""Retry-After parsing, backoff and pacing policy: pure functions, stdlib only."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from geotoolkit.errors import ConfigurationError

__all__ = ["Backoff", "RatePolicy", "parse_rate_limit_reset", "parse_retry_after"]

_MAX_SECONDS = 1e9  # about 31.7 years: every answer is clamped to [0, _MAX_SECONDS]
_DELAY = re.compile(r"[0-9]+", re.ASCII)
_FRACTION = re.compile(r"(?P<whole>[0-9]+)\.[0-9]+", re.ASCII)
_MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# Minutes east of UTC. RFC 5322 section 4.3 defines the obsolete North American zones;
# "-0000" (UTC, local zone unknown) is a numeric offset of zero.
_ZONES = {"gmt": 0, "utc": 0, "ut": 0, "z": 0, "edt": -240, "est": -300, "cdt": -300,
          "cst": -360, "mdt": -360, "mst": -420, "pdt": -420, "pst": -480}

_WEEKDAY = "(?:(?:{}),? )?".format("|".join(_DAYS + tuple(d[:3] for d in _DAYS)))
_MONTH = "(?P<mo>{})".format("|".join(_MONTHS))
_TIME = r"(?P<h>[0-9]{1,2}):(?P<mi>[0-9]{2})(?::(?P<s>[0-9]{2}))?"
_ZONE = r"(?: (?P<z>{}|[+-][0-9]{{2}}:?[0-9]{{2}}))?".format("|".join(sorted(_ZONES, key=len, reverse=True)))
# Matched against the value with each run of spaces and tabs made one space, ASCII only,
# any case. IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") and RFC 850
# ("Sunday, 06-Nov-94 08:49:37 GMT") differ only in separators and year digits:
_DAY_FIRST = re.compile(
    rf"{_WEEKDAY}(?P<d>[0-9]{{1,2}})(?P<sep>[ -]){_MONTH}(?P=sep)(?P<y>[0-9]{{4}}|[0-9]{{2}}) {_TIME}{_ZONE}",
    re.ASCII | re.IGNORECASE)
# asctime ("Sun Nov  6 08:49:37 1994"), whose space-padded day the collapsing absorbs.
_ASCTIME = re.compile(
    rf"{_WEEKDAY}{_MONTH} (?P<d>[0-9]{{1,2}}) {_TIME} (?P<y>[0-9]{{4}}){_ZONE}",
    re.ASCII | re.IGNORECASE)
_BLANKS = re.compile(r"[ \t]+")


def _offset(zone: str | None) -> timedelta | None:
    """The zone's offset east of UTC; no zone is UTC; ``None`` for an impossible offset."""
    if zone is None:
        return timedelta(0)
    zone = zone.lower()
    if zone in _ZONES:
        return timedelta(minutes=_ZONES[zone])
    hours, minutes = int(zone[1:3]), int(zone[-2:])
    if hours > 23 or minutes > 59:
        return None
    sign = -1 if zone[0] == "-" else 1
    return sign * timedelta(hours=hours, minutes=minutes)


def _fields(found: re.Match[str]) -> tuple[int, int, int, int, int]:
    """Month, day, hour, minute and second of a matched date (a missing second is 0)."""
    return (_MONTHS[found["mo"].lower()], int(found["d"]), int(found["h"]), int(found["mi"]),
            int(found["s"] or 0))


def _instant(found: re.Match[str], year: int, offset: timedelta) -> datetime | None:
    """The UTC instant of the matched fields in ``year``, or ``None`` if it does not exist."""
    month, day, hour, minute, second = _fields(found)
    if second > 60:
        return None
    leap = second == 60  # 23:59:60 reads as the next second (00:00:00): never early
    try:
        local = datetime(year, month, day, hour, minute, second - leap, tzinfo=UTC)
        return local - offset + timedelta(seconds=leap)
    except (ValueError, OverflowError):  # 30 Feb, 25:00, year 0, past datetime's range
        return None


def _two_digit_year(found: re.Match[str], offset: timedelta, now: datetime) -> datetime | None:
    """RFC 9110 section 5.6.7: a two-digit year is the one within 50 years of ``now``.

    One that appears more than 50 years in the future is the most recent past year
    with those digits; symmetrically, one more than 50 years past is the next century's.
    Both are compared on the wall clock of the date's own zone.
    """
    try:
        local = now + offset
    except OverflowError:
        return None
    current = (local.year, local.month, local.day, local.hour, local.minute, local.second, local.microsecond)
    fields = (*_fields(found), 0)
    year = local.year - local.year % 100 + int(found["y"])
    if (year - 50, *fields) > current:
        year -= 100
    elif (year + 50, *fields) < current:
        year += 100
    return _instant(found, year, offset)


def _parse_http_date(text: str, now: datetime) -> datetime | None:
    """The UTC instant an HTTP-date names, read leniently; ``None`` if it names none."""
    text = _BLANKS.sub(" ", text)
    found = _DAY_FIRST.fullmatch(text) or _ASCTIME.fullmatch(text)
    if found is None:
        return None
    offset = _offset(found["z"])
    if offset is None:
        return None
    if len(found["y"]) == 2:
        return _two_digit_year(found, offset, now)
    return _instant(found, int(found["y"]), offset)


def _reference(now: object) -> datetime | None:
    """``now`` in UTC (naive is UTC; not a datetime: the current time); ``None`` if unrepresentable."""
    if not isinstance(now, datetime):
        return datetime.now(UTC)
    if now.tzinfo is None:
        return now.replace(tzinfo=UTC)
    try:
        return now.astimezone(UTC)
    except (OverflowError, ValueError):  # datetime.min/max in a zone east/west of UTC
        return None


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Return the seconds a ``Retry-After`` header asks to wait, or ``None``.

    RFC 9110 section 10.2.3: either delay-seconds or an HTTP-date. Following its
    advice to be robust, dates are read the way servers actually write them.
    Anything else gives ``None``. This function never raises, whatever ``value`` is,
    and returns either ``None`` or a finite float in ``[0, 1e9]``: a date in the
    past gives ``0.0``, and delay-seconds or a date further ahead than ``1e9``
    seconds (about 31.7 years) give ``1e9``. Callers clamp further.

    Accepted:

    - delay-seconds: ASCII digits only, any length (no sign or exponent), and the
      decimal fraction some servers send (``1.5``: waiting 1 s, or a bare backoff, is
      refused again);
    - the three forms of RFC 9110 section 5.6.7 (IMF-fixdate, RFC 850, asctime), in
      any case, with runs of spaces and tabs, with or without a day of the week (an
      ill-matching one is ignored), with one- or two-digit days and hours, and with
      or without seconds;
    - zones: none (UTC), ``GMT``, ``UTC``, ``UT``, ``Z``, numeric offsets such as
      ``+0200``, ``-0400``, ``-0000`` or ``+02:00``, and the North American zones that
      RFC 5322 section 4.3 defines (``EST`` is ``-0500``, ``PDT`` is ``-0700``, ...).
      Other names (``CET``, ``BST``, military letters other than ``Z``) give ``None``;
    - a two-digit year (RFC 850, or RFC 822's ``06 Nov 94``) is the year with those
      digits within 50 years of ``now`` (RFC 9110: a year more than 50 years in the
      future is the most recent past year with those digits);
    - a leap second (``23:59:60``) reads as the next second, so the wait is never short.

    Impossible dates (30 Feb, 25:00, ``+2400``) and trailing text give ``None``.

    The header sent twice (a proxy adding its own), which HTTP clients join with a
    comma (``30, 30``), gives the longest of its waits when every item is one (up to
    20 items); a list with any other item gives ``None``.

    Parameters
    ----------
    value
        The raw header value, or ``None`` when the header is absent.
    now
        The reference time for HTTP-dates, ideally the response's ``Date``
        header; defaults to the current UTC time, as does anything that is not a
        datetime. A naive datetime is UTC. One that UTC cannot express (near
        ``datetime.max``) gives ``None`` for HTTP-dates.

    Examples
    --------
    >>> parse_retry_after("120")
    120.0
    >>> ref = datetime(1994, 11, 6, 8, 49, 0, tzinfo=UTC)
    >>> parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=ref)
    37.0
    >>> parse_retry_after("sun,  6 nov 1994 10:49:37 +0200", now=ref)
    37.0
    >>> parse_retry_after("9" * 5000)
    1000000000.0
    >>> parse_retry_after("1.5"), parse_retry_after("-1")
    (1.5, None)
    >>> parse_retry_after("30, 30")
    30.0
    """
    if not isinstance(value, str):
        return None
    single = _one_retry_after(value, now)
    if single is not None or "," not in value:
        return single
    items = _list_items(value)  # the header sent twice, joined: "30, 30"
    waits = [_one_retry_after(item, now) for item in items[:_MAX_ITEMS + 1]]
    if len(waits) > _MAX_ITEMS or None in waits:
        return None
    return max(w for w in waits if w is not None)


#: A ``Retry-After`` list longer than this is no header sent twice: not a wait.
_MAX_ITEMS = 20
_DAY_NAMES = frozenset(_DAYS + tuple(d[:3] for d in _DAYS))


def _list_items(value: str) -> list[str]:
    """A comma-joined field value's items; the comma after a day name (``Sun, 06 Nov``)
    is part of its date, not a separator."""
    parts = value.split(",")
    items: list[str] = []
    for part in parts:
        if items and items[-1].strip(" \t").lower() in _DAY_NAMES:
            items[-1] += "," + part
        else:
            items.append(part)
    return items


def _one_retry_after(value: str, now: datetime | None) -> float | None:
    """One ``Retry-After`` value (no list) as ``parse_retry_after`` reads it."""
    text = value.strip(" \t\r\n")
    if _DELAY.fullmatch(text):
        digits = text.lstrip("0")
        return float(int(digits or "0")) if len(digits) < 10 else _MAX_SECONDS
    fraction = _FRACTION.fullmatch(text)
    if fraction:
        return float(text) if len(fraction["whole"].lstrip("0")) < 10 else _MAX_SECONDS
    reference = _reference(now)
    if reference is None:
        return None
    when = _parse_http_date(text, reference)
    if when is None:
        return None
    return min(max(0.0, (when - reference).total_seconds()), _MAX_SECONDS)


_NUMBER = re.compile(r"[0-9]{1,20}(?:\.[0-9]{1,9})?", re.ASCII)
#: A reset value at least this large is a Unix time (2001-09-09 on), not delta-seconds.
_UNIX_TIME_FROM = 1e9
#: A Unix time at least this large is in milliseconds (seconds would be past the year 33000).
_UNIX_MILLISECONDS_FROM = 1e12
#: One item of an IETF ``RateLimit`` field: its name, then ``;key=value`` parameters.
_ITEM_PARAM = re.compile(r";\s*([a-z][a-z0-9_.*-]*)\s*=\s*([^;,\s]+)", re.ASCII | re.IGNORECASE)


def _reset_seconds(text: str | None) -> float | None:
    """Non-negative seconds, or ``None``: ASCII digits with an optional fraction."""
    if not isinstance(text, str) or not _NUMBER.fullmatch(text.strip(" \t")):
        return None
    return float(text.strip(" \t"))


def _ietf_reset(value: str) -> float | None:
    """``RateLimit: "default";r=0;t=30, "daily";r=5;t=3600``: the longest ``t`` among the
    exhausted quotas (``r=0``); when none is, among the items that do not say ``r``."""
    exhausted: list[float] = []
    unsaid: list[float] = []
    for item in value.split(","):
        params = {k.lower(): v.strip('"') for k, v in _ITEM_PARAM.findall(item)}
        reset = _reset_seconds(params.get("t"))
        if reset is None:
            continue
        remaining = _reset_seconds(params.get("r"))
        if remaining is None:
            unsaid.append(reset)
        elif remaining == 0:
            exhausted.append(reset)
    found = exhausted or unsaid
    return max(found) if found else None


#: A member of the draft's 7th-revision dictionary: ``limit=100, remaining=0, reset=30``.
_MEMBER = re.compile(r"([a-z][a-z0-9_.*-]*)[ \t]*=[ \t]*([^;,\s]+)", re.ASCII | re.IGNORECASE)


def _dictionary_reset(value: str) -> float | None:
    """``RateLimit: limit=100, remaining=0, reset=30``: ``reset``, unless ``remaining`` says
    requests remain."""
    members: dict[str, str] = {}
    for member in value.split(","):
        found = _MEMBER.fullmatch(member.strip(" \t"))
        if found:
            members[found[1].lower()] = found[2].strip('"')
    reset = _reset_seconds(members.get("reset"))
    remaining = _reset_seconds(members.get("remaining"))
    return reset if remaining is None or remaining == 0 else None


def parse_rate_limit_reset(headers: Mapping[str, str], *, now: datetime | None = None
                           ) -> float | None:
    """The seconds until a provider's quota resets, from the rate-limit headers it sends
    besides (or instead of) ``Retry-After``; ``None`` if none says.

    Read in this order, the first that parses winning:

    - ``RateLimit`` (the IETF draft's structured field, ``"name";r=0;t=30``): the longest
      ``t`` among the quotas it says are exhausted (``r=0``); or its 7th revision's
      dictionary (``limit=100, remaining=0, reset=30``): ``reset``, unless ``remaining``
      says requests remain;
    - ``RateLimit-Reset`` (the draft's earlier form): delta-seconds;
    - ``X-RateLimit-Reset`` / ``X-Rate-Limit-Reset`` (GitHub, OpenCage, Mapbox and many
      others): delta-seconds, or a Unix time when the value is at least ``1e9``, in
      milliseconds when at least ``1e12`` (as some gateways send it), measured from
      ``now`` (ideally the response's ``Date``; else the current time).

    A ``*-Reset`` whose own ``*-Remaining`` (``X-RateLimit-Remaining`` beside
    ``X-RateLimit-Reset``...) says requests remain is skipped: it is the reset of a quota
    that is not spent (OpenCage's free trial sends its day's quota so, resetting at
    midnight, on a 429 for requests sent too quickly), not what the refusal awaits.

    Never raises; the answer is in ``[0, 1e9]`` (a reset in the past gives ``0.0``), and
    callers clamp further, as for ``Retry-After``. ``headers`` is any mapping; names are
    matched in any case.

    >>> parse_rate_limit_reset({"RateLimit": '"default";r=0;t=30'})
    30.0
    >>> parse_rate_limit_reset({"ratelimit": '"min";r=3;t=5, "day";r=0;t=3600'})
    3600.0
    >>> ref = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
    >>> parse_rate_limit_reset({"X-RateLimit-Reset": str(int(ref.timestamp()) + 42)}, now=ref)
    42.0
    >>> parse_rate_limit_reset({"X-RateLimit-Reset": str(int(ref.timestamp()) * 1000 + 42_500)}, now=ref)
    42.5
    >>> parse_rate_limit_reset({"X-RateLimit-Reset": "7"}), parse_rate_limit_reset({})
    (7.0, None)
    >>> parse_rate_limit_reset({"X-RateLimit-Reset": "soon"}) is None
    True
    >>> parse_rate_limit_reset({"X-RateLimit-Remaining": "2412", "X-RateLimit-Reset": "43200"}) is None
    True
    """
    try:
        lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    except (AttributeError, TypeError):
        return None
    if "ratelimit" in lowered:
        found = _ietf_reset(lowered["ratelimit"])
        found = _dictionary_reset(lowered["ratelimit"]) if found is None else found
        if found is not None:
            return min(found, _MAX_SECONDS)
    for family in ("ratelimit", "x-ratelimit", "x-rate-limit"):
        seconds = _reset_seconds(lowered.get(f"{family}-reset"))
        remaining = _reset_seconds(lowered.get(f"{family}-remaining"))
        if seconds is None or (remaining is not None and remaining > 0):
            continue  # no reset, or that of a quota not spent: not what this refusal awaits
        if seconds >= _UNIX_TIME_FROM:
            reference = _reference(now)
            if reference is None:
                return None
            epoch = seconds / 1000 if seconds >= _UNIX_MILLISECONDS_FROM else seconds
            seconds = epoch - reference.timestamp()
        return min(max(0.0, seconds), _MAX_SECONDS)
    return None


@dataclass(frozen=True)
class Backoff:
    """Jittered, clamped exponential backoff; overflow-safe for any attempt.

    The ceiling for attempt ``n`` (1-based) is
    ``min(max_seconds, initial_seconds * multiplier ** (n - 1))`` and the delay is
    drawn from ``[ceiling * (1 - jitter), ceiling]``: ``jitter=1`` is full jitter.

    After a 429/503 the wait is ``max(delay(attempt), min(retry_after, retry_after_cap_seconds))``,
    so a server that keeps answering ``Retry-After: 1`` still sees a growing backoff
    and a stray ``Retry-After: 86400`` cannot park a worker for a day.

    Examples
    --------
    >>> b = Backoff(initial_seconds=1.0, max_seconds=60.0, jitter=0.0)
    >>> [b.delay(n) for n in (1, 2, 3, 10, 10**6)]
    [1.0, 2.0, 4.0, 60.0, 60.0]
    >>> b.wait(1, retry_after=86_400)
    300.0
    """

    initial_seconds: float = 1.0
    multiplier: float = 2.0
    max_seconds: float = 120.0
    jitter: float = 1.0
    retry_after_cap_seconds: float = 300.0

    def __post_init__(self) -> None:
        for name in ("initial_seconds", "max_seconds", "retry_after_cap_seconds"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigurationError(f"Backoff.{name} must be finite and >= 0, got {value!r}")
        if not (math.isfinite(self.multiplier) and self.multiplier >= 1):
            raise ConfigurationError(f"Backoff.multiplier must be >= 1, got {self.multiplier!r}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigurationError(f"Backoff.jitter must be in [0, 1], got {self.jitter!r}")

    def ceiling(self, attempt: int) -> float:
        """The largest delay for ``attempt`` (1-based), computed without overflow."""
        exponent = max(0, attempt - 1)
        if self.initial_seconds == 0 or self.multiplier == 1:
            return min(self.initial_seconds, self.max_seconds)
        limit = math.log(max(self.max_seconds, 1e-300) / self.initial_seconds, self.multiplier)
        if exponent >= limit:
            return self.max_seconds
        return min(self.max_seconds, self.initial_seconds * self.multiplier**exponent)

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """A jittered delay for ``attempt``; ``rng`` is injectable for tests."""
        top = self.ceiling(attempt)
        draw = (rng or random).random()
        return top * (1.0 - self.jitter * draw)

    def wait(
        self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """The wait after a throttled attempt: ``max(delay, clamped Retry-After)``."""
        return max(self.delay(attempt, rng), self.hint(retry_after))

    def beyond(self, attempt: int, retry_after: float | None = None,
               rng: random.Random | None = None) -> float:
        """The wait when a wait of the hint proved not enough (the fleet's first send after
        it was refused too): the clamped ``Retry-After`` and ``delay(attempt)`` more, so it
        is never the bare hint again, and at most the longest wait either gives alone
        (``max(max_seconds, retry_after_cap_seconds)``): nothing waits longer for it.

        >>> b = Backoff(initial_seconds=1.0, jitter=0.0)
        >>> b.beyond(1, 1.0), b.beyond(3, 1.0), b.beyond(1, None), b.beyond(20, 86_400)
        (2.0, 5.0, 1.0, 300.0)
        """
        longest = max(self.max_seconds, self.retry_after_cap_seconds)
        return min(longest, self.hint(retry_after) + self.delay(attempt, rng))

    def hint(self, retry_after: float | None) -> float:
        """``Retry-After`` clamped to ``[0, retry_after_cap_seconds]``; 0 without one.

        >>> Backoff().hint(86_400), Backoff().hint(-3.0), Backoff().hint(None)
        (300.0, 0.0, 0.0)
        """
        if retry_after is None or math.isnan(retry_after):
            return 0.0
        return min(max(retry_after, 0.0), self.retry_after_cap_seconds)


@dataclass(frozen=True)
class RatePolicy:
    """How fast the whole fleet may send on one key.

    ``rate`` is requests per second for every worker together. ``None``: nobody
    says (a self-hosted or company instance without a published limit), so the
    fleet *discovers* it: it starts at one request per second (or at the rate an
    earlier run learned and left on the gate), climbs while answers come back
    clean, and settles under the rate at which 429s begin (see ``Aimd``).
    ``math.inf``: no limit at all (pauses published to the gate are still honoured).
    ``safety_margin`` paces a little under the rate (default 1 %: clocks that do
    not tick quite alike, and the millisecond a request's way to the provider can
    vary, which a limiter without burst refuses); the rest of the margin is
    learned: sends are spaced as they actually leave (a late one holds the next
    back, see ``Gate.claim``), and each isolated 429 moves the fleet 2 % further
    under the rate where it happened. ``safety_margin=0`` paces at exactly the rate,
    without the first-send guard either (tests on a fake clock; a provider known
    to forgive jitter).
    ``horizon_seconds``: the gate reserves a slot only this far ahead; a longer
    wait is returned without a reservation.

    >>> RatePolicy(rate=1.0, safety_margin=0.0).interval
    1.0
    >>> RatePolicy(rate=None).discovering, RatePolicy(rate=float("inf")).interval
    (True, 0.0)
    """

    rate: float | None = 1.0
    safety_margin: float = 0.01
    horizon_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.rate is not None and not (self.rate > 0 and not math.isnan(self.rate)):
            raise ConfigurationError(f"rate must be a positive number of requests/s, got {self.rate!r}")
        if not 0.0 <= self.safety_margin < 0.5:
            raise ConfigurationError(f"safety_margin must be in [0, 0.5), got {self.safety_margin!r}")
        if not (math.isfinite(self.horizon_seconds) and self.horizon_seconds > 0):
            raise ConfigurationError("horizon_seconds must be positive")

    @property
    def discovering(self) -> bool:
        """No rate is known: the fleet discovers it."""
        return self.rate is None

    @property
    def interval(self) -> float:
        """Seconds between two sends of the fleet (0 when unlimited or not known)."""
        if self.rate is None or math.isinf(self.rate):
            return 0.0
        return 1.0 / (self.rate * (1.0 - self.safety_margin))
