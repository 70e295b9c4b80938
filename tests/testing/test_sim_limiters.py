"""The limiter algorithms, with plain numbers: admit/reject sequences, boundaries, bounds."""

from __future__ import annotations

import math
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geotoolkit.testing.limiters import (
    GCRA,
    LIMITERS,
    FixedWindow,
    LeakyBucket,
    Limiter,
    LimiterName,
    SlidingLog,
    SlidingWindow,
    TokenBucket,
    Verdict,
    make_limiter,
)

T0 = 1_700_000_000.0  # not a multiple of 60: its minute started 20 s earlier


def run(limiter: Limiter, times: list[float], key: str | None = "k") -> list[bool]:
    return [limiter.admit(key, t).admitted for t in times]


# --------------------------------------------------------------------------- sliding window


def test_sliding_window_admits_capacity_per_window() -> None:
    w = SlidingWindow(2.0, window_seconds=1.0)
    assert run(w, [0.0, 0.9, 0.95, 1.0, 1.5]) == [True, True, False, True, False]
    # at 1.5 the window (0.5, 1.5] holds 0.9 and 1.0: 0.9 leaves at 1.9
    verdict = w.check("k", 1.5)
    assert not verdict.admitted
    assert verdict.wait_seconds == pytest.approx(0.4)
    assert verdict.retry_after == 1
    assert run(w, [1.9]) == [True]


def test_sliding_window_boundary_is_exclusive_of_the_old_end() -> None:
    w = SlidingWindow(1.0, window_seconds=1.0)
    assert run(w, [0.0, 0.999999, 1.0]) == [True, False, True]


def test_sliding_window_retry_after_rounds_up() -> None:
    w = SlidingWindow(0.2, window_seconds=10.0)  # two per 10 s
    assert run(w, [0.0, 1.0]) == [True, True]
    assert w.admit("k", 3.0) == Verdict(False, 7.0, 7)
    assert w.admit("k", 3.5).retry_after == 7  # 6.5 s rounds up
    assert run(w, [10.0]) == [True]  # the rejections at 3.0 and 3.5 did not count


def test_sliding_window_too_short_is_widened_to_one_interval() -> None:
    w = SlidingWindow(2.0, window_seconds=0.25)  # 0.5 requests per window: one per 0.5 s
    assert run(w, [0.0, 0.4, 0.5]) == [True, False, True]


def test_sliding_log_counts_rejections() -> None:
    log, window = SlidingLog(1.0, window_seconds=1.0), SlidingWindow(1.0, window_seconds=1.0)
    times = [0.0, 0.5, 1.2, 2.3]
    assert run(window, times) == [True, False, True, True]
    assert run(log, times) == [True, False, False, True]  # 0.5 still counted at 1.2


def test_sliding_log_wait_includes_the_rejected_request() -> None:
    s = SlidingLog(2.0, window_seconds=1.0)
    assert run(s, [0.0, 0.1]) == [True, True]
    rejected = s.admit("k", 0.2)
    assert not rejected.admitted
    assert rejected.wait_seconds == pytest.approx(0.9)  # 0.1 leaves at 1.1
    second = s.admit("k", 1.05)  # 0.1 and 0.2 still in (0.05, 1.05]
    assert not second.admitted
    assert second.wait_seconds == pytest.approx(0.15)  # 0.2 leaves at 1.2
    assert run(s, [1.21]) == [True]


# --------------------------------------------------------------------------- fixed window


def test_fixed_window_per_second() -> None:
    f = FixedWindow(2.0, window_seconds=1.0)
    assert run(f, [T0 + 0.1, T0 + 0.2, T0 + 0.3]) == [True, True, False]
    late = f.admit("k", T0 + 0.999)
    assert not late.admitted and late.wait_seconds == pytest.approx(0.001, abs=1e-6)
    assert late.retry_after == 1
    # a new calendar window: a full quota again, even right after the last admission
    assert run(f, [T0 + 1.0, T0 + 1.0, T0 + 1.0]) == [True, True, False]


def test_fixed_window_per_minute_is_calendar_aligned() -> None:
    f = FixedWindow(1.0, window_seconds=60.0)  # 60 per calendar minute
    assert run(f, [T0 + i / 10 for i in range(60)]) == [True] * 60
    rejected = f.admit("k", T0 + 6.0)
    assert not rejected.admitted
    assert rejected.wait_seconds == pytest.approx(34.0)  # the minute ends at T0 + 40
    assert rejected.retry_after == 34
    assert f.admit("k", T0 + 39.5).retry_after == 1
    assert run(f, [T0 + 40.0]) == [True]


def test_fixed_window_rejections_do_not_count_and_refund_returns_one() -> None:
    f = FixedWindow(1.0, window_seconds=1.0)
    assert run(f, [0.0, 0.1, 0.2]) == [True, False, False]
    f.refund("k")
    assert run(f, [0.3, 0.4]) == [True, False]
    f.refund("k")
    f.refund("k")  # nothing more to refund: no negative count
    assert run(f, [0.5, 0.6]) == [True, False]


