"""A plain-dict model of a graph's association semantics, for stateful tests.

Writes happen one at a time with increasing `updated_at`, so in the model the
last write simply wins; the store must agree whatever it does internally.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

INVERSE = {"follows": "followed_by", "followed_by": "follows", "friend": "friend"}


@dataclass(frozen=True)
class Edge:
    state: str
    time: int
    data: Any


@dataclass
class Model:
    edges: dict[tuple[int, str, int], Edge] = field(default_factory=dict)

    def _put(self, id1: int, atype: str, id2: int, edge: Edge) -> None:
        self.edges[(id1, atype, id2)] = edge
        inverse = INVERSE.get(atype)
        if inverse is not None:
            self.edges[(id2, inverse, id1)] = edge

    def live(self, id1: int, atype: str, id2: int) -> Edge | None:
        edge = self.edges.get((id1, atype, id2))
        return edge if edge is not None and edge.state != "removed" else None

    def add(self, id1: int, atype: str, id2: int, time: int | None, data: Any, ua: int) -> None:
        current = self.live(id1, atype, id2)
        if time is None:
            time = current.time if current else ua // 1000
        if data is None and current:
            data = current.data
        self._put(id1, atype, id2, Edge("normal", time, data))

    def delete(self, id1: int, atype: str, id2: int) -> None:
        self._put(id1, atype, id2, Edge("removed", 0, None))

    def change_type(self, id1: int, atype: str, id2: int, new: str) -> bool:
        current = self.live(id1, atype, id2)
        if current is None or atype == new:
            return False
        self.delete(id1, atype, id2)
        self._put(id1, new, id2, current)
        return True

    def listing(self, id1: int, atype: str) -> list[tuple[int, int, Any]]:
        """(id2, time, data) of the visible edges, newest first."""
        rows = [
            (id2, e.time, e.data)
            for (a, t, id2), e in self.edges.items()
            if a == id1 and t == atype and e.state == "normal"
        ]
        return sorted(rows, key=lambda r: (r[1], r[0]), reverse=True)
