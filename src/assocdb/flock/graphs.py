"""FlockDB graph ids → the association types whose lists they are.

FlockDB stores each graph `n` twice, forward (table `n`) and backward
(table `-n`), and a query term names a graph and a direction. Here a graph
is an association type with an inverse: table `n` is the type's list,
table `-n` its inverse type's list (`follows` ↔ `followed_by`). So a term
`(node, n, is_forward)` reads the list of `list_type(n, is_forward)`, and a
negative graph id, as FlockDB's forwarding tables allow, reads the other
direction.

Which type is graph `n`: the table given (`--graph 1=follows`), or, without
one, the association type whose schema id is `n` (ids are handed out in
definition order, an inverse right after its type, and never change;
`assocdb schema DIR` lists the types in id order, and `serve-thrift` prints
the graphs it serves when it starts).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from ..api.graph import Graph
from ..core.errors import InvalidRequest, NotFound
from ..core.schema import AssocType

MAX_GRAPH = 2**31 - 1  # graph ids are i32 on the wire
_RELOAD_SECONDS = 1.0


class GraphTable:
    """Resolves FlockDB graph ids of one Graph; see the module doc."""

    def __init__(self, graph: Graph, table: Mapping[int, str] | None = None) -> None:
        self._graph = graph
        self._table = None if table is None else dict(table)
        self._reloaded_at = float("-inf")
        for name in (self._table or {}).values():
            graph.engine.assoc_type(name)  # UnknownType now, not at the first request

    def describe(self) -> str:
        """What the table is, for the server's start-up line."""
        if self._table is None:
            kinds = self._graph.schema.assoc_types
            return "graphs by schema id: " + (
                ", ".join(f"{k.id}={k.name}" for k in kinds) or "none yet"
            )
        return ", ".join(f"{n}={name}" for n, name in sorted(self._table.items()))

    def list_type(self, graph_id: object, forward: object = True) -> AssocType:
        """The type whose list table `graph_id` (read `forward`, or backward) is."""
        if type(graph_id) is not int or not 0 < abs(graph_id) <= MAX_GRAPH:
            raise InvalidRequest(f"graph_id must be a non-zero 32-bit integer, got {graph_id!r}")
        if type(forward) is not bool:
            raise InvalidRequest(f"is_forward must be true or false, got {forward!r}")
        table = graph_id if forward else -graph_id
        kind = self._kind(abs(table))
        if table > 0:
            return kind
        inverse = self._graph.schema.inverse(kind)
        if inverse is None:
            raise InvalidRequest(
                f"graph {abs(table)} ({kind.name!r}) has no backward direction: define the "
                f"type with an inverse (or symmetric) to store it"
            )
        return inverse

    def _kind(self, n: int) -> AssocType:
        if self._table is not None:
            name = self._table.get(n)
            if name is None:
                raise NotFound(f"no graph {n}: this server serves graphs {_listed(self._table)}")
            return self._graph.engine.assoc_type(name)
        schema = self._graph.schema
        if not any(t.id == n for t in schema.assoc_types):
            now = time.monotonic()
            if now - self._reloaded_at >= _RELOAD_SECONDS:  # another process may define it
                self._reloaded_at = now
                schema = self._graph.engine.reload_schema()
        for kind in schema.assoc_types:
            if kind.id == n:
                return kind
        raise NotFound(
            f"no graph {n}: no association type has schema id {n} (graph n is the type of "
            f"id n unless the server is given a table, --graph {n}=TYPE)"
        )


def parse_table(pairs: Iterable[str]) -> dict[int, str]:
    """`["1=follows", "2=blocks"]` → `{1: "follows", 2: "blocks"}`, or InvalidRequest."""
    table: dict[int, str] = {}
    for pair in pairs:
        number, sep, name = pair.partition("=")
        if not sep or not number.strip().isdigit() or not name.strip():
            raise InvalidRequest(f"a graph is N=TYPE (e.g. 1=follows), got {pair!r}")
        n = int(number)
        if not 0 < n <= MAX_GRAPH:
            raise InvalidRequest(f"graph ids are 1 to {MAX_GRAPH}, got {n}")
        if n in table:
            raise InvalidRequest(f"graph {n} is given twice")
        table[n] = name.strip()
    return table


def _listed(table: Mapping[int, str]) -> str:
    return ", ".join(f"{n} ({name})" for n, name in sorted(table.items())) or "none"
