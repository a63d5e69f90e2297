"""Cache invalidations between the workers of one `assocdb serve`, without Redis.

Every worker has its own tier-1 cache. A write applied by one worker changes
its own cache in place; the others must drop what the write touched before
they answer any request that starts after the write was acknowledged. With a
Redis tier that is Redis pub/sub; without one, the workers share this ring:
a file (memory-mapped by every worker) holding a sequence number and the last
`SLOTS` invalidated keys.

* A write's keys are appended under an exclusive file lock, then the
  sequence number moves past them (the acknowledgment of the write comes
  later, so any request that starts after it sees the new number).
* Every request calls `poll` first: one 8-byte read from the map when nothing
  changed; otherwise it reads the new keys (under a shared lock) and drops
  them from the cache, or everything when more than `SLOTS` keys went by.

The ring plugs into the cache where tier 2 does (the same `invalidate` and
`flush` calls); it stores no values, so every `get` is a miss. Processes
outside this server (another server, the CLI) are not in the ring: their
writes are seen once the cache's `max_age` expires, as documented for a cache
without Redis.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
from collections.abc import Sequence
from typing import Any, Protocol

from ..core.cachekeys import COUNTS, HOME, OBJECT, PREFIX, CacheKey

SLOTS = 1 << 16
_HEAD = struct.Struct("<Q")
_SLOT = struct.Struct("<qqq")
_SIZE = _HEAD.size + SLOTS * _SLOT.size
_LIST, _OBJECT, _HOME, _ALL = 1, 2, 3, 9
_KINDS = {COUNTS: _LIST, PREFIX: _LIST, OBJECT: _OBJECT, HOME: _HOME}


class Invalidated(Protocol):
    def invalidate(self, keys: Sequence[CacheKey] | None = None) -> None: ...


class Peers:
    """This worker's end of the ring in the file at `path` (created if need be)."""

    hits = misses = failures = 0  # tier 2's counters: the ring holds no values

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            if os.fstat(self._fd).st_size < _SIZE:
                os.ftruncate(self._fd, _SIZE)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._map = mmap.mmap(self._fd, _SIZE)
        self._seen = self._sequence()

    def _sequence(self) -> int:
        value: int = _HEAD.unpack_from(self._map, 0)[0]
        return value

    def sequence(self) -> int:
        """A number that moves when any worker writes (the change feed's readers watch
        it: `Feed.watch`)."""
        return self._sequence()

    # -- sending: what a write of this worker touched ----------------------------------------

    def invalidate(self, keys: Sequence[CacheKey]) -> None:
        slots = []
        for kind, key in keys:
            code = _KINDS[kind]
            slots.append((code, key[0], key[1]) if code == _LIST else (code, key, 0))
        self._append(slots)

    def flush(self) -> None:
        self._append([(_ALL, 0, 0)])

    def _append(self, slots: list[tuple[int, int, int]]) -> None:
        if not slots:
            return
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            sequence = self._sequence()
            for n, slot in enumerate(slots):
                _SLOT.pack_into(self._map, _offset(sequence + n), *slot)
            _HEAD.pack_into(self._map, 0, sequence + len(slots))
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    # -- receiving: what the other workers' writes touched ---------------------------------

    def poll(self, cache: Invalidated) -> None:
        """Drop from `cache` what was invalidated since the last poll (this worker's
        own keys too: harmless, its cache already has their new values)."""
        if _HEAD.unpack_from(self._map, 0)[0] == self._seen:
            return
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        try:
            sequence = self._sequence()
            start = self._seen
            if sequence - start > SLOTS:
                slots = [(_ALL, 0, 0)]
            else:
                slots = [_SLOT.unpack_from(self._map, _offset(n)) for n in range(start, sequence)]
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        keys: list[CacheKey] = []
        for code, a, b in slots:
            if code == _ALL:
                cache.invalidate(None)
                keys = []
                break
            if code == _LIST:
                keys.append((PREFIX, (a, b)))
            else:
                keys.append((OBJECT if code == _OBJECT else HOME, a))
        if keys:
            cache.invalidate(keys)
        self._seen = sequence

    # -- the rest of tier 2's interface ------------------------------------------------------

    def get(self, ticket_key: CacheKey) -> tuple[Any, int, bool]:
        return None, 0, False

    def put(self, ticket_key: CacheKey, value: Any, version: int) -> None:
        pass

    def close(self) -> None:
        self._map.close()
        os.close(self._fd)


def _offset(n: int) -> int:
    return _HEAD.size + (n % SLOTS) * _SLOT.size
