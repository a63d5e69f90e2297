"""Whole-node operations commute on every edge, through a real Graph on every backend.

Random node operations (archive, unarchive, negate, remove; out, in, both;
random stamps) over a random graph arrive in a random order, some twice;
the stored rows (mirrored rows and tombstones included), the counts (stored,
recounted and read through the cache) and the node states must equal the
reference model's: FlockDB's rule replayed in stamp order
(`tests/support/node_model.py`). The pure rule gets many more orders in
`tests/core/test_restamp.py`.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assocdb import Graph
from assocdb.core.ids import shard_of
from assocdb.core.merge import EdgeTuple, State, place, user_data
from assocdb.core.records import STATE_NAMES
from tests.support.helpers import all_edges
from tests.support.node_model import EdgeKey, NodeOp, counts_of, reference, seen
from tests.support.stores import BACKENDS, Stores, examples, require

NODES = [1, 2, 3, 4]
NAMES = {"archive": State.ARCHIVED, "unarchive": State.NORMAL, "negate": State.NEGATIVE}
NAMES["remove"] = State.REMOVED
METHOD = {state: f"node_{name}" for name, state in NAMES.items()}

edge_sets = st.dictionaries(
    st.tuples(st.sampled_from(NODES), st.sampled_from(NODES)),
    st.tuples(st.sampled_from([0, 1, 2, 3]), st.integers(0, 5)),
    max_size=6,
)
op_lists = st.lists(
    st.tuples(
        st.sampled_from(NODES[:3]),
        st.sampled_from(["out", "in", "both"]),
        st.sampled_from([0, 1, 2, 3]),
    ),
    min_size=1,
    max_size=4,
)


def _write(g: Graph, id1: int, id2: int, state: int, time: int, stamp: int) -> None:
    """The edge, written in `state` by its own writes, last stamped `stamp`."""
    g.assoc_add(id1, "follows", id2, time=time, updated_at=stamp - 1)
    if state == State.ARCHIVED:
        g.assoc_archive(id1, "follows", id2, updated_at=stamp)
    elif state == State.NEGATIVE:
        g.assoc_negate(id1, "follows", id2, updated_at=stamp)
    elif state == State.REMOVED:
        g.assoc_delete(id1, "follows", id2, updated_at=stamp)
    else:
        g.assoc_add(id1, "follows", id2, time=time, updated_at=stamp)


def _rows(
    out: int, inverse: int, id1: int, id2: int, state: int, time: int, stamp: int
) -> list[EdgeTuple]:
    """The rows `_write` leaves: a deletion is placed at the add's time, which it records."""
    rows: list[EdgeTuple] = [
        (id1, out, id2, state, time, stamp, None),
        (id2, inverse, id1, state, time, stamp, None),
    ]
    if state == State.REMOVED:
        rows = [place(row, (stamp - 1, State.NORMAL, time)) for row in rows]
    return rows


def _node_states(g: Graph, lists: list[tuple[int, int]]) -> dict[tuple[int, int], tuple[int, int]]:
    backend, found = g.engine.backend, {}
    for node, atype in lists:
        row = backend.node_states(shard_of(node, g.engine.shards), [(node, atype)]).get(
            (node, atype)
        )
        if row is not None:
            found[(node, atype)] = (row.state, row.updated_at)
    return found


def _check(g: Graph, edges: dict[Any, Any], raw_ops: list[Any], data: st.DataObject) -> None:
    out, inverse = g.engine.assoc_type("follows").id, g.engine.assoc_type("followed_by").id
    base = g.engine.clock.now()
    initial: dict[EdgeKey, EdgeTuple] = {}
    for n, ((id1, id2), (state, time)) in enumerate(sorted(edges.items())):
        stamp = base + 10 * n + 5  # older than every node operation
        _write(g, id1, id2, state, time, stamp)
        for row in _rows(out, inverse, id1, id2, state, time, stamp):
            initial[row[:3]] = row
    stamps = data.draw(st.permutations(range(len(raw_ops))))
    ops = [
        NodeOp(node, d, state, base + 10_000 + 1000 * s)
        for (node, d, state), s in zip(raw_ops, stamps, strict=True)
    ]
    arrival = data.draw(st.permutations(ops))
    for op in data.draw(st.lists(st.sampled_from(ops), max_size=2)):
        arrival.insert(data.draw(st.integers(0, len(arrival))), op)
    for op in arrival:
        getattr(g, METHOD[op.state])(
            op.node, "follows", direction=op.direction, updated_at=op.stamp
        )
        assert g.drain(timeout=60)
    rows, states = reference(initial, ops, out, inverse)
    assert seen({row[:3]: tuple(row) for row in all_edges(g)}) == seen(rows)  # type: ignore[misc]
    assert g.check_counts() == []
    counts = counts_of(rows)
    for node, (atype, name) in itertools.product(
        NODES, [(out, "follows"), (inverse, "followed_by")]
    ):
        for state, state_name in enumerate(STATE_NAMES):
            assert g.assoc_count(node, name, state_name) == counts.get((node, atype, state), 0)
    lists = [(node, atype) for node in NODES for atype in (out, inverse)]
    assert _node_states(g, lists) == states


