"""Whole-node operations commute: the pure rule (`core.ops.restamp_rows`) over every arrival order.

A plain-dict store applies node operations as `api.nodes` and `writes.nodejob`
do (node state register, then the job's pages through `restamp_rows`, merged
by `core.merge`), in random orders with duplicates; the rows, counts and node
states must equal the reference model's (FlockDB's rule in stamp order).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from assocdb.core.merge import EdgeTuple, NodeRow, State, merge_edges, merge_nodes
from assocdb.core.ops import NodeJob, restamp_rows
from tests.support.node_model import EdgeKey, NodeOp, counts_of, node_lists, reference, seen

OUT, INV = 1, 2
NODES = [1, 2, 3, 4]


class Store:
    """Rows, counts and node states, changed only through the merge rule."""

    def __init__(self, edges: dict[EdgeKey, EdgeTuple]) -> None:
        self.rows: dict[EdgeKey, EdgeTuple] = {}
        self.counts: dict[tuple[int, int, int], int] = {}
        self.nodes: dict[tuple[int, int], NodeRow] = {}
        self.write(list(edges.values()))

    def write(self, rows: list[EdgeTuple]) -> None:
        changed, deltas = merge_edges(self.rows, rows)
        for _, new in changed:
            self.rows[new[:3]] = new
        for key, n in deltas.items():
            self.counts[key] = self.counts.get(key, 0) + n

    def node_op(self, op: NodeOp) -> None:
        """What `Nodes._node_set` and the job's pages do, in one go."""
        lists = node_lists(op.direction, OUT, INV)
        work, marks = [], []
        for atype, other in lists:
            before = self.nodes.get((op.node, atype))
            older = before is not None and (op.stamp, op.state) <= (before[3], before[2])
            if older and op.state != State.REMOVED:
                continue
            marks.append(0 if before is None else before[3])
            work.append((atype, other, []))
        for row in merge_nodes(
            self.nodes, [NodeRow(op.node, atype, op.state, op.stamp) for atype, _ in lists]
        ):
            self.nodes[(row[0], row[1])] = row
        job = NodeJob(op.node, work, op.state, op.stamp, marks=marks)
        for index, (atype, other, _) in enumerate(work):
            page = sorted(
                (r for k, r in self.rows.items() if k[0] == op.node and k[1] == atype),
                key=lambda r: -r[2],
            )
            now = self.nodes.get((op.node, atype))
            own = [m for m in (marks[index], 0 if now is None else now[3]) if m]
            others = {
                r[2]: self.nodes[(r[2], other)][3] for r in page if (r[2], other) in self.nodes
            }
            self.write(restamp_rows(job, atype, other, own, page, others).edges)

    def states(self) -> dict[tuple[int, int], tuple[int, int]]:
        return {key: (row[2], row[3]) for key, row in self.nodes.items()}


def _edge(id1: int, id2: int, state: int, time: int, stamp: int) -> list[EdgeTuple]:
    return [(id1, OUT, id2, state, time, stamp, None), (id2, INV, id1, state, time, stamp, None)]


edge_sets = st.dictionaries(
    st.tuples(st.sampled_from(NODES), st.sampled_from(NODES)),
    st.tuples(st.sampled_from([0, 1, 2, 3]), st.integers(0, 5)),
    max_size=8,
)
op_lists = st.lists(
    st.tuples(
        st.sampled_from(NODES[:3]),
        st.sampled_from(["out", "in", "both"]),
        st.sampled_from([0, 1, 2, 3]),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=400, deadline=None)
@given(edge_sets, op_lists, st.data())
def test_node_operations_converge_in_every_order(
    edges: dict[tuple[int, int], tuple[int, int]],
    raw_ops: list[tuple[int, str, int]],
    data: st.DataObject,
) -> None:
    initial: dict[EdgeKey, EdgeTuple] = {}
    for n, ((id1, id2), (state, time)) in enumerate(sorted(edges.items())):
        for row in _edge(id1, id2, state, time, 100 + n):  # older than every node operation
            initial[row[:3]] = row
    stamps = data.draw(st.permutations(range(1000, 1000 + len(raw_ops))))
    ops = [
        NodeOp(node, d, state, stamp)
        for (node, d, state), stamp in zip(raw_ops, stamps, strict=True)
    ]
    arrival = data.draw(st.permutations(ops))
    repeats = data.draw(st.lists(st.sampled_from(ops), max_size=3))
    for op in repeats:  # duplicated deliveries, anywhere
        arrival.insert(data.draw(st.integers(0, len(arrival))), op)
    store = Store(initial)
    for op in arrival:
        store.node_op(op)
    rows, states = reference(initial, ops, OUT, INV)
    assert seen(store.rows) == seen(rows)
    assert {k: n for k, n in store.counts.items() if n} == counts_of(rows)
    assert store.states() == states


def test_the_issue_case_an_older_archive_arriving_after_an_unarchive() -> None:
    initial = {row[:3]: row for row in _edge(1, 2, State.NORMAL, 5, 100)}
    store = Store(initial)
    store.node_op(NodeOp(1, "out", State.NORMAL, 2000))  # unarchive at T, never archived
    store.node_op(NodeOp(1, "out", State.ARCHIVED, 1000))  # archive at T - 1 s, late
    assert store.states() == {(1, OUT): (State.NORMAL, 2000)}
    assert store.rows[(1, OUT, 2)][3:6] == (State.NORMAL, 5, 2000)
    assert store.rows[(2, INV, 1)][3:6] == (State.NORMAL, 5, 2000)
