"""The FlockDB service: every method of `Flockdb.thrift`, over one Graph.

Each method decodes its Thrift structs into plain values, asks `Selector`
or `Executor`, and encodes the answer (ids as little-endian i64 bytes, counts
as little-endian i32 bytes, times in FlockDB's units: positions = `time`,
`updated_at` in seconds). Every error becomes a `FlockException` with a
message, as FlockDB's `EdgesService` wraps them: assocdb's own with their
message, anything else as `Class: message` (and logged). A client never
sees the server fail.
"""

from __future__ import annotations

import functools
import logging
import struct
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

from ..api.graph import Graph
from ..core.errors import AssocdbError, InvalidRequest, NotFound
from ..core.ids import check_id, shard_of
from ..core.merge import State
from ..core.records import STATE_NAMES, Assoc
from .execute import Executor, FlockOperation
from .graphs import GraphTable
from .select import STATE_IDS, FlockTerm, Selector

log = logging.getLogger("assocdb.flock")
F = TypeVar("F", bound=Callable[..., Any])
MAX_INT32 = 2**31 - 1
MAX_IDS = 10_000  # destination ids in one term (assocdb's restriction limit)


def _rpc(method: F) -> F:
    """Run `method`, turning any error into the IDL's FlockException."""

    @functools.wraps(method)
    def run(self: FlockService, *args: Any) -> Any:
        try:
            return method(self, *args)
        except AssocdbError as exc:
            raise self.idl.FlockException(description=exc.message) from None
        except Exception as exc:  # a bug: logged here, a message for the client
            log.exception("FlockDB %s failed", method.__name__)
            raise self.idl.FlockException(description=f"{type(exc).__name__}: {exc}") from None

    return run  # type: ignore[return-value]


