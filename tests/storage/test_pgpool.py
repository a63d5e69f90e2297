"""The PostgreSQL engine's pool (`pgpool.Pool`, on psycopg_pool), against the server
named by ASSOCDB_TEST_POSTGRES_URL: direct connections until one succeeds, its bound,
and a closed pool. (A refused server: test_postgres.py and the outage tests.)"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from assocdb import InvalidRequest, Unavailable
from assocdb.storage.pgconn import parse_url
from assocdb.storage.pgpool import Pool
from tests.support.stores import postgres_url, require

pytest.importorskip("psycopg_pool")
psycopg = pytest.importorskip("psycopg")


@pytest.fixture
def made() -> list[tuple[Any, bool]]:
    return []


@pytest.fixture
def pool(made: list[tuple[Any, bool]]) -> Iterator[Pool]:
    require("postgres")
    settings = parse_url(postgres_url("pool"))
    opened = Pool(settings, 2.0, 1, 0.3, lambda conn, pooled: made.append((conn, pooled)))
    yield opened
    opened.close()


def test_the_first_connection_is_direct_and_then_the_pool_lends(
    pool: Pool, made: list[tuple[Any, bool]]
) -> None:
    first = pool.get()
    assert made == [(first, False)]
    pool.put(first)
    assert first.closed  # a direct connection serves one caller
    second = pool.get()
    assert made[1] == (second, True)
    pool.put(second)
    assert pool.get() is second  # idle in the pool, lent again
    pool.put(second)
    assert not second.closed


def test_a_caller_waits_for_a_busy_pool_then_is_unavailable(pool: Pool) -> None:
    pool.put(pool.get())  # the direct one: from now on the pool lends
    held = pool.get()
    started = time.monotonic()
    with pytest.raises(Unavailable, match=r"no free database connection within 0\.3 s"):
        pool.get()
    assert time.monotonic() - started >= 0.3
    pool.put(held)
    assert pool.get() is held


def test_a_closed_pool_lends_nothing(pool: Pool) -> None:
    pool.close()
    with pytest.raises(InvalidRequest, match="closed"):
        pool.get()


def test_a_long_wait_leaves_the_pool_few_timed_out_waiters() -> None:
    """A caller waits for the pool in slices (to see `_refused` soon), and each slice
    leaves psycopg_pool a timed-out waiter (~3 KB) until a connection comes back: the
    slices grow, so a long wait (the maintenance pool's is 600 s) leaves a few dozen,
    not one every 50 ms."""
    require("postgres")
    pool = Pool(parse_url(postgres_url("pool")), 2.0, 1, 3.0, lambda conn, pooled: None)
    try:
        pool.put(pool.get())  # the direct one: from now on the pool lends
        held = pool.get()
        with pytest.raises(Unavailable):
            pool.get()
        assert pool._pool.get_stats()["requests_waiting"] <= 10  # 60 at a fixed 50 ms
        pool.put(held)
    finally:
        pool.close()


class Relay:
    """A TCP relay to the test server, which can be cut: a server that went away."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.accepting = threading.Thread(target=self._accept, daemon=True)
        self.accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # cut
                return
            server = socket.create_connection(self.target)
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                b.sendall(data)

    def cut(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        self.listener.close()
        self.accepting.join()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def test_a_server_lost_behind_an_empty_pool_is_reported_without_the_wait() -> None:
    """The pool's idle connection died with the server and was dropped (no stale
    retry renewed anything): a caller that waits on the pool learns the server's own
    error as soon as the pool's worker fails to connect, not at the end of its wait."""
    require("postgres")
    url = urlsplit(postgres_url("pool"))
    relay = Relay(url.hostname or "127.0.0.1", url.port or 5432)
    netloc = f"{url.username}@127.0.0.1:{relay.port}"
    settings = parse_url(urlunsplit((url.scheme, netloc, url.path, url.query, "")))
    pool = Pool(settings, 2.0, 2, 20.0, lambda conn, pooled: None)
    try:
        pool.put(pool.get())  # the direct one
        pool.put(pool.get())  # a pooled one, idle now
        relay.cut()
        dead = pool.get()
        with pytest.raises(psycopg.OperationalError):
            dead.execute("SELECT 1")
        pool.put(dead)  # the pool drops it: empty, nothing renewed
        started = time.monotonic()
        with pytest.raises(Unavailable, match="refused"):
            pool.get()
        assert time.monotonic() - started < 10  # not the pool's 20 s wait
    finally:
        pool.close()
