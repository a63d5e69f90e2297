"""A list's counts in tier 1 (`Cache`'s count reads): a hit is one dict lookup, no lock;
a miss's fill is the very statement an uncached read runs (`put_counts`, no fill ticket),
installed only if no write or invalidation began or ended while it read (`generation`).

A list's counts are filled on their first miss: a doorkeeper (fill on the second miss,
as a list's prefix is) was measured and lost on bench reads' popularity-weighted traffic,
its sketch probe costing about what the fill does and the hits falling from 38% to 24%.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.cachekeys import COUNTS, LIST, CacheKey
from ..core.records import CacheConfig
from .entries import LIST_BYTES, ListEntry, ListKey, Tier2
from .hotkeys import HotKeys

WAITED = object()  # a fill another thread did: read the cache again


class CountReads:
    """A list's counts: hits, fills, and what a read of them costs (mixed into `Cache`)."""

    if TYPE_CHECKING:  # what `Cache` provides
        config: CacheConfig
        clock: Callable[[], float]
        tier2: Tier2 | None
        hot: HotKeys
        generation: int
        bytes: int
        hits: int
        misses: int
        fills: int
        count_fills: int
        stale_fills: int
        fill_seconds: float
        _lists: dict[ListKey, ListEntry]
        _writing: dict[CacheKey, int]
        _lock: Any

        def _touch(self, key: ListKey, entry: ListEntry) -> bool: ...
        def _fresh_list(self, key: ListKey, read: bool = True) -> ListEntry | None: ...
        def _fill(self, ticket_key: CacheKey, load: Callable[[], Any]) -> Any: ...
        def _install(self, ticket_key: CacheKey, value: Any) -> dict[Any, Any] | None: ...
        def _evict(self) -> None: ...

    def counts(self, key: ListKey, load: Callable[[], dict[int, int]]) -> list[int]:
        """The list's counts per state number (filled on a miss)."""
        entry = self._lists.get(key)
        if entry is not None and entry.counts is not None and self._touch(key, entry):
            self.hot.seen((LIST, *key))
            return list(entry.counts)
        if self.tier2 is None:
            return self.fill_counts(key, load)
        with self._lock:
            entry = self._fresh_list(key)
            if entry is not None and entry.counts is not None:
                self.hits += 1
                return list(entry.counts)
            self.misses += 1
        loaded = self._fill((COUNTS, key), load)
        if loaded is WAITED:
            return self.counts(key, load)
        return [loaded.get(0, 0), loaded.get(1, 0), loaded.get(2, 0), loaded.get(3, 0)]

    def fill_counts(self, key: ListKey, load: Callable[[], dict[int, int]]) -> list[int]:
        """A miss of a list's counts (no entry, or none with counts): read by `load` as
        an uncached read does (`put_counts`; through tier 2 if there is one)."""
        if self.tier2 is not None:
            return self.counts(key, load)
        generation = self.generation
        loaded = load()
        self.put_counts(key, loaded, generation)
        return [loaded.get(0, 0), loaded.get(1, 0), loaded.get(2, 0), loaded.get(3, 0)]

    def fill_count(self, key: ListKey, state: int, load: Callable[[], dict[int, int]]) -> int:
        """`fill_counts`' count in `state` (`count` said None)."""
        return self.fill_counts(key, load)[state]

    def put_counts(self, key: ListKey, loaded: dict[int, int], generation: int) -> None:
        """A count miss's fill (no tier 2): the counts `loaded` as an uncached read does,
        `generation` read before; installed unless a write or invalidation began or
        ended meanwhile (no ticket: it cost ~2 µs, and each concurrent miss runs the one
        statement; not timed: its read is an uncached read's)."""
        counts = [0, 0, 0, 0]
        for state, n in loaded.items():
            counts[state] = n
        lock = self._lock
        lock.acquire()  # (not `with`: that costs twice as much)
        try:
            self.count_fills += 1  # (a miss and a fill, not timed: see `stats_of`)
            writing = self._writing
            if generation != self.generation or (writing and (COUNTS, key) in writing):
                self.stale_fills += 1
                return
            entry = ListEntry(self.clock(), counts)
            if self._lists.setdefault(key, entry) is not entry:  # (raced, or aged out)
                self._install((COUNTS, key), loaded)
                return
            self.bytes += LIST_BYTES  # (the new entry's `nbytes`)
            if self.bytes > self.config.max_bytes:
                self._evict()
        finally:
            lock.release()

    def known_counts(self, key: ListKey) -> list[int] | None:
        """The list's counts if they are cached (no fill)."""
        with self._lock:
            entry = self._fresh_list(key)
            return None if entry is None or entry.counts is None else list(entry.counts)

    def count(self, key: ListKey, state: int) -> int | None:
        """The list's count in this state if cached (a hit: no lock, no fill)."""
        entry = self._lists.get(key)
        if entry is None or entry.counts is None or not self._touch(key, entry):
            return None
        self.hot.seen((LIST, *key))
        return entry.counts[state]
