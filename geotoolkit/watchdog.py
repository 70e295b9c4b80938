"""A deadline for a call blocked on a socket whose client library has none. Stdlib only.

psycopg waits for a PostgreSQL answer for as long as it takes: ``statement_timeout`` is
kept by the server, ``tcp_user_timeout`` only fires when the network drops what is sent.
A server that accepts and never answers (a hung backend, a pooler queueing the query, a
stalled disk) would hold a call, and the batch behind it, for ever. ``Watchdog.guard``
shuts the connection's socket down when a call outlives its deadline: the library sees
the connection closed and raises at once.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator

__all__ = ["Watchdog"]

#: An idle watchdog's thread ends after this long (another starts with the next call).
_IDLE_SECONDS = 30.0


class Watchdog:
    """Shuts a socket down when the call guarding it outlives ``seconds``.

    One call at a time (the caller holds its connection's lock); a call of many statements
    calls ``feed`` before each, so the deadline is one statement's, as the server's
    ``statement_timeout``. ``fired`` tells whether the last guarded call was cut short.

    >>> import socket
    >>> a, b = socket.socketpair()
    >>> dog = Watchdog(0.01)
    >>> with dog.guard(a.fileno()):
    ...     a.recv(1)  # nothing ever comes: cut at the deadline
    b''
    >>> dog.fired
    True
    >>> dog.close(); a.close(); b.close()
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.fired = False
        self._cond = threading.Condition()
        self._armed: tuple[int, float] | None = None  # (socket, deadline)
        self._watching = False
        self._closed = False

    @contextlib.contextmanager
    def guard(self, fileno: int) -> Iterator[None]:
        """Cut the socket ``fileno`` down if the block lasts longer than ``seconds``."""
        with self._cond:
            self._armed = (fileno, time.monotonic() + self.seconds)
            self.fired, self._closed = False, False
            if not self._watching:
                self._watching = True
                threading.Thread(target=self._watch, name="geotoolkit-watchdog", daemon=True).start()
            self._cond.notify()
        try:
            yield
        finally:
            with self._cond:
                self._armed = None

    def feed(self) -> None:
        """The guarded call goes on to its next statement: its deadline starts again."""
        with self._cond:
            if self._armed is not None:
                self._armed = (self._armed[0], time.monotonic() + self.seconds)

    def _watch(self) -> None:
        with self._cond:
            while not self._closed:
                if self._armed is None:
                    if not self._cond.wait(_IDLE_SECONDS) and self._armed is None:
                        break
                    continue
                fileno, deadline = self._armed
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                # Still under the lock: the call has not returned, the socket is still its own.
                self._armed, self.fired = None, True
                _shut(fileno)
            self._watching = False

    def close(self) -> None:
        """End the watchdog's thread (the next guarded call starts another)."""
        with self._cond:
            self._closed = True
            self._cond.notify()


def _shut(fileno: int) -> None:
    # The dup is closed, not the caller's socket; shutting it down shuts theirs.
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(fileno)) as sock:
        sock.shutdown(socket.SHUT_RDWR)
