import pickle

import pytest

from geotoolkit import errors


def test_tree_and_retriable_flags() -> None:
    e = errors
    assert issubclass(e.ConfigurationError, ValueError)
    assert issubclass(e.QueryError, ValueError) and issubclass(e.QueryError, e.ProviderError)
    assert issubclass(e.ProviderUnavailableError, OSError)
    retriable = {cls for cls in vars(e).values()
                 if isinstance(cls, type) and issubclass(cls, e.GeotoolkitError) and cls.retriable}
    assert retriable == {e.RateLimitError, e.ProviderUnavailableError, e.GateError}


def test_rate_limit_error_carries_retry_after() -> None:
    exc = errors.RateLimitError("slow down", retry_after=12.0, provider="nominatim", status_code=429)
    assert (exc.retry_after, exc.provider, exc.status_code) == (12.0, "nominatim", 429)
    assert isinstance(exc, errors.GeotoolkitError) and exc.retriable


def _every_error() -> list[errors.GeotoolkitError]:
    """One instance of each error class, every attribute set to a value of its own."""
    from geotoolkit.store.base import StoreError

    provider = {"provider": "opencage", "status_code": 418}
    return [
        errors.GeotoolkitError("base"), errors.ConfigurationError("bad option"),
        errors.ProviderError("odd", **provider), errors.QueryError("bad query", **provider),
        errors.AuthenticationError("no key", **provider), errors.QuotaExceededError("cap", **provider),
        errors.RateLimitError("slow down", retry_after=12.5, **provider),
        errors.ProviderUnavailableError("down", **provider),
        errors.ProviderResponseError("unparsable", raw="<html>", **provider),
        errors.GateError("gate down", backend="redis"), errors.ExportError("disk full"),
        StoreError("cache down", backend="postgres"),
    ]


@pytest.mark.parametrize("error", _every_error(), ids=lambda e: type(e).__name__)
def test_every_error_survives_pickling_with_its_attributes(error: errors.GeotoolkitError) -> None:
    """Errors travel: a dask worker or an orchestrator task pickles what it raised, and the
    caller must get the same class back (dask sends a plain ``Exception(repr)`` otherwise)."""
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert (back.args, vars(back), back.retriable) == (error.args, vars(error), error.retriable)


def test_every_error_class_is_covered_by_the_pickling_test() -> None:
    classes = {getattr(errors, name) for name in errors.__all__}
    assert classes <= {type(e) for e in _every_error()}


def test_response_error_keeps_a_bounded_raw_prefix() -> None:
    assert len(errors.ProviderResponseError("bad", raw="x" * 5000).raw) == 1000


def test_docstring_draws_the_tree() -> None:
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        assert name in doc, name
