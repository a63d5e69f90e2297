"""What tier 1 keeps per key: a list's entry (counts, packed prefix, kept answers), an
object's entry, and the collaborators the cache is built with (`Answers`, `Tier2`)."""

from __future__ import annotations

import sys
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from operator import neg
from typing import Any, Protocol

from ..core import json as _json
from ..core.cachekeys import CacheKey
from ..core.cursor import Seek
from ..core.merge import ObjRow, State
from ..core.scans import ListRow
from .chunks import Columns, ListItem, PackedList
from .decoded import NO_ANSWERS

ENTRY_BYTES = 240  # an object's or a home timeline's entry: its own objects, dict slot and key
LIST_BYTES = 388  # a list's entry, measured: key, dict slot, entry, prefix, its chunk tuple
_CHUNK_BYTES = 180  # a chunk of a prefix, measured: the object and its two arrays' headers
DATA_SLOT = 57  # a cached data value's dict slot and key, besides the value itself
_NORMAL = State.NORMAL
SMALL_LIST = 256  # `ListEntry.get` and `.whole` answer a complete prefix up to this size
_SMALL_GET = SMALL_LIST

ListKey = tuple[int, int]


class ObjEntry:
    """What is cached of one object: its row (None: "no such object"), when it was
    filled, and what the API built from the row (on the fill, `keep_obj`, or by the
    write that made the entry, `Cache.obj_answer`), so that hits build nothing (no
    JSON decode, no schema lookup).

    Writers never change an entry: `apply` puts a new one in its place. So an answer
    kept on an entry always describes that entry's row, and a reader that built one
    from an entry a write has since replaced keeps it on an entry nobody reads."""

    __slots__ = ("answer", "answer_bytes", "born", "row", "used")

    def __init__(self, row: ObjRow | None, born: float, used: bool = False) -> None:
        self.row = row
        self.born = born
        self.used = used  # CLOCK's reference bit, as a list's
        self.answer: Any = None
        self.answer_bytes = 0

    @property
    def nbytes(self) -> int:
        return object_bytes(self.row) + self.answer_bytes


class ListEntry:
    """What is cached of one list, and the queries it can answer."""

    __slots__ = (
        "answer_bytes",
        "answers",
        "born",
        "complete",
        "counts",
        "data",
        "data_bytes",
        "filled",
        "prefix",
        "used",
    )

    def __init__(self, born: float, counts: list[int] | None = None) -> None:
        self.counts = counts  # per state number
        self.prefix: PackedList | None = None
        self.complete = False
        self.data = NO_DATA  # id2 -> `kept(data)` of the prefix's edges with data
        self.data_bytes = 0  # what `data` holds, kept up to date by set_data/drop_data
        self.born = born  # the cache's clock (`Cache.clock`) when it was made
        self.answers: Mapping[Any, Any] = NO_ANSWERS  # prebuilt answers (cache.decoded)
        self.answer_bytes = 0
        self.used = False  # read since eviction last passed it (CLOCK's reference bit)
        self.filled = 0  # the window of its prefix's last fill (`cache.payback`), 0: none

    @property
    def nbytes(self) -> int:
        """What the entry holds, answers aside (not stored: an int would cost 32 bytes)."""
        prefix = self.prefix
        if prefix is None:
            return LIST_BYTES + self.data_bytes
        return LIST_BYTES + prefix.nbytes() + _CHUNK_BYTES * prefix.chunks() + self.data_bytes

    def measure(self) -> int:
        return self.nbytes

    def set_data(self, id2: int, raw: bytes) -> None:
        self.drop_data(id2)
        if self.data is NO_DATA:
            self.data = {}
        value = self.data[id2] = kept(raw)
        self.data_bytes += sys.getsizeof(value) + DATA_SLOT

    def drop_data(self, id2: int) -> None:
        value = self.data.pop(id2, None)
        if value is not None:
            self.data_bytes -= sys.getsizeof(value) + DATA_SLOT

    def empty(self) -> bool:
        """The list is known to have no visible edge."""
        return (self.counts is not None and self.counts[_NORMAL] == 0) or (
            self.complete and self.prefix is not None and len(self.prefix) == 0
        )

    def holds(self, n: int) -> bool:
        """The entry holds the list's newest `n` visible edges (or all of them)."""
        prefix = self.prefix
        if prefix is None:
            return self.empty()
        return self.complete or len(prefix) >= n or self.empty()

    def range(self, pos: int, limit: int) -> Columns | None:
        """Entries pos..pos+limit-1, if cached."""
        if self.empty():
            return _NO_COLUMNS
        prefix = self.prefix
        if prefix is None or not (self.complete or pos + limit <= len(prefix)):
            return None
        return prefix.columns(pos, pos + limit)

    def time_range(self, high: int, low: int, limit: int) -> Columns | None:
        """Up to `limit` entries with low <= time <= high, newest first, if cached."""
        if self.empty():
            return _NO_COLUMNS
        prefix = self.prefix
        if prefix is None:
            return None
        start = prefix.index((high, 2**63), True)  # the first with time <= high
        id2s, times, stamps = prefix.columns(start, start + limit)
        within = bisect_right(times, -low, key=neg)  # times descend: those >= low
        if within < len(times):  # the prefix reaches past the range: it is all here
            return id2s[:within], times[:within], stamps[:within]
        return (id2s, times, stamps) if self.complete or len(times) == limit else None

    def scan(self, seek: Seek, n: int) -> list[ListItem] | None:
        """A page scan (see `core.cursor`), if cached."""
        if self.empty():
            return []
        prefix = self.prefix
        if prefix is None:
            return None
        if seek.boundary is None:
            return _rows(prefix.columns(0, n)) if self.complete or n <= len(prefix) else None
        key = (seek.boundary[0], seek.boundary[1])
        if seek.forward:
            start = prefix.index(key, seek.inclusive)
            found = prefix.columns(start, start + n)
            return _rows(found) if self.complete or len(found[0]) == n else None
        last = prefix.last()
        if self.complete or (last is not None and key >= last):
            return prefix.before(key, seek.inclusive, n)
        return None

    def small_whole(self) -> bool:
        """Whether `get` and `whole` answer: the list is empty, or all of it is cached and
        it has at most SMALL_LIST edges."""
        prefix = self.prefix
        if prefix is not None and self.complete:
            return len(prefix) <= _SMALL_GET
        return self.empty()

    def get(self, id2s: Sequence[int]) -> list[ListItem] | None:
        """The visible entries of these id2s, if the whole (small) list is cached."""
        if self.empty():
            return []
        prefix = self.prefix
        if prefix is None or not self.complete or len(prefix) > _SMALL_GET:
            return None
        return prefix.pick(id2s)

    def whole(self) -> list[ListItem] | None:
        """Every visible entry, if the whole (small) list is cached."""
        if self.empty():
            return []
        prefix = self.prefix
        if prefix is None or not self.complete or len(prefix) > _SMALL_GET:
            return None
        return _rows(prefix.columns(0, len(prefix)))


