"""One consistent cut of a graph on one MariaDB or PostgreSQL server, and its copy into a
local SQLite graph directory (the backup's source side for server graphs, `api/backup.py`).

Every shard of such a graph is a schema of one server, so one snapshot transaction
reads them all as of one moment: MariaDB's `START TRANSACTION WITH CONSISTENT
SNAPSHOT`, PostgreSQL's `REPEATABLE READ` (its snapshot is taken at the first
statement). What the hold adds is the journal: while writers are held (MariaDB: `FLUSH
TABLES WITH READ LOCK`, which waits for running transactions; PostgreSQL: `LOCK TABLE …
IN SHARE MODE` on every shard's edges, counts, objects, node states, timelines and
index entries), the snapshot
and then the journal's are taken, and the hold is let go: the argument of
`sqlitecut.py` holds as it is. The journal is this process's (a server graph has one
per process that writes it): the unfinished jobs of other processes are not in it, and
the backup completes the inverse pairs they left half applied (`check_inverses`).

The copy reads every table in key order, in pages, on the snapshot's connection, and
writes each page into the SQLite shard with the shard-copy step (`copier.write_page`:
the merge rule, counts from the rows).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any, cast

from ..core import feedalign
from . import sqlfeed, sqltables
from .copier import Page, write_page
from .dialect import Session
from .replica_verify import tables_of, timeline_cap
from .rollforward import catch_up
from .sql import SQLBackend
from .sqlite import SQLiteBackend

PAGE = 5000
_HELD_TABLES = ("edges", "counts", "objects", "node_states")
_EXISTING = "SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NOT NULL"


class _OnSnapshot:
    """The backend, with every read on the snapshot's session (for `sqltables`)."""

    def __init__(self, backend: SQLBackend, session: Session) -> None:
        self._backend, self._session = backend, session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def _query(self, shard: int, sql: str, params: Any = (), slow: bool = False) -> list[Any]:
        return self._backend._run(self._session, shard, sql, params)

    def get_meta(self, key: str) -> bytes | None:
        return SQLBackend.get_meta(cast(SQLBackend, self), key)


class ServerCut:
    """Snapshots of every shard of a server graph (one per server), and the journal's,
    taken at one moment."""

    def __init__(self, shards: int) -> None:
        self.shards = shards
        self._stack = ExitStack()
        #: Per shard, a view of the server that holds its copy read, on its snapshot.
        self.readers: list[SQLBackend] = []
        self.journal: sqlite3.Connection | None = None
        self.held = 0.0
        self.began = self.at = 0
        self.positions: list[int | None] = []
        #: Whether positions name their replica (a shard map's: `core.feedalign`).
        self.tagged = False
        #: The edge legs (id1, atype, id2) `catch_up` merged in from the feed.
        self.touched: list[tuple[int, int, int]] = []

    @property
    def reader(self) -> SQLBackend:
        """The snapshot of the server that keeps the graph's settings (shard 0's)."""
        return self.readers[0]

    def copy_settings(self, target: SQLiteBackend) -> None:
        """Write the graph's settings (shard 0's `meta`, but the shard count) to `target`."""
        for key, value in sqltables.export_table(self.reader, 0, "meta", None, 1_000_000):
            if key != "shards":
                target.swap_meta(key, target.get_meta(key), value)

    def copy_shard(
        self, target: SQLiteBackend, shard: int, progress: Callable[[int], None]
    ) -> None:
        """Write every table of the shard and its id sequence to `target` (whose shard is
        new: rows it holds from elsewhere would stay)."""
        reader = self.readers[shard]
        cap = timeline_cap(self.reader)
        tables = [t for t in tables_of(self.reader) if t != "counts"]
        for table in _present(reader, shard, tables):
            _copy_table(reader, target, shard, table, cap, progress)
        _reserve(reader, target, shard)

    def catch_up(self, target: SQLiteBackend, shard: int, after: int) -> bool:
        """Bring the shard's copy in `target`, taken at an earlier cut whose feed position
        was `after`, to this cut (a resumed or incremental backup): the feed's records up
        to this cut's position, read on the snapshot, merged into it, and what the feed
        does not carry (home timelines, index entries, the id sequence) copied again.
        False if the feed no longer holds every record since `after` (trimmed since), or
        `after` names another replica than this cut's (a shard map's failover): copy the
        shard again."""
        upto, reader = self.positions[shard], self.readers[shard]
        assert upto is not None
        if self.tagged:
            (was, after), (now, upto) = feedalign.split(after), feedalign.split(upto)
            if was != now:
                return False
        if upto < after:  # (not this feed's numbering)
            return False
        merged = catch_up(reader, target, shard, after, upto, PAGE)
        if merged is None:
            return False
        self.touched += ((r[2], r[3], r[4]) for r in merged if r[1] == sqlfeed.EDGE)
        cap = timeline_cap(self.reader)
        unfed = [t for t in tables_of(self.reader) if t == "timelines" or t.startswith("index_")]
        for table in unfed:
            _empty(target, shard, table)
        for table in _present(reader, shard, unfed):
            _copy_table(reader, target, shard, table, cap, lambda rows: None)
        _reserve(reader, target, shard)
        return True

    def copy_journal(self, dest: Path) -> None:
        if self.journal is not None:
            target = sqlite3.connect(dest)
            try:
                self.journal.backup(target)
            finally:
                target.close()

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()
            self.journal = None
        self._stack.close()


