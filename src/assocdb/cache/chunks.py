"""A packed, sorted list of edges: the cache's form of an association list prefix.

Twitter kept timelines in Redis as chains of small packed arrays (the Hybrid
List, now Redis's quicklist) rather than one heap object per entry. This is
the same idea for the newest prefix of an association list: entries
`(time, id2, updated_at)`, ordered by `(time, id2)` descending, stored in
chunks of at most CHUNK entries. A chunk is two arrays: the keys, interleaved
`time, id2` as signed 64-bit integers, and the write stamps as offsets
`updated_at - time * 1000`, in the narrowest of 16 and 32 bits that every
offset of the chunk fits (an edge added without an explicit time has an
offset under 1,000), or, when an offset needs 64 bits (explicit times: a
bulk load of old edges, FlockDB positions), the stamps themselves as 64-bit
integers: as small as offsets of 64 bits, and packed and decoded without
the arithmetic (a `q` column is stamps, an `h` or `i` column offsets). So an
entry costs 18 bytes, 24 at worst, against ~131 for a tuple of Python ints;
the arrays are built at their exact size. (`time` is clamped to ±2^61 ms
first, so that an explicit time near the ends of int64 still gives an
offset that fits 64 bits.)

Finding, inserting and removing are a binary search over chunks then within
one; an insert or removal moves at most one chunk's memory. Pure: no I/O.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from itertools import compress, repeat
from operator import add, itemgetter, mul, sub
from typing import Any

CHUNK = 256  # entries per chunk, at most
_SIZES = {"h": 2, "i": 4, "q": 8}
_WIDTHS = (("h", -(2**15), 2**15 - 1), ("i", -(2**31), 2**31 - 1))
_STAMPS = "q"  # a column of the write stamps themselves (an offset needs 64 bits)
_BASE = 2**61 // 1000  # |time| up to which an offset is `updated_at - time * 1000`
_ZERO = (0,)

SortKey = tuple[int, int]  # (time, id2)
Columns = tuple[list[int], list[int], list[int]]  # (id2s, times, updated_ats)
ListItem = tuple[int, int, int]  # (time, id2, updated_at)


def _typecode(low: int, high: int) -> str:
    """The narrowest array type that holds offsets from `low` to `high`; _STAMPS when
    none does (the column then holds the stamps)."""
    return next((code for code, least, most in _WIDTHS if least <= low and high <= most), _STAMPS)


def _base(time: int) -> int:
    """What an entry's offset is taken from: `time * 1000`, clamped within ±2^61."""
    return max(-_BASE, min(time, _BASE)) * 1000


class _Chunk:
    __slots__ = ("keys", "offsets")

    def __init__(self, keys: array[int], offsets: array[int]) -> None:
        self.keys = keys  # time0, id20, time1, id21, …  (descending by (time, id2))
        self.offsets = offsets  # updated_at - time * 1000, per entry (_STAMPS: updated_at)

    def __len__(self) -> int:
        return len(self.offsets)

    def key(self, i: int) -> SortKey:
        return (self.keys[2 * i], self.keys[2 * i + 1])

    def entry(self, i: int) -> ListItem:
        time = self.keys[2 * i]
        offsets = self.offsets
        if offsets.typecode == _STAMPS:
            return (time, self.keys[2 * i + 1], offsets[i])
        base = time * 1000 if -_BASE <= time <= _BASE else _base(time)  # inline: a hot path
        return (time, self.keys[2 * i + 1], offsets[i] + base)

    def position(self, key: SortKey) -> int:
        """Index of the first entry whose key is <= `key` (the list is descending)."""
        lo, hi = 0, len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.key(mid) > key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def insert(self, i: int, entry: ListItem) -> None:
        time, id2, updated_at = entry
        offsets = self.offsets
        if offsets.typecode != _STAMPS:
            offset = updated_at - _base(time)
            code = _typecode(min(offset, 0), max(offset, 0))
            if code == _STAMPS:  # the column becomes the stamps
                stamps = map(add, offsets, map(_base, self.keys[0::2]))
                offsets = self.offsets = array(_STAMPS, stamps)
            elif offsets.itemsize < _SIZES[code]:
                offsets = self.offsets = array(code, offsets)
        self.keys[2 * i : 2 * i] = array("q", (time, id2))
        offsets.insert(i, updated_at if offsets.typecode == _STAMPS else offset)

    def remove(self, i: int) -> None:
        del self.keys[2 * i : 2 * i + 2]
        del self.offsets[i]

    def nbytes(self) -> int:
        return self.keys.itemsize * len(self.keys) + self.offsets.itemsize * len(self.offsets)


