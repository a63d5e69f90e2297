"""Timelines: post, post_delete, home_timeline, user_timeline, define_timeline.

An author's own timeline is an association list, `(author, posted, item)`
with the item's time, so it pages, counts and caches like any other list.
A *home* timeline (the items of everyone a user follows) is built in one of
three ways, chosen per graph (`define_timeline`) and overridable per read:

* **write** (fan-out on write, Twitter): `post` journals a `FanoutJob` that
  merges `(time, item, author)` into every follower's packed, capped home
  list in the background (`writes.fanout`, `core.timeline_list`); a read is one row.
* **read** (fan-out on read, the sharded friends table): a read gathers the
  newest items of every followee from their shards in parallel and merges
  them (`api.timeline_read`); a post is one row.
* **hybrid**: write, except for *celebrities*, authors with more than
  `celebrity_threshold` followers when they post; their items are merged in
  at read time. Celebrity status is sticky (kept graph-wide, in meta), so an
  author's items are never in neither place.

Deletes are fanned out too (to everyone who ever followed, as tombstones; one
of an item a home list never held takes none of its `cap` slots);
unfollows are applied at read time, by checking the follow edges of a page's
authors, so already-delivered items of an unfollowed author disappear at once.
"""

from __future__ import annotations

import threading
import time as _time
from array import array
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import msgspec

from ..core import cursor as _cursor
from ..core.errors import InvalidRequest, NotFound, UnknownType
from ..core.ids import check_id, check_time, shard_of
from ..core.merge import PLAIN_NORMAL as _NORMAL
from ..core.merge import PLAIN_REMOVED as _REMOVED
from ..core.merge import State
from ..core.ops import EdgeWrite
from ..core.records import Mode, Page, TimelineConfig, TimelineItem, WriteResult
from ..core.scans import EdgeScan, ListRow
from ..core.schema import AssocType
from ..core.timeline_list import TimelineEntry, entry, is_deleted, unpack
from ..writes.fanout import FanoutJob
from .assoc_reads import AssocReads
from .engine import Engine
from .timeline_read import Row, ScanPosts, Source, Sources, author_rows, home_rows

MODES = ("write", "read", "hybrid")
MAX_CAP = 10_000
MAX_PAGE = 1000
#: Fan-out on read merges the newest this many followees (Twitter capped following at 5,000).
MAX_READ_FANOUT = 5000
#: Read the shards of a fan-out on read in parallel: "always", "never", or "auto":
#: when the backend is across a network, where overlapping round trips pays. For
#: in-process SQLite, threads measured 1.5-3x slower on 2 cores (the GIL; each
#: statement is ~10 µs of mostly Python), so "auto" reads those inline.
PARALLEL_READS: Literal["auto", "always", "never"] = "auto"
_CONFIG_KEY = "timeline"
_CELEBRITIES_KEY = "timeline_celebrities"
_FANNED_KEY = "timeline_fanned_out"  # set once the graph has been in write or hybrid mode
_STARS_ASKED = 2000  # celebrities a hybrid read asks about at most, before reading follows
_CONFIG_SECONDS = 1.0  # how long a process trusts its copy of the config
_ALL_STATES: list[int] = [State.NORMAL, State.NEGATIVE, State.ARCHIVED, State.REMOVED]


