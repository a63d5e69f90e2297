"""MySQL graphs on MyRocks (`?engine=rocksdb`): the option, the tables, and the
write turn that stands in for InnoDB's gap locks.

Run when ASSOCDB_TEST_MYROCKS_URL names a MariaDB server that loaded MyRocks
(`.ci/run` starts one on port 3310); skipped cleanly otherwise. The Graph API's
core tests run on MyRocks in `tests/api/test_graph_myrocks.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from assocdb import InvalidRequest
from assocdb.core.merge import State
from assocdb.storage.mysql import MySQLBackend
from assocdb.storage.mysqlpool import parse_url
from tests.storage import test_mysql
from tests.support.stores import Stores, server_url

# -- pure: the URL option ----------------------------------------------------------------


def test_the_engine_is_a_url_option() -> None:
    assert parse_url("mysql://h/g").engine == "InnoDB"
    assert parse_url("mysql://h/g?engine=rocksdb").engine == "ROCKSDB"
    assert parse_url("mysql://h/g?engine=InnoDB").engine == "InnoDB"
    backend = MySQLBackend(parse_url("mysql://h/g?engine=rocksdb"), 1)  # no connection yet
    try:
        assert parse_url(backend.spec()["url"]).engine == "ROCKSDB"
    finally:
        backend.close()


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="unknown mysql URL engine 'myisam'"):
        parse_url("mysql://h/g?engine=myisam")


# -- against a server with MyRocks ---------------------------------------------------------


@pytest.fixture
def rocks(tmp_path: Path) -> Iterator[Stores]:
    stores = Stores("myrocks", tmp_path)
    yield stores
    stores.close()


@pytest.fixture
def backend(rocks: Stores) -> Iterator[MySQLBackend]:
    url, _ = rocks.location("b")
    opened = MySQLBackend.open(str(url), 2)
    yield opened
    opened.close()


def test_every_table_is_myrocks(backend: MySQLBackend) -> None:
    backend.apply(0, [(1, 5, 2, State.NORMAL, 1, 1, None)], ())
    schema = backend._schemas[0].strip("`")
    rows = backend._query(
        0,
        "SELECT table_name, engine FROM information_schema.tables WHERE table_schema = %s",
        (schema,),
    )
    assert len(rows) >= 6
    assert {engine for _, engine in rows} == {"ROCKSDB"}


def test_concurrent_applies_on_the_same_keys_keep_rows_and_counts_exact(
    backend: MySQLBackend,
) -> None:
    """MyRocks locks no absent key: without the shard's write turn two applies of the
    same new edge both count it. The InnoDB test, run on MyRocks."""
    test_mysql.test_concurrent_applies_on_the_same_keys_keep_rows_and_counts_exact(backend)


def test_two_graph_handles_adding_the_same_new_edge_count_it_once(rocks: Stores) -> None:
    """Two backends (two pools, as two processes) add the same absent edge at once,
    many times over: each edge is counted once."""
    url, _ = rocks.location("two")
    first = MySQLBackend.open(str(url), 1)
    second = MySQLBackend.open(str(url), 1)
    try:
        start = threading.Barrier(2)

        def work(backend: MySQLBackend, updated: int) -> None:
            start.wait()
            for id2 in range(1, 61):
                backend.apply(0, [(1, 5, id2, State.NORMAL, id2, updated, None)], ())

        threads = [threading.Thread(target=work, args=(b, n)) for n, b in ((1, first), (2, second))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert first.counts(0, 1, 5).get(State.NORMAL) == 60
        assert first.recount(0, repair=False) == []
    finally:
        first.close()
        second.close()


def test_opening_with_another_engine_is_refused(rocks: Stores, backend: MySQLBackend) -> None:
    name = backend.settings.name
    with pytest.raises(InvalidRequest, match="made with engine ROCKSDB"):
        MySQLBackend.open(server_url("myrocks", name).replace("engine=rocksdb", "engine=innodb"))
