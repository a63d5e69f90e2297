"""The PostgreSQL engine's pool (`pgpool.Pool`, on psycopg_pool), against the server
named by ASSOCDB_TEST_POSTGRES_URL: direct connections until one succeeds, its bound,
and a closed pool. (A refused server: test_postgres.py and the outage tests.)"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from assocdb import InvalidRequest, Unavailable
from assocdb.storage.pgconn import parse_url
from assocdb.storage.pgpool import Pool
from tests.support.stores import postgres_url, require

pytest.importorskip("psycopg_pool")


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
