"""Run geotoolkit under an orchestrator: a rate limit becomes a scheduled retry.

In non-blocking mode (``max_wait_seconds=``) a batch that would have to wait longer
than that budget -- a fleet-wide pause on the gate, or a ``Retry-After`` -- raises
:class:`~geotoolkit.errors.RateLimitError` with ``retry_after`` (seconds) instead of
sleeping. Every row settled so far is already in the result cache, so the rerun
sends only the rest; a row still failing goes on with the attempts it made (the cache
keeps them too), so after ``max_attempts`` in all it is failed and the batch ends
(docs/orchestrators.md). The helpers here hand ``retry_after`` to the orchestrator, so
it frees the worker slot and runs the task again when the provider is ready:

- :func:`retry_delay`: the delay for any exception (``None``: do not retry);
- :func:`not_retried`: why a geotoolkit error is not retried, and what to do (added to
  the exception as a note, and logged by Prefect's task);
- :func:`prefect_retry_options`: ``@task(**prefect_retry_options())`` for Prefect 3;
- :func:`dagster_retry`: ``with dagster_retry(): ...`` inside a Dagster op, which
  raises ``dagster.RetryRequested(seconds_to_wait=...)``.

``max_delay_seconds`` caps the delay handed to the orchestrator (tests use a tiny
cap to run fast). A rerun that comes before the gate's pause is over raises again
at once, without sending anything, and costs one retry.

Neither Prefect nor Dagster is imported until a helper needs it.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from geotoolkit.errors import (
    AuthenticationError,
    ConfigurationError,
    GateError,
    GeotoolkitError,
    QuotaExceededError,
    RateLimitError,
)
from geotoolkit.store.base import StoreError

__all__ = ["dagster_retry", "not_retried", "prefect_retry_options", "retry_delay"]

#: Delay when a retriable error carries no hint (a gate or cache outage, a 429 without Retry-After).
DEFAULT_DELAY_SECONDS = 60.0


def _check_seconds(name: str, value: float) -> float:
    if isinstance(value, bool) or not (math.isfinite(value) and value >= 0):
        raise ConfigurationError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def retry_delay(
    exc: BaseException,
    *,
    max_delay_seconds: float | None = None,
    default_seconds: float = DEFAULT_DELAY_SECONDS,
) -> float | None:
    """Seconds to wait before running a batch again after ``exc``; ``None``: do not retry.

    A :class:`~geotoolkit.errors.RateLimitError` gives its ``retry_after``; another
    retriable geotoolkit error (a gate or cache outage) gives ``default_seconds``.
    Anything else -- bad configuration, a refused key, an exhausted quota, a gate
    that refuses its setting (``GateError.permanent``: credentials, a database or db
    index that does not exist), a bug -- is not retried. The delay is capped at ``max_delay_seconds``.

    Examples
    --------
    >>> retry_delay(RateLimitError("slow down", retry_after=120.0))
    120.0
    >>> retry_delay(RateLimitError("slow down", retry_after=120.0), max_delay_seconds=5)
    5.0
    >>> retry_delay(ValueError("bad input")) is None
    True
    """
    default = _check_seconds("default_seconds", default_seconds)
    if not isinstance(exc, GeotoolkitError) or not exc.retriable:
        return None
    delay = default
    if isinstance(exc, RateLimitError) and exc.retry_after is not None \
            and math.isfinite(exc.retry_after):
        delay = max(0.0, float(exc.retry_after))
    if max_delay_seconds is not None:
        delay = min(delay, _check_seconds("max_delay_seconds", max_delay_seconds))
    return delay


def not_retried(exc: BaseException) -> str | None:
    """Why an orchestrator must not retry ``exc``, and what to do; ``None``: not ours to say.

    The helpers below add it to the exception as a note (shown in tracebacks, Dagster's
    failure event) and log it (Prefect), so a task that stopped with retries left says why.

    Examples
    --------
    >>> not_retried(AuthenticationError("bad key"))  # doctest: +ELLIPSIS
    'not retried: AuthenticationError, a refused key, user agent or proxy credentials: fix ...'
    >>> not_retried(RateLimitError("slow down", retry_after=5.0)) is None
    True
    """
    if not isinstance(exc, GeotoolkitError) or retry_delay(exc) is not None:
        return None
    if isinstance(exc, AuthenticationError):
        why = "a refused key, user agent or proxy credentials: fix them, then run again"
    elif isinstance(exc, QuotaExceededError):
        after = exc.retry_after
        why = (f"the quota is spent until its period ends, in {after / 3600:.1f} h: run again "
               "after that" if after is not None and math.isfinite(after) else
               "the provider's quota is spent: run again once it resets (your plan says when)")
    elif isinstance(exc, GateError) and exc.permanent:
        why = "the gate refused its setting: fix the gate URL (credentials, database, db index)"
    elif isinstance(exc, StoreError) and exc.permanent:
        why = "the cache refused its setting: fix the cache URL or path (credentials, database, file)"
    elif isinstance(exc, ConfigurationError):
        why = "fix the configuration, then run again"
    else:
        why = "a retry cannot fix it"
    return f"not retried: {type(exc).__name__}, {why}"


def _explain(exc: BaseException) -> str | None:
    """Add :func:`not_retried`'s sentence to ``exc`` as a note (once); return it."""
    note = not_retried(exc)
    if note is not None and note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)
    return note


