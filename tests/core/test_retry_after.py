from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geotoolkit import parse_retry_after

REF = datetime(1994, 11, 6, 8, 49, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        ("0", 0.0),
        ("  7\t", 7.0),
        ("007", 7.0),
        ("99999999999", 99999999999.0),
        # RFC 9110 section 5.6.7: the three forms of the same instant, 37 s after REF
        ("Sun, 06 Nov 1994 08:49:37 GMT", 37.0),
        ("Sunday, 06-Nov-94 08:49:37 GMT", 37.0),
        ("Sun Nov  6 08:49:37 1994", 37.0),
        ("sun, 06 NOV 1994 08:49:37 gmt", 37.0),
        (" Sun, 06 Nov 1994 08:50:00 GMT ", 60.0),
        ("Sun, 06 Nov 1994 08:00:00 GMT", 0.0),  # past dates floor at 0
        ("Sat, 01 Jan 1994 00:00:00 GMT", 0.0),
    ],
)
def test_valid_forms(value: str, expected: float) -> None:
    assert parse_retry_after(value, now=REF) == expected


@pytest.mark.parametrize(
    "value",
    [None, "", "   ", "1.5", "-1", "+1", "nan", "inf", "1e3", "1_000", "0x10", "12abc",
     "120 seconds", "١٢", "１２",  # noqa: RUF001 -- non-ASCII digits are not delay-seconds
     "Sun, 06 Nov 1994 08:49:37 GMT trailing", "Sun, 06 Nov 1994 08:49:37 PST",
     "Sun, 06 Nov 1994 08:49:37 +0000", "Sun, 30 Feb 1994 08:49:37 GMT",
     "Sun, 06 Nov 1994 25:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "tomorrow",
     "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT"],
)
def test_invalid_values_give_none(value: str | None) -> None:
    assert parse_retry_after(value, now=REF) is None


def test_non_string_gives_none() -> None:
    assert parse_retry_after(12, now=REF) is None  # type: ignore[arg-type]


def test_naive_now_is_utc_and_other_zones_are_converted() -> None:
    naive = REF.replace(tzinfo=None)
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=naive) == 37.0
    plus_one = REF.astimezone(timezone(timedelta(hours=1)))
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=plus_one) == 37.0


def test_rfc850_two_digit_year_pivots_within_fifty_years() -> None:
    now = datetime(2026, 11, 30, tzinfo=UTC)
    assert parse_retry_after("Monday, 30-Nov-26 00:00:10 GMT", now=now) == 10.0
    assert parse_retry_after("Friday, 30-Nov-90 00:00:10 GMT", now=now) == 0.0  # 1990


def test_default_now_is_the_current_time() -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    seconds = parse_retry_after(later.strftime("%a, %d %b %Y %H:%M:%S GMT"))
    assert seconds is not None and 3500 < seconds <= 3600


@given(st.text())
def test_never_raises_and_never_negative(value: str) -> None:
    result = parse_retry_after(value, now=REF)
    assert result is None or result >= 0.0


@given(st.integers(min_value=0, max_value=10**30))
def test_digit_strings_round_trip(n: int) -> None:
    assert parse_retry_after(str(n)) == float(n)


@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1)))
def test_imf_fixdate_round_trip(when: datetime) -> None:
    when = when.replace(microsecond=0, tzinfo=UTC)
    text = when.strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert parse_retry_after(text, now=REF) == max(0.0, (when - REF).total_seconds())
