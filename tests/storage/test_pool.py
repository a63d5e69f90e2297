"""The bounded connection pool of the MySQL engine (`mysqlpool.Pool`), on plain
objects standing for connections: its bound, its waits, and what it closes."""

from __future__ import annotations

import threading
import time

import pytest

from assocdb.core.errors import InvalidRequest, Unavailable
from assocdb.storage.mysqlpool import Pool
from tests.support.helpers import wait_until


class Conn:
    """A stand-in connection that records whether it was closed."""

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_an_idle_connection_is_lent_again_and_a_broken_one_is_closed() -> None:
    pool = Pool(Conn, 2, 1.0)
    first, reused = pool.get()
    assert not reused
    pool.put(first, broken=False)
    again, reused = pool.get()
    assert again is first
    assert reused
    pool.put(again, broken=True)
    assert first.closed
    fresh, reused = pool.get()
    assert fresh is not first
    assert not reused


def test_no_more_than_size_are_lent_and_a_caller_waits_its_timeout() -> None:
    pool = Pool(Conn, 2, 0.2)
    a, _ = pool.get()
    pool.get()
    start = time.monotonic()
    with pytest.raises(Unavailable, match="no free database connection"):
        pool.get()
    assert time.monotonic() - start >= 0.2
    pool.put(a, broken=False)
    assert pool.get()[0] is a


def test_a_waiting_caller_gets_the_connection_given_back() -> None:
    pool = Pool(Conn, 1, 30.0)
    held, _ = pool.get()
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(pool.get()[0]))
    waiter.start()
    wait_until(lambda: pool._waiting == 1)
    pool.put(held, broken=False)
    waiter.join(10)
    assert got == [held]


def test_a_failed_connect_frees_its_slot() -> None:
    def refuse() -> Conn:
        raise Unavailable("refused")

    pool = Pool(refuse, 1, 0.1)
    for _ in range(3):  # the slot came back each time: no wait, the connect's own error
        with pytest.raises(Unavailable, match="refused"):
            pool.get()


def test_a_closed_pool_closes_what_comes_back_and_lends_nothing() -> None:
    pool = Pool(Conn, 2, 1.0)
    idle, _ = pool.get()
    lent, _ = pool.get()
    pool.put(idle, broken=False)
    pool.close()
    assert idle.closed
    pool.put(lent, broken=False)
    assert lent.closed
    with pytest.raises(InvalidRequest):
        pool.get()
