"""The PostgreSQL engine: one schema per logical shard in one database.

A graph named NAME keeps its settings in schema `NAME_meta` and shard n in
schema `NAME_s{n}`, each with the tables of the other engines (`_SHARD_DDL`),
`BIGINT` ids:

* `edges` with the primary key `edges_key (id1, atype, id2) INCLUDE (state,
  time)` (one edge per pair, the upserts' conflict target, and membership
  probes that read the index alone) and `edges_list (id1, atype, state, time,
  id2) INCLUDE (updated_at)`, the order lists are read in, so a page is one
  contiguous index range (a heap is not clustered: `data`, up to 64 KiB, is
  read from the table; it cannot be an index column);
* `counts (id1, atype, state) INCLUDE (n)`, changed in the same transaction
  as edges; `objects` (with `objects_recent (otype, updated_at)`),
  `node_states`, `timelines`, `seq`, and `index_N` made on first write.

Every method is `sql.SQLBackend`'s; this module holds PostgreSQL's dialect
and its connections (`pgconn`). A write transaction runs at REPEATABLE READ
and its reads lock what they find (`FOR UPDATE`). PostgreSQL has no gap
locks; instead, a transaction that writes a row another one changed or
inserted after its snapshot fails with a serialization failure (40001), as
does a locking read of such a row, and is run again (`retryable`, like
InnoDB's deadlock victims); so two applies of the same keys are serialized
and counts stay exact. A recount needs no shared locks for the same reason:
a count row changed after its snapshot makes its repair fail and rerun.

Bulk loads write the edges no list held before with binary `COPY` and the
rest with upserts (`_bulk_store`).

Connections come from one bounded pool per server (`pgpool.Pool`, on
psycopg_pool), a second one with the long maintenance timeout for bulk loads,
scans of whole shards and DDL; a pooled connection the server closed meanwhile
is replaced once, and a server that refuses connections answers with its own
error at once (see `pgpool`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ..core.errors import AssocdbError, Unavailable
from ..core.merge import EdgeTuple
from .dialect import Session
from .pgconn import WATCHDOG, driver, map_pg_error, parse_url, sqlstate_of
from .pgpool import Pool
from .serverurl import Settings, graph_schemas, server_spec
from .sql import SQLBackend
from .sqlfeed import ddl
from .sqlopen import open_on_server
from .sqltext import EDGE_COLUMNS

log = logging.getLogger("assocdb.postgres")

MAINTENANCE_TIMEOUT = 600.0  # recount, export and bulk loads scan or write whole shards
#: Reruns: serialization failure, deadlock; and the catalog's unique keys, which two
#: concurrent `CREATE TABLE IF NOT EXISTS` of one table trip (writes never do: merges).
_RETRYABLE = {"40001", "40P01", "23505", "42P06", "42P07"}
_GONE = {"57P01", "57P02", "57P03"}  # shut down, crashed, starting: a new connection
_NO_TABLE = "42P01"
_TIMELINES_DDL = (
    "CREATE TABLE IF NOT EXISTS {s}.timelines (owner BIGINT PRIMARY KEY, entries BYTEA NOT NULL)"
)
_SHARD_DDL = [
    """CREATE TABLE IF NOT EXISTS {s}.edges (
        id1 BIGINT NOT NULL, atype INTEGER NOT NULL, id2 BIGINT NOT NULL,
        state SMALLINT NOT NULL, time BIGINT NOT NULL, updated_at BIGINT NOT NULL, data BYTEA,
        CONSTRAINT edges_key PRIMARY KEY (id1, atype, id2) INCLUDE (state, time)
    )""",
    "CREATE INDEX IF NOT EXISTS edges_list ON {s}.edges "
    "(id1, atype, state, time, id2) INCLUDE (updated_at)",
    """CREATE TABLE IF NOT EXISTS {s}.counts (
        id1 BIGINT NOT NULL, atype INTEGER NOT NULL, state SMALLINT NOT NULL, n BIGINT NOT NULL,
        PRIMARY KEY (id1, atype, state) INCLUDE (n)
    )""",
    """CREATE TABLE IF NOT EXISTS {s}.objects (
        id BIGINT PRIMARY KEY, otype INTEGER NOT NULL, state SMALLINT NOT NULL,
        version BIGINT NOT NULL, updated_at BIGINT NOT NULL, data BYTEA NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS objects_recent ON {s}.objects (otype, updated_at)",
    """CREATE TABLE IF NOT EXISTS {s}.node_states (
        node BIGINT NOT NULL, atype INTEGER NOT NULL, state SMALLINT NOT NULL,
        updated_at BIGINT NOT NULL, PRIMARY KEY (node, atype)
    )""",
    "CREATE TABLE IF NOT EXISTS {s}.seq (name VARCHAR(32) PRIMARY KEY, value BIGINT NOT NULL)",
    _TIMELINES_DDL,
]
_META_DDL = (
    "CREATE TABLE IF NOT EXISTS {s}.meta (name VARCHAR(191) PRIMARY KEY, value BYTEA NOT NULL)"
)


