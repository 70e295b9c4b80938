"""Shared fixtures: the URLs of the Redis and PostgreSQL servers used by integration tests.

``GEOTOOLKIT_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/15``) and
``GEOTOOLKIT_TEST_POSTGRES_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``).
An unreachable server skips its tests, except in CI (``CI=true``) where it fails them.
Mark such tests ``@pytest.mark.redis`` / ``@pytest.mark.postgres``.
"""

from __future__ import annotations

import os

import pytest

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"
DEFAULT_POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def _unavailable(what: str, exc: BaseException) -> None:
    message = f"{what} unreachable: {type(exc).__name__}: {exc}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A reachable Redis URL (a scratch database: tests delete what they write)."""
    url = os.environ.get("GEOTOOLKIT_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        _unavailable("Redis", exc)
    return url


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """A reachable PostgreSQL DSN (tests only touch their own rows)."""
    dsn = os.environ.get("GEOTOOLKIT_TEST_POSTGRES_DSN", DEFAULT_POSTGRES_DSN)
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=1) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        _unavailable("PostgreSQL", exc)
    return dsn
