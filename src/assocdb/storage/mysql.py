"""The MySQL/MariaDB backend: one InnoDB schema per logical shard on one server.

A graph named NAME keeps its settings in schema `NAME_meta` and shard n in
schema `NAME_s{n}`, each with the tables of the SQLite backend:

* `edges`, clustered on `(id1, atype, state, time, id2)` (the order lists are
  read in, so a page is one contiguous primary-key range), with the unique
  key `edges_key (id1, atype, id2)` for one edge per pair and point lookups;
* `counts (id1, atype, state) -> n`, changed in the same transaction as edges;
* `objects` (with `objects_recent (otype, updated_at)`; data zlib-compressed when it
  pays, `_compress`), `node_states`, and `seq` (the shard's id allocator);
* `index_N`, one table per secondary index (`_mysql_indexes`, a mixin).

`apply` is the SQLite backend's: read the current rows of the written keys,
fold the writes in with the pure merge rule of `_merge`, store the changed
rows and the count deltas, in one transaction. Here the read is a locking
read (`SELECT ... FOR UPDATE`, REPEATABLE READ, set on every connection
whatever the server's default, so absent keys are gap-locked): two applies
on the same keys are serialized, and the second merges against the first's
result, so counts stay exact. When InnoDB breaks a deadlock between two
such transactions, the loser is simply run again (the merge is idempotent).

Connections come from one bounded pool per server (`_mysqlpool`); every
statement goes through `_run`, the choke point that times it, reports it to
the tracers and maps driver errors by PEP 249 class name.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import lru_cache
from typing import Any
from urllib.parse import quote

from ..core.compress import pack, unpack
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
from ..core.scans import EdgeScan, Id2Row, ListRow, Tracer
from ..core.timeline_list import Entry as TimelineEntry
from ..core.timeline_list import merge_blob
from .backend import ForgetHook, map_driver_error
from .mysql_indexes import MySQLIndexes
from .mysqlpool import Pool, Settings, connect_args, driver, parse_url
from .mysqlpool import errno_of as _errno

log = logging.getLogger("assocdb.mysql")

DEFAULT_SHARDS = 16
MAX_SHARDS = 4096
SLOW_SECONDS = 0.5
MAINTENANCE_TIMEOUT = 600.0  # recount and export scan whole shards
BULK_ROWS = 1000  # an apply of more rows runs with MAINTENANCE_TIMEOUT
_IN_CHUNK = 500  # ids per IN (...) list
_DEADLOCK_TRIES = 8
_RETRYABLE = {1213: "deadlock", 1020: "record changed"}  # the transaction may simply rerun
_GONE = {2006, 2013, 2055}  # the server closed an idle connection

_NO_TABLE = 1146  # ER_NO_SUCH_TABLE
_TIMELINES_DDL = """CREATE TABLE IF NOT EXISTS {s}.timelines (
    owner BIGINT NOT NULL PRIMARY KEY, entries MEDIUMBLOB NOT NULL
) ENGINE=InnoDB"""
_SHARD_DDL = [
    """CREATE TABLE IF NOT EXISTS {s}.edges (
        id1 BIGINT NOT NULL, atype INT NOT NULL, id2 BIGINT NOT NULL,
        state TINYINT NOT NULL, time BIGINT NOT NULL, updated_at BIGINT NOT NULL,
        data MEDIUMBLOB,
        PRIMARY KEY (id1, atype, state, time, id2),
        UNIQUE KEY edges_key (id1, atype, id2)
    ) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {s}.counts (
        id1 BIGINT NOT NULL, atype INT NOT NULL, state TINYINT NOT NULL, n BIGINT NOT NULL,
        PRIMARY KEY (id1, atype, state)
    ) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {s}.objects (
        id BIGINT NOT NULL PRIMARY KEY, otype INT NOT NULL, state TINYINT NOT NULL,
        version BIGINT NOT NULL, updated_at BIGINT NOT NULL, data MEDIUMBLOB NOT NULL,
        KEY objects_recent (otype, updated_at)
    ) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {s}.node_states (
        node BIGINT NOT NULL, atype INT NOT NULL, state TINYINT NOT NULL,
        updated_at BIGINT NOT NULL, PRIMARY KEY (node, atype)
    ) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {s}.seq (
        name VARCHAR(32) NOT NULL PRIMARY KEY, value BIGINT NOT NULL
    ) ENGINE=InnoDB""",
    # A capped home timeline (`_timeline_list`): up to 10,000 entries of 32 bytes.
    _TIMELINES_DDL,
]
_META_DDL = """CREATE TABLE IF NOT EXISTS {s}.meta (
    name VARCHAR(191) NOT NULL PRIMARY KEY, value MEDIUMBLOB NOT NULL
) ENGINE=InnoDB"""

_EDGE_COLUMNS = "id1, atype, id2, state, time, updated_at, data"
_SELECT_EDGES = (
    f"SELECT {_EDGE_COLUMNS} FROM {{s}}.edges FORCE INDEX (edges_key) WHERE id1 = %s AND atype = %s"
)
_UPSERT_EDGE = (
    f"INSERT INTO {{s}}.edges ({_EDGE_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
    "ON DUPLICATE KEY UPDATE state = VALUES(state), time = VALUES(time), "
    "updated_at = VALUES(updated_at), data = VALUES(data)"
)
_ADD_COUNT = (
    "INSERT INTO {s}.counts (id1, atype, state, n) VALUES (%s, %s, %s, %s) "
    "ON DUPLICATE KEY UPDATE n = n + VALUES(n)"
)
_SET_COUNT = (
    "INSERT INTO {s}.counts (id1, atype, state, n) VALUES (%s, %s, %s, %s) "
    "ON DUPLICATE KEY UPDATE n = VALUES(n)"
)
_UPSERT_NODE = (
    "INSERT INTO {s}.node_states (node, atype, state, updated_at) VALUES (%s, %s, %s, %s) "
    "ON DUPLICATE KEY UPDATE state = VALUES(state), updated_at = VALUES(updated_at)"
)
_SELECT_NODE = (
    "SELECT node, atype, state, updated_at FROM {s}.node_states WHERE node = %s AND atype = %s"
)
_OBJ_COLUMNS = "id, otype, state, version, updated_at, data"
_UPSERT_OBJ = (
    f"INSERT INTO {{s}}.objects ({_OBJ_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s) "
    "ON DUPLICATE KEY UPDATE otype = VALUES(otype), state = VALUES(state), "
    "version = VALUES(version), updated_at = VALUES(updated_at), data = VALUES(data)"
)

#: A connection checked out of the pool, and whether a driver error broke it.
Session = list[Any]


class MySQLBackend(MySQLIndexes):
    """Shards as InnoDB schemas `NAME_s{n}` on one MySQL or MariaDB server."""

    local = False

    def __init__(self, settings: Settings, shards: int) -> None:
        self.settings = settings
        self.shards = shards
        self.tracers: list[Tracer] = []
        self.forget_hooks: list[ForgetHook] = []  # one copy of each row: never called
        self.recovery_hooks: list[Callable[[], None]] = []  # no members: never called
        #: Called with (shard, sql) before every statement, inside the choke point
        #: (as on SQLite): a fault injector may raise a driver error or sleep.
        self.faults: list[Callable[[int, str], None]] = []
        self._driver = driver()
        self._mysqlclient = self._driver.__name__ == "MySQLdb"
        self._schemas = [f"`{settings.name}_s{n}`" for n in range(shards)]
        self._meta = f"`{settings.name}_meta`"
        self._sql: dict[tuple[str, int], str] = {}
        self._pool = self._new_pool(settings.query_timeout)
        self._slow_pool = self._new_pool(MAINTENANCE_TIMEOUT)

    @classmethod
    def open(
        cls, url: str, shards: int | None = None, *, create: bool = True, **options: Any
    ) -> MySQLBackend:
        """Open the graph a `mysql://user@host:port/NAME` URL names, creating it if new
        (with `create=False`, NotFound instead, and no schema is created).

        `options` (connect_timeout, query_timeout, pool_size) override the URL's.

        >>> MySQLBackend.open("mysql://root@127.0.0.1:3306/social", shards=16)
        """
        settings = parse_url(url, shards=shards, **options)
        shards = settings.shards
        if shards is not None and not 0 < shards <= MAX_SHARDS:
            raise InvalidRequest(f"shards must be an integer from 1 to {MAX_SHARDS}, got {shards}")
        probe = cls(settings, 1)
        try:
            stored = probe._stored_shards()
        finally:
            probe.close()
        if stored is not None:
            if shards is not None and shards != stored:
                raise InvalidRequest(
                    f"{settings.server_url()}{settings.name} holds a graph with {stored} shards, "
                    f"not {shards}; the shard count is fixed when a graph is created "
                    f"(omit shards to open it)"
                )
            return cls(settings._replace(shards=stored), stored)
        if not create:
            raise no_graph(f"{settings.server_url()}{settings.name}")
        count = shards or DEFAULT_SHARDS
        backend = cls(settings._replace(shards=count), count)
        backend._create()
        # The shard count is written last: a crash halfway leaves no graph, not half of one.
        if backend.swap_meta("shards", None, str(count).encode()):
            return backend
        backend.close()  # another process created the graph first: open that one
        return cls.open(url, shards, create=False, **options)

    @classmethod
    def drop(cls, url: str) -> None:
        """Drop every schema of the graph the URL names (tests, decommissioning)."""
        settings = parse_url(url)
        backend = cls(settings, 1)
        try:
            with backend._session(slow=True) as session:
                # A client still inside a transaction on these tables would
                # make DROP wait for its metadata lock for a year by default.
                backend._run(session, 0, "SET SESSION lock_wait_timeout = 60")
                rows = backend._run(session, 0, "SHOW DATABASES")
                for (name,) in rows:
                    prefix, _, suffix = str(name).rpartition("_")
                    shard_schema = suffix[:1] == "s" and suffix[1:].isdigit()
                    if prefix == settings.name and (suffix == "meta" or shard_schema):
                        backend._run(session, 0, f"DROP DATABASE IF EXISTS `{name}`")
        finally:
            backend.close()

    def _create(self) -> None:
        with self._session(slow=True) as session:  # DDL waits for the disk
            self._run(session, 0, f"CREATE DATABASE IF NOT EXISTS {self._meta}")
            self._run(session, 0, _META_DDL.format(s=self._meta))
            for shard, schema in enumerate(self._schemas):
                self._run(session, shard, f"CREATE DATABASE IF NOT EXISTS {schema}")
                for ddl in _SHARD_DDL:
                    self._run(session, shard, ddl.format(s=schema))

    def _stored_shards(self) -> int | None:
        with self._session() as session:
            found = self._run(
                session,
                0,
                "SELECT COUNT(*) FROM information_schema.tables "
                "WHERE table_schema = %s AND table_name = 'meta'",
                (self._meta.strip("`"),),
            )
            if not found[0][0]:
                return None
        value = self.get_meta("shards")
        return None if value is None else int(value)

    def fresh_reads(self) -> AbstractContextManager[None]:
        return nullcontext()  # one copy of each row: every read is fresh

    # -- the choke point --------------------------------------------------------

    def _new_pool(self, read_timeout: float, size: int | None = None) -> Pool:
        args = connect_args(self.settings, self._mysqlclient, read_timeout)
        where = f"{self.settings.host}:{self.settings.port}"

        def connect() -> Any:
            try:
                conn = self._driver.connect(**args)
                # The locking reads rely on gap locks, which READ COMMITTED does not
                # take: pin the level whatever the server's default.
                try:
                    with conn.cursor() as cursor:
                        cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                except Exception:
                    conn.close()
                    raise
                return conn
            except Exception as exc:
                raise map_driver_error(exc, f"connecting to {where}") from exc

        return Pool(connect, size or self.settings.pool_size, read_timeout)

    def _q(self, template: str, shard: int) -> str:
        """The template with `{s}` naming the shard's schema (-1: the meta schema)."""
        sql = self._sql.get((template, shard))
        if sql is None:
            schema = self._meta if shard < 0 else self._schemas[shard]
            sql = self._sql[(template, shard)] = template.format(s=schema)
        return sql

    @contextmanager
    def _session(self, slow: bool = False) -> Iterator[Session]:
        pool = self._slow_pool if slow else self._pool
        conn, reused = pool.get()
        session: Session = [conn, False, reused]
        try:
            yield session
        finally:
            pool.put(conn, broken=session[1])

    def _run(
        self, session: Session, shard: int, sql: str, params: Any = (), many: bool = False
    ) -> list[Any]:
        """Execute one statement (or one multi-row executemany) and return its rows."""
        start = time.perf_counter()
        try:
            for fault in self.faults:
                fault(shard, sql)
            with session[0].cursor() as cursor:
                if many:
                    cursor.executemany(sql, params)
                    rows: list[Any] = []
                else:
                    cursor.execute(sql, params or None)
                    rows = list(cursor.fetchall())
        except Exception as exc:
            if isinstance(exc, AssocdbError):  # a fault injector's own error
                raise
            session[1] = True
            raise map_driver_error(exc, f"shard {shard}") from exc
        self._report(shard, sql, time.perf_counter() - start, many)
        return rows

    def _query(self, shard: int, sql: str, params: Any = ()) -> list[Any]:
        """One read on a pooled connection; a stale pooled connection is replaced once."""
        for attempt in (1, 2):
            conn, reused = self._pool.get()
            session: Session = [conn, False, reused]
            started = time.monotonic()
            try:
                return self._run(session, shard, sql, params)
            except Unavailable as exc:
                if attempt == 2 or not self._stale(exc, session, started):
                    raise
            finally:
                self._pool.put(conn, broken=session[1])
        raise AssertionError("unreachable")

    def _report(self, shard: int, sql: str, seconds: float, many: bool = False) -> None:
        for tracer in self.tracers:
            try:
                tracer(shard, sql, seconds)
            except Exception:  # a broken tracer must not break a write that succeeded
                log.exception("tracer %r failed", tracer)
        if seconds > SLOW_SECONDS and not many:
            log.warning("slow statement on shard %d (%.3f s): %s", shard, seconds, sql)

    def _in_transaction(
        self, shard: int, body: Callable[[Session], Any], slow: bool = False
    ) -> Any:
        """Run `body(session)` in one transaction, again if InnoDB chose it as a
        deadlock victim or if the pooled connection turned out to be closed."""
        for attempt in range(1, _DEADLOCK_TRIES + 1):
            with self._session(slow) as session:
                started, begun = time.monotonic(), False
                try:
                    self._run(session, shard, "START TRANSACTION")
                    begun = True
                    result = body(session)
                    self._run(session, shard, "COMMIT")
                    return result
                except AssocdbError as exc:
                    if not session[1]:
                        self._rollback(session, shard)
                    # Only a BEGIN that failed is known to have done nothing:
                    # a lost COMMIT may have committed.
                    stale = not begun and self._stale(exc, session, started)
                    retry = _errno(exc) in _RETRYABLE or stale
                    if not retry or attempt == _DEADLOCK_TRIES:
                        raise
                except BaseException:
                    self._rollback(session, shard)
                    raise
            time.sleep(random.uniform(0, 0.002 * attempt))
        raise AssertionError("unreachable")

    def _stale(self, exc: AssocdbError, session: Session, started: float) -> bool:
        """Whether `exc` says a reused pooled connection had been closed by the
        server (it fails at once; a timeout, the same error number, took the
        whole timeout and is not worth repeating)."""
        quick = time.monotonic() - started < self.settings.query_timeout / 2
        return bool(session[2]) and quick and _errno(exc) in _GONE

    def _rollback(self, session: Session, shard: int) -> None:
        try:
            session[0].rollback()
        except Exception:
            session[1] = True  # the pool drops it
            log.debug("rollback failed on shard %d", shard, exc_info=True)

    # -- writes -----------------------------------------------------------------

    def apply(
        self,
        shard: int,
        edges: Sequence[EdgeTuple],
        objects: Sequence[ObjRow],
        nodes: Sequence[NodeRow] = (),
    ) -> Changes:
        def body(session: Session) -> Changes:
            changed_edges: list[tuple[EdgeTuple | None, EdgeTuple]] = []
            changed_objects: list[ObjRow] = []
            changed_nodes: list[NodeRow] = []
            if nodes:
                keys = [(row[0], row[1]) for row in nodes]
                stored = self._node_states(session, shard, keys, lock=True)
                changed_nodes = merge_nodes(stored, nodes)
                if changed_nodes:
                    self._run(session, shard, self._q(_UPSERT_NODE, shard), changed_nodes, True)
            if edges:
                current = self._current_edges(session, shard, edges)
                changed_edges, deltas = merge_edges(current, edges)
                if changed_edges:
                    rows = [new for _, new in changed_edges]
                    self._run(session, shard, self._q(_UPSERT_EDGE, shard), rows, True)
                if deltas:
                    counts = [(*key, n) for key, n in deltas.items()]
                    self._run(session, shard, self._q(_ADD_COUNT, shard), counts, True)
            if objects:
                ids = [row[0] for row in objects]
                current_objects = {r[0]: r for r in self._objects(session, shard, ids, lock=True)}
                changed_objects = merge_objects(current_objects, objects)
                if changed_objects:
                    packed = [(*row[:5], pack(row[5])) for row in changed_objects]
                    self._run(session, shard, self._q(_UPSERT_OBJ, shard), packed, True)
            return Changes(changed_edges, changed_objects, changed_nodes)

        # A batch this big is a bulk load: it may take seconds, and has no
        # journal to retry it, so it runs with the maintenance timeout.
        bulk = len(edges) + len(objects) + len(nodes) > BULK_ROWS
        result: Changes = self._in_transaction(shard, body, slow=bulk)
        return result

    def _current_edges(
        self, session: Session, shard: int, writes: Sequence[EdgeTuple]
    ) -> dict[EdgeKey, EdgeTuple]:
        """The stored rows of the written keys, locked until the transaction ends."""
        lists: dict[tuple[int, int], set[int]] = {}  # (id1, atype) -> id2s
        targets: dict[tuple[int, int], set[int]] = {}  # (atype, id2) -> id1s
        for row in writes:
            lists.setdefault((row[0], row[1]), set()).add(row[2])
            targets.setdefault((row[1], row[2]), set()).add(row[0])
        current: dict[EdgeKey, EdgeTuple] = {}
        if len(targets) < len(lists):
            # Many lists, few targets: the mirrored rows of one node's edges.
            for (atype, id2), id1s in targets.items():
                for chunk in _chunks(sorted(id1s)):
                    sql = (
                        f"SELECT {_EDGE_COLUMNS} FROM {{s}}.edges FORCE INDEX (edges_key) "
                        f"WHERE id1 IN ({_marks(len(chunk))}) AND atype = %s AND id2 = %s "
                        "FOR UPDATE"
                    )
                    for row in self._run(session, shard, self._q(sql, shard), (*chunk, atype, id2)):
                        current[row[:3]] = row
            return current
        if len(lists) > 1:
            # Every stored edge has a count row, so a list without count rows
            # has no edges to read: a bulk load into new lists reads (and locks)
            # only the count ranges, which serializes it against writers of the
            # same lists all the same.
            stored = self._lists_with_counts(session, shard, sorted({id1 for id1, _ in lists}))
            lists = {key: id2s for key, id2s in lists.items() if key in stored}
        for (id1, atype), id2s in sorted(lists.items()):
            for row in self._edges(session, shard, id1, atype, sorted(id2s), lock=True):
                current[row[:3]] = row
        return current

    def _lists_with_counts(
        self, session: Session, shard: int, id1s: list[int]
    ) -> set[tuple[int, int]]:
        found: set[tuple[int, int]] = set()
        for chunk in _chunks(id1s):
            marks = _marks(len(chunk))
            sql = f"SELECT id1, atype FROM {{s}}.counts WHERE id1 IN ({marks}) FOR UPDATE"
            found.update(
                (r[0], r[1]) for r in self._run(session, shard, self._q(sql, shard), chunk)
            )
        return found

    def allocate(self, shard: int, n: int) -> int:
        def body(session: Session) -> int:
            self._run(
                session,
                shard,
                self._q(
                    "INSERT INTO {s}.seq (name, value) VALUES ('objects', %s) "
                    "ON DUPLICATE KEY UPDATE value = value + VALUES(value)",
                    shard,
                ),
                (n,),
            )
            sql = self._q("SELECT value FROM {s}.seq WHERE name = 'objects'", shard)
            return int(self._run(session, shard, sql)[0][0])

        last: int = self._in_transaction(shard, body)
        return last - n + 1

    # -- home timelines (`_timeline_list`) ---------------------------------------

    def timelines(self, shard: int, owners: Sequence[int]) -> dict[int, bytes]:
        found: dict[int, bytes] = {}
        for chunk in _chunks(list(owners)):
            sql = (
                f"SELECT owner, entries FROM {{s}}.timelines WHERE owner IN ({_marks(len(chunk))})"
            )
            try:
                rows = self._query(shard, self._q(sql, shard), chunk)
            except AssocdbError as exc:
                if _errno(exc) != _NO_TABLE:
                    raise
                return {}  # a graph created before timelines: none written yet
            found.update((o, bytes(blob)) for o, blob in rows)
        return found

    def merge_timelines(
        self, shard: int, writes: Mapping[int, Sequence[TimelineEntry]], cap: int
    ) -> int:
        try:
            return self._merge_timelines(shard, writes, cap)
        except AssocdbError as exc:
            if _errno(exc) != _NO_TABLE:
                raise
        # A graph created before home timelines were stored: add their table.
        with self._session(slow=True) as session:  # DDL waits for the disk
            self._run(session, shard, self._q(_TIMELINES_DDL, shard))
        return self._merge_timelines(shard, writes, cap)

    def _merge_timelines(
        self, shard: int, writes: Mapping[int, Sequence[TimelineEntry]], cap: int
    ) -> int:
        def body(session: Session) -> int:
            stored: dict[int, bytes] = {}
            for chunk in _chunks(sorted(writes)):
                sql = (
                    f"SELECT owner, entries FROM {{s}}.timelines "
                    f"WHERE owner IN ({_marks(len(chunk))}) FOR UPDATE"
                )
                for owner, blob in self._run(session, shard, self._q(sql, shard), chunk):
                    stored[owner] = bytes(blob)
            changed = []
            for owner, entries in writes.items():
                blob = merge_blob(stored.get(owner), entries, cap)
                if blob is not None:
                    changed.append((owner, blob))
            if changed:
                sql = (
                    "INSERT INTO {s}.timelines (owner, entries) VALUES (%s, %s) "
                    "ON DUPLICATE KEY UPDATE entries = VALUES(entries)"
                )
                self._run(session, shard, self._q(sql, shard), changed, True)
            return len(changed)

        n: int = self._in_transaction(shard, body)
        return n

    # -- reads ------------------------------------------------------------------

    def scan(self, shard: int, query: EdgeScan) -> list[ListRow]:
        seek = query.seek
        params: list[Any] = [query.id1, query.atype, query.state]
        if query.high is not None:
            params.append(query.high)
        if query.low is not None:
            params.append(query.low)
        if seek.boundary is not None:
            time_, id2 = seek.boundary
            params += [time_, time_, id2]
        params.append(query.limit)
        if query.offset:
            params.append(query.offset)
        template = _scan_sql(
            query.high is not None,
            query.low is not None,
            seek.boundary is not None,
            seek.forward,
            seek.inclusive,
            bool(query.offset),
        )
        return self._query(shard, self._q(template, shard), params)

    def edges(self, shard: int, id1: int, atype: int, id2s: Sequence[int]) -> list[EdgeRow]:
        rows: list[EdgeRow] = []
        for chunk in _chunks(id2s):
            rows += (
                EdgeRow(*r) for r in self._query(shard, *_edges_sql(self, shard, chunk, id1, atype))
            )
        return rows

    def _edges(
        self, session: Session, shard: int, id1: int, atype: int, id2s: Sequence[int], lock: bool
    ) -> list[EdgeRow]:
        rows: list[EdgeRow] = []
        for chunk in _chunks(id2s):
            sql, params = _edges_sql(self, shard, chunk, id1, atype)
            if lock:
                sql += " FOR UPDATE"
            rows += (EdgeRow(*r) for r in self._run(session, shard, sql, params))
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
        sql = "SELECT id2, state, time FROM {s}.edges FORCE INDEX (edges_key) "
        sql += "WHERE id1 = %s AND atype = %s"
        params: list[Any] = [id1, atype]
        if boundary is not None:
            sql += f" AND id2 {op} %s"
            params.append(boundary)
        sql += f" AND state IN ({_marks(len(states))}) ORDER BY id2 {order} LIMIT %s"
        rows = self._query(shard, self._q(sql, shard), [*params, *states, limit])
        return [(r[0], r[1], r[2]) for r in rows]

    def node_states(
        self, shard: int, keys: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], NodeRow]:
        with self._session() as session:
            return self._node_states(session, shard, keys, lock=False)

    def _node_states(
        self, session: Session, shard: int, keys: Sequence[tuple[int, int]], lock: bool
    ) -> dict[tuple[int, int], NodeRow]:
        sql = self._q(_SELECT_NODE + (" FOR UPDATE" if lock else ""), shard)
        found: dict[tuple[int, int], NodeRow] = {}
        for key in sorted(set(keys)):
            for row in self._run(session, shard, sql, key):
                found[key] = NodeRow(*row)
        return found

    def export_edges(self, shard: int, after: EdgeKey | None, limit: int) -> list[EdgeRow]:
        sql = f"SELECT {_EDGE_COLUMNS} FROM {{s}}.edges FORCE INDEX (edges_key)"
        params: tuple[int, ...] = (limit,)
        if after is not None:
            a, b, c = after
            sql += (
                " WHERE id1 > %s OR (id1 = %s AND atype > %s)"
                " OR (id1 = %s AND atype = %s AND id2 > %s)"
            )
            params = (a, a, b, a, b, c, limit)
        sql += " ORDER BY id1, atype, id2 LIMIT %s"
        with self._session(slow=True) as session:
            return [EdgeRow(*r) for r in self._run(session, shard, self._q(sql, shard), params)]

    def counts(self, shard: int, id1: int, atype: int) -> dict[int, int]:
        sql = self._q("SELECT state, n FROM {s}.counts WHERE id1 = %s AND atype = %s", shard)
        return {int(state): int(n) for state, n in self._query(shard, sql, (id1, atype))}

    def objects(self, shard: int, ids: Sequence[int]) -> list[ObjRow]:
        with self._session() as session:
            return self._objects(session, shard, ids, lock=False)

    def _objects(
        self, session: Session, shard: int, ids: Sequence[int], lock: bool
    ) -> list[ObjRow]:
        rows: list[ObjRow] = []
        for chunk in _chunks(sorted(ids)):
            sql = f"SELECT {_OBJ_COLUMNS} FROM {{s}}.objects WHERE id IN ({_marks(len(chunk))})"
            sql += " FOR UPDATE" if lock else ""
            found = self._run(session, shard, self._q(sql, shard), chunk)
            rows += (ObjRow(r[0], r[1], r[2], r[3], r[4], unpack(bytes(r[5]))) for r in found)
        return rows

    # -- graph-wide settings and maintenance -------------------------------------

    def get_meta(self, key: str) -> bytes | None:
        rows = self._query(0, self._q("SELECT value FROM {s}.meta WHERE name = %s", -1), (key,))
        return bytes(rows[0][0]) if rows else None

    def swap_meta(self, key: str, expected: bytes | None, value: bytes) -> bool:
        def body(session: Session) -> bool:
            sql = self._q("SELECT value FROM {s}.meta WHERE name = %s FOR UPDATE", -1)
            rows = self._run(session, 0, sql, (key,))
            if (bytes(rows[0][0]) if rows else None) != expected:
                return False
            upsert = (
                "INSERT INTO {s}.meta (name, value) VALUES (%s, %s) "
                "ON DUPLICATE KEY UPDATE value = VALUES(value)"
            )
            self._run(session, 0, self._q(upsert, -1), (key, value))
            return True

        swapped: bool = self._in_transaction(0, body)
        return swapped

    def recount(self, shard: int, repair: bool) -> list[CountMismatch]:
        # Without repair a consistent snapshot is enough; a repair locks the
        # shard's edges (shared) and counts so no write slips in between.
        edge_lock, count_lock = (" LOCK IN SHARE MODE", " FOR UPDATE") if repair else ("", "")

        def body(session: Session) -> list[CountMismatch]:
            sql = "SELECT id1, atype, state, COUNT(*) FROM {s}.edges GROUP BY id1, atype, state"
            actual = {
                (a, b, c): int(n)
                for a, b, c, n in self._run(session, shard, self._q(sql + edge_lock, shard))
            }
            sql = "SELECT id1, atype, state, n FROM {s}.counts"
            stored = {
                (a, b, c): int(n)
                for a, b, c, n in self._run(session, shard, self._q(sql + count_lock, shard))
            }
            wrong = [
                CountMismatch(shard, *key, stored.get(key, 0), actual.get(key, 0))
                for key in sorted(actual.keys() | stored.keys())
                if stored.get(key, 0) != actual.get(key, 0)
            ]
            if repair and wrong:
                fixes = [(m.id1, m.atype, m.state, m.actual) for m in wrong]
                self._run(session, shard, self._q(_SET_COUNT, shard), fixes, many=True)
            return wrong

        found: list[CountMismatch] = self._in_transaction(shard, body, slow=True)
        return found

    def spec(self) -> dict[str, Any]:
        s = self.settings
        user = quote(s.user, safe="")
        login = f"{user}:{quote(s.password, safe='')}" if s.password else user
        return {
            "kind": "mysql",
            "url": f"mysql://{login}@{s.host}:{s.port}/{s.name}",
            "shards": self.shards,
            "connect_timeout": s.connect_timeout,
            "query_timeout": s.query_timeout,
            "pool_size": s.pool_size,
        }

    def close(self) -> None:
        self._pool.close()
        self._slow_pool.close()


