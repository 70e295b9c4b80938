"""parse_rate_limit_reset: a quota's reset from the headers providers send instead of
(or besides) Retry-After (pure parsing; the engine's use is tested against the simulator)."""

import math
from datetime import UTC, datetime

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from geotoolkit import parse_rate_limit_reset

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
EPOCH = int(NOW.timestamp())


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"RateLimit": '"default";r=0;t=30'}, 30.0),
        ({"RateLimit": 'default;r=0;t=30'}, 30.0),  # a token name, unquoted
        ({"RateLimit": '"default"; r=0; t=30'}, 30.0),  # blanks around parameters
        ({"RateLimit": '"a";r=4;t=1, "b";r=0;t=60, "c";r=0;t=5'}, 60.0),  # the longest exhausted
        ({"RateLimit": '"a";t=12'}, 12.0),  # nothing says what remains: its reset
        ({"RateLimit": '"a";r=4;t=1', "RateLimit-Reset": "9"}, 9.0),  # none exhausted: the next
        ({"RateLimit-Reset": "17"}, 17.0),
        ({"X-RateLimit-Reset": "3"}, 3.0),
        ({"x-ratelimit-reset": str(EPOCH + 42)}, 42.0),  # a Unix time (GitHub, OpenCage)
        ({"X-Rate-Limit-Reset": str(EPOCH + 7)}, 7.0),  # Mapbox's spelling
        ({"X-RateLimit-Reset": f"{EPOCH + 2}.5"}, 2.5),
        ({"X-RateLimit-Reset": str(EPOCH - 100)}, 0.0),  # already past: no wait
        ({"X-RateLimit-Reset": "0"}, 0.0),
        ({"X-RateLimit-Reset": str(EPOCH * 1000 + 42_000)}, 42.0),  # in milliseconds
        ({"RateLimit-Reset": str(EPOCH * 1000 + 2_500)}, 2.5),
        ({"X-RateLimit-Reset": f"{EPOCH * 1000 + 7_000}.0"}, 7.0),
        ({"X-RateLimit-Reset": str(EPOCH * 1000 - 5_000)}, 0.0),  # already past
        ({"X-RateLimit-Reset": "9" * 20}, 1e9),  # far ahead: the documented ceiling
        ({"RateLimit": '"a";r=0;t=' + "9" * 20}, 1e9),
    ],
)
def test_the_reset_headers_providers_send(headers: dict[str, str], seconds: float) -> None:
    assert parse_rate_limit_reset(headers, now=NOW) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Retry-After": "5"},  # not this function's header
        {"X-RateLimit-Reset": "soon"},
        {"X-RateLimit-Reset": "-5"},
        {"X-RateLimit-Reset": "1e3"},
        {"X-RateLimit-Reset": "nan"},
        {"X-RateLimit-Reset": ""},
        {"X-RateLimit-Reset": "\u0661\u0662"},  # Arabic-Indic digits are not ASCII digits
        {"RateLimit": '"a";r=0;t=x'},
        {"RateLimit": "garbage"},
        {"RateLimit-Reset": "12 seconds"},
    ],
)
def test_what_does_not_say_a_reset_gives_none(headers: dict[str, str]) -> None:
    assert parse_rate_limit_reset(headers, now=NOW) is None


@pytest.mark.parametrize(
    "headers",
    [
        # OpenCage's free trial: the day's quota (2,500), far from spent, resetting at midnight
        # UTC; a 429 then means "too quickly", and that midnight is not when to retry
        {"X-RateLimit-Limit": "2500", "X-RateLimit-Remaining": "2412",
         "X-RateLimit-Reset": str(EPOCH + 43_200)},
        {"X-Rate-Limit-Remaining": "7", "X-Rate-Limit-Reset": "60"},
        {"RateLimit-Remaining": "1", "RateLimit-Reset": "60"},
        {"x-ratelimit-remaining": " 3 ", "x-ratelimit-reset": "60"},
    ],
)
def test_a_reset_of_a_quota_not_spent_is_not_the_wait(headers: dict[str, str]) -> None:
    assert parse_rate_limit_reset(headers, now=NOW) is None


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(EPOCH + 42)}, 42.0),
        ({"X-RateLimit-Remaining": "soon", "X-RateLimit-Reset": "9"}, 9.0),  # unreadable: no say
        ({"X-RateLimit-Remaining": "-1", "X-RateLimit-Reset": "9"}, 9.0),  # overdrawn: spent
        # one family's remaining says nothing of another's reset
        ({"X-RateLimit-Remaining": "5", "X-Rate-Limit-Reset": "8"}, 8.0),
        ({"RateLimit-Remaining": "5", "RateLimit-Reset": "60", "X-RateLimit-Reset": "4"}, 4.0),
    ],
)
def test_a_reset_of_a_spent_or_unsaid_quota_is_the_wait(headers: dict[str, str],
                                                        seconds: float) -> None:
    assert parse_rate_limit_reset(headers, now=NOW) == seconds


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        # the draft's 7th revision (express-rate-limit's "draft-7" and many gateways):
        # one dictionary field, limit, remaining and reset (delta-seconds)
        ({"RateLimit": "limit=100, remaining=0, reset=30"}, 30.0),
        ({"RateLimit": "limit=20, reset=37", "RateLimit-Policy": "20;w=60"}, 37.0),
        ({"ratelimit": "Limit=5 ,Remaining=0 ,Reset=12"}, 12.0),
        ({"RateLimit": "limit=100, remaining=4, reset=30", "X-RateLimit-Reset": "3"}, 3.0),
    ],
)
def test_the_drafts_dictionary_form(headers: dict[str, str], seconds: float) -> None:
    assert parse_rate_limit_reset(headers, now=NOW) == seconds


@pytest.mark.parametrize("value", ["limit=100, remaining=4, reset=30", "limit=100, remaining=0",
                                   "limit=100, remaining=0, reset=soon", "reset"])
def test_the_drafts_dictionary_form_without_a_reset_to_wait_for(value: str) -> None:
    assert parse_rate_limit_reset({"RateLimit": value}, now=NOW) is None


def test_a_unix_time_is_measured_from_the_responses_date_not_the_local_clock() -> None:
    long_ago = datetime(2001, 9, 10, tzinfo=UTC)
    reset = str(int(long_ago.timestamp()) + 30)
    assert parse_rate_limit_reset({"X-RateLimit-Reset": reset}, now=long_ago) == 30.0
    assert parse_rate_limit_reset({"X-RateLimit-Reset": reset}) == 0.0  # from now: long past


def test_httpx_headers_are_read_in_any_case() -> None:
    headers = httpx.Headers([("RATELIMIT", '"d";r=0;t=4')])
    assert parse_rate_limit_reset(headers, now=NOW) == 4.0


def test_a_mapping_that_is_not_one_gives_none() -> None:
    assert parse_rate_limit_reset(None, now=NOW) is None  # type: ignore[arg-type]
    assert parse_rate_limit_reset("X-RateLimit-Reset: 5", now=NOW) is None  # type: ignore[arg-type]


@given(st.dictionaries(
    st.sampled_from(["RateLimit", "RateLimit-Reset", "X-RateLimit-Reset", "X-Rate-Limit-Reset",
                     "ratelimit", "Other"]),
    st.text(alphabet='0123456789.;=,"rt -eE+\tn\u0660', max_size=40), max_size=4))
def test_never_raises_and_stays_in_bounds(headers: dict[str, str]) -> None:
    found = parse_rate_limit_reset(headers, now=NOW)
    assert found is None or (math.isfinite(found) and 0.0 <= found <= 1e9)
