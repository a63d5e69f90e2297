"""The reference model of whole-node operations: FlockDB's rule, applied in stamp order.

A node operation `(node, direction, state, stamp)` sets the node state of its
lists and writes its state, stamped with its own time, onto every edge of
them (time and data kept), mirrored rows included. Edges deleted by their
own write are never touched; edges a node removal removed stay removed (a
later operation re-stamps them, still removed). Replaying the operations in
stamp order gives what every arrival order must converge to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from assocdb.core.merge import EdgeTuple, Source, State, place, source_of, user_data

EdgeKey = tuple[int, int, int]


class NodeOp(NamedTuple):
    node: int
    direction: str  # "out", "in" or "both"
    state: int
    stamp: int


def node_lists(direction: str, out: int, inverse: int) -> list[tuple[int, int]]:
    """(list type, mirrored rows' type) of a direction, for an `out`/`inverse` pair."""
    return {
        "out": [(out, inverse)],
        "in": [(inverse, out)],
        "both": [(out, inverse), (inverse, out)],
    }[direction]


def reference(
    edges: Mapping[EdgeKey, EdgeTuple], ops: Iterable[NodeOp], out: int, inverse: int
) -> tuple[dict[EdgeKey, EdgeTuple], dict[tuple[int, int], tuple[int, int]]]:
    """The rows and node states `(state, stamp)` after `ops`, replayed in stamp order."""
    rows = dict(edges)
    best: dict[EdgeKey, Source] = {}  # the best live value each key ever had
    for key, row in rows.items():
        if (source := source_of(row)) is not None:
            best[key] = source
    by_node: set[EdgeKey] = set()
    states: dict[tuple[int, int], tuple[int, int]] = {}
    for op in sorted(set(ops), key=lambda op: (op.stamp, op.state)):
        for atype, other in node_lists(op.direction, out, inverse):
            states[(op.node, atype)] = (op.state, op.stamp)
            for key in [k for k in rows if k[0] == op.node and k[1] == atype]:
                row = rows[key]
                if row[3] == State.REMOVED and key not in by_node:
                    continue
                state = State.REMOVED if row[3] == State.REMOVED else op.state
                mirror = (key[2], other, key[0])
                for k in (key, mirror):
                    rows[k] = (*k, state, row[4], op.stamp, row[6])
                    if state == State.REMOVED:
                        by_node.add(k)
                    else:
                        best[k] = max(best.get(k, (0, 0, 0)), (op.stamp, state, row[4]))
    for key, row in rows.items():  # a tombstone keeps the time of the best live value
        if row[3] == State.REMOVED and key in best:
            rows[key] = place(row, best[key])
    return rows, states


def seen(rows: Mapping[EdgeKey, EdgeTuple]) -> dict[EdgeKey, EdgeTuple]:
    """The rows as readers see them: a tombstone's recorded source left out.

    Node operations keep each edge's time, so every order places a tombstone
    at the same time; which re-stamp it records can differ (an operation that
    arrives after a newer one writes nothing), and matters only to a live
    write older than the tombstone arriving after it (docs/architecture.md).
    """
    return {key: (*row[:6], user_data(row)) for key, row in rows.items()}


def counts_of(rows: Mapping[EdgeKey, EdgeTuple]) -> dict[tuple[int, int, int], int]:
    """The count per (id1, atype, state) that the rows imply."""
    counts: dict[tuple[int, int, int], int] = {}
    for row in rows.values():
        key = (row[0], row[1], row[3])
        counts[key] = counts.get(key, 0) + 1
    return counts