_FILL_MIN = 50  # the fewest edges a list's fill reads (a short list is then whole)
_NO_COLUMNS: Columns = ([], [], [])
NO_DATA: dict[int, Any] = {}  # shared by entries without data; set_data never writes to it


def kept(raw: bytes) -> Any:
    """How tier 1 keeps an edge's data (JSON `raw`): strings, numbers and booleans
    decoded, so every read shares them instead of decoding again (they are
    immutable); arrays and objects as their JSON, decoded per read (a caller
    may change what it gets)."""
    if raw[:1] in b"[{":
        return raw
    value = _json.decode(raw)
    return raw if value is None else value


MARGIN = 64  # a fill of n edges reads n // MARGIN more (`fill_size`), kept past the prefix


def kept_most(prefix: int) -> int:
    """The most of a list's newest edges its entry holds, for `CacheConfig.prefix`: that
    and its margin (`fill_size`)."""
    return prefix + prefix // MARGIN


def fill_size(need: int | None, cap: int) -> int:
    """How many of a list's newest edges a fill reads for a read that needs `need`
    (None: as many as the cache keeps): what it needs and a margin of 1/MARGIN, at
    least _FILL_MIN (so a short list is cached whole: `assoc_get` answers from it),
    at most `cap` (`kept_most`). Read-ahead beyond that did not pay for itself on
    popularity-weighted traffic (issue 43: a fill of 2x50 cost ~10 µs more than one
    of 50, and reads of the newest 50 never used the rest; a fill of 64 for a read
    of 50 cost ~30% more than one of 50); a deeper read grows the prefix instead.
    The margin (none under MARGIN edges) is for deletes: a prefix of exactly the
    edges its reads ask for was one delete short of them, and its kept answer of
    them could not be patched (LinkBench: each read of its hottest list after a
    delete decoded 10,000 records again, ~10 ms, 93 reads a run)."""
    if need is None:
        return cap
    return min(cap, max(_FILL_MIN, need + need // MARGIN))


def covers(fill: tuple[Sequence[ListRow], bool], want: int) -> bool:
    """Whether a list's fill from tier 2 holds the `want` edges this fill reads (a
    shorter fill stored it, else): if not, the shard is read, and the longer fill
    stored for the others."""
    rows, whole = fill
    return whole or len(rows) >= want


def newest(rows: Sequence[ListRow], cap: int) -> tuple[Sequence[ListRow], bool]:
    """A prefix fill as it is installed and shared through tier 2: the newest `cap`
    of the `cap + 1` rows read, and whether they are the whole list (which a process
    caching more edges a list could not tell from their number)."""
    return rows[:cap], len(rows) <= cap


def _rows(columns: Columns) -> list[ListItem]:
    id2s, times, stamps = columns
    return list(zip(times, id2s, stamps, strict=True))


class Answers(Protocol):
    """What the API that reads builds for the cache to keep (`Cache(answers=…)`)."""

    def obj_answer(self, row: ObjRow | None) -> tuple[Any, int] | None:
        """What hits of an object entry holding `row` answer from, and its bytes; None:
        the reader builds it."""

    def patch_answer(
        self, key: ListKey, tag: Any, answer: Any, entry: ListEntry, old: Any, new: Any
    ) -> tuple[Any, ...] | None:
        """A list's kept answer after a write changed the list, or None to drop it."""


class Tier2(Protocol):
    """The tier shared between processes (Redis, `redis_tier`), or one that only
    carries invalidations (the server's workers' ring)."""

    hits: int
    misses: int
    failures: int

    def get(self, key: CacheKey) -> tuple[Any, Any, bool]: ...
    def put(self, key: CacheKey, value: Any, version: Any) -> None: ...
    def invalidate(self, keys: Sequence[CacheKey]) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


def home_bytes(blob: bytes) -> int:
    return ENTRY_BYTES + len(blob)


def object_bytes(row: ObjRow | None) -> int:
    return ENTRY_BYTES + (0 if row is None else len(row.data))
