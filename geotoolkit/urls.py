"""Store URLs (gates and caches): one parser for every front end and adapter. Stdlib only.

``memory://``, ``sqlite:///relative/path``, ``sqlite:////absolute/path`` (as in
SQLAlchemy), ``redis://``, ``rediss://``, ``unix://`` (Redis) and ``postgresql://``
or ``postgres://``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from urllib.parse import unquote, urlsplit

from geotoolkit.errors import ConfigurationError
from geotoolkit.redact import redact

__all__ = ["BACKENDS", "CLIENTS", "backend_of", "bad_dsn", "check_userinfo", "client_of",
           "install_extra", "sqlite_path"]

#: The backend each URL scheme selects.
BACKENDS = {"memory": "memory", "sqlite": "sqlite", "redis": "redis", "rediss": "redis",
            "unix": "redis", "postgresql": "postgres", "postgres": "postgres"}

#: The client library a server backend needs, and the extra of geotoolkit that installs it.
CLIENTS = {"redis": ("redis", "redis"), "postgres": ("psycopg", "postgres")}


def install_extra(extra: str) -> str:
    """How to install one of geotoolkit's extras: from its checkout, since the package
    named ``geotoolkit`` on PyPI is an unrelated one (installing the extra by the package's
    name fetches it in a fresh environment).

    >>> print(install_extra("map"))
    pip install -e '.[map]' in geotoolkit's checkout
    """
    return f"pip install -e '.[{extra}]' in geotoolkit's checkout"


@contextlib.contextmanager
def client_of(backend: str, what: str) -> Iterator[None]:
    """Around the import of a server backend's adapter: its client library missing (the
    extra not installed) is a ``ConfigurationError`` naming the extra to install, not a
    ``ModuleNotFoundError`` from deep inside the run. ``what`` names the store
    (``"Redis gate"``).

    In an environment without psycopg, ``open_store("postgresql://...")`` says:
    ``a PostgreSQL cache needs psycopg, which is not installed here: pip install -e
    '.[postgres]' in geotoolkit's checkout``.
    """
    module, extra = CLIENTS[backend]
    try:
        yield
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        raise ConfigurationError(f"a {what} needs {module}, which is not installed here: "
                                 f"{install_extra(extra)}") from exc


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

    Whitespace around the URL (an environment variable filled from a file) is not part
    of the path, as ``backend_of`` reads the scheme without it:

    >>> sqlite_path(" sqlite:////tmp/gate.sqlite\\n")
    '/tmp/gate.sqlite'
    """
    url = url.strip()
    rest = unquote(url.split("://", 1)[1]) if "://" in url else ""
    path = rest[1:] if rest.startswith("/") else rest
    return path or None


def check_userinfo(url: str, what: str) -> None:
    """Refuse a URL whose password holds ``@`` or ``/`` (and for Redis ``?`` or ``#``) as
    they are, not percent-encoded.

    The library then reads the URL wrongly: ``/`` (for redis-py, which parses with
    ``urllib``, ``?`` and ``#`` too) ends the host part inside the password, and a second
    ``@`` is split at the first (libpq) or the last; the pieces become a port, a database
    or a host name to look up (a DNS query holding the password's tail), and turn up in
    the library's error. libpq reads ``?`` and ``#`` in a password right: those pass.
    ``what`` names the URL in the message, which shows none of it. A ``key=value`` DSN
    passes.

    >>> check_userinfo("postgresql://u:p%40ss@db:5432/x?user=me@srv", "gate")
    >>> check_userinfo("postgresql://u:pa#ss@db/x", "gate")
    >>> check_userinfo("redis://:pa/ss@127.0.0.1:6379/0", "Redis gate")
    Traceback (most recent call last):
    ...
    geotoolkit.errors.ConfigurationError: the Redis gate URL (redis://...) has a password \
with @ / ? or # in it as it is: percent-encode it, e.g. urllib.parse.quote(password, safe='') \
(the URL is not shown, in case the rest is a secret)
    """
    text = url.strip() if isinstance(url, str) else ""
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme and _unencoded_userinfo(text, "/" if BACKENDS.get(scheme) == "postgres" else "/?#"):
        raise ConfigurationError(
            f"the {what} URL ({scheme}://...) has a password with @ / ? or # in it as it is: "
            "percent-encode it, e.g. urllib.parse.quote(password, safe='') (the URL is not "
            "shown, in case the rest is a secret)") from None


def _unencoded_userinfo(text: str, ends: str) -> bool:
    """Whether the user info of ``scheme://...`` is ambiguous, the host part ending at ``ends``."""
    rest = text.split("://", 1)[1]
    authority = rest[:min((rest.find(c) for c in ends if c in rest), default=len(rest))]
    if authority.count("@") > 1:
        return True
    if "@" in authority or "@" not in rest or ":" not in authority or authority.endswith("]"):
        return False
    # "user:pass/rest@host": the host "user" with a port "pass", or no host at all.
    host, _, port = authority.rpartition(":")
    return not host or not port.isdigit()


def bad_dsn(dsn: str, what: str, reason: object, secrets: tuple[str | None, ...] = ()) -> ConfigurationError:
    """The error for a DSN its driver could not read, the DSN and the reason redacted.

    The words of a ``key=value`` DSN that are no pair are hidden too: a password with a
    space, not quoted, leaves its tail as one, and the driver's reason names it. Raise it
    outside the ``except`` block of the driver's error, which holds that tail.

    >>> print(bad_dsn("host=db password=hunter2 pw99", "cache",
    ...               'missing "=" after "pw99" in connection info string'))
    bad cache DSN 'host=db password=*** ***': missing "=" after "***" in connection info string \
(quote a value with spaces or quotes in it: password='...')
    """
    hide = [*secrets, *([] if "://" in dsn else [w for w in dsn.split() if "=" not in w])]
    return ConfigurationError(f"bad {what} DSN {redact(dsn, hide)!r}: {redact(reason, hide).strip()} "
                              "(quote a value with spaces or quotes in it: password='...')")
