"""Gate fixtures: one ``store`` per backend, each able to open several gate instances.

A ``Store`` opens gate instances on one shared state (for ``memory``, the state is
the process, so every "instance" is the same object), gives other processes a URL
to reach it (``None`` for memory), and dumps everything it holds as text so tests
can scan it for secrets. Each test gets a unique provider host, so its gate keys
never collide with another run's; the store deletes them afterwards.

``store.timeline()`` gives a gate and a way to let time pass for its shared
values and counters without waiting: a FakeClock for the host-clock gates
(memory, SQLite), the stored expiries moved into the past for the server gates
(Redis, PostgreSQL). A gate's primitive store is ``gate.store``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from geotoolkit.clock import FakeClock
from geotoolkit.gate import Gate, MemoryGate, SQLiteGate

#: The PostgreSQL gate's tables.
TABLES = ("geotoolkit_gate", "geotoolkit_gate_counters", "geotoolkit_gate_usage",
          "geotoolkit_gate_values")

#: ``advance(key, seconds)``: let ``seconds`` pass for the shared values of ``key``.
Advance = Callable[[str, float], None]


@dataclass
class Store:
    name: str
    #: A URL for ``open_gate`` in another process; ``None`` when in-process only.
    url: str | None
    _open: Callable[[], Gate]
    #: Everything the store holds (keys, values, file bytes), as text.
    dump: Callable[[], str]
    #: A gate instance and how to let time pass for its values (see the module docstring).
    _timeline: Callable[[], tuple[Gate, Advance]] | None = None
    opened: list[Gate] = field(default_factory=list)

    def open(self) -> Gate:
        """A gate instance on this store (closed at teardown)."""
        gate = self._open()
        self.opened.append(gate)
        return gate

    def timeline(self) -> tuple[Gate, Advance]:
        """A gate instance (closed at teardown) and its ``advance(key, seconds)``."""
        assert self._timeline is not None
        gate, advance = self._timeline()
        self.opened.append(gate)
        return gate, advance

    def close_all(self) -> None:
        for gate in self.opened:
            gate.close()
        self.opened.clear()


@pytest.fixture
def host() -> str:
    """A provider host unique to this test: every gate key of the test derives from it."""
    return f"test-{uuid.uuid4().hex[:12]}.example"


def _advancing(clock: FakeClock) -> Advance:
    def advance(_key: str, seconds: float) -> None:
        while seconds > 0:  # FakeClock.advance moves at most a day at a time
            step = min(seconds, 86_400.0)
            clock.advance(step)
            seconds -= step

    return advance


def _memory_store() -> Iterator[Store]:
    gate = MemoryGate()

    def dump() -> str:
        held = gate.store
        return "\n".join([*(f"{k} {v!r}" for k, v in held.pacing.items()), repr(held.counters),
                          repr(held.shared)])

    def timeline() -> tuple[Gate, Advance]:
        clock = FakeClock()
        return MemoryGate(clock=clock), _advancing(clock)

    store = Store("memory", None, lambda: gate, dump, timeline)
    yield store
    store.close_all()


def _sqlite_store(tmp_path: Path) -> Iterator[Store]:
    path = tmp_path / "gate.sqlite"

    def dump() -> str:
        # The main file and its WAL: committed rows may still live in the WAL only.
        return "\n".join(p.read_bytes().decode("latin-1") for p in sorted(tmp_path.glob("gate.sqlite*")))

    def timeline() -> tuple[Gate, Advance]:
        clock = FakeClock()
        return SQLiteGate(path, clock=clock), _advancing(clock)

    store = Store("sqlite", f"sqlite:///{path}", lambda: SQLiteGate(path), dump, timeline)
    yield store
    store.close_all()


def _redis_store(url: str, host: str) -> Iterator[Store]:
    import redis

    from geotoolkit.gate.redis import RedisGate

    # latin-1 decodes any bytes: the dump shows every key and value, whatever they hold.
    client = redis.Redis.from_url(
        url, socket_connect_timeout=2, socket_timeout=2, decode_responses=True, encoding="latin-1"
    )

    def dump() -> str:
        lines: list[str] = []
        for name in client.scan_iter(match="*", count=1000):
            lines.append(str(name))
            kind = client.type(name)
            if kind == "hash":
                lines.extend(f"{k!s}={v!s}" for k, v in client.hgetall(name).items())
            elif kind == "string":
                lines.append(str(client.get(name)))
        return "\n".join(lines)

    def advance(key: str, seconds: float) -> None:
        name = RedisGate.values_key(key)
        for field_, entry in client.hgetall(name).items():
            expires_at, _, value = str(entry).partition("|")
            client.hset(name, field_, f"{float(expires_at) - seconds:.6f}|{value}")
        for counter in [*client.scan_iter(match=RedisGate.counter_key(key, "*")),
                        *client.scan_iter(match=RedisGate.counter_key(key, "*", durable=True))]:
            left = client.pttl(counter) - seconds * 1000
            if left > 0:
                client.pexpire(counter, int(left))
            else:
                client.delete(counter)

    store = Store("redis", url, lambda: RedisGate(url), dump, lambda: (RedisGate(url), advance))
    try:
        yield store
    finally:
        store.close_all()
        stale = list(client.scan_iter(match=f"geotoolkit:{host}:*"))
        if stale:
            client.delete(*stale)
        client.close()


def _postgres_store(dsn: str, host: str) -> Iterator[Store]:
    import psycopg

    from geotoolkit.gate.postgres import PostgresGate, init_schema

    init_schema(dsn)

    def dump() -> str:
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = [row for table in TABLES
                    for row in conn.execute(f"SELECT t::text FROM {table} t").fetchall()]
        return "\n".join(row[0] for row in rows)

    def advance(key: str, seconds: float) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for table in TABLES[1:]:
                conn.execute(f"UPDATE {table} SET expires_at = expires_at - %s WHERE key = %s",
                             (seconds, key))

    store = Store("postgres", dsn, lambda: PostgresGate(dsn), dump,
                  lambda: (PostgresGate(dsn), advance))
    try:
        yield store
    finally:
        store.close_all()
        with psycopg.connect(dsn, autocommit=True) as conn:
            for table in TABLES:
                conn.execute(f"DELETE FROM {table} WHERE key LIKE %s", (f"geotoolkit:{host}:%",))


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path, host: str) -> Iterator[Store]:
    """Each gate backend in turn (server backends skip when their server is down)."""
    name: str = request.param
    if name == "memory":
        yield from _memory_store()
    elif name == "sqlite":
        yield from _sqlite_store(tmp_path)
    elif name == "redis":
        yield from _redis_store(request.getfixturevalue("redis_url"), host)
    else:
        yield from _postgres_store(request.getfixturevalue("postgres_dsn"), host)


# -- a throwaway redis-server, to kill and restart ------------------------------------


class RedisServer:
    """A throwaway ``redis-server`` on a free loopback port (no persistence)."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *extra: str) -> None:
        """Start the server (``extra``: more of its command line's arguments)."""
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.wait_until_up()

    def wait_until_up(self, timeout: float = 10.0) -> None:
        """Wait for the server's own "Ready to accept connections" line, then ping it once."""
        import redis

        assert self.proc is not None and self.proc.stdout is not None
        output = self.proc.stdout
        self._log: list[bytes] = []
        self._logged = threading.Condition()

        def drain() -> None:  # read the log to the end, so the server never blocks on it
            with output:
                for line in output:
                    with self._logged:
                        self._log.append(line)
                        self._logged.notify_all()

        threading.Thread(target=drain, daemon=True).start()
        if not self.wait_for_log(b"Ready to accept connections", timeout):
            raise TimeoutError(f"redis-server on port {self.port} did not get ready "
                               f"(exit code {self.proc.poll()})")
        client = redis.Redis.from_url(self.url, socket_connect_timeout=2, socket_timeout=2)
        try:
            assert client.ping()
        finally:
            client.close()

    def wait_for_log(self, text: bytes, timeout: float = 10.0) -> bool:
        """Wait (bounded) for a line of the server's log holding ``text``."""
        with self._logged:
            return self._logged.wait_for(lambda: any(text in line for line in self._log), timeout)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("redis-server is not installed")
        pytest.skip("redis-server is not installed")
    server = RedisServer(binary)
    try:
        yield server
    finally:
        server.stop()
