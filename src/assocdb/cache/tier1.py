"""The graph-aware cache, tier 1: in-process, memory-bounded, write-through.

It keeps what TAO's cache kept, in the forms the queries need:

* per list `(id1, atype)`: the counts per state, and the newest prefix of
  its visible (normal) edges, up to `prefix` entries, as a PackedList (about
  20 bytes an edge) plus the data of the edges that have any; `complete`
  says the prefix is the whole list;
* per object: its row, or a negative entry ("no such object"), and what the
  API built from the row (`ObjEntry.answer`: the object decoded, so hits copy
  a dict instead of decoding JSON), built by the fill or by the write that
  replaced the entry (`obj_answer`);
* per home timeline owner: the packed blob of `core.timeline_list` (32 bytes an
  entry), exactly as the shard stores it.

A read asks a list entry to answer (`ListEntry.range`, `.time_range`,
`.scan`, `.get`); the entry answers when its contents cover the query (a
range within the prefix, anything of a complete prefix, anything at all when
the count is zero) and says None otherwise, and the read goes to the shard.
A key is filled from the shard on its second miss (`admit_after`: a first
miss reads just what it asks for: `admission`), a list with the edges its read
needs, at least 50 (`fill_size`; its prefix grows as deeper reads need it);
concurrent misses on one key share one fill (no thundering herd).

Writes keep entries exact: every applied leg reports its changes (old and
new row), and `apply` updates cached entries in place (prefix and counts);
timeline deliveries are merged into cached blobs with the shard's own rule
(`merge_blob`). A fill that a write of its key overlapped is not installed
(its ticket is marked stale; a count's fill, which has none, checks
`generation`): a slow fill never hides a newer write, so a process always
reads its own writes.

Writes of other processes are seen through tier 2 (Redis invalidations), a
change signal (`foreign`: entries live until another process writes) or,
without either, after `max_age` seconds at most: see `validity`.

Memory is bounded in bytes by CLOCK eviction (a hit sets the entry's
reference bit, eviction gives a set bit a second chance; LRU for timelines),
sparing the hottest keys (`HotKeys`). See `bench/cache.py` for bytes per edge.

Hits take no lock. A hot list is answered from answers the API built before
and the entry keeps (`cache.decoded`: one dict lookup; a write to the list
patches its answers to the newest N, `patch_answer`); a count or an object is
one dict lookup too. A hit reads only what is immutable or replaced whole by
writers, or a single int; it never changes a dict, and eviction only takes a
dict's first key under the lock, so a hit never meets a dict mid-iteration.
Reads the answers do not cover decode the packed prefix under the lock, as
writers change it in place.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from operator import itemgetter
from typing import Any

from ..core.cachekeys import COUNTS, HOME, LIST, OBJECT, PREFIX, CacheKey
from ..core.merge import Changes, ObjRow, State
from ..core.records import CacheConfig, CacheStats
from ..core.scans import ListRow
from ..core.timeline_list import TimelineEntry, merge_blob
from .admission import Doorkeeper
from .admission import Fill as _Fill
from .chunks import PackedList
from .count_reads import WAITED as _WAITED
from .count_reads import CountReads
from .counters import stats_of
from .decoded import ANSWER_BYTES, NO_ANSWERS, RECORD_BYTES, Decoded
from .entries import (
    NO_DATA,
    Answers,
    ListEntry,
    ListKey,
    ObjEntry,
    Tier2,
    covers,
    fill_size,
    home_bytes,
    kept_most,
    newest,
    object_bytes,
)
from .eviction import evict
from .getgate import GetGate
from .growth import Tail, grow
from .hotkeys import HotKeys
from .offers import long_read
from .payback import SAMPLE, Payback
from .validity import Validity

log = logging.getLogger(__name__)
_NORMAL = State.NORMAL


class Cache(CountReads):
    """Tier 1. Thread-safe; the Graph consults it before the backend."""

    def __init__(
        self,
        config: CacheConfig | None = None,
        graph_id: str = "graph",
        *,
        answers: Answers | None = None,
        tier2: Tier2 | None = None,
        clock: Callable[[], float] = time.monotonic,
        foreign: Callable[[], bool] | None = None,
    ) -> None:
        """`answers` builds what hits answer from (the API that reads, `Answers`);
        `tier2` is the shared tier (default: Redis, if `config.redis` names one);
        `clock` says the time in seconds, which entries' ages (`max_age`) count in;
        `foreign` says whether another process wrote the graph since it was last
        asked (used without tier 2: entries then do not age, `validity`)."""
        self.config = config or CacheConfig()
        self.keeps = kept_most(self.config.prefix)  # the most edges of a list an entry holds
        self.clock = clock
        self.tier2: Tier2 | None = tier2
        if tier2 is None and self.config.redis is not None:
            from .redis_tier import RedisTier

            self.tier2 = RedisTier(
                self.config.redis, graph_id, self.config.redis_ttl, self.invalidate
            )
        # Lists are evicted by CLOCK (second chance) rather than LRU: a hit sets a flag
        # instead of moving its key, so it never changes the dict, and a plain dict
        # costs ~50 bytes less per list than an ordered one.
        self._lists: dict[ListKey, ListEntry] = {}
        self._objects: dict[int, ObjEntry] = {}  # evicted by CLOCK too
        self._homes: OrderedDict[int, tuple[bytes, float]] = OrderedDict()  # owner -> blob, born
        self._home_bytes = 0
        self._fills: dict[CacheKey, _Fill] = {}
        self.generation = 0  # changed by every write and invalidation, begun or ended
        self._writing: dict[CacheKey, int] = {}  # ticket keys a write is changing
        self.doorkeeper = Doorkeeper(self.config.admit_after)  # which misses fill
        self.payback = Payback(self.doorkeeper, self.config.payback)  # fills paid back?
        self.gets = GetGate(self.config.payback)  # does asking the cache pay assoc_get?
        self._lock = threading.RLock()
        signal = foreign if self.tier2 is None else None  # (tier 2's can be lost: age)
        self._aged = Validity(self.config.max_age, clock, signal, self.invalidate).aged
        self.hot = HotKeys()
        self.decoded = Decoded(self.config.max_bytes, lambda: self.bytes - self.decoded.bytes)
        #: What an object entry's hits answer from, built from its row, and its bytes
        #: (None: the reader builds it), from `answers`. A write's new entry gets it at
        #: once, so the object's next read is a plain hit.
        self.obj_answer: Callable[[ObjRow | None], tuple[Any, int] | None] | None = (
            None if answers is None else answers.obj_answer
        )
        #: A list's kept answer (`keep`) after a write changed the list: (key, tag, answer,
        #: entry, old row, new row) -> the answer now, or None to drop it, from `answers`.
        #: Without it, a write drops every answer its list kept.
        self.patch_answer: Callable[..., tuple[Any, ...] | None] | None = (
            None if answers is None else answers.patch_answer
        )
        #: A list's entry or None (the dict's own get: no lock, no count; `assoc_range`
        #: asks it before `answer` while list fills are closed).
        self.list_entry: Callable[[ListKey], ListEntry | None] = self._lists.get
        self.bytes = 0
        self.hits = self.misses = self.fills = self.stale_fills = self.evictions = 0
        self.count_fills = 0  # count misses filled by `put_counts` (not in misses, fills)
        self.count_promotions = 0  # counts on probation made entries (`_promote`)
        #: Counts on probation (`put_probation`) and its `get` (the dict is never replaced).
        self.probation: dict[ListKey, dict[int, int]] = {}
        self.probation_get = self.probation.get
        self._probation_born = self._probation_trimmed = clock()  # (its oldest: `_aged`)
        self.fill_seconds = 0.0  # spent reading the other fills (tier 2 or the shard)

    # -- reads ------------------------------------------------------------------------

    def answer(self, key: ListKey, tag: Any, encoded: bool = False) -> Any:
        """The answer to `tag` the list's entry keeps (`keep`), or None (no lock). Its
        edges are `len(answer)`, or an `encoded` answer's second item."""
        entry = self._lists.get(key)
        if entry is None:
            return None
        found = entry.answers.get(tag)
        if found is None or not self._touch(key, entry):
            return None
        self.hot.seen((LIST, *key))
        if entry.filled:  # (do fills pay back?)
            self.payback.hit(entry.filled, found[1] if encoded else len(found))
        return found

    def sample_miss(self, key: ListKey) -> None:
        """Closed list fills: this miss of a list is the sampled one (`Payback.ghost`: its
        list a ghost, nothing filled), counted with the misses passed since the last one."""
        payback = self.payback
        payback.skip = SAMPLE
        self.misses += SAMPLE
        with self._lock:  # (a verdict is made under it)
            payback.ghost(key)

    def reaches_past(self, key: ListKey, boundary: tuple[int, ...]) -> bool:
        """Whether a scan from `boundary` certainly needs more than the list's cached
        prefix (no lock: a racing write can only make the shard's answer the right one)."""
        entry = self._lists.get(key)
        if entry is None or entry.complete:
            return False
        prefix = entry.prefix
        floor = None if prefix is None else prefix.floor()
        return floor is not None and boundary < floor

    def holds_whole(self, key: ListKey) -> bool:
        """Whether the list's entry holds all of a small list (`ListEntry.small_whole`),
        the only entry `held` can answer an assoc_get from (no lock: `held` looks again)."""
        entry = self._lists.get(key)
        return entry is not None and entry.small_whole()

    def answers(self, key: ListKey) -> dict[Any, Any] | None:
        """The list's answers as they are before a read: pass them to `keep` after it."""
        entry = self._lists.get(key)
        if entry is None:
            return None
        answers = entry.answers
        if answers is NO_ANSWERS:  # asked for the first time since the entry changed
            with self._lock:  # (two readers must not each put a dict of their own there)
                if entry.answers is NO_ANSWERS:
                    entry.answers = {}
                answers = entry.answers
        return answers  # type: ignore[return-value]

    def keep(
        self,
        key: ListKey,
        before: dict[Any, Any] | None,
        tag: Any,
        value: Any,
        n: int,
        nbytes: int | None = None,
    ) -> None:
        """Keep `value` as the answer to `tag` (n edges; `nbytes` if it is not n records),
        if the entry has not changed since `answers` gave `before`: the answer is then
        what the entry says now."""
        if before is None:
            return
        with self._lock:
            entry = self._lists.get(key)
            if entry is None or entry.answers is not before:
                return
            nbytes = ANSWER_BYTES + (n * RECORD_BYTES if nbytes is None else nbytes)
            hot_key = (LIST, *key)  # past their budget, answers of hot lists only (or long
            # answers asked for again: `Decoded.again`)
            hot = self.hot.is_hot(hot_key) or (long_read(n) and hot_key in self.decoded.refused)
            self.bytes += self.decoded.keep(entry, before, tag, value, nbytes, hot)
            self._evict()

    def _touch(self, key: ListKey, entry: ListEntry) -> bool:
        """Whether a hit on this entry is fresh; if so, count it and mark it used."""
        if self._aged(entry.born):
            return False
        entry.used = True
        self.hits += 1
        return True

    @contextmanager
    def listed(
        self,
        key: ListKey,
        load: Callable[[int], Sequence[ListRow]],
        need: int | None = None,
        filled: list[Sequence[ListRow]] | None = None,
        tail: Tail | None = None,
    ) -> Iterator[ListEntry | None]:
        """The list's entry, its prefix filled on a miss, locked while in use.

        `need` is how many of the newest edges the read needs (None: as many as the
        cache keeps, for reads of the whole list or past a boundary). A miss fills
        that (at least 50: `fill_size`), not the whole prefix. An entry whose prefix
        is shorter than `need` (and not the whole list) is filled again, longer: the
        prefix grows with the reads of the list (by its `tail` alone, if given and it
        lacks a few edges: `cache.growth`).

        None when it is not cached: the key was missed for the first time (admitted
        on its `admit_after`-th miss), or a write raced the fill. Read the shard.

        When this call filled the entry and nothing changed it since, the rows the
        fill installed are appended to `filled` (if given): the caller may build its
        answer from them as an uncached read would, instead of decoding the prefix
        it just packed.
        """
        self.hot.seen((LIST, *key))
        want = fill_size(need, self.keeps)
        with self._lock:
            entry = self._fresh_list(key)
            if entry is not None and entry.holds(want if need is None else need):
                self.hits += 1
                if entry.filled:  # (the rows it may answer: all it holds, or `need`)
                    held = len(entry.prefix) if entry.prefix is not None else 0
                    self.payback.hit(entry.filled, held if need is None else min(need, held))
                yield entry
                return
            growing = entry is not None and entry.prefix is not None
            if growing:  # in use, too short: grow
                self.misses += 1
                admitted = True
            else:  # (a long read fills on its first miss, as `offers.long_read` says)
                admitted = self._admit((PREFIX, key)) or long_read(need)
        if not admitted:  # read once so far: the caller reads just what it needs
            yield None
            return
        if growing and tail is not None and grow(self, key, tail, want):
            with self._lock:
                entry = self._lists.get(key)
                if entry is not None and entry.holds(want if need is None else need):
                    yield entry
                    return
        installed: list[Any] = []
        value = self._fill((PREFIX, key), lambda: newest(load(want + 1), want), want, installed)
        with self._lock:
            entry = self._lists.get(key)
            if entry is None or entry.prefix is None:
                yield None
                return
            if filled is not None and installed and entry.answers is installed[0]:
                filled.append(value[0][: self.keeps])  # what the entry holds
            yield entry

    def passes(self, ticket_key: CacheKey) -> bool:
        """Whether a read of a list's PREFIX is a miss that fills nothing: the list has
        no entry and this is not its `admit_after`-th miss (the miss is counted). Then
        the caller reads just what it needs from the shard, at the cost of a read
        without a cache; False: ask `listed`. (A list's COUNTS are filled on their
        first miss: `put_counts`, the statement an uncached read runs.)"""
        # No lock, no hot-key sampling: see `admission` (stats: approximate, as hits').
        entry = self._lists.get(ticket_key[1])
        payback = self.payback
        if entry is not None and (payback.open or entry.prefix is not None):
            return False
        if not payback.open:  # fills do not pay: no probe, no fill; one miss in SAMPLE a ghost
            key = ticket_key[1]
            payback.ghost_hit(key)
            self.misses += 1
            if payback.sampled():
                with self._lock:  # (a verdict is made under it)
                    payback.ghost(key)
            return True
        if self.doorkeeper.passing(ticket_key):  # (False, too, if admitted on a first miss)
            self.misses += 1
            payback.passes += 1
            return True
        return False  # (`listed` or `counts` admits it)

    @contextmanager
    def held(self, key: ListKey) -> Iterator[ListEntry | None]:
        """The list's entry if it is cached (no fill, not counted), locked while in use;
        None: read the shard."""
        with self._lock:
            yield self._fresh_list(key)

    def cached_obj(self, id: int) -> ObjEntry | None:
        """The object's entry if it is cached and fresh (a hit: counted, no lock), else
        None: then read through `obj`."""
        found = self._objects.get(id)
        if found is None or self._aged(found.born):
            return None
        found.used = True
        self.hits += 1
        hot = self.hot
        hot.skip -= 1  # `HotKeys.seen`, without a call per hit
        if hot.skip <= 0:
            hot.count((OBJECT, id))
        return found

    def entry_of(self, id: int, row: ObjRow | None) -> ObjEntry | None:
        """The object's entry if it holds `row` (the one `obj` just returned, filled or
        found), not counted as a hit; None if the cache does not hold that row."""
        found = self._objects.get(id)
        return found if found is not None and found.row is row else None

    def keep_obj(self, id: int, entry: ObjEntry, answer: Any, nbytes: int) -> None:
        """Keep `answer`, built from `entry.row`, on the entry (if it is still the
        object's entry: else a write replaced it, and nobody reads it any more)."""
        with self._lock:
            if self._objects.get(id) is not entry or entry.answer is not None:
                return
            entry.answer, entry.answer_bytes = answer, nbytes
            self.bytes += nbytes
            self._evict()

    def obj(self, id: int, load: Callable[[], ObjRow | None]) -> ObjRow | None:
        """The object row (filled on a miss); None if there is none."""
        found = self.cached_obj(id)
        if found is not None:
            return found.row
        self.hot.seen((OBJECT, id))
        with self._lock:
            found = self._objects.get(id)
            if found is not None and not self._aged(found.born):
                found.used = True
                self.hits += 1
                return found.row
            if found is not None:  # aged out while in use
                self.doorkeeper.readmit((OBJECT, id))
            admitted = self._admit((OBJECT, id))
        if not admitted:
            return load()
        row = self._fill((OBJECT, id), load)
        if row is _WAITED:
            return self.obj(id, load)
        return row  # type: ignore[no-any-return]

    def home(self, owner: int, load: Callable[[], bytes]) -> bytes:
        """The owner's packed home timeline (b"" if none), filled on a miss."""
        self.hot.seen((HOME, owner))
        with self._lock:
            found = self._homes.get(owner)
            if found is not None and not self._aged(found[1]):
                self._homes.move_to_end(owner)
                self.hits += 1
                return found[0]
            if found is not None:  # aged out
                self._drop_home(owner)
                self.doorkeeper.readmit((HOME, owner))
            admitted = self._admit((HOME, owner))
        if not admitted:
            return load()
        blob = self._fill((HOME, owner), load)
        if blob is _WAITED:
            return self.home(owner, load)
        return blob  # type: ignore[no-any-return]

    # -- fills --------------------------------------------------------------------------

    def _admit(self, ticket_key: CacheKey) -> bool:
        """Whether a miss of this key should fill the cache (`Doorkeeper`; call with
        the lock held)."""
        self.misses += 1
        return self.doorkeeper.admits(ticket_key)

    def _fill(
        self,
        ticket_key: CacheKey,
        load: Callable[[], Any],
        want: int = 0,
        installed: list[Any] | None = None,
    ) -> Any:
        """Load on a miss and install the result, unless a write made it stale.

        A concurrent miss of the same key waits for this load instead of
        issuing its own, then gets _WAITED and reads the cache again. A list's
        prefix installed appends the entry's new answers dict to `installed`
        (the entry is unchanged while its `answers` is still that dict).
        """
        with self._lock:
            ongoing = self._fills.get(ticket_key)
            if ongoing is None:
                ticket = self._fills[ticket_key] = _Fill()
                # A write is between its commit and `apply`: what this load reads may
                # or may not hold it, and `apply` would count it again. Not installed.
                ticket.stale = ticket_key in self._writing
        if ongoing is not None:
            ongoing.wait()
            return load() if ongoing.stale else _WAITED
        began = time.perf_counter()
        try:
            value = self._load(ticket_key, load, want)
        except BaseException:
            with self._lock:
                del self._fills[ticket_key]
            ticket.stale = True
            ticket.done.release()
            raise
        try:
            with self._lock:
                del self._fills[ticket_key]
                self.fills += 1
                self.fill_seconds += time.perf_counter() - began
                if ticket.stale:
                    self.stale_fills += 1  # a write landed meanwhile: do not install
                else:
                    fresh = self._install(ticket_key, value)
                    if installed is not None and fresh is not None:
                        installed.append(fresh)
        except BaseException:
            ticket.stale = True  # not installed: the waiters load for themselves
            raise
        finally:
            ticket.done.release()  # whatever happened, no waiter waits for ever
        return value

    def _load(self, ticket_key: CacheKey, load: Callable[[], Any], want: int) -> Any:
        """From tier 2 if it has the key, else from the shard (offered to tier 2)."""
        if self.tier2 is None:
            return load()
        value, version, found = self.tier2.get(ticket_key)
        if found and (ticket_key[0] != PREFIX or covers(value, want)):
            return value
        value = load()
        self.tier2.put(ticket_key, value, version)
        return value

    def _install(self, ticket_key: CacheKey, value: Any) -> dict[Any, Any] | None:
        """Install a fill; a list prefix's entry gets a new answers dict, returned."""
        fresh = None
        kind, key = ticket_key
        if kind == HOME:
            self._drop_home(key)
            self._homes[key] = (value, self.clock())
            self._home_bytes += home_bytes(value)
            self.bytes += home_bytes(value)
        elif kind == OBJECT:
            replaced = self._objects.pop(key, None)  # an aged entry, refilled
            if replaced is not None:
                self.bytes -= replaced.nbytes
            self._objects[key] = ObjEntry(value, self.clock())
            self.bytes += object_bytes(value)
        else:
            entry = self._fresh_list(key, read=False)  # a fill is not a read of the entry
            if entry is None:
                entry = self._lists[key] = ListEntry(self.clock())
                self.bytes += entry.nbytes
            self.bytes -= self.decoded.forget(entry) + entry.nbytes
            if kind == COUNTS:
                entry.counts = [value.get(s, 0) for s in range(4)]
            else:
                cap = self.keeps
                rows, whole = value  # (tier 2's may come from a process with another cap)
                entry.complete = whole and len(rows) <= cap
                rows = rows[:cap]
                entry.prefix = PackedList.from_rows(rows)
                entry.data, entry.data_bytes = NO_DATA, 0
                if list(map(itemgetter(3), rows)).count(None) != len(rows):  # (in C)
                    for r in rows:
                        if r[3] is not None:
                            entry.set_data(r[0], r[3])
                fresh = entry.answers = {}  # (`forget` left the shared NO_ANSWERS)
                entry.filled = self.payback.filled(len(rows))
            self.bytes += entry.nbytes
        self._evict()
        return fresh

    def _fresh_list(self, key: ListKey, read: bool = True) -> ListEntry | None:
        """The list's entry unless it aged out; a `read` sets its reference bit."""
        entry = self._lists.get(key)
        if entry is None:
            return None
        if self._aged(entry.born):
            self._drop_list(key)
            self.doorkeeper.readmit((COUNTS, key))
            self.doorkeeper.readmit((PREFIX, key))
            return None
        if read:
            entry.used = True
        return entry

    # -- writes ---------------------------------------------------------------------------

    def writing(self, tickets: Sequence[CacheKey]) -> None:
        """A write of these entries (COUNTS/PREFIX, (id1, atype)) or (OBJECT, id)
        begins: from now until `written`, no fill of them is installed (a fill could
        read the shard after the write's commit and before its `apply`, which would
        then apply the write twice)."""
        with self._lock:
            writing, fills = self._writing, self._fills
            for ticket_key in tickets:
                writing[ticket_key] = writing.get(ticket_key, 0) + 1
                # (`_stale`, inlined: two tickets a leg, on every write)
                self.generation += 1
                ongoing = fills.get(ticket_key)
                if ongoing is not None:
                    ongoing.stale = True

    def written(self, tickets: Sequence[CacheKey]) -> None:
        """The write `writing` announced is applied here (or failed)."""
        with self._lock:
            self._done_writing(tickets)

    def _done_writing(self, tickets: Sequence[CacheKey]) -> None:
        """(Holding the lock) `written`."""
        self.generation += 1
        writing = self._writing
        for ticket_key in tickets:
            left = writing[ticket_key] - 1
            if left:
                writing[ticket_key] = left
            else:
                del writing[ticket_key]

    def apply(self, changes: Changes, tickets: Sequence[CacheKey] | None = None) -> None:
        """Bring cached entries up to date with what a leg changed (and tell tier 2).
        With `tickets`, the write `writing` announced for them is over too (`written`,
        under the same lock: one call and one lock a leg less), whatever happens."""
        touched: list[CacheKey] = []
        fills = self._fills
        with self._lock:
            try:
                for old, new in changes.edges:
                    key = (new[0], new[1])
                    counts, prefix = (COUNTS, key), (PREFIX, key)
                    touched += [counts, prefix]
                    self.generation += 2  # (`_stale` of both, inlined)
                    self.probation.pop(key, None)
                    if fills:
                        for ticket_key in (counts, prefix):
                            ongoing = fills.get(ticket_key)
                            if ongoing is not None:
                                ongoing.stale = True
                    entry = self._lists.get(key)
                    if entry is not None:
                        patch = self.patch_answer
                        kept = list(entry.answers.items()) if patch else []
                        self.bytes -= self.decoded.forget(entry) + entry.nbytes
                        self._apply_edge(entry, old, new)
                        self.bytes += entry.nbytes
                        if kept and patch is not None:
                            self.bytes += self.decoded.patch(patch, key, entry, kept, old, new)
                for row in changes.objects:
                    touched.append((OBJECT, row.id))
                    self._stale((OBJECT, row.id))
                    found = self._objects.get(row.id)
                    if found is not None:  # replaced, not changed: see ObjEntry
                        self.bytes -= found.nbytes
                        value = None if row.state == State.REMOVED else row
                        written = ObjEntry(value, found.born, found.used)
                        self._answer_obj(written)
                        self._objects[row.id] = written
                        self.bytes += written.nbytes
                if self.bytes > self.config.max_bytes:  # (`evict`'s own test, a call less)
                    self._evict()
            finally:
                if tickets is not None:
                    self._done_writing(tickets)
        if self.tier2 is not None and touched:
            self.tier2.invalidate(list(dict.fromkeys(touched)))

    def _answer_obj(self, entry: ObjEntry) -> None:
        """Give a written object's new entry its answer (`obj_answer`), if that can be
        built: else its first hit builds it. Never fails the write that made the entry."""
        if self.obj_answer is None:
            return
        try:
            built = self.obj_answer(entry.row)
        except Exception:  # the reader will meet (and report) whatever went wrong here
            log.exception("building the cached answer of object %s failed", entry.row)
            return
        if built is not None:
            entry.answer, entry.answer_bytes = built

    def deliver(self, writes: Mapping[int, Sequence[TimelineEntry]], cap: int) -> None:
        """Bring cached home timelines up to date with a merged leg of deliveries (and
        tell tier 2): the same merge the shard did, so the blobs stay equal."""
        touched: list[CacheKey] = []
        with self._lock:
            for owner, entries in writes.items():
                key = (HOME, owner)
                touched.append(key)
                self._stale(key)
                found = self._homes.get(owner)
                if found is not None:
                    blob = merge_blob(found[0], entries, cap)
                    if blob is not None:
                        grown = home_bytes(blob) - home_bytes(found[0])
                        self._home_bytes += grown
                        self.bytes += grown
                        self._homes[owner] = (blob, found[1])
            self._evict()
        if self.tier2 is not None and touched:
            self.tier2.invalidate(touched)

    def _apply_edge(self, entry: ListEntry, old: Any, new: Any) -> None:
        if entry.counts is not None:
            if old is not None:
                entry.counts[old[3]] -= 1
            entry.counts[new[3]] += 1
        prefix = entry.prefix
        if prefix is None:
            return
        id2 = new[2]
        if old is not None and old[3] == _NORMAL:
            prefix.remove((old[4], id2))
            entry.drop_data(id2)
        if new[3] == _NORMAL:
            last = prefix.last()
            if entry.complete or (last is not None and (new[4], id2) > last):
                prefix.insert((new[4], id2, new[5]))
                if new[6] is not None:
                    entry.set_data(id2, new[6])
                if len(prefix) > self.keeps:
                    _, dropped, _ = prefix.pop_last()
                    entry.drop_data(dropped)
                    entry.complete = False
        if not entry.complete and len(prefix) == 0:
            entry.prefix = None  # an empty prefix of a longer list tells nothing

    def _stale(self, ticket_key: CacheKey) -> None:
        self.generation += 1  # (`put_counts` installs nothing read across it)
        ongoing = self._fills.get(ticket_key)
        if ongoing is not None:
            ongoing.stale = True

    def invalidate(self, keys: Sequence[CacheKey] | None = None) -> None:
        """Forget these entries (COUNTS/PREFIX, (id1, atype)), (OBJECT, id) or
        (HOME, owner), or all."""
        with self._lock:
            if keys is None:
                self.generation += 1
                for fill in self._fills.values():
                    fill.stale = True
                self._lists.clear()
                self.probation.clear()
                self.decoded.clear()
                self._objects.clear()
                self._homes.clear()
                self.bytes = self._home_bytes = 0
                return
            for kind, key in keys:
                if kind == HOME:
                    self._stale((kind, key))
                    if self._drop_home(key):
                        self.doorkeeper.readmit((kind, key))
                elif kind == OBJECT:
                    self._stale((kind, key))
                    found = self._objects.pop(key, None)
                    if found is not None:
                        self.bytes -= found.nbytes
                        self.doorkeeper.readmit((kind, key))
                else:
                    self._stale((COUNTS, key))
                    self._stale((PREFIX, key))
                    self.probation.pop(key, None)
                    if self._drop_list(key):
                        self.doorkeeper.readmit((COUNTS, key))
                        self.doorkeeper.readmit((PREFIX, key))

    def forget(self, keys: list[CacheKey]) -> None:
        """Forget these entries here, in tier 2 and in every process (rows changed
        in a way no change set describes: a write that reached only some replicas)."""
        self.invalidate(keys)
        if self.tier2 is not None:
            self.tier2.invalidate(keys)

    def flush(self) -> None:
        """Forget everything, in tier 2 and every process too (rows changed around the cache)."""
        self.invalidate()
        if self.tier2 is not None:
            self.tier2.flush()

    def close(self) -> None:
        if self.tier2 is not None:
            self.tier2.close()

    # -- memory ---------------------------------------------------------------------------

    def _drop_list(self, key: ListKey) -> bool:
        """Forget a list's entry; whether there was one."""
        entry = self._lists.pop(key, None)
        if entry is None:
            return False
        self.bytes -= entry.nbytes + self.decoded.forget(entry)
        return True

    def _drop_home(self, owner: int) -> bool:
        """Forget a home timeline's entry; whether there was one."""
        found = self._homes.pop(owner, None)
        if found is None:
            return False
        self._home_bytes -= home_bytes(found[0])
        self.bytes -= home_bytes(found[0])
        return True

    def _evict(self) -> None:
        evict(self)

    def holds(self, key: tuple[Any, ...]) -> bool:
        """Whether tier 1 holds the hot key `key` now: `(LIST, id1, atype)`,
        `(OBJECT, id)` or `(HOME, owner)` (the console's hot keys page)."""
        kind, rest = key[0], key[1:]
        if kind == LIST:
            return rest in self._lists
        if kind == OBJECT:
            return rest[0] in self._objects
        return kind == HOME and rest[0] in self._homes

    def stats(self) -> CacheStats:
        with self._lock:
            return stats_of(self)
