"""FlockDB's writes: `execute` of a list of operations, with a priority.

Each operation is a state (Add = normal, Remove, Archive, Negate) for a
query term. A term with destination ids writes one edge per id (`source →
id` forward, `id → source` backward), in the term's graph; the edges of one
call enter the write pipeline together (one journal fsync, one transaction
per touched shard). A term without destination ids is a whole-node
operation (FlockDB's Multi job): the node state is written at once and the
node's edges move in the background; Add undoes an archive or negate
(`node_unarchive`).

`position` is the time of a new edge, added, archived or negated (default:
now, in ms, as FlockDB's clients send it); an edge that is already live
keeps its time, as FlockDB keeps a position. `execute_at` (seconds) stamps the writes' `updated_at`,
so an older operation that arrives late loses. Priority High and Medium
are applied before the call returns; Low is answered once journaled
(`sync=False`) and applied in the background. Every operation is checked
before any is written: a bad one fails the whole call, as in FlockDB.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple

import msgspec

from ..api.graph import Graph
from ..core.errors import InvalidRequest
from ..core.ids import check_id, check_time
from ..core.merge import State
from ..core.ops import EdgeWrite
from ..core.records import WriteResult
from .graphs import GraphTable
from .select import FlockTerm

#: FlockDB's ExecuteOperationType → the state it writes.
ADD, REMOVE, ARCHIVE, NEGATE = 1, 2, 3, 4
_STATES = {
    ADD: State.NORMAL,
    REMOVE: State.REMOVED,
    ARCHIVE: State.ARCHIVED,
    NEGATE: State.NEGATIVE,
}
#: FlockDB's Priority.
LOW, MEDIUM, HIGH = 1, 2, 3
MAX_EXECUTE_AT = 2**31 - 1


class FlockOperation(NamedTuple):
    """An ExecuteOperation, decoded."""

    operation_type: int
    term: FlockTerm
    position: int | None


class Executor:
    """execute over one Graph."""

    def __init__(self, graph: Graph, graphs: GraphTable) -> None:
        self._graph = graph
        self._graphs = graphs
        self._writes = graph.services.writes

    def execute(
        self, operations: Sequence[FlockOperation], execute_at: object, priority: object
    ) -> None:
        if not operations:
            raise InvalidRequest("You must have at least one operation")
        if priority not in (LOW, MEDIUM, HIGH):
            raise InvalidRequest(
                f"priority must be 1 (Low), 2 (Medium) or 3 (High), got {priority!r}"
            )
        updated_at = None
        if execute_at is not None:
            if type(execute_at) is not int or not 0 <= execute_at <= MAX_EXECUTE_AT:
                raise InvalidRequest(
                    f"execute_at must be seconds since the epoch, got {execute_at!r}"
                )
            updated_at = execute_at * 1_000_000
        steps = [self._plan(op, updated_at) for op in operations]  # all checked first
        edges: list[tuple[EdgeWrite, int]] = []
        for step in steps:
            if isinstance(step, list):
                edges += step
                continue
            self._write(edges, priority)
            edges = []
            step()
        self._write(edges, priority)

    def _plan(
        self, op: FlockOperation, updated_at: int | None
    ) -> list[tuple[EdgeWrite, int]] | Callable[[], WriteResult]:
        """The edge writes of one operation, or its whole-node operation to call."""
        state = _STATES.get(op.operation_type)
        if state is None:
            raise InvalidRequest(f"Unknown operation {op.operation_type!r}")
        term = op.term
        kind = self._graphs.list_type(term.graph_id, True)
        source = check_id(term.source_id, "source_id")
        if type(term.is_forward) is not bool:
            raise InvalidRequest(f"is_forward must be true or false, got {term.is_forward!r}")
        if term.destination_ids is None:
            return self._node_operation(source, kind.name, term.is_forward, state, updated_at)
        position = _now_ms() if op.position is None else check_time(op.position, "position")
        writes = []
        for other in term.destination_ids:
            id1, id2 = (source, other) if term.is_forward else (other, source)
            if state == State.NORMAL:
                add, stamp = self._writes.add_op(id1, kind.name, id2, None, None, updated_at)
                writes.append((msgspec.structs.replace(add, new_time=position), stamp))
            elif state == State.REMOVED:
                writes.append(self._writes.delete_op(id1, kind.name, id2, updated_at))
            else:  # archived or negative: a new edge takes the position too (FlockDB's Single)
                edge, stamp = self._writes.state_op(id1, kind.name, id2, state, updated_at)
                writes.append((msgspec.structs.replace(edge, new_time=position), stamp))
        return writes

    def _node_operation(
        self, node: int, atype: str, forward: bool, state: int, updated_at: int | None
    ) -> Callable[[], WriteResult]:
        direction: Literal["out", "in"] = "out" if forward else "in"
        g = self._graph
        if direction == "in" and g.schema.inverse(g.engine.assoc_type(atype)) is None:
            raise InvalidRequest(
                f"{atype!r} has no inverse type: its incoming edges are not stored"
            )
        methods: dict[int, Callable[..., WriteResult]] = {
            State.NORMAL: g.node_unarchive,
            State.REMOVED: g.node_remove,
            State.ARCHIVED: g.node_archive,
            State.NEGATIVE: g.node_negate,
        }
        method = methods[state]
        if updated_at is not None:
            g.engine.stamp(updated_at)  # checked now: a stamp too far ahead fails the call
        return lambda: method(node, atype, direction=direction, updated_at=updated_at)

    def _write(self, edges: list[tuple[EdgeWrite, int]], priority: object) -> None:
        if not edges:
            return
        results = self._graph.engine.submit_many(edges, sync=priority != LOW)
        for result in results:
            if isinstance(result, BaseException):
                raise result


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
