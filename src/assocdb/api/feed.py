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

import difflib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter

from ..core import feed as _feed
from ..core import feedalign
from ..core import json as _json
from ..core.compress import unpack
from ..core.errors import AssocdbError, FeedExpired, InvalidRequest, Unavailable, UnknownType
from ..core.feed import EDGE, FEED_LIMIT, NODE, OBJECT, FeedRow
from ..core.merge import State
from ..core.records import STATE_NAMES, Change, ChangeKind, ChangePage
from ..core.schema import Schema
from ..storage.backend import ChangeFeed
from .engine import Engine
from .feed_groups import Groups

log = logging.getLogger("assocdb.feed")
_KEY = "feed"
_POSITION, _TIME = itemgetter(0), itemgetter(7)  # of a stored record (`FeedRow`)
_KINDS: dict[int, ChangeKind] = {EDGE: "edge", OBJECT: "object", NODE: "node"}
_STATES, _REMOVED = STATE_NAMES, State.REMOVED
MAX_LIMIT = 10_000
MAX_WAIT = 60.0  # seconds a long poll may wait
FOLLOW_WAIT = 1.0  # a follower's long poll: it sees a close within this
RETENTION_SECONDS = 7 * 24 * 3600  # the default window: a week
RETENTION_ROWS = 10_000_000  # per shard
TRIM_SECONDS = 600.0  # how often the background pass trims to the retention window
POLL_SECONDS = 0.05  # how often a follower looks for other processes' changes
WATCH_SECONDS = 0.005  # how often it looks at a watched sequence (`watch`), if any


