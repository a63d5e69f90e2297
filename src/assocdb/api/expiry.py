"""The expiry pass: removes the expired edges of types with a ttl, both legs, counts exact.

Reads hide an expired edge from the moment it expires (`api.ttl_reads`); this
pass makes the hiding physical, so lists, counts' tails and the cache stop
carrying them. It walks every shard's edge rows in key order, a page at a
time, and deletes each live edge of a type with a ttl whose time is below the
type's visibility bound *at that page* (so it never removes an edge a read
could still see), through the ordinary write path: a deletion of both legs,
counts changed in the same transactions, the cache updated from the
changeset, the journal making it durable; in the write pipeline's low lane,
so that clients' writes go first (`writes.lanes`).

The deletion is stamped `updated_at + 1` of the row it judged, not now: it
wins over that row and over any older write still to arrive (a replayed add of
the same edge), and loses to every write made after it — an edge re-added or
updated while the pass ran keeps its new value. (A write stamped exactly 1 µs
after the judged row ties with the deletion and loses, as the merge rule gives
removal the tie; a clock step of one µs between two writes of one edge.)

Each row is left as a tombstone, as every deletion is (the merge needs it to
refuse older writes). The pass asks each shard only for the live rows of the
types with a ttl whose time is below the bound (`Backend.export_edges` with
`older`), a page at a time in key order: the shard evaluates that filter on its
key index `(id1, atype, id2)`, which carries atype, state and time, so rows that
have not expired are never fetched nor decoded — but the index is still walked
whole, so a pass's cost still grows with the shard's edges (index entries, not
rows), plus what expired. No index orders the edges by (atype, time) across
lists. `Cleaner` runs it once every `EXPIRE_ROUNDS` rounds (every 10 s at its
default interval of 1 s), and `expire()` runs one pass now.
"""

from __future__ import annotations

import threading

from ..core.merge import EdgeRow
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
        """Remove every edge that has expired; how many edges it removed (both legs of an
        edge with an inverse count once: deleting one leg removes the other).
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
                now = self._engine.clock.wall_ms()
                lows = {id: lowest_visible(now, kind.ttl or 0.0) for id, kind in kinds.items()}
                rows = self._engine.backend.export_edges(shard, after, page, lows)
                if not rows:
                    break
                last = rows[-1]
                after = (last.id1, last.atype, last.id2)
                found += self._remove(rows)
                if len(rows) < page:
                    break
        return found

    def _remove(self, rows: list[EdgeRow]) -> int:
        """Delete the edges of these rows; a row whose inverse leg is also in the page is
        the same edge: deleted once (the filtered walk often holds both legs)."""
        schema = self._engine.schema
        edges: dict[tuple[int, int, int], EdgeRow] = {}
        for row in rows:
            inverse = schema.inverse(schema.assoc_by_id(row.atype))
            if inverse is None or (row.id2, inverse.id, row.id1) not in edges:
                edges[(row.id1, row.atype, row.id2)] = row
        writes = [
            self._writes.delete_op(
                row.id1, schema.assoc_by_id(row.atype).name, row.id2, row.updated_at + 1
            )
            for row in edges.values()
        ]
        # background work: it gives way to client writes (the pipeline's low lane)
        results = self._engine.submit_many(writes, low=True)
        return sum(isinstance(result, WriteResult) for result in results)