class PostgresDialect:
    """PostgreSQL's spelling of what `SQLBackend` says (see `sql.Dialect`)."""

    begin = "BEGIN ISOLATION LEVEL REPEATABLE READ"
    lock = " FOR UPDATE"
    share = ""  # see the module docstring (and FOR SHARE refuses GROUP BY)
    row_values = True  # `(a, b) > (x, y)` is an index range to the planner
    meta_key = "name"
    timelines_ddl = _TIMELINES_DDL
    feed_ddl = ddl("BYTEA")
    feed_settle = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND xact_start < ?"
    )
    feed_now = "SELECT clock_timestamp()"
    feed_recheck = 0.25

    def use_index(self, name: str) -> str:
        return ""  # no hints: the planner picks the index the WHERE and ORDER BY name

    def upsert(self, table: str, columns: Sequence[str], key: int, add: bool = False) -> str:
        new = "{0} = t.{0} + EXCLUDED.{0}" if add else "{0} = EXCLUDED.{0}"
        sets = ", ".join(new.format(column) for column in columns[key:])
        marks = ",".join("?" * len(columns))
        return (
            f"INSERT INTO {{s}}.{table} AS t ({', '.join(columns)}) VALUES ({marks}) "
            f"ON CONFLICT ({', '.join(columns[:key])}) DO UPDATE SET {sets}"
        )

    def index_ddl(self, index: int) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {{s}}.index_{index} ("
            "ikey BYTEA NOT NULL, id BIGINT NOT NULL, updated_at BIGINT NOT NULL, "
            "version BIGINT NOT NULL, state SMALLINT NOT NULL, PRIMARY KEY (ikey, id))",
            f"CREATE INDEX IF NOT EXISTS index_{index}_by_id ON {{s}}.index_{index} (id)",
        ]

    def missing_table(self, exc: AssocdbError) -> bool:
        return sqlstate_of(exc) == _NO_TABLE

    def retryable(self, exc: AssocdbError) -> bool:
        return sqlstate_of(exc) in _RETRYABLE

    def gone(self, exc: AssocdbError) -> bool:
        state = sqlstate_of(exc)
        if state is not None:
            return state.startswith("08") or state in _GONE
        return isinstance(exc.__cause__, driver().OperationalError)  # no answer at all

    def row_hash(self, columns: Sequence[str]) -> str:
        return f"hashtext(ROW({', '.join(columns)})::text)"


class PgSession(Session):
    """The session of one connection, made with it and lent with it (one object less
    per read): the pool it came from, and how long one statement on it may take
    before the watchdog ends it."""

    __slots__ = ("deadline", "pool")

    def __init__(self, conn: Any, reused: bool, pool: Pool, deadline: float) -> None:
        # Session's fields set here, not by super().__init__: one call less on every read.
        self.conn = conn
        self.broken = False
        self.reused = reused
        self.cursor = None
        self.pool = pool
        self.deadline = deadline