class Timelines:
    """define_timeline, timeline_config, post, post_delete, home_timeline, user_timeline
    (`Graph` documents each). Lists are read through `reads`, which knows the cache."""

    def __init__(self, engine: Engine, reads: AssocReads) -> None:
        self._engine = engine
        self._reads = reads
        self._backend = engine.backend
        self._cache = engine.cache
        self._shards = engine.shards
        self._pool_lock = threading.Lock()
        self._timeline_pool: ThreadPoolExecutor | None = None
        self._timeline_cache: tuple[float, TimelineConfig | None] = (float("-inf"), None)
        self._celebrity_cache: tuple[float, list[int]] = (float("-inf"), [])

    def define_timeline(
        self,
        follows: str = "follows",
        *,
        mode: Mode = "write",
        cap: int = 800,
        celebrity_threshold: int = 10_000,
        posts: str = "posted",
    ) -> TimelineConfig:
        kind = self._engine.assoc_type(follows)
        if self._engine.schema.inverse(kind) is None or kind.symmetric:
            raise InvalidRequest(
                f"timelines need a follow type with an inverse (its followers list); "
                f"{follows!r} has none: define it with inverse="
            )
        if mode not in MODES:
            raise InvalidRequest(f"mode must be 'write', 'read' or 'hybrid', got {mode!r}")
        if type(cap) is not int or not 0 < cap <= MAX_CAP:
            raise InvalidRequest(f"cap must be an integer from 1 to {MAX_CAP:,}, got {cap!r}")
        if type(celebrity_threshold) is not int or celebrity_threshold < 0:
            raise InvalidRequest(
                f"celebrity_threshold must be a non-negative integer, got {celebrity_threshold!r}"
            )
        if posts in (follows, kind.inverse):
            raise InvalidRequest(f"posts must be a type of its own, not {posts!r}")
        try:
            self._engine.assoc_type(posts)  # an existing type is used as it is (its limit kept)
        except UnknownType:
            self._engine.change_schema(lambda s: s.define_assoc(posts))
        config = TimelineConfig(follows, posts, mode, cap, celebrity_threshold)
        while True:
            raw = self._backend.get_meta(_CONFIG_KEY)
            before = None if raw is None else msgspec.json.decode(raw, type=TimelineConfig)
            if mode != "read" or (before is not None and before.mode != "read"):
                self._backend.swap_meta(_FANNED_KEY, None, b"1")  # sticky: a no-op if set
            if self._backend.swap_meta(_CONFIG_KEY, raw, msgspec.json.encode(config)):
                break
        self._timeline_cache = (_time.monotonic(), config)
        return config

    def timeline_config(self, fresh: bool = False) -> TimelineConfig | None:
        """The config, as read at most `_CONFIG_SECONDS` ago (`fresh`: read now)."""
        read_at, config = self._timeline_cache
        if not fresh and _time.monotonic() - read_at < _CONFIG_SECONDS:
            return config
        raw = self._backend.get_meta(_CONFIG_KEY)
        config = None if raw is None else msgspec.json.decode(raw, type=TimelineConfig)
        self._timeline_cache = (_time.monotonic(), config)
        return config

    # -- writes ------------------------------------------------------------------------

    def post(
        self, author: int, item: int, time: int | None = None, updated_at: int | None = None
    ) -> WriteResult:
        config = self._config()
        author, item = check_id(author, "author"), check_id(item, "item")
        if time is not None:
            check_time(time)
        posts, followers = self._timeline_types(config)
        ua = self._engine.stamp(updated_at)
        # A live post keeps its time (a new one takes `time`, else now), and the
        # fan-out takes the time from the stored edge once the post is applied
        # (`writes.fanout.timed`): deliveries and deletes of an item share one key.
        # Hybrid decides first (it reads the author's follower count): a post whose
        # shard is down then fails whole, rather than be stored and never delivered.
        deliver = config.mode == "write" or (
            config.mode == "hybrid" and not self._celebrity(author, followers, config)
        )
        post = EdgeWrite(posts.id, None, author, item, _NORMAL, ua, keep=True, new_time=time)
        result = self._engine.submit(post, ua)
        if deliver:
            delivery = entry(0, item, author, ua)  # its time: the stored post's
            job = FanoutJob(author, followers.id, [_NORMAL], delivery, config.cap)
            self._engine.submit_background(msgspec.structs.replace(job, posts=posts.id))
        return result

    def post_delete(self, author: int, item: int, updated_at: int | None = None) -> WriteResult:
        config = self._config()
        author, item = check_id(author, "author"), check_id(item, "item")
        posts, followers = self._timeline_types(config)
        stored = self._posted(posts, author, item)
        if stored is None:
            raise NotFound(f"author {author} has not posted item {item}", author=author, item=item)
        time = stored[1]
        ua = self._engine.stamp(updated_at)
        result = self._engine.submit(
            EdgeWrite(posts.id, None, author, item, _REMOVED, ua, time, None), ua
        )
        # Home lists may hold the item if the graph ever fanned out on write: a
        # later switch back to write mode must not bring a deleted item back.
        if config.mode != "read" or self._backend.get_meta(_FANNED_KEY) is not None:
            tombstone = entry(time, item, author, ua, deleted=True)
            self._engine.submit_background(
                FanoutJob(author, followers.id, _ALL_STATES, tombstone, config.cap)
            )
        return result

    # -- a deleted user's own home list (`api.deletions`) ------------------------------

    def home_held(self, user: int) -> list[TimelineEntry]:
        """The live entries of `user`'s stored home list (none without timelines)."""
        if self.timeline_config() is None and self.timeline_config(fresh=True) is None:
            return []
        blob = self._backend.timelines(shard_of(user, self._shards), [user]).get(user, b"")
        return [e for e in unpack(blob) if e[2] > 0 and not is_deleted(e)]

    def home_merge(self, user: int, writes: list[TimelineEntry]) -> None:
        """Merge `writes` into `user`'s home list and its cached copy (idempotent)."""
        cap = self._config().cap
        found = {user: writes}
        self._backend.merge_timelines(shard_of(user, self._shards), found, cap)
        if self._cache is not None:
            self._cache.deliver(found, cap)

    def still_posted(self, entries: list[TimelineEntry]) -> list[TimelineEntry]:
        """The entries whose item its author still has posted (one read per author)."""
        posts, _ = self._timeline_types(self._config())
        by_author: dict[int, list[int]] = {}
        for _, item, author, _ in entries:
            by_author.setdefault(author, []).append(item)
        live: set[tuple[int, int]] = set()
        for author, items in by_author.items():
            rows = self._backend.edges(shard_of(author, self._shards), author, posts.id, items)
            live |= {(author, r.id2) for r in rows if r.state == State.NORMAL}
        return [e for e in entries if (e[2], e[1]) in live]

    # -- reads -------------------------------------------------------------------------

    def home_timeline(
        self, user: int, cursor: str | None = None, limit: int = 50, mode: Mode | None = None
    ) -> Page[TimelineItem]:
        config = self._config()
        user = check_id(user, "user")
        limit = _check_limit(limit)
        mode = config.mode if mode is None else mode
        if mode not in MODES:
            raise InvalidRequest(f"mode must be 'write', 'read' or 'hybrid', got {mode!r}")
        scope = f"timeline:home:{user}".encode()
        seek = _cursor.START if cursor is None else _cursor.decode(scope, cursor, 2)
        posts, _ = self._timeline_types(config)
        follows = self._engine.assoc_type(config.follows)
        sources = Sources(self._pool())
        scan = self._list_scan(posts)
        if mode == "read":
            sources.add_authors(scan, self._shards, self._followees(user, follows))
        else:
            sources.add(self._home_source(user, follows, posts))
            if mode == "hybrid":
                stars = self._followed_celebrities(user, follows)
                sources.add_authors(scan, self._shards, sorted(stars))
        return _page(*sources.page(scope, seek, limit))

    def user_timeline(
        self, author: int, cursor: str | None = None, limit: int = 50
    ) -> Page[TimelineItem]:
        config = self._config()
        author = check_id(author, "author")
        limit = _check_limit(limit)
        scope = f"timeline:user:{author}".encode()
        seek = _cursor.START if cursor is None else _cursor.decode(scope, cursor, 2)
        posts, _ = self._timeline_types(config)
        return _page(
            *_cursor.paginate(
                lambda s, n: author_rows(self._list_scan(posts), [author], s, n),
                lambda r: (r[0], r[1]),
                scope,
                seek,
                limit,
            )
        )

    # -- parts -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the threads of parallel reads (after the engine has closed)."""
        pool = self._timeline_pool
        if pool is not None:
            pool.shutdown(wait=False)

    def _config(self) -> TimelineConfig:
        config = self.timeline_config()
        if config is None:  # another process may have set timelines up since: read again
            config = self.timeline_config(fresh=True)
        if config is None:
            raise InvalidRequest(
                "timelines are not set up for this graph; call "
                "g.define_timeline('follows', mode='write') first"
            )
        return config

    def _timeline_types(self, config: TimelineConfig) -> tuple[AssocType, AssocType]:
        """The posts type and the followers type (the follow type's inverse)."""
        follows = self._engine.assoc_type(config.follows)
        followers = self._engine.schema.inverse(follows)
        assert followers is not None  # define_timeline checked
        return self._engine.assoc_type(config.posts), followers

    def _posted(self, posts: AssocType, author: int, item: int) -> tuple[int, int] | None:
        """(state, time) of the stored post edge, if any."""
        rows = self._backend.edges(shard_of(author, self._shards), author, posts.id, [item])
        return (rows[0].state, rows[0].time) if rows else None

    def celebrities(self, fresh: bool = False) -> list[int]:
        """The celebrities; a read trusts a copy for a second (the list only grows)."""
        read_at, stars = self._celebrity_cache
        if fresh or _time.monotonic() - read_at >= _CONFIG_SECONDS:
            raw = self._backend.get_meta(_CELEBRITIES_KEY)
            stars = [] if raw is None else list(array("q", raw))
            self._celebrity_cache = (_time.monotonic(), stars)
        return stars

    def _celebrity(self, author: int, followers: AssocType, config: TimelineConfig) -> bool:
        """True if `author`'s items are read-fanned; marks them so once over the threshold."""
        shard = shard_of(author, self._shards)
        count = self._backend.counts(shard, author, followers.id).get(State.NORMAL, 0)
        if count <= config.celebrity_threshold:
            return author in self.celebrities(fresh=True)  # sticky: never in neither place
        while True:
            raw = self._backend.get_meta(_CELEBRITIES_KEY)
            stars = [] if raw is None else list(array("q", raw))
            if author in stars:
                return True
            value = array("q", sorted([*stars, author])).tobytes()
            if self._backend.swap_meta(_CELEBRITIES_KEY, raw, value):
                self._celebrity_cache = (_time.monotonic(), sorted([*stars, author]))
                return True

    def _list_scan(self, posts: AssocType) -> ScanPosts:
        """Read lists of this type through the cache (TAO: most reads never reach a shard)."""

        def scan(id1: int, seek: _cursor.Seek, n: int) -> list[ListRow]:
            if posts.ttl is not None:  # bounded by time on the shard (`core.ttl`)
                low = self._reads.expiry.low(posts)
                return self._reads.scan(
                    id1, EdgeScan(id1, posts.id, State.NORMAL, seek, n, None, low)
                )
            need = n if seek.boundary is None else None
            rows = self._reads.from_cache(id1, posts, lambda e: e.scan(seek, n), need)
            if rows is None:
                rows = self._reads.scan(id1, EdgeScan(id1, posts.id, State.NORMAL, seek, n))
            return rows

        return scan

    def _followed_celebrities(self, user: int, follows: AssocType) -> set[int]:
        """The celebrities `user` follows, looked up from the smaller side.

        Asking about every celebrity costs a statement per 500 of them; reading
        the user's follows costs one per 1,000 follows, so with many celebrities
        and a user who follows fewer accounts, the follows are read instead.
        """
        stars = set(self.celebrities())
        if len(stars) > _STARS_ASKED:
            shard = shard_of(user, self._shards)
            following = self._backend.counts(shard, user, follows.id).get(State.NORMAL, 0)
            if following < len(stars):  # the bound covers follows added meanwhile
                return stars.intersection(self._followees(user, follows, len(stars)))
        return self._followed(user, follows, stars)

    def _followees(self, user: int, follows: AssocType, most: int = MAX_READ_FANOUT) -> list[int]:
        """Up to `most` accounts `user` follows, newest follows first."""
        scan = self._list_scan(follows)
        found: list[int] = []
        seek = _cursor.START
        while len(found) < most:
            want = min(1000, most - len(found))
            rows = scan(user, seek, want)
            found += [r[0] for r in rows]
            if len(rows) < want:
                break
            seek = _cursor.Seek(True, (rows[-1][1], rows[-1][0]), False)
        return found

    def _followed(self, user: int, follows: AssocType, authors: set[int]) -> set[int]:
        """Which of `authors` `user` follows now: one batched lookup on the user's shard."""
        if not authors:
            return set()
        ids = sorted(authors)
        if follows.ttl is not None:  # follows that expire: judged by their time
            low = self._reads.expiry.low(follows)
            rows = self._backend.edges(shard_of(user, self._shards), user, follows.id, ids)
            return {r.id2 for r in rows if r.state == State.NORMAL and r.time >= low}
        cached = self._reads.from_cache(user, follows, lambda e: e.get(ids), None)
        if cached is not None:
            return {row[0] for row in cached}
        rows = self._backend.edges(shard_of(user, self._shards), user, follows.id, ids)
        return {row.id2 for row in rows if row.state == State.NORMAL}

    def _home_source(self, user: int, follows: AssocType, posts: AssocType) -> Source:
        entries = unpack(self._home_blob(user))
        if posts.ttl is not None:  # items are posts edges: they expire with them
            low = self._reads.expiry.low(posts)
            entries = [e for e in entries if e[0] >= low]
        return lambda seek, n: home_rows(
            entries, lambda authors: self._followed(user, follows, authors), seek, n
        )

    def _home_blob(self, user: int) -> bytes:
        """The user's packed home list (b"" if none), through the cache when there is one."""
        shard = shard_of(user, self._shards)

        def load() -> bytes:
            return self._backend.timelines(shard, [user]).get(user, b"")

        return load() if self._cache is None else self._cache.home(user, load)

    def _pool(self) -> ThreadPoolExecutor | None:
        """Threads for reading shards in parallel, if that pays (see PARALLEL_READS)."""
        if self._shards == 1 or PARALLEL_READS == "never":
            return None
        if PARALLEL_READS == "auto" and self._backend.local:
            return None
        if self._timeline_pool is None:
            with self._pool_lock:
                if self._timeline_pool is None:
                    self._timeline_pool = ThreadPoolExecutor(
                        min(8, self._shards), thread_name_prefix="assocdb-timeline"
                    )
        return self._timeline_pool


def _check_limit(limit: object) -> int:
    if type(limit) is not int or not 0 < limit <= MAX_PAGE:
        raise InvalidRequest(f"limit must be an integer from 1 to {MAX_PAGE:,}, got {limit!r}")
    return limit


def _page(rows: list[Row], after: str | None, before: str | None) -> Page[TimelineItem]:
    return Page([TimelineItem(item, author, time) for time, item, author in rows], after, before)