# --------------------------------------------------------------------------- gcra


def test_gcra_burst_0_requests_exactly_one_interval_apart() -> None:
    g = GCRA(2.0, burst=0)
    assert run(g, [0.0, 0.25, 0.5, 0.9, 1.0]) == [True, False, True, False, True]


def test_gcra_exact_spacing_survives_float_sums() -> None:
    g = GCRA(3.0, burst=0)  # 1/3 is not a binary fraction
    assert run(g, [T0 + k / 3 for k in range(30)]) == [True] * 30
    g.clear()
    early = [T0 + k / 3 - (0.001 if k % 2 else 0.0) for k in range(10)]
    assert run(g, early) == [k % 2 == 0 for k in range(10)]


def test_gcra_burst_exhaustion_and_refill() -> None:
    g = GCRA(1.0, burst=2)
    assert run(g, [0.0] * 4) == [True, True, True, False]
    assert g.check("k", 0.0) == Verdict(False, 1.0, 1)
    assert run(g, [0.5, 1.0, 1.0]) == [False, True, False]
    assert run(g, [10.0] * 4) == [True, True, True, False]  # idle: the whole burst again


def test_gcra_rejections_do_not_push_the_schedule() -> None:
    g = GCRA(1.0, burst=0)
    assert run(g, [0.0, *[0.1 * i for i in range(1, 10)], 1.0]) == [True] + [False] * 9 + [True]


def test_gcra_announces_retry_after_1_whatever_the_wait() -> None:
    g = GCRA(0.2, burst=0)  # one per 5 s
    assert run(g, [0.0]) == [True]
    assert g.admit("k", 0.5) == Verdict(False, 4.5, 1)


def test_leaky_bucket_is_gcra() -> None:
    times = [0.0, 0.1, 0.5, 0.6, 1.0, 1.05, 1.6]
    assert run(LeakyBucket(2.0, burst=1), times) == run(GCRA(2.0, burst=1), times)
    assert LeakyBucket(1.0).name == "leaky-bucket"


# --------------------------------------------------------------------------- token bucket


def test_token_bucket_capacity_and_refill() -> None:
    b = TokenBucket(1.0, burst=2)
    assert b.capacity == 2.0
    assert run(b, [0.0, 0.0, 0.0]) == [True, True, False]
    assert b.check("k", 0.5) == Verdict(False, 0.5, 1)
    assert run(b, [1.0, 1.0]) == [True, False]
    assert run(b, [100.0, 100.0, 100.0]) == [True, True, False]  # never more than capacity


def test_token_bucket_default_capacity_is_the_rate() -> None:
    assert TokenBucket(5.0).capacity == 5.0
    assert TokenBucket(5.0, burst=0).capacity == 5.0
    assert TokenBucket(0.25).capacity == 1.0
    b = TokenBucket(5.0)
    assert run(b, [0.0] * 6) == [True] * 5 + [False]
    assert b.check("k", 0.0).wait_seconds == pytest.approx(0.2)


def test_token_bucket_retry_after_is_the_next_token_rounded_up() -> None:
    b = TokenBucket(0.4, burst=1)  # a token every 2.5 s
    assert run(b, [0.0]) == [True]
    assert b.admit("k", 0.0) == Verdict(False, 2.5, 3)
    assert b.admit("k", 2.0).retry_after == 1
    assert run(b, [2.5]) == [True]


def test_token_bucket_exact_refill_survives_float_sums() -> None:
    b = TokenBucket(3.0, burst=1)
    assert run(b, [T0 + k / 3 for k in range(30)]) == [True] * 30


# --------------------------------------------------------------------------- every limiter


def _limiter(name: str, rate: float = 1.0, burst: int | None = None) -> Limiter:
    return make_limiter(name, rate, window_seconds=1.0, burst=burst)


def test_the_names_are_the_literal() -> None:
    assert set(LIMITERS) == set(get_args(LimiterName))
    for name, cls in LIMITERS.items():
        assert cls.name == name
        assert isinstance(_limiter(name), cls)


@pytest.mark.parametrize("name", sorted(LIMITERS))
def test_state_is_per_key(name: str) -> None:
    limiter = _limiter(name)
    assert run(limiter, [0.0, 0.0], key="a") == [True, False]
    assert run(limiter, [0.0], key="b") == [True]
    assert run(limiter, [0.0], key=None) == [True]
    assert run(limiter, [0.0], key="a") == [False]


@pytest.mark.parametrize("name", sorted(LIMITERS))
def test_check_records_nothing(name: str) -> None:
    limiter = _limiter(name)
    for _ in range(5):
        assert limiter.check("k", 0.0).admitted
    assert run(limiter, [0.0, 0.0]) == [True, False]
    for _ in range(5):
        assert not limiter.check("k", 0.0).admitted
    assert run(limiter, [1.0]) == [True]


