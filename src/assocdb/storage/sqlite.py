"""The SQLite engine: one database file per logical shard, in WAL mode.

Tables per shard (`_DDL`):

* `edges`, clustered on `(id1, atype, state, time, id2)`, the order lists are
  read in, so a page of a list is one contiguous range of one B-tree and
  needs no second lookup; `edges_key`, a unique index on `(id1, atype, id2)`,
  enforces one edge per pair and serves point lookups.
* `counts (id1, atype, state) -> n`, changed in the same transaction as edges.
* `objects (id) -> (otype, state, version, updated_at, data)`.
  Data is zlib-compressed when that pays (`core.compress`); `objects_recent`
  `(otype, updated_at)` serves the index cleaner's pass over recent writes.
* `index_N (ikey, id) -> (updated_at, version, state)`, one table per secondary index
  (`core.entities`), created when first written, with `index_N_by_id` on `id`.
* `timelines (owner) -> entries`, packed home timelines (`core.timeline_list`).
* `seq` (the shard's id allocator) and `meta` (graph-wide settings, shard 0).

Durability: WAL with synchronous=NORMAL: a committed transaction survives a
process crash; `make_durable` (an fsync of the WAL) makes it survive a power
loss. Journaled writes are covered by the journal until the fence syncs their
shards; settings, id reservations and DDL are synced before they return
(`SQLBackend._durably`).

Every method is `sql.SQLBackend`'s; this module holds SQLite's dialect and
its connections. Each thread gets its own connection per shard (SQLite
connections are not shared across threads; WAL lets readers run beside the
one writer). A write transaction starts with `BEGIN IMMEDIATE`, which takes
the file's write lock, so reads inside it need no locking clause; within the
process, writers of a shard queue on a lock of their own first (`_writing`).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import zlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import lru_cache
from operator import itemgetter
from pathlib import Path
from time import perf_counter
from typing import Any, cast

from ..core.errors import AssocdbError, InvalidRequest, Unavailable
from ..core.merge import EdgeTuple
from ..core.scans import ListRow, ListsUnion, ListsUnions, SetScan, ShortProbe
from .backend import map_driver_error
from .changesignal import ChangeSignal, open_signal
from .dialect import Session
from .prepared import Held
from .sql import SLOW_SECONDS, SQLBackend
from .sqlfeed import ddl
from .sqlitebulk import NewRows, replacing
from .sqlopen import check_shards, open_graph
from .sqlsets import packed_unions, short_ids_template
from .sqlsets import set_ids as sets_ids
from .sqltext import insert, marks
from .writerlock import WriterLock

_TIMELINES_DDL = (
    "CREATE TABLE IF NOT EXISTS timelines (owner INTEGER PRIMARY KEY, entries BLOB NOT NULL)"
)
_DDL = f"""
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
{_TIMELINES_DDL};
CREATE TABLE IF NOT EXISTS seq (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
"""

SETUP_LOCK = ".setup.lock"
WRITER_LOCK = ".writers.lock"  # `storage.writerlock`
#: How long an object write waits for another process's batch to let the writer lock
#: go before it is refused (Unavailable): batches hold it for milliseconds.
WRITER_LOCK_TIMEOUT = 30.0
ROW_HASH = "assocdb_row_hash"  # the SQL function `_row_hash`, on every connection


class SQLiteDialect:
    """SQLite's spelling of what `SQLBackend` says (see `sql.Dialect`)."""

    begin = "BEGIN IMMEDIATE"  # takes the write lock: the reads after it lock nothing
    lock = ""
    share = ""
    row_values = True
    meta_key = "key"
    timelines_ddl = _TIMELINES_DDL
    feed_ddl = ddl("BLOB", key="INTEGER")
    feed_settle = feed_now = ""  # a write transaction holds the shard's one write lock
    feed_recheck = 0.0  # (a read of a cached page: ~3 us)

    def use_index(self, name: str) -> str:
        return f" INDEXED BY {name}"

    def upsert(self, table: str, columns: Sequence[str], key: int, add: bool = False) -> str:
        if not add:  # replaces the row that holds any of the table's unique keys
            return insert(table, columns).replace("INSERT", "INSERT OR REPLACE", 1)
        sums = ", ".join(f"{c} = {c} + excluded.{c}" for c in columns[key:])
        conflict = ", ".join(columns[:key])
        return f"{insert(table, columns)} ON CONFLICT ({conflict}) DO UPDATE SET {sums}"

    def index_ddl(self, index: int) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS index_{index} (ikey BLOB NOT NULL, id INTEGER NOT NULL, "
            "updated_at INTEGER NOT NULL, version INTEGER NOT NULL, state INTEGER NOT NULL, "
            "PRIMARY KEY (ikey, id)) WITHOUT ROWID",
            f"CREATE INDEX IF NOT EXISTS index_{index}_by_id ON index_{index} (id)",
        ]

    def missing_table(self, exc: AssocdbError) -> bool:
        return "no such table" in str(exc)

    def retryable(self, exc: AssocdbError) -> bool:
        return False  # one writer at a time: no deadlocks

    def gone(self, exc: AssocdbError) -> bool:
        return False  # a file does not hang up

    def row_hash(self, columns: Sequence[str]) -> str:
        return f"{ROW_HASH}({', '.join(columns)})"  # SQLite has no hash: `_row_hash`


class SQLiteBackend(SQLBackend):
    """Shards as SQLite files `shard-NNNN.db` in one directory."""

    local = True
    packed_rows = True  # `bulk_merge` takes a load's `PackedRows` (`sqlitebulk`)
    driver_errors = (sqlite3.Error,)
    # A union's rows packed by the engine into one JSON array (`_union_rows`): a
    # two-hop reach fetched ~500 rows, each a tuple and an int built by the driver.
    _union_packed = sqlite3.sqlite_version_info >= (3, 38, 0)  # (JSON built in)

    def __init__(self, path: Path, shards: int, busy_timeout: float = 2.0) -> None:
        super().__init__(shards, SQLiteDialect(), busy_timeout)
        self.path = path
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # One writer per shard at a time in this process. Without it, threads'
        # connections contend for the file lock through SQLite's busy handler,
        # which sleeps (1, 2, 5 … 100 ms) instead of queueing.
        self._writers = [threading.Lock() for _ in range(shards)]
        self._closed = False
        self._unions: dict[tuple[int, bool, bool], list[str]] = {}  # `unions`, by shard
        #: Per shard, the WAL file (inode) whose name the directory has on disk: SQLite
        #: makes a new WAL when a graph is opened again, and its name is durable only
        #: once the directory is synced (`make_durable`).
        self._named_wals: dict[int, int] = {}
        #: A graph on a read-only file system (a snapshot, a read-only mount) is
        #: read as it is; its writes fail.
        self.read_only = not _writable_dir(path)
        self._writer_lock = WriterLock(path / WRITER_LOCK, WRITER_LOCK_TIMEOUT)
        #: This backend's slot in the graph's change signal: its write transactions tell
        #: other processes' caches that rows changed (`storage.changesignal`).
        self.signal: ChangeSignal | None = None if self.read_only else open_signal(path)
        self._new_rows = NewRows()  # a bulk load's rounds of new keys (`sqlitebulk`)

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
        check_shards(shards)
        if root.exists() and not root.is_dir():
            raise InvalidRequest(f"{root} is a file, not a graph directory")

        def make(count: int, new: bool) -> SQLiteBackend:
            if new:
                root.mkdir(parents=True, exist_ok=True)
                _sync_directory(root.parent)  # the graph's own name, on the disk
            return cls(root, count, busy_timeout)

        backend = open_graph(str(root), shards, _stored_shards(root), create, make)
        if backend is None:  # another process created the graph first: open that one
            return cls.open(root, shards, busy_timeout, create=False)
        return backend

    # -- connections ------------------------------------------------------------

    def _conn(self, shard: int) -> Session:
        """This thread's connection to the shard."""
        sessions: list[Session | None] | None = getattr(self._local, "sessions", None)
        if sessions is None:
            sessions = self._local.sessions = [None] * self.shards
        session = sessions[shard]
        if session is None:
            session = sessions[shard] = Session(self._connect(shard))
        return session

    def _connect(self, shard: int) -> sqlite3.Connection:
        if self._closed:
            raise InvalidRequest("this graph has been closed")
        file = self.path / f"shard-{shard:04d}.db"
        try:
            if self.read_only:
                conn = _with_functions(_read_only_shard(file))
                with self._lock:
                    self._all.append(conn)
                return conn
            with setup_lock(self.path):
                conn = sqlite3.connect(
                    file, timeout=self.timeout, isolation_level=None, check_same_thread=False
                )
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA mmap_size = 268435456")
                conn.execute("PRAGMA cache_size = -16000")
                conn.executescript(_DDL)
                _with_functions(conn)
        except sqlite3.Error as exc:
            raise map_driver_error(exc, f"opening {file}") from exc
        with self._lock:
            self._all.append(conn)
        return conn

    def _map_error(self, exc: Exception, where: str) -> AssocdbError:
        """SQLite's "attempt to write a readonly database" in the journal's words."""
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if self.read_only and code == sqlite3.SQLITE_READONLY:
            return Unavailable(
                f"{self.path} is on a read-only file system: this graph can be read, not written"
            )
        return super()._map_error(exc, where)

    def _render(self, template: str, shard: int) -> str:
        return template.replace("{s}.", "")  # a shard is a file of its own

    def _probe_template(self, ids: int, states: int, forward: bool, limited: bool) -> str:
        """The probe driven by its ids, the outer loop of the join (`CROSS JOIN` keeps it
        there): SQLite seeks them in the order bound and stops at the limit, where an
        `IN` list is first sorted into a temporary index (a first page of an
        intersection, 200 ids: ~150 against ~130 µs). With JSON (`_union_packed`) the
        ids are one JSON array read by `json_each` (one statement whatever their count,
        one parameter bound), else a `VALUES` list."""
        ids_sql = (
            "SELECT value AS id2 FROM json_each(?)"
            if self._union_packed
            else f"VALUES {','.join(['(?)'] * ids)}"
        )
        template = (
            f"WITH ids (id2) AS ({ids_sql}) SELECT ids.id2 FROM ids "
            f"CROSS JOIN edges{self._by_key} ON edges.id1 = ? AND edges.atype = ? "
            f"AND edges.id2 = ids.id2 AND edges.state IN ({marks(states)})"
        )
        return template + " LIMIT ?" if limited else template

    def _union_rows_template(self, id1s: int, states: int, bounded: bool, fwd: bool) -> str:
        return _union_rows(id1s, states, bounded, fwd)

    def set_ids(self, shard: int, query: SetScan) -> list[int]:
        if type(query) is not ListsUnion or not self._union_packed:
            return sets_ids(self, shard, query)
        return self.unions(ListsUnions({shard: query.id1s}, *query[1:]))[0]

    def unions(self, query: ListsUnions) -> list[list[int]]:
        if not self._union_packed:
            return super().unions(query)
        # A union's lists (a two-hop reach: ~12 shards a call): the statement by shape,
        # one per shard, from one dict, and this thread's connections, all looked up
        # once a call (a `set_ids` a shard cost ~2.4 µs more a statement).
        key = (len(query.states), query.boundary is not None, query.forward)
        sqls = self._unions.get(key)
        if sqls is None:
            template = _union_rows(0, *key)
            sqls = self._unions[key] = [self._q(template, s) for s in range(self.shards)]
        sessions: list[Session | None] | None = getattr(self._local, "sessions", None)
        if sessions is None or None in map(sessions.__getitem__, query.groups):
            for shard in query.groups:  # (this thread's first read of one of them)
                self._conn(shard)
            sessions = self._local.sessions
        return packed_unions(self, query, cast("list[Session]", sessions), sqls)

    def probe_short(self, shard: int, query: ShortProbe) -> list[int] | None:
        # The short list's ids go from one statement to the next as the JSON array the
        # engine builds (`json_group_array`, bound for the probe's `json_each`): they
        # never become Python ints (a mutual of two nodes on two shards, its first
        # list's ~200 ids fetched, then bound again: ~2x the statements' time).
        if not self._union_packed:
            return super().probe_short(shard, query)
        q = query
        bounded = q.boundary is not None
        shape = (shard, -1, len(q.states), bounded, q.forward)  # (-1: a short list's JSON)
        sql = self._set_sql.get(shape)
        if sql is None:
            scan = short_ids_template(self._by_key, len(q.states), bounded, q.forward)
            sql = self._set_sql[shape] = self._q(scan, shard)
        params: list[Any] = [q.id1, q.atype]
        if bounded:
            params.append(q.boundary)
        count, ids = self._query(shard, sql, [*params, *q.states, q.size])[0]
        if count >= q.size:
            return None
        if not count:
            return []
        other = q.other_shard
        probe = self._probe_sql(other, 0, len(q.other_states), q.forward, True)
        params = [ids, q.other, q.other_atype, *q.other_states, q.limit]
        return [row[0] for row in self._query(other, probe, params)]

    def _probe_params(
        self, id1: int, atype: int, id2s: Sequence[int], states: Sequence[int], left: int | None
    ) -> list[Any]:
        if self._union_packed:
            params: list[Any] = [_json_ids(id2s), id1, atype, *states]
        else:
            params = [*id2s, id1, atype, *states]
        if left is not None:
            params.append(left)
        return params

    def list_rows(self, shard: int, id1: int, atype: int, state: int, id2s: Any) -> list[ListRow]:
        # Each id2 a lookup of `edges_key` driven by a VALUES list, the few rows sorted
        # here: an IN list is first sorted into a temporary index and the rows again for
        # ORDER BY (which of 10 ids, driver call alone: p50 ~18.4 -> ~14.7 µs).
        rows: list[ListRow] = self._query(shard, _list_rows(len(id2s)), (*id2s, id1, atype, state))
        if len(rows) > 1:
            rows.sort(key=_NEWEST_FIRST, reverse=True)
        return rows

    def _execute(self, session: Session, sql: str, params: Any, many: bool) -> list[Any]:
        # One cursor per session, reused: `Connection.execute` makes a new cursor per
        # statement (each statement here is run whole, its rows fetched at once).
        cursor = session.cursor
        if cursor is None:
            cursor = session.cursor = session.conn.cursor()
        if many:
            if type(params) is list and len(params) == 1:  # (a lone write's upserts)
                cursor.execute(sql, params[0])
            else:
                cursor.executemany(sql, params)
            return []
        return cursor.execute(sql, params).fetchall()  # type: ignore[no-any-return]

    def _run(
        self, session: Session, shard: int, sql: str, params: Any = (), many: bool = False
    ) -> list[Any]:
        # `SQLBackend._run` with `_execute` inlined: every statement of a write comes
        # through here (~10 a lone write), and the driver call is one frame less. The
        # same choke point: faults, timing, tracers, the slow log, the errors mapped.
        start = perf_counter()
        try:
            if self.faults:
                for fault in self.faults:
                    fault(shard, sql)
            cursor = session.cursor
            if cursor is None:
                cursor = session.cursor = session.conn.cursor()
            if not many:
                rows: list[Any] = cursor.execute(sql, params).fetchall()
            else:
                rows = []
                if type(params) is list and len(params) == 1:  # (a lone write's upserts)
                    cursor.execute(sql, params[0])
                else:
                    cursor.executemany(sql, params)
        except AssocdbError:  # a fault injector's own error
            raise
        except sqlite3.Error as exc:
            session.broken = True
            raise self._map_error(exc, f"shard {shard}") from exc
        seconds = perf_counter() - start
        if self.tracers or seconds > SLOW_SECONDS:
            self._report(shard, sql, seconds, many)
        return rows

    def _query(self, shard: int, sql: str, params: Any = (), slow: bool = False) -> list[Any]:
        return self._run(self._conn(shard), shard, sql, params)

    def _writing(self, shard: int, slow: bool) -> AbstractContextManager[Session]:
        return _Writing(self, shard)

    def _bulk_new(self, session: Session, shard: int, edges: Sequence[EdgeTuple]) -> int | None:
        return self._new_rows.insert(self, session, shard, edges)

    def _bulk_store(
        self, session: Session, shard: int, changed: Sequence[tuple[EdgeTuple | None, EdgeTuple]]
    ) -> None:
        # The merged rows in key order, 100 a multi-row statement (`sqlitebulk.replacing`).
        for sql, rows, many in replacing(sorted([new for _, new in changed])):
            self._run(session, shard, sql, rows, many=many)

    def _rollback(self, session: Session, shard: int) -> None:
        if session.conn.in_transaction:  # a connection survives any error: keep it
            session.conn.rollback()

    @contextmanager
    def write_turns(self) -> Iterator[None]:
        """Every shard's write turn in this process, taken in shard order (a backup's cut,
        `storage/sqlitecut.py`: this process's writers queue here rather than in SQLite's
        busy handler, which sleeps up to 100 ms at a time)."""
        taken: list[threading.Lock] = []
        try:
            for shard, writer in enumerate(self._writers):
                if not writer.acquire(timeout=self.timeout):
                    raise Unavailable(f"shard {shard}: no write turn within {self.timeout} s")
                taken.append(writer)
            yield
        finally:
            for writer in reversed(taken):
                writer.release()

    def exclusive_writes(self) -> AbstractContextManager[None]:
        return nullcontext() if self.read_only else self._writer_lock

    def make_durable(self, shards: Sequence[int]) -> None:
        """fsync each shard's WAL: with synchronous=NORMAL a commit is in the WAL
        but not yet on the disk; a checkpoint syncs what it copies, so the WAL is
        the one file that can hold unsynced commits. A WAL new since the last
        call also needs its name on the disk: the directory is synced too (SQLite
        would do that on the WAL's first sync, which synchronous=NORMAL never does)."""
        if self.read_only:
            return
        new: dict[int, int] = {}
        for shard in shards:
            for name in (f"shard-{shard:04d}.db-wal", f"shard-{shard:04d}.db"):
                try:
                    fd = os.open(self.path / name, os.O_RDONLY)
                except FileNotFoundError:
                    continue  # no WAL (never written, or the last connection closed)
                except OSError as exc:
                    raise Unavailable(f"shard {shard}: cannot sync {name}: {exc}") from exc
                try:
                    os.fsync(fd)
                    if name.endswith("-wal"):
                        inode = os.fstat(fd).st_ino
                        if self._named_wals.get(shard) != inode:
                            new[shard] = inode
                except OSError as exc:
                    raise Unavailable(f"shard {shard}: cannot sync {name}: {exc}") from exc
                finally:
                    os.close(fd)
                break
        if new:
            _sync_directory(self.path)
            self._named_wals.update(new)

    def spec(self) -> dict[str, Any]:
        return {"kind": "sqlite", "path": str(self.path), "shards": self.shards}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._writer_lock.close()
        if self.signal is not None:
            self.signal.close()
        self._local = threading.local()


def _stored_shards(root: Path) -> int | None:
    file = root / "shard-0000.db"
    if not file.exists():
        return None
    with setup_lock(root):  # not while another process is still setting the file up
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


def _with_functions(conn: sqlite3.Connection) -> sqlite3.Connection:
    """The connection, with the functions the SQL of `SQLBackend` calls registered."""
    conn.create_function(ROW_HASH, -1, _row_hash, deterministic=True)
    return conn


def _row_hash(*values: Any) -> int:
    """A 32-bit hash of a row's values (the replica verifier's range checksums sum it)."""
    return zlib.crc32(repr(values).encode())


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
def setup_lock(root: Path) -> Iterator[None]:
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


def _sync_directory(path: Path) -> None:
    """fsync a directory: the names of the files created in it are then on the disk."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise Unavailable(f"cannot sync the directory {path}: {exc}") from exc


#: A list row's sort key, (time, id2): lists are newest first.
_NEWEST_FIRST = itemgetter(1, 0)


def _json_ids(ids: Sequence[int]) -> str:
    """`ids` as the JSON array `json_each` reads."""
    return f"[{','.join(map(str, ids))}]"


@lru_cache(maxsize=256)
def _list_rows(ids: int) -> str:
    """The list rows of `ids` id2s of one list in one state, in no order (`list_rows`)."""
    return (
        f"WITH ids (id2) AS (VALUES {','.join(['(?)'] * ids)})"
        " SELECT edges.id2, time, updated_at, data FROM ids CROSS JOIN edges INDEXED BY"
        " edges_key ON edges.id1 = ? AND edges.atype = ? AND edges.id2 = ids.id2"
        " AND edges.state = ?"
    )


@lru_cache(maxsize=256)
def _union_rows(id1s: int, states: int, bounded: bool, forward: bool) -> str:
    """The rows of a union's lists driven by their ids, seeking each list in the
    clustered order (parameters as `sqlsets.rows_template`'s). When the engine has
    JSON (`_union_packed`), the ids are bound as one JSON array read by `json_each`
    (`id1s` 0: no padding, one shape; a two-hop reach's statements ~17% faster than
    with a padded `VALUES` list) and the rows come back as one JSON array."""
    bound = f" AND edges.id2 {'<' if forward else '>'} ?" if bounded else ""
    on = f"edges.atype = ?{bound} AND edges.state IN ({marks(states)}) LIMIT ?"
    if SQLiteBackend._union_packed:
        rows = "SELECT edges.id2 FROM json_each(?) AS ids CROSS JOIN edges"
        rows += f" ON edges.id1 = ids.value AND {on}"
        return f"SELECT json_group_array(id2) FROM ({rows})"
    rows = f"SELECT edges.id2 FROM ids CROSS JOIN edges ON edges.id1 = ids.id1 AND {on}"
    return f"WITH ids (id1) AS (VALUES {','.join(['(?)'] * id1s)}) {rows}"


class _Writing(Held):
    """`SQLiteBackend._writing`: the shard's write turn in this process, and this thread's
    session on it. A class, not a generator: every write transaction takes one (a
    lone write two), and `contextmanager`'s generator and wrapper cost ~4 calls more.
    Also a `Held` turn itself (`enter`, `close`), without a `Turn` around it."""

    __slots__ = ("_b", "_held", "_shard", "_writer")

    def __init__(self, backend: SQLiteBackend, shard: int) -> None:
        self._b = backend
        self._shard = shard
        self._writer = backend._writers[shard]
        self._held = False

    def enter(self) -> Session:
        b = self._b
        if not self._writer.acquire(timeout=b.timeout):
            raise Unavailable(f"shard {self._shard}: no write turn within {b.timeout} s")
        self._held = True
        try:
            return b._conn(self._shard)
        except BaseException:
            self.close()
            raise

    __enter__ = enter

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Give the turn back (a second `close` does nothing)."""
        if not self._held:
            return
        self._held = False
        self._writer.release()
        signal = self._b.signal
        if signal is not None:  # (after the COMMIT: a reader then sees the rows)
            signal.bump()
