"""parse_retry_after: RFC 9110 Retry-After, read the way real servers write it."""

import email.utils
import math
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geotoolkit import parse_retry_after

REF = datetime(1994, 11, 6, 8, 49, 0, tzinfo=UTC)
MAX_SECONDS = 1e9  # the documented ceiling of every answer
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def in_bounds(result: float | None) -> bool:
    return result is None or (math.isfinite(result) and 0.0 <= result <= MAX_SECONDS)


def expected(when: datetime, now: datetime) -> float:
    return min(max(0.0, (when - now).total_seconds()), MAX_SECONDS)


# --- delay-seconds ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("120", 120.0), ("0", 0.0), ("  7\t", 7.0), ("007", 7.0), ("999999999", 999999999.0),
     ("1000000000", MAX_SECONDS), ("99999999999", MAX_SECONDS),
     pytest.param("9" * 400, MAX_SECONDS, id="400 nines"),  # float(int(...)) overflowed before
     pytest.param("9" * 4301, MAX_SECONDS, id="4301 nines"),  # int() refuses > 4300 digits
     pytest.param("9" * 100_000, MAX_SECONDS, id="100000 nines"),
     pytest.param("0" * 100_000 + "5", 5.0, id="100000 zeros then 5"),
     pytest.param("0" * 5000, 0.0, id="5000 zeros")],
)
def test_delay_seconds(value: str, seconds: float) -> None:
    assert parse_retry_after(value, now=REF) == seconds


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("1.5", 1.5), (" 0.25 ", 0.25), ("0.0", 0.0), ("007.50", 7.5), ("120.000", 120.0),
     ("999999999.5", 999999999.5), ("1000000000.5", MAX_SECONDS),
     pytest.param("9" * 5000 + ".5", MAX_SECONDS, id="5000 nines and a half"),
     pytest.param("1." + "0" * 5000 + "1", 1.0, id="5000 decimals")],
)
def test_a_decimal_fraction_is_the_wait_it_says(value: str, seconds: float) -> None:
    """Not RFC 9110's delay-seconds, but sent (``Retry-After: 1.5``): ignored, the retry
    came after a bare backoff (0.76 s with the tests' seed) and was refused again."""
    assert parse_retry_after(value, now=REF) == seconds


@pytest.mark.parametrize(
    "value",
    [None, "", "   ", "\t", "-5", "+5", "-0", "-1.5", ".5", "5.", "1.2.3", "nan", "inf",
     "1e3", "1.5e3", "1_000", "0x10", "12abc",
     "120 seconds", "120s", "1 2", "١٢", "１２", "²", "৫",  # noqa: RUF001 -- non-ASCII digits
     "12\u00a0"],
)
def test_not_delay_seconds_gives_none(value: str | None) -> None:
    assert parse_retry_after(value, now=REF) is None


@pytest.mark.parametrize("value", [12, 12.0, b"120", bytearray(b"120"), ["120"], object(), REF])
def test_a_value_that_is_not_text_gives_none(value: object) -> None:
    assert parse_retry_after(value, now=REF) is None  # type: ignore[arg-type]


