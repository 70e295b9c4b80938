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
    with pytest.raises(errors.GeotoolkitError):
        raise exc


def test_response_error_keeps_a_bounded_raw_prefix() -> None:
    assert len(errors.ProviderResponseError("bad", raw="x" * 5000).raw) == 1000


def test_docstring_draws_the_tree() -> None:
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        assert name in doc, name
