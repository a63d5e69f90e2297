"""Which keys are hot: request rates per key, sampled, in bounded memory.

Twitter's cache operators asked "which key? which shard?" when a node melted.
About one lookup in SAMPLE is counted (the gaps between counted lookups are
random, 1 to 2*SAMPLE-1, so a workload that repeats a pattern of lookups is
not sampled at one fixed phase of it, which would count one key of the
pattern only), in a Space-Saving summary of CAPACITY
counters (Metwally et al.): a key not yet counted takes over the smallest
counter, inheriting its count, so heavy hitters are never lost and memory
stays fixed. Estimates may overcount a key by at most the smallest counter.

Counters are kept in buckets of equal count (the paper's "stream summary"),
and the smallest count is tracked, so counting a key is O(1) whether it is
known or takes over the smallest counter: no scan over the counters.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Hashable

CAPACITY = 256
SAMPLE = 16
HOT = 32  # the keys spared by eviction: this many of the top


class HotKeys:
    """Approximate top keys by request rate."""

    def __init__(self, capacity: int = CAPACITY, sample: int = SAMPLE) -> None:
        self._capacity = capacity
        self._sample = sample
        self._counts: dict[Hashable, int] = {}
        self._buckets: dict[int, dict[Hashable, None]] = {}  # count -> its keys (ordered set)
        self._smallest = 0  # the smallest count in use, once full
        #: Lookups until the next counted one. `seen` counts down; a hot path may count
        #: down itself and call `count` at 0 (`Cache.cached_obj`: a call per hit costs).
        self.skip = 1
        self._gaps = random.Random()
        self._sampled = 0
        self._hot: frozenset[Hashable] = frozenset()
        self._start = time.monotonic()
        self._lock = threading.Lock()

    def seen(self, key: Hashable) -> None:
        """Count one request for `key` (sampled)."""
        self.skip -= 1
        if self.skip > 0:  # (> 0: threads racing past 0 must not stop the sampling)
            return
        self.count(key)

    def count(self, key: Hashable) -> None:
        """Count `key`, the request the countdown (`skip`) reached 0 on."""
        with self._lock:
            self.skip = self._gaps.randrange(1, 2 * self._sample)  # mean: `sample`
            self._count(key)
            self._sampled += 1
            if self._sampled % 64 == 0:
                self._hot = frozenset(k for k, _ in self._top(HOT))

    def _count(self, key: Hashable) -> None:
        counts, buckets = self._counts, self._buckets
        old = counts.get(key)
        if old is None:
            if len(counts) < self._capacity:
                old = 0
            else:  # take over a smallest counter
                old = self._smallest
                victims = buckets[old]
                del counts[next(iter(victims))]
                del victims[next(iter(victims))]
        else:
            del buckets[old][key]
        if old and not buckets[old]:
            del buckets[old]
            if old == self._smallest:
                self._smallest = old + 1  # the key moves there
        counts[key] = old + 1
        buckets.setdefault(old + 1, {})[key] = None
        if old == 0:
            self._smallest = 1

    def is_hot(self, key: Hashable) -> bool:
        return key in self._hot

    def top(self, n: int = 20) -> list[tuple[Hashable, float]]:
        """The `n` hottest keys with estimated requests per second, hottest first."""
        with self._lock:
            top = self._top(n)
        elapsed = max(time.monotonic() - self._start, 1e-9)
        return [(key, count * self._sample / elapsed) for key, count in top]

    def _top(self, n: int) -> list[tuple[Hashable, int]]:
        return sorted(self._counts.items(), key=lambda kv: kv[1], reverse=True)[:n]
