"""Feed: the change feed of a graph (`Graph.changes`, `follow_changes`, `feed_commit`,
`enable_feed`; `trim` through `Graph.services.feed`).

The shards record their changes (`Backend.change_feed()`, `storage.sqlfeed` on SQL
shards) once the feed is on: `enable_feed` turns it on in the shards (every process that
has the graph open records from then on) and stores `feed` in the graph's settings, and
every later open of the graph turns recording on before its journal replays. A waiting
reader wakes when an apply of this process commits, and looks every `POLL_SECONDS` for
other processes' changes. Pages are merged here from
each shard's read (`core.feed`); consumer groups keep their committed cursor in the
graph's settings (`feed.group.NAME`), so a consumer that dies before committing reads
the same changes again (at-least-once). Retention (`trim`, every `TRIM_SECONDS` in a
background thread) deletes what is older than the window and, per shard, beyond the
size cap; a cursor before the oldest position still held raises FeedExpired.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence

from ..core import feed as _feed
from ..core import json as _json
from ..core.compress import unpack
from ..core.errors import AssocdbError, FeedExpired, InvalidRequest
from ..core.feed import EDGE, FEED_LIMIT, NODE, OBJECT, FeedRow
from ..core.merge import State
from ..core.records import STATE_NAMES, Change, ChangeKind, ChangePage
from ..storage.backend import ChangeFeed
from .engine import Engine

log = logging.getLogger("assocdb.feed")
_KEY = "feed"
_GROUP = "feed.group."
_KINDS: dict[int, ChangeKind] = {EDGE: "edge", OBJECT: "object", NODE: "node"}
MAX_LIMIT = 10_000
MAX_WAIT = 60.0  # seconds a long poll may wait
FOLLOW_WAIT = 1.0  # a follower's long poll: it sees a close within this
RETENTION_SECONDS = 7 * 24 * 3600  # the default window: a week
RETENTION_ROWS = 10_000_000  # per shard
TRIM_SECONDS = 600.0  # how often the background pass trims to the retention window
POLL_SECONDS = 0.05  # how often a follower looks for other processes' changes


class Feed:
    """The change feed; see the module doc."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._closed = threading.Event()
        self._trimmer: threading.Thread | None = None
        self._names: dict[tuple[bool, int], str] = {}
        if engine.backend.get_meta(_KEY) == b"on":
            self._store().enable()
            self._start_trimming()

    @property
    def enabled(self) -> bool:
        store = self._engine.backend.change_feed()
        return store is not None and store.on

    def enable(self) -> None:
        """Record every change from now on (and on every later open of the graph)."""
        self._store().enable()
        backend = self._engine.backend
        backend.swap_meta(_KEY, backend.get_meta(_KEY), b"on")
        self._start_trimming()

    def close(self) -> None:
        self._closed.set()
        store = self._engine.backend.change_feed()
        if store is not None:
            store.wake()
        if self._trimmer is not None:
            self._trimmer.join()

    def _start_trimming(self) -> None:
        """Trim to the default window every `TRIM_SECONDS`, in a thread, until closed
        (each process that has the feed on does: a trim is idempotent)."""
        if self._trimmer is not None or self._store().read_only:
            return

        def loop() -> None:
            while not self._closed.wait(TRIM_SECONDS):
                try:
                    self.trim()
                except AssocdbError:  # a shard down: the next pass trims it
                    log.warning("the change feed's trim failed", exc_info=True)

        self._trimmer = threading.Thread(target=loop, name="assocdb-feed-trim", daemon=True)
        self._trimmer.start()

    def changes(
        self,
        cursor: str | None = None,
        limit: int = FEED_LIMIT,
        types: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
        group: str | None = None,
        wait: float = 0.0,
    ) -> ChangePage:
        """A page after `cursor`; with `wait`, a long poll: up to `wait` seconds for one."""
        if not 0 <= wait <= MAX_WAIT:
            raise InvalidRequest(f"wait must be 0..{MAX_WAIT} seconds, got {wait!r}")
        deadline = time.monotonic() + wait
        store = self._on()
        while True:
            seen = store.generation  # before the read: a commit after it ends the wait
            page = self._page(cursor, limit, types, kinds, group)
            left = deadline - time.monotonic()
            if page.items or left <= 0 or self._closed.is_set():
                return page
            if page.next_cursor == cursor:  # (else it passed filtered records: read on)
                store.wait(seen, min(POLL_SECONDS, left))
            cursor, group = page.next_cursor, None

    def _page(
        self,
        cursor: str | None,
        limit: int,
        types: Sequence[str] | None,
        kinds: Sequence[str] | None,
        group: str | None,
    ) -> ChangePage:
        backend = self._on()
        if not 0 < limit <= MAX_LIMIT:
            raise InvalidRequest(f"limit must be 1..{MAX_LIMIT}, got {limit!r}")
        if cursor is None and group is not None:
            cursor = self.committed(group)
        after = (
            _feed.start(backend.shards) if cursor is None else _feed.decode(cursor, backend.shards)
        )
        read = _feed.share(limit, backend.shards)
        runs = [
            [(shard, row) for row in backend.read(shard, pos, read)]
            for shard, pos in enumerate(after)
        ]
        if any(not run or run[0][1][0] != pos + 1 for run, pos in zip(runs, after, strict=True)):
            self._check_held(backend, after)
        wanted_kinds = None if kinds is None else set(kinds)
        wanted_types = None if types is None else set(types)

        def keep(item: tuple[int, FeedRow]) -> bool:
            row = item[1]
            if wanted_kinds is not None and _KINDS[row[1]] not in wanted_kinds:
                return False
            return wanted_types is None or self._type_name(row) in wanted_types

        rows, moved = _feed.merge(
            runs, lambda t: t[1][0], lambda t: t[1][7], limit, keep, after, read
        )
        items = [self._change(shard, row) for shard, row in rows]
        return ChangePage(items, _feed.encode(moved))

    def follow(self, cursor: str | None, types: Sequence[str] | None) -> Iterator[Change]:
        """Every change after `cursor`, waiting for new ones until the graph closes."""
        while not self._closed.is_set():
            page = self.changes(cursor, types=types, wait=FOLLOW_WAIT)
            yield from page.items
            cursor = page.next_cursor

    def commit(self, group: str, cursor: str) -> None:
        """Store `cursor` as what consumer group `group` has processed."""
        _feed.decode(cursor, self._on().shards)  # refuse a foreign cursor before storing it
        backend = self._engine.backend
        key = _GROUP + _group(group)
        while not backend.swap_meta(key, backend.get_meta(key), cursor.encode()):
            pass  # another member committed meanwhile: the last one wins

    def committed(self, group: str) -> str | None:
        """The cursor consumer group `group` last committed (None: the start)."""
        self._on()
        raw = self._engine.backend.get_meta(_GROUP + _group(group))
        return None if raw is None else raw.decode()

    def trim(self, seconds: float | None = None, rows: int | None = None) -> int:
        """Delete changes older than `seconds` and beyond `rows` per shard; how many."""
        backend = self._on()
        seconds = RETENTION_SECONDS if seconds is None else seconds
        rows = RETENTION_ROWS if rows is None else rows
        before = self._engine.clock.now() - int(seconds * 1_000_000)
        return sum(backend.trim(shard, before, rows) for shard in range(backend.shards))

    # -- helpers ---------------------------------------------------------------------

    def _store(self) -> ChangeFeed:
        store = self._engine.backend.change_feed()
        if store is None:
            raise InvalidRequest("the change feed needs SQL shards (not yet a shard map)")
        return store

    def _on(self) -> ChangeFeed:
        """The shards' feed, once it is on (another process may have turned it on)."""
        store = self._store()
        if not store.on:
            if self._engine.backend.get_meta(_KEY) != b"on":
                raise InvalidRequest(
                    "the change feed is off: turn it on with enable_feed() "
                    "(on the command line: assocdb changes DIR --enable)"
                )
            store.enable()
        return store

    def _check_held(self, backend: ChangeFeed, after: tuple[int, ...]) -> None:
        oldest = [backend.bounds(shard)[0] for shard in range(backend.shards)]
        if any(pos + 1 < held for pos, held in zip(after, oldest, strict=True)):
            raise FeedExpired(
                f"the cursor is older than the feed's retention; oldest held: {oldest}",
                oldest=oldest,
            )

    def _type_name(self, row: FeedRow) -> str:
        name = self._names.get((row[1] == OBJECT, row[3]))
        if name is None:
            schema = self._engine.schema
            if row[1] == OBJECT:
                name = schema.object_by_id(row[3]).name
            else:
                name = schema.assoc_by_id(row[3]).name
            self._names[(row[1] == OBJECT, row[3])] = name  # (a type's name never changes)
        return name

    def _change(self, shard: int, row: FeedRow) -> Change:
        pos, kind, id1, _atype, id2, state, time_, updated_at, data = row
        name = _KINDS[kind]
        common = (shard, pos, name, self._type_name(row), id1, STATE_NAMES[state], updated_at)
        if kind == OBJECT:
            return Change(*common, version=id2, data=_json.decode(unpack(data or b"{}")))
        if kind == NODE:
            return Change(*common)
        shown = None if data is None or state == State.REMOVED else _json.decode(data)
        return Change(*common, id2=id2, time=time_, data=shown)


def _group(name: str) -> str:
    if not isinstance(name, str) or not 0 < len(name) <= 100:
        raise InvalidRequest(f"a consumer group is a name of 1..100 characters, got {name!r:.60}")
    return name
