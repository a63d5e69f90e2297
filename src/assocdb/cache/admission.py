"""Admission: which misses fill the cache (TinyLFU's doorkeeper), and the ticket
of a fill in flight, which concurrent misses of its key wait on (no herd).

A key is admitted on its `admit_after`-th recent miss, whether or not the
cache has room: most keys of real traffic are read once, and a one-off read
then costs what an uncached read costs (plus a dict operation here) instead
of a fill it never uses again. The doorkeeper remembers the misses of the
last SIZE / 2 to SIZE keys missed, oldest forgotten first.

`passing` is asked without the cache's lock (it is what a cached miss adds
to an uncached read: ~0.4 µs, against ~1 µs with the lock and hot-key
sampling). Dict operations are atomic under the GIL; racing misses of one
key may count one of them once (the key is admitted a miss later), which
costs a fill's delay, never a wrong answer.
"""

from __future__ import annotations

import threading

from ..core.cachekeys import PREFIX, CacheKey

SIZE = 65_536  # keys remembered as missed, at most (at least half as many)


class Doorkeeper:
    """Recent misses per cache key (ticket key: `(kind, key)`).

    Two generations of at most SIZE / 2 keys each: a miss is counted in the new
    one; when it is full, it becomes the old one and the old one is forgotten.
    (A single dict trimmed at its front by `del d[next(iter(d))]` cost O(SIZE)
    a miss once full: a dict's iterator steps over every deleted slot before
    the first live one, and the slots are reclaimed only when the dict grows.)
    """

    __slots__ = ("_new", "_old", "admit_after", "lists_after")

    def __init__(self, admit_after: int) -> None:
        self.admit_after = admit_after
        #: The miss that fills a list's prefix: `admit_after` unless fills did not pay
        #: for themselves on this traffic (`cache.payback` raises it).
        self.lists_after = admit_after
        self._new: dict[CacheKey, int] = {}
        self._old: dict[CacheKey, int] = {}

    def passing(self, ticket_key: CacheKey) -> bool:
        """Whether this miss is not the key's `admit_after`-th (it is counted, then): the
        caller reads without filling. False: the miss admits it (not counted here)."""
        seen = self._seen(ticket_key) + 1
        if seen >= (self.lists_after if ticket_key[0] == PREFIX else self.admit_after):
            return False
        self._remember(ticket_key, seen)
        return True

    def admits(self, ticket_key: CacheKey) -> bool:
        """Count a miss of the key; whether it is admitted now (its count then restarts)."""
        needed = self._needed(ticket_key)
        if needed <= 1:
            return True
        seen = self._seen(ticket_key) + 1
        if seen >= needed:
            self._new.pop(ticket_key, None)
            self._old.pop(ticket_key, None)
            return True
        self._remember(ticket_key, seen)
        return False

    def readmit(self, ticket_key: CacheKey) -> None:
        """An invalidated entry was in use: its next miss fills it again."""
        needed = self._needed(ticket_key)
        if needed > 1:
            self._remember(ticket_key, needed - 1)

    def clear(self) -> None:
        self._new = {}
        self._old = {}

    def __len__(self) -> int:
        return len(self._new) + len(self._old)

    def _needed(self, ticket_key: CacheKey) -> int:
        return self.lists_after if ticket_key[0] == PREFIX else self.admit_after

    def _seen(self, ticket_key: CacheKey) -> int:
        seen = self._new.get(ticket_key)
        return self._old.get(ticket_key, 0) if seen is None else seen

    def _remember(self, ticket_key: CacheKey, seen: int) -> None:
        new = self._new
        new[ticket_key] = seen
        if len(new) >= SIZE // 2:  # (two threads may both swap: a generation is lost early)
            self._old = new
            self._new = {}


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