@pytest.mark.parametrize("name", sorted(LIMITERS))
def test_refund_undoes_the_last_admission(name: str) -> None:
    limiter = _limiter(name)
    assert run(limiter, [0.0]) == [True]
    limiter.refund("k")
    assert run(limiter, [0.0, 0.0]) == [True, False]
    limiter.refund("nobody")  # no history: nothing happens
    limiter.clear()
    assert run(limiter, [0.0]) == [True]


@pytest.mark.parametrize("name", sorted(LIMITERS))
def test_configure_keeps_the_history(name: str) -> None:
    limiter = _limiter(name, rate=1.0)
    assert run(limiter, [0.0, 0.0]) == [True, False]
    limiter.configure(1.0, window_seconds=1.0, burst=None)
    assert run(limiter, [0.0]) == [False]
    limiter.configure(100.0, window_seconds=1.0, burst=5)
    assert limiter.admit("k", 0.5).admitted  # a higher rate admits sooner


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rate": 0.0}, {"rate": -1.0}, {"rate": math.nan}, {"rate": math.inf},
        {"rate": 1.0, "window_seconds": 0.0}, {"rate": 1.0, "burst": -1},
        {"rate": 1.0, "burst": True}, {"rate": 1.0, "burst": 1.5},
    ],
)
def test_invalid_parameters_are_refused(kwargs: dict[str, float]) -> None:
    rate = kwargs.pop("rate")
    with pytest.raises(ValueError):
        GCRA(rate, **kwargs)  # type: ignore[arg-type]


def test_unknown_limiter_is_refused() -> None:
    with pytest.raises(ValueError, match="limiter must be one of"):
        make_limiter("polite", 1.0)


def test_repr_names_the_parameters() -> None:
    assert repr(GCRA(2.0, burst=3)) == "GCRA(rate=2.0, window_seconds=1.0, burst=3)"


# --------------------------------------------------------------------------- invariants

_ARRIVALS = st.lists(st.floats(0.0, 20.0, allow_nan=False), min_size=1, max_size=40).map(sorted)
_RATES = st.sampled_from([0.5, 1.0, 2.0, 3.0, 10.0])
_BURSTS = st.sampled_from([None, 0, 1, 5])


def _admitted(limiter: Limiter, times: list[float]) -> list[float]:
    return [t for t in times if limiter.admit("k", t).admitted]


def _most_in(times: list[float], span: float, *, closed: bool) -> int:
    """The most admissions in any interval of length ``span`` (closed or half-open)."""
    best = 0
    for i, start in enumerate(times):
        end = start + span
        best = max(best, sum(1 for t in times[i:] if (t <= end if closed else t < end)))
    return best


@given(_ARRIVALS, _RATES, st.sampled_from([1.0, 2.0, 0.3]), st.booleans())
def test_sliding_windows_never_admit_more_than_capacity(
    times: list[float], rate: float, window: float, log: bool
) -> None:
    limiter = (SlidingLog if log else SlidingWindow)(rate, window_seconds=window)
    capacity = max(1, math.floor(rate * window + 1e-9))
    span = window if rate * window >= 1 else 1 / rate
    assert _most_in(_admitted(limiter, times), span, closed=False) <= capacity


@given(_ARRIVALS, _RATES, st.sampled_from([1.0, 2.0]))
def test_fixed_window_never_admits_more_than_capacity_per_window(
    times: list[float], rate: float, window: float
) -> None:
    admitted = _admitted(FixedWindow(rate, window_seconds=window), times)
    capacity = max(1, math.floor(rate * window + 1e-9))
    per_window: dict[int, int] = {}
    for t in admitted:
        per_window[math.floor(t / window)] = per_window.get(math.floor(t / window), 0) + 1
    assert max(per_window.values(), default=0) <= capacity


@given(_ARRIVALS, _RATES, _BURSTS, st.sampled_from([0.5, 1.0, 3.0]))
def test_gcra_and_token_bucket_respect_rate_plus_burst(
    times: list[float], rate: float, burst: int | None, span: float
) -> None:
    gcra = _admitted(GCRA(rate, burst=burst), times)
    assert _most_in(gcra, span, closed=True) <= (burst or 0) + 1 + span * rate + 1e-6
    bucket = TokenBucket(rate, burst=burst)
    tokens = _admitted(bucket, times)
    assert _most_in(tokens, span, closed=True) <= bucket.capacity + span * rate + 1e-6


@given(_ARRIVALS, st.sampled_from(sorted(LIMITERS)), _RATES, _BURSTS)
def test_waiting_as_told_is_enough(
    times: list[float], name: str, rate: float, burst: int | None
) -> None:
    limiter = make_limiter(name, rate, window_seconds=1.0, burst=burst)
    for t in times:
        verdict = limiter.admit("k", t)
        assert verdict.retry_after >= 1
        assert verdict.admitted == (verdict.wait_seconds == 0.0)
        if not verdict.admitted:
            assert limiter.check("k", t + verdict.wait_seconds + 1e-9).admitted
