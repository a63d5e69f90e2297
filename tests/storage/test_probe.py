"""`probe_id2s`, the set queries' membership read: its answers, and that it reads
the `(id1, atype, id2)` index alone (a covering read) on every backend."""

from __future__ import annotations

import json

from assocdb import Graph
from assocdb.core.ids import shard_of
from assocdb.core.scans import IdsProbe, ShortProbe
from assocdb.storage.backend import probe_short_each
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
        if backend.local:  # SQLite: the asked ids, one JSON array bound, drive the loop
            # (no temporary index sorts them, so a limit stops the seeks), each a read
            # of the index alone
            params = ["[5,6,7]", NODE, atype, *([0, 1] if "LIMIT" in sql else [0]), 2]
            params = params[: sql.count("?")]
            plan = backend._query(shard, "EXPLAIN QUERY PLAN " + sql, params)
            assert [row[3] for row in plan] == [
                "SCAN json_each VIRTUAL TABLE INDEX 1:",
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


OTHER = 8  # (on another shard than NODE's with the graphs' 4 and 16 shards)


def test_probe_short_answers_as_its_read_and_probe(graph: Graph) -> None:
    """`probe_short`: a short list's ids past a boundary, in id2 order, found in another
    list on another shard, at most a limit; None when the list is not short. SQLite's
    (the ids handed on as the engine's JSON) answers as the read and probe it replaces
    (`probe_short_each`) and as the stored edges say, in every state, both ways."""
    backend, shard, atype = _states(graph)
    other_shard = shard_of(OTHER, graph.shards)
    assert other_shard != shard
    for id2 in range(0, 60, 2):  # half of NODE's ids, and more
        graph.assoc_add(OTHER, "likes", id2 + 1)
    graph.assoc_delete(OTHER, "likes", 5)
    mine = {e.id2: e.state for e in backend.edges(shard, NODE, atype, range(1, 41))}
    theirs = {e.id2: e.state for e in backend.edges(other_shard, OTHER, atype, range(1, 61))}
    for states, other_states in (((0,), (0,)), ((0, 1), (0,)), ((0,), (0, 2)), ((1,), (0,))):
        for forward in (True, False):
            for boundary in (None, 17):
                ids = sorted((i for i, s in mine.items() if s in states), reverse=forward)
                if boundary is not None:
                    ids = [i for i in ids if (i < boundary if forward else i > boundary)]
                found = [i for i in ids if theirs.get(i, -1) in other_states]
                for size in (len(ids), len(ids) + 1, 50):
                    for limit in (1, 3, 100):
                        probe = ShortProbe(
                            NODE, atype, states, other_shard, OTHER, atype, other_states,
                            boundary, forward, size, limit,
                        )  # fmt: skip
                        want = None if len(ids) >= size else found[:limit]
                        assert backend.probe_short(shard, probe) == want, probe
                        assert probe_short_each(backend, shard, probe) == want, probe
    empty = ShortProbe(99, atype, (0,), shard, NODE, atype, (0,), None, True, 10, 10)
    assert backend.probe_short(shard_of(99, graph.shards), empty) == []


def test_probe_short_hands_the_ids_on_as_one_json_array_on_sqlite(graph: Graph) -> None:
    """On SQLite the short list's ids never become Python ints: its statement answers
    how many and the JSON array, and the probe binds that array as it came."""
    backend, shard, atype = _states(graph)
    if not backend.local:
        return  # (MySQL and PostgreSQL read the ids, then probe them: `probe_short_each`)
    other_shard = shard_of(OTHER, graph.shards)
    graph.assoc_add(OTHER, "likes", 4)
    asked: list[tuple[str, list[object]]] = []
    run = backend._query

    def query(shard: int, sql: str, params: object = (), slow: bool = False) -> list[object]:
        asked.append((sql, list(params)))  # type: ignore[call-overload]
        return run(shard, sql, params)

    backend._query = query  # type: ignore[method-assign]
    probe = ShortProbe(NODE, atype, (0,), other_shard, OTHER, atype, (0,), None, True, 50, 5)
    assert backend.probe_short(shard, probe) == [4]
    (read, _), (probed, params) = asked
    assert "json_group_array(id2)" in read
    assert "json_each(?)" in probed
    assert isinstance(params[0], str)
    assert 4 in json.loads(params[0])
