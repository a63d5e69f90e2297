"""Writing to shards: the one per-shard loop every kind of job goes through.

`ShardWriter.attempt` writes one shard's part of a job through the shard's
circuit breaker (`ShardHealth`): a shard cooling down fails at once, an
`Unavailable` counts against the shard (unless it landed on some of its
replicas), a success closes the breaker. `write_legs` runs a job's legs in
order, skipping the ones already done, and says which landed; `write_batch`
writes the legs of a batch of jobs, one per shard, overlapping the shards'
commits on database servers. Reads of current rows go through the same
breaker (`read`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, NamedTuple, TypeVar

from ..cache.tier1 import Cache
from ..core.cachekeys import COUNTS, OBJECT, PREFIX, CacheKey
from ..core.errors import Unavailable
from ..core.ops import Leg
from ..storage.backend import Backend
from .health import ShardHealth

T = TypeVar("T")
SHARD_THREADS = 8  # shards of a batch applied at once on database servers (the pool's size)


class Landed(NamedTuple):
    """How a job's legs went: the bits of the legs `done` now, the shards written by
    this attempt (`shards`), and the `errors` of the legs that failed."""

    done: int
    shards: list[int]
    errors: list[BaseException]


class ShardWriter:
    """Writes legs to their shards (and the cache), one shard at a time."""

    def __init__(self, backend: Backend, health: ShardHealth, cache: Cache | None) -> None:
        self.backend = backend
        self.health = health
        self.cache = cache
        self._pool: ThreadPoolExecutor | None = None  # applies a batch's shards at once
        self._pool_lock = threading.Lock()

    def attempt(self, shard: int, write: Callable[[], object]) -> BaseException | None:
        """Run `write` on `shard` through its circuit breaker; the error if it failed."""
        try:
            self.health.check(shard)
        except Unavailable as exc:  # cooling down: not a new failure of the shard
            return exc
        try:
            write()
        except Exception as exc:  # a bug or a bad row must not lose the write
            if isinstance(exc, Unavailable):
                self.health.leg_failed(shard, exc)
            return exc
        self.health.succeeded(shard)
        return None

    def write_legs(self, writes: Sequence[tuple[int, Callable[[], object]]], done: int) -> Landed:
        """Write each `(shard, write)` whose bit in `done` is not set, in order."""
        errors: list[BaseException] = []
        landed: list[int] = []
        for number, (shard, write) in enumerate(writes):
            if done >> number & 1:
                continue
            error = self.attempt(shard, write)
            if error is not None:
                errors.append(error)
                continue
            done |= 1 << number
            landed.append(shard)
        return Landed(done, landed, errors)

    def write_batch(self, legs: Sequence[Leg]) -> list[BaseException | None]:
        """Apply the legs of a batch, one per shard; each one's error, or None."""
        if self.backend.local or len(legs) == 1:
            return [self._attempt_leg(leg) for leg in legs]
        # database servers: the shards' commits (and their log flushes) overlap
        return list(self._shard_pool().map(self._attempt_leg, legs))

    def _attempt_leg(self, leg: Leg) -> BaseException | None:
        return self.attempt(leg.shard, partial(self.apply, leg))

    def apply(self, leg: Leg) -> None:
        """Write a leg's rows to its shard and its changes to the cache."""
        if leg.edges or leg.objects or leg.nodes:
            cache = self.cache
            if cache is None:
                self.backend.apply(leg.shard, leg.edges, leg.objects, leg.nodes)
            else:
                tickets = _tickets(leg)
                cache.writing(tickets)  # no fill lands between the commit and `apply`
                try:
                    changes = self.backend.apply(leg.shard, leg.edges, leg.objects, leg.nodes)
                    # Now, not after the entries: if they fail, the retry of the leg
                    # finds the rows stored and changes nothing, so the cache would
                    # never learn.
                    cache.apply(changes)
                finally:
                    cache.written(tickets)
        if leg.entries:  # secondary index entries: no cache holds them
            self.backend.index_apply(leg.shard, leg.entries)

    def read(self, read: Callable[..., T], shard: int, *args: Any) -> T:
        """One read of a shard, reported to its circuit breaker like a leg.

        A read may be the caller let through as the probe of a shard marked
        down: unless it reports back, the shard stays down while every write
        first reads, so under load it would never come back.
        """
        self.health.check(shard)
        try:
            result = read(shard, *args)
        except Unavailable as exc:
            self.health.leg_failed(shard, exc)
            raise
        self.health.succeeded(shard)
        return result

    def _shard_pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(SHARD_THREADS, thread_name_prefix="assocdb-shard")
            return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def landed_somewhere(error: BaseException) -> bool:
    """Whether a failed leg was written to some replicas of its shard (`storage.shardmap`)."""
    return isinstance(error, Unavailable) and bool(error.details.get("partial"))


def _tickets(leg: Leg) -> list[CacheKey]:
    """The cache entries a leg's rows change (`Cache.writing`)."""
    lists = dict.fromkeys((edge[0], edge[1]) for edge in leg.edges)
    tickets: list[CacheKey] = [(COUNTS, key) for key in lists]
    tickets += [(PREFIX, key) for key in lists]
    tickets += [(OBJECT, obj[0]) for obj in leg.objects]
    return tickets
