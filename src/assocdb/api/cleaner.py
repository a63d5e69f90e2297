"""The cleaner (FriendFeed's name): builds new indexes and repairs them, in the background.

* **Build** (`index_build`): walks every shard's objects of the index's type
  in id order, a page at a time, and writes the entry each implies, stamped
  with the object's `updated_at` (so it loses to any concurrent write's own
  entries, see `core.entities`). Progress, the last id done per shard, is saved
  after each page in the graph's meta, so a build stopped anywhere (a crash,
  `seconds=`, Ctrl-C) resumes where it was. `rate=` throttles it. When every
  shard is done the index becomes "ready" and one recent pass runs.
* **Recent pass** (`index_repair_recent`): re-judges the objects written
  since the last pass (an `(otype, updated_at)` scan, starting `LAG` before
  the last watermark to catch writes applied late) against their stored
  entries, writing missing entries and removing stale ones. It catches the
  writes of processes that had not yet seen a new index.
* **Purge**: removal entries older than an hour are deleted (once a minute
  by the cleaner thread), so an index does not grow with every move.
* **Check** (`index_check`): the same judgement over every object of the
  type, then every entry, so entries of objects that are gone are found
  too. With `repair=True` it fixes what it finds.

`start_cleaner()` runs builds and recent passes in a daemon thread, and once
every `EXPIRE_ROUNDS` rounds the expiry pass of types with a ttl (`api.expiry`)
and the purge of cascading deletions past their restore window
(`Deletions.purge`, which logs each one at INFO and counts it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

import msgspec

from ..core.entities import Routed, expected, judge
from ..core.errors import AssocdbError, InvalidRequest
from ..core.ids import shard_of
from ..core.merge import ObjRow, State
from ..core.records import IndexCheck, IndexStatus
from ..core.scans import IndexEntry
from ..core.schema import IndexDef
from .engine import Engine
from .expiry import EXPIRE_ROUNDS, EdgeExpiry
from .indexes import BUILD_KEY, DEFINED_KEY, Indexes

log = logging.getLogger("assocdb.cleaner")

DONE = 2**63 - 1  # a shard's build position once it has been read to the end
PAGE = 1000
LAG = 5_000_000  # µs: each recent pass re-reads this much before its watermark
#: µs: removal entries older than this are deleted by the cleaner. A removal
#: only matters while an older add of the same entry may still arrive (a late
#: retry or replay); one that arrives later is re-checked away by queries and
#: repaired by `index_check`.
PURGE_AFTER = 3600 * 10**6
PURGE_EVERY = 60.0  # seconds between the cleaner thread's purges
RECENT_KEY = "index:{}:recent"


class BuildState(msgspec.Struct):
    """A build's saved progress: the last object id done per shard."""

    after: list[int]
    scanned: int = 0


class RecentState(msgspec.Struct):
    """The recent pass's watermark per shard: the newest `updated_at` judged."""

    since: list[int]


