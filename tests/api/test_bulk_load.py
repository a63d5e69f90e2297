"""bulk_load stores exactly what the merge rule says, into new and partly filled graphs.

The model is the rule itself, stated plainly: each key holds the highest-ranked
(`edge_rank`) of every row ever written to it, and the counts are the rows per
(id1, atype, state). A load's rows are stamped with one `updated_at` taken
between two clock readings; rows stored before are stamped far below or far
above it, so which side wins never depends on the exact stamp.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import assocdb.api.assoc_writes as _assoc_writes
from assocdb import Graph, InvalidRequest
from assocdb.core import json as _json
from assocdb.core.ids import shard_of
from assocdb.core.merge import EdgeKey, EdgeTuple, Source, State, edge_rank, place, source_of
from assocdb.core.ops import MAX_ASSOC_DATA
from tests.conftest import OpenGraph
from tests.support.helpers import all_edges

LOW, HIGH = 1_000, 2**62  # updated_at of stored rows: older / newer than any load
TYPES = ("follows", "friend", "likes")


def new_graph(open_graph: OpenGraph) -> Graph:
    graph = open_graph()
    graph.define_assoc("follows", inverse="followed_by")
    graph.define_assoc("friend", symmetric=True)
    graph.define_assoc("likes")
    return graph


def random_edges(rnd: random.Random, n: int, nodes: int) -> list[tuple[Any, ...]]:
    """Edges with repeated keys (other times, other data, exact copies) and hubs."""
    edges: list[tuple[Any, ...]] = []
    for _ in range(n):
        a = rnd.choice((1, 2, rnd.randint(1, nodes)))  # 1 and 2 are hubs
        b = rnd.randint(1, nodes)
        edge: tuple[Any, ...] = (a, rnd.choice(TYPES), b, rnd.randint(1, 5))
        if rnd.random() < 0.2:
            edge += ({"n": rnd.randint(1, 3)},)
        edges.append(edge)
        if rnd.random() < 0.1:
            edges.append(edge)
    return edges


def rows_of(graph: Graph, edge: tuple[Any, ...], updated_at: int) -> Iterator[EdgeTuple]:
    """The rows bulk_load writes for `edge`, stamped `updated_at` (the model's side)."""
    kind = graph.engine.assoc_type(edge[1])
    inverse = graph.engine.inverse_id(kind)
    data = None if len(edge) < 5 else _json.encode(edge[4], MAX_ASSOC_DATA, "data")
    a, b, time = edge[0], edge[2], edge[3]
    yield (a, kind.id, b, State.NORMAL, time, updated_at, data)
    if inverse is not None and not (inverse == kind.id and a == b):
        yield (b, inverse, a, State.NORMAL, time, updated_at, data)


def fill(graph: Graph, rnd: random.Random, nodes: int) -> None:
    """Store rows older and newer than any load, in every state, straight on the shards."""
    rows: list[EdgeTuple] = []
    for edge in random_edges(rnd, 300, nodes):
        ua = rnd.choice((LOW, HIGH))
        state = rnd.choice(list(State))
        rows += ((*row[:3], state, *row[4:]) for row in rows_of(graph, edge, ua))
    for n in range(3, 400):  # a big list that a load adds only a few keys to
        rows += rows_of(graph, (1, "likes", n, n), LOW)
    by_shard: dict[int, list[EdgeTuple]] = {}
    for row in rows:
        by_shard.setdefault(shard_of(row[0], graph.engine.shards), []).append(row)
    for shard, batch in by_shard.items():
        graph.engine.backend.apply(shard, batch, ())


def model(stored: list[Any], written: list[EdgeTuple]) -> list[EdgeTuple]:
    """The best row of each key; a tombstone placed at the best live value's time."""
    best: dict[EdgeKey, EdgeTuple] = {}
    sources: dict[EdgeKey, Source] = {}
    for row in [*map(tuple, stored), *written]:
        key = row[:3]
        if key not in best or edge_rank(row) > edge_rank(best[key]):
            best[key] = row
        source = source_of(row)
        if source is not None and (key not in sources or source > sources[key]):
            sources[key] = source
    return sorted(
        place(row, sources[key]) if row[3] == State.REMOVED and key in sources else row
        for key, row in best.items()
    )


def load_and_check(graph: Graph, edges: list[tuple[Any, ...]], workers: int) -> None:
    stored = all_edges(graph)
    before = graph.engine.clock.now()
    assert graph.bulk_load(edges, workers=workers) == len(edges)
    after = graph.engine.clock.now()
    # The model's rows carry `before` for the load's stamp; stored rows carry the
    # real stamp, somewhere in (before, after): compare them as `before`.
    expected = model(stored, [row for edge in edges for row in rows_of(graph, edge, before)])

    def as_before(stamp: int) -> int:
        return before if before < stamp < after else stamp

    actual = []
    for row in all_edges(graph):
        seen: EdgeTuple = (*row[:5], as_before(row[5]), row[6])
        source = source_of(row)
        if row[3] == State.REMOVED and source is not None:  # the live row it keeps the time of
            seen = place(seen, (as_before(source[0]), *source[1:]))
        actual.append(seen)
    assert actual == expected
    assert graph.check_counts() == []
    counts = Counter((row[0], row[1], row[3]) for row in expected)
    for (id1, atype, state), n in sorted(counts.items())[::7]:
        stored_counts = graph.engine.backend.counts(shard_of(id1, graph.engine.shards), id1, atype)
        assert stored_counts.get(state) == n


@pytest.fixture(params=["one round", "many rounds"])
def rounds(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "many rounds":  # later rounds merge with the rows of earlier ones
        monkeypatch.setattr(_assoc_writes, "BULK_BATCH", 97)
        monkeypatch.setattr(_assoc_writes, "BULK_PARALLEL", 50)
    return str(request.param)


@pytest.mark.parametrize("filled", [False, True], ids=["fresh", "partly filled"])
@pytest.mark.parametrize("workers", [1, 2])
def test_bulk_load_stores_what_the_merge_rule_says(
    open_graph: OpenGraph, rounds: str, filled: bool, workers: int
) -> None:
    rnd = random.Random(f"{rounds}{filled}{workers}")
    graph = new_graph(open_graph)
    if filled:
        fill(graph, rnd, nodes=60)
    edges = random_edges(rnd, 600, nodes=60)
    edges += [(1, "likes", 5, 9), (1, "likes", 7, 1), (1, "likes", 999, 3)]  # into the big list
    load_and_check(graph, edges, workers)
    load_and_check(graph, edges, workers)  # again: only the stamps change
    rnd.shuffle(edges)
    load_and_check(graph, edges[:200], workers)  # a part of it, in another order


@pytest.mark.parametrize("workers", [1, 2])
def test_an_error_raised_by_the_input_stops_the_load_after_the_edges_before_it(
    open_graph: OpenGraph, rounds: str, workers: int
) -> None:
    # `assocdb import` raises InvalidRequest for a bad line from its edge generator.
    def edges() -> Iterator[tuple[Any, ...]]:
        yield from ((n, "follows", n + 1, n) for n in range(1, 121))
        raise InvalidRequest("line 121: expected 'id1 atype id2 [time]'")

    graph = new_graph(open_graph)
    with pytest.raises(InvalidRequest, match=r"^line 121: .* the 120 edges before it") as stop:
        graph.bulk_load(edges(), workers=workers)
    assert stop.value.details["stored"] == 120
    assert len(all_edges(graph)) == 240
    assert graph.check_counts() == []


class Interrupted(Exception):
    """Stands for Ctrl-C (or anything else) stopping a load from its input."""


@pytest.mark.parametrize("workers", [1, 2])
def test_a_named_load_resumes_after_the_edges_it_stored(
    open_graph: OpenGraph, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    monkeypatch.setattr(_assoc_writes, "BULK_BATCH", 40)  # rows: 20 edges per round
    monkeypatch.setattr(_assoc_writes, "BULK_PARALLEL", 30)
    graph = new_graph(open_graph)
    journal = graph.engine.journal
    edges = [(n, "follows", n + 1000, n) for n in range(1, 201)]

    def stopping_at(stop: int) -> Iterator[tuple[Any, ...]]:
        yield from edges[:stop]
        raise Interrupted

    with pytest.raises(Interrupted):
        graph.bulk_load(stopping_at(130), workers=workers, name="load one")
    [(name, stored)] = journal.loads()
    assert name == "load one"
    # Whole rounds, and never more than the rows written: the round in flight
    # when the input stopped may or may not be recorded.
    assert stored % 20 == 0
    assert 100 <= stored <= 120
    first_stamp = {row[5] for row in all_edges(graph)}
    assert len(first_stamp) == 1

    # Loaded again: the stored edges are skipped (a changed time there is not
    # written), the rest carries the first run's updated_at.
    again = [(a, t, b, time + 1 if n < stored else time) for n, (a, t, b, time) in enumerate(edges)]
    assert graph.bulk_load(again, workers=workers, name="load one") == len(edges)
    assert journal.loads() == []
    rows = all_edges(graph)
    assert len(rows) == 400
    assert {row[5] for row in rows} == first_stamp
    assert {row[4] for row in rows} == {edge[3] for edge in edges}
    assert graph.check_counts() == []
    assert graph.assoc_count(1, "follows") == 1


def test_a_named_load_stopped_by_a_bad_edge_goes_on_from_it(open_graph: OpenGraph) -> None:
    graph = new_graph(open_graph)
    edges: list[tuple[Any, ...]] = [(n, "likes", n + 1, n) for n in range(1, 11)]
    with pytest.raises(InvalidRequest, match="the 10 edges before it"):
        graph.bulk_load([*edges, (0, "likes", 1)], name="part")
    assert graph.engine.journal.loads() == [("part", 10)]
    # Fixed: the same load, the good edges first, goes on after them.
    assert graph.bulk_load([*edges, (11, "likes", 12)], name="part") == 11
    assert graph.engine.journal.loads() == []
    assert len(all_edges(graph)) == 11
    for bad in ("", "\udcff", "x" * 5000, 42):
        with pytest.raises(InvalidRequest, match="name"):
            graph.bulk_load(edges, name=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="first"):
        graph._writes.bulk_load(edges, name="part", first=-1)
    assert len(all_edges(graph)) == 11  # nothing changed
    assert graph.engine.journal.loads() == []
