"""Whole-node operations: archive, unarchive, negate or remove every edge of a node.

FlockDB keeps a state per `(node, type, direction)`; here a direction is a
list, `(node, atype)` for outgoing edges and `(node, inverse)` for incoming
ones, so a node state is kept per list (a `NodeRow`, a register under the
same merge rule). Setting it does two things:

1. at once, the node state itself: from then on an edge written to or from
   the node takes that state ("node state dominates": a new follow of an
   archived account is written archived);
2. in the background, a `NodeJob` that pages through the list's existing
   edges (millions, a page at a time, surviving restarts) and re-stamps
   them, with their mirrored rows, with the operation's state and time,
   keeping their own time and data (FlockDB's rule: `core.ops.restamp_rows`).

Because the edges carry the operation's time, node operations commute on
every edge as edge writes do: of two operations on a node, the newer one
decides, whatever order they arrive in. An operation older than the node's
state changes nothing (the newer one has re-stamped or will re-stamp every
edge it could), except a removal, which also removes the edges a newer
operation re-stamped. Removed edges are never resurrected: an edge deleted
by its own write stays removed, and so does one a node removal removed.
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

#: Every state: a node operation's job walks its lists whole (`core.ops.NodeJob`).
_ALL_STATES: list[int] = [State.NORMAL, State.NEGATIVE, State.ARCHIVED, State.REMOVED]


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
        node, state = check_id(node, "node"), int(state)  # a plain int for the driver
        lists = self._node_lists(self._engine.assoc_type(atype), direction)
        ua = self._engine.stamp(updated_at)
        stored = self._engine.backend.node_states(
            shard_of(node, self._engine.shards), [(node, kind.id) for kind, _ in lists]
        )
        # Stamped by the store: stamped again as it enters the pipeline (edge writes
        # stamped before it and entering after it must read the new state).
        result = self._engine.submit(
            Rows(nodes=[NodeRow(node, kind.id, state, ua) for kind, _ in lists]),
            ua,
            stamp_on_entry=updated_at is None,
        )
        ua = result.updated_at
        work, marks = [], []
        for kind, other in lists:
            before = stored.get((node, kind.id))
            older = before is not None and (ua, state) <= (before.updated_at, before.state)
            if older and state != State.REMOVED:
                continue  # a newer operation on this list decides every edge
            marks.append(0 if before is None else before.updated_at)
            work.append((kind.id, None if other is None else other.id, list(_ALL_STATES)))
        if not work:
            return result
        return self._engine.submit_background(NodeJob(node, work, state, ua, marks=marks))

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