class Cleaner:
    """index_build, index_repair_recent, index_check, start_cleaner (`Graph` documents
    each); it finds indexes and their objects through `indexes`, and removes expired
    edges through `expiry`."""

    def __init__(
        self,
        engine: Engine,
        indexes: Indexes,
        expiry: EdgeExpiry,
        purge_deletions: Callable[[], object] | None = None,
    ) -> None:
        self._engine = engine
        self._indexes = indexes
        self._expiry = expiry
        self._purge_deletions = purge_deletions
        self._backend = engine.backend
        self._shards = engine.shards
        self._cleaner: threading.Thread | None = None
        self._cleaner_stop: threading.Event | None = None

    def index_build(
        self,
        name: str,
        *,
        rate: float | None = None,
        seconds: float | None = None,
    ) -> IndexStatus:
        index = self._indexes.index(name)
        check_positive(rate, "rate", zero=False)
        check_positive(seconds, "seconds", zero=True)
        state = self._build_state(index)
        clock = _Throttle(rate, seconds)
        page = PAGE
        for shard in range(self._shards):
            while state.after[shard] != DONE:
                if clock.expired() or not self._still_defined(index):
                    return self._indexes.index_status(name)
                rows = self._backend.objects_page(shard, index.otype, state.after[shard], page)
                self._store(e for row in rows if (e := expected(index, row, self._shards)))
                state.after[shard] = rows[-1].id if len(rows) == page else DONE
                state.scanned += len(rows)
                self._put_meta(BUILD_KEY.format(index.id), msgspec.json.encode(state))
                clock.wait(len(rows))
        if index.state != "ready":
            self._engine.change_schema(lambda s: s.with_index_state(name, "ready"))
            # Writes made meanwhile by processes that had not seen the index yet.
            self.index_repair_recent(name)
        return self._indexes.index_status(name)

    def index_repair_recent(self, name: str) -> IndexCheck:
        index = self._indexes.index(name)
        key = RECENT_KEY.format(index.id)
        state = self._recent_state(index)
        totals = _Totals()
        until = self._engine.clock.now()  # under steady writes, a pass still ends
        for shard in range(self._shards):
            at = (max(0, state.since[shard] - LAG), 0)
            while rows := self._backend.objects_since(shard, index.otype, at, PAGE):
                self._repair_objects(index, rows, totals)
                at = (rows[-1].updated_at, rows[-1].id)
                state.since[shard] = max(state.since[shard], rows[-1].updated_at)
                if at[0] > until:
                    break
        self._put_meta(key, msgspec.json.encode(state))
        return totals.result(index.name)

    def index_check(self, name: str, *, repair: bool = False) -> IndexCheck:
        index = self._indexes.index(name)
        totals = _Totals(repair)
        for shard in range(self._shards):
            after = 0
            while rows := self._backend.objects_page(shard, index.otype, after, PAGE):
                self._repair_objects(index, rows, totals)
                after = rows[-1].id
        for shard in range(self._shards):
            self._dangling(index, shard, totals)
        return totals.result(index.name)

    def start_cleaner(self, interval: float = 1.0, rate: float | None = None) -> None:
        if self._cleaner is not None:
            return
        stop = self._cleaner_stop = threading.Event()
        self._cleaner = threading.Thread(
            target=self._clean_loop,
            args=(stop, interval, rate),
            name="assocdb-cleaner",
            daemon=True,
        )
        self._cleaner.start()

    def close(self) -> None:
        """Stop the cleaner thread, if started (before the engine closes)."""
        if self._cleaner is not None and self._cleaner_stop is not None:
            self._cleaner_stop.set()
            self._cleaner.join(timeout=5.0)
            self._cleaner = None

    # -- internals -------------------------------------------------------------------

    def _clean_loop(self, stop: threading.Event, interval: float, rate: float | None) -> None:
        purged_at = time.monotonic()
        rounds = 0
        while not stop.wait(interval):
            try:
                rounds += 1
                if rounds % EXPIRE_ROUNDS == 1:  # the first round, then every EXPIRE_ROUNDS
                    self._expire_and_purge(stop)
                purge = time.monotonic() - purged_at >= PURGE_EVERY
                for index in self._engine.read_schema().indexes:
                    if stop.is_set():
                        return
                    if index.state == "building":
                        self.index_build(index.name, rate=rate, seconds=interval)
                    else:
                        self.index_repair_recent(index.name)
                        if purge:
                            self.purge(index)
                if purge:
                    purged_at = time.monotonic()
            except AssocdbError as exc:  # a shard down, an index dropped: next round
                log.warning("the cleaner met an error (%s); trying again", exc)
            except Exception as exc:  # a bug must not stop the cleaner; no traceback in logs
                log.error("the cleaner failed: %s: %s; trying again", type(exc).__name__, exc)

    def _expire_and_purge(self, stop: threading.Event) -> None:
        """The expiry pass, then the purge of deletions past their restore window: the
        purge runs even when the expiry pass failed (a slow shard must not hold back
        the other's work for EXPIRE_ROUNDS more rounds)."""
        try:
            self._expiry.expire(stop=stop)
        finally:
            if self._purge_deletions is not None and not stop.is_set():
                self._purge_deletions()

    def purge(self, index: IndexDef, older_than: int = PURGE_AFTER) -> int:
        """Delete the index's removal entries older than `older_than` µs; how many."""
        before = self._engine.clock.now() - older_than
        return sum(self._backend.index_purge(s, index.id, before) for s in range(self._shards))

    def _repair_objects(self, index: IndexDef, rows: list[ObjRow], totals: _Totals) -> None:
        """Judge these objects' entries; count the fixes (and write them, if repairing)."""
        ids = [row.id for row in rows]
        if index.shard_on is None:
            shards = sorted({shard_of(id, self._shards) for id in ids})
        else:
            shards = list(range(self._shards))
        stored: dict[int, list[Routed]] = {}
        for shard in shards:
            for entry in self._backend.index_entries(shard, index.id, ids):
                stored.setdefault(entry[2], []).append((shard, *entry))
        fixes: list[Routed] = []
        for row in rows:
            found = judge(index, row, row.id, stored.get(row.id, []), self._shards)
            totals.count(found, gone=row.state == State.REMOVED)
            fixes += found
        totals.objects += len(rows)
        if totals.repair:
            self._store(fixes)

    def _dangling(self, index: IndexDef, shard: int, totals: _Totals) -> None:
        """Fixes for live entries on `shard` whose object is absent or of another type."""
        fixes: list[Routed] = []
        after = None
        while entries := self._backend.index_export(shard, index.id, after, PAGE):
            after = (entries[-1][1], entries[-1][2])
            live = [e for e in entries if e[5] == State.NORMAL]
            found = self._indexes.objects_by_id([e[2] for e in live])
            for entry in live:
                row = found.get(entry[2])
                if row is None or row.otype != index.otype:
                    fixes += judge(index, None, entry[2], [(shard, *entry)], self._shards)
        totals.count(fixes, gone=True)
        if totals.repair:
            self._store(fixes)

    def _store(self, entries: Iterable[Routed]) -> None:
        by_shard: dict[int, list[IndexEntry]] = {}
        for shard, index, key, id, updated_at, version, state in entries:
            by_shard.setdefault(shard, []).append((index, key, id, updated_at, version, state))
        for shard, some in sorted(by_shard.items()):
            self._backend.index_apply(shard, some)
        # Durable before the progress recorded after them: no journal holds entries.
        self._backend.make_durable(sorted(by_shard))

    def _still_defined(self, index: IndexDef) -> bool:
        self._engine.refresh_indexes()
        return any(i.id == index.id for i in self._engine.schema.indexes)

    def _build_state(self, index: IndexDef) -> BuildState:
        raw = self._backend.get_meta(BUILD_KEY.format(index.id))
        if raw is None:
            return BuildState([0] * self._shards)
        return msgspec.json.decode(raw, type=BuildState)

    def _recent_state(self, index: IndexDef) -> RecentState:
        raw = self._backend.get_meta(RECENT_KEY.format(index.id))
        if raw is not None:
            return msgspec.json.decode(raw, type=RecentState)
        return RecentState([self._index_defined_at(index)] * self._shards)

    def _index_defined_at(self, index: IndexDef) -> int:
        """When the index was defined (its build record's first write), as the clock counts."""
        raw = self._backend.get_meta(DEFINED_KEY.format(index.id))
        return int(raw) if raw is not None else 0

    def _put_meta(self, key: str, value: bytes) -> None:
        while True:
            current = self._backend.get_meta(key)
            if self._backend.swap_meta(key, current, value):
                return


