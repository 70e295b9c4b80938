"""geotoolkit.frontends.orchestrators: which errors are retried, after how long, and how it is handed over."""

from __future__ import annotations

import contextvars
import pickle
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from geotoolkit.errors import (
    AuthenticationError,
    ConfigurationError,
    GateError,
    QuotaExceededError,
    RateLimitError,
)
from geotoolkit.frontends.orchestrators import (
    dagster_retry,
    not_retried,
    prefect_retry_options,
    retry_delay,
)
from geotoolkit.store import StoreError

pytestmark = pytest.mark.orchestrators


@pytest.mark.parametrize(("exc", "expected"), [
    (RateLimitError("slow down", retry_after=120.0), 120.0),
    (RateLimitError("slow down", retry_after=0.0), 0.0),
    (RateLimitError("no hint"), 60.0),
    (RateLimitError("bad hint", retry_after=float("nan")), 60.0),
    (GateError("redis is down", backend="redis"), 60.0),
    (StoreError("postgres is down", backend="postgres"), 60.0),
    (AuthenticationError("bad key"), None),
    (QuotaExceededError("daily cap"), None),
    (ConfigurationError("bad gate URL"), None),
    (ValueError("a bug"), None),
])
def test_only_retriable_errors_get_a_delay(exc: BaseException, expected: float | None) -> None:
    assert retry_delay(exc) == expected


@pytest.mark.redis
def test_a_gate_that_refuses_its_setting_is_not_retried(redis_url: str) -> None:
    # A db index that does not exist: the gate says permanent, and no retry heals it, so
    # an orchestrator must fail the task at once, not rerun it every minute.
    import pandas as pd

    from geotoolkit.providers import Nominatim
    from geotoolkit.testing import KNOWN_ADDRESSES, ProviderSimulator

    frame = pd.DataFrame({"address": [KNOWN_ADDRESSES[0].address]})
    gate = redis_url.rsplit("/", 1)[0] + "/999999"
    with ProviderSimulator() as sim, pytest.raises(GateError) as raised:
        frame.geocode.run("address", provider=Nominatim(sim.url, user_agent="t/1.0"), gate=gate,
                          cache=False, progress=False, max_wait_seconds=5)
    assert raised.value.permanent and sim.count() == 0
    assert retry_delay(raised.value) is None
    assert not prefect_retry_options()["retry_condition_fn"](None, None, _failed(raised.value))
    assert retry_delay(GateError("refused", backend="postgres", permanent=True)) is None
    pytest.importorskip("dagster")
    with pytest.raises(GateError), dagster_retry():  # the op fails, asking for no retry
        raise raised.value


def test_the_delay_is_capped_and_the_arguments_checked() -> None:
    exc = RateLimitError("slow down", retry_after=7200.0)
    assert retry_delay(exc, max_delay_seconds=3600) == 3600.0
    assert retry_delay(RateLimitError("x"), default_seconds=5, max_delay_seconds=2) == 2.0
    for bad in (-1.0, float("nan"), float("inf"), True):
        with pytest.raises(ConfigurationError):
            retry_delay(exc, max_delay_seconds=bad)
        with pytest.raises(ConfigurationError):
            prefect_retry_options(max_delay_seconds=bad)
    with pytest.raises(ConfigurationError):
        prefect_retry_options(retries=-1)


def _failed(exc: BaseException) -> Any:
    """The shape of the Failed state Prefect hands to ``retry_condition_fn``."""
    return SimpleNamespace(data=exc)