class Feed:
    """The change feed; see the module doc."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._closed = threading.Event()
        self._trimmer: threading.Thread | None = None
        self._names: tuple[dict[int, str], dict[int, str]] = ({}, {})  # assoc, object types
        self._groups = Groups(engine.backend)
        self._watched: Callable[[], int] | None = None
        if engine.backend.get_meta(_KEY) == b"on":
            self._store().enable()
            self._start_trimming()

    @property
    def enabled(self) -> bool:
        store = self._engine.backend.change_feed()
        return store is not None and store.on

    def enable(self) -> None:
        """Record every change from now on (and on every later open of the graph)."""
        store = self._store()
        store.enable()
        if store.missing:  # (a member that never recorded would lose changes: see replfeed.py)
            raise Unavailable(
                f"the change feed needs every member up to be turned on; down: {store.missing}"
            )
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
                except AssocdbError as exc:  # a shard down: the next pass trims it
                    log.warning("the change feed's trim failed: %s", exc)  # (no traceback)

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
        member: str | None = None,
    ) -> ChangePage:
        """A page after `cursor`; with `wait`, a long poll: up to `wait` seconds for one;
        with `member`, only the shards dealt to that member of `group` (feed_groups.py)."""
        if not 0 <= wait <= MAX_WAIT:
            raise InvalidRequest(f"wait must be 0..{MAX_WAIT} seconds, got {wait!r}")
        if not 0 < limit <= MAX_LIMIT:
            raise InvalidRequest(f"limit must be 1..{MAX_LIMIT}, got {limit!r}")
        self._check_filters(types, kinds)
        deadline = time.monotonic() + wait
        store = self._on()
        after, owned = self._start(store, cursor, group, member)
        while True:
            # Both marks before the read: a commit or a watched move after it ends the wait.
            seen, mark = store.generation, self._mark()
            page, moved = self._page(store, after, limit, types, kinds, owned)
            left = deadline - time.monotonic()
            if page.items or left <= 0 or self._closed.is_set():
                return page
            if moved == after:  # (else it passed filtered records: read on)
                self._wait(store, seen, mark, min(POLL_SECONDS, left))
            after = moved

    def watch(self, sequence: Callable[[], int]) -> None:
        """Wake waiting readers when `sequence()` moves, as when this process writes: a
        cheap sign of other processes' writes (a server's ring of its workers'
        invalidations, `serve/peers.py`), looked at every `WATCH_SECONDS`."""
        self._watched = sequence

    def _mark(self) -> int | None:
        """Where the watched sequence is now (None: nothing watched)."""
        return None if self._watched is None else self._watched()

    def _wait(self, store: ChangeFeed, seen: int, mark: int | None, seconds: float) -> None:
        """Until this process commits an apply, the watched sequence moves from `mark`
        (taken before the read that found nothing), or `seconds`."""
        watched = self._watched
        if watched is None or mark is None:
            store.wait(seen, seconds)
            return
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0 and watched() == mark:
            if store.wait(seen, min(WATCH_SECONDS, left)) != seen:
                return

    def _start(
        self, store: ChangeFeed, cursor: str | None, group: str | None, member: str | None
    ) -> tuple[tuple[int, ...], frozenset[int] | None]:
        """Where a read starts, and the shards it reads (None: all)."""
        after = None if cursor is None else _feed.decode(cursor, store.shards)
        if group is None:
            if member is not None:
                raise InvalidRequest("a member is a member of a consumer group: give its group")
            return after or _feed.start(store.shards), None
        committed = self._groups.committed(group)
        held = (
            _feed.start(store.shards)
            if committed is None
            else _feed.decode(committed, store.shards)
        )
        if member is None:
            return after or held, None
        mine = after or held  # a shard new to the member: from the group's position
        return tuple(map(feedalign.later, held, mine)), self._groups.join(group, member)

    def _page(
        self,
        backend: ChangeFeed,
        after: tuple[int, ...],
        limit: int,
        types: Sequence[str] | None,
        kinds: Sequence[str] | None,
        owned: frozenset[int] | None,
    ) -> tuple[ChangePage, tuple[int, ...]]:
        read = _feed.share(limit, backend.shards)
        wanted = [s for s in range(backend.shards) if owned is None or s in owned]
        runs: list[list[FeedRow]] = [[] for _ in after]
        behind = []
        for shard in wanted:
            try:
                runs[shard] = backend.read(shard, after[shard], read)
            except Unavailable:
                behind.append(shard)  # (its position stays: read once it is back)
        if wanted and len(behind) == len(wanted):
            raise Unavailable(f"no shard's feed could be read: shards {behind} are down")
        readable = frozenset(wanted) - set(behind)
        if not backend.checks_held and any(
            shard in readable and (not run or run[0][0] != after[shard] + 1)
            for shard, run in enumerate(runs)
        ):
            self._check_held(backend, after, readable)
        wanted_kinds = None if kinds is None else set(kinds)
        wanted_types = None if types is None else set(types)

        def keep(row: FeedRow) -> bool:
            if wanted_kinds is not None and _KINDS[row[1]] not in wanted_kinds:
                return False
            return wanted_types is None or self._type_name(row) in wanted_types

        filtered = kinds is not None or types is not None
        merged = _feed.merge(runs, _POSITION, _TIME, limit, keep if filtered else None, after, read)
        built = [
            change
            for shard, rows in enumerate(merged.taken)
            for change in self._changes(shard, rows)
        ]
        items = list(map(built.__getitem__, merged.order))
        return ChangePage(items, _feed.encode(merged.moved), behind), merged.moved

    def follow(self, cursor: str | None, types: Sequence[str] | None) -> Iterator[Change]:
        """Every change after `cursor`, waiting for new ones until the graph closes."""
        while not self._closed.is_set():
            page = self.changes(cursor, types=types, wait=FOLLOW_WAIT)
            yield from page.items
            cursor = page.next_cursor

    def commit(self, group: str, cursor: str, member: str | None = None) -> None:
        """Store `cursor` as what consumer group `group` (its `member`) has processed."""
        self._on()
        self._groups.commit(group, cursor, member)

    def committed(self, group: str) -> str | None:
        """The cursor consumer group `group` last committed (None: the start)."""
        self._on()
        return self._groups.committed(group)

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
            raise InvalidRequest("the change feed needs SQL shards")
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

    def _check_filters(self, types: Sequence[str] | None, kinds: Sequence[str] | None) -> None:
        """Refuse a filter naming a kind or type that does not exist (it would match nothing)."""
        if isinstance(types, str) or isinstance(kinds, str):
            raise InvalidRequest("types and kinds are lists of names, not one string")
        unknown = [k for k in kinds or () if k not in _KINDS.values()]
        if unknown:
            raise InvalidRequest(
                f"unknown change kind {unknown[0]!r}; kinds: {', '.join(_KINDS.values())}"
            )
        for name in types or ():
            self._engine.named(functools.partial(_either, name=name))

    def _check_held(
        self, backend: ChangeFeed, after: tuple[int, ...], read: frozenset[int]
    ) -> None:
        oldest = [backend.bounds(s)[0] if s in read else 0 for s in range(backend.shards)]
        if any(
            pos + 1 < held and shard in read
            for shard, (pos, held) in enumerate(zip(after, oldest, strict=True))
        ):
            raise FeedExpired(
                f"the cursor is older than the feed's retention; oldest held: {oldest}",
                oldest=oldest,
            )

    def _type_name(self, row: FeedRow) -> str:
        names = self._names[row[1] == OBJECT]
        name = names.get(row[3])
        if name is None:  # (a type another process defined: the schema is read again)
            if row[1] == OBJECT:
                name = self._engine.named(lambda s: s.object_by_id(row[3]).name)
            else:
                name = self._engine.named(lambda s: s.assoc_by_id(row[3]).name)
            names[row[3]] = name  # (a type's name never changes)
        return name

    def _changes(self, shard: int, rows: list[FeedRow]) -> list[Change]:
        """The `Change`s of a shard's records. This is a consumer's hot loop: an edge leg
        without data, of a type named before (most records), is built in the comprehension
        from positional fields; any other record by `_change`."""
        edge_names, states = self._names[0], _STATES
        return [
            Change(shard, pos, "edge", edge_names[type_], id1, states[state], at, id2, t, 0, None)
            if kind == EDGE and data is None and type_ in edge_names
            else self._change(shard, row)
            for row in rows
            for pos, kind, id1, type_, id2, state, t, at, data in [row]
        ]

    def _change(self, shard: int, row: FeedRow) -> Change:
        pos, kind, id1, _type, id2, state, time_, updated_at, data = row
        name, state_name = self._type_name(row), _STATES[state]
        if kind == EDGE:
            shown = None if data is None or state == _REMOVED else _json.decode(data)
            return Change(
                shard, pos, "edge", name, id1, state_name, updated_at, id2, time_, 0, shown
            )
        if kind == OBJECT:
            fields = _json.decode(unpack(data or b"{}"))
            return Change(
                shard, pos, "object", name, id1, state_name, updated_at, 0, 0, id2, fields
            )
        return Change(shard, pos, "node", name, id1, state_name, updated_at)


def _either(schema: Schema, *, name: object) -> None:
    """Nothing if `name` is an object or association type, else UnknownType naming it."""
    known = [t.name for t in schema.assoc_types] + [t.name for t in schema.object_types]
    if name in known:
        return
    message = f"no object or association type {name!r} to filter the feed by"
    close = difflib.get_close_matches(str(name), known, n=1)
    if close:
        message += f"; did you mean {close[0]!r}?"
    raise UnknownType(message, type=str(name))