# --- HTTP-dates ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        # RFC 9110 section 5.6.7: the three forms of the same instant, 37 s after REF
        ("Sun, 06 Nov 1994 08:49:37 GMT", 37.0),
        ("Sunday, 06-Nov-94 08:49:37 GMT", 37.0),
        ("Sun Nov  6 08:49:37 1994", 37.0),
        # what servers actually send
        ("sun, 06 nov 1994 08:49:37 gmt", 37.0),
        ("SUNDAY, 06-NOV-94 08:49:37 GMT", 37.0),
        ("Sun,  06\tNov \t 1994   08:49:37  GMT", 37.0),
        (" \tSun, 06 Nov 1994 08:50:00 GMT\t ", 60.0),
        ("06 Nov 1994 08:49:37 GMT", 37.0),  # no day of the week
        ("Nov 6 08:49:37 1994", 37.0),
        ("Mon, 06 Nov 1994 08:49:37 GMT", 37.0),  # a wrong day of the week is ignored
        ("Friday, 06-Nov-94 08:49:37 GMT", 37.0),
        ("Sun 06 Nov 1994 08:49:37 GMT", 37.0),
        ("Sunday, 06 Nov 1994 08:49:37 GMT", 37.0),
        ("Sun, 6 Nov 1994 08:49:37 GMT", 37.0),  # single-digit day
        ("Sun Nov 6 08:49:37 1994", 37.0),
        ("Sun, 06 Nov 1994 8:49:37 GMT", 37.0),  # single-digit hour
        ("Sun, 06 Nov 1994 08:50 GMT", 60.0),  # RFC 5322: seconds are optional
        ("Sun, 06 Nov 1994 08:49:37", 37.0),  # no zone: UTC
        ("Sun Nov  6 08:49:37 1994 GMT", 37.0),
        ("Sun, 06 Nov 94 08:49:37 GMT", 37.0),  # RFC 822's two-digit year
        ("Sunday, 06-Nov-1994 08:49:37 GMT", 37.0),
        # past dates floor at 0
        ("Sun, 06 Nov 1994 08:00:00 GMT", 0.0),
        ("Sat, 01 Jan 1994 00:00:00 GMT", 0.0),
        ("Mon, 01 Jan 0001 00:00:00 GMT", 0.0),
        # further ahead than the ceiling
        ("Fri, 31 Dec 9999 23:59:59 GMT", MAX_SECONDS),
    ],
)
def test_http_dates(value: str, seconds: float) -> None:
    assert parse_retry_after(value, now=REF) == seconds


@pytest.mark.parametrize(
    ("zone", "hours_east"),
    [("GMT", 0), ("UTC", 0), ("UT", 0), ("Z", 0), ("utc", 0), ("-0000", 0), ("+0000", 0),
     ("+0200", 2), ("-0400", -4), ("+0530", 5.5), ("-0930", -9.5), ("+1400", 14), ("-1200", -12),
     ("+02:00", 2), ("-04:30", -4.5),
     # RFC 5322 section 4.3: the obsolete North American zones have defined offsets
     ("EST", -5), ("EDT", -4), ("CST", -6), ("CDT", -5), ("MST", -7), ("MDT", -6), ("PST", -8),
     ("PDT", -7), ("pst", -8)],
)
def test_zones_are_applied(zone: str, hours_east: float) -> None:
    local = REF + timedelta(seconds=37) + timedelta(hours=hours_east)  # the wall clock in `zone`
    imf = f"{DAYS[local.weekday()][:3]}, {local.day:02d} {MONTHS[local.month - 1]} {local.year} " \
          f"{local:%H:%M:%S} {zone}"
    asctime = time.asctime(local.timetuple()) + f" {zone}"
    assert parse_retry_after(imf, now=REF) == 37.0
    assert parse_retry_after(asctime, now=REF) == 37.0


@pytest.mark.parametrize(
    "value",
    [
        # unknown or malformed zones
        "Sun, 06 Nov 1994 08:49:37 CET", "Sun, 06 Nov 1994 08:49:37 BST",
        "Sun, 06 Nov 1994 08:49:37 A", "Sun, 06 Nov 1994 08:49:37 J",
        "Sun, 06 Nov 1994 08:49:37 PST8PDT", "Sun, 06 Nov 1994 08:49:37 GMT+0200",
        "Sun, 06 Nov 1994 08:49:37 +2400", "Sun, 06 Nov 1994 08:49:37 +0060",
        "Sun, 06 Nov 1994 08:49:37 +200", "Sun, 06 Nov 1994 08:49:37 0200",
        "Sun, 06 Nov 1994 08:49:37 GMT GMT",
        # impossible calendar dates and times
        "Sun, 30 Feb 1994 08:49:37 GMT", "Sun, 29 Feb 1995 08:49:37 GMT", "Thu, 31 Apr 1994 08:49:37 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 25:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 08:49:61 GMT",
        "Sun, 06 Nov 0000 08:49:37 GMT", "Sun, 06 Nov 994 08:49:37 GMT", "Sun, 06 Nov 19940 08:49:37 GMT",
        "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 November 1994 08:49:37 GMT",
        "Sun Nov  6 08:49:37 94",
        # trailing garbage and other shapes
        "Sun, 06 Nov 1994 08:49:37 GMT trailing", "Sun, 06 Nov 1994 08:49:37 GMT,",
        "Foo, 06 Nov 1994 08:49:37 GMT", "Sun,, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov-1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 084937 GMT", "1994-11-06T08:49:37Z", "tomorrow",
        # non-ASCII look-alikes
        "Sun, ٠٦ Nov 1994 08:49:37 GMT", "Sun, ０６ Nov 1994 08:49:37 GMT",  # noqa: RUF001
        "\u017fun, 06 Nov 1994 08:49:37 GMT",  # LATIN SMALL LETTER LONG S folds to "s"
        "Sun,\u00a006 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT\u3000",
    ],
)
def test_what_is_not_an_http_date_gives_none(value: str) -> None:
    assert parse_retry_after(value, now=REF) is None