def take(
    servers: Sequence[SQLBackend],
    placement: Sequence[int],
    tags: Sequence[int] | None,
    journal: Path | None,
) -> ServerCut:
    """The cut of a graph whose shard `s` is read from server `servers[placement[s]]`
    (one server: every shard on it; a shard map: each shard's primary, whose feed
    positions carry `tags[s]`: `core.feedalign`), and of this process's `journal` file.
    Writers of every server are held together."""
    cut = ServerCut(len(placement))
    cut.tagged = tags is not None
    try:
        sessions = [cut._stack.enter_context(_session(b)) for b in servers]
        for backend, session in zip(servers, sessions, strict=True):
            cut._stack.callback(backend._rollback, session, 0)
        with ExitStack() as holds:
            # Connections first: writers are held from the first lock on, not meanwhile.
            locks = [holds.enter_context(_session(backend)) for backend in servers]
            extra = [_optional(b, hold) for b, hold in zip(servers, locks, strict=True)]
            started = time.perf_counter()
            for backend, hold, tables in zip(servers, locks, extra, strict=True):
                holds.callback(_release, backend, hold)
                _hold(backend, hold, tables)
            for backend, session in zip(servers, sessions, strict=True):
                _begin(backend, session)
            cut.began = time.time_ns() // 1000
            if journal is not None and journal.exists():
                cut.journal = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
                cut.journal.execute("BEGIN")
                cut.journal.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            cut.at = time.time_ns() // 1000
        cut.held = time.perf_counter() - started
        views = [
            cast(SQLBackend, _OnSnapshot(b, s)) for b, s in zip(servers, sessions, strict=True)
        ]
        cut.readers = [views[placement[shard]] for shard in range(cut.shards)]
        cut.positions = [_feed_position(r, s, tags) for s, r in enumerate(cut.readers)]
    except BaseException:
        cut.close()
        raise
    return cut


def _mysql(backend: SQLBackend) -> bool:
    return bool(backend.spec()["kind"] == "mysql")


def _begin(backend: SQLBackend, session: Session) -> None:
    """A snapshot transaction on `session`, its snapshot taken now."""
    mysql = _mysql(backend)
    begin = (
        "START TRANSACTION WITH CONSISTENT SNAPSHOT"
        if mysql
        else "BEGIN ISOLATION LEVEL REPEATABLE READ"
    )
    backend._run(session, 0, begin)
    backend._run(session, 0, backend._q("SELECT COUNT(*) FROM {s}.seq", 0))


def _release(backend: SQLBackend, hold: Session) -> None:
    backend._run(hold, 0, "UNLOCK TABLES" if _mysql(backend) else "ROLLBACK")


def _session(backend: SQLBackend) -> AbstractContextManager[Session]:
    return backend._writing(0, True)


