"""One consistent cut of a graph on one MariaDB or PostgreSQL server, and its copy into a
local SQLite graph directory (the backup's source side for server graphs, `api/backup.py`).

Every shard of such a graph is a schema of one server, so one snapshot transaction
reads them all as of one moment: MariaDB's `START TRANSACTION WITH CONSISTENT
SNAPSHOT`, PostgreSQL's `REPEATABLE READ` (its snapshot is taken at the first
statement). What the hold adds is the journal: while writers are held (MariaDB: `FLUSH
TABLES WITH READ LOCK`, which waits for running transactions; PostgreSQL: `LOCK TABLE …
IN SHARE MODE` on every shard's edges, counts, objects and node states), the snapshot
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
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any, cast

from . import sqlfeed, sqltables
from .copier import Page, write_page
from .dialect import Session
from .replica_verify import tables_of, timeline_cap
from .sql import SQLBackend
from .sqlite import SQLiteBackend

PAGE = 5000
_HELD_TABLES = ("edges", "counts", "objects", "node_states")


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
    """A snapshot of every shard of a server graph, and the journal's, at one moment."""

    def __init__(self, backend: SQLBackend) -> None:
        self.backend = backend
        self.shards = backend.shards
        self._stack = ExitStack()
        self.reader = cast(SQLBackend, None)
        self.journal: sqlite3.Connection | None = None
        self.held = 0.0
        self.began = self.at = 0
        self.positions: list[int | None] = []

    def copy(self, target: SQLiteBackend, progress: Callable[[int], None]) -> None:
        """Write every table of every shard, the settings and the id sequences to `target`."""
        reader = self.reader
        tables = [t for t in tables_of(reader) if t != "counts"]
        cap = timeline_cap(reader)
        for key, value in sqltables.export_table(reader, 0, "meta", None, 1_000_000):
            if key != "shards":
                target.swap_meta(key, target.get_meta(key), value)
        for shard in range(self.shards):
            for table in tables:
                after: list[Any] | None = None
                while True:
                    rows = sqltables.export_table(reader, shard, table, after, PAGE)
                    if not rows:
                        break
                    page = Page(table, after, rows)
                    write_page(target, shard, page, cap)
                    progress(len(rows))
                    after = page.last
                    if len(rows) < PAGE:
                        break
            reserved = _sequence(reader, shard)
            if reserved > 0:
                target.allocate(shard, reserved)

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


def take(backend: SQLBackend, journal: Path | None) -> ServerCut:
    """The cut of the server graph `backend` and of this process's `journal` file."""
    cut = ServerCut(backend)
    try:
        session = cut._stack.enter_context(_session(backend))
        cut._stack.callback(backend._rollback, session, 0)
        mysql = backend.spec()["kind"] == "mysql"
        started = time.perf_counter()
        with _session(backend) as hold:
            _hold(backend, hold, mysql)
            try:
                begin = (
                    "START TRANSACTION WITH CONSISTENT SNAPSHOT"
                    if mysql
                    else "BEGIN ISOLATION LEVEL REPEATABLE READ"
                )
                backend._run(session, 0, begin)
                backend._run(session, 0, backend._q("SELECT COUNT(*) FROM {s}.seq", 0))
                cut.began = time.time_ns() // 1000
                if journal is not None and journal.exists():
                    cut.journal = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
                    cut.journal.execute("BEGIN")
                    cut.journal.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                cut.at = time.time_ns() // 1000
            finally:
                backend._run(hold, 0, "UNLOCK TABLES" if mysql else "ROLLBACK")
        cut.held = time.perf_counter() - started
        cut.reader = cast(SQLBackend, _OnSnapshot(backend, session))
        cut.positions = [_feed_position(cut.reader, s) for s in range(backend.shards)]
    except BaseException:
        cut.close()
        raise
    return cut


def _session(backend: SQLBackend) -> AbstractContextManager[Session]:
    return backend._writing(0, True)


def _hold(backend: SQLBackend, hold: Session, mysql: bool) -> None:
    if mysql:
        backend._run(hold, 0, "FLUSH TABLES WITH READ LOCK")
        return
    backend._run(hold, 0, "BEGIN")
    for shard in range(backend.shards):
        names = ", ".join(backend._q(f"{{s}}.{t}", shard) for t in _HELD_TABLES)
        backend._run(hold, shard, f"LOCK TABLE {names} IN SHARE MODE")


def _feed_position(reader: SQLBackend, shard: int) -> int | None:
    if reader.get_meta("feed") != b"on":
        return None
    return sqlfeed.bounds(reader, shard)[1]


def _sequence(reader: SQLBackend, shard: int) -> int:
    rows = reader._query(
        shard, reader._q("SELECT value FROM {s}.seq WHERE name = 'objects'", shard)
    )
    return int(rows[0][0]) if rows else 0
