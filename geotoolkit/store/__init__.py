"""Persistent result stores: the cache and checkpoint behind ``df.geocode.run()``.

A store maps a cache key (``"<provider namespace>:<normalised query>"``) to a
settled outcome. Matches and no-matches are kept (no-matches expire after
``no_match_ttl_seconds``); failures never are, so they are retried next time. Beside
them, a row's attempts in a batch not run to its end (``AttemptLog``: memory, SQLite,
PostgreSQL), so that non-blocking reruns go on counting (``geotoolkit.engine.tally``).
Every ``put`` is committed at once, so a killed process loses at most the
requests that were in flight. Chosen by URL, like gates:

- ``None``: the SQLite file ``results.sqlite`` in the user cache directory;
- ``False`` or ``"none"``: no store;
- ``"memory://"``: a dict, for tests and one-off runs;
- ``"sqlite:///relative/path"`` or ``"sqlite:////absolute/path"`` (or a ``Path``);
- ``"postgresql://..."``: a table shared by a team (psycopg 3).

Store failures are raised as :class:`StoreError` (a ``GeotoolkitError``), after
at most ``timeout_seconds`` (a file or row locked by someone else, a hung server):
a store never waits for ever. A PostgreSQL password appears in no error or repr.
Every store implements :class:`ResultStore`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from geotoolkit.clock import Clock
from geotoolkit.errors import ConfigurationError
from geotoolkit.redact import redact
from geotoolkit.store.base import DEFAULT_NO_MATCH_TTL_SECONDS, ResultStore, StoreError
from geotoolkit.store.memory import MemoryStore
from geotoolkit.store.sqlite import SQLiteStore, default_store_path
from geotoolkit.urls import backend_of, check_userinfo, client_of, sqlite_path

__all__ = [
    "DEFAULT_NO_MATCH_TTL_SECONDS",
    "MemoryStore",
    "ResultStore",
    "SQLiteStore",
    "StoreError",
    "default_store_path",
    "open_store",
    "unknown_cache_url",
]


def open_store(
    cache: Any = None,
    *,
    clock: Clock | None = None,
    no_match_ttl_seconds: float | None = DEFAULT_NO_MATCH_TTL_SECONDS,
) -> ResultStore | None:
    """Open the result store named by ``cache`` (see the module docstring).

    A store object (anything with ``get_many``, ``put`` and ``blocking``) is
    passed through unchanged.

    >>> open_store(False) is None
    True
    >>> open_store("memory://")
    MemoryStore(no_match_ttl_seconds=604800.0)
    """
    options: dict[str, Any] = {"clock": clock, "no_match_ttl_seconds": no_match_ttl_seconds}
    if cache is False or (isinstance(cache, str) and cache.strip().lower() == "none"):
        return None
    if cache is None:
        return SQLiteStore(None, **options)
    if isinstance(cache, os.PathLike):
        return SQLiteStore(Path(cache), **options)
    if not isinstance(cache, str):
        if all(hasattr(cache, a) for a in ("get_many", "put", "blocking")):
            store: ResultStore = cache
            return store
        raise ConfigurationError(f"cache must be a URL, a path, None or False, got {cache!r}")
    cache = cache.strip()  # an environment variable filled from a file ends in a newline
    check_userinfo(cache, "cache")
    backend = backend_of(cache)
    if backend == "memory":
        return MemoryStore(**options)
    if backend == "sqlite":
        return SQLiteStore(sqlite_path(cache), **options)
    if backend == "postgres":
        with client_of(backend, "PostgreSQL cache"):
            from geotoolkit.store.postgres import PostgresStore

        return PostgresStore(cache, **options)
    raise unknown_cache_url(cache)


def unknown_cache_url(cache: str) -> ConfigurationError:
    """The refusal of a cache URL naming no store we know: what the flag and the option take.

    >>> print(unknown_cache_url("sqlite:/c.sqlite"))
    unknown cache URL 'sqlite:/c.sqlite': use sqlite:///path, memory://, postgresql://... or \
none (no cache); in Python also None (the default SQLite file) or False
    """
    return ConfigurationError(
        f"unknown cache URL {redact(cache)!r}: use sqlite:///path, memory://, postgresql://... "
        "or none (no cache); in Python also None (the default SQLite file) or False")