def test_a_leap_second_reads_as_the_next_second() -> None:
    now = datetime(1998, 12, 31, 23, 59, 0, tzinfo=UTC)
    leap = parse_retry_after("Thu, 31 Dec 1998 23:59:60 GMT", now=now)
    assert leap == 60.0
    assert leap == parse_retry_after("Fri, 01 Jan 1999 00:00:00 GMT", now=now)
    assert parse_retry_after("Fri, 31 Dec 9999 23:59:60 GMT", now=REF) is None  # no such instant


def test_an_instant_beyond_datetime_gives_none() -> None:
    assert parse_retry_after("Mon, 01 Jan 0001 00:30:00 +0100", now=REF) is None
    assert parse_retry_after("Fri, 31 Dec 9999 23:30:00 -0100", now=REF) is None


# --- two-digit years (RFC 9110 section 5.6.7) -------------------------------------------------


def test_a_two_digit_year_is_within_fifty_years_of_now() -> None:
    now = datetime(2026, 11, 30, tzinfo=UTC)
    assert parse_retry_after("Monday, 30-Nov-26 00:00:10 GMT", now=now) == 10.0
    assert parse_retry_after("Friday, 30-Nov-90 00:00:10 GMT", now=now) == 0.0  # 1990
    assert parse_retry_after("Sat, 30 Nov 99 00:00:10 GMT", now=now) == 0.0  # 1999, not 2099
    assert parse_retry_after("Saturday, 30-Nov-30 00:00:00 GMT", now=now) == expected(
        datetime(2030, 11, 30, tzinfo=UTC), now)


def test_fifty_years_ahead_is_the_future_and_a_second_more_is_the_past() -> None:
    now = datetime(2026, 11, 30, tzinfo=UTC)
    fifty = (datetime(2076, 11, 30, tzinfo=UTC) - now).total_seconds()
    assert parse_retry_after("Monday, 30-Nov-76 00:00:00 GMT", now=now) == min(fifty, MAX_SECONDS)
    assert parse_retry_after("Monday, 30-Nov-76 00:00:01 GMT", now=now) == 0.0  # 1976
    # "more than 50 years" counts the date's zone: 23:30 -0100 is 00:30 UTC the next day
    assert parse_retry_after("Sunday, 29-Nov-76 23:30:00 -0100", now=now) == 0.0  # 1976
    assert parse_retry_after("Monday, 30-Nov-76 00:00:00 +0100", now=now) == min(
        fifty - 3600, MAX_SECONDS)  # 2076


def test_a_two_digit_year_more_than_fifty_years_past_is_next_century() -> None:
    now = datetime(2090, 1, 1, tzinfo=UTC)
    assert parse_retry_after("Wednesday, 01-Jan-10 00:00:00 GMT", now=now) == expected(
        datetime(2110, 1, 1, tzinfo=UTC), now)
    # 29 Feb 2300 does not exist, 29 Feb 2400 does: the year is chosen before the date is built
    now = datetime(2390, 1, 1, tzinfo=UTC)
    assert parse_retry_after("Tuesday, 29-Feb-00 00:00:00 GMT", now=now) == expected(
        datetime(2400, 2, 29, tzinfo=UTC), now)


