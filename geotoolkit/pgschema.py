"""A PostgreSQL schema created once per version and marked on its table, when a failed
call dials again (``redial``), and a server's error as text (``error_text``). No driver:
the connection (psycopg's) is passed in, so the gate and the result store share this
without depending on each other.

Every connection used to run its ``CREATE ... IF NOT EXISTS`` statements, which a user
who may not create anything is refused even when all is in place. The statements' digest
is kept as the table's comment instead: a schema carrying it is used as it is (workers
then need only ``SELECT, INSERT, UPDATE, DELETE``), and a change to the statements brings
it up to date, once, under an advisory lock.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

from geotoolkit.redact import redact

__all__ = ["ensure_schema", "error_text", "redial", "refused_setting", "schema_mark"]

#: SQLSTATE insufficient_privilege: only a table's owner may comment on it.
_NOT_OWNER = "42501"

#: Whether the table the session's ``search_path`` finds carries the mark: the one its
#: statements use, not only one in the first schema (a worker whose own schema comes first,
#: ``"$user", public``, uses the tables initialised in ``public``, and creates none).
_MARKED = "SELECT obj_description(to_regclass(%s), 'pg_class') = %s"


def schema_mark(name: str, statements: Sequence[str]) -> str:
    """The comment a schema made by ``statements`` carries: ``name`` and their digest.

    >>> schema_mark("geotoolkit cache schema", ["CREATE TABLE t (k text)"])
    'geotoolkit cache schema 58bccf34db61e0cc'
    """
    return f"{name} {hashlib.sha256(chr(10).join(statements).encode()).hexdigest()[:16]}"


def _marked(conn: Any, table: str, mark: str) -> bool:
    row = conn.execute(_MARKED, (table, mark)).fetchone()
    return bool(row and row[0])


def ensure_schema(conn: Any, *, table: str, mark: str, statements: Sequence[str], lock: int,
                  repair: bool = False, feed: Callable[[], None] = lambda: None) -> None:
    """Run ``statements`` unless ``table`` (as the ``search_path`` finds it) carries ``mark``, under
    the advisory lock ``lock`` and then mark it. ``repair``: run them anyway (a part of the
    schema was found missing, which the mark cannot tell). ``feed`` is called before each
    statement (a client-side deadline per statement). Only the table's owner may mark it:
    refused, the schema stands unmarked and is checked again on the next connection."""
    if not repair and _marked(conn, table, mark):  # in place: nothing to create, nor the right
        return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
        if not repair and _marked(conn, table, mark):  # another session made it meanwhile
            return
        for statement in statements:
            feed()
            conn.execute(statement)
        try:
            with conn.transaction():  # a savepoint: the rest stands without the mark
                conn.execute(f"COMMENT ON TABLE {table} IS '{mark}'")
        except Exception as exc:
            if getattr(exc, "sqlstate", None) != _NOT_OWNER:
                raise


def redial(*, attempt: int, dialled: bool, dropped: bool, timed_out: bool, elapsed: float,
           timeout: float) -> bool:
    """Whether a call that failed dials a new session and runs once more: a session the
    server ended while it was idle (an admin, a restart, a failover) fails the first call
    on it. So: on the first attempt, on a session dialled before the call that the failure
    dropped, not a timeout (a statement or lock deadline: the server is there), within
    the call's deadline. A fresh session's error is the answer. The callers' calls are
    reads, idempotent writes or one transaction lost with the session.

    >>> redial(attempt=1, dialled=True, dropped=True, timed_out=False, elapsed=0.1, timeout=5)
    True
    >>> redial(attempt=1, dialled=False, dropped=True, timed_out=False, elapsed=0.1, timeout=5)
    False
    >>> redial(attempt=2, dialled=True, dropped=True, timed_out=False, elapsed=0.1, timeout=5)
    False
    """
    return attempt == 1 and dialled and dropped and not timed_out and elapsed < timeout


#: What a server answers a setting no retry heals: a password, a role, a database, a host
#: rule, a permission (SQLSTATE classes 28 and 3D, and 42501), a read-only server or role
#: (a hot standby: 25006), a ``search_path`` naming no schema (3F000), a connection
#: parameter or server setting that is refused, SSL required of a server without it (a
#: refused connection carries no SQLSTATE, only libpq's message).
_REFUSED_STATES = ("28", "3D", "42501", "25006", "3F000")
_REFUSED_TEXT = re.compile(r"password authentication failed|(role|database) \S+ does not exist"
                           r"|no pg_hba\.conf entry|permission denied|read-only transaction"
                           r"|invalid (\S+ )+value|invalid value for parameter|bad value for"
                           r"|unrecognized configuration parameter|does not support SSL",
                           re.IGNORECASE)


def refused_setting(exc: BaseException) -> bool:
    """Whether the server refused a setting of the DSN (not an outage): the gate's and the
    cache's errors then say they are permanent.

    >>> refused_setting(Exception('connection failed: FATAL:  database "x" does not exist'))
    True
    >>> refused_setting(Exception('connection is bad: invalid sslmode value: "bogus"'))
    True
    >>> refused_setting(Exception("connection failed: Connection refused"))
    False
    """
    state = getattr(exc, "sqlstate", None) or ""
    return state.startswith(_REFUSED_STATES) or bool(_REFUSED_TEXT.search(str(exc)))


def error_text(exc: BaseException, secrets: Sequence[str | None]) -> str:
    r"""``exc`` as redacted text, without PostgreSQL's CONTEXT lines nor its position in
    the statement (``LINE 2: <the SQL> ^``): the SQL that ran is the gate's or the cache's
    own, not the user's.

    >>> error_text(Exception("no schema\nLINE 2:   CREATE TABLE t (\n  ^\nHINT: h"), [])
    'Exception: no schema\nHINT: h'
    """
    text = str(exc).split("\nCONTEXT:", 1)[0]
    text = re.sub(r"\nLINE \d+:.*?(?=\n(?:DETAIL|HINT):|\Z)", "", text, flags=re.DOTALL)
    return redact(f"{type(exc).__name__}: {text.strip()}", list(secrets))
