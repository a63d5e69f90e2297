"""SQL shards: every `Backend` method, written once for all SQL engines.

`SQLBackend` holds the algorithms. An engine (`sqlite.py`, `mysql.py`)
subclasses it and supplies only what differs between engines, in two parts:

* a `Dialect`: DDL, upsert syntax, the locking-read suffix, index hints,
  how a keyset comparison is spelled, and what the engine's error numbers mean;
* its connections: `_query` (one read), `_writing` (a session that holds the shard's
  write turn), `_execute` (one driver call), `_render` (a statement on a shard: its
  schema, its parameter marks), `_rollback`, and `open`, `spec`, `close`.

A third engine (`postgres.py`) is one more of each; one level of subclass, no mixins.

Statements are templates (`{s}.edges`, `?`); `_q` renders one for a shard and caches it.

Writes. `apply` reads the current rows of the written keys, folds the writes
in with the pure merge rule (`core.merge`), and stores the changed rows and
the count deltas, all in one transaction (`_in_transaction`). The read locks
what it reads until the commit: on SQLite `BEGIN IMMEDIATE` takes the shard's
one write lock, on MySQL each read ends in `FOR UPDATE` (REPEATABLE READ, so
the gaps where absent keys would be are locked too). So two applies of the
same keys are serialized, the second merges against the first's result, and
counts stay exact. A transaction the engine aborted to break a deadlock is run
again (the merge is idempotent). `bulk_merge` is `apply` for a bulk load's round (many
lists per statement). Index entries (`core.entities.merge_entries`) and home timelines
merge the same way. With the feed on, both hand their changes to `sqlfeed.record`.

Tables made on first use (`index_N`; `timelines` in MySQL graphs older than
home timelines) are created by `_ddl` before the write's transaction (MySQL
commits DDL at once). An index table dropped behind a process's back fails
the write as `Unavailable`; the journal retries and the retry creates it.

Every statement goes through `_run`, the choke point: fault injectors
(`faults`), timing, tracers, the slow-statement log and `map_driver_error`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

from ..core.compress import pack
from ..core.errors import AssocdbError
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
from ..core.scans import EdgeScan, Id2Row, IndexEntry, IndexScan, ListRow, SetScan, Tracer
from ..core.timeline_list import TimelineEntry
from . import sqlfeed as _feed
from . import sqlindexes as _indexes
from . import sqlscans as _scans
from . import sqlsets as _sets
from . import sqltables as _tables
from . import sqltimelines as _timelines
from .backend import ForgetHook, Older, map_driver_error, probe_short_each, unions_each
from .dialect import Dialect, Session
from .sqltext import (
    COUNT_COLUMNS,
    EDGE_COLUMNS,
    EDGES,
    ENTRY_COLUMNS,
    NODE_COLUMNS,
    NODES,
    OBJ_COLUMNS,
    OBJECTS,
    SELECT_EDGES,
    TABLE_COLUMNS,
    chunks,
    list_rows_sql,
    marks,
    obj_row,
    past_params,
    plain_rows,
    seek_past,
)

log = logging.getLogger("assocdb.sql")

DEFAULT_SHARDS = 16
MAX_SHARDS = 4096
SLOW_SECONDS = 0.5  # a statement that takes longer is logged
BULK_ROWS = 1000  # an apply of more rows runs with the engine's maintenance timeout
RERUNS = 8  # tries of a transaction the engine aborted to break a deadlock
_KEYS_CHUNK = 200  # (id1, atype, id2) keys per read of single rows
_MANY_KEYS = 8  # keys written to one list from which it is read by an IN list of its own

T = TypeVar("T")
B = TypeVar("B", bound="SQLBackend")
K = TypeVar("K")


class SQLBackend(ABC):
    """A `Backend` on SQL shards; see the module docstring."""

    #: The exceptions the engine's driver raises (each is mapped by `map_driver_error`).
    driver_errors: tuple[type[Exception], ...]
    local: bool
    _union_packed = False  # `_union_rows_template` gives one row, a JSON array of the ids

    def __init__(self, shards: int, dialect: Dialect, timeout: float) -> None:
        self.shards = shards
        self.dialect = dialect
        self.timeout = timeout  # how long a statement, or a wait for a lock, may take
        self.tracers: list[Tracer] = []
        #: Called with (shard, sql) before every statement, inside the choke point:
        #: a fault injector may raise a driver error (it is mapped like a real one)
        #: or sleep. For chaos tests and drills.
        self.faults: list[Callable[[int, str], None]] = []
        self.forget_hooks: list[ForgetHook] = []  # one copy of each row: never called
        self.recovery_hooks: list[Callable[[], None]] = []  # no members: never called
        self._sql: dict[tuple[str, int], str] = {}
        self._probes: dict[tuple[int, int, int, bool, bool], str] = {}  # `_probe_sql`
        self._set_sql: dict[tuple[Any, ...], str] = {}  # `sqlsets`' statements by shard, shape
        self._row_scans, self._key_scans = _scans.Scans(_scans.ROWS), _scans.Scans(_scans.KEYS)
        self._tables: set[tuple[int, int]] = set()  # index tables known to exist
        self._tables_lock = threading.Lock()
        self.feed = False  # whether applies record their changes (`sqlfeed.SQLFeed.enable`)
        self._changes = _feed.SQLFeed(self)
        d = dialect
        self._upsert_edge = d.upsert("edges", EDGE_COLUMNS, 3)
        self._add_count = d.upsert("counts", COUNT_COLUMNS, 3, add=True)
        self._set_count = d.upsert("counts", COUNT_COLUMNS, 3)
        self._upsert_node = d.upsert("node_states", NODE_COLUMNS, 2)
        self._upsert_object = d.upsert("objects", OBJ_COLUMNS, 1)
        self._upsert_timeline = d.upsert("timelines", ("owner", "entries"), 1)
        self._upsert_meta = d.upsert("meta", (d.meta_key, "value"), 1)
        self._add_seq = d.upsert("seq", ("name", "value"), 1, add=True)
        self._select_meta = f"SELECT value FROM {{s}}.meta WHERE {d.meta_key} = ?"
        self._by_key = d.use_index("edges_key")
        self._by_recent = d.use_index("objects_recent")

    def fresh_reads(self) -> AbstractContextManager[None]:
        return nullcontext()  # one copy of each row: every read is fresh

    def replicated(self) -> None:
        return None  # one copy of each shard

    def exclusive_writes(self) -> AbstractContextManager[None]:
        return nullcontext()  # a database server's graph: see docs/architecture.md

    # -- what each engine supplies ------------------------------------------------------

    @abstractmethod
    def _render(self, template: str, shard: int) -> str:
        """`template` as the driver runs it on `shard` (-1: where the settings live)."""

    @abstractmethod
    def _execute(self, session: Session, sql: str, params: Any, many: bool) -> list[Any]:
        """One driver call: a statement's rows, or an executemany's (none)."""

    @abstractmethod
    def _query(self, shard: int, sql: str, params: Any = (), slow: bool = False) -> list[Any]:
        """One read outside any transaction, through `_run` (`slow`: a long scan)."""

    @abstractmethod
    def _writing(self, shard: int, slow: bool) -> AbstractContextManager[Session]:
        """A session for one write transaction on the shard."""

    @abstractmethod
    def _rollback(self, session: Session, shard: int) -> None:
        """End the session's transaction, if one is open, without its changes."""

    @abstractmethod
    def spec(self) -> dict[str, Any]: ...

    @abstractmethod
    def close(self) -> None: ...

    # -- the choke point ------------------------------------------------------------------

    def _q(self, template: str, shard: int) -> str:
        """The statement `template` on `shard`, rendered once."""
        sql = self._sql.get((template, shard))
        if sql is None:
            sql = self._sql[(template, shard)] = self._render(template, shard)
        return sql

    def _run(
        self, session: Session, shard: int, sql: str, params: Any = (), many: bool = False
    ) -> list[Any]:
        """Execute one statement (or one multi-row executemany) and return its rows."""
        start = time.perf_counter()
        try:
            for fault in self.faults:
                fault(shard, sql)
            rows = self._execute(session, sql, params, many)
        except AssocdbError:  # a fault injector's own error
            raise
        except self.driver_errors as exc:
            session.broken = True
            raise self._map_error(exc, f"shard {shard}") from exc
        seconds = time.perf_counter() - start
        if self.tracers or seconds > SLOW_SECONDS:  # (a call less on every read)
            self._report(shard, sql, seconds, many)
        return rows

    def _map_error(self, exc: Exception, where: str) -> AssocdbError:
        """The assocdb error for a driver exception (an engine may read more than the
        PEP 249 class name: PostgreSQL's SQLSTATE)."""
        return map_driver_error(exc, where)

    def _report(self, shard: int, sql: str, seconds: float, many: bool = False) -> None:
        for tracer in self.tracers:
            try:
                tracer(shard, sql, seconds)
            except Exception:  # a broken tracer must not break a write that succeeded
                log.exception("tracer %r failed", tracer)
        if seconds > SLOW_SECONDS and not many:  # a bulk executemany is meant to be long
            shown = sql if len(sql) <= 500 else f"{sql[:500]}… ({len(sql):,} characters)"
            log.warning("slow statement on shard %d (%.3f s): %s", shard, seconds, shown)

    def _in_transaction(self, shard: int, body: Callable[[Session], T], slow: bool = False) -> T:
        """`body(session)` in one write transaction; run again if the engine aborted it to
        break a deadlock, or if a reused pooled connection turned out to be closed."""
        for attempt in range(1, RERUNS + 1):
            with self._writing(shard, slow) as session:
                started, begun = time.monotonic(), False
                try:
                    self._run(session, shard, self.dialect.begin)
                    begun = True
                    result = body(session)
                    self._run(session, shard, "COMMIT")
                    return result
                except AssocdbError as exc:
                    self._rollback(session, shard)
                    # Only a BEGIN that failed is known to have done nothing:
                    # a lost COMMIT may have committed.
                    stale = not begun and self._stale(exc, session, started)
                    if not (stale or self.dialect.retryable(exc)) or attempt == RERUNS:
                        raise
                except BaseException:
                    self._rollback(session, shard)
                    raise
            time.sleep(random.uniform(0, 0.002 * attempt))
        raise AssertionError("unreachable")

    def _stale(self, exc: AssocdbError, session: Session, started: float) -> bool:
        """Whether `exc` says a reused pooled connection had been closed by the server
        (that fails at once; a timeout, with the same error, took the whole timeout
        and is not worth repeating)."""
        quick = time.monotonic() - started < self.timeout / 2
        return session.reused and quick and self.dialect.gone(exc)

    def _select(
        self, session: Session | None, shard: int, template: str, params: Any = ()
    ) -> list[Any]:
        """One read: on its own (`session` None), or in a write transaction, locking."""
        if session is None:
            return self._query(shard, self._q(template, shard), params)
        return self._run(session, shard, self._q(template + self.dialect.lock, shard), params)

    def _store(self, session: Session, shard: int, template: str, rows: Sequence[Any]) -> None:
        """Upsert `rows` with one multi-row statement (none without rows)."""
        if rows:
            self._run(session, shard, self._q(template, shard), rows, many=True)

    def _ddl(self, shard: int, *statements: str) -> None:
        """Change the shard's tables, in a transaction of their own (DDL waits for the
        disk: the maintenance timeout)."""

        def body(session: Session) -> None:
            for statement in statements:
                self._run(session, shard, self._q(statement, shard))

        self._durably(shard, body, slow=True)

    def _durably(self, shard: int, body: Callable[[Session], T], slow: bool = False) -> T:
        """`_in_transaction`, returning once the commit is durable: for what no journal
        job covers (settings, the schema, id reservations, tables), whose loss in a
        power cut would take back something already acknowledged."""
        result = self._in_transaction(shard, body, slow)
        self.make_durable([shard])
        return result

    def _unless_missing(self, run: Callable[[], T], missing: Callable[[], T]) -> T:
        """`run()`, or `missing()` if a table `run` uses does not exist."""
        try:
            return run()
        except AssocdbError as exc:
            if not self.dialect.missing_table(exc):
                raise
        return missing()

    # -- writes ---------------------------------------------------------------------------

    def apply(
        self,
        shard: int,
        edges: Sequence[EdgeTuple],
        objects: Sequence[ObjRow],
        nodes: Sequence[NodeRow] = (),
    ) -> Changes:
        # A batch this big is a bulk load: it may take seconds, and has no
        # journal to retry it, so it runs with the maintenance timeout.
        bulk = len(edges) + len(objects) + len(nodes) > BULK_ROWS
        changes = self._in_transaction(
            shard, lambda session: self._apply(session, shard, edges, objects, nodes), bulk
        )
        self._changes.committed()  # wakes this process's feed readers
        return changes

    def _apply(
        self,
        session: Session,
        shard: int,
        edges: Sequence[EdgeTuple],
        objects: Sequence[ObjRow],
        nodes: Sequence[NodeRow],
    ) -> Changes:
        changed_edges: list[tuple[EdgeTuple | None, EdgeTuple]] = []
        changed_objects: list[ObjRow] = []
        changed_nodes: list[NodeRow] = []
        if nodes:
            stored = self._node_states(session, shard, [(row[0], row[1]) for row in nodes])
            changed_nodes = merge_nodes(stored, nodes)
            self._store(session, shard, self._upsert_node, changed_nodes)
        if edges:
            changed_edges, deltas = merge_edges(self._current_edges(session, shard, edges), edges)
            self._store(session, shard, self._upsert_edge, [new for _, new in changed_edges])
            self._store(session, shard, self._add_count, [(*k, n) for k, n in deltas.items()])
        if objects:
            ids = [row[0] for row in objects]
            current = {row[0]: row for row in self._objects(session, shard, ids)}
            changed_objects = merge_objects(current, objects)
            packed = [(*row[:5], pack(row[5])) for row in changed_objects]
            self._store(session, shard, self._upsert_object, packed)
        changes = Changes(changed_edges, changed_objects, changed_nodes)
        _feed.record(self, session, shard, changes)  # with the feed on: no change without it
        return changes

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
            # Many lists, few targets: the mirrored rows of one node's edges
            # (everyone who follows a celebrity). Look them up by target.
            for (atype, id2), id1s in sorted(targets.items()):
                for row in self._edges_to(session, shard, atype, id2, sorted(id1s)):
                    current[row[:3]] = row
            return current
        # Lists written with a few keys each (a batch of writes spread over many
        # lists): all their keys in one read. Lists with many keys (a bulk load)
        # are read list by list, each with one IN list.
        few = [
            (id1, atype, id2)
            for (id1, atype), id2s in lists.items()
            if len(id2s) < _MANY_KEYS
            for id2 in id2s
        ]
        many = {key: id2s for key, id2s in lists.items() if len(id2s) >= _MANY_KEYS}
        for row in self._edges_at(session, shard, few):
            current[row[:3]] = row
        if len(many) > 1:
            # Every stored edge has a count row, so a list without count rows
            # has no edges to read: a bulk load into new lists reads (and locks)
            # only the count ranges, which serializes it against writers of the
            # same lists all the same.
            stored = self._lists_with_counts(session, shard, sorted({id1 for id1, _ in many}))
            many = {key: id2s for key, id2s in many.items() if key in stored}
        for (id1, atype), id2s in sorted(many.items()):
            for row in self._edges(session, shard, id1, atype, sorted(id2s)):
                current[row[:3]] = row
        return current

    def bulk_merge(self, shard: int, edges: Sequence[EdgeTuple]) -> int:
        """`apply` for a bulk load's edges (merge, counts, feed, one transaction), but the
        current rows are read list by list in few statements (`_bulk_current`) and the
        changed rows written in key order; how many changed (the caller forgets the cache)."""

        def body(session: Session) -> int:
            if (inserted := self._bulk_new(session, shard, edges)) is not None:
                return inserted
            changed, deltas = merge_edges(self._bulk_current(session, shard, edges), edges)
            self._bulk_store(session, shard, changed)
            self._store(session, shard, self._add_count, sorted((*k, n) for k, n in deltas.items()))
            _feed.record(self, session, shard, Changes(changed, [], []))  # as `_apply` does
            return len(changed)

        changed = self._in_transaction(shard, body, slow=True)
        self._changes.committed()  # wakes this process's feed readers
        return changed

    def copy_edges(self, shard: int, after: EdgeKey | None, edges: Sequence[EdgeTuple]) -> int:
        """`bulk_merge` for a page of a shard copy (`sqltables.copy_edges`)."""
        return _tables.copy_edges(self, shard, after, edges)

    def _bulk_new(self, session: Session, shard: int, edges: Sequence[EdgeTuple]) -> int | None:
        """`bulk_merge` without reading, if the engine can tell that every key is new."""
        return None

    def _bulk_store(
        self, session: Session, shard: int, changed: Sequence[tuple[EdgeTuple | None, EdgeTuple]]
    ) -> None:
        """Write a bulk load's changed edges (an engine may have a faster way: COPY)."""
        # (id1, atype, id2) order: the lists in the table's order, one page after
        # the next (the rows' own order: no key function to call per row).
        self._store(session, shard, self._upsert_edge, sorted([new for _, new in changed]))

    def _bulk_current(
        self, session: Session, shard: int, writes: Sequence[EdgeTuple]
    ) -> dict[EdgeKey, EdgeTuple]:
        """The stored rows of the written keys, locked until the transaction ends.

        Only lists with count rows can hold edges. A list whose stored rows are few
        beside the keys written to it is read whole, many lists per statement (a
        load that adds to lists it loaded a round ago); a big list that gets a
        few keys is read by key, as `apply` reads.
        """
        sizes = self._list_sizes(session, shard, sorted({row[0] for row in writes}))
        if not sizes:  # new lists only (a load into a new graph): nothing to read
            return {}
        written: dict[tuple[int, int], list[int]] = {key: [] for key in sizes}
        for row in writes:
            id2s = written.get((row[0], row[1]))
            if id2s is not None:
                id2s.append(row[2])
        whole: dict[int, list[int]] = {}  # atype -> the id1s of its lists read whole
        current: dict[EdgeKey, EdgeTuple] = {}
        for (id1, atype), size in sorted(sizes.items()):
            id2s = written[(id1, atype)]
            if not id2s:
                continue
            if size <= 4 * len(id2s) + 64:
                whole.setdefault(atype, []).append(id1)
            else:
                for row in self._edges(session, shard, id1, atype, sorted(set(id2s))):
                    current[row[:3]] = row
        for atype, id1s in sorted(whole.items()):
            for chunk in chunks(id1s):
                where = f"atype = ? AND id1 IN ({marks(len(chunk))})"
                for row in self._select(session, shard, f"{SELECT_EDGES} {where}", (atype, *chunk)):
                    current[(row[0], row[1], row[2])] = row
        return current

    def _list_sizes(
        self, session: Session, shard: int, id1s: list[int]
    ) -> dict[tuple[int, int], int]:
        """Stored rows (tombstones too) per list of these nodes that has any."""
        sizes: dict[tuple[int, int], int] = {}
        for chunk in chunks(id1s):
            sql = f"SELECT id1, atype, n FROM {{s}}.counts WHERE id1 IN ({marks(len(chunk))})"
            for id1, atype, n in self._select(session, shard, sql, chunk):
                sizes[(id1, atype)] = sizes.get((id1, atype), 0) + int(n)
        return sizes

    def _edges_to(
        self, session: Session, shard: int, atype: int, id2: int, id1s: list[int]
    ) -> list[EdgeTuple]:
        rows: list[EdgeTuple] = []
        for chunk in chunks(id1s):
            sql = (
                f"SELECT {EDGES} FROM {{s}}.edges{self._by_key} "
                f"WHERE id1 IN ({marks(len(chunk))}) AND atype = ? AND id2 = ?"
            )
            rows += self._select(session, shard, sql, (*chunk, atype, id2))
        return rows

    def _lists_with_counts(
        self, session: Session, shard: int, id1s: list[int]
    ) -> set[tuple[int, int]]:
        found: set[tuple[int, int]] = set()
        for chunk in chunks(id1s):
            sql = f"SELECT id1, atype FROM {{s}}.counts WHERE id1 IN ({marks(len(chunk))})"
            found.update((r[0], r[1]) for r in self._select(session, shard, sql, chunk))
        return found

    def make_durable(self, shards: Sequence[int]) -> None:  # noqa: B027 (a default)
        """Nothing to do on a database server: a commit waits for its log on disk
        (InnoDB's innodb_flush_log_at_trx_commit=1 and PostgreSQL's synchronous_commit=on,
        both the defaults). SQLite overrides it."""

    def allocate(self, shard: int, n: int) -> int:
        def body(session: Session) -> int:
            self._run(session, shard, self._q(self._add_seq, shard), ("objects", n))
            sql = self._q("SELECT value FROM {s}.seq WHERE name = 'objects'", shard)
            return int(self._run(session, shard, sql)[0][0])

        # Durable before any id of the block is handed out: replay restores the
        # objects, not the counter, and a counter taken back would hand an id out again.
        return self._durably(shard, body) - n + 1

    # -- reads ----------------------------------------------------------------------------

    def scan(self, shard: int, query: EdgeScan) -> list[ListRow]:
        return _scans.scan(self, self._row_scans, shard, query)

    def scan_keys(self, shard: int, query: EdgeScan) -> list[tuple[int, int]]:
        return _scans.scan(self, self._key_scans, shard, query)

    def edges(self, shard: int, id1: int, atype: int, id2s: Sequence[int]) -> list[EdgeRow]:
        return self._edges(None, shard, id1, atype, id2s)

    def _edges(
        self, session: Session | None, shard: int, id1: int, atype: int, id2s: Sequence[int]
    ) -> list[EdgeRow]:
        rows: list[EdgeRow] = []
        for chunk in chunks(id2s):
            which = "id2 = ?" if len(chunk) == 1 else f"id2 IN ({marks(len(chunk))})"
            sql = f"SELECT {EDGES} FROM {{s}}.edges{self._by_key} WHERE id1 = ? AND atype = ?"
            found = self._select(session, shard, f"{sql} AND {which}", (id1, atype, *chunk))
            rows += (EdgeRow(*r) for r in found)
        return rows

    def list_rows(self, shard: int, id1: int, atype: int, state: int, id2s: Any) -> list[ListRow]:
        sql = self._q(list_rows_sql(self._by_key, len(id2s)), shard)  # (one per size)
        return self._query(shard, sql, (id1, atype, state, *id2s))

    def edges_at(self, shard: int, keys: Sequence[EdgeKey]) -> list[EdgeRow]:
        return self._edges_at(None, shard, keys)

    def _edges_at(
        self, session: Session | None, shard: int, keys: Sequence[EdgeKey]
    ) -> list[EdgeRow]:
        rows: list[EdgeRow] = []
        for chunk in chunks(sorted(set(keys)), _KEYS_CHUNK):
            match = " OR ".join(["(id1 = ? AND atype = ? AND id2 = ?)"] * len(chunk))
            sql = f"SELECT {EDGES} FROM {{s}}.edges{self._by_key} WHERE {match}"
            found = self._select(session, shard, sql, [v for key in chunk for v in key])
            rows += (EdgeRow(*r) for r in found)
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
        return _sets.scan_id2(self, shard, id1, atype, states, boundary, forward, limit)

    def set_ids(self, shard: int, query: SetScan) -> list[int]:
        return _sets.set_ids(self, shard, query)

    unions = unions_each  # (SQLite, binding each shard's ids as JSON, has a leaner loop)
    probe_short = probe_short_each  # (SQLite passes the ids on as the engine's JSON)

    def _union_rows_template(self, id1s: int, states: int, bounded: bool, fwd: bool) -> str:
        return _sets.rows_template(id1s, states, bounded, fwd)  # (`sqlsets._united`)

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
        # Covering: `edges_key (id1, atype, id2)` also holds the primary key's
        # other columns (state, time), in SQLite's WITHOUT ROWID tables and in
        # InnoDB alike, so no table row is read; older graphs have the same
        # index. With a limit the engine walks the ids in order and stops there.
        # Each id is asked once: a repeated one would match twice across chunks,
        # and within one in SQLite's form. The set queries' ids come sorted and
        # distinct, so sorting the list (~2.5 µs for 200) and checking (~4.5) beats
        # sorting a set, which iterates in hash order (~18).
        ordered = sorted(id2s, reverse=forward)
        if len(set(ordered)) != len(ordered):
            ordered = sorted(set(ordered), reverse=forward)
        return _sets.probe(self, shard, id1, atype, states, ordered, forward, limit)

    def _probe_sql(self, shard: int, ids: int, states: int, forward: bool, limited: bool) -> str:
        """probe_id2s's statement, rendered once per shape (a page's probe is hot:
        building 200 marks and rendering them cost ~4 µs a call)."""
        shape = (shard, ids, states, forward, limited)
        sql = self._probes.get(shape)
        if sql is None:
            sql = self._probes[shape] = self._q(
                self._probe_template(ids, states, forward, limited), shard
            )
        return sql

    def _probe_template(self, ids: int, states: int, forward: bool, limited: bool) -> str:
        """The probe as an `IN` list, which the engine sorts and walks in order."""
        template = (
            f"SELECT id2 FROM {{s}}.edges{self._by_key} WHERE id1 = ? AND atype = ? "
            f"AND id2 IN ({marks(ids)}) AND state IN ({marks(states)})"
        )
        if limited:
            template += f" ORDER BY id2 {'DESC' if forward else 'ASC'} LIMIT ?"
        return template

    def _probe_params(
        self, id1: int, atype: int, id2s: Sequence[int], states: Sequence[int], left: int | None
    ) -> list[Any]:
        """`_probe_template`'s parameters: the ids are bound in the order asked."""
        params: list[Any] = [id1, atype, *id2s, *states]
        if left is not None:
            params.append(left)
        return params

    def node_states(
        self, shard: int, keys: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], NodeRow]:
        return self._node_states(None, shard, keys)

    def _node_states(
        self, session: Session | None, shard: int, keys: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], NodeRow]:
        # Few lists ever get a node state: read them by node, keep the asked types.
        wanted = set(keys)
        found: dict[tuple[int, int], NodeRow] = {}
        for chunk in chunks(sorted({node for node, _ in wanted})):
            which = "node = ?" if len(chunk) == 1 else f"node IN ({marks(len(chunk))})"
            sql = f"SELECT {NODES} FROM {{s}}.node_states WHERE {which}"
            for row in self._select(session, shard, sql, chunk):
                if (row[0], row[1]) in wanted:
                    found[(row[0], row[1])] = NodeRow(*row)
        return found

    def export_edges(
        self, shard: int, after: EdgeKey | None, limit: int, older: Older = None
    ) -> list[EdgeRow]:
        return _tables.export_edges(self, shard, after, limit, older)

    def export_table(
        self, shard: int, table: str, after: Sequence[Any] | None, limit: int
    ) -> list[tuple[Any, ...]]:
        return _tables.export_table(self, shard, table, after, limit)

    def _exported(self, table: str) -> tuple[str, Callable[[list[Any]], list[tuple[Any, ...]]]]:
        """What `export_table` selects from `table`, and how it turns the driver's rows
        into plain tuples (an engine may have its driver read fewer, wider columns)."""
        columns = TABLE_COLUMNS.get(table, ENTRY_COLUMNS)
        return ", ".join(columns), plain_rows

    def count_rows(self, shard: int, table: str) -> int:
        return _tables.count_rows(self, shard, table)

    def table_bound(
        self, shard: int, table: str, after: Sequence[Any] | None, rows: int
    ) -> tuple[Any, ...] | None:
        return _tables.table_bound(self, shard, table, after, rows)

    def table_summary(
        self,
        shard: int,
        table: str,
        after: Sequence[Any] | None,
        upto: Sequence[Any] | None,
    ) -> tuple[str, int, int]:
        return _tables.table_summary(self, shard, table, after, upto)

    def counts(self, shard: int, id1: int, atype: int) -> dict[int, int]:
        sql = self._q("SELECT state, n FROM {s}.counts WHERE id1 = ? AND atype = ?", shard)
        return {int(state): int(n) for state, n in self._query(shard, sql, (id1, atype))}

    def count_totals(self, shard: int) -> dict[tuple[int, int], int]:
        sql = self._q("SELECT atype, state, SUM(n) FROM {s}.counts GROUP BY atype, state", shard)
        rows = self._query(shard, sql, (), slow=True)
        return {(int(atype), int(state)): int(n) for atype, state, n in rows if n}

    def objects(self, shard: int, ids: Sequence[int]) -> list[ObjRow]:
        return self._objects(None, shard, ids)

    def _objects(self, session: Session | None, shard: int, ids: Sequence[int]) -> list[ObjRow]:
        rows: list[ObjRow] = []
        for chunk in chunks(sorted(ids)):
            sql = f"SELECT {OBJECTS} FROM {{s}}.objects WHERE id IN ({marks(len(chunk))})"
            rows += (obj_row(r) for r in self._select(session, shard, sql, chunk))
        return rows

    def objects_page(self, shard: int, otype: int, after: int, limit: int) -> list[ObjRow]:
        sql = f"SELECT {OBJECTS} FROM {{s}}.objects WHERE id > ? AND otype = ? ORDER BY id LIMIT ?"
        return [obj_row(r) for r in self._query(shard, self._q(sql, shard), (after, otype, limit))]

    def objects_count(self, shard: int, otype: int) -> int:
        sql = self._q(f"SELECT COUNT(*) FROM {{s}}.objects{self._by_recent} WHERE otype = ?", shard)
        return int(self._query(shard, sql, (otype,))[0][0])

    def objects_since(
        self, shard: int, otype: int, after: tuple[int, int], limit: int
    ) -> list[ObjRow]:
        past = seek_past(("updated_at", "id"), ">", False, self.dialect.row_values)
        sql = (
            f"SELECT {OBJECTS} FROM {{s}}.objects{self._by_recent} "
            f"WHERE otype = ? AND {past} ORDER BY updated_at, id LIMIT ?"
        )
        params = [otype, *past_params(after, self.dialect.row_values), limit]
        return [obj_row(r) for r in self._query(shard, self._q(sql, shard), params)]

    # -- home timelines, secondary indexes (`core.entities`) and the change feed ----------------

    def change_feed(self) -> _feed.SQLFeed:
        return self._changes

    def timelines(self, shard: int, owners: Sequence[int]) -> dict[int, bytes]:
        return _timelines.timelines(self, shard, owners)

    def merge_timelines(
        self, shard: int, writes: Mapping[int, Sequence[TimelineEntry]], cap: int
    ) -> int:
        return _timelines.merge_timelines(self, shard, writes, cap)

    def index_apply(self, shard: int, entries: Sequence[IndexEntry]) -> int:
        return _indexes.index_apply(self, shard, entries)

    def index_entries(self, shard: int, index: int, ids: Sequence[int]) -> list[IndexEntry]:
        return _indexes.index_entries(self, shard, index, ids)

    def index_scan(self, shard: int, index: int, scan: IndexScan) -> list[tuple[bytes, int]]:
        return _indexes.index_scan(self, shard, index, scan)

    def index_export(
        self, shard: int, index: int, after: tuple[bytes, int] | None, limit: int
    ) -> list[IndexEntry]:
        return _indexes.index_export(self, shard, index, after, limit)

    def index_purge(self, shard: int, index: int, before: int) -> int:
        return _indexes.index_purge(self, shard, index, before)

    def index_drop(self, shard: int, index: int) -> None:
        return _indexes.index_drop(self, shard, index)

    # -- graph-wide settings (kept with shard 0) and maintenance ------------------------------

    def get_meta(self, key: str) -> bytes | None:
        rows = self._query(0, self._q(self._select_meta, -1), (key,))
        return bytes(rows[0][0]) if rows else None

    def swap_meta(self, key: str, expected: bytes | None, value: bytes) -> bool:
        def body(session: Session) -> bool:
            read = self._q(self._select_meta + self.dialect.lock, -1)
            rows = self._run(session, 0, read, (key,))
            if (bytes(rows[0][0]) if rows else None) != expected:
                return False
            self._run(session, 0, self._q(self._upsert_meta, -1), (key, value))
            return True

        return self._durably(0, body)

    def recount(
        self, shard: int, repair: bool, id1s: Sequence[int] | None = None
    ) -> list[CountMismatch]:
        return _tables.recount(self, shard, repair, id1s)
