"""Verify and repair replicas (`storage.replica_verify`) on SQLite directories and MariaDB.

Divergence is injected with SQL straight into one replica (around the write
path, as a restore or an operator's hand would): the verifier must find
exactly those rows, a repair must fix them with the merge rule, and a second
verify must find nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from assocdb import Graph
from assocdb.core.ids import shard_of
from assocdb.storage.replica_verify import last_run, verify_replicas
from assocdb.storage.shardmap import ShardMapBackend
from assocdb.storage.sql import SQLBackend
from tests.storage.test_shardmap import (  # noqa: F401 (make_map is a fixture)
    MapMaker,
    cluster,
    make_map,
    open_cluster,
)
from tests.support.model import Model
from tests.writes.test_faults import NODES, assert_matches, write_randomly


@pytest.fixture
def graph(make_map: MapMaker) -> Iterator[Graph]:  # noqa: F811 (the fixture)
    g = open_cluster(make_map)
    g.define_object("user")
    g.define_index("by_name", "user", ["name"])
    yield g
    g.close()


def raw(member: Any, shard: int, sql: str, params: tuple[Any, ...] = ()) -> None:
    """Run `sql` (a template: `{s}.edges`, `?` marks) on one member's shard, committed."""
    assert isinstance(member, SQLBackend)
    member._in_transaction(shard, lambda s: member._run(s, shard, member._q(sql, shard), params))


def fill(graph: Graph) -> Model:
    model = Model()
    write_randomly(graph, model, 200, seed=11)
    for n in range(12):
        graph.obj_add("user", {"name": f"u{n}"})
    assert graph.drain(timeout=30)
    return model


def test_identical_replicas_have_no_differences(graph: Graph) -> None:
    fill(graph)
    report = verify_replicas(cluster(graph))
    assert report.differences == []
    assert report.rows > 0
    assert report.shards == list(range(graph.shards))


def test_verify_finds_exactly_the_injected_divergence_and_repair_fixes_it(graph: Graph) -> None:
    model = fill(graph)
    backend = cluster(graph)
    node = next(n for n in NODES if graph.assoc_count(n, "follows") >= 2)
    shard = shard_of(node, graph.shards)
    graph.obj_add("user", {"name": "near"}, near=node)  # an object on the shard
    victim = backend.map.replicas[shard][1].backend  # the second replica of the shard
    member = backend.member(victim)
    rows = [r for r in member.export_edges(shard, None, 10_000) if r[0] == node and r[3] == 0]
    gone, altered = rows[0], rows[1]
    raw(member, shard, "DELETE FROM {s}.edges WHERE id1 = ? AND atype = ? AND id2 = ?", gone[:3])
    # An older version of a row (its time changed, stamped earlier): the newer one must win.
    raw(
        member,
        shard,
        "UPDATE {s}.edges SET time = ?, updated_at = ? WHERE id1 = ? AND atype = ? AND id2 = ?",
        (altered[4] + 5, altered[5] - 1, *altered[:3]),
    )
    raw(member, shard, "UPDATE {s}.counts SET n = n + 7 WHERE id1 = ? AND atype = ? AND state = 0",
        (node, altered[1]))  # fmt: skip
    user = next(o for o in member.export_table(shard, "objects", None, 1000))
    raw(member, shard, "DELETE FROM {s}.objects WHERE id = ?", (user[0],))

    report = verify_replicas(backend)
    found = {(d.shard, d.table, d.key) for d in report.differences}
    assert found == {
        (shard, "edges", gone[:3]),
        (shard, "edges", altered[:3]),
        (shard, "counts", (node, altered[1], 0)),
        (shard, "objects", (user[0],)),
    }
    missing = next(d for d in report.differences if d.key == gone[:3])
    assert missing.rows[victim] is None
    assert not report.repaired

    repaired = verify_replicas(backend, repair=True)
    assert {(d.shard, d.table, d.key) for d in repaired.differences} == found
    assert repaired.repaired
    again = verify_replicas(backend)
    assert again.differences == []
    assert last_run(backend) is not None
    assert last_run(backend)["differences"] == 0  # type: ignore[index]
    for replica in backend.map.replicas[shard]:
        assert backend.member(replica.backend).recount(shard, False) == []
    for replica in backend.map.replicas[shard]:  # each copy answers as the model says
        copy = backend.member(replica.backend)
        assert copy.export_edges(shard, None, 10_000) == backend.member(
            backend.map.replicas[shard][0].backend
        ).export_edges(shard, None, 10_000)
    graph.engine.forget()
    assert_matches(graph, model)
    assert graph.obj_get(user[0]) is not None


