"""`Backend.unions`, the union of many lists on each of their shards in one call (a
two-hop reach): each shard's answer is what `set_ids` of its `ListsUnion` gives and
what the stored lists hold, in the order of the groups, on every backend."""

from __future__ import annotations

import random
from pathlib import Path

import assocdb
from assocdb import Graph
from assocdb.core.ids import by_shard
from assocdb.core.scans import ListsUnions
from tests.support.shardmaps import write_map

STATES = {"normal": 0, "archived": 2}  # (the merge rule's state codes)


def _lists(graph: Graph, nodes: int, seed: int) -> dict[tuple[int, int], int]:
    """Random lists of `nodes` nodes over id2s 1..120, some edges archived;
    {(id1, id2): state code}."""
    rng = random.Random(seed)
    stored: dict[tuple[int, int], int] = {}
    for id1 in range(1, nodes + 1):
        for id2 in rng.sample(range(1, 121), rng.randrange(0, 30)):
            graph.assoc_add(id1, "likes", id2, time=id2)
            stored[(id1, id2)] = STATES["normal"]
            if rng.random() < 0.2:
                graph.assoc_archive(id1, "likes", id2)
                stored[(id1, id2)] = STATES["archived"]
    return stored


def _expected(
    stored: dict[tuple[int, int], int], id1s: list[int], states: tuple[int, ...],
    boundary: int | None, forward: bool,
) -> list[int]:  # fmt: skip
    """The distinct id2s of the lists of `id1s` in `states` past `boundary`, in order."""
    found = {id2 for (id1, id2), s in stored.items() if id1 in id1s and s in states}
    if boundary is not None:
        found = {i for i in found if (i < boundary if forward else i > boundary)}
    return sorted(found, reverse=forward)


def test_unions_answer_shard_by_shard_as_the_stored_lists(graph: Graph) -> None:
    stored = _lists(graph, 60, seed=3)
    backend, atype = graph.engine.backend, graph.engine.assoc_type("likes").id
    groups = by_shard([*range(60, 0, -1), 999], graph.shards)  # (999: no list)
    assert len(groups) > 3
    for states in ((0,), (0, 2), (2,)):
        for boundary in (None, 50):
            for forward in (True, False):
                for limit in (3, 1000):
                    query = ListsUnions(groups, atype, states, boundary, forward, limit)
                    got = backend.unions(query)
                    assert got == [backend.set_ids(s, query.on(s)) for s in groups]
                    for ids, id1s in zip(got, groups.values(), strict=True):
                        assert ids == _expected(stored, id1s, states, boundary, forward)[:limit]
                    unordered = backend.unions(query._replace(ordered=False))
                    for ids, id1s in zip(unordered, groups.values(), strict=True):
                        want = _expected(stored, id1s, states, boundary, forward)
                        if limit == 1000:  # all of them, in any order, repeats allowed
                            assert set(ids) == set(want)
                        else:  # at least the limit's worth, all from the lists
                            assert set(ids) <= set(want)
                            assert len(set(ids)) >= min(limit, len(want))


def test_a_union_longer_than_its_unordered_read_is_read_in_order(graph: Graph) -> None:
    """Lists with more rows than a few times the limit: the first `limit` distinct ids."""
    for id1 in (1, 2, 3):
        for id2 in range(1, 41):
            graph.assoc_add(id1, "likes", id2, time=id2)
    backend, atype = graph.engine.backend, graph.engine.assoc_type("likes").id
    groups = by_shard([1, 2, 3], graph.shards)
    for forward in (True, False):
        for ordered in (True, False):
            query = ListsUnions(groups, atype, (0,), None, forward, 2, ordered)
            for ids in backend.unions(query):
                assert ids == sorted(range(1, 41), reverse=forward)[:2]
    assert backend.unions(ListsUnions({}, atype, (0,), None, True, 5)) == []


def test_a_shard_map_reads_each_shard_from_its_replicas(tmp_path: Path) -> None:
    """On a shard map, each shard's union is read from a replica of that shard."""
    g = assocdb.open(write_map(tmp_path))
    try:
        g.define_assoc("likes")
        stored = _lists(g, 30, seed=5)
        backend, atype = g.engine.backend, g.engine.assoc_type("likes").id
        groups = by_shard(range(1, 31), g.shards)
        assert len(groups) > 2
        query = ListsUnions(groups, atype, (0,), None, True, 1000)
        for ids, id1s in zip(backend.unions(query), groups.values(), strict=True):
            assert ids == _expected(stored, id1s, (0,), None, True)
    finally:
        g.close()