class FlockService:
    """The handler thriftpy2 calls, one method per IDL method (same names, same order
    of arguments)."""

    def __init__(self, graph: Graph, graphs: GraphTable, idl: ModuleType) -> None:
        self.idl = idl
        self._graph = graph
        self._graphs = graphs
        self._select = Selector(graph, graphs)
        self._execute = Executor(graph, graphs)

    @_rpc
    def contains(self, source_id: int, graph_id: int, destination_id: int) -> bool:
        kind = self._graphs.list_type(graph_id)
        return self._graph.assoc_contains(source_id, kind.name, destination_id)

    @_rpc
    def get(self, source_id: int, graph_id: int, destination_id: int) -> Any:
        kind = self._graphs.list_type(graph_id)
        edge = self._graph.assoc_edge(source_id, kind.name, destination_id)
        if edge is None:
            raise NotFound(f"Record not found: ({source_id}, {graph_id}, {destination_id})")
        return self._edge(edge)

    @_rpc
    def get_metadata(self, source_id: int, graph_id: int) -> Any:
        found = self._metadata(source_id, graph_id)
        if found is None:
            raise NotFound(f"Record not found: ({source_id}, {graph_id})")
        state, count, updated_at = found
        return self.idl.Metadata(source_id, STATE_IDS[STATE_NAMES[state]], count, updated_at)

    @_rpc
    def contains_metadata(self, source_id: int, graph_id: int) -> bool:
        return self._metadata(source_id, graph_id) is not None

    @_rpc
    def select2(self, queries: Sequence[Any]) -> list[Any]:
        return [self._select_one(q.operations, q.page) for q in _listed(queries, "queries")]

    @_rpc
    def count2(self, queries: Sequence[Sequence[Any]]) -> bytes:
        counts = [self._count_one(ops) for ops in _listed(queries, "queries")]
        return struct.pack(f"<{len(counts)}i", *counts)

    @_rpc
    def select_edges(self, queries: Sequence[Any]) -> list[Any]:
        results = []
        for query in _listed(queries, "queries"):
            if query.term is None:
                raise InvalidRequest("an EdgeQuery needs a term")
            count, cursor = _page(query.page)
            page = self._select.edges_page(self._select.term(_term(query.term)), count, cursor)
            edges = [self._edge(edge) for edge in page.edges]
            results.append(self.idl.EdgeResults(edges, page.next_cursor, page.prev_cursor))
        return results

    @_rpc
    def execute(self, operations: Any) -> None:
        if operations is None:
            raise InvalidRequest("execute needs its operations")
        ops = [
            FlockOperation(op.operation_type, _term(op.term), op.position)
            for op in _listed(operations.operations, "operations")
        ]
        self._execute.execute(ops, operations.execute_at, operations.priority)

    @_rpc
    def count(self, operations: Sequence[Any]) -> int:
        return self._count_one(operations)

    @_rpc
    def select(self, operations: Sequence[Any], page: Any) -> Any:
        return self._select_one(operations, page)

    # -- the parts ------------------------------------------------------------------------

    def _select_one(self, operations: Sequence[Any], page: Any) -> Any:
        query = self._select.compile(_program(operations))
        count, cursor = _page(page)
        result = self._select.page(query, count, cursor)
        ids = struct.pack(f"<{len(result.items)}q", *result.items)
        return self.idl.Results(ids, result.next_cursor, result.prev_cursor)

    def _count_one(self, operations: Sequence[Any]) -> int:
        return self._select.count(self._select.compile(_program(operations)))

    def _edge(self, edge: Assoc) -> Any:
        return self.idl.Edge(
            edge.id1,
            edge.id2,
            edge.time,
            min(edge.updated_at // 1_000_000, MAX_INT32),
            0,
            STATE_IDS[edge.state],
        )

    def _metadata(self, source_id: int, graph_id: int) -> tuple[int, int, int] | None:
        """(state, count in that state, updated_at in seconds) of a node's list, or None
        if the node never had an edge nor a state there (FlockDB has no row then)."""
        node = check_id(source_id, "source_id")
        kind = self._graphs.list_type(graph_id)
        backend = self._graph.engine.backend
        shard = shard_of(node, self._graph.shards)
        row = backend.node_states(shard, [(node, kind.id)]).get((node, kind.id))
        counts = backend.counts(shard, node, kind.id)
        if row is None and not any(counts.values()):
            return None
        state = State.NORMAL if row is None else row.state
        updated_at = 0 if row is None else min(row.updated_at // 1_000_000, MAX_INT32)
        count = counts.get(state, 0)
        if kind.ttl is not None:  # expired edges are not counted (`core.ttl`)
            count = self._graph.assoc_count(node, kind.name, STATE_NAMES[state])
        return state, min(count, MAX_INT32), updated_at


def _listed(values: object, name: str) -> Sequence[Any]:
    if not isinstance(values, (list, tuple)):
        raise InvalidRequest(f"{name} must be a list, got {values!r:.60}")
    return values


def _program(operations: Sequence[Any]) -> list[tuple[object, FlockTerm | None]]:
    return [
        (op.operation_type, None if op.term is None else _term(op.term))
        for op in _listed(operations, "operations")
    ]


def _page(page: Any) -> tuple[object, object]:
    if page is None:
        raise InvalidRequest("a select needs a page (count, cursor)")
    return page.count, page.cursor


def _term(term: Any) -> FlockTerm:
    if term is None:
        raise InvalidRequest("an operation needs a term")
    return FlockTerm(
        term.source_id,
        term.graph_id,
        term.is_forward,
        None if term.destination_ids is None else _unpack(term.destination_ids),
        term.state_ids,
    )


def _unpack(packed: object) -> list[int]:
    """Little-endian i64s, as FlockDB packs destination ids."""
    if not isinstance(packed, bytes) or len(packed) % 8:
        raise InvalidRequest("destination_ids must be little-endian 64-bit ids, 8 bytes each")
    if len(packed) > 8 * MAX_IDS:
        raise InvalidRequest(f"at most {MAX_IDS:,} destination ids in a term")
    return list(struct.unpack(f"<{len(packed) // 8}q", packed))
