"""The expiry pass: removes the expired edges of types with a ttl, both legs, counts exact.

Reads hide an expired edge from the moment it expires (`api.ttl_reads`); this
pass makes the hiding physical, so lists, counts' tails and the cache stop
carrying them. It walks every shard's edge rows in key order, a page at a
time, and deletes each live edge of a type with a ttl whose time is below the
type's visibility bound *at that page* (so it never removes an edge a read
could still see), through the ordinary write path: a deletion of both legs,
counts changed in the same transactions, the cache updated from the
changeset, the journal making it durable.

The deletion is stamped `updated_at + 1` of the row it judged, not now: it
wins over that row and over any older write still to arrive (a replayed add of
the same edge), and loses to every write made after it — an edge re-added or
updated while the pass ran keeps its new value. (A write stamped exactly 1 µs
after the judged row ties with the deletion and loses, as the merge rule gives
removal the tie; a clock step of one µs between two writes of one edge.)

Each row is left as a tombstone, as every deletion is (the merge needs it to
refuse older writes). The pass reads the whole edge table: its cost grows with
the graph, not with what expired; `Cleaner` runs it once every `EXPIRE_ROUNDS`
rounds (every 10 s at its default interval of 1 s), and `expire()` runs one pass now.
"""

from __future__ import annotations

import threading

from ..core.merge import EdgeRow, State
from ..core.records import WriteResult
from ..core.schema import AssocType
from ..core.ttl import lowest_visible
from .assoc_writes import AssocWrites
from .engine import Engine

PAGE = 1000
EXPIRE_ROUNDS = 10  # the cleaner thread's rounds per expiry pass


class EdgeExpiry:
    """expire: one pass over every shard removing the expired edges (see the module doc)."""

    def __init__(self, engine: Engine, writes: AssocWrites) -> None:
        self._engine = engine
        self._writes = writes

    def kinds(self) -> dict[int, AssocType]:
        """The types with a ttl, by id, as the stored schema has them now."""
        schema = self._engine.read_schema()
        return {kind.id: kind for kind in schema.assoc_types if kind.ttl is not None}

    def expire(self, page: int = PAGE, stop: threading.Event | None = None) -> int:
        """Remove every edge that has expired; how many edge rows were found expired.
        `stop` (the cleaner thread's) ends the pass after the page in hand.

        >>> g.services.expiry.expire()
        12
        """
        kinds = self.kinds()
        if not kinds:
            return 0
        found = 0
        for shard in range(self._engine.shards):
            after = None
            while stop is None or not stop.is_set():
                rows = self._engine.backend.export_edges(shard, after, page)
                if not rows:
                    break
                last = rows[-1]
                after = (last.id1, last.atype, last.id2)
                found += self._remove(self._expired(rows, kinds))
        return found

    def _expired(self, rows: list[EdgeRow], kinds: dict[int, AssocType]) -> list[EdgeRow]:
        now = self._engine.clock.wall_ms()
        lows = {id: lowest_visible(now, kind.ttl or 0.0) for id, kind in kinds.items()}
        return [
            row
            for row in rows
            if row.state != State.REMOVED and row.atype in lows and row.time < lows[row.atype]
        ]

    def _remove(self, rows: list[EdgeRow]) -> int:
        if not rows:
            return 0
        schema = self._engine.schema
        writes = [
            self._writes.delete_op(
                row.id1, schema.assoc_by_id(row.atype).name, row.id2, row.updated_at + 1
            )
            for row in rows
        ]
        results = self._engine.submit_many(writes)
        return sum(isinstance(result, WriteResult) for result in results)
