"""Admission: which misses fill the cache (TinyLFU's doorkeeper), and the ticket
of a fill in flight, which concurrent misses of its key wait on (no herd).

A key is admitted on its `admit_after`-th recent miss, whether or not the
cache has room: most keys of real traffic are read once, and a one-off read
then costs what an uncached read costs (plus a counter here) instead of a
fill it never uses again. The doorkeeper remembers the misses of the last
SIZE / 2 to SIZE keys missed, oldest forgotten first.

It counts them in a sketch, not by key: a byte per slot in two generations of
SLOTS slots, a key's slot its hash's low bits (ids hash as themselves, so it is
the same in every process). A dict of the missed keys cost a miss ~1.5 µs on
popularity-weighted reads (~9% of an uncached read of 50 edges: its 65,536
tuple keys are scattered over the heap, and a lookup, a compare and an insert
each reach them), the sketch one byte of a 1 MiB array. Two keys may share a
slot (with SIZE / 2 keys in SLOTS slots, a new key finds its slot counted
~5% of the time in each generation): that key is then admitted a miss early,
which costs a fill, never a wrong answer.

`passing` is asked without the cache's lock (it is what a cached miss adds
to an uncached read). Byte operations are atomic under the GIL; racing misses
of one key may count one of them once (the key is admitted a miss later),
which costs a fill's delay, never a wrong answer.
"""

from __future__ import annotations

import threading

from ..core.cachekeys import COUNTS, HOME, OBJECT, PREFIX, CacheKey

SIZE = 65_536  # keys remembered as missed, at most (at least half as many)
SLOTS = 1 << 20  # counters per generation, a byte each
_MASK = SLOTS - 1
#: Per kind, what its keys' hashes are offset by (a kind's own hash, a string's,
#: differs between processes).
_KINDS = {COUNTS: 0x51ED27, PREFIX: 0x2545F491, OBJECT: 0x9E3779B9, HOME: 0x27D4EB2F}


class Doorkeeper:
    """Recent misses per cache key (ticket key: `(kind, key)`), counted in a sketch.

    Two generations: a miss is counted in the new one; after SIZE / 2 misses
    counted there, it becomes the old one and the old one is forgotten.
    """

    __slots__ = ("_added", "_new", "_old", "_old_added", "admit_after", "lists_after")

    def __init__(self, admit_after: int) -> None:
        self.admit_after = admit_after
        #: The miss that fills a list's prefix: `admit_after` unless fills did not pay
        #: for themselves on this traffic (`cache.payback` raises it).
        self.lists_after = admit_after
        self._new = bytearray(SLOTS)
        self._old = bytearray(SLOTS)
        self._added = self._old_added = 0

    def passing(self, ticket_key: CacheKey) -> bool:
        """Whether this miss is not the key's `admit_after`-th (it is counted, then): the
        caller reads without filling. False: the miss admits it (not counted here)."""
        # (`_count` inlined: this is what a passing miss adds to an uncached read)
        kind, key = ticket_key
        slot = (hash(key) + _KINDS[kind]) & _MASK
        new = self._new
        seen = (new[slot] or self._old[slot]) + 1
        if seen >= (self.lists_after if kind == PREFIX else self.admit_after):
            return False
        new[slot] = seen if seen < 255 else 255
        self._added += 1
        if self._added >= SIZE // 2:
            self._old, self._old_added = new, self._added
            self._new, self._added = bytearray(SLOTS), 0
        return True

    def admits(self, ticket_key: CacheKey) -> bool:
        """Count a miss of the key; whether it is admitted now (its count then restarts)."""
        needed = self._needed(ticket_key)
        if needed <= 1:
            return True
        slot = _slot(ticket_key)
        seen = (self._new[slot] or self._old[slot]) + 1
        if seen >= needed:
            self._new[slot] = self._old[slot] = 0
            return True
        self._count(slot, seen)
        return False

    def readmit(self, ticket_key: CacheKey) -> None:
        """An invalidated entry was in use: its next miss fills it again."""
        needed = self._needed(ticket_key)
        if needed > 1:
            self._count(_slot(ticket_key), needed - 1)

    def clear(self) -> None:
        self._new = bytearray(SLOTS)
        self._old = bytearray(SLOTS)
        self._added = self._old_added = 0

    def __len__(self) -> int:
        """Misses remembered (keys, but for those counted more than once)."""
        return self._added + self._old_added

    def _needed(self, ticket_key: CacheKey) -> int:
        return self.lists_after if ticket_key[0] == PREFIX else self.admit_after

    def _seen(self, ticket_key: CacheKey) -> int:
        slot = _slot(ticket_key)
        return self._new[slot] or self._old[slot]

    def _count(self, slot: int, seen: int) -> None:
        self._new[slot] = min(seen, 255)
        self._added += 1
        if self._added >= SIZE // 2:  # (two threads may both swap: a generation is lost early)
            self._old, self._old_added = self._new, self._added
            self._new, self._added = bytearray(SLOTS), 0


def _slot(ticket_key: CacheKey) -> int:
    return (hash(ticket_key[1]) + _KINDS[ticket_key[0]]) & _MASK


class Fill:
    """One fill in flight: held until it is installed, so concurrent misses can wait;
    `stale` once a write of its key began meanwhile (it is then not installed)."""

    __slots__ = ("done", "stale")

    def __init__(self) -> None:
        self.done = threading.Lock()  # cheaper to make than an Event; released when done
        self.done.acquire()
        self.stale = False

    def wait(self) -> None:
        with self.done:
            pass
