"""Which keys are hot: request rates per key, sampled, in bounded memory.

Twitter's cache operators asked "which key? which shard?" when a node melted.
Every SAMPLE-th lookup is counted in a Space-Saving summary of CAPACITY
counters (Metwally et al.): a key not yet counted takes over the smallest
counter, inheriting its count, so heavy hitters are never lost and memory
stays fixed. Estimates may overcount a key by at most the smallest counter.
"""

from __future__ import annotations

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
        self._seen = 0
        self._hot: frozenset[Hashable] = frozenset()
        self._start = time.monotonic()
        self._lock = threading.Lock()

    def seen(self, key: Hashable) -> None:
        """Count one request for `key` (sampled)."""
        self._seen += 1
        if self._seen % self._sample:
            return
        with self._lock:
            counts = self._counts
            if key in counts:
                counts[key] += 1
            elif len(counts) < self._capacity:
                counts[key] = 1
            else:
                smallest = min(counts, key=counts.__getitem__)
                counts[key] = counts.pop(smallest) + 1
            if self._seen % (self._sample * 64) == 0:
                self._hot = frozenset(k for k, _ in self._top(HOT))

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
