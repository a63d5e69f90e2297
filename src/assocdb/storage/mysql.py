"""The MySQL/MariaDB engine: one InnoDB schema per logical shard on one server.

A graph named NAME keeps its settings in schema `NAME_meta` and shard n in
schema `NAME_s{n}`, each with the tables of the SQLite engine (`_SHARD_DDL`):

* `edges`, clustered on `(id1, atype, state, time, id2)` (the order lists are
  read in, so a page is one contiguous primary-key range), with the unique
  key `edges_key (id1, atype, id2)` for one edge per pair and point lookups;
* `counts (id1, atype, state) -> n`, changed in the same transaction as edges;
* `objects` (with `objects_recent (otype, updated_at)`; data zlib-compressed when it
  pays, `core.compress`), `node_states`, `timelines` and `seq` (the shard's id
  allocator);
* `index_N`, one table per secondary index, created on first write.

Every method is `sql.SQLBackend`'s; this module holds MySQL's dialect and its
connections. The reads of a write transaction are locking reads (`SELECT ...
FOR UPDATE`, REPEATABLE READ, set on every connection whatever the server's
default, so absent keys are gap-locked): two applies on the same keys are
serialized. When InnoDB breaks a deadlock between two such transactions, the
loser is run again (`MySQLDialect.retryable`).

`?engine=rocksdb` makes every table MyRocks (`ENGINE=ROCKSDB`, an LSM tree; the
server must have loaded Debian's mariadb-plugin-rocksdb at start). MyRocks takes
no gap locks: a `FOR UPDATE` read of an absent key locks nothing, so two applies
of the same new edge would both see it absent and both count it. So on MyRocks
every write transaction first locks the shard's one `write_turn` row (the
shard's write turn, as SQLite's `BEGIN IMMEDIATE`), and, the writers of a shard
being serialized by it, runs at READ COMMITTED: each statement reads the latest
commit, so the second apply merges against the first's result with no snapshot
conflict. The engine is chosen when the graph is made; opening it with another
is refused.

Connections come from one bounded pool per server (`mysqlpool`), a second
one with the long maintenance timeout for bulk loads, scans of whole shards
and DDL; a pooled connection the server closed meanwhile is replaced once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ..core.errors import AssocdbError, InvalidRequest, Unavailable
from ..core.merge import EdgeTuple
from .backend import map_driver_error
from .dialect import Session
from .mysqlpool import Pool, connect_args, driver, errno_of, parse_url
from .serverurl import Settings, graph_schemas, server_spec
from .sql import SQLBackend
from .sqlfeed import ddl
from .sqlopen import open_on_server
from .sqltext import TABLE_KEYS, insert, walk_after

log = logging.getLogger("assocdb.mysql")

MAINTENANCE_TIMEOUT = 600.0  # recount, export and bulk loads scan or write whole shards
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
    # A capped home timeline (`core.timeline_list`): up to 10,000 entries of 32 bytes.
    _TIMELINES_DDL,
]
#: MyRocks only: the row every write transaction of a shard locks first (module doc).
_WRITE_TURN_DDL = [
    "CREATE TABLE IF NOT EXISTS {s}.write_turn (id TINYINT NOT NULL PRIMARY KEY) ENGINE=ROCKSDB",
    "INSERT IGNORE INTO {s}.write_turn VALUES (0)",
]
_MAX_ROW_LOCKS = 1 << 30  # MyRocks' largest: its 1M default fails a big bulk load's round
_WRITE_TURN = "SELECT id FROM {s}.write_turn WHERE id = 0 FOR UPDATE"
_META_DDL = """CREATE TABLE IF NOT EXISTS {s}.meta (
    name VARCHAR(191) NOT NULL PRIMARY KEY, value MEDIUMBLOB NOT NULL
) ENGINE=InnoDB"""


_EDGE_TEXT = (
    "CONCAT_WS(',', id1, atype, id2, state, time, updated_at, "
    "IF(data IS NULL, 'N', CONCAT('x', HEX(data))))"
)
_STATEMENT_BYTES = 1 << 20  # literal rows per statement, well under max_allowed_packet
#: A page of edges read as one value (`MySQLBackend.export_table`): one packet, not one a row.
_PAGE_TEXT = (
    "SELECT GROUP_CONCAT(t SEPARATOR ' '), COUNT(*) FROM ("
    f"SELECT {_EDGE_TEXT} AS t FROM {{s}}.edges WHERE_AFTER "
    "ORDER BY id1, atype, id2 LIMIT ?) page"
)
#: The longest page read as one value, under the default max_allowed_packet (16 MiB): a
#: page of big data blobs is longer, comes back truncated, and is read row by row.
_PAGE_BYTES = 8 << 20


def _engine(ddl_text: str, engine: str) -> str:
    """A CREATE TABLE of this module for tables of `engine`."""
    return ddl_text.replace("ENGINE=InnoDB", f"ENGINE={engine}")


def _edges_from_text(rows: list[Any]) -> list[tuple[Any, ...]]:
    """Edges read as `_EDGE_TEXT`, as plain tuples."""
    return _edges_from_texts([text for (text,) in rows])


def _edges_from_texts(texts: Iterable[str]) -> list[tuple[Any, ...]]:
    edges: list[tuple[Any, ...]] = []
    for text in texts:
        id1, atype, id2, state, time_, updated_at, data = text.split(",")
        blob = None if data == "N" else bytes.fromhex(data[1:])
        edges.append(
            (int(id1), int(atype), int(id2), int(state), int(time_), int(updated_at), blob)
        )
    return edges


def _literal_chunks(rows: Sequence[EdgeTuple]) -> Iterator[str]:
    """Edges as `(1,2,3,0,5,6,X'..')` lists of about `_STATEMENT_BYTES` each."""
    chunk: list[str] = []
    size = 0
    for row in rows:
        data = row[6]
        blob = "NULL" if data is None else f"X'{bytes(data).hex()}'"
        text = "(%d,%d,%d,%d,%d,%d,%s)" % (*row[:6], blob)  # noqa: UP031 (%d: ints only)
        chunk.append(text)
        size += len(text)
        if size >= _STATEMENT_BYTES:
            yield ",".join(chunk)
            chunk, size = [], 0
    if chunk:
        yield ",".join(chunk)


class MySQLDialect:
    """MySQL's spelling of what `SQLBackend` says (see `sql.Dialect`)."""

    begin = "START TRANSACTION"
    lock = " FOR UPDATE"
    share = " LOCK IN SHARE MODE"
    row_values = False  # `(a, b) > (x, y)` is not a range to the optimizer
    meta_key = "name"
    timelines_ddl = _TIMELINES_DDL
    feed_settle = (  # (PROCESS privilege; trx_started is in whole seconds: it errs early)
        "SELECT COUNT(*) FROM information_schema.innodb_trx "
        "WHERE trx_started < ? AND trx_mysql_thread_id <> CONNECTION_ID()"
    )
    feed_now = "SELECT NOW(6)"
    feed_recheck = 0.25

    def __init__(self, engine: str = "InnoDB") -> None:
        self.engine = engine
        self.feed_ddl = ddl("MEDIUMBLOB", f" ENGINE={engine}")

    def use_index(self, name: str) -> str:
        return f" FORCE INDEX ({name})"

    def upsert(self, table: str, columns: Sequence[str], key: int, add: bool = False) -> str:
        new = "{0} = {0} + VALUES({0})" if add else "{0} = VALUES({0})"
        sets = ", ".join(new.format(column) for column in columns[key:])
        return f"{insert(table, columns)} ON DUPLICATE KEY UPDATE {sets}"

    def index_ddl(self, index: int) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {{s}}.index_{index} ("
            "ikey VARBINARY(1024) NOT NULL, id BIGINT NOT NULL, updated_at BIGINT NOT NULL, "
            "version BIGINT NOT NULL, state TINYINT NOT NULL, PRIMARY KEY (ikey, id), "
            f"KEY index_{index}_by_id (id)) ENGINE={self.engine}"
        ]

    def missing_table(self, exc: AssocdbError) -> bool:
        return errno_of(exc) == _NO_TABLE

    def retryable(self, exc: AssocdbError) -> bool:
        return errno_of(exc) in _RETRYABLE

    def gone(self, exc: AssocdbError) -> bool:
        return errno_of(exc) in _GONE

    def row_hash(self, columns: Sequence[str]) -> str:
        return f"CRC32(CONCAT_WS(',', {', '.join(columns)}))"