class PostgresBackend(SQLBackend):
    """Shards as schemas `NAME_s{n}` in one PostgreSQL database."""

    local = False
    driver_errors = (Exception,)  # psycopg's, and the sockets under it

    def __init__(self, settings: Settings, shards: int) -> None:
        super().__init__(shards, PostgresDialect(), settings.query_timeout)
        self.settings = settings
        self._schemas = [f'"{settings.name}_s{n}"' for n in range(shards)]
        self._meta = f'"{settings.name}_meta"'
        # As on MySQL: a caller waits for a free connection as long as for a statement.
        timeout = settings.query_timeout
        # The watchdog ends a statement once the server had time to cancel it itself.
        self._deadlines = (_watchdog_deadline(timeout), _watchdog_deadline(MAINTENANCE_TIMEOUT))
        size = settings.pool_size
        self._pool = Pool(settings, timeout, size, timeout, lambda c, p: self._ready(c, p, False))
        self._slow_pool = Pool(
            settings,
            MAINTENANCE_TIMEOUT,
            size,
            MAINTENANCE_TIMEOUT,
            lambda c, p: self._ready(c, p, True),
        )

    @classmethod
    def open(
        cls, url: str, shards: int | None = None, *, create: bool = True, **options: Any
    ) -> PostgresBackend:
        """Open the graph a `postgresql://user@host:port/NAME` URL names, creating it if
        new (with `create=False`, NotFound instead, and no schema is created).

        `options` (connect_timeout, query_timeout, pool_size, database) override the URL's.

        >>> PostgresBackend.open("postgresql://postgres@127.0.0.1:5432/social", shards=16)
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
                rows = backend._run(session, 0, "SELECT nspname FROM pg_namespace")
                names = graph_schemas((name for (name,) in rows), settings.name)
                for start in range(0, len(names), 32):  # a transaction's locks are finite
                    backend._run(session, 0, "BEGIN")
                    for name in names[start : start + 32]:
                        backend._run(session, 0, f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
                    backend._run(session, 0, "COMMIT")
        finally:
            backend.close()

    def _create(self) -> None:
        """The graph's schemas and tables, one transaction per schema; concurrent
        creators of the same graph take turns (an advisory lock on its name)."""
        with self._session(slow=True) as session:
            key = f"assocdb:{self.settings.name}"
            self._run(session, 0, "SELECT pg_advisory_lock(hashtext(%s))", (key,))
            try:
                work = [(-1, self._meta, [_META_DDL])]
                work += [(n, s, _SHARD_DDL) for n, s in enumerate(self._schemas)]
                for shard, schema, ddl in work:
                    self._run(session, shard, "BEGIN")
                    self._run(session, shard, f"CREATE SCHEMA IF NOT EXISTS {schema}")
                    for statement in ddl:
                        self._run(session, shard, statement.format(s=schema))
                    self._run(session, shard, "COMMIT")
            finally:  # a lost connection has released its lock
                if not session.conn.closed:
                    self._rollback(session, 0)
                    self._run(session, 0, "SELECT pg_advisory_unlock(hashtext(%s))", (key,))

    def _stored_shards(self) -> int | None:
        with self._session() as session:
            (found,) = self._run(session, 0, "SELECT to_regclass(%s)", (f"{self._meta}.meta",))[0]
            if found is None:
                return None
        value = self.get_meta("shards")
        return None if value is None else int(value)

    # -- what differs from the shared algorithms ------------------------------------------

    def _map_error(self, exc: Exception, where: str) -> AssocdbError:
        return map_pg_error(exc, where)

    def index_purge(self, shard: int, index: int, before: int) -> int:
        # FOR UPDATE refuses an aggregate; the DELETE counts what it removed.
        sql = self._q(
            f"WITH gone AS (DELETE FROM {{s}}.index_{index} WHERE state = 3 AND updated_at < ? "
            "RETURNING 1) SELECT COUNT(*) FROM gone",
            shard,
        )

        def body(session: Session) -> int:
            return int(self._run(session, shard, sql, (before,))[0][0])

        return self._unless_missing(lambda: self._in_transaction(shard, body), int)

    def _bulk_store(
        self, session: Session, shard: int, changed: Sequence[tuple[EdgeTuple | None, EdgeTuple]]
    ) -> None:
        """New edges by binary COPY, in key order; changed ones by upsert. (A new edge
        another transaction inserted meanwhile breaks the primary key: 23505, a rerun.)"""
        new = sorted(row for old, row in changed if old is None)
        if new:
            self._copy(session, shard, "edges", EDGE_COLUMNS, new)
        self._store(session, shard, self._upsert_edge, sorted(r for o, r in changed if o))

    def _copy(
        self,
        session: Session,
        shard: int,
        table: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> None:
        sql = self._q(
            f"COPY {{s}}.{table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)", shard
        )
        start = time.perf_counter()
        conn = session.conn
        WATCHDOG.watch(conn, session.deadline)  # type: ignore[attr-defined]  # a PgSession
        try:
            with conn.cursor() as cursor, cursor.copy(sql) as copy:
                copy.set_types(_COPY_TYPES[table])
                for row in rows:
                    copy.write_row(row)
        except Exception as exc:
            session.broken = True
            raise self._map_error(exc, f"shard {shard}") from exc
        finally:
            WATCHDOG.done(conn)
        self._report(shard, sql, time.perf_counter() - start, many=True)

    # -- connections ------------------------------------------------------------------------

    def _ready(self, conn: Any, pooled: bool, slow: bool) -> None:
        """Ready a new connection of the pool (`slow`: the maintenance one): one cursor
        for every statement on it (a new cursor per read, and its column descriptions,
        cost a fifth of a point read), and its session. One from the pool may have sat
        idle (`reused`); a direct one (`pgpool`) is new."""
        conn.assocdb_cursor = conn.cursor()
        pool = self._slow_pool if slow else self._pool
        conn.assocdb_session = PgSession(conn, pooled, pool, self._deadlines[slow])

    @contextmanager
    def _session(self, slow: bool = False) -> Iterator[Session]:
        """A pooled connection (`slow`: from the pool with the maintenance timeout)."""
        pool = self._slow_pool if slow else self._pool
        conn = pool.get()
        session = conn.assocdb_session
        session.broken = False
        try:
            yield session
        finally:
            pool.put(conn)

    def _stale(self, exc: AssocdbError, session: Session, started: float) -> bool:
        """As `SQLBackend._stale`; and then the session's pool replaces its idle
        connections, which the server has most likely closed too (a restart), so the
        statement's second run is on a new one."""
        stale = super()._stale(exc, session, started)
        if stale and isinstance(session, PgSession):
            session.pool.renew()
        return stale

    def _render(self, template: str, shard: int) -> str:
        schema = self._meta if shard < 0 else self._schemas[shard]
        return template.replace("{s}", schema).replace("?", "%s")

    def _execute(self, session: Session, sql: str, params: Any, many: bool) -> list[Any]:
        conn = session.conn
        WATCHDOG.watch(conn, session.deadline)  # type: ignore[attr-defined]  # a PgSession
        cursor = conn.assocdb_cursor
        try:
            if many:
                cursor.executemany(sql, params)
                return []
            cursor.execute(sql, params or None)
            result = cursor.pgresult
            return cursor.fetchall() if result is not None and result.status == _ROWS else []
        finally:
            WATCHDOG.done(conn)

    def _query(self, shard: int, sql: str, params: Any = (), slow: bool = False) -> list[Any]:
        """One read on a pooled connection; a stale pooled connection is replaced once."""
        # `_session`, spelled out: every uncached read comes here.
        pool = self._slow_pool if slow else self._pool
        for attempt in (1, 2):
            conn = pool.get()
            session = conn.assocdb_session
            session.broken = False
            started = time.monotonic()
            try:
                return self._run(session, shard, sql, params)
            except Unavailable as exc:
                if attempt == 2 or not self._stale(exc, session, started):
                    raise
            finally:
                pool.put(conn)
        raise AssertionError("unreachable")

    def _writing(self, shard: int, slow: bool) -> AbstractContextManager[Session]:
        return self._session(slow)

    def _rollback(self, session: Session, shard: int) -> None:
        conn = session.conn
        if conn.closed:  # the pool drops it, and with it the transaction
            return
        try:
            conn.rollback()
        except Exception:
            log.debug("rollback failed on shard %d", shard, exc_info=True)

    def spec(self) -> dict[str, Any]:
        query = f"?database={self.settings.database}"
        return server_spec("postgres", "postgresql", self.settings, self.shards, query)

    def close(self) -> None:
        self._pool.close()
        self._slow_pool.close()


#: The column types of the tables bulk loads COPY into.
_COPY_TYPES = {"edges": ["int8", "int4", "int8", "int2", "int8", "int8", "bytea"]}


def _watchdog_deadline(statement_timeout: float) -> float:
    """How long the watchdog lets a statement run: past the server's own timeout."""
    return statement_timeout * 1.5 + 1.0


_ROWS = 2  # ExecStatus.TUPLES_OK: the statement returned rows