def test_prefect_options_hand_over_the_delay_of_the_failing_run() -> None:
    options = prefect_retry_options(retries=3, max_delay_seconds=30, default_seconds=10)
    assert options["retries"] == 3
    delays, should_retry = options["retry_delay_seconds"], options["retry_condition_fn"]
    assert isinstance(delays, list) and list(delays) == [10.0] and delays[0] == 10.0
    assert should_retry(None, None, _failed(RateLimitError("x", retry_after=12.5)))
    assert delays[0] == 12.5 and delays[min(2, len(delays) - 1)] == 12.5
    assert should_retry(None, None, _failed(RateLimitError("x", retry_after=900)))
    assert delays[0] == 30.0  # capped
    assert not should_retry(None, None, _failed(AuthenticationError("bad key")))
    assert not should_retry(None, None, SimpleNamespace(data=None))
    wrapped = SimpleNamespace(data=SimpleNamespace(result=GateError("down", backend="redis")))
    assert should_retry(None, None, wrapped) and delays[0] == 10.0
    assert list(pickle.loads(pickle.dumps(delays))) == [10.0]


def test_concurrent_task_runs_do_not_see_each_others_delay() -> None:
    options = prefect_retry_options()
    delays, should_retry = options["retry_delay_seconds"], options["retry_condition_fn"]
    seen: dict[float, float] = {}
    both_decided = threading.Barrier(2)

    def task_run(retry_after: float) -> None:
        should_retry(None, None, _failed(RateLimitError("x", retry_after=retry_after)))
        both_decided.wait()
        seen[retry_after] = delays[0]

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(task_run, s))
               for s in (1.0, 2.0)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {1.0: 1.0, 2.0: 2.0}


def test_dagster_retry_turns_a_rate_limit_into_retry_requested() -> None:
    dagster = pytest.importorskip("dagster")
    cause = RateLimitError("slow down", retry_after=42.0)
    with pytest.raises(dagster.RetryRequested) as raised, dagster_retry(max_retries=7):
        raise cause
    assert raised.value.seconds_to_wait == 42.0 and raised.value.max_retries == 7
    assert raised.value.__cause__ is cause
    with pytest.raises(dagster.RetryRequested) as capped, dagster_retry(max_delay_seconds=1):
        raise cause
    assert capped.value.seconds_to_wait == 1.0


@pytest.mark.parametrize("exc", [AuthenticationError("bad key"), ValueError("a bug")])
def test_dagster_retry_lets_everything_else_through(exc: Exception) -> None:
    with pytest.raises(type(exc)) as raised, dagster_retry():
        raise exc
    assert raised.value is exc


@pytest.mark.parametrize(("exc", "says"), [
    (AuthenticationError("bad key"), "AuthenticationError, a refused key, user agent or proxy "
                                     "credentials: fix them, then run again"),
    (QuotaExceededError("cap", retry_after=5400.0), "QuotaExceededError, the quota is spent "
                                                    "until its period ends, in 1.5 h: run again after that"),
    (QuotaExceededError("402"), "QuotaExceededError, the provider's quota is spent: run again "
                                "once it resets (your plan says when)"),
    (GateError("refused", backend="redis", permanent=True), "GateError, the gate refused its setting"),
    (ConfigurationError("bad"), "ConfigurationError, fix the configuration"),
])
def test_an_error_not_retried_says_why_and_what_to_do(exc: Exception, says: str) -> None:
    assert (not_retried(exc) or "").startswith(f"not retried: {says}")
    assert not prefect_retry_options()["retry_condition_fn"](None, None, _failed(exc))
    assert exc.__notes__ == [not_retried(exc)]  # added once, though asked twice below
    with pytest.raises(type(exc)), dagster_retry():
        raise exc
    assert exc.__notes__ == [not_retried(exc)]


@pytest.mark.parametrize("exc", [RateLimitError("x", retry_after=1.0), ValueError("a bug"),
                                 GateError("down", backend="redis")])
def test_only_errors_not_retried_get_a_note(exc: Exception) -> None:
    assert not_retried(exc) is None
    prefect_retry_options()["retry_condition_fn"](None, None, _failed(exc))
    assert not hasattr(exc, "__notes__")


def test_docstring_examples_run() -> None:
    import doctest

    import geotoolkit.frontends.orchestrators

    result = doctest.testmod(geotoolkit.frontends.orchestrators)
    assert result.failed == 0 and result.attempted > 0
