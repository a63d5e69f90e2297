"""What tier 1 tells an operator: its counters as a `CacheStats` (metrics, admin)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.records import CacheStats

if TYPE_CHECKING:
    from .tier1 import Cache


def stats_of(cache: Cache) -> CacheStats:
    """The cache's counters now (call with its lock held)."""
    # A count's first miss is a miss and a fill counted once, in `count_fills` (its fill
    # is the uncached read's statement, not timed: `fill_us` is the other fills').
    # Counts kept on probation are a miss there and a fill when read again (a hit).
    misses = cache.misses + cache.count_fills
    fills = cache.fills + cache.count_fills + cache.count_promotions
    lookups = cache.hits + misses
    tier2 = cache.tier2
    return CacheStats(
        cache.hits,
        misses,
        fills,
        cache.stale_fills,
        cache.evictions,
        len(cache._lists) + len(cache._objects) + len(cache._homes),
        cache.bytes,
        round(cache.hits / lookups, 4) if lookups else 0.0,
        0 if tier2 is None else tier2.hits,
        0 if tier2 is None else tier2.misses,
        0 if tier2 is None else tier2.failures,
        round(cache.fill_seconds * 1e6 / cache.fills, 1) if cache.fills else 0.0,
        cache.doorkeeper.lists_after,  # (`payback`: on which miss lists are filled now)
        round(cache.payback.last, 2),
        cache.payback.open,
        cache.payback.why,
        cache.gets.open,
        cache.gets.why,
    )
