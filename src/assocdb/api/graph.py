"""Graph: the whole assocdb API, composed of one engine and a service per concern.

`Engine` (`engine.py`) owns the backend, cache, clock, journal, applier,
schema and write path. Each concern is a service built on it, in its module:

* `objects.py`       Objects: obj_add, obj_get, obj_update, obj_delete
* `assoc_writes.py`  AssocWrites: assoc_add, assoc_delete, assoc_archive, assoc_negate,
                     assoc_change_type, bulk_load
* `assoc_reads.py`   AssocReads: assoc_get, assoc_count, assoc_contains, assoc_edge,
                     assoc_range, assoc_time_range, assoc_page, assoc_pages, assoc_iter
* `nodes.py`         Nodes: node_archive, node_unarchive, node_negate, node_remove, node_state
* `queries.py`       Queries: select, and runs the queries (set arithmetic: `core/query.py`)
* `timelines.py`     Timelines (over AssocReads): define_timeline, timeline_config, post,
                     post_delete, home_timeline, user_timeline
* `indexes.py`       Indexes: define_index, drop_index, indexes, index_status, index_query,
                     and the index entries of every object write
* `cleaner.py`       Cleaner (over Indexes, EdgeExpiry): index_build, index_repair_recent,
                     index_check, start_cleaner (`expiry.py`: expired edges, `services.expiry`)
* `queue_admin.py`   QueueAdmin: queue_stats, queue_jobs, queue_job, queue_retry,
                     queue_reinject, drain
* `checks.py`        Checks: check_counts, check_inverses
* `feed.py`          Feed: enable_feed, changes, follow_changes, feed_commit (and `trim`)
* `deletions.py`     Deletions (`g.deletions`): obj_delete(cascade=True), obj_restore,
                     the cascade's job, purge, and `dangling.py`'s check
* `admin.py`         Admin: define_assoc, define_object, load_schema, trace, cache_stats,
                     hot_keys

No service inherits another; each gets the engine, and the services it reads through,
in its constructor. `Graph.__init__` builds them, registers the index entries on the
engine and starts it last (a journal replay sees every service wired). Graph's methods
only forward: its flat API (`g.assoc_range`) and docstrings live here, the work there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from ..cache.entries import Tier2
from ..core.clock import HybridClock
from ..core.deletion import Deletion
from ..core.feed import FEED_LIMIT
from ..core.pagers import items, pages
from ..core.query import Query
from ..core.records import (
    Assoc,
    CacheConfig,
    CacheStats,
    Change,
    ChangeKind,
    ChangePage,
    Count,
    CountMismatch,
    Direction,
    HangingEdge,
    HotKey,
    IndexCheck,
    IndexPage,
    IndexStatus,
    JobInfo,
    JobState,
    Mode,
    Obj,
    Page,
    QueueStats,
    StateName,
    TimelineConfig,
    TimelineItem,
    VerifyReport,
    WriteResult,
)
from ..core.schema import DEFAULT_LIMIT, AssocType, ObjectType, OnDelete, Schema
from ..storage.backend import Backend
from ..writes.applier import RetryPolicy
from ..writes.journal import Journal
from .admin import Admin
from .assoc_reads import AssocReads
from .assoc_writes import AssocWrites
from .batch import WriteBatch
from .checks import Checks
from .cleaner import Cleaner
from .deletions import Deletions
from .engine import Engine
from .expiry import EdgeExpiry
from .feed import Feed
from .indexes import Indexes
from .nodes import Nodes
from .objects import Objects
from .queries import Queries
from .queue_admin import QueueAdmin
from .services import Services
from .timelines import Timelines


class Graph:
    """A graph of objects and associations. Thread-safe; open one per process.

    >>> g = assocdb.open("data/")
    >>> g.define_assoc("follows", inverse="followed_by")
    >>> g.assoc_add(1, "follows", 2)
    WriteResult(status='applied', updated_at=...)

    `g.engine` (an `Engine`) is the seam for tools built on the library: the
    CLI, the server and its metrics reach the backend as `g.engine.backend`
    and a shard map's replica health as `g.engine.replica_health()`;
    `g.services` holds the services they call beyond these methods.
    """

    def __init__(
        self,
        backend: Backend,
        journal: Journal,
        *,
        sync: bool = True,
        retry: RetryPolicy | None = None,
        clock: HybridClock | None = None,
        cache: CacheConfig | None = None,
        tier2: Tier2 | None = None,
        cache_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        engine = Engine(
            backend,
            journal,
            sync=sync,
            retry=retry,
            clock=clock,
            cache=cache,
            tier2=tier2,
            cache_clock=cache_clock,
        )
        #: The backend, cache, journal, applier, clock and schema every service shares.
        self.engine = engine
        self._admin = Admin(engine)
        self._objects = Objects(engine)
        self._writes = AssocWrites(engine)
        self._reads = AssocReads(engine)
        self._timelines = Timelines(engine, self._reads)
        self._nodes = Nodes(engine)
        self._queries = Queries(engine)
        self._indexes = Indexes(engine)
        expiry = EdgeExpiry(engine, self._writes)
        self._queue = QueueAdmin(engine)
        self._checks = Checks(engine)
        #: The services tools built on the library call beyond Graph's methods: the
        #: server's encoded list reads and partial bulk loads, FlockDB's writes and select.
        self._feed = Feed(engine)  # before start: a replay records its changes too
        self.services = Services(self._reads, self._writes, self._queries, self._feed, expiry)
        engine.set_index_entries(self._indexes.entries)
        # Last: the replay of jobs a crash left, and the applier's threads, see
        # every service wired.
        engine.start()
        #: Cascading deletions (`obj_delete(cascade=True)`): list, get, wait, purge,
        #: window, and `dangling` checks (api/deletions.py; docs/api.md, "Deletion").
        self.deletions = Deletions(engine, self._timelines)
        self._cleaner = Cleaner(engine, self._indexes, expiry, self.deletions.purge)

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Finish background applies (briefly), then close the journal and connections.

        Jobs not yet applied stay in the journal and are applied on the next open.
        """
        self._cleaner.close()  # first: it writes through the engine
        self.deletions.close()
        self._feed.close()
        self.engine.close()
        self._timelines.close()

    def __enter__(self) -> Graph:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the change feed (api/feed.py; docs/api.md, "Change feed") ---------------------

    def enable_feed(self) -> None:
        """Record every applied change in its shard's feed, from now on (kept in the graph)."""
        self._feed.enable()

    def changes(
        self,
        cursor: str | None = None,
        *,
        limit: int = FEED_LIMIT,
        types: list[str] | None = None,
        kinds: list[ChangeKind] | None = None,
        group: str | None = None,
        wait: float = 0.0,
        member: str | None = None,
    ) -> ChangePage:
        """The changes after `cursor` (None: `group`'s, or the start); FeedExpired if trimmed."""
        return self._feed.changes(cursor, limit, types, kinds, group, wait, member)

    def follow_changes(
        self, cursor: str | None = None, *, types: list[str] | None = None
    ) -> Iterator[Change]:
        """Every change (of `types`) after `cursor`, waiting for new ones until closed."""
        return self._feed.follow(cursor, types)

    def feed_commit(self, group: str, cursor: str, member: str | None = None) -> None:
        """Store `cursor` as consumer group `group`'s position (`changes(group=…)` reads on)."""
        self._feed.commit(group, cursor, member)

    # -- objects ----------------------------------------------------------------------

    def obj_add(
        self,
        otype: str,
        data: dict[str, Any] | None = None,
        *,
        id: int | None = None,
        near: int | None = None,
        updated_at: int | None = None,
    ) -> int:
        """Create an object and return its id.

        Without `id`, an id is allocated on a random shard, or on the shard of
        `near` to colocate related objects. With `id` (an external id), adding
        the same object again is a no-op; a different live object there raises
        Conflict.

        >>> uid = g.obj_add("user", {"name": "ada"})
        """
        return self._objects.obj_add(otype, data, id=id, near=near, updated_at=updated_at)

    def obj_get(self, id: int) -> Obj | None:
        """The object with this id, or None if there is none (or it was deleted)."""
        return self._objects.obj_get(id)

    def obj_update(
        self, id: int, data: dict[str, Any], *, updated_at: int | None = None
    ) -> WriteResult:
        """Set the given properties of an object (a shallow merge); NotFound if none.

        >>> g.obj_update(uid, {"bio": "Analyst"})
        """
        return self._objects.obj_update(id, data, updated_at=updated_at)

    def obj_delete(
        self, id: int, *, updated_at: int | None = None, cascade: bool = False
    ) -> WriteResult:
        """Delete an object, leaving a tombstone; NotFound if it never existed.

        With `cascade`, its edges in both directions go too, and what its
        types' `on_delete` rules reach (deep, refcount), in a durable background
        job (`queued`; `g.deletions.wait()` waits); the object reads as gone at
        once, and `obj_restore` undoes it all within the restore window.
        Deleting it again with `cascade` is the same deletion, taking in what touched it since.
        """
        if cascade:
            return self.deletions.delete(id, updated_at)
        return self._objects.obj_delete(id, updated_at=updated_at)

    def obj_restore(self, id: int) -> Deletion:
        """Put back exactly what the object's latest cascading deletion removed, and
        return that deletion; InvalidRequest while it runs, after its window, or twice."""
        return self.deletions.restore(id)

    # -- association writes -----------------------------------------------------------

    def assoc_add(
        self,
        id1: int,
        atype: str,
        id2: int,
        time: int | None = None,
        data: Any = None,
        updated_at: int | None = None,
    ) -> WriteResult:
        """Add the association `id1 -atype-> id2` (and its inverse, if the type has one).

        `time` orders the list (default: now, in ms). Re-adding an edge that
        exists (and is not removed) keeps its time and data unless new ones are
        given, so a re-follow does not jump to the top of the list.

        >>> g.assoc_add(1, "follows", 2)
        """
        return self._writes.assoc_add(id1, atype, id2, time, data, updated_at)

    def assoc_delete(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> WriteResult:
        """Delete the association (and its inverse), leaving tombstones.

        Deleting an edge that does not exist still stores a tombstone, so that
        an older add arriving later cannot bring it back.
        """
        return self._writes.assoc_delete(id1, atype, id2, updated_at)

    def assoc_archive(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> WriteResult:
        """Archive the association (and its inverse): hidden from lists, kept with its
        time and data; `assoc_add` restores it.

        >>> g.assoc_archive(1, "follows", 2)
        """
        return self._writes.assoc_archive(id1, atype, id2, updated_at)

    def assoc_negate(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> WriteResult:
        """Mark the association (and its inverse) negative: hidden from lists, but
        `assoc_contains` still finds it (FlockDB's negative edge); `assoc_add` restores it."""
        return self._writes.assoc_negate(id1, atype, id2, updated_at)

    def assoc_change_type(
        self, id1: int, atype: str, id2: int, new_atype: str, updated_at: int | None = None
    ) -> WriteResult:
        """Move an association to another type, keeping its time and data; NotFound if none.

        >>> g.assoc_change_type(1, "follows", 2, "blocks")
        """
        return self._writes.assoc_change_type(id1, atype, id2, new_atype, updated_at)

    def batch(self) -> WriteBatch:
        """Calls collected in a `with` block and run when it ends; the writes together:
        one journal fsync and one transaction per touched shard for all of them.

        Each write method and the Client's batch reads are here; each returns a
        Deferred whose `result()` is the call's answer once the block has ended
        (a refused write raises from its own `result()`; the others are written).
        A read sees the writes queued before it. If the block raises, nothing runs.

        >>> with g.batch() as b:
        ...     for follower in followers:
        ...         b.assoc_add(follower, "follows", 42)
        ...     n = b.assoc_count(42, "followed_by")
        >>> n.result()
        """
        return WriteBatch(self.engine, self._writes, self._objects, self._read_method)

    def _read_method(self, name: str) -> Callable[..., Any]:
        method: Callable[..., Any] = getattr(self, name)
        return method

    def bulk_load(
        self,
        edges: Iterable[Sequence[Any]],
        *,
        workers: int | None = None,
        progress: Callable[[int], None] | None = None,
        name: str | None = None,
    ) -> int:
        """Load many edges fast, straight into the shards; return how many were read.

        Each edge is `(id1, atype, id2)`, optionally followed by `time` and
        `data`. Inverse rows and counts are written as for `assoc_add`, under
        the same merge rule, but not through the journal: a load is its own
        record. A bad edge stops the load after every edge before it is
        stored (InvalidRequest; `details["stored"]`). A load of more than
        10,000 edges starts `workers` processes. A load with a `name` is one
        resumable job: loading the same edges under that name again skips the
        ones stored (docs/api.md, "Associations", says the whole contract).

        >>> g.bulk_load([(1, "friend", 2), (2, "friend", 3, 1700000000000)])
        """
        return self._writes.bulk_load(edges, workers=workers, progress=progress, name=name)

    # -- association reads ------------------------------------------------------------

    def assoc_get(
        self,
        id1: int,
        atype: str,
        id2s: Iterable[int],
        high: int | None = None,
        low: int | None = None,
    ) -> list[Assoc]:
        """The associations from `id1` to any of `id2s`, with `low <= time <= high`.

        Returns only visible (normal) edges, newest first.

        >>> [a.id2 for a in g.assoc_get(1, "follows", [2, 3, 4])]
        """
        return self._reads.assoc_get(id1, atype, id2s, high, low)

    def assoc_count(self, id1: int, atype: str, state: StateName = "normal") -> int:
        """How many associations `id1` has of this type in `state` (default: visible ones).

        Read from the counts kept with the edges: never a COUNT(*).
        """
        return self._reads.assoc_count(id1, atype, state)

    def assoc_contains(self, id1: int, atype: str, id2: int) -> bool:
        """True if the association exists and is normal or negative (FlockDB's `contains`)."""
        return self._reads.assoc_contains(id1, atype, id2)

    def assoc_edge(self, id1: int, atype: str, id2: int) -> Assoc | None:
        """The stored association in any state (removed included); None if none or expired."""
        return self._reads.assoc_edge(id1, atype, id2)

    def assoc_range(self, id1: int, atype: str, pos: int = 0, limit: int = 50) -> list[Assoc]:
        """Up to `limit` associations, newest first, skipping the first `pos`.

        The cost grows with `pos`; page deep lists with `assoc_page` instead.
        """
        return self._reads.assoc_range(id1, atype, pos, limit)

    def assoc_time_range(
        self, id1: int, atype: str, high: int, low: int, limit: int = 50
    ) -> list[Assoc]:
        """Up to `limit` associations with `low <= time <= high`, newest first."""
        return self._reads.assoc_time_range(id1, atype, high, low, limit)

    def assoc_page(
        self, id1: int, atype: str, cursor: str | None = None, limit: int = 50
    ) -> Page[Assoc]:
        """One page of the list, newest first; pass `next_cursor` back for the next.

        Every page costs what the first costs, and pages stay consistent while
        items are added (keyset paging on `(time, id2)`).

        >>> page = g.assoc_page(1, "follows", limit=100)
        >>> older = g.assoc_page(1, "follows", page.next_cursor, limit=100)
        """
        return self._reads.assoc_page(id1, atype, cursor, limit)

    def assoc_pages(self, id1: int, atype: str, limit: int = 500) -> Iterator[Page[Assoc]]:
        """Every page of the list, newest first, following `next_cursor`.
        >>> for page in g.assoc_pages(celebrity, "followed_by", limit=1000):
        ...     notify(page.items)
        """
        return pages(lambda cursor: self.assoc_page(id1, atype, cursor, limit))

    def assoc_iter(self, id1: int, atype: str, limit: int = 500) -> Iterator[Assoc]:
        """Every association of the list, newest first, read `limit` at a time.
        >>> for follow in g.assoc_iter(celebrity, "followed_by"):
        ...     notify(follow.id2)
        """
        return items(lambda cursor: self.assoc_page(id1, atype, cursor, limit))

    # -- node states ------------------------------------------------------------------

    def node_archive(
        self, node: int, atype: str, *, direction: Direction = "out", updated_at: int | None = None
    ) -> WriteResult:
        """Archive every edge of `node` of this type, in one direction or both.

        The node state applies at once (new edges are written archived); the
        existing edges are re-stamped in the background (`queued`; `g.drain()`
        waits). Of two node operations, the newer `updated_at` wins on every
        edge, whatever order they arrive in.

        >>> g.node_archive(spammer, "follows", direction="both")
        """
        return self._nodes.node_archive(node, atype, direction=direction, updated_at=updated_at)

    def node_unarchive(
        self, node: int, atype: str, *, direction: Direction = "out", updated_at: int | None = None
    ) -> WriteResult:
        """Make every live edge of the node normal again, with its time (FlockDB's unarchive)."""
        return self._nodes.node_unarchive(node, atype, direction=direction, updated_at=updated_at)

    def node_negate(
        self, node: int, atype: str, *, direction: Direction = "out", updated_at: int | None = None
    ) -> WriteResult:
        """Make every live edge of the node negative (hidden, but `assoc_contains` sees it)."""
        return self._nodes.node_negate(node, atype, direction=direction, updated_at=updated_at)

    def node_remove(
        self, node: int, atype: str, *, direction: Direction = "out", updated_at: int | None = None
    ) -> WriteResult:
        """Remove every edge of the node; new edges are written removed until unarchived."""
        return self._nodes.node_remove(node, atype, direction=direction, updated_at=updated_at)

    def node_state(
        self, node: int, atype: str, *, direction: Literal["out", "in"] = "out"
    ) -> StateName:
        """The state of the node's edges of this type in one direction ("normal" if never set).

        One direction at a time: "both" is InvalidRequest (ask for "out" and "in").
        """
        return self._nodes.node_state(node, atype, direction=direction)

    # -- set arithmetic ---------------------------------------------------------------

    def select(
        self,
        node: int | Iterable[int] | Query,
        atype: str,
        *,
        incoming: bool = False,
        states: Sequence[StateName] = ("normal",),
        id2s: Iterable[int] | None = None,
    ) -> Query:
        """The ids `node` points to by `atype` (or, with `incoming`, that point to it).

        `node` may be many ids, or a query whose ids they are: their lists' union.
        `states` chooses which edges count (visible by default); `id2s` restricts
        the result to those ids. Combine with `&`, `|`, `-`; read with `.page()`,
        `.pages()`, iteration or `.count()`.

        >>> mutual = g.select(1, "follows") & g.select(1, "follows", incoming=True)
        >>> reach = g.select(g.select(1, "follows"), "follows")  # two hops; .count()
        """
        return self._queries.select(self, node, atype, incoming, states, id2s)  # (positional: hot)

    # The runner of the queries `select` builds (`core.query.Runner`), as a Client is of its own.
    def _query_page(self, query: Query, cursor: str | None, limit: int) -> Page[int]:
        return self._queries.page(query, cursor, limit)

    def _query_count(self, query: Query) -> Count:
        return self._queries.count(query)

    # -- timelines --------------------------------------------------------------------

    def define_timeline(
        self,
        follows: str = "follows",
        *,
        mode: Mode = "write",
        cap: int = 800,
        celebrity_threshold: int = 10_000,
        posts: str = "posted",
    ) -> TimelineConfig:
        """Turn on timelines (or change how they work); returns the configuration.

        `follows` must have an inverse (an author's followers list); `posts`
        is defined as a type if missing. Changing `mode` later applies to new
        posts: home lists are neither back-filled nor cleared (deletes still reach
        them, so switching back to write mode shows no deleted item).

        >>> g.define_assoc("follows", inverse="followed_by")
        >>> g.define_timeline("follows", mode="hybrid", celebrity_threshold=100_000)
        """
        return self._timelines.define_timeline(
            follows, mode=mode, cap=cap, celebrity_threshold=celebrity_threshold, posts=posts
        )

    def timeline_config(self) -> TimelineConfig | None:
        """The timeline configuration, or None if `define_timeline` was never called."""
        return self._timelines.timeline_config()

    def post(
        self, author: int, item: int, time: int | None = None, updated_at: int | None = None
    ) -> WriteResult:
        """Add `item` to `author`'s timeline and deliver it to their followers' home timelines.

        `time` orders timelines (default: now in ms). Posting an item again
        keeps its first time, whatever `time` the new post carries: one item,
        one entry in every home timeline (a client retrying a post with its own
        clock makes no duplicate). In write and hybrid mode the delivery is a
        background job (`g.drain()` waits for it); the result is that of the
        author's own list. While the author's shard is down a post is `queued`,
        and its delivery waits for it.

        >>> g.post(1, 1001)
        WriteResult(status='applied', updated_at=...)
        """
        return self._timelines.post(author, item, time, updated_at)

    def post_delete(self, author: int, item: int, updated_at: int | None = None) -> WriteResult:
        """Remove `item` from `author`'s timeline and from every home timeline it reached.

        Raises NotFound if the author never posted the item. Deleting twice is harmless.

        >>> g.post_delete(1, 1001)
        """
        return self._timelines.post_delete(author, item, updated_at)

    def home_timeline(
        self, user: int, cursor: str | None = None, limit: int = 50, mode: Mode | None = None
    ) -> Page[TimelineItem]:
        """A page of the items of everyone `user` follows, newest first.

        `mode` overrides the configured one for this read ("read" always sees
        everything; "write" and "hybrid" see what was fanned out). Pass
        `next_cursor` back to page on; paging is stable while items arrive.

        >>> page = g.home_timeline(2, limit=20)
        >>> [(i.author, i.item) for i in page.items]
        """
        return self._timelines.home_timeline(user, cursor, limit, mode)

    def user_timeline(
        self, author: int, cursor: str | None = None, limit: int = 50
    ) -> Page[TimelineItem]:
        """A page of the items `author` posted, newest first.

        >>> g.user_timeline(1, limit=20).items
        """
        return self._timelines.user_timeline(author, cursor, limit)

    # -- secondary indexes ------------------------------------------------------------

    def define_index(
        self,
        name: str,
        otype: str,
        properties: list[str],
        *,
        order: str | None = None,
        unique: bool = False,
        shard_on: str | None = None,
    ) -> IndexStatus:
        """Declare a secondary index on objects of `otype`; a no-op if defined alike.

        From now on writes maintain it; existing objects are indexed by
        `index_build` (or the cleaner thread). Until then it is "building" and
        queries answer with `complete=False`. `order` adds `"recency"` (the
        object's `updated_at`) or one more property as the last key part;
        `shard_on` (one of `properties`) places entries by that value, so an
        equality query on it reads one shard. With `unique`, a write giving a
        second live object the same key raises Conflict (checked when the write
        enters; two racing writers can both pass).

        >>> g.define_index("user_by_email", "user", ["email"], shard_on="email")
        """
        return self._indexes.define_index(
            name, otype, properties, order=order, unique=unique, shard_on=shard_on
        )

    def drop_index(self, name: str) -> None:
        """Stop maintaining an index and remove its tables (NotFound if there is none).

        Another process stops writing it within a second (when it re-reads the schema).
        """
        return self._indexes.drop_index(name)

    def indexes(self) -> list[IndexStatus]:
        """Every defined index with its build progress."""
        return self._indexes.indexes()

    def index_status(self, name: str) -> IndexStatus:
        """The index's definition, state and build progress."""
        return self._indexes.index_status(name)

    def index_query(
        self,
        name: str,
        eq: Sequence[Any] = (),
        low: Any = None,
        high: Any = None,
        *,
        desc: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> IndexPage:
        """Objects whose indexed properties match, in index order, re-checked.

        >>> g.index_query("user_by_email", eq=["ada@example.com"]).items
        >>> g.index_query("user_by_age", low=18, high=30, limit=100)
        """
        return self._indexes.index_query(name, eq, low, high, desc=desc, limit=limit, cursor=cursor)

    def index_build(
        self,
        name: str,
        *,
        rate: float | None = None,
        seconds: float | None = None,
    ) -> IndexStatus:
        """Index the existing objects for `name`, resuming where the last build stopped.

        `rate` caps objects per second; `seconds` stops early (call again to go
        on: `scanned` in the returned status tells how far it got). Returns the
        status: "ready" once every object has been covered.

        >>> while g.index_build("user_by_email", seconds=1.0).state != "ready": ...
        """
        return self._cleaner.index_build(name, rate=rate, seconds=seconds)

    def index_repair_recent(self, name: str) -> IndexCheck:
        """Judge the objects written since the last pass (less `LAG`); fix what is wrong."""
        return self._cleaner.index_repair_recent(name)

    def index_check(self, name: str, *, repair: bool = False) -> IndexCheck:
        """Compare the whole index with the objects: missing, stale and dangling entries.

        >>> g.index_check("user_by_email", repair=True)
        """
        return self._cleaner.index_check(name, repair=repair)

    def start_cleaner(self, interval: float = 1.0, rate: float | None = None) -> None:
        """Build "building" indexes and run recent passes in a daemon thread until close()."""
        return self._cleaner.start_cleaner(interval, rate)

    # -- the write journal ------------------------------------------------------------

    def queue_stats(self) -> QueueStats:
        """How many jobs wait, fail or went bad, and how applying goes in this process."""
        return self._queue.queue_stats()

    def queue_jobs(
        self, state: JobState = "error", *, after: int = 0, limit: int = 100
    ) -> list[JobInfo]:
        """Jobs in `state` ("new", "error" or "bad"), oldest first, after job id `after`.

        >>> for job in g.queue_jobs("bad"):
        ...     print(job.id, job.error)
        """
        return self._queue.queue_jobs(state, after=after, limit=limit)

    def queue_job(self, id: int) -> JobInfo | None:
        """One job by id, or None if it is not in the journal (applied jobs are not)."""
        return self._queue.queue_job(id)

    def queue_retry(self) -> int:
        """Retry every job in the error queue now; return how many."""
        return self._queue.queue_retry()

    def queue_reinject(self, ids: Iterable[int] | None = None) -> int:
        """Move bad jobs (these ids, or all) back to the error queue; return how many."""
        return self._queue.queue_reinject(ids)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every journaled job is applied; False if `timeout` seconds pass first.

        Jobs in the error queue are retried on their schedule; a bad job never
        drains (inspect it with `queue_jobs("bad")`).
        """
        return self._queue.drain(timeout)

    # -- checks -----------------------------------------------------------------------

    def check_counts(self, *, repair: bool = False) -> list[CountMismatch]:
        """Compare every stored count with a recount of the edges; optionally fix them."""
        return self._checks.check_counts(repair=repair)

    def check_inverses(self, *, repair: bool = False) -> list[HangingEdge]:
        """Every edge whose inverse row is missing or differs; optionally repair them.

        A full scan of every shard: an operator's tool, not a request path.
        """
        return self._checks.check_inverses(repair=repair)

    def verify_replicas(
        self, shards: Sequence[int] | None = None, *, repair: bool = False
    ) -> VerifyReport:
        """Compare every replica of each shard (all, or `shards`) of a graph on a shard map,
        by per-range checksums, then row by row; with `repair`, fix differing rows with the
        merge rule and recount. Returns the differences; InvalidRequest without replicas,
        Unavailable if one is down. Safe under live writes.

        >>> len(g.verify_replicas(repair=True).differences)
        0
        """
        return self._checks.verify_replicas(shards, repair=repair)

    # -- schema and operator tools ----------------------------------------------------

    @property
    def schema(self) -> Schema:
        """The association and object types defined so far."""
        return self.engine.schema

    @property
    def shards(self) -> int:
        """The number of logical shards, fixed when the graph was created."""
        return self.engine.shards

    def define_assoc(
        self,
        name: str,
        *,
        inverse: str | None = None,
        symmetric: bool = False,
        limit: int = DEFAULT_LIMIT,
        ttl: float | timedelta | None = None,
        on_delete: OnDelete | None = None,
    ) -> AssocType:
        """Define an association type (and its inverse); a no-op if already so defined.
        With `ttl` (seconds or a timedelta) each edge expires that long after its time;
        `on_delete` ("shallow", "deep", "refcount") is what a cascading delete of id1
        does to the edge's other end (None: keep the type's rule).

        >>> g.define_assoc("follows", inverse="followed_by", on_delete="shallow")
        >>> g.define_assoc("viewed", limit=5000, ttl=timedelta(days=1))
        """
        return self._admin.define_assoc(name, inverse, symmetric, limit, ttl, on_delete)

    def define_object(self, name: str, *, owned: bool | None = None) -> ObjectType:
        """Define an object type (`owned`: it must hang off a deep or refcount edge)."""
        return self._admin.define_object(name, owned)

    def load_schema(self, path: str | Path) -> None:
        """Apply every definition in a TOML schema file (see `core.schema`)."""
        return self._admin.load_schema(path)

    def trace(self, tracer: Callable[[int, str, float], None]) -> Callable[[], None]:
        """Call `tracer(shard, sql, seconds)` after every SQL statement; returns an undo."""
        return self._admin.trace(tracer)

    def cache_stats(self) -> CacheStats | None:
        """Hits, misses, fills, evictions and memory of the in-process cache (None if off)."""
        return self._admin.cache_stats()

    def hot_keys(self, n: int = 20) -> list[HotKey]:
        """The hottest cache keys, with their shard and estimated requests per second."""
        return self._admin.hot_keys(n)
