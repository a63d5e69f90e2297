"""The decoded hot set: answers built from a list's packed prefix, kept beside it.

A packed prefix answers a read by decoding it (int64 arrays back to Python
ints, then one record per edge: ~35 µs for 50 edges). A list that is read
again and again is asked the same questions (the newest 50, the first page),
so its entry keeps each answer the API built, immutable, in
`ListEntry.answers`, keyed by the question; the next read of that question is
a dict lookup and a list copy. Lists read rarely stay packed only.

A write to a list does not throw its answers away: the answers to "the newest
N edges" (the question almost every read of a hot list asks) are carried over
to the entry's new dict, patched with the write's change (`patched_range`:
one record built, a tuple copied), so the read after a write is still a dict
lookup. Other answers (deeper positions, pages, encoded JSON) are dropped.

What keeps this exact:

* an answer is installed only if its entry has not changed since the reader
  took `entry.answers` before reading (`Cache.keep` checks, under the lock);
* every change to an entry (a write applied, a refill, a drop) replaces its
  `answers` with a new dict (the old one is emptied, never used again), so a
  reader holding the old one installs nothing; a write fills the new dict
  with its patched answers under the cache's lock (a reader that looks there
  first finds none yet, and builds its answer under that lock, after the write);
* readers look answers up without the lock: a dict lookup is atomic and an
  installed answer never changes, so a read sees the list as it was before a
  write or after it, never a mix.

Memory: a decoded edge costs ~10x a packed one (`RECORD_BYTES`: a frozen
record, its three ints, a list slot, measured with tracemalloc by
`bench/cache.py`, against ~20 bytes packed), so answers are kept for the
hottest lists only. They hold at most RATIO of what the rest of the cache
holds (at least FLOOR of `max_bytes`, so that a cache holding little keeps
some: on bench reads' traffic the lists cached held ~1.3 MiB, RATIO of that kept
~30 answers, and the hits of the other lists decoded their prefix, ~16 µs against
~3 for a kept answer, slower than the median uncached read; at most SHARE of
it): a cache of packed lists then costs at most 1 + RATIO times its packed
bytes per edge beyond the floor (issue 43: <= 32 bytes). Within that budget
every answer is kept; past it, an answer of a hot list (`HotKeys`: the top
keys by request rate) drops the oldest answers (first in, first out) to
make room, and any other is not kept: its list answers from the packed
prefix, decoding what the read returns.

A large answer of a hot list, over 1/PART of the budget (LinkBench reads lists of up
to 10,000 links, ~2 MiB decoded, against a budget of ~1-2 MiB on its graph), is kept
in a room of its own, BIG of `max_bytes` (oldest out first), outside the budget:
the hits of a few long, hot lists were most of LinkBench's time, each decoding its
whole prefix again (`get_link_list` mean 358-512 µs, against 86-107 with such
answers kept); and one kept within the budget, first in first out, pushed out a
share of the other answers and was soon pushed out itself (its list's next read
decoded 10,000 records again, ~10 ms: ~100 reads a LinkBench run). An answer of
LONG edges or more (`cache.payback.LONG`) of a list that is not hot goes there too
when it is built a second time lately (`again`, the last AGAIN such lists): such a
list's rate may leave it outside the hottest keys while each of its reads decodes
thousands of records (LinkBench: 57-87 reads of ~3.5 ms a run, the newest 10,000 of
lists outside them; with `again`, 14).
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Hashable, Mapping
from contextlib import suppress
from types import MappingProxyType
from typing import Any, Protocol

from ..core.merge import PLAIN_NORMAL as _NORMAL
from .payback import LONG

log = logging.getLogger(__name__)
SHARE = 0.25  # of CacheConfig.max_bytes, at most
RATIO = 0.25  # of what the rest of the cache holds, at most (unless that is under FLOOR)
FLOOR = 1 / 128  # of CacheConfig.max_bytes: kept whatever the rest holds (1 MiB by default)
BIG = 1 / 16  # of CacheConfig.max_bytes: the room for hot lists' large answers
PART = 4  # a hot list's answer larger than 1/PART of the budget is large
#: The lists whose large answer of LONG edges or more was built and not kept lately (not
#: hot): the next one built is kept in the room all the same (`again`).
AGAIN = 64
RECORD_BYTES = 200  # one decoded edge
ANSWER_BYTES = 120  # one answer's own objects and its dict slot
#: An entry's answers until it is first asked for them (`Cache.answers`): shared, read-only,
#: so that a list nobody reads twice pays no dict of its own.
NO_ANSWERS: Mapping[Any, Any] = MappingProxyType({})


class _Holder(Protocol):
    answers: Mapping[Hashable, Any]
    answer_bytes: int


_Kept = tuple[_Holder, dict[Hashable, Any], Hashable, int]  # entry, its answers, tag, bytes


class Decoded:
    """The answers kept in every entry, oldest first, within a byte budget: RATIO of
    `rest()` (the bytes the cache holds besides answers), within FLOOR and SHARE of
    `max_bytes`; and hot lists' large answers, within BIG of `max_bytes`."""

    def __init__(self, max_bytes: int, rest: Callable[[], int]) -> None:
        self.floor, self.ceiling = int(max_bytes * FLOOR), int(max_bytes * SHARE)
        self.room = int(max_bytes * BIG)
        self.rest = rest
        self.bytes = 0  # all answers'
        self.count = 0
        # the answers within the budget: stale items are skipped and compacted
        self._order: deque[_Kept] = deque()
        self.big: list[_Kept] = []  # hot lists' large answers, in the room, oldest first
        self.big_bytes = 0
        #: Lists (their hot keys) whose large answer was refused lately (`again`), oldest first.
        self.refused: dict[Hashable, None] = {}

    def _pooled(self) -> int:
        """What the answers within the budget hold."""
        return self.bytes - self.big_bytes

    def budget(self) -> int:
        """The most the answers may hold now."""
        return min(self.ceiling, max(self.floor, int(RATIO * self.rest())))

    def may_keep(self, n: int, is_hot: Callable[[Hashable], bool], hot_key: Hashable) -> bool:
        """Whether `keep` of an answer of `n` records (`Cache.keep`'s bytes) might keep it
        or drop older answers; False: it would do neither, so the reader need not build
        the answer's tuple nor take the lock (no lock: a racing change keeps or skips
        one answer, never makes one wrong)."""
        nbytes, budget, pooled = ANSWER_BYTES + n * RECORD_BYTES, self.budget(), self._pooled()
        if nbytes > budget // PART:
            if nbytes <= self.room and (is_hot(hot_key) or (n >= LONG and self.again(hot_key))):
                return True
            return nbytes <= budget
        return pooled + nbytes <= budget or pooled > budget or is_hot(hot_key)

    def again(self, hot_key: Hashable) -> bool:
        """Whether the list's large answer was built and refused lately (so this one is
        kept, as a hot list's is); else it is remembered as refused now. A list read a
        few thousand edges at a time costs milliseconds a decode: its second read earns
        the room, whether or not its rate puts it among the hottest keys (LinkBench: a
        list of 10,000 links outside them decoded all of them at each read, ~2 ms)."""
        refused = self.refused
        if hot_key in refused:
            return True
        refused[hot_key] = None
        if len(refused) > AGAIN:
            with suppress(RuntimeError, StopIteration, KeyError):  # (no lock: a race skips one)
                del refused[next(iter(refused))]
        return False

    def keep(
        self,
        entry: _Holder,
        answers: dict[Hashable, Any],
        tag: Hashable,
        value: Any,
        nbytes: int,
        hot: bool = True,
    ) -> int:
        """Add an answer to `entry`'s `answers` (the caller checked they are current) if
        it fits the budget, or if its list is `hot` (older answers are dropped to make
        room; a large one, over 1/PART of the budget, in the room of BIG); the bytes it
        added net of what was dropped (negative: the budget shrank with the rest of
        the cache, and old answers went)."""
        budget = self.budget()
        if tag in answers:
            return 0
        freed = 0
        if nbytes > budget and not hot:
            return 0
        if hot and nbytes > budget // PART:  # large: in the room (see the module doc)
            if nbytes > self.room:
                return 0
            while self.big and self.big_bytes + nbytes > self.room:
                freed += self._drop_big()
            self.big.append((entry, answers, tag, nbytes))
            self.big_bytes += nbytes
        else:
            if not hot and self._pooled() + nbytes > budget:
                while self._pooled() > budget and self._order:  # (this one is not kept)
                    freed += self._drop_oldest()
                return -freed
            while self._pooled() + nbytes > budget and self._order:
                freed += self._drop_oldest()
            self._order.append((entry, answers, tag, nbytes))
            if len(self._order) > 2 * self.count + 64:
                self._compact()
        answers[tag] = value
        entry.answer_bytes += nbytes
        self.bytes += nbytes
        self.count += 1
        return nbytes - freed

    def patch(
        self,
        patch_answer: Callable[..., tuple[Any, ...] | None],
        key: Any,
        entry: _Holder,
        kept: list[tuple[Any, Any]],
        old: Any,
        new: Any,
    ) -> int:
        """Give a written list's entry the answers it kept, brought up to date with the
        change (`patch_answer`: tier 1's), in a new dict (readers holding the old one
        keep nothing); the bytes added. Never fails the write: an answer that cannot
        be patched is dropped."""
        answers: dict[Hashable, Any] = {}
        entry.answers = answers
        added = 0
        for tag, answer in kept:
            try:
                patched = patch_answer(key, tag, answer, entry, old, new)
            except Exception:  # dropped: the next read builds it (and meets what went wrong)
                log.exception("patching the cached answer %r of list %s failed", tag, key)
                continue
            if patched is not None:
                nbytes = ANSWER_BYTES + len(patched) * RECORD_BYTES
                added += self.keep(entry, answers, tag, patched, nbytes)
        return added

    def forget(self, entry: _Holder) -> int:
        """Forget the entry's answers (it changed or was dropped); the bytes freed."""
        freed = entry.answer_bytes
        answers = entry.answers
        if self.big and freed:
            self._forget_big(entry)
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
        self.big.clear()
        self.bytes = self.count = self.big_bytes = 0

    def _drop_big(self) -> int:
        entry, answers, tag, nbytes = self.big.pop(0)
        self.big_bytes -= nbytes
        if entry.answers is not answers or tag not in answers:
            return 0  # forgotten already (`forget` takes them out of `big`: never so)
        del answers[tag]
        entry.answer_bytes -= nbytes
        self.bytes -= nbytes
        self.count -= 1
        return nbytes

    def _forget_big(self, entry: _Holder) -> None:
        """The entry's answers are forgotten: so are those of them in `big`."""
        kept = [item for item in self.big if item[0] is not entry]
        if len(kept) < len(self.big):
            self.big_bytes = sum(item[3] for item in kept)
            self.big = kept

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