def _optional(backend: SQLBackend, session: Session) -> list[list[str]]:
    """Per shard, the tables beside `_HELD_TABLES` that PostgreSQL's hold locks, those
    that exist (looked up before the hold, so writers do not wait for it): home
    timelines, written alone by a fan-out job's leg, and index entries, written alone
    by an index sharded apart from its objects. Unheld, such a leg could apply (and its
    job complete) between the shards' snapshot and the journal's. (MariaDB's hold
    stops every write.)"""
    if _mysql(backend):
        return [[] for _ in range(backend.shards)]
    optional = ["timelines", *(t for t in tables_of(backend) if t.startswith("index_"))]
    names = [backend._q(f"{{s}}.{t}", s) for s in range(backend.shards) for t in optional]
    found = {row[0] for row in backend._run(session, 0, _EXISTING, (names,))}
    return [
        [n for t in optional if (n := backend._q(f"{{s}}.{t}", s)) in found]
        for s in range(backend.shards)
    ]


def _hold(backend: SQLBackend, hold: Session, optional: Sequence[Sequence[str]]) -> None:
    if _mysql(backend):
        backend._run(hold, 0, "FLUSH TABLES WITH READ LOCK")
        return
    backend._run(hold, 0, "BEGIN")
    for shard in range(backend.shards):
        held = [backend._q(f"{{s}}.{t}", shard) for t in _HELD_TABLES]
        held += optional[shard]
        backend._run(hold, shard, f"LOCK TABLE {', '.join(held)} IN SHARE MODE")


def _present(reader: SQLBackend, shard: int, tables: Sequence[str]) -> list[str]:
    """The `tables` the shard has. A table made on first use (an index's, on a shard
    none of its entries reached yet) may be missing, and on PostgreSQL reading it would
    abort the snapshot transaction (every later read failing), so it is looked up."""
    if _mysql(reader):  # (a missing table reads as no rows: `sqltables.export_table`)
        return list(tables)
    names = {reader._q(f"{{s}}.{t}", shard): t for t in tables}
    found = {row[0] for row in reader._query(shard, _EXISTING, (list(names),))}
    return [t for name, t in names.items() if name in found]


def _feed_position(reader: SQLBackend, shard: int, tags: Sequence[int] | None) -> int | None:
    if tags is None:
        return sqlfeed.bounds(reader, shard)[1] if reader.get_meta("feed") == b"on" else None
    if not sqlfeed.recording(reader, shard):  # (a member holds settings only on shard 0)
        return None
    return feedalign.tagged(tags[shard], sqlfeed.bounds(reader, shard)[1])


def _copy_table(
    reader: SQLBackend,
    target: SQLiteBackend,
    shard: int,
    table: str,
    cap: int,
    progress: Callable[[int], None],
) -> None:
    after: list[Any] | None = None
    while True:
        rows = sqltables.export_table(reader, shard, table, after, PAGE)
        if not rows:
            return
        page = Page(table, after, rows)
        write_page(target, shard, page, cap)
        progress(len(rows))
        after = page.last
        if len(rows) < PAGE:
            return


def _empty(target: SQLiteBackend, shard: int, table: str) -> None:
    """Delete every row of the shard's `table` in `target`, if it has that table."""
    if target._query(shard, "SELECT name FROM sqlite_master WHERE name = ?", (table,)):
        target._durably(shard, lambda s: target._run(s, shard, f"DELETE FROM {table}"))


def _reserve(reader: SQLBackend, target: SQLiteBackend, shard: int) -> None:
    """Reserve in `target` the object ids the shard has reserved beyond it."""
    have = target._query(shard, "SELECT value FROM seq WHERE name = 'objects'")
    lag = _sequence(reader, shard) - (int(have[0][0]) if have else 0)
    if lag > 0:
        target.allocate(shard, lag)


def _sequence(reader: SQLBackend, shard: int) -> int:
    rows = reader._query(
        shard, reader._q("SELECT value FROM {s}.seq WHERE name = 'objects'", shard)
    )
    return int(rows[0][0]) if rows else 0
