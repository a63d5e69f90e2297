"""The replica verifier's first pass: per-range checksums computed on each replica's server
(`Backend.table_summary`), then rows only for the ranges whose summaries differ.

On every engine available (SQLite always; MySQL with ASSOCDB_TEST_MYSQL_URL, PostgreSQL
with ASSOCDB_TEST_POSTGRES_URL): divergence injected into one replica is found exactly as
a full row-by-row comparison (`span=0`) finds it, and the statements that read rows (seen
by the members' tracers) touch only the shard and table that differ, a range's worth.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import assocdb
from assocdb import Graph
from assocdb.storage.replica_verify import verify_replicas
from assocdb.storage.shardmap import ShardMapBackend
from assocdb.storage.shardmap_config import load
from assocdb.storage.sql import SQLBackend
from tests.storage.test_replica_verify import fill, raw
from tests.storage.test_shardmap import FAST, cluster
from tests.support import stores
from tests.support.shardmaps import write_map

SPAN = 4  # rows per range: a shard's edges make several
PAGE = 2  # rows per page read from a replica
# A statement that reads rows in key order (export_table), not a bound (OFFSET) or a sum.
# (MySQL reads a page of edges as one value: `SELECT GROUP_CONCAT(t ...) FROM (SELECT ...) page`)
ROW_READ = re.compile(
    r"^SELECT .* FROM (\S+\.)?(?P<table>\w+)( WHERE .*)? ORDER BY .* LIMIT [^\s)]+(\) page)?$"
)


@pytest.fixture(params=["sqlite", "mysql", "postgres"])
def graph(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Graph]:
    kind = request.param
    stores.require(kind)
    urls: list[str | None] | None = None
    if kind == "mysql":
        urls = [stores.MYSQL_URL]
    elif kind == "postgres":
        urls = [stores.postgres_url("{name}", options="")]
    path = write_map(tmp_path, urls=urls, query_timeout=10.0)  # no member hangs here
    g = assocdb.open(path, retry=FAST)
    try:
        g.define_assoc("follows", inverse="followed_by")
        g.define_assoc("friend", symmetric=True)
        g.define_assoc("likes")
        g.define_object("user")
        g.define_index("by_name", "user", ["name"])
        yield g
    finally:
        g.close()
        if kind != "sqlite":
            from assocdb.storage.mysql import MySQLBackend
            from assocdb.storage.postgres import PostgresBackend

            drop = MySQLBackend.drop if kind == "mysql" else PostgresBackend.drop
            for config in load(path).backends.values():
                assert config.url is not None
                drop(config.url)


def row_reads(backend: ShardMapBackend) -> list[tuple[int, str]]:
    """(shard, table) of every row-reading statement the members run from now on."""
    seen: list[tuple[int, str]] = []

    def tracer(shard: int, sql: str, seconds: float) -> None:
        match = ROW_READ.match(sql)
        if match and "OFFSET" not in sql:
            seen.append((shard, match["table"]))

    lists = {}  # the members may share one list of tracers
    for name in backend.map.backends:
        member = backend.member(name)
        assert isinstance(member, SQLBackend)
        lists[id(member.tracers)] = member.tracers
    for tracers in lists.values():
        tracers.append(tracer)
    return seen


def test_only_the_ranges_that_differ_are_read_row_by_row(graph: Graph) -> None:
    fill(graph)
    backend = cluster(graph)
    shard = max(
        range(graph.shards),
        key=lambda s: len(backend.member(backend.map.replicas[s][1].backend).export_edges(
            s, None, 10_000)),
    )  # fmt: skip
    victim = backend.member(backend.map.replicas[shard][1].backend)
    edges = victim.export_edges(shard, None, 10_000)
    assert len(edges) > 4 * SPAN  # several ranges, most of them equal
    gone = edges[len(edges) // 2]
    raw(victim, shard, "DELETE FROM {s}.edges WHERE id1 = ? AND atype = ? AND id2 = ?", gone[:3])
    user = victim.export_table(shard, "objects", None, 1)
    if user:  # the same number of rows, one of them changed: only its checksum tells
        raw(victim, shard, "UPDATE {s}.objects SET version = version + 1 WHERE id = ?",
            (user[0][0],))  # fmt: skip
    expected = {(shard, "edges", tuple(gone[:3]))}
    if user:
        expected.add((shard, "objects", (user[0][0],)))

    reads = row_reads(backend)
    report = verify_replicas(backend, span=SPAN, page=PAGE)
    assert {(d.shard, d.table, d.key) for d in report.differences} == expected
    assert set(reads) == {(s, t) for s, t, _ in expected}
    edge_reads = reads.count((shard, "edges"))
    # One range of at most SPAN rows: up to SPAN // PAGE + 1 pages from each of the two
    # replicas, and one read again of the key that differed, from each.
    assert edge_reads <= 2 * (SPAN // PAGE + 1) + 2

    reads.clear()
    full = verify_replicas(backend, span=0, page=PAGE)  # every row, as before
    assert full.differences == report.differences
    assert full.rows == report.rows
    assert reads.count((shard, "edges")) >= 2 * (len(edges) // PAGE)  # far more reads

    verify_replicas(backend, repair=True, span=SPAN)
    assert verify_replicas(backend, span=SPAN).differences == []


def test_every_span_finds_what_a_full_comparison_finds(graph: Graph) -> None:
    fill(graph)
    backend = cluster(graph)
    for shard in range(graph.shards):  # a count changed by hand, and a row gone, per shard
        victim = backend.member(backend.map.replicas[shard][0].backend)
        counts = victim.export_table(shard, "counts", None, 3)
        if counts:
            raw(victim, shard,
                "UPDATE {s}.counts SET n = n + 1 WHERE id1 = ? AND atype = ? AND state = ?",
                counts[-1][:3])  # fmt: skip
        edges = victim.export_edges(shard, None, 10_000)
        if edges:
            raw(victim, shard, "DELETE FROM {s}.edges WHERE id1 = ? AND atype = ? AND id2 = ?",
                edges[-1][:3])  # fmt: skip
    full = verify_replicas(backend, span=0)
    assert full.differences
    for span in (1, 3, 10, 10_000):
        report = verify_replicas(backend, span=span, page=3)
        assert report.differences == full.differences, span
        assert report.rows == full.rows, span


def test_summaries_of_equal_rows_are_equal_and_of_changed_rows_differ(graph: Graph) -> None:
    fill(graph)
    backend = cluster(graph)
    shard = next(s for s in range(graph.shards) if backend.member(
        backend.map.replicas[s][0].backend).export_edges(s, None, 1))  # fmt: skip
    first, second = (backend.member(r.backend) for r in backend.map.replicas[shard][:2])
    for table in ("edges", "counts", "node_states", "objects", "timelines", "index_1"):
        a = first.table_summary(shard, table, None, None)
        assert a == second.table_summary(shard, table, None, None), table
        assert a[1] == len(
            [r for r in first.export_table(shard, table, None, 10_000)
             if table != "counts" or r[3] != 0]
        ), table  # fmt: skip
    bound = first.table_bound(shard, "edges", None, 1)
    assert bound == tuple(first.export_edges(shard, None, 1)[0][:3])
    assert first.table_bound(shard, "edges", bound, 10_000) is None
    assert first.table_summary(shard, "edges", None, bound)[1] == 1
    raw(second, shard, "UPDATE {s}.edges SET time = time + 1 WHERE id1 = ? AND atype = ? "
        "AND id2 = ?", bound)  # fmt: skip
    changed = second.table_summary(shard, "edges", None, bound)
    assert changed[1] == 1
    assert changed != first.table_summary(shard, "edges", None, bound)