def check_positive(value: object, what: str, zero: bool) -> None:
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value >= 0 if zero else value > 0)
    ):
        raise InvalidRequest(
            f"{what} must be a {'non-negative' if zero else 'positive'} "
            f"number of {'seconds' if what == 'seconds' else 'objects per second'}, "
            f"got {value!r}"
        )


class _Throttle:
    """Paces a build to `rate` items per second and stops it after `seconds`."""

    def __init__(self, rate: float | None, seconds: float | None) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.deadline = None if seconds is None else self.start + seconds
        self.done = 0

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def wait(self, n: int) -> None:
        self.done += n
        if self.rate:
            ahead = self.start + self.done / self.rate - time.monotonic()
            if self.deadline is not None:
                ahead = min(ahead, self.deadline - time.monotonic())
            if ahead > 0:
                time.sleep(ahead)


class _Totals:
    def __init__(self, repair: bool = True) -> None:
        self.repair = repair
        self.objects = self.missing = self.stale = self.dangling = 0

    def count(self, fixes: list[Routed], gone: bool) -> None:
        for fix in fixes:
            if fix[6] == State.NORMAL:
                self.missing += 1
            elif gone:
                self.dangling += 1
            else:
                self.stale += 1

    def result(self, name: str) -> IndexCheck:
        return IndexCheck(name, self.objects, self.missing, self.stale, self.dangling, self.repair)
