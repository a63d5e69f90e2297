"""The records assocdb returns: small, immutable, cheap to build and to encode.

They are msgspec Structs, so the server and the client send them as JSON with
no hand-written conversion, and building one costs ~0.15 µs.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, NamedTuple, TypeVar

import msgspec

from .errors import InvalidRequest

StateName = Literal["normal", "negative", "archived", "removed"]
#: State names by their stored number; the number is the state's merge strength.
STATE_NAMES: tuple[StateName, ...] = ("normal", "negative", "archived", "removed")

T = TypeVar("T")


class Assoc(msgspec.Struct, frozen=True, gc=False):
    """An association (edge) `id1 -atype-> id2`.

    `time` is the sort key (ms since the epoch unless you chose otherwise);
    lists are ordered by `(time, id2)` descending. `data` is any JSON value.
    """

    id1: int
    atype: str
    id2: int
    time: int
    state: StateName
    updated_at: int
    data: Any = None


class Obj(msgspec.Struct, frozen=True):
    """An object: a typed, schemaless JSON property bag with a version."""

    id: int
    otype: str
    data: dict[str, Any]
    version: int
    updated_at: int


class Page(msgspec.Struct, Generic[T], frozen=True):
    """One page of a list. Pass a cursor back to the same call to move on.

    `next_cursor` leads to older items and is None on the last page;
    `prev_cursor` leads back to newer items and is None on the first page.
    """

    items: list[T]
    next_cursor: str | None = None
    prev_cursor: str | None = None


class WriteResult(msgspec.Struct, frozen=True):
    """What became of a write: `applied` to the shards, or `queued` for retry.

    Either way the write is durable and will be applied exactly as stamped by
    `updated_at`, its position in the merge rule's order. An update or delete
    the store stamped lands after the row it read: if a write stamped later got
    there first, it is stamped just above that row, and `updated_at` says so
    (one `queued` before it could read its row is stamped when it is applied).
    """

    status: Literal["applied", "queued"]
    updated_at: int


class JobInfo(msgspec.Struct, frozen=True):
    """One journaled job, for inspection: its state, history and operation."""

    id: int
    state: Literal["new", "error", "bad", "running"]
    attempts: int
    retries: int
    next_at: float
    created_at: float
    error: str | None
    operation: dict[str, Any]
    #: Who works on the job now ("pid 4242 on web-1", "… (exited)" once that process
    #: is gone: the next retry takes the job at once), and since when (epoch seconds).
    held_by: str | None = None
    held_since: float | None = None


class QueueStats(msgspec.Struct, frozen=True):
    """The write journal at a glance (what `assocdb queue stats` prints).

    `depth` counts jobs not yet fully applied (`new`, `errors` and long
    `running` jobs such as archiving a node's edges); the counters after
    `running` are this process's since it opened the graph. `held` lists the
    running and error-queue jobs a process works on now, with who and since when.
    """

    depth: int
    new: int
    errors: int
    bad: int
    running: int
    applied: int
    failed_attempts: int
    retries: int
    apply_p50_ms: float
    apply_p99_ms: float
    down_shards: list[int]
    held: list[JobInfo] = msgspec.field(default_factory=list)


class Count(msgspec.Struct, frozen=True):
    """The size of a query's result: exact, or an upper bound when counting would be costly."""

    value: int
    exact: bool


class TimelineItem(msgspec.Struct, frozen=True, gc=False):
    """One item of a timeline: `item` posted by `author` at `time` (newest first)."""

    item: int
    author: int
    time: int


class TimelineConfig(msgspec.Struct, frozen=True):
    """How a graph's timelines work (see `Graph.define_timeline`).

    `follows` is the follow type (its inverse lists an author's followers);
    `posts` the type of each author's own list of items; `mode` how home
    timelines are built: "write" (fan-out on write into capped lists of `cap`
    entries), "read" (merge the followees' own lists at read time) or
    "hybrid" (write, except for authors with more than `celebrity_threshold`
    followers, whose items are merged in at read time).
    """

    follows: str = "follows"
    posts: str = "posted"
    mode: Literal["write", "read", "hybrid"] = "write"
    cap: int = 800
    celebrity_threshold: int = 10_000


class IndexPage(msgspec.Struct, frozen=True):
    """One page of an index query, in index order. Pass `next_cursor` back for more.

    Every item was re-checked against the object's current properties.
    `complete` is False while the index is still being built: objects the
    build has not reached yet may be missing (never wrong ones present).
    """

    items: list[Obj]
    next_cursor: str | None = None
    complete: bool = True


class IndexStatus(msgspec.Struct, frozen=True):
    """A secondary index and how far its build has got."""

    name: str
    otype: str
    properties: list[str]
    order: str | None
    unique: bool
    shard_on: str | None
    state: Literal["building", "ready"]
    scanned: int  # objects the build has read so far
    total: int  # objects of the type now (the build's goal, for an ETA)


class IndexCheck(msgspec.Struct, frozen=True):
    """What a check or repair pass found (and, with `repaired`, fixed) in an index.

    `missing`: live objects without their entry; `stale`: entries whose key the
    object no longer has; `dangling`: entries of deleted or absent objects.
    """

    index: str
    objects: int
    missing: int
    stale: int
    dangling: int
    repaired: bool


class CountMismatch(NamedTuple):
    """A stored count that disagrees with the edge rows it counts."""

    shard: int
    id1: int
    atype: int
    state: int
    stored: int
    actual: int


class ReplicaDifference(NamedTuple):
    """A row the replicas of a shard disagree about: each replica's row, None where absent.

    `table` is edges, counts, node_states, objects, timelines or index_N; `key` the
    row's key in it; `rows` maps each replica's backend name to the row it holds.
    """

    shard: int
    table: str
    key: tuple[Any, ...]
    rows: dict[str, tuple[Any, ...] | None]


class VerifyReport(NamedTuple):
    """What `verify_replicas` compared, found and (with `repaired`) fixed."""

    shards: list[int]
    rows: int  # rows read, over every replica
    differences: list[ReplicaDifference]
    repaired: bool
    seconds: float


class CacheConfig(msgspec.Struct, frozen=True):
    """How much to cache.

    `max_bytes` bounds the cache's memory; `prefix` is the most of a list's
    newest edges that are kept (a miss fills what its read needs, at least 50,
    and the prefix grows with the reads); `admit_after` is how many recent
    misses a list needs before it is cached (a list read once costs what an
    uncached read does, and does not push hot keys out; counts are cached on
    their first miss, whose fill is the read's own statement); with `payback`,
    list fills close while their hits do not pay for them and for the passing
    misses' probes (a miss then reads the shard as uncached, one in 128 fills to
    keep measuring, and fills reopen when those earn their cost twice over:
    `cache.payback`; on traffic that reads most lists once or twice, fills
    would make reads slower);
    `max_age` bounds how long another process's write goes unseen: on a
    SQLite graph without tier 2, entries live until another process writes
    the graph, which a read notices within `max_age` (`cache.validity`);
    otherwise an entry is refilled once it is that old (or as soon as tier 2
    delivers invalidations). `redis` turns tier 2 on;
    values there live `redis_ttl` seconds.
    """

    max_bytes: int = 128 << 20
    prefix: int = 1000
    max_age: float = 10.0
    admit_after: int = 2  # misses of a key before it is cached (1: every miss)
    payback: bool = True  # close list fills while they are not paid back
    redis: str | None = None  # tier 2, e.g. "redis://127.0.0.1:6379/0"
    redis_ttl: float = 60.0

    def __post_init__(self) -> None:
        """InvalidRequest for a setting out of its range (found here, not in a worker)."""
        for name, low in (("max_bytes", 0), ("prefix", 1), ("admit_after", 1)):
            value = getattr(self, name)
            if type(value) is not int or value < low:
                raise InvalidRequest(
                    f"CacheConfig.{name} must be an integer >= {low}, got {value!r}"
                )
        if type(self.payback) is not bool:
            raise InvalidRequest(f"CacheConfig.payback must be a bool, got {self.payback!r}")
        for name in ("max_age", "redis_ttl"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not 0 <= value < float("inf"):
                raise InvalidRequest(
                    f"CacheConfig.{name} must be a finite number of seconds >= 0, got {value!r}"
                )
        if self.redis is not None and (
            not isinstance(self.redis, str) or not self.redis.startswith(REDIS_SCHEMES)
        ):
            raise InvalidRequest(
                f"CacheConfig.redis must be a Redis URL (redis://HOST:PORT/DB, rediss://… "
                f"or unix://PATH), got {self.redis!r}"
            )


#: The URL schemes redis-py connects with.
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


class CacheStats(msgspec.Struct, frozen=True):
    """Tier-1 counters since the graph was opened."""

    hits: int
    misses: int
    fills: int
    stale_fills: int
    evictions: int
    entries: int
    bytes: int
    hit_rate: float
    redis_hits: int = 0
    redis_misses: int = 0
    redis_failures: int = 0
    #: The mean time a fill spent reading (tier 2 or the shard), µs; a count's first-miss
    #: fill, the uncached read's own statement, is not timed (counted in `fills`).
    fill_us: float = 0.0
    #: The miss on which a list is filled now (`CacheConfig.admit_after`, raised while
    #: fills are not paid back by hits: `cache.payback`), and the hits a recent list
    #: fill earned at the last verdict, both weighed by their rows, in reads of 50
    #: edges (fills pay at about 4; 0.0 before the first).
    lists_admit_after: int = 0
    hits_per_fill: float = 0.0
    #: Whether a list's miss may fill its prefix (True), or fills are closed because
    #: they did not pay on this traffic: a miss then reads the shard as an uncached
    #: read does, one in 128 fills to keep measuring (`cache.payback`); and why.
    list_fills_open: bool = True
    list_fills_why: str = ""
    #: Whether assoc_get asks the cache (True), or reads the shard because its hits
    #: did not pay for its misses' lookups (one in 64 asks, timed: `cache.getgate`).
    gets_open: bool = True
    gets_why: str = ""


class HotKey(msgspec.Struct, frozen=True):
    """A hot cache key: a list (`atype` set) or an object, where it lives, how hot."""

    kind: str
    id: int
    atype: int | None
    shard: int
    per_second: float


class HangingEdge(msgspec.Struct, frozen=True):
    """An edge whose mirrored row is missing, or differs (state, time, updated_at or data)."""

    edge: Assoc
    mirror: Assoc | None


JobState = Literal["new", "error", "bad", "running"]
Direction = Literal["out", "in", "both"]
Mode = Literal["write", "read", "hybrid"]


class Deferred(Generic[T]):
    """A call queued in a batch (`Graph.batch`, `Client.batch`); `result()` once it has run."""

    def __init__(self, method: str) -> None:
        self.method = method
        self._value: Any = None
        self._error: BaseException | None = None
        self._done = False

    def settle(self, value: Any = None, error: BaseException | None = None) -> None:
        """Record the call's answer: its value, or the error `result()` raises."""
        self._value, self._error, self._done = value, error, True

    def result(self) -> T:
        """The call's answer; raises its error, or InvalidRequest before the batch ran."""
        if not self._done:
            raise InvalidRequest("the batch has not run yet; leave its `with` block first")
        if self._error is not None:
            raise self._error
        value: T = self._value
        return value


ChangeKind = Literal["edge", "object", "node"]


class Change(msgspec.Struct, frozen=True, gc=False):
    """One change a shard applied (`Graph.changes`): an edge leg, an object or a node state,
    as stored after the change. `shard` and `position` place it in the shard's feed.

    * edge: `id1 -type-> id2` with `time`, `state`, `data`;
    * object: `id1` is the object's id, `type` its otype, with `version`, `state`, `data`;
    * node: the state of every `type` edge of node `id1` (`node_archive` …).
    """

    shard: int
    position: int
    kind: ChangeKind
    type: str
    id1: int
    state: StateName
    updated_at: int
    id2: int = 0
    time: int = 0
    version: int = 0
    data: Any = None


class ChangePage(msgspec.Struct, frozen=True):
    """A page of changes and the cursor after it (always one: a feed has no end).
    `behind`: the shards that could not be read (down): the page has none of their
    changes, and the cursor keeps their positions, so none is skipped."""

    items: list[Change]
    next_cursor: str
    behind: list[int] = []
