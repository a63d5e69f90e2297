"""The storage interface every backend implements, and what backends share.

A backend stores a fixed number of logical shards. Each method works on one
shard and is one transaction there; none knows about association types,
inverses or the schema (the Graph plans those). Writes go through `apply`
(and `bulk_merge`, `index_apply`, `merge_timelines`), which fold the writes into the stored
rows with the pure merge rules of `core`, so replaying them changes nothing.

Two kinds of backend implement the protocol:

* the SQL engines, `SQLiteBackend`, `MySQLBackend` and `PostgresBackend`: every method is
  written once in `sql.SQLBackend`; an engine supplies its SQL dialect and
  its connections (see `sql.py`);
* `ShardMapBackend`, which places shards on replica sets of SQL backends.

Besides the methods, a backend declares what it is, so no caller compares
kinds or probes for methods:

* `local`: its shards are files on this machine (reads cost microseconds and
  gain nothing from threads); a shard map is local if all its members are;
* `forget_hooks`: called with cache keys a write changed in a way the backend
  cannot describe exactly (replicas that disagreed); empty and never called
  on a single backend;
* `recovery_hooks`: called when a failed member is back (the graph retries
  its queued writes then); never called on a single backend;
* `fresh_reads()`: a context within which this thread's reads see every
  write this process made (a no-op on a single backend);
* `change_feed()`: the shards' change feed (`ChangeFeed`, `sqlfeed.SQLFeed` on SQL
  shards), or None where there is none (a shard map: see docs/architecture.md).

`spec()` is how another process opens the same backend again.

Every statement a backend runs passes through its one choke point, which maps
driver errors with `map_driver_error` and reports each statement to the
tracers (so a test can assert that a read issued no SQL at all).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from ..core.cachekeys import CacheKey
from ..core.errors import AssocdbError, InvalidRequest, Unavailable
from ..core.feed import FeedRow
from ..core.merge import Changes, EdgeKey, EdgeRow, EdgeTuple, NodeRow, ObjRow
from ..core.records import CountMismatch
from ..core.scans import (
    EdgeScan,
    Id2Row,
    IdsProbe,
    IndexEntry,
    IndexScan,
    ListRow,
    ListsUnions,
    SetScan,
    ShortProbe,
    Tracer,
)
from ..core.timeline_list import TimelineEntry

if TYPE_CHECKING:
    from .shardmap import ShardMapBackend

#: Cache keys to forget: (COUNTS|PREFIX, (id1, atype)) or (OBJECT, id).
ForgetHook = Callable[[list[CacheKey]], None]


#: URL schemes of the engines that run as servers, and the backend kind each opens.
SERVER_SCHEMES = {
    "mysql": "mysql",
    "mariadb": "mysql",
    "postgresql": "postgres",
    "postgres": "postgres",
}


def is_server_url(target: object) -> bool:
    """Whether `target` is the URL of a graph on a database server rather than a path."""
    return (
        isinstance(target, str) and "://" in target and target.split("://", 1)[0] in SERVER_SCHEMES
    )


#: The expiry pass's filter of `Backend.export_edges`: {atype: time bound} (None: all edges).
Older = Mapping[int, int] | None


class ChangeFeed(Protocol):
    """Each shard's change feed, recorded by `apply` in its transaction once it is on
    (`storage.sqlfeed`; the API's `api/feed.py` reads it)."""

    @property
    def shards(self) -> int:
        """How many shards (a cursor has a position for each)."""

    @property
    def on(self) -> bool:
        """Whether this process records every apply (the feed was turned on)."""

    @property
    def missing(self) -> Sequence[str]:
        """Members whose feed is not on yet (a shard map's members that were down)."""

    @property
    def checks_held(self) -> bool:
        """Whether `read` raises FeedExpired itself (else the reader compares `bounds`)."""

    @property
    def read_only(self) -> bool:
        """A snapshot: it has its feed or none; nothing is created or trimmed."""

    @property
    def generation(self) -> int:
        """A token that changes when an apply of this process commits (`wait`)."""

    def enable(self) -> None:
        """Record every change from now on, in every process that has the shards open."""

    def wait(self, seen: int, timeout: float) -> int:
        """Wait up to `timeout` s for `generation` to differ from `seen`; the new one."""

    def wake(self) -> None:
        """Wake every `wait` (the graph is closing)."""

    def read(self, shard: int, after: int, limit: int) -> list[FeedRow]:
        """Up to `limit` records of the shard after position `after`, in position order."""

    def bounds(self, shard: int) -> tuple[int, int]:
        """(oldest position held, last position given) of the shard."""

    def trim(self, shard: int, before: int, keep: int) -> int:
        """Delete records older than `updated_at` `before` and all but the last `keep`."""


class Backend(Protocol):
    """Storage for `shards` logical shards."""

    shards: int
    tracers: list[Tracer]
    #: Whether the shards are files on this machine (see the module docstring).
    local: bool
    forget_hooks: list[ForgetHook]
    recovery_hooks: list[Callable[[], None]]

    def fresh_reads(self) -> AbstractContextManager[None]:
        """Within: this thread's reads see every write this process made (a replica
        that missed one is not read); the applier resolves writes this way."""

    def replicated(self) -> ShardMapBackend | None:
        """The shard map that places these shards on replica sets (its members, moves and
        verify), or None: one copy of each shard. What the API asks instead of a kind."""

    def change_feed(self) -> ChangeFeed | None:
        """The shards' change feed, or None: these shards have none."""

    def exclusive_writes(self) -> AbstractContextManager[None]:
        """Held from reading the rows a write resolves against to applying it: no other
        process writing the graph does that meanwhile (`storage.writerlock`; only SQLite
        directories have one, see docs/architecture.md)."""

    def apply(
        self,
        shard: int,
        edges: Sequence[EdgeTuple],
        objects: Sequence[ObjRow],
        nodes: Sequence[NodeRow] = (),
    ) -> Changes:
        """Merge these rows into the shard, with their count deltas, atomically;
        return what changed (the cache applies it)."""

    def make_durable(self, shards: Sequence[int]) -> None:
        """Make every committed transaction of these shards survive a power loss
        (the journal deletes an applied job only after this: `Applier.fence`)."""

    def bulk_merge(self, shard: int, edges: Sequence[EdgeTuple]) -> int:
        """`apply` for a bulk load's many edges (same rule, counts, one transaction),
        tuned for size; return how many rows changed (the caller forgets the cache)."""

    def copy_edges(self, shard: int, after: EdgeKey | None, edges: Sequence[EdgeTuple]) -> int:
        """`bulk_merge` for a page of a shard copy: edges in key order that follow key
        `after` (None: the first page); return how many rows changed."""

    def scan(self, shard: int, query: EdgeScan) -> list[ListRow]:
        """The rows of one association list range, in the seek's direction."""

    def scan_keys(self, shard: int, query: EdgeScan) -> list[tuple[int, int]]:
        """`scan`'s range as each row's place in its list, `(time, id2)` (a page of ids)."""

    def edges(self, shard: int, id1: int, atype: int, id2s: Sequence[int]) -> list[EdgeRow]:
        """The stored edges `(id1, atype, id2)` for these id2s, in any state."""

    def list_rows(
        self, shard: int, id1: int, atype: int, state: int, id2s: Sequence[int]
    ) -> list[ListRow]:
        """The edges `(id1, atype, id2)` of these id2s (at most `IN_CHUNK`) in `state`, as
        list rows, newest first (assoc_get's read)."""

    def edges_at(self, shard: int, keys: Sequence[EdgeKey]) -> list[EdgeRow]:
        """The stored rows of these edge keys `(id1, atype, id2)` (absent ones left out)."""

    def scan_id2(
        self,
        shard: int,
        id1: int,
        atype: int,
        states: Sequence[int],
        boundary: int | None,
        forward: bool,
        limit: int,
    ) -> list[Id2Row]:
        """The list `(id1, atype)` in id2 order (descending when `forward`), only
        edges in `states`, starting past id2 `boundary`: one index range scan."""

    def probe_id2s(
        self,
        shard: int,
        id1: int,
        atype: int,
        states: Sequence[int],
        id2s: Sequence[int],
        forward: bool = True,
        limit: int | None = None,
    ) -> list[int]:
        """Those of `id2s` whose edge `(id1, atype, id2)` is in `states`, in id2 order
        (descending when `forward`), at most `limit` (None: all): reads of the
        `(id1, atype, id2)` index alone, which holds the state too."""

    def set_ids(self, shard: int, query: SetScan) -> list[int]:
        """The id2s a set statement on one shard finds (`IdsJoin`: two lists joined;
        `ListsUnion`: many lists' id2s, distinct; `IdsProbe`: ordered ids probed),
        in id2 order, at most its limit."""

    def probe_short(self, shard: int, query: ShortProbe) -> list[int] | None:
        """The ids of a short list found in another (`ShortProbe`), or None when the list
        is not short: its read and the probe (`probe_short_each`, unless a backend has a
        cheaper way)."""

    def unions(self, query: ListsUnions) -> list[list[int]]:
        """`set_ids` of the `ListsUnion` of each shard of `query.groups`, in the order
        of `groups`: the shards of many lists read in one call (`unions_each`, unless
        a backend has a cheaper way)."""

    def node_states(
        self, shard: int, keys: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], NodeRow]:
        """The stored node states of these lists `(node, atype)`."""

    def export_edges(
        self, shard: int, after: EdgeKey | None, limit: int, older: Older = None
    ) -> list[EdgeRow]:
        """Up to `limit` edges of the shard in key order, starting after `after`; with
        `older` ({atype: bound}) only the live ones (not removed) of those types whose
        time is below their type's bound: the filter is evaluated on the key index
        `(id1, atype, id2)`, which holds atype, state and time in every engine, so
        only the matching rows are fetched, though the index is still walked whole."""

    def export_table(
        self, shard: int, table: str, after: Sequence[Any] | None, limit: int
    ) -> list[tuple[Any, ...]]:
        """Up to `limit` stored rows of `table` (edges, counts, node_states, objects,
        timelines, index_N) as the engine holds them, in key order after key `after`
        (`sql.TABLE_KEYS`): what the replica verifier compares."""

    def count_rows(self, shard: int, table: str) -> int:
        """How many rows `table` (as in `export_table`) holds on the shard (a full count:
        for progress estimates of tools, not for requests)."""

    def table_bound(
        self, shard: int, table: str, after: Sequence[Any] | None, rows: int
    ) -> tuple[Any, ...] | None:
        """The key of the `rows`-th row of `table` (as in `export_table`) after key `after`,
        or None if fewer rows follow: where the replica verifier ends a range."""

    def table_summary(
        self,
        shard: int,
        table: str,
        after: Sequence[Any] | None,
        upto: Sequence[Any] | None,
    ) -> tuple[str, int, int]:
        """`(kind, rows, checksum)` of the rows of `table` with keys after `after` up to and
        including `upto` (None: no bound), computed on the server: the count, and the sum
        of a hash of each row's columns (order-independent). Count rows of 0 are left out
        (as good as none). Two summaries are comparable when their `kind` (the engine's
        hash) is the same; equal summaries mean the same rows, up to a hash collision."""

    def counts(self, shard: int, id1: int, atype: int) -> dict[int, int]:
        """The count of edges per state of the list `(id1, atype)`."""

    def count_totals(self, shard: int) -> dict[tuple[int, int], int]:
        """`(atype, state) -> edges` on the shard, summed from the kept counts (one pass
        over the counts table, never over the edges; for the console's overview)."""

    def objects(self, shard: int, ids: Sequence[int]) -> list[ObjRow]:
        """The stored objects with these ids, tombstones included."""

    def objects_page(self, shard: int, otype: int, after: int, limit: int) -> list[ObjRow]:
        """Up to `limit` objects of type `otype` with id > `after`, in id order, tombstones
        included (the index builder's scan)."""

    def objects_count(self, shard: int, otype: int) -> int:
        """How many objects of type `otype` the shard holds, tombstones included."""

    def objects_since(
        self, shard: int, otype: int, after: tuple[int, int], limit: int
    ) -> list[ObjRow]:
        """Up to `limit` objects of type `otype` with `(updated_at, id) > after`, in that
        order (the cleaner's pass over recent writes; needs an `(otype, updated_at)` index)."""

    def index_apply(self, shard: int, entries: Sequence[IndexEntry]) -> int:
        """Merge index entries into their tables on the shard (creating a table on first
        use), atomically, under `core.entities.merge_entries`; return how many changed."""

    def index_entries(self, shard: int, index: int, ids: Sequence[int]) -> list[IndexEntry]:
        """Every stored entry (tombstones too) of these objects in the index, on this shard."""

    def index_scan(self, shard: int, index: int, scan: IndexScan) -> list[tuple[bytes, int]]:
        """The live entries `(key, id)` of one index range (none if the table does not exist)."""

    def index_export(
        self, shard: int, index: int, after: tuple[bytes, int] | None, limit: int
    ) -> list[IndexEntry]:
        """Up to `limit` stored entries (tombstones too) in `(key, id)` order, after `after`."""

    def index_purge(self, shard: int, index: int, before: int) -> int:
        """Delete the index's removal entries stamped before `before`; return how many."""

    def index_drop(self, shard: int, index: int) -> None:
        """Remove the index's table on the shard (if there is one)."""

    def allocate(self, shard: int, n: int) -> int:
        """Reserve `n` id sequence numbers on the shard; return the first, once the
        reservation is durable (no power loss hands the numbers out again)."""

    def get_meta(self, key: str) -> bytes | None:
        """A graph-wide setting (kept on shard 0)."""

    def swap_meta(self, key: str, expected: bytes | None, value: bytes) -> bool:
        """Set a graph-wide setting if it still equals `expected`; True once the new
        value is durable (it survives a power loss), False if it did not equal."""

    def timelines(self, shard: int, owners: Sequence[int]) -> dict[int, bytes]:
        """The stored home-timeline blobs of these owners (absent owners are left out)."""

    def merge_timelines(
        self, shard: int, writes: Mapping[int, Sequence[TimelineEntry]], cap: int
    ) -> int:
        """Fold each owner's writes into their home timeline with
        `core.timeline_list.merge_blob`, atomically; return how many timelines changed."""

    def recount(
        self, shard: int, repair: bool, id1s: Sequence[int] | None = None
    ) -> list[CountMismatch]:
        """Compare (and optionally fix) every stored count with the edge rows
        (only the lists of nodes `id1s`, if given)."""

    def spec(self) -> dict[str, Any]:
        """JSON-able settings that open this backend again (`registry.open_backend`)."""

    def close(self) -> None:
        """Release every connection."""


