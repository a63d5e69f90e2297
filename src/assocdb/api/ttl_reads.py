"""What reads of a type with a ttl add: the time bound, and the count of the expired tail.

Every read of such a type keeps the edges with `time >= low` (`core.ttl`), judged
by the engine's clock at the read. The cache keeps stored rows and stored counts,
as for any type, so a write updates them as before; what a read takes from the
cache is bounded after, so neither tier ever answers with an expired edge. A
visible count is the stored count minus the edges of the list older than the
bound: a scan of the list's oldest tail on its time index, which holds nothing
once the cleaner (`api.expiry`) has removed them; or, when tier 1 holds the whole
(small) list, its visible edges counted there, with no statement.
"""

from __future__ import annotations

from ..core import cursor as _cursor
from ..core.ids import shard_of
from ..core.merge import PLAIN_NORMAL as _NORMAL
from ..core.scans import EdgeScan
from ..core.schema import AssocType
from ..core.ttl import lowest_visible
from .engine import Engine


class Expiry:
    """The visibility bound of types with a ttl, and visible counts."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def low(self, kind: AssocType, low: int | None = None) -> int:
        """The lowest visible time of `kind` now, raised to `low` if that is higher."""
        assert kind.ttl is not None
        bound = lowest_visible(self._engine.clock.wall_ms(), kind.ttl)
        return bound if low is None or low < bound else low

    def count(self, id1: int, kind: AssocType, state: int, stored: int) -> int:
        """The visible count of `(id1, kind)` in `state`, from its stored count: counted in
        the cache when it holds the whole (small) list, else less the expired tail."""
        if stored <= 0:
            return 0
        cache = self._engine.cache
        if state == _NORMAL and cache is not None:
            with cache.held((id1, kind.id)) as entry:
                rows = None if entry is None else entry.whole()
            if rows is not None:
                low = self.low(kind)
                return sum(1 for time, _, _ in rows if time >= low)
        return max(0, stored - self.expired(id1, kind, state, stored))

    def expired(self, id1: int, kind: AssocType, state: int, most: int) -> int:
        """How many edges of `(id1, kind)` in `state` have expired (at most `most`)."""
        below = self.low(kind) - 1
        scan = EdgeScan(id1, kind.id, state, _cursor.START, most, below, None)
        shard = shard_of(id1, self._engine.shards)
        return len(self._engine.backend.scan(shard, scan))