@lru_cache(maxsize=64)
def _scan_sql(
    high: bool, low: bool, boundary: bool, forward: bool, inclusive: bool, offset: bool
) -> str:
    where = "id1 = %s AND atype = %s AND state = %s"
    if high:
        where += " AND time <= %s"
    if low:
        where += " AND time >= %s"
    if boundary:
        # Spelled out rather than `(time, id2) < (t, i)`: the range optimizer
        # turns this OR into two ranges of the primary key.
        op = "<" if forward else ">"
        tie = op + ("=" if inclusive else "")
        where += f" AND (time {op} %s OR (time = %s AND id2 {tie} %s))"
    order = "DESC" if forward else "ASC"
    sql = (
        f"SELECT id2, time, updated_at, data FROM {{s}}.edges WHERE {where} "
        f"ORDER BY time {order}, id2 {order} LIMIT %s"
    )
    return sql + " OFFSET %s" if offset else sql


def _edges_sql(
    backend: MySQLBackend, shard: int, chunk: Sequence[int], id1: int, atype: int
) -> tuple[str, tuple[int, ...]]:
    if len(chunk) == 1:
        sql = _SELECT_EDGES + " AND id2 = %s"
    else:
        sql = _SELECT_EDGES + f" AND id2 IN ({_marks(len(chunk))})"
    return backend._q(sql, shard), (id1, atype, *chunk)


def _chunks(ids: Sequence[int]) -> Iterator[Sequence[int]]:
    for start in range(0, len(ids), _IN_CHUNK):
        yield ids[start : start + _IN_CHUNK]


def _marks(n: int) -> str:
    return ",".join(["%s"] * n)
