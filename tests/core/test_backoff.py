import itertools
import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geotoolkit import Backoff, ConfigurationError, RatePolicy


def test_ceiling_doubles_then_clamps() -> None:
    b = Backoff(initial_seconds=0.5, multiplier=2.0, max_seconds=10.0)
    assert [b.ceiling(n) for n in (1, 2, 3, 4, 5, 6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0]
    assert b.ceiling(10**6) == 10.0
    assert b.ceiling(0) == 0.5 and b.ceiling(-5) == 0.5


@given(st.integers(min_value=-10, max_value=10**9), st.floats(0.0, 1.0))
def test_delay_in_bounds_at_any_attempt(attempt: int, jitter: float) -> None:
    b = Backoff(initial_seconds=1.0, max_seconds=60.0, jitter=jitter)
    delay = b.delay(attempt, random.Random(attempt))
    top = b.ceiling(attempt)
    assert math.isfinite(delay)
    assert top * (1 - jitter) - 1e-9 <= delay <= top


def test_full_jitter_uses_the_injected_generator() -> None:
    b = Backoff(initial_seconds=1.0, max_seconds=60.0)
    assert b.delay(3, random.Random(7)) == b.delay(3, random.Random(7))
    draws = {b.delay(3, random.Random(seed)) for seed in range(20)}
    assert len(draws) == 20 and all(0 < d <= 4.0 for d in draws)


def test_wait_is_max_of_backoff_and_clamped_hint() -> None:
    b = Backoff(initial_seconds=1.0, max_seconds=60.0, jitter=0.0, retry_after_cap_seconds=300)
    assert b.wait(1, retry_after=30.0) == 30.0
    assert b.wait(1, retry_after=86_400.0) == 300.0  # a stray day-long hint is clamped
    assert b.wait(1, retry_after=None) == 1.0
    assert b.wait(1, retry_after=float("nan")) == 1.0
    assert b.wait(1, retry_after=-4.0) == 1.0


@pytest.mark.parametrize("hint", [0.0, 1.0])
def test_a_server_that_keeps_saying_1_still_gets_longer_waits(hint: float) -> None:
    b = Backoff(initial_seconds=1.0, max_seconds=60.0)
    rng = random.Random(1)
    # the mean wait per attempt over many draws grows with the attempt number
    means = [sum(b.wait(n, hint, rng) for _ in range(400)) / 400 for n in range(1, 7)]
    assert all(later > earlier for earlier, later in itertools.pairwise(means))
    assert means[-1] > 10 * max(hint, 1.0)
    # with partial jitter the floor itself grows: attempt 6 never waits less than 16 s
    assert min(Backoff(jitter=0.5).wait(6, hint, rng) for _ in range(100)) >= 16.0


def test_configurable_cap() -> None:
    assert Backoff(retry_after_cap_seconds=20, jitter=0).wait(1, 25) == 20


@pytest.mark.parametrize(
    "kwargs",
    [{"initial_seconds": -1}, {"max_seconds": math.inf}, {"multiplier": 0.5},
     {"jitter": 1.5}, {"retry_after_cap_seconds": math.nan}],
)
def test_bad_backoff_is_a_configuration_error(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        Backoff(**kwargs)


def test_rate_policy_interval_has_a_safety_margin() -> None:
    assert RatePolicy(rate=10.0, safety_margin=0.0).interval == pytest.approx(0.1)
    assert RatePolicy(rate=10.0).interval == pytest.approx(0.1 / 0.99)
    assert RatePolicy(rate=None).interval == 0.0 and RatePolicy(rate=None).discovering
    assert RatePolicy(rate=math.inf).interval == 0.0 and not RatePolicy(rate=math.inf).discovering
    for bad in (0, -1, math.nan, -math.inf):
        with pytest.raises(ConfigurationError):
            RatePolicy(rate=bad)