def _exception_of(state: Any) -> BaseException | None:
    """The exception a failed Prefect state holds, if any (without touching storage)."""
    data = getattr(state, "data", None)
    if isinstance(data, BaseException):  # a raised exception: Failed(data=exc)
        return data
    inner = getattr(data, "result", None)  # a result record wrapping it
    return inner if isinstance(inner, BaseException) else None


class _RetryAfterDelays(list[float]):
    """Prefect's ``retry_delay_seconds``, read right after ``retry_condition_fn`` ran.

    Prefect 3 takes a task's retry delays from its definition: the engine asks
    ``retry_condition_fn`` whether to retry, then reads ``retry_delay_seconds[n]``.
    This list answers with the delay the condition found on the exception of
    *this* task run (a context variable: concurrent runs do not mix), and holds
    ``[default]`` for anything that reads it as a plain list.
    """

    def __init__(self, max_delay_seconds: float | None, default_seconds: float) -> None:
        super().__init__([default_seconds])
        self.max_delay_seconds, self.default_seconds = max_delay_seconds, default_seconds
        self._pending: contextvars.ContextVar[float] = contextvars.ContextVar(
            "geotoolkit_retry_delay")

    def should_retry(self, task: Any, task_run: Any, state: Any) -> bool:
        """Prefect's ``retry_condition_fn``: retry retriable errors, remember their delay."""
        exc = _exception_of(state) or Exception()
        delay = retry_delay(exc, max_delay_seconds=self.max_delay_seconds,
                            default_seconds=self.default_seconds)
        if delay is None:
            note = _explain(exc)
            if note is not None and task_run is not None:
                from prefect.logging.loggers import task_run_logger

                task_run_logger(task_run, task).error(note)
            return False
        self._pending.set(delay)
        return True

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return super().__getitem__(index)
        return self._pending.get(super().__getitem__(index))

    def __reduce__(self) -> Any:
        return (type(self), (self.max_delay_seconds, self.default_seconds))


def prefect_retry_options(
    retries: int = 10,
    *,
    max_delay_seconds: float | None = 3600.0,
    default_seconds: float = DEFAULT_DELAY_SECONDS,
) -> dict[str, Any]:
    """Keyword arguments for Prefect 3's ``@task``: retry after the delay a batch asks for.

    A task that raises ``RateLimitError(retry_after=...)`` (non-blocking mode) is
    put in ``AwaitingRetry`` for ``retry_after`` seconds (at most
    ``max_delay_seconds``); other retriable geotoolkit errors wait
    ``default_seconds``; anything else fails the task at once, and the task's log says
    why and what to do (:func:`not_retried`).

    Parameters
    ----------
    retries
        How many reruns Prefect allows the task.
    max_delay_seconds
        The longest delay handed to Prefect (``None``: no cap).
    default_seconds
        The delay when the error carries none.

    Examples
    --------
    A task that resumes from the cache after each rate limit (a full, tested
    recipe is in ``docs/recipes.md``)::

        @prefect.task(**prefect_retry_options(retries=20))
        def geocode_file(path: str) -> None:
            frame = pd.read_csv(path)
            frame.geocode.run("address", provider=..., cache=..., max_wait_seconds=30)

    >>> sorted(prefect_retry_options(retries=5))
    ['retries', 'retry_condition_fn', 'retry_delay_seconds']
    """
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigurationError(f"retries must be an integer >= 0, got {retries!r}")
    cap = None if max_delay_seconds is None else _check_seconds("max_delay_seconds",
                                                                  max_delay_seconds)
    delays = _RetryAfterDelays(cap, _check_seconds("default_seconds", default_seconds))
    return {"retries": retries, "retry_delay_seconds": delays,
            "retry_condition_fn": delays.should_retry}


@contextmanager
def dagster_retry(
    max_retries: int = 10,
    *,
    max_delay_seconds: float | None = 3600.0,
    default_seconds: float = DEFAULT_DELAY_SECONDS,
) -> Iterator[None]:
    """Inside a Dagster op: turn a retriable geotoolkit error into ``RetryRequested``.

    ``RetryRequested(max_retries=max_retries, seconds_to_wait=delay)`` is raised
    from the original exception, with the delay of :func:`retry_delay`; other
    exceptions pass through, a geotoolkit error with a note saying why it is not
    retried and what to do (:func:`not_retried`), shown in the op's failure.

    Examples
    --------
    In an op (a full, tested recipe is in ``docs/recipes.md``)::

        @dagster.op
        def geocode_file(path: str) -> None:
            with dagster_retry(max_retries=20):
                pd.read_csv(path).geocode.run("address", provider=..., max_wait_seconds=30)
    """
    try:
        yield
    except GeotoolkitError as exc:
        delay = retry_delay(exc, max_delay_seconds=max_delay_seconds,
                            default_seconds=default_seconds)
        if delay is None:
            _explain(exc)
            raise
        from dagster import RetryRequested

        raise RetryRequested(max_retries=max_retries, seconds_to_wait=delay) from exc
