"""The LinkBench stores keep LinkBench's semantics, and agree with each other.

Every semantic test runs against every store: assocdb embedded, the bare
schema on SQLite, and, when ASSOCDB_TEST_MYSQL_URL is set, the bare schema on
MariaDB and assocdb on MariaDB, when ASSOCDB_TEST_POSTGRES_URL is, the same two
on PostgreSQL (they skip cleanly otherwise; with ASSOCDB_TEST_REQUIRE_SERVICES
set, a missing driver fails instead).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.linkbench.config import DEFAULT_LINK_TYPE, DEFAULT_NODE_TYPE, RANGE_LIMIT, Workload
from bench.linkbench.differential import run_differential
from bench.linkbench.id2chooser import Id2Chooser
from bench.linkbench.load import LoadLink, LoadNode
from bench.linkbench.requests import MAX_TIME, Shared
from bench.linkbench.stores import Store, StoreContext, open_store

T1, T2 = DEFAULT_LINK_TYPE, DEFAULT_LINK_TYPE + 1
MYSQL_URL = os.environ.get("ASSOCDB_TEST_MYSQL_URL")
POSTGRES_URL = os.environ.get("ASSOCDB_TEST_POSTGRES_URL")
STORES = ["assocdb", "sqlite", "mariadb", "assocdb-mariadb", "postgres", "assocdb-postgres"]


def _open(name: str, tmp_path: Path, database: str = "linkbench_test") -> Store:
    if name in ("mariadb", "assocdb-mariadb"):
        if not MYSQL_URL:
            pytest.skip("ASSOCDB_TEST_MYSQL_URL is not set")
        if not os.environ.get("ASSOCDB_TEST_REQUIRE_SERVICES"):
            pytest.importorskip("pymysql")
    if name in ("postgres", "assocdb-postgres"):
        if not POSTGRES_URL:
            pytest.skip("ASSOCDB_TEST_POSTGRES_URL is not set")
        if not os.environ.get("ASSOCDB_TEST_REQUIRE_SERVICES"):
            pytest.importorskip("psycopg")
    # Names of their own: test runs sharing a server must not drop each other's.
    unique = f"{os.getpid()}_{abs(hash(tmp_path)) % 10**6}"
    if name == "postgres":
        from bench.linkbench.stores.bare_postgres import BarePostgresStore

        return BarePostgresStore(POSTGRES_URL, f"{database}_{unique}")  # type: ignore[arg-type]
    if name == "assocdb-postgres":
        from bench.linkbench.stores.assocdb_postgres import AssocdbPostgresStore

        return AssocdbPostgresStore(tmp_path, (T1, T2), POSTGRES_URL, graph=f"lb_{unique}")  # type: ignore[arg-type]
    if name == "mariadb":
        from bench.linkbench.stores.bare_mysql import BareMySQLStore

        return BareMySQLStore(MYSQL_URL, database)  # type: ignore[arg-type]
    if name == "assocdb-mariadb":
        from bench.linkbench.stores.assocdb_mariadb import AssocdbMariaDBStore

        # A graph of its own: test runs sharing the server must not drop each other's.
        graph = f"lb_{os.getpid()}_{abs(hash(tmp_path)) % 10**6}"
        return AssocdbMariaDBStore(tmp_path, (T1, T2), MYSQL_URL, graph=graph)  # type: ignore[arg-type]
    return open_store(name, StoreContext(tmp_path, (T1, T2), MYSQL_URL))


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = _open(request.param, tmp_path)
    yield s
    s.close()


def _list(
    s: Store,
    id1: int,
    t: int = T1,
    max_time: int = MAX_TIME,
    offset: int = 0,
    limit: int = RANGE_LIMIT,
) -> list[tuple[int, int, bytes]]:
    return [
        (r.id2, r.time, r.data)
        for r in s.normal_links(s.get_link_list(id1, t, max_time, offset, limit))
    ]


def _visible(s: Store, id1: int, id2s: list[int], t: int = T1) -> list[int]:
    return sorted(r.id2 for r in s.normal_links(s.get_links(id1, t, id2s)) if r.visible)


def test_add_counts_and_lists_newest_first(store: Store) -> None:
    store.add_link(1, T1, 10, 1000, b"a")
    store.add_link(1, T1, 11, 3000, b"bb")
    store.add_link(1, T1, 12, 2000, b"")
    store.add_link(1, T2, 13, 5000, b"other type")
    assert store.count_links(1, T1) == 3
    assert store.count_links(1, T2) == 1
    assert _list(store, 1) == [(11, 3000, b"bb"), (12, 2000, b""), (10, 1000, b"a")]
    assert store.count_links(2, T1) == 0
    assert _list(store, 2) == []


def test_ties_in_time_order_by_id2_descending(store: Store) -> None:
    for id2 in (5, 7, 6):
        store.add_link(1, T1, id2, 1000, b"x")
    assert [r[0] for r in _list(store, 1)] == [7, 6, 5]


def test_delete_hides_and_readd_counts_again(store: Store) -> None:
    store.add_link(1, T1, 10, 1000, b"a")
    store.add_link(1, T1, 11, 2000, b"b")
    store.delete_link(1, T1, 10)
    assert store.count_links(1, T1) == 1
    assert _list(store, 1) == [(11, 2000, b"b")]
    assert _visible(store, 1, [10, 11]) == [11]
    store.delete_link(1, T1, 10)  # deleting a hidden link changes nothing
    store.delete_link(1, T1, 99)  # nor does deleting a missing one
    assert store.count_links(1, T1) == 1
    store.add_link(1, T1, 10, 3000, b"again")  # shown again, counted again, new time
    assert store.count_links(1, T1) == 2
    assert _list(store, 1) == [(10, 3000, b"again"), (11, 2000, b"b")]


def test_re_adding_a_visible_link_updates_it_without_counting(store: Store) -> None:
    store.add_link(1, T1, 10, 1000, b"a")
    store.add_link(1, T1, 10, 4000, b"updated")
    assert store.count_links(1, T1) == 1
    assert _list(store, 1) == [(10, 4000, b"updated")]


def test_dangling_id2_and_multiget(store: Store) -> None:
    store.add_link(1, T1, 10**12, 1000, b"dangling")  # no node 10**12 exists
    store.add_link(1, T1, 5, 1000, b"x")
    assert _visible(store, 1, [5, 10**12, 6]) == [5, 10**12]


def test_paging_back_by_time_skips_one(store: Store) -> None:
    for i in range(10):
        store.add_link(1, T1, 100 + i, 1000 + i, b"")
    # The reference's history query: time <= the last seen link's, offset 1.
    assert [r[0] for r in _list(store, 1, max_time=1004, offset=1, limit=3)] == [103, 102, 101]
    assert [r[0] for r in _list(store, 1, limit=2)] == [109, 108]


def test_bulk_load_sets_counts(store: Store) -> None:
    links = [LoadLink(i, T1, i + j, 1000 + j, bytes([65 + j])) for i in (1, 2) for j in range(4)]
    assert store.load_links(links) == 8
    assert store.count_links(1, T1) == 4
    assert store.count_links(2, T1) == 4
    assert _list(store, 2)[0] == (5, 1003, b"D")
    store.delete_link(2, T1, 5)
    store.add_link(2, T1, 99, 5000, b"")
    assert store.count_links(2, T1) == 4


def test_nodes(store: Store) -> None:
    nodes = [LoadNode(i, DEFAULT_NODE_TYPE, 1, 100, b"n%d" % i) for i in range(1, 6)]
    assert store.load_nodes(nodes) == 5
    new = store.add_node(DEFAULT_NODE_TYPE, 1, 200, b"\xdc\x32 new")
    assert new == 6  # ids continue after the loaded ones
    got = store.normal_node(store.get_node(DEFAULT_NODE_TYPE, new))
    assert got is not None
    assert (got.id, got.version, got.time, got.data) == (
        6,
        1,
        200,
        b"\xdc\x32 new",
    )
    assert store.update_node(3, DEFAULT_NODE_TYPE, 2, 300, b"changed")
    assert store.normal_node(store.get_node(DEFAULT_NODE_TYPE, 3)) == (
        3,
        DEFAULT_NODE_TYPE,
        2,
        300,
        b"changed",
    )
    assert store.delete_node(DEFAULT_NODE_TYPE, 3)
    assert store.get_node(DEFAULT_NODE_TYPE, 3) is None
    assert not store.update_node(3, DEFAULT_NODE_TYPE, 2, 300, b"gone")
    assert store.get_node(DEFAULT_NODE_TYPE, 99) is None
    assert store.get_node(DEFAULT_NODE_TYPE + 1, 2) is None  # another type: not found


def _small_load(workload: Workload) -> list[LoadLink]:
    """The load of ids 2.. (all but the 961,963-link hub), with made-up payloads."""
    chooser = Id2Chooser(workload)
    return [
        LoadLink(i, t, i + j, 1_600_000_000_000 + 7 * i + j, b"p%d" % j)
        for i in range(2, workload.maxid1)
        for t in chooser.link_types()
        for j in range(chooser.link_count(i, t))
    ]


@pytest.mark.parametrize(
    ("first", "other"),
    [
        ("assocdb", "sqlite"),
        ("assocdb", "mariadb"),
        ("assocdb-http", "sqlite"),
        ("assocdb-mariadb", "mariadb"),
        ("assocdb-postgres", "postgres"),
    ],
)
def test_differential_assocdb_agrees_with_the_bare_schema(
    tmp_path: Path, first: str, other: str
) -> None:
    workload = Workload(maxid1=1_001)
    shared = Shared(workload)
    a, b = _open(first, tmp_path), _open(other, tmp_path, "linkbench_diff")
    try:
        links = _small_load(workload)
        nodes = [LoadNode(i, DEFAULT_NODE_TYPE, 1, 100, b"node") for i in range(1, 1_001)]
        for s in (a, b):
            s.load_links(links)
            s.load_nodes(nodes)
        result = run_differential(a, b, shared, operations=3_000, seed=4)
    finally:
        a.close()
        b.close()
    assert result.operations == 3_000
    assert result.checks > 3_000
    assert result.disagreements == []


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("LINKBENCH_SLOW"), reason="set LINKBENCH_SLOW=1 (~1 min)")
def test_differential_100k_operations(tmp_path: Path) -> None:
    workload = Workload(maxid1=10_001)
    shared = Shared(workload)
    a, b = _open("assocdb", tmp_path), _open("sqlite", tmp_path)
    try:
        links = _small_load(workload)
        nodes = [LoadNode(i, DEFAULT_NODE_TYPE, 1, 100, b"node") for i in range(1, 10_001)]
        for s in (a, b):
            s.load_links(links)
            s.load_nodes(nodes)
        result = run_differential(a, b, shared, operations=100_000, seed=8)
    finally:
        a.close()
        b.close()
    assert result.operations == 100_000
    assert result.disagreements == []