def _chunk(id2s: Sequence[int], times: Sequence[int], stamps: Sequence[int]) -> _Chunk:
    """A chunk of the entries given as columns, built in C (no Python call per entry),
    its arrays at their exact size."""
    keys = array("q", _ZERO) * (2 * len(times))  # exact size (from bytes it over-allocates)
    keys[0::2] = array("q", times)
    keys[1::2] = array("q", id2s)
    if not -(2**31) <= stamps[0] - _base(times[0]) < 2**31:  # one offset needs 64 bits: all do
        return _Chunk(keys, array(_STAMPS, stamps))
    if times[-1] >= -_BASE and times[0] <= _BASE:  # (descending: the least is last)
        bases: Iterable[int] = map(mul, times, repeat(1000))
    else:  # an explicit time near the ends of int64
        bases = map(_base, times)
    offsets = list(map(sub, stamps, bases))
    code = _typecode(min(offsets), max(offsets))
    return _Chunk(keys, array(code, stamps if code == _STAMPS else offsets))


class PackedList:
    """Entries `(time, id2, updated_at)` kept sorted by `(time, id2)` descending."""

    __slots__ = ("_chunks", "_firsts", "_length")

    def __init__(self, entries: Iterable[ListItem] = ()) -> None:
        ordered = entries if isinstance(entries, list) else list(entries)
        self._fill(*(list(map(itemgetter(n), ordered)) for n in (1, 0, 2)))

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[int, int, int, Any]]) -> PackedList:
        """The entries of a shard's list rows `(id2, time, updated_at, data)`, ordered as
        stored (newest first): what a cache fill keeps."""
        packed = cls.__new__(cls)
        if rows:
            # One transpose in C: a fill packs on the read's path, and three itemgetter
            # passes and a generator of chunks made packing 64 rows cost ~2x this.
            id2s, times, stamps, _ = zip(*rows, strict=True)
            packed._fill(id2s, times, stamps)
        else:
            packed._fill((), (), ())
        return packed

    def _fill(self, id2s: Sequence[int], times: Sequence[int], stamps: Sequence[int]) -> None:
        # A tuple (one allocation: most lists have one chunk), replaced when chunks come or go.
        self._chunks: tuple[_Chunk, ...]
        if len(times) <= CHUNK:
            self._chunks = (_chunk(id2s, times, stamps),) if times else ()
        else:
            self._chunks = tuple(
                _chunk(id2s[i : i + CHUNK], times[i : i + CHUNK], stamps[i : i + CHUNK])
                for i in range(0, len(times), CHUNK)
            )
        self._length = len(times)
        self._firsts: list[SortKey] | tuple[()] = ()
        self._reindex()

    def __len__(self) -> int:
        return self._length

    def _reindex(self) -> None:
        # Negated first keys, ascending, so bisect finds a chunk for a key; none for one
        # chunk (most lists: ~180 bytes saved on each).
        chunks = self._chunks
        self._firsts = [(-c.keys[0], -c.keys[1]) for c in chunks] if len(chunks) > 1 else ()

    def _locate(self, key: SortKey) -> tuple[int, int]:
        """(chunk, index) of the first entry whose key is <= `key`."""
        if not self._chunks:
            return 0, 0
        firsts = self._firsts
        c = max(0, bisect_left(firsts, (-key[0], -key[1])) - 1) if firsts else 0
        i = self._chunks[c].position(key)
        if i == len(self._chunks[c]) and c + 1 < len(self._chunks):
            return c + 1, 0
        return c, i

    def find(self, key: SortKey) -> ListItem | None:
        """The entry with exactly this key, if present."""
        c, i = self._locate(key)
        if c < len(self._chunks) and i < len(self._chunks[c]) and self._chunks[c].key(i) == key:
            return self._chunks[c].entry(i)
        return None

    def insert(self, entry: ListItem) -> None:
        """Add an entry (its key must not be present)."""
        key = (entry[0], entry[1])
        if not self._chunks:
            self._chunks = (_chunk([entry[1]], [entry[0]], [entry[2]]),)
        else:
            c, i = self._locate(key)
            if c == len(self._chunks):
                c, i = c - 1, len(self._chunks[c - 1])
            chunk = self._chunks[c]
            chunk.insert(i, entry)
            if len(chunk) > CHUNK:  # split, so a move never exceeds one chunk
                half = len(chunk) // 2
                rest = _Chunk(chunk.keys[2 * half :], chunk.offsets[half:])
                del chunk.keys[2 * half :]
                del chunk.offsets[half:]
                self._chunks = (*self._chunks[: c + 1], rest, *self._chunks[c + 1 :])
        self._length += 1
        self._reindex()

    def remove(self, key: SortKey) -> bool:
        """Remove the entry with this key; False if there was none."""
        c, i = self._locate(key)
        if c >= len(self._chunks) or i >= len(self._chunks[c]) or self._chunks[c].key(i) != key:
            return False
        self._chunks[c].remove(i)
        if not len(self._chunks[c]):
            self._chunks = self._chunks[:c] + self._chunks[c + 1 :]
        self._length -= 1
        self._reindex()
        return True

    def pop_last(self) -> ListItem:
        """Remove and return the oldest entry."""
        chunk = self._chunks[-1]
        entry = chunk.entry(len(chunk) - 1)
        chunk.remove(len(chunk) - 1)
        if not len(chunk):
            self._chunks = self._chunks[:-1]
        self._length -= 1
        self._reindex()
        return entry

    def last(self) -> SortKey | None:
        """The oldest key, if any."""
        if not self._chunks:
            return None
        chunk = self._chunks[-1]
        return chunk.key(len(chunk) - 1)

    def floor(self) -> SortKey | None:
        """The oldest key, read without the lock: it may be torn or stale while a
        write changes the list, so use it only to skip the prefix (see `Cache.reaches_past`)."""
        try:
            keys = self._chunks[-1].keys
            return (keys[-2], keys[-1])
        except IndexError:
            return None

    def columns(self, start: int, stop: int) -> Columns:
        """Entries start..stop-1 as columns (id2s, times, updated_ats), sliced in C."""
        id2s: list[int] = []
        times: list[int] = []
        stamps: list[int] = []
        skip, want = start, stop - start
        for chunk in self._chunks:
            n = len(chunk)
            if skip >= n:
                skip -= n
                continue
            end = min(n, skip + want)
            keys = chunk.keys[2 * skip : 2 * end]
            chunk_times = keys[0::2]
            times.extend(chunk_times)
            id2s.extend(keys[1::2])
            if chunk.offsets.typecode == _STAMPS:
                stamps.extend(chunk.offsets[skip:end])
                want -= end - skip
                skip = 0
                if want <= 0:
                    break
                continue
            if chunk_times and min(chunk_times) >= -_BASE and max(chunk_times) <= _BASE:
                bases: Iterable[int] = map(mul, chunk_times, repeat(1000))
            else:  # an explicit time near the ends of int64
                bases = map(_base, chunk_times)
            stamps.extend(map(add, chunk.offsets[skip:end], bases))
            want -= end - skip
            skip = 0
            if want <= 0:
                break
        return id2s, times, stamps

    def pick(self, id2s: Iterable[int]) -> list[ListItem]:
        """The entries of these id2s, newest first: each chunk's id2 column scanned in C
        (no Python call per entry), only the entries found decoded."""
        wanted = set(id2s)
        out: list[ListItem] = []
        for chunk in self._chunks:
            ids = chunk.keys[1::2]
            if not wanted.isdisjoint(ids):
                out.extend(
                    map(chunk.entry, compress(range(len(ids)), map(wanted.__contains__, ids)))
                )
        return out

    def index(self, key: SortKey, inclusive: bool) -> int:
        """The position of the first entry older than `key` (or equal, if inclusive)."""
        c, i = self._locate(key)
        chunks = self._chunks
        if not inclusive and c < len(chunks) and i < len(chunks[c]) and chunks[c].key(i) == key:
            i += 1
        return sum(len(chunk) for chunk in chunks[:c]) + i

    def slice(self, start: int, stop: int) -> list[ListItem]:
        """Entries start..stop-1 (newest first)."""
        out: list[ListItem] = []
        skip = start
        for chunk in self._chunks:
            n = len(chunk)
            if skip >= n:
                skip -= n
                continue
            for i in range(skip, n):
                if len(out) >= stop - start:
                    return out
                out.append(chunk.entry(i))
            skip = 0
        return out

    def after(self, key: SortKey, inclusive: bool, limit: int) -> list[ListItem]:
        """Up to `limit` entries older than `key` (or equal, if inclusive), newest first."""
        c, i = self._locate(key)
        if (
            inclusive is False
            and c < len(self._chunks)
            and i < len(self._chunks[c])
            and self._chunks[c].key(i) == key
        ):
            i += 1
        return self._from(c, i, limit)

    def before(self, key: SortKey, inclusive: bool, limit: int) -> list[ListItem]:
        """Up to `limit` entries newer than `key` (or equal), nearest first (ascending)."""
        c, i = self._locate(key)
        if (
            inclusive
            and c < len(self._chunks)
            and i < len(self._chunks[c])
            and self._chunks[c].key(i) == key
        ):
            c, i = self._step(c, i, +1)
        out: list[ListItem] = []
        while len(out) < limit:
            c, i = self._step(c, i, -1)
            if c < 0:
                break
            out.append(self._chunks[c].entry(i))
        return out

    def _step(self, c: int, i: int, direction: int) -> tuple[int, int]:
        if direction > 0:
            if c < len(self._chunks) and i + 1 < len(self._chunks[c]):
                return c, i + 1
            return c + 1, 0
        if i > 0:
            return c, i - 1
        if c == 0:
            return -1, 0
        return c - 1, len(self._chunks[c - 1]) - 1

    def _from(self, c: int, i: int, limit: int) -> list[ListItem]:
        out: list[ListItem] = []
        while c < len(self._chunks) and len(out) < limit:
            chunk = self._chunks[c]
            while i < len(chunk) and len(out) < limit:
                out.append(chunk.entry(i))
                i += 1
            c, i = c + 1, 0
        return out

    def __iter__(self) -> Iterator[ListItem]:
        for chunk in self._chunks:
            for i in range(len(chunk)):
                yield chunk.entry(i)

    def chunks(self) -> int:
        """How many chunks hold the entries."""
        return len(self._chunks)

    def nbytes(self) -> int:
        """Payload bytes (the arrays' items)."""
        return sum(c.nbytes() for c in self._chunks)