# --- the header sent twice (a proxy adding its own): one value, joined with commas -----------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30, 30", 30.0),  # httpx joins two Retry-After lines so
        ("30,30", 30.0),
        ("5, 30", 30.0),  # they disagree: the longer, never early
        ("30, 5, 12", 30.0),
        ("Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT", 37.0),
        ("Sun, 06 Nov 1994 08:49:37 GMT, 60", 60.0),
        ("60, Sunday, 06-Nov-94 08:50:00 GMT", 60.0),
        pytest.param("1, " + "9" * 5000, MAX_SECONDS, id="1 then 5000 nines"),
        ("0.5, 1.5", 1.5),
    ],
)
def test_a_list_of_waits_is_the_longest(value: str, seconds: float) -> None:
    assert parse_retry_after(value, now=REF) == seconds


@pytest.mark.parametrize(
    "value",
    ["30,", ",30", "30,,30", "30, soon", "30, 1.5s", "30, -5", "Sun, 30", "Sun,, 06 Nov 1994 08:49:37 GMT",
     ",".join(["1"] * 21)],  # more items than any real duplication: not a wait
)
def test_a_list_with_an_item_that_is_not_a_wait_gives_none(value: str) -> None:
    assert parse_retry_after(value, now=REF) is None


# --- the reference time ----------------------------------------------------------------------


def test_now_is_honoured_and_naive_now_is_utc() -> None:
    value = "Sun, 06 Nov 1994 08:49:37 GMT"
    assert parse_retry_after(value, now=REF - timedelta(hours=1)) == 3637.0
    assert parse_retry_after(value, now=REF.replace(tzinfo=None)) == 37.0
    assert parse_retry_after(value, now=REF.astimezone(timezone(timedelta(hours=1)))) == 37.0
    assert parse_retry_after(value, now=REF.astimezone(timezone(timedelta(hours=-7)))) == 37.0
    assert parse_retry_after("120", now=REF + timedelta(days=1)) == 120.0  # delays ignore now


def test_default_now_is_the_current_time() -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    value = f"{DAYS[later.weekday()][:3]}, {later.day:02d} {MONTHS[later.month - 1]} {later.year} " \
            f"{later:%H:%M:%S} GMT"
    seconds = parse_retry_after(value)
    assert seconds is not None and 3500 < seconds <= 3600
    ignored = parse_retry_after(value, now="not a datetime")  # type: ignore[arg-type]
    assert ignored is not None and 3500 < ignored <= 3600


def test_a_now_outside_utc_range_gives_none_for_dates_only() -> None:
    edge = datetime.max.replace(tzinfo=timezone(timedelta(hours=-1)))  # later than 9999 in UTC
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=edge) is None
    assert parse_retry_after("120", now=edge) == 120.0


# --- properties ------------------------------------------------------------------------------

ZONES = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes)))  # what a header can write: whole minutes
NOWS = st.datetimes(min_value=datetime(1100, 1, 1), max_value=datetime(9800, 1, 1), timezones=ZONES)
INSTANTS = st.datetimes(min_value=datetime(1000, 1, 2), max_value=datetime(9998, 12, 30)).map(
    lambda t: t.replace(microsecond=0, tzinfo=UTC))