#: PEP 249 exception class names and what they mean for a caller. Mapping by
#: name (peewee's trick) works for every driver without importing any of them.
_DRIVER_ERRORS: dict[str, type[AssocdbError]] = {
    "OperationalError": Unavailable,  # locked, timed out, connection lost, disk I/O
    "InterfaceError": Unavailable,  # the connection is gone
    "InternalError": Unavailable,
    "DataError": InvalidRequest,
    "IntegrityError": AssocdbError,  # never expected: writes are merges
    "ProgrammingError": AssocdbError,  # a bug in assocdb's SQL
    "NotSupportedError": AssocdbError,
}


def probe_short_each(backend: Backend, shard: int, query: ShortProbe) -> list[int] | None:
    """`Backend.probe_short` as a `scan_id2` of the short list and a `set_ids` probe."""
    q = query
    rows = backend.scan_id2(shard, q.id1, q.atype, q.states, q.boundary, q.forward, q.size)
    if len(rows) >= q.size:
        return None
    if not rows:
        return []
    ids = [row[0] for row in rows]
    probe = IdsProbe(q.other, q.other_atype, q.other_states, ids, q.forward, q.limit)
    return backend.set_ids(q.other_shard, probe)


def unions_each(backend: Backend, query: ListsUnions) -> list[list[int]]:
    """`Backend.unions` as one `set_ids` a shard."""
    return [backend.set_ids(shard, query.on(shard)) for shard in query.groups]


def map_driver_error(exc: Exception, where: str) -> AssocdbError:
    """The assocdb error for a driver exception raised at `where`."""
    for cls in type(exc).__mro__:
        kind = _DRIVER_ERRORS.get(cls.__name__)
        if kind is not None:
            break
    else:
        kind = Unavailable
    return kind(f"{where}: {type(exc).__name__}: {one_line(exc)}", backend_error=type(exc).__name__)


def one_line(exc: BaseException) -> str:
    """A driver's message on one line (libpq's run over several, with hints), so that an
    error reads as one line in a log or on the command line."""
    return " ".join(str(exc).split())
