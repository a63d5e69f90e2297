"""The SQLite backend: one database file per logical shard, in WAL mode.

Tables per shard:

* `edges`, clustered on `(id1, atype, state, time, id2)`, the order lists are
  read in, so a page of a list is one contiguous range of one B-tree and
  needs no second lookup; `edges_key`, a unique index on `(id1, atype, id2)`,
  enforces one edge per pair and serves point lookups.
* `counts (id1, atype, state) -> n`, changed in the same transaction as edges.
* `objects (id) -> (otype, state, version, updated_at, data)`.
  Data is zlib-compressed when that pays (`_compress`); `objects_recent`
  `(otype, updated_at)` serves the index cleaner's pass over recent writes.
* `index_N (ikey, id) -> (updated_at, version, state)`, one table per secondary index
  (`_entities`), created when first written, with `index_N_by_id` on `id`.
* `seq` (the shard's id allocator) and `meta` (graph-wide settings, shard 0).

Durability: WAL with synchronous=NORMAL: a committed transaction survives a
process crash; the journal (group-committed with full fsync) covers power loss.

Each thread gets its own connection per shard (SQLite connections are not
shared across threads; WAL lets readers run beside the one writer). Every
statement goes through `_run`/`_query`, the choke point that maps driver
errors and reports to tracers.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.compress import pack, unpack
from ..core.entities import merge_entries
from ..core.errors import AssocdbError, InvalidRequest, Unavailable, no_graph
from ..core.merge import (
    Changes,
    EdgeKey,
    EdgeRow,
    EdgeTuple,
    NodeRow,
    ObjRow,
    merge_edges,
    merge_nodes,
    merge_objects,
)
from ..core.records import CountMismatch
from ..core.scans import EdgeScan, Id2Row, IndexEntry, IndexScan, ListRow, Tracer
from ..core.timeline_list import Entry as TimelineEntry
from ..core.timeline_list import merge_blob
from .backend import ForgetHook, map_driver_error

log = logging.getLogger("assocdb.sqlite")

DEFAULT_SHARDS = 16
MAX_SHARDS = 4096
SLOW_SECONDS = 0.5
_IN_CHUNK = 500  # ids per IN (...) list

_DDL = """
CREATE TABLE IF NOT EXISTS edges (
    id1 INTEGER NOT NULL, atype INTEGER NOT NULL, id2 INTEGER NOT NULL,
    state INTEGER NOT NULL, time INTEGER NOT NULL, updated_at INTEGER NOT NULL, data BLOB,
    PRIMARY KEY (id1, atype, state, time, id2)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS edges_key ON edges (id1, atype, id2);
CREATE TABLE IF NOT EXISTS counts (
    id1 INTEGER NOT NULL, atype INTEGER NOT NULL, state INTEGER NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (id1, atype, state)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS objects (
    id INTEGER PRIMARY KEY, otype INTEGER NOT NULL, state INTEGER NOT NULL,
    version INTEGER NOT NULL, updated_at INTEGER NOT NULL, data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS objects_recent ON objects (otype, updated_at);
CREATE TABLE IF NOT EXISTS node_states (
    node INTEGER NOT NULL, atype INTEGER NOT NULL, state INTEGER NOT NULL,
    updated_at INTEGER NOT NULL, PRIMARY KEY (node, atype)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS timelines (owner INTEGER PRIMARY KEY, entries BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS seq (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
"""

_EDGE_COLUMNS = "id1, atype, id2, state, time, updated_at, data"
_SELECT_EDGES = (
    f"SELECT {_EDGE_COLUMNS} FROM edges INDEXED BY edges_key WHERE id1 = ? AND atype = ?"
)
_UPSERT_EDGE = f"INSERT OR REPLACE INTO edges ({_EDGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
_ADD_COUNT = (
    "INSERT INTO counts (id1, atype, state, n) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (id1, atype, state) DO UPDATE SET n = n + excluded.n"
)
_UPSERT_NODE = (
    "INSERT OR REPLACE INTO node_states (node, atype, state, updated_at) VALUES (?, ?, ?, ?)"
)
_SELECT_NODE = "SELECT node, atype, state, updated_at FROM node_states WHERE node = ? AND atype = ?"
_OBJ_COLUMNS = "id, otype, state, version, updated_at, data"
_UPSERT_OBJ = f"INSERT OR REPLACE INTO objects ({_OBJ_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"

SETUP_LOCK = ".setup.lock"


class SQLiteBackend:
    """Shards as SQLite files `shard-NNNN.db` in one directory."""

    local = True

    def __init__(self, path: Path, shards: int, busy_timeout: float = 2.0) -> None:
        self.path = path
        self.shards = shards
        self.busy_timeout = busy_timeout
        self.tracers: list[Tracer] = []
        self.forget_hooks: list[ForgetHook] = []  # one copy of each row: never called
        self.recovery_hooks: list[Callable[[], None]] = []  # no members: never called
        #: Called with (shard, sql) before every statement, inside the choke point:
        #: a fault injector may raise a driver error (it is mapped like a real one)
        #: or sleep. For chaos tests and drills.
        self.faults: list[Callable[[int, str], None]] = []
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # One writer per shard at a time in this process. Without it, threads'
        # connections contend for the file lock through SQLite's busy handler,
        # which sleeps (1, 2, 5 … 100 ms) instead of queueing.
        self._writers = [threading.Lock() for _ in range(shards)]
        self._closed = False
        #: A graph on a read-only file system (a snapshot, a read-only mount) is
        #: read as it is; its writes fail.
        self.read_only = not _writable_dir(path)

    @classmethod
    def open(
        cls,
        path: str | Path,
        shards: int | None = None,
        busy_timeout: float = 2.0,
        create: bool = True,
    ) -> SQLiteBackend:
        """Open the graph in directory `path`, creating it (with `shards`) if new
        (with `create=False`, NotFound instead, and nothing is created)."""
        root = Path(path)
        if shards is not None and (type(shards) is not int or not 0 < shards <= MAX_SHARDS):
            raise InvalidRequest(
                f"shards must be an integer from 1 to {MAX_SHARDS}, got {shards!r}"
            )
        if root.exists() and not root.is_dir():
            raise InvalidRequest(f"{root} is a file, not a graph directory")
        stored = _stored_shards(root)
        if stored is None and not create:
            raise no_graph(str(root))
        if stored is not None:
            if shards is not None and shards != stored:
                raise InvalidRequest(
                    f"{root} holds a graph with {stored} shards, not {shards}; the shard "
                    f"count is fixed when a graph is created (omit shards= to open it)"
                )
            return cls(root, stored, busy_timeout)
        root.mkdir(parents=True, exist_ok=True)
        backend = cls(root, shards or DEFAULT_SHARDS, busy_timeout)
        # The shard count is written last: a crash halfway leaves no graph, not half of one.
        if backend.swap_meta("shards", None, str(backend.shards).encode()):
            return backend
        backend.close()  # another process created the graph first: open that one
        return cls.open(root, shards, busy_timeout, create=False)

    def fresh_reads(self) -> AbstractContextManager[None]:
        return nullcontext()  # one copy of each row: every read is fresh

    # -- the choke point --------------------------------------------------------

    def _conn(self, shard: int) -> sqlite3.Connection:
        conns: list[sqlite3.Connection | None] | None = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = [None] * self.shards
        conn = conns[shard]
        if conn is None:
            conn = conns[shard] = self._connect(shard)
        return conn

    def _connect(self, shard: int) -> sqlite3.Connection:
        if self._closed:
            raise InvalidRequest("this graph has been closed")
        file = self.path / f"shard-{shard:04d}.db"
        try:
            if self.read_only:
                conn = _read_only_shard(file)
                with self._lock:
                    self._all.append(conn)
                return conn
            with _setup_lock(self.path):
                conn = sqlite3.connect(
                    file, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
                )
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA mmap_size = 268435456")
                conn.execute("PRAGMA cache_size = -16000")
                conn.executescript(_DDL)
        except sqlite3.Error as exc:
            raise map_driver_error(exc, f"opening {file}") from exc
        with self._lock:
            self._all.append(conn)
        return conn

    def _run(self, shard: int, sql: str, params: Any = (), many: bool = False) -> sqlite3.Cursor:
        """Execute one statement (or one executemany) on the shard."""
        conn = self._conn(shard)
        start = time.perf_counter()
        try:
            for fault in self.faults:
                fault(shard, sql)
            cursor = conn.executemany(sql, params) if many else conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise map_driver_error(exc, f"shard {shard}") from exc
        self._report(shard, sql, time.perf_counter() - start, many)
        return cursor

    def _query(self, shard: int, sql: str, params: Any = ()) -> list[Any]:
        """Execute one SELECT on the shard and return all its rows."""
        conn = self._conn(shard)
        start = time.perf_counter()
        try:
            for fault in self.faults:
                fault(shard, sql)
            rows = conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise map_driver_error(exc, f"shard {shard}") from exc
        self._report(shard, sql, time.perf_counter() - start)
        return rows

    def _report(self, shard: int, sql: str, seconds: float, many: bool = False) -> None:
        for tracer in self.tracers:
            try:
                tracer(shard, sql, seconds)
            except Exception:  # a broken tracer must not break a write that succeeded
                log.exception("tracer %r failed", tracer)
        if seconds > SLOW_SECONDS and not many:  # a bulk executemany is meant to be long
            log.warning("slow statement on shard %d (%.3f s): %s", shard, seconds, sql)

    @contextmanager
    def _transaction(self, shard: int) -> Iterator[None]:
        writer = self._writers[shard]
        if not writer.acquire(timeout=self.busy_timeout):
            raise Unavailable(f"shard {shard}: no write turn within {self.busy_timeout} s")
        try:
            self._run(shard, "BEGIN IMMEDIATE")
            try:
                yield
                self._run(shard, "COMMIT")
            except BaseException:
                conn = self._conn(shard)
                if conn.in_transaction:
                    conn.rollback()
                raise
        finally:
            writer.release()

    # -- writes -----------------------------------------------------------------

    def apply(
        self,
        shard: int,
        edges: Sequence[EdgeTuple],
        objects: Sequence[ObjRow],
        nodes: Sequence[NodeRow] = (),
    ) -> Changes:
        changed_edges: list[tuple[EdgeTuple | None, EdgeTuple]] = []
        changed_objects: list[ObjRow] = []
        changed_nodes: list[NodeRow] = []
        with self._transaction(shard):
            if nodes:
                stored = self.node_states(shard, [(row[0], row[1]) for row in nodes])
                changed_nodes = merge_nodes(stored, nodes)
                if changed_nodes:
                    self._run(shard, _UPSERT_NODE, changed_nodes, many=True)
            if edges:
                current = self._current_edges(shard, edges)
                changed_edges, deltas = merge_edges(current, edges)
                if changed_edges:
                    self._run(shard, _UPSERT_EDGE, [new for _, new in changed_edges], many=True)
                if deltas:
                    counts = [(*key, n) for key, n in deltas.items()]
                    self._run(shard, _ADD_COUNT, counts, many=True)
            if objects:
                ids = [row[0] for row in objects]
                current_objects = {row[0]: row for row in self.objects(shard, ids)}
                changed_objects = merge_objects(current_objects, objects)
                if changed_objects:
                    stored_rows = [(*row[:5], pack(row[5])) for row in changed_objects]
                    self._run(shard, _UPSERT_OBJ, stored_rows, many=True)
        return Changes(changed_edges, changed_objects, changed_nodes)

    def _current_edges(self, shard: int, writes: Sequence[EdgeTuple]) -> dict[EdgeKey, EdgeTuple]:
        lists: dict[tuple[int, int], set[int]] = {}  # (id1, atype) -> id2s
        targets: dict[tuple[int, int], set[int]] = {}  # (atype, id2) -> id1s
        for row in writes:
            lists.setdefault((row[0], row[1]), set()).add(row[2])
            targets.setdefault((row[1], row[2]), set()).add(row[0])
        current: dict[EdgeKey, EdgeTuple] = {}
        if len(targets) < len(lists):
            # Many lists, few targets: the mirrored rows of one node's edges
            # (everyone who follows a celebrity). Look them up by target.
            for (atype, id2), id1s in targets.items():
                for row in self._edges_to(shard, atype, id2, list(id1s)):
                    current[row[:3]] = row
            return current
        if len(lists) > 1:
            # Every stored edge has a count row, so a list without count rows
            # has no edges to read: a bulk load into new lists reads nothing.
            stored = self._lists_with_counts(shard, list({id1 for id1, _ in lists}))
            lists = {key: id2s for key, id2s in lists.items() if key in stored}
        for (id1, atype), id2s in lists.items():
            for row in self.edges(shard, id1, atype, list(id2s)):
                current[row[:3]] = row
        return current

    def _edges_to(self, shard: int, atype: int, id2: int, id1s: list[int]) -> list[EdgeTuple]:
        rows: list[EdgeTuple] = []
        for start in range(0, len(id1s), _IN_CHUNK):
            chunk = id1s[start : start + _IN_CHUNK]
            sql = (
                f"SELECT {_EDGE_COLUMNS} FROM edges INDEXED BY edges_key "
                f"WHERE id1 IN ({','.join('?' * len(chunk))}) AND atype = ? AND id2 = ?"
            )
            rows += self._query(shard, sql, (*chunk, atype, id2))
        return rows

    def _lists_with_counts(self, shard: int, id1s: list[int]) -> set[tuple[int, int]]:
        found: set[tuple[int, int]] = set()
        for start in range(0, len(id1s), _IN_CHUNK):
            chunk = id1s[start : start + _IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT DISTINCT id1, atype FROM counts WHERE id1 IN ({marks})"
            found.update(self._query(shard, sql, chunk))
        return found

    def allocate(self, shard: int, n: int) -> int:
        with self._transaction(shard):
            self._run(shard, "INSERT OR IGNORE INTO seq (name, value) VALUES ('objects', 0)")
            (last,) = self._query(
                shard,
                "UPDATE seq SET value = value + ? WHERE name = 'objects' RETURNING value",
                (n,),
            )[0]
        return int(last) - n + 1

    # -- reads ------------------------------------------------------------------

    def scan(self, shard: int, query: EdgeScan) -> list[ListRow]:
        seek = query.seek
        high, low = query.high, query.low
        if seek.boundary is not None:
            # A boundary tighter than the time bound must be the one the index
            # seeks on; otherwise SQLite seeks on time and filters its way down.
            if seek.forward and high is not None and seek.boundary[0] <= high:
                high = None
            if not seek.forward and low is not None and seek.boundary[0] >= low:
                low = None
        params: list[Any] = [query.id1, query.atype, query.state]
        if high is not None:
            params.append(high)
        if low is not None:
            params.append(low)
        if seek.boundary is not None:
            params.extend(seek.boundary)
        params.append(query.limit)
        if query.offset:
            params.append(query.offset)
        sql = _scan_sql(
            high is not None,
            low is not None,
            seek.boundary is not None,
            seek.forward,
            seek.inclusive,
            bool(query.offset),
        )
        return self._query(shard, sql, params)

    def edges(self, shard: int, id1: int, atype: int, id2s: Sequence[int]) -> list[EdgeRow]:
        rows: list[EdgeRow] = []
        for start in range(0, len(id2s), _IN_CHUNK):
            chunk = id2s[start : start + _IN_CHUNK]
            if len(chunk) == 1:
                sql = _SELECT_EDGES + " AND id2 = ?"
            else:
                sql = _SELECT_EDGES + f" AND id2 IN ({','.join('?' * len(chunk))})"
            rows.extend(EdgeRow(*r) for r in self._query(shard, sql, (id1, atype, *chunk)))
        return rows

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
        op, order = ("<", "DESC") if forward else (">", "ASC")
        sql = "SELECT id2, state, time FROM edges INDEXED BY edges_key WHERE id1 = ? AND atype = ?"
        params: list[Any] = [id1, atype]
        if boundary is not None:
            sql += f" AND id2 {op} ?"
            params.append(boundary)
        sql += f" AND state IN ({','.join('?' * len(states))}) ORDER BY id2 {order} LIMIT ?"
        return self._query(shard, sql, [*params, *states, limit])

    def node_states(
        self, shard: int, keys: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], NodeRow]:
        found: dict[tuple[int, int], NodeRow] = {}
        for key in set(keys):
            for row in self._query(shard, _SELECT_NODE, key):
                found[key] = NodeRow(*row)
        return found

    def export_edges(self, shard: int, after: EdgeKey | None, limit: int) -> list[EdgeRow]:
        sql = f"SELECT {_EDGE_COLUMNS} FROM edges INDEXED BY edges_key"
        params: tuple[int, ...] = (limit,)
        if after is not None:
            sql += " WHERE (id1, atype, id2) > (?, ?, ?)"
            params = (*after, limit)
        sql += " ORDER BY id1, atype, id2 LIMIT ?"
        return [EdgeRow(*r) for r in self._query(shard, sql, params)]

    def counts(self, shard: int, id1: int, atype: int) -> dict[int, int]:
        rows = self._query(
            shard, "SELECT state, n FROM counts WHERE id1 = ? AND atype = ?", (id1, atype)
        )
        return dict(rows)

    def objects(self, shard: int, ids: Sequence[int]) -> list[ObjRow]:
        rows: list[ObjRow] = []
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            sql = f"SELECT {_OBJ_COLUMNS} FROM objects WHERE id IN ({','.join('?' * len(chunk))})"
            rows.extend(_obj_row(r) for r in self._query(shard, sql, chunk))
        return rows

    # -- home timelines (`_timeline_list`) ---------------------------------------

    def timelines(self, shard: int, owners: Sequence[int]) -> dict[int, bytes]:
        found: dict[int, bytes] = {}
        owners = list(owners)
        for start in range(0, len(owners), _IN_CHUNK):
            chunk = owners[start : start + _IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT owner, entries FROM timelines WHERE owner IN ({marks})"
            found.update((owner, bytes(blob)) for owner, blob in self._query(shard, sql, chunk))
        return found

    def merge_timelines(
        self, shard: int, writes: Mapping[int, Sequence[TimelineEntry]], cap: int
    ) -> int:
        with self._transaction(shard):
            stored = self.timelines(shard, list(writes))
            changed = []
            for owner, entries in writes.items():
                blob = merge_blob(stored.get(owner), entries, cap)
                if blob is not None:
                    changed.append((owner, blob))
            if changed:
                sql = "INSERT OR REPLACE INTO timelines (owner, entries) VALUES (?, ?)"
                self._run(shard, sql, changed, many=True)
        return len(changed)

    def objects_page(self, shard: int, otype: int, after: int, limit: int) -> list[ObjRow]:
        sql = f"SELECT {_OBJ_COLUMNS} FROM objects WHERE id > ? AND otype = ? ORDER BY id LIMIT ?"
        return [_obj_row(r) for r in self._query(shard, sql, (after, otype, limit))]

    def objects_count(self, shard: int, otype: int) -> int:
        sql = "SELECT COUNT(*) FROM objects INDEXED BY objects_recent WHERE otype = ?"
        return int(self._query(shard, sql, (otype,))[0][0])

    def objects_since(
        self, shard: int, otype: int, after: tuple[int, int], limit: int
    ) -> list[ObjRow]:
        sql = (
            f"SELECT {_OBJ_COLUMNS} FROM objects INDEXED BY objects_recent "
            "WHERE otype = ? AND (updated_at, id) > (?, ?) ORDER BY updated_at, id LIMIT ?"
        )
        return [_obj_row(r) for r in self._query(shard, sql, (otype, *after, limit))]

    # -- secondary indexes (`_entities`) ------------------------------------------

    def index_apply(self, shard: int, entries: Sequence[IndexEntry]) -> int:
        by_index: dict[int, list[IndexEntry]] = {}
        for entry in entries:
            by_index.setdefault(entry[0], []).append(entry)
        changed = 0
        known = self._index_tables()
        try:
            with self._transaction(shard):
                for index, writes in by_index.items():
                    if (shard, index) not in known:
                        for ddl in _index_ddl(index):
                            self._run(shard, ddl)
                    ids = list({entry[2] for entry in writes})
                    current = {row[:3]: row for row in self.index_entries(shard, index, ids)}
                    winners = merge_entries(current, writes)
                    if winners:
                        sql = f"INSERT OR REPLACE INTO index_{index} VALUES (?, ?, ?, ?, ?)"
                        self._run(shard, sql, [entry[1:] for entry in winners], many=True)
                    changed += len(winners)
        except AssocdbError as exc:
            if "no such table" in str(exc):  # dropped meanwhile: the retry creates it again
                known.difference_update((shard, index) for index in by_index)
            raise
        known.update((shard, index) for index in by_index)
        return changed

    def _index_tables(self) -> set[tuple[int, int]]:
        """The index tables this thread's connections know exist: (shard, index)."""
        known: set[tuple[int, int]] | None = getattr(self._local, "index_tables", None)
        if known is None:
            known = self._local.index_tables = set()
        return known

    def index_entries(self, shard: int, index: int, ids: Sequence[int]) -> list[IndexEntry]:
        found: list[IndexEntry] = []
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            sql = (
                f"SELECT ikey, id, updated_at, version, state FROM index_{index} "
                f"WHERE id IN ({','.join('?' * len(chunk))})"
            )
            found += [
                (index, bytes(k), i, u, v, s)
                for k, i, u, v, s in self._index_query(shard, index, sql, chunk)
            ]
        return found

    def index_scan(self, shard: int, index: int, scan: IndexScan) -> list[tuple[bytes, int]]:
        cmp, order = ("<", "DESC") if scan.desc else (">", "ASC")
        sql = f"SELECT ikey, id FROM index_{index} WHERE ikey >= ? AND ikey < ?"
        params: list[Any] = [scan.low, scan.high]
        if scan.after is not None:
            sql += f" AND (ikey, id) {cmp} (?, ?)"
            params += scan.after
        sql += f" AND state = 0 ORDER BY ikey {order}, id {order} LIMIT ?"
        rows = self._index_query(shard, index, sql, [*params, scan.limit])
        return [(bytes(k), i) for k, i in rows]

    def index_export(
        self, shard: int, index: int, after: tuple[bytes, int] | None, limit: int
    ) -> list[IndexEntry]:
        sql = f"SELECT ikey, id, updated_at, version, state FROM index_{index}"
        params: list[Any] = []
        if after is not None:
            sql += " WHERE (ikey, id) > (?, ?)"
            params += after
        sql += " ORDER BY ikey, id LIMIT ?"
        rows = self._index_query(shard, index, sql, [*params, limit])
        return [(index, bytes(k), i, u, v, s) for k, i, u, v, s in rows]

    def index_purge(self, shard: int, index: int, before: int) -> int:
        sql = f"DELETE FROM index_{index} WHERE state = 3 AND updated_at < ?"
        try:
            with self._transaction(shard):
                return int(self._run(shard, sql, (before,)).rowcount)
        except AssocdbError as exc:
            if "no such table" not in str(exc):
                raise
            return 0

    def index_drop(self, shard: int, index: int) -> None:
        self._index_tables().discard((shard, index))
        with self._transaction(shard):
            self._run(shard, f"DROP TABLE IF EXISTS index_{index}")

    def _index_query(self, shard: int, index: int, sql: str, params: Any) -> list[Any]:
        try:
            return self._query(shard, sql, params)
        except AssocdbError as exc:
            if "no such table" not in str(exc):
                raise
            return []  # nothing written to this index on this shard yet

    # -- graph-wide settings and maintenance -------------------------------------

    def get_meta(self, key: str) -> bytes | None:
        rows = self._query(0, "SELECT value FROM meta WHERE key = ?", (key,))
        return bytes(rows[0][0]) if rows else None

    def swap_meta(self, key: str, expected: bytes | None, value: bytes) -> bool:
        with self._transaction(0):
            if self.get_meta(key) != expected:
                return False
            self._run(0, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
        return True

    def recount(self, shard: int, repair: bool) -> list[CountMismatch]:
        with self._transaction(shard):
            actual = {
                (id1, atype, state): n
                for id1, atype, state, n in self._query(
                    shard, "SELECT id1, atype, state, COUNT(*) FROM edges GROUP BY 1, 2, 3"
                )
            }
            stored = {
                (id1, atype, state): n
                for id1, atype, state, n in self._query(
                    shard, "SELECT id1, atype, state, n FROM counts"
                )
            }
            wrong = [
                CountMismatch(shard, *key, stored.get(key, 0), actual.get(key, 0))
                for key in sorted(actual.keys() | stored.keys())
                if stored.get(key, 0) != actual.get(key, 0)
            ]
            if repair and wrong:
                fixes = [(m.id1, m.atype, m.state, m.actual) for m in wrong]
                self._run(
                    shard,
                    "INSERT OR REPLACE INTO counts (id1, atype, state, n) VALUES (?, ?, ?, ?)",
                    fixes,
                    many=True,
                )
        return wrong

    def spec(self) -> dict[str, Any]:
        return {"kind": "sqlite", "path": str(self.path), "shards": self.shards}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()


def _stored_shards(root: Path) -> int | None:
    file = root / "shard-0000.db"
    if not file.exists():
        return None
    with _setup_lock(root):  # not while another process is still setting the file up
        try:
            conn = _read_only_shard(file) if not _writable_dir(root) else sqlite3.connect(file)
        except sqlite3.Error as exc:
            raise map_driver_error(exc, f"opening {file}") from exc
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'shards'").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise map_driver_error(exc, f"reading {file}") from exc
            row = None  # created, but a crash came before the graph was complete
        finally:
            conn.close()
    return int(row[0]) if row else None


def _writable_dir(root: Path) -> bool:
    """Whether the graph directory can be written (a missing one: it is to be created)."""
    return not root.exists() or os.access(root, os.W_OK)


def _read_only_shard(file: Path) -> sqlite3.Connection:
    """A shard of a read-only directory, as it is: `immutable` needs no lock or -shm file
    (which it could not create). A shard never written is empty. A WAL file that was
    never checkpointed (an unclean stop) cannot be read this way: say so."""
    wal = file.with_name(file.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise Unavailable(
            f"{file} is on a read-only file system with writes still in its WAL file "
            f"({wal.name}, left by an unclean stop): copy the directory somewhere "
            "writable and open it there"
        )
    if not file.exists():
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.executescript(_DDL)
        return conn
    uri = f"file:{file}?immutable=1"
    return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)


@contextmanager
def _setup_lock(root: Path) -> Iterator[None]:
    """Hold the graph directory's setup lock (threads and processes alike).

    A shard file's one-time setup (creating it, switching it to WAL, its DDL)
    fails with "database is locked" when two connections do it at once, and
    SQLite's busy handler does not cover the switch to WAL: so connections are
    set up one at a time, under an flock on `.setup.lock`. A directory that
    cannot hold the lock file (read-only) has nothing to set up.
    """
    try:
        fd = os.open(root / SETUP_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # and with it the lock


def _obj_row(row: Any) -> ObjRow:
    return ObjRow(row[0], row[1], row[2], row[3], row[4], unpack(row[5]))


@lru_cache(maxsize=1024)
def _index_ddl(index: int) -> tuple[str, str]:
    return (
        f"CREATE TABLE IF NOT EXISTS index_{index} (ikey BLOB NOT NULL, id INTEGER NOT NULL, "
        "updated_at INTEGER NOT NULL, version INTEGER NOT NULL, state INTEGER NOT NULL, "
        "PRIMARY KEY (ikey, id)) "
        "WITHOUT ROWID",
        f"CREATE INDEX IF NOT EXISTS index_{index}_by_id ON index_{index} (id)",
    )


@lru_cache(maxsize=64)
def _scan_sql(
    high: bool, low: bool, boundary: bool, forward: bool, inclusive: bool, offset: bool
) -> str:
    where = "id1 = ? AND atype = ? AND state = ?"
    if high:
        where += " AND time <= ?"
    if low:
        where += " AND time >= ?"
    if boundary:
        op = ("<" if forward else ">") + ("=" if inclusive else "")
        where += f" AND (time, id2) {op} (?, ?)"
    order = "DESC" if forward else "ASC"
    sql = (
        f"SELECT id2, time, updated_at, data FROM edges WHERE {where} "
        f"ORDER BY time {order}, id2 {order} LIMIT ?"
    )
    return sql + " OFFSET ?" if offset else sql