def test_a_newer_row_on_one_replica_wins_everywhere(graph: Graph) -> None:
    fill(graph)
    backend = cluster(graph)
    shard = next(s for s in range(graph.shards) if backend.member(
        backend.map.replicas[s][0].backend).export_edges(s, None, 1))  # fmt: skip
    primary, other = (r.backend for r in backend.map.replicas[shard][:2])
    row = backend.member(other).export_edges(shard, None, 1)[0]
    # The second replica holds a newer write the first missed: removed, stamped later.
    raw(backend.member(other), shard,
        "UPDATE {s}.edges SET state = 3, updated_at = ? WHERE id1 = ? AND atype = ? AND id2 = ?",
        (row[5] + 1, *row[:3]))  # fmt: skip
    raw(backend.member(other), shard, "DELETE FROM {s}.counts WHERE id1 = ?", (row[0],))
    report = verify_replicas(backend, [shard], repair=True)
    assert {d.table for d in report.differences} >= {"edges", "counts"}
    assert verify_replicas(backend, [shard]).differences == []
    for name in (primary, other):
        held = backend.member(name).edges_at(shard, [row[:3]])
        assert held[0][3] == 3
        assert held[0][5] == row[5] + 1
        assert backend.member(name).recount(shard, False) == []


def test_verify_only_the_named_shards(graph: Graph) -> None:
    fill(graph)
    backend: ShardMapBackend = cluster(graph)
    report = verify_replicas(backend, [1, 2])
    assert report.shards == [1, 2]
    assert report.differences == []


def test_the_last_run_is_a_metric_and_a_graph_call(graph: Graph) -> None:
    from assocdb.serve.metrics import Metrics

    fill(graph)
    backend = cluster(graph)
    metrics = Metrics(graph)
    try:
        assert "assocdb_replica_differences" not in metrics.render().decode()  # never run
        shard = next(s for s in range(graph.shards) if backend.member(
            backend.map.replicas[s][1].backend).export_edges(s, None, 1))  # fmt: skip
        member = backend.member(backend.map.replicas[shard][1].backend)
        raw(member, shard, "DELETE FROM {s}.edges")
        found = graph.verify_replicas([shard])
        assert found.differences
        assert {d.table for d in found.differences} == {"edges"}
        text = metrics.render().decode()
        n = len(found.differences)
        assert f'assocdb_replica_differences{{table="edges"}} {n:.1f}' in text
        assert f'assocdb_replica_differences{{table="all"}} {n:.1f}' in text
        assert "assocdb_replica_verify_repaired 0.0" in text
        assert len(graph.verify_replicas(repair=True).differences) == n
        assert graph.verify_replicas().differences == []
        assert 'assocdb_replica_differences{table="all"} 0.0' in metrics.render().decode()
    finally:
        metrics.close()


def test_a_graph_without_replicas_has_nothing_to_verify(tmp_path: Any) -> None:
    import assocdb
    from assocdb import InvalidRequest

    with (
        assocdb.open(tmp_path / "g", shards=2) as g,
        pytest.raises(InvalidRequest, match="no replicas"),
    ):
        g.verify_replicas()
