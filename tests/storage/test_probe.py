"""`probe_id2s`, the set queries' membership read: its answers, and that it reads
the `(id1, atype, id2)` index alone (a covering read) on every backend."""

from __future__ import annotations

from assocdb import Graph
from assocdb.core.ids import shard_of
from assocdb.core.scans import IdsProbe
from assocdb.storage.sql import SQLBackend

NODE = 7


def _states(graph: Graph) -> tuple[SQLBackend, int, int]:
    """A list of NODE with id2 1..40 in several states; (backend, shard, atype)."""
    for id2 in range(1, 41):
        graph.assoc_add(NODE, "likes", id2, time=1000 + id2)
    for id2 in range(1, 41, 4):
        graph.assoc_archive(NODE, "likes", id2)
    for id2 in range(2, 41, 4):
        graph.assoc_delete(NODE, "likes", id2)
    for id2 in range(3, 41, 8):
        graph.assoc_negate(NODE, "likes", id2)
    backend = graph.engine.backend
    assert isinstance(backend, SQLBackend)
    return backend, shard_of(NODE, graph.shards), graph.engine.assoc_type("likes").id


def test_probe_answers_as_the_stored_edges(graph: Graph) -> None:
    backend, shard, atype = _states(graph)
    asked = [*range(45, 0, -3), 99, 3, 3]  # unordered, duplicated, with absent ids
    stored = {e.id2: e.state for e in backend.edges(shard, NODE, atype, asked)}
    for states in ([0], [1], [2], [0, 1], [0, 1, 2, 3]):
        members = sorted(i for i, s in stored.items() if s in states)
        for forward in (True, False):
            expected = sorted(members, reverse=forward)
            got = backend.probe_id2s(shard, NODE, atype, states, asked, forward)
            assert got == expected
            for limit in (1, 2, len(expected) or 1, 100):
                got = backend.probe_id2s(shard, NODE, atype, states, asked, forward, limit)
                assert got == expected[:limit]
    assert backend.probe_id2s(shard, NODE, atype, [0], [], True, 5) == []


def test_probe_of_many_ids_asks_each_once(graph: Graph) -> None:
    """More ids than one statement binds, repeated across its chunks: each member once,
    in order, up to the limit."""
    backend, shard, atype = _states(graph)
    asked = [*range(1, 1500), *range(1, 1500, 7)]
    members = sorted({e.id2 for e in backend.edges(shard, NODE, atype, asked) if e.state == 0})
    assert len(members) > 5
    for forward in (True, False):
        expected = sorted(members, reverse=forward)
        assert backend.probe_id2s(shard, NODE, atype, [0], asked, forward) == expected
        for limit in (1, 5, len(expected), len(expected) + 1):
            got = backend.probe_id2s(shard, NODE, atype, [0], asked, forward, limit)
            assert got == expected[:limit]


def test_an_ordered_probe_answers_as_probe_id2s(graph: Graph) -> None:
    """`set_ids(IdsProbe)`, for ids already distinct and in id2 order (a list's own):
    the same members as `probe_id2s`, across chunks and up to a limit."""
    backend, shard, atype = _states(graph)
    for forward in (True, False):
        asked = sorted([*range(1, 45, 3), 1200, *range(1300, 1900)], reverse=forward)
        for states in ((0,), (0, 1)):
            for limit in (None, 1, 3, 1000):
                want = backend.probe_id2s(shard, NODE, atype, states, asked, forward, limit)
                got = backend.set_ids(shard, IdsProbe(NODE, atype, states, asked, forward, limit))
                assert got == want
                assert want


def test_probe_reads_the_key_index_alone(graph: Graph) -> None:
    backend, shard, atype = _states(graph)
    statements: list[str] = []
    undo = graph.trace(lambda s, sql, seconds: statements.append(sql))
    backend.probe_id2s(shard, NODE, atype, [0, 1], [5, 6, 7], True, 2)
    backend.probe_id2s(shard, NODE, atype, [0], [5, 6, 7])
    undo()
    assert len(statements) == 2
    for sql in statements:
        params = [NODE, atype, 5, 6, 7, *([0, 1] if "LIMIT" in sql else [0]), 2]
        params = params[: sql.count("?") + sql.count("%s")]
        if backend.local:  # SQLite: the asked ids drive the loop (no temporary index
            # sorts them, so a limit stops the seeks), each a read of the index alone
            plan = backend._query(shard, "EXPLAIN QUERY PLAN " + sql, params)
            assert [row[3] for row in plan] == [
                "CO-ROUTINE ids",
                "SCAN 3 CONSTANT ROWS",
                "SCAN ids",
                "SEARCH edges USING COVERING INDEX edges_key "
                "(id1=? AND atype=? AND id2=? AND state=?)",
            ]
        elif backend.spec()["kind"] == "postgres":  # an index alone (the planner picks
            # which: both hold id2 and state), no sort
            plan = "\n".join(r[0] for r in backend._query(shard, "EXPLAIN " + sql, params))
            assert "Index Only Scan" in plan, plan
            assert "Sort" not in plan, plan
        else:  # MySQL: "Using index" is a read of the index alone, no filesort
            (row,) = backend._query(shard, "EXPLAIN " + sql, params)
            assert row[5] == "edges_key", row
            assert "Using index" in row[-1], row
            assert "filesort" not in row[-1]
