"""A list's counts in tier 1 (`Cache`'s count reads): a hit is one dict lookup, no lock;
a miss's fill is the very statement an uncached read runs (`put_counts`, no fill ticket),
installed only if no write or invalidation began or ended while it read (`generation`).

`assoc_count`'s first miss of a list with no entry keeps its counts on probation
(`put_probation`): one dict store, no lock, no entry, so the miss costs what an
uncached read does. Its next read is a hit (`probation_hit`) and makes them the
list's entry (`_promote`, under the lock: the cost lands on a hit, ~1 µs, not on the
miss). Probation holds at most 2 x PROBATION lists, the older half dropped when it is
full, so a list read once costs the cache nothing but its slot for a while; writes and
invalidations drop a list's counts from it as from its entry.
(Installed on the miss, the entry cost ~1.2 µs of a ~8 µs read, and with under half
the reads hits the median count read was such a miss: cache on/off p50 1.09-1.14x.)

A doorkeeper (fill on the second miss, as a list's prefix is) was measured and lost on
bench reads' popularity-weighted traffic, its sketch probe costing about what the fill
does and the hits falling from 38% to 24%: probation keeps the first miss's counts.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING, Any

from ..core.cachekeys import COUNTS, LIST, CacheKey
from ..core.records import CacheConfig
from .entries import LIST_BYTES, ListEntry, ListKey, Tier2
from .hotkeys import HotKeys

WAITED = object()  # a fill another thread did: read the cache again
#: Probation holds the counts of at most 2 x PROBATION lists (~0.5 MiB, not in `bytes`);
#: when full, the older half is dropped.
PROBATION = 2048


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
        probation: dict[ListKey, dict[int, int]]
        _probation_born: float
        _probation_trimmed: float
        _aged: Callable[[float], bool]
        count_promotions: int

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

    def probation_hit(self, key: ListKey, found: dict[int, int]) -> bool:
        """Whether `found`, the counts `probation_get(key)` gave, may answer (a hit,
        which makes them the list's entry: `_promote`); False: they aged, read the shard."""
        if self._aged(self._probation_born):  # (its oldest counts' age, not each one's)
            with self._lock:
                self.probation.clear()
                self._probation_born = self._probation_trimmed = self.clock()
            return False
        self.hits += 1
        self._promote(key, found)
        return True

    def put_probation(self, key: ListKey, loaded: dict[int, int], generation: int) -> None:
        """A count miss of a list with no entry (no tier 2): the counts `loaded` as an
        uncached read does, `generation` read before, kept on probation. No lock: the
        counts are stored first, then dropped again if a write or invalidation began or
        ended since `generation` (a write that begins later drops them in `apply`)."""
        probation = self.probation
        probation[key] = loaded  # (a dict of ints: not tracked by the gc)
        self.misses += 1
        writing = self._writing
        if generation != self.generation or (writing and (COUNTS, key) in writing):
            probation.pop(key, None)
            self.stale_fills += 1
        elif len(probation) >= 2 * PROBATION:
            self._trim_probation()

    def _trim_probation(self) -> None:
        """Drop the older half of probation (under the lock: what is dropped is gone)."""
        with self._lock:
            probation = self.probation
            if len(probation) < 2 * PROBATION:
                return
            for key in list(islice(probation, len(probation) - PROBATION)):
                del probation[key]
            self._probation_born, self._probation_trimmed = self._probation_trimmed, self.clock()

    def _promote(self, key: ListKey, found: dict[int, int]) -> None:
        """Probation's counts `found`, read again, as the list's entry (if no write
        dropped them meanwhile; an entry made meanwhile keeps its own counts)."""
        with self._lock:
            if self.probation.get(key) is not found:
                return
            del self.probation[key]
            self.count_promotions += 1
            counts = [0, 0, 0, 0]
            for state, n in found.items():
                counts[state] = n
            entry = self._lists.get(key)
            if entry is not None:  # (a list's prefix filled meanwhile)
                if entry.counts is None:
                    entry.counts = counts
                return
            self._lists[key] = ListEntry(self.clock(), counts)
            self.bytes += LIST_BYTES  # (the new entry's `nbytes`)
            if self.bytes > self.config.max_bytes:
                self._evict()
