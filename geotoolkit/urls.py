"""Store URLs (gates and caches): one parser for every front end and adapter. Stdlib only.

``memory://``, ``sqlite:///relative/path``, ``sqlite:////absolute/path`` (as in
SQLAlchemy), ``redis://``, ``rediss://``, ``unix://`` (Redis) and ``postgresql://``
or ``postgres://``.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

__all__ = ["BACKENDS", "backend_of", "sqlite_path"]

#: The backend each URL scheme selects.
BACKENDS = {"memory": "memory", "sqlite": "sqlite", "redis": "redis", "rediss": "redis",
            "unix": "redis", "postgresql": "postgres", "postgres": "postgres"}


def backend_of(url: str) -> str | None:
    """The backend a URL names (``"redis"``, ``"postgres"``, ...), ``None`` if unknown.

    >>> backend_of("rediss://gate.internal:6380/0"), backend_of("POSTGRES://db/x")
    ('redis', 'postgres')
    >>> backend_of("ftp://x") is None
    True

    A URL needs ``//`` after its scheme: ``sqlite:/tmp/gate.sqlite`` names no backend
    (its path would be lost, and the default file used in its place).

    >>> backend_of("sqlite:/tmp/gate.sqlite") is None
    True
    """
    try:
        text = url.strip()
        scheme = urlsplit(text).scheme.lower()
    except (ValueError, AttributeError):
        return None
    if not text[len(scheme) + 1:].startswith("//"):
        return None
    return BACKENDS.get(scheme)


def sqlite_path(url: str) -> str | None:
    """The file path of a ``sqlite://`` URL; ``None`` for ``sqlite://`` (the default file).

    >>> sqlite_path("sqlite:///gate.sqlite"), sqlite_path("sqlite:////tmp/a%20b.sqlite")
    ('gate.sqlite', '/tmp/a b.sqlite')
    >>> sqlite_path("sqlite://") is None
    True
    """
    rest = unquote(url.split("://", 1)[1]) if "://" in url else ""
    path = rest[1:] if rest.startswith("/") else rest
    return path or None