class _Record(Protocol):
    time: int
    id2: int


Build = Callable[[list[int], list[int], list[int], list[Any]], "tuple[Any, ...] | None"]


def patched_range(
    answer: tuple[_Record, ...],
    limit: int,
    old: Any,
    new: Any,
    data: Any,
    entry: Any,
    build: Build,
) -> tuple[Any, ...] | None:
    """A kept answer to "the newest `limit` edges" of a list (records ordered by
    `(time, id2)` descending), brought up to date with one change of an edge of
    the list (`old` and `new` rows, as `Changes` reports them), which has been
    applied to `entry` already; or None: drop the answer, the next read builds it.

    The answer is the first min(limit, n) visible edges of the list before the
    change; so is what this returns, after it. `data` is the new edge's data as
    the entry keeps it (`tier1.kept`). It removes the old edge if the
    answer holds it, inserts the new one if it is visible and falls within the
    answer, and fills a place left at the end from the entry's prefix (which
    the change has reached already). Only the records changed are built
    (`build(id2s, times, stamps, datas)`, None when they cannot be shared): a
    write to a list read 10,000 at a time costs a tuple copy, not 10,000 records.
    """
    whole = len(answer) < limit  # the answer is the whole list
    records = answer
    id2 = new[2]
    if old is not None and old[3] == _NORMAL:
        i = _position(records, old[4], id2)
        if i < len(records) and records[i].id2 == id2 and records[i].time == old[4]:
            records = records[:i] + records[i + 1 :]
        elif i < len(records) or whole:
            return None  # it belongs in the answer, which lacks it: not this answer's list
    if new[3] == _NORMAL:
        i = _position(records, new[4], id2)
        if i < len(records) or whole:
            added = build([id2], [new[4]], [new[5]], [data])
            if added is None:
                return None
            # One copy, not two: a full answer loses its last record to the new one.
            records = (
                records[:i] + added + records[i : limit - 1 if len(records) == limit else None]
            )
    if len(records) < limit and not whole:
        prefix = entry.prefix
        if prefix is None or not (entry.complete or len(prefix) >= limit):
            return None
        id2s, times, stamps = prefix.columns(len(records), limit)
        tail = build(id2s, times, stamps, list(map(entry.data.get, id2s)))
        if tail is None:
            return None
        records += tail
    return records


def _position(records: tuple[_Record, ...], time: int, id2: int) -> int:
    """Where `(time, id2)` is or would be among records ordered by (time, id2) descending."""
    return bisect_left(records, (-time, -id2), key=_descending)


def _descending(record: _Record) -> tuple[int, int]:
    return (-record.time, -record.id2)
