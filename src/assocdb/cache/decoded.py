"""The decoded hot set: answers built from a list's packed prefix, kept beside it.

A packed prefix answers a read by decoding it (int64 arrays back to Python
ints, then one record per edge: ~35 µs for 50 edges). A list that is read
again and again is asked the same questions (the newest 50, the first page),
so its entry keeps each answer the API built, immutable, in
`ListEntry.answers`, keyed by the question; the next read of that question is
a dict lookup and a list copy. Lists read rarely stay packed only.

What keeps this exact:

* an answer is installed only if its entry has not changed since the reader
  took `entry.answers` before reading (`Cache.keep` checks, under the lock);
* every change to an entry (a write applied, a refill, a drop) replaces its
  `answers` with a new dict (the old one is emptied, never used again), so a
  reader holding the old one installs nothing;
* readers look answers up without the lock: a dict lookup is atomic and an
  installed answer never changes, so a read sees the list as it was before a
  write or after it, never a mix.

Memory: answers hold at most SHARE of the cache's byte budget; past it the
oldest answers (first in, first out) are dropped, and their lists stay
cached, packed. `RECORD_BYTES` is what one decoded edge costs (a frozen
record, its three ints, a list slot), measured with tracemalloc by
`bench/cache.py`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

SHARE = 0.25  # of CacheConfig.max_bytes, at most
RECORD_BYTES = 200  # one decoded edge
ANSWER_BYTES = 120  # one answer's own objects and its dict slot
#: An entry's answers until it is first asked for them (`Cache.answers`): shared, read-only,
#: so that a list nobody reads twice pays no dict of its own.
NO_ANSWERS: Mapping[Any, Any] = MappingProxyType({})


class _Holder(Protocol):
    answers: Mapping[Hashable, Any]
    answer_bytes: int


class Decoded:
    """The answers kept in every entry, oldest first, within a byte budget."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.bytes = 0
        self.count = 0
        # (entry, its answers dict, tag, bytes): stale items are skipped and compacted
        self._order: deque[tuple[_Holder, dict[Hashable, Any], Hashable, int]] = deque()

    def keep(
        self, entry: _Holder, answers: dict[Hashable, Any], tag: Hashable, value: Any, nbytes: int
    ) -> int:
        """Add an answer to `entry`'s `answers` (the caller checked they are current); the
        bytes it added net of what was dropped to make room."""
        if nbytes > self.budget or tag in answers:
            return 0
        freed = 0
        while self.bytes + nbytes > self.budget and self._order:
            freed += self._drop_oldest()
        answers[tag] = value
        entry.answer_bytes += nbytes
        self.bytes += nbytes
        self.count += 1
        self._order.append((entry, answers, tag, nbytes))
        if len(self._order) > 2 * self.count + 64:
            self._compact()
        return nbytes - freed

    def forget(self, entry: _Holder) -> int:
        """Forget the entry's answers (it changed or was dropped); the bytes freed."""
        freed = entry.answer_bytes
        answers = entry.answers
        self.bytes -= freed
        self.count -= len(answers)
        entry.answers = NO_ANSWERS
        entry.answer_bytes = 0
        if isinstance(answers, dict):
            # Emptied once replaced (a reader holding it still installs nothing): the
            # order's stale items refer to it until compacted, and would hold its
            # answers, uncounted, meanwhile (a list written after each read held ~65).
            answers.clear()
        return freed

    def clear(self) -> None:
        self._order.clear()
        self.bytes = self.count = 0

    def _drop_oldest(self) -> int:
        entry, answers, tag, nbytes = self._order.popleft()
        if entry.answers is not answers or tag not in answers:
            return 0  # forgotten already
        del answers[tag]
        entry.answer_bytes -= nbytes
        self.bytes -= nbytes
        self.count -= 1
        return nbytes

    def _compact(self) -> None:
        self._order = deque(
            item for item in self._order if item[0].answers is item[1] and item[2] in item[1]
        )