@pytest.mark.parametrize("kind", BACKENDS)
def test_node_operations_converge_in_every_order(kind: str) -> None:
    n = examples(kind, 40)
    directory = tempfile.mkdtemp(prefix="assocdb-nodes-")
    counter = itertools.count()

    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck))
    @given(edge_sets, op_lists, st.data())
    def run(edges: dict[Any, Any], raw_ops: list[Any], data: st.DataObject) -> None:
        stores = Stores(kind, Path(directory))
        try:
            g = stores.open(f"g{next(counter)}", shards=2)
            g.define_assoc("follows", inverse="followed_by")
            _check(g, edges, raw_ops, data)
        finally:
            stores.close()

    require(kind)
    run()


# -- the cases by name ----------------------------------------------------------------


@pytest.fixture
def follows(open_graph: Any) -> Graph:
    g: Graph = open_graph()
    g.define_assoc("follows", inverse="followed_by")
    return g


def test_an_older_archive_arriving_after_an_unarchive_changes_no_edge(follows: Graph) -> None:
    g = follows
    for n in (2, 3):
        g.assoc_add(1, "follows", n, time=n)
    now = g.engine.clock.now()
    g.node_unarchive(1, "follows", updated_at=now + 1_000_000)  # T: never archived
    assert g.drain(timeout=10)
    late = g.node_archive(1, "follows", updated_at=now)  # T - 1 s, arriving after
    assert late.status == "applied"  # and no job: the newer operation decides
    assert g.drain(timeout=10)
    assert g.node_state(1, "follows") == "normal"
    assert [a.id2 for a in g.assoc_range(1, "follows")] == [3, 2]
    assert [a.id2 for a in g.assoc_range(2, "followed_by")] == [1]
    assert g.assoc_count(1, "follows", "archived") == 0
    assert g.check_counts() == []


def test_a_node_removal_arriving_after_a_newer_unarchive_still_removes(follows: Graph) -> None:
    g = follows
    g.assoc_add(1, "follows", 2, time=2)
    now = g.engine.clock.now()
    g.node_unarchive(1, "follows", updated_at=now + 2_000_000)
    g.node_remove(1, "follows", updated_at=now + 1_000_000)  # older, arriving later
    assert g.drain(timeout=10)
    # In stamp order the removal came first and the unarchive skipped the removed edge.
    assert g.node_state(1, "follows") == "normal"
    assert g.assoc_count(1, "follows", "removed") == 1
    assert g.assoc_count(2, "followed_by", "removed") == 1
    assert g.assoc_edge(1, "follows", 2).state == "removed"  # type: ignore[union-attr]
    assert g.check_counts() == []


def test_a_newer_operation_on_the_other_end_decides_the_edge(follows: Graph) -> None:
    g = follows
    g.assoc_add(1, "follows", 2, time=2)
    now = g.engine.clock.now()
    g.node_archive(2, "follows", direction="in", updated_at=now + 2_000_000)
    g.node_unarchive(1, "follows", updated_at=now + 1_000_000)  # older: loses on the edge
    assert g.drain(timeout=10)
    assert g.assoc_count(1, "follows", "archived") == 1
    assert g.assoc_count(2, "followed_by", "archived") == 1


def test_a_removed_edge_keeps_its_position(follows: Graph) -> None:
    g = follows
    for n in range(2, 8):
        g.assoc_add(1, "follows", n, time=100 * n)
    g.assoc_delete(1, "follows", 5)
    g.assoc_delete(1, "follows", 3)
    g.assoc_archive(1, "follows", 6)
    removed = g.engine.backend.edges(
        shard_of(1, g.engine.shards), 1, g.engine.assoc_type("follows").id, [5]
    )
    assert (removed[0].state, removed[0].time, user_data(removed[0])) == (State.REMOVED, 500, None)
    assert g.assoc_edge(1, "follows", 5).data is None  # type: ignore[union-attr]
    q = g.select(1, "follows", states=["normal", "removed"])
    assert q.page().items == [7, 5, 4, 3, 2]
    mixed = g.select(1, "follows", states=["normal", "archived", "removed"])
    pages, cursor = [], None
    while True:  # forward, two at a time
        page = mixed.page(cursor, limit=2)
        pages.append(page)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert [p.items for p in pages] == [[7, 6], [5, 4], [3, 2]]
    back = mixed.page(pages[-1].prev_cursor, limit=2)
    assert back.items == [5, 4]
    assert mixed.page(back.prev_cursor, limit=2).items == [7, 6]


def test_a_tombstone_of_an_edge_that_never_existed_is_placed_at_its_deletion(
    follows: Graph,
) -> None:
    g = follows
    stamp = g.assoc_delete(1, "follows", 9).updated_at
    (row,) = g.engine.backend.edges(
        shard_of(1, g.engine.shards), 1, g.engine.assoc_type("follows").id, [9]
    )
    assert (row.state, row.time, row.updated_at) == (State.REMOVED, stamp // 1000, stamp)
    g.assoc_add(1, "follows", 9, time=5, updated_at=stamp - 1)  # an older add, late: loses
    assert g.assoc_edge(1, "follows", 9).state == "removed"  # type: ignore[union-attr]
    g.assoc_add(1, "follows", 9)  # a newer one: a new edge, at its own time
    assert g.assoc_count(1, "follows") == 1