class MySQLBackend(SQLBackend):
    """Shards as InnoDB schemas `NAME_s{n}` on one MySQL or MariaDB server."""

    local = False
    driver_errors = (Exception,)  # two drivers, and the sockets under them

    def __init__(self, settings: Settings, shards: int) -> None:
        super().__init__(shards, MySQLDialect(settings.engine), settings.query_timeout)
        self.settings = settings
        self._rocks = settings.engine == "ROCKSDB"
        self._shard_ddl = [_engine(d, settings.engine) for d in _SHARD_DDL]
        if self._rocks:
            self._shard_ddl += _WRITE_TURN_DDL
        self._driver = driver()
        self._mysqlclient = self._driver.__name__ == "MySQLdb"
        self._schemas = [f"`{settings.name}_s{n}`" for n in range(shards)]
        self._meta = f"`{settings.name}_meta`"
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
        return open_on_server(
            settings, cls, create, lambda: cls.open(url, shards, create=False, **options)
        )

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
                for name in graph_schemas((name for (name,) in rows), settings.name):
                    backend._run(session, 0, f"DROP DATABASE IF EXISTS `{name}`")
        finally:
            backend.close()

    def _create(self) -> None:
        with self._session(slow=True) as session:  # DDL waits for the disk
            self._run(session, 0, f"CREATE DATABASE IF NOT EXISTS {self._meta}")
            self._run(session, 0, _engine(_META_DDL, self.settings.engine).format(s=self._meta))
            for shard, schema in enumerate(self._schemas):
                self._run(session, shard, f"CREATE DATABASE IF NOT EXISTS {schema}")
                for ddl in self._shard_ddl:
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
            made = self._run(
                session,
                0,
                "SELECT engine FROM information_schema.tables "
                "WHERE table_schema = %s AND table_name = 'edges'",
                (self._schemas[0].strip("`"),),
            )
        if made and str(made[0][0]).upper() != self.settings.engine.upper():
            raise InvalidRequest(
                f"graph {self.settings.name!r} was made with engine {made[0][0]}, not "
                f"{self.settings.engine}: open it with ?engine={str(made[0][0]).lower()}"
            )
        value = self.get_meta("shards")
        return None if value is None else int(value)

    # -- connections ------------------------------------------------------------

    def _new_pool(self, read_timeout: float, size: int | None = None) -> Pool:
        args = connect_args(self.settings, self._mysqlclient, read_timeout)
        where = f"{self.settings.host}:{self.settings.port}"

        def connect() -> Any:
            try:
                conn = self._driver.connect(**args)
                # The locking reads rely on gap locks, which READ COMMITTED does not
                # take: pin the level whatever the server's default (MyRocks: the
                # shard's write turn serializes writers instead, module doc).
                level = "READ COMMITTED" if self._rocks else "REPEATABLE READ"
                try:
                    with conn.cursor() as cursor:
                        cursor.execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {level}")
                        cursor.execute(f"SET SESSION group_concat_max_len = {_PAGE_BYTES}")
                        if self._rocks:  # a bulk load's round locks more than the 1M default
                            cursor.execute(f"SET SESSION rocksdb_max_row_locks = {_MAX_ROW_LOCKS}")
                except Exception:
                    conn.close()
                    raise
                return conn
            except Exception as exc:
                raise map_driver_error(exc, f"connecting to {where}") from exc

        return Pool(connect, size or self.settings.pool_size, read_timeout)

    @contextmanager
    def _session(self, slow: bool = False) -> Iterator[Session]:
        """A pooled connection (`slow`: from the pool with the maintenance timeout)."""
        pool = self._slow_pool if slow else self._pool
        conn, reused = pool.get()
        session = Session(conn, reused)
        try:
            yield session
        finally:
            pool.put(conn, broken=session.broken)

    def _render(self, template: str, shard: int) -> str:
        schema = self._meta if shard < 0 else self._schemas[shard]
        return template.replace("{s}", schema).replace("?", "%s")

    def _execute(self, session: Session, sql: str, params: Any, many: bool) -> list[Any]:
        with session.conn.cursor() as cursor:
            if many:
                cursor.executemany(sql, params)
                return []
            cursor.execute(sql, params or None)
            return list(cursor.fetchall())

    def _query(self, shard: int, sql: str, params: Any = (), slow: bool = False) -> list[Any]:
        """One read on a pooled connection; a stale pooled connection is replaced once."""
        for attempt in (1, 2):
            with self._session(slow) as session:
                started = time.monotonic()
                try:
                    return self._run(session, shard, sql, params)
                except Unavailable as exc:
                    if attempt == 2 or not self._stale(exc, session, started):
                        raise
        raise AssertionError("unreachable")

    def _writing(self, shard: int, slow: bool) -> AbstractContextManager[Session]:
        return self._session(slow)

    def _run(
        self, session: Session, shard: int, sql: str, params: Any = (), many: bool = False
    ) -> list[Any]:
        rows = super()._run(session, shard, sql, params, many)
        if self._rocks and shard >= 0 and sql == self.dialect.begin:
            super()._run(session, shard, self._q(_WRITE_TURN, shard))  # the shard's turn
        return rows

    def _rollback(self, session: Session, shard: int) -> None:
        if session.broken:  # the pool drops it, and with it the transaction
            return
        try:
            session.conn.rollback()
        except Exception:
            session.broken = True
            log.debug("rollback failed on shard %d", shard, exc_info=True)

    # -- a shard's schema on this server: made for a copy, dropped when no map names it ------

    def held_shards(self) -> list[int]:
        """The shards whose schema exists on this server (`storage.reclaim`)."""
        sql = self._q("SELECT schema_name FROM information_schema.schemata", -1)
        names = {str(r[0]) for r in self._query(-1, sql)}
        return [n for n, schema in enumerate(self._schemas) if schema.strip("`") in names]

    def make_shard(self, shard: int) -> None:
        """The shard's schema and tables, made if missing: before a copy of the shard joins
        its replica set here (`storage.moves`), when reclaim may have dropped them."""
        statements = ["CREATE DATABASE IF NOT EXISTS {s}", *self._shard_ddl]
        if self.feed:
            statements.append(self.dialect.feed_ddl)
        with self._session(slow=True) as session:  # DDL waits for the disk
            for statement in statements:
                self._run(session, shard, self._q(statement, shard))

    def drop_shard(self, shard: int) -> None:
        """Drop the shard's schema on this server, rows, tables and id counter: a copy no
        map names (`storage.reclaim`; a copy made here again starts from `make_shard`, and
        its counter is raised to the source's)."""
        with self._session(slow=True) as session:
            # A client still inside a transaction on these tables would make DROP wait
            # for its metadata lock for a year by default.
            self._run(session, shard, "SET SESSION lock_wait_timeout = 60")
            try:
                self._run(session, shard, self._q("DROP DATABASE IF EXISTS {s}", shard))
            finally:
                self._run(session, shard, "SET SESSION lock_wait_timeout = DEFAULT")

    # -- bulk rows: the driver's per-value work is the cost ---------------------------------

    def export_table(
        self, shard: int, table: str, after: Sequence[Any] | None, limit: int
    ) -> list[tuple[Any, ...]]:
        """A page of edges (a shard copy, a verify) read as one value: PyMySQL spends more
        on each row's packet than on its columns, so 5,000 rows cost a few packets, not
        5,000. A page too long for that (big data blobs) is read row by row."""
        if table != "edges":
            return super().export_table(shard, table, after, limit)
        where, params = walk_after(TABLE_KEYS["edges"], after, self.dialect.row_values)
        query = self._q(_PAGE_TEXT.replace(" WHERE_AFTER", where), shard)
        ((text, count),) = self._query(shard, query, [*params, limit], slow=True)
        if not count:
            return []
        if isinstance(text, bytes | bytearray):
            text = text.decode()
        texts = [] if text is None or len(text) >= _PAGE_BYTES else text.split(" ")
        if len(texts) != count:  # cut at group_concat_max_len, or NULL: too long for a packet
            return super().export_table(shard, table, after, limit)
        edges = _edges_from_texts(texts)
        edges.sort()  # in key order (the server's GROUP_CONCAT need not keep it; keys differ)
        return edges

    def _exported(self, table: str) -> tuple[str, Callable[[list[Any]], list[tuple[Any, ...]]]]:
        # PyMySQL parses each column of each row in Python: an edge read as one text
        # column is read several times faster (a shard copy and a verify read every edge).
        if table != "edges":
            return super()._exported(table)
        return _EDGE_TEXT, _edges_from_text

    def _bulk_store(
        self, session: Session, shard: int, changed: Sequence[tuple[EdgeTuple | None, EdgeTuple]]
    ) -> None:
        """Edges as literal multi-row statements: integers and hex blobs written out
        here, not escaped value by value by the driver (several times faster)."""
        rows = sorted([new for _, new in changed])
        prefix = self._q(self._upsert_edge, shard)
        head, _, tail = prefix.partition(" VALUES ")
        tail = tail.partition(")")[2]  # " ON DUPLICATE KEY UPDATE ..."
        for values in _literal_chunks(rows):
            self._run(session, shard, f"{head} VALUES {values}{tail}")

    def spec(self) -> dict[str, Any]:
        query = "?engine=rocksdb" if self._rocks else ""
        return server_spec("mysql", "mysql", self.settings, self.shards, query)

    def close(self) -> None:
        self._pool.close()
        self._slow_pool.close()