@st.composite
def digit_strings(draw: st.DrawFn) -> str:
    """ASCII digit strings up to 100 000 long, often with leading zeros."""
    length = draw(st.integers(min_value=1, max_value=100_000))
    zeros = draw(st.integers(min_value=0, max_value=length - 1))
    unit = draw(st.text(alphabet="0123456789", min_size=1, max_size=12))
    return "0" * zeros + (unit * (length // len(unit) + 1))[: length - zeros]


@given(st.text())
def test_never_raises_on_any_text(value: str) -> None:
    assert in_bounds(parse_retry_after(value, now=REF))


@given(st.text(), st.one_of(st.none(), NOWS, st.datetimes()))
def test_never_raises_whatever_now(value: str, now: datetime | None) -> None:
    assert in_bounds(parse_retry_after(value, now=now))


@given(digit_strings())
def test_huge_digit_strings_are_clamped(value: str) -> None:
    assert parse_retry_after(value) == min(float(value), MAX_SECONDS)  # float() has no digit limit


@given(st.integers(min_value=0, max_value=10**30))
def test_delay_seconds_round_trip(n: int) -> None:
    assert parse_retry_after(str(n)) == float(min(n, int(MAX_SECONDS)))


@given(st.one_of(st.none(), st.binary(), st.integers(), st.floats(), st.booleans(), st.datetimes(),
                 st.lists(st.text()), st.dictionaries(st.text(), st.text()), st.builds(object)))
def test_never_raises_on_any_object(value: object) -> None:
    assert parse_retry_after(value, now=REF) is None  # type: ignore[arg-type]


def rfc850(t: datetime) -> str:
    return f"{DAYS[t.weekday()]}, {t.day:02d}-{MONTHS[t.month - 1]}-{t.year % 100:02d} {t:%H:%M:%S} GMT"


@given(INSTANTS, NOWS)
def test_standard_forms_round_trip(when: datetime, now: datetime) -> None:
    """The stdlib formats (an independent oracle) parse back to the same instant."""
    want = expected(when, now)
    assert parse_retry_after(email.utils.format_datetime(when, usegmt=True), now=now) == want
    assert parse_retry_after(time.asctime(when.timetuple()), now=now) == want


@given(INSTANTS, NOWS, ZONES)
def test_numeric_zones_round_trip(when: datetime, now: datetime, zone: timezone) -> None:
    local = when.astimezone(zone)
    assert parse_retry_after(email.utils.format_datetime(local), now=now) == expected(when, now)


@given(NOWS, st.integers(min_value=-49 * 365 * 86400, max_value=49 * 365 * 86400))
def test_rfc850_round_trips_within_fifty_years(now: datetime, delta: int) -> None:
    when = (now.astimezone(UTC) + timedelta(seconds=delta)).replace(microsecond=0)
    assert parse_retry_after(rfc850(when), now=now) == expected(when, now)


def render(form: str, local: datetime, weekday: str, zone: str) -> str:
    """``local`` in one of the three forms, with the given day name (or none) and zone."""
    day = f"{weekday}, " if weekday else ""
    month = MONTHS[local.month - 1]
    clock = f"{local:%H:%M:%S}" + (f" {zone}" if zone else "")
    if form == "imf":
        return f"{day}{local.day:02d} {month} {local.year} {clock}"
    if form == "rfc850":
        return f"{day}{local.day:02d}-{month}-{local.year} {clock}"
    asctime = f"{weekday} " if weekday else ""
    return f"{asctime}{month} {local.day:2d} {local:%H:%M:%S} {local.year}" + (f" {zone}" if zone else "")


@given(INSTANTS, NOWS, st.sampled_from(["imf", "rfc850", "asctime"]), st.data())
def test_sloppy_dates_round_trip(when: datetime, now: datetime, form: str, data: st.DataObject) -> None:
    """Any case, blanks, day name (or none, right or wrong) and zone: the same instant."""
    zone, hours = data.draw(st.sampled_from(
        [("", 0), ("GMT", 0), ("UTC", 0), ("UT", 0), ("Z", 0), ("-0000", 0), ("+0200", 2), ("-0400", -4),
         ("+05:30", 5.5), ("EST", -5), ("PDT", -7)]))
    weekday = data.draw(st.sampled_from(["", *DAYS, *(d[:3] for d in DAYS)]))
    text = render(form, when + timedelta(hours=hours), weekday, zone)
    text = data.draw(st.sampled_from([str.lower, str.upper, str.swapcase, str]))(text)
    blanks = data.draw(st.lists(st.text(alphabet=" \t", min_size=1, max_size=3), min_size=12, max_size=12))
    parts = text.split(" ")
    text = blanks[-1] + "".join(p + b for p, b in zip(parts, blanks, strict=False))
    assert parse_retry_after(text, now=now) == expected(when, now)


@given(INSTANTS, st.integers(min_value=0, max_value=40), st.integers(min_value=0, max_value=6),
       st.text(alphabet="0123456789:-+ ,\tAaZzGMTUCESPDjanfebNOVSun\u00a0\u0660\uff10", max_size=8))
def test_damaged_dates_never_raise(when: datetime, start: int, length: int, junk: str) -> None:
    text = email.utils.format_datetime(when, usegmt=True)
    damaged = text[:start] + junk + text[start + length:]
    assert in_bounds(parse_retry_after(damaged, now=REF))
