"""Writing to shards: the one per-shard loop every kind of job goes through.

`ShardWriter.attempt` writes one shard's part of a job through the shard's
circuit breaker (`ShardHealth`): a shard cooling down fails at once, an
`Unavailable` counts against the shard (unless it landed on some of its
replicas), a success closes the breaker. `write_legs` runs a job's legs in
order, skipping the ones already done, and says which landed; `write_batch`
writes the legs of a batch of jobs, one per shard, overlapping the shards'
commits on database servers. Reads of current rows go through the same
breaker (`read`).

`prepare_batch` and `commit_batch` split `write_batch` in two for the
pipeline's overlap with the journal's fsync (`storage.prepared`): each leg's
transaction is opened and filled, then committed (the cache told, the index
entries written) or, if the journal failed, rolled back (`rollback_batch`).
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
from ..core.merge import EdgeKey
from ..core.ops import Leg, ListKey
from ..storage.backend import Backend
from ..storage.opened import Opened, open_reading
from ..storage.prepared import Prepared, prepare
from .health import ShardHealth

T = TypeVar("T")
SHARD_THREADS = 8  # shards of a batch applied at once on database servers (the pool's size)


class Landed(NamedTuple):
    """How a job's legs went: the bits of the legs `done` now, the shards written by
    this attempt (`shards`), and the `errors` of the legs that failed."""

    done: int
    shards: list[int]
    errors: list[BaseException]


class PreparedLeg(NamedTuple):
    """A leg whose shard transaction is open (`txn`: None when it has only index
    entries), and the cache entries it announced (`Cache.writing`)."""

    leg: Leg
    txn: Prepared | None
    tickets: list[CacheKey]


#: A leg of a prepared batch: open, or why it could not be prepared.
Preparing = PreparedLeg | BaseException


class OpenedLeg(NamedTuple):
    """A shard transaction opened before its rows are resolved (`storage.opened`), and
    the cache entries it announced."""

    opened: Opened
    tickets: list[CacheKey]


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
                except BaseException:
                    cache.written(tickets)
                    raise
                # Now, not after the entries: if they fail, the retry of the leg finds
                # the rows stored and changes nothing, so the cache would never learn.
                cache.apply(changes, tickets)  # (and `written`, whatever happens)
        if leg.entries:  # secondary index entries: no cache holds them
            self.backend.index_apply(leg.shard, leg.entries)

    def prepare_batch(self, legs: Sequence[Leg]) -> list[Preparing]:
        """Open each leg's transaction, in order (`storage.prepared`); a shard that fails
        (or is cooling down) gives its error instead, and the others go on."""
        prepared: list[Preparing] = []
        try:
            for leg in legs:
                prepared.append(self._prepare_leg(leg))
        except BaseException:  # (an interrupt) no transaction is left open
            self.rollback_batch(prepared)
            raise
        return prepared

    def _prepare_leg(self, leg: Leg) -> Preparing:
        try:
            self.health.check(leg.shard)
        except Unavailable as exc:  # cooling down: not a new failure of the shard
            return exc
        try:
            return self._prepare(leg)
        except Exception as exc:  # a bug or a bad row must not lose the write
            if isinstance(exc, Unavailable):
                self.health.leg_failed(leg.shard, exc)
            return exc

    def _prepare(self, leg: Leg) -> PreparedLeg:
        if not (leg.edges or leg.objects or leg.nodes):
            return PreparedLeg(leg, None, [])
        tickets = _tickets(leg) if self.cache is not None else []
        if self.cache is not None:
            self.cache.writing(tickets)  # no fill lands between the commit and `apply`
        try:
            txn = prepare(self.backend, leg.shard, leg.edges, leg.objects, leg.nodes)  # type: ignore[arg-type]
        except BaseException:
            if self.cache is not None:
                self.cache.written(tickets)
            raise
        return PreparedLeg(leg, txn, tickets)

    def open_leg(self, shard: int, keys: Sequence[EdgeKey], lists: Sequence[ListKey]) -> OpenedLeg:
        """Open `shard`'s transaction and read the stored rows of `keys` and the node
        states of `lists` in it (`storage.opened`); raises if the shard fails (or is
        cooling down), with nothing left open."""
        self.health.check(shard)
        tickets = _key_tickets(keys) if self.cache is not None else []
        if self.cache is not None:
            self.cache.writing(tickets)  # no fill lands between the commit and `apply`
        try:
            opened = open_reading(self.backend, shard, keys, lists)  # type: ignore[arg-type]
        except BaseException as exc:
            if self.cache is not None:
                self.cache.written(tickets)
            if isinstance(exc, Unavailable):
                self.health.leg_failed(shard, exc)
            raise
        return OpenedLeg(opened, tickets)

    def fill_leg(self, opened: OpenedLeg, leg: Leg) -> Preparing:
        """Write the leg's rows into its opened transaction (no COMMIT); a shard that
        fails gives its error instead (its transaction rolled back)."""
        try:
            txn = opened.opened.fill(leg.edges)
        except Exception as exc:  # a bug or a bad row must not lose the write
            if self.cache is not None:
                self.cache.written(opened.tickets)
            if isinstance(exc, Unavailable):
                self.health.leg_failed(leg.shard, exc)
            return exc
        return PreparedLeg(leg, txn, opened.tickets)

    def close_opened(self, opened: Sequence[OpenedLeg]) -> None:
        """Roll back opened transactions that were not filled."""
        for leg in opened:
            try:
                leg.opened.rollback()
            finally:
                if leg.tickets and self.cache is not None:
                    self.cache.written(leg.tickets)

    def commit_batch(self, prepared: Sequence[Preparing]) -> list[BaseException | None]:
        """Commit each prepared leg (the journal holds its jobs); each one's error, or None."""
        return [p if isinstance(p, BaseException) else self._commit(p) for p in prepared]

    def _commit(self, prepared: PreparedLeg) -> BaseException | None:
        leg, cache = prepared.leg, self.cache
        tickets = prepared.tickets if cache is not None else None
        try:
            if prepared.txn is not None:
                changes = prepared.txn.commit()
                if cache is not None:
                    # (`written` too, whatever happens: one call and one lock a leg)
                    done, tickets = tickets, None
                    cache.apply(changes, done)
            if leg.entries:  # secondary index entries: their own transaction, as `apply`
                self.backend.index_apply(leg.shard, leg.entries)
        except Exception as exc:
            if isinstance(exc, Unavailable):
                self.health.leg_failed(leg.shard, exc)
            return exc
        finally:
            if tickets and cache is not None:
                cache.written(tickets)
        self.health.succeeded(leg.shard)
        return None

    def rollback_batch(self, prepared: Sequence[Preparing]) -> None:
        """Roll back every prepared leg (the journal did not take their jobs); legs already
        committed or rolled back are left as they are."""
        for p in prepared:
            if isinstance(p, BaseException) or (p.txn is not None and p.txn.finished):
                continue
            try:
                if p.txn is not None:
                    p.txn.rollback()
            finally:
                if p.tickets and self.cache is not None:
                    self.cache.written(p.tickets)

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


def _key_tickets(keys: Sequence[EdgeKey]) -> list[CacheKey]:
    """The cache entries writes of these edge keys change (`Cache.writing`)."""
    if len(keys) == 1:  # (a lone write's leg)
        one = (keys[0][0], keys[0][1])
        return [(COUNTS, one), (PREFIX, one)]
    lists = dict.fromkeys((key[0], key[1]) for key in keys)
    return [(COUNTS, key) for key in lists] + [(PREFIX, key) for key in lists]


def _tickets(leg: Leg) -> list[CacheKey]:
    """The cache entries a leg's rows change (`Cache.writing`)."""
    lists = dict.fromkeys((edge[0], edge[1]) for edge in leg.edges)
    tickets: list[CacheKey] = [(COUNTS, key) for key in lists]
    tickets += [(PREFIX, key) for key in lists]
    tickets += [(OBJECT, obj[0]) for obj in leg.objects]
    return tickets
