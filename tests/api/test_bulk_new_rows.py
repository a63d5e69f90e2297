"""A bulk load of new keys is inserted without reading (`storage/sqlitebulk.py`), and
stores exactly what the merging path would: the model of `test_bulk_load` judges both.

Each test sees which path a round took by counting the merging path's reads
(`SQLBackend._bulk_current`) on one in-process worker.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

import assocdb.api.assoc_writes as _assoc_writes
import assocdb.storage.sqlitebulk as _sqlitebulk
from assocdb import Graph
from assocdb.storage.sql import SQLBackend
from assocdb.storage.sqlite import SQLiteBackend
from tests.api.test_bulk_load import load_and_check, new_graph
from tests.conftest import OpenGraph
from tests.support.helpers import all_edges


@pytest.fixture
def merges(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows of each round that took the merging path (in this process)."""
    rounds: list[int] = []
    read = SQLBackend._bulk_current

    def counted(self: SQLBackend, session: Any, shard: int, writes: Any) -> Any:
        rounds.append(len(writes))
        return read(self, session, shard, writes)

    monkeypatch.setattr(SQLBackend, "_bulk_current", counted)
    monkeypatch.setattr(_assoc_writes, "BULK_BATCH", 150)  # rows: several rounds per load
    # Rows per INSERT in this process: a round's rows are several statements and a rest.
    monkeypatch.setattr(_sqlitebulk, "ROWS", 7)
    return rounds


def distinct_edges(rnd: random.Random, n: int, nodes: int) -> list[tuple[Any, ...]]:
    """`n` edges with distinct keys (no key twice, in either direction's list), some with
    data, over few nodes (so later rounds add to lists that earlier rounds made)."""
    edges: dict[tuple[int, str, int], tuple[Any, ...]] = {}
    while len(edges) < n:
        a, b = rnd.randint(1, nodes), rnd.randint(1, nodes)
        kind = rnd.choice(("follows", "likes"))
        edge: tuple[Any, ...] = (a, kind, b, rnd.randint(1, 1000))
        if rnd.random() < 0.2:
            edge += ({"n": rnd.randint(1, 3)},)
        edges.setdefault((a, kind, b), edge)
    return list(edges.values())


def sqlite(graph: Graph) -> bool:
    return isinstance(graph.engine.backend, SQLiteBackend)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_fresh_load_of_new_keys_reads_nothing_and_stores_what_the_rule_says(
    open_graph: OpenGraph, merges: list[int], workers: int
) -> None:
    rnd = random.Random(workers)
    graph = new_graph(open_graph)
    edges = distinct_edges(rnd, 800, nodes=70)
    load_and_check(graph, edges, workers)
    if sqlite(graph) and workers == 1:
        assert merges == []  # every round of every shard inserted
    # Point lookups and counts answer from the rows and count rows inserted.
    for a, kind, b, time, *data in edges[::37]:
        edge = graph.assoc_edge(a, kind, b)
        assert edge is not None
        assert edge.time == time
        assert edge.data == (data[0] if data else None)
        if kind == "follows":
            assert graph.assoc_contains(b, "followed_by", a)
    for node in range(1, 71, 9):
        follows = sum(1 for a, kind, *_ in edges if a == node and kind == "follows")
        assert graph.assoc_count(node, "follows") == follows


def test_a_load_on_top_of_a_fresh_load_merges_from_its_first_stored_key(
    open_graph: OpenGraph, merges: list[int]
) -> None:
    rnd = random.Random(7)
    graph = new_graph(open_graph)
    edges = distinct_edges(rnd, 600, nodes=50)
    load_and_check(graph, edges[:400], workers=1)
    assert not sqlite(graph) or merges == []
    # Half of it again with other times and data, and new keys: merged by the rule.
    again = [(*edge[:3], edge[3] + rnd.choice((-1, 1)), {"again": 1}) for edge in edges[200:400]]
    load_and_check(graph, again + edges[400:], workers=1)
    assert merges  # the stored keys were read and merged
    assert len(all_edges(graph)) == len({row[:3] for row in all_edges(graph)})
    # The next load of new keys is inserted again: only the load that met a stored
    # key merges its later rounds on that shard.
    merged = len(merges)
    load_and_check(graph, [(n, "likes", n + 1, n) for n in range(1_000, 1_300)], workers=1)
    assert not sqlite(graph) or len(merges) == merged


def test_a_key_repeated_late_in_a_round_rolls_the_inserted_rows_back_and_merges(
    open_graph: OpenGraph, merges: list[int]
) -> None:
    graph = new_graph(open_graph)
    # One node's list, 60 keys in one round, the last one a repeat of the first with a
    # later time: the insert fails at its last row; the merge keeps the later time.
    edges: list[tuple[Any, ...]] = [(1, "likes", n, n) for n in range(100, 160)]
    edges.append((1, "likes", 100, 5_000))
    load_and_check(graph, edges, workers=1)
    assert not sqlite(graph) or merges == [61]
    edge = graph.assoc_edge(1, "likes", 100)
    assert edge is not None
    assert edge.time == 5_000
    assert graph.assoc_count(1, "likes") == 60
    assert graph.check_counts() == []


def test_a_key_repeated_within_one_insert_statement_rolls_back_and_merges(
    open_graph: OpenGraph, merges: list[int]
) -> None:
    graph = new_graph(open_graph)
    # 30 keys of one list, then the 2nd again with an earlier time, then 20 more: the
    # repeat is in the rows of the 5th of the round's 7-row statements, not the rest.
    edges: list[tuple[Any, ...]] = [(1, "likes", n, n) for n in range(100, 130)]
    edges.append((1, "likes", 101, 1))
    edges += [(1, "likes", n, n) for n in range(130, 150)]
    load_and_check(graph, edges, workers=1)
    assert not sqlite(graph) or merges == [51]
    edge = graph.assoc_edge(1, "likes", 101)
    assert edge is not None
    assert edge.time == 101
    assert graph.assoc_count(1, "likes") == 50
    assert graph.check_counts() == []


def test_a_write_between_rounds_is_merged_with_the_load(
    open_graph: OpenGraph, merges: list[int]
) -> None:
    graph = new_graph(open_graph)
    edges = [(1, "likes", n, n) for n in range(1, 301)]  # one list, two rounds
    stored = []

    def with_a_write() -> Any:
        for n, edge in enumerate(edges):
            if n == 200:  # the first round (150 rows) is stored: an app writes into it
                graph.assoc_delete(1, "likes", 10)
                graph.assoc_add(1, "likes", 250, time=99_999)
                stored.extend(all_edges(graph))
            yield edge

    assert graph.bulk_load(with_a_write(), workers=1) == 300
    # The delete and the add came after the load's stamp: they win over its rows.
    assert not graph.assoc_contains(1, "likes", 10)
    edge = graph.assoc_edge(1, "likes", 250)
    assert edge is not None
    assert edge.time == 99_999
    assert graph.assoc_count(1, "likes") == 299
    assert graph.check_counts() == []
    assert not sqlite(graph) or merges == [150]  # the round holding key 250 merged
