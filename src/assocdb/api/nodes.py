"""Whole-node operations: archive, unarchive, negate or remove every edge of a node.

FlockDB keeps a state per `(node, type, direction)`; here a direction is a
list, `(node, atype)` for outgoing edges and `(node, inverse)` for incoming
ones, so a node state is kept per list (a `NodeRow`, a register under the
same merge rule). Setting it does two things:

1. at once, the node state itself: from then on an edge written to or from
   the node takes that state ("node state dominates": a new follow of an
   archived account is written archived);
2. in the background, a `NodeJob` that pages through the list's existing
   edges (millions, a page of 1,000 at a time, surviving restarts) and moves
   them, with their mirrored rows, keeping time and data.

Which edges move: archive and negate move normal edges; remove moves every
live edge; unarchive moves back the edges in the state the node was in
(archived or negative). Removed edges are never resurrected.
"""

from __future__ import annotations

from typing import Literal

from ..core.errors import InvalidRequest
from ..core.ids import check_id, shard_of
from ..core.merge import NodeRow, State
from ..core.ops import NodeJob, Rows
from ..core.records import STATE_NAMES, Direction, StateName, WriteResult
from ..core.schema import AssocType
from .engine import Engine

#: The states a node operation moves edges out of (unarchive: see `_sources`).
_SOURCES: dict[int, list[int]] = {
    State.ARCHIVED: [State.NORMAL],
    State.NEGATIVE: [State.NORMAL],
    State.REMOVED: [State.NORMAL, State.NEGATIVE, State.ARCHIVED],
}


class Nodes:
    """node_archive, node_unarchive, node_negate, node_remove, node_state (`Graph`
    documents each)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def node_archive(
        self, node: int, atype: str, *, direction: Direction = "out", updated_at: int | None = None
    ) -> WriteResult:
        return self._node_set(node, atype, State.ARCHIVED, direction, updated_at)

    def node_unarchive(
        self, node: int, atype: str, *, direction: Direction = "out", updated_at: int | None = None
    ) -> WriteResult:
        return self._node_set(node, atype, State.NORMAL, direction, updated_at)

    def node_negate(
        self, node: int, atype: str, *, direction: Direction = "out", updated_at: int | None = None
    ) -> WriteResult:
        return self._node_set(node, atype, State.NEGATIVE, direction, updated_at)

    def node_remove(
        self, node: int, atype: str, *, direction: Direction = "out", updated_at: int | None = None
    ) -> WriteResult:
        return self._node_set(node, atype, State.REMOVED, direction, updated_at)

    def node_state(
        self, node: int, atype: str, *, direction: Literal["out", "in"] = "out"
    ) -> StateName:
        node = check_id(node, "node")
        if direction not in ("out", "in"):
            raise InvalidRequest(
                f"node_state reads one direction, 'out' or 'in' (ask twice for both); "
                f"got {direction!r}"
            )
        ((kind, _),) = self._node_lists(self._engine.assoc_type(atype), direction)
        stored = self._engine.backend.node_states(
            shard_of(node, self._engine.shards), [(node, kind.id)]
        )
        row = stored.get((node, kind.id))
        return STATE_NAMES[row.state if row is not None else State.NORMAL]

    def _node_set(
        self, node: int, atype: str, state: int, direction: Direction, updated_at: int | None
    ) -> WriteResult:
        node = check_id(node, "node")
        lists = self._node_lists(self._engine.assoc_type(atype), direction)
        ua = self._engine.stamp(updated_at)
        stored = self._engine.backend.node_states(
            shard_of(node, self._engine.shards), [(node, kind.id) for kind, _ in lists]
        )
        work = []
        for kind, other in lists:
            before = stored.get((node, kind.id))
            sources = _sources(state, before.state if before is not None else State.NORMAL)
            work.append((kind.id, None if other is None else other.id, sources))
        result = self._engine.submit(
            Rows(nodes=[NodeRow(node, kind.id, state, ua) for kind, _ in lists]), ua
        )
        if not any(sources for _, _, sources in work):
            return result
        return self._engine.submit_background(NodeJob(node, work, state, ua))

    def _node_lists(
        self, kind: AssocType, direction: str
    ) -> list[tuple[AssocType, AssocType | None]]:
        """The lists of a direction: (list type, type of the mirrored rows)."""
        if direction not in ("out", "in", "both"):
            raise InvalidRequest(f"direction must be 'out', 'in' or 'both'; got {direction!r}")
        inverse = self._engine.schema.inverse(kind)
        outgoing = (kind, inverse)
        if direction == "out":
            return [outgoing]
        if inverse is None:
            raise InvalidRequest(
                f"{kind.name!r} has no inverse type, so a node's incoming {kind.name} edges are "
                f"not stored; define it with inverse= or symmetric=True"
            )
        incoming = (inverse, kind)
        if direction == "in":
            return [incoming]
        return [outgoing] if kind.symmetric else [outgoing, incoming]


def _sources(state: int, before: int) -> list[int]:
    if state == State.NORMAL:  # unarchive: undo what the node's state did
        return [before] if before in (State.ARCHIVED, State.NEGATIVE) else []
    return _SOURCES[state]
