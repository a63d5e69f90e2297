"""One consistent cut of a SQLite graph directory: every shard and the journal read as of
one moment, while writers go on (the backup's source side, `api/backup.py`).

The hold. A write reaches a shard in a `BEGIN IMMEDIATE` transaction, which takes the
shard file's write lock (processes queue on it; threads of the process that has the
graph open queue first on its per-shard write turn, `SQLiteBackend.write_turns`). The
cut takes every shard's turn and write lock, in shard order, then opens a read
transaction on every shard and on the journal (WAL: a snapshot that later commits do not
change, and that blocks no writer), and lets the locks go. Writers wait only for that:
a few hundred microseconds for 16 shards.

Why it is one cut. No leg is applied while the locks are held, so a journal job is in
one of three places: completed before the hold (the journal deletes a job only after
every leg is applied and synced: all its legs are in the shard snapshots); in the
journal snapshot (appended before the hold ended: copied with the backup and replayed
into it, so a half-applied inverse pair is completed and an acknowledged write is in);
or appended after the journal snapshot (none of its legs can be in the shard snapshots:
they are applied after the append, so after the hold). Hence every write acknowledged
before the cut is in the backup, none started after it is, and the merge rule makes the
replay of a leg already copied change nothing.

Copying. Each shard is copied from its snapshot with SQLite's online backup API, a
few hundred pages at a time (the snapshot stays the same between steps: the read
transaction is held), so a copy reports progress and never stalls a writer.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, cast

from . import sqltables
from .backend import map_driver_error
from .copier import Page, write_page
from .replica_verify import tables_of, timeline_cap
from .rollforward import catch_up
from .sqlite import SQLiteBackend, setup_lock

#: Pages copied per step of the backup API (4 KiB each): a progress report per ~2 MB.
STEP_PAGES = 512
#: Feed records and table rows read at a time when a resumed backup catches a shard up.
PAGE = 5000
_FEED_SEQ = "SELECT value FROM seq WHERE name = 'feed'"
#: What is copied of a job of a journal other than the first (`writes/journal.py`).
_JOB_COLUMNS = "state, body, done, attempts, retries, next_at, created_at, error"


class SQLiteCut:
    """Read snapshots of every shard (and the journal) taken at one moment (`take`)."""

    def __init__(self, root: Path, shards: int) -> None:
        self.root = root
        self.shards = shards
        self._reads: list[sqlite3.Connection | None] = []
        #: Snapshots of every journal whose writers apply to this directory.
        self._journals: list[sqlite3.Connection] = []
        #: How long writers were held (seconds).
        self.held = 0.0
        #: Wall-clock time of the cut, µs since the epoch (the clock `updated_at` follows):
        #: it lies between `began` and `at` (see `take`).
        self.began = 0
        self.at = 0
        #: Per shard, the last change-feed position in the snapshot (None: no feed there).
        self.positions: list[int | None] = []

    def shard_file(self, shard: int) -> Path:
        return self.root / f"shard-{shard:04d}.db"

    def pages(self, shard: int) -> int:
        """How many pages the shard's snapshot holds (for a progress total)."""
        conn = self._reads[shard]
        return 0 if conn is None else int(conn.execute("PRAGMA page_count").fetchone()[0])

    def copy_shard(self, shard: int, dest: Path, progress: Callable[[int], None]) -> bool:
        """Write the shard's snapshot to the new file `dest`; `progress(pages)` after each
        step. False if the shard has no file (never written): nothing to copy."""
        conn = self._reads[shard]
        if conn is None:
            return False
        self._copy(conn, dest, progress)
        return True

    def catch_up(self, source: SQLiteBackend, copy: SQLiteBackend, shard: int, after: int) -> bool:
        """Bring the shard's copy, taken at an earlier cut whose feed position was `after`,
        to this cut (a resumed backup): the source's feed records up to this cut's
        position merged into it, and what the feed does not carry (home timelines, index
        entries, the id sequence, shard 0's settings) copied again from the snapshot.
        False if the feed no longer holds every record since `after` (trimmed since the
        earlier cut): the copy lacks changes it cannot get, copy the shard again."""
        upto = self.positions[shard]
        conn = self._reads[shard]
        assert upto is not None
        assert conn is not None
        if catch_up(source, copy, shard, after, upto, PAGE) is None:
            return False
        view = cast(SQLiteBackend, _OnSnapshot(source, conn))
        tables = [t for t in tables_of(view) if t == "timelines" or t.startswith("index_")]
        cap = timeline_cap(view)
        for table in tables:
            _empty(copy.path / f"shard-{shard:04d}.db", table)
            _copy_table(view, copy, shard, table, cap)
        sequence = conn.execute("SELECT value FROM seq WHERE name = 'objects'").fetchone()
        have = copy._query(shard, "SELECT value FROM seq WHERE name = 'objects'")
        lag = (sequence[0] if sequence else 0) - (have[0][0] if have else 0)
        if lag > 0:
            copy.allocate(shard, lag)
        if shard == 0:
            for key, value in sqltables.export_table(view, 0, "meta", None, 1_000_000):
                if key != "shards":
                    copy.swap_meta(key, copy.get_meta(key), value)
        return True

    def copy_journal(self, dest: Path) -> None:
        """Write the journals' snapshots (their unfinished jobs) to the new file `dest`:
        the first as it is, the others' jobs appended to it (unclaimed)."""
        if not self._journals:
            return
        first, *others = self._journals
        self._copy(first, dest, lambda pages: None)
        if not others:
            return
        target = sqlite3.connect(dest, isolation_level=None)
        try:
            target.execute("BEGIN")
            for other in others:
                rows = other.execute(f"SELECT {_JOB_COLUMNS} FROM jobs").fetchall()
                marks = ", ".join("?" * len(_JOB_COLUMNS.split(",")))
                target.executemany(f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES ({marks})", rows)
            target.execute("COMMIT")
        except sqlite3.Error as exc:
            raise map_driver_error(exc, f"copying the journals to {dest}") from exc
        finally:
            target.close()

    def _copy(
        self, source: sqlite3.Connection, dest: Path, progress: Callable[[int], None]
    ) -> None:
        done = [0]

        def step(status: int, remaining: int, total: int) -> None:
            progress(total - remaining - done[0])
            done[0] = total - remaining

        target = sqlite3.connect(dest, isolation_level=None)
        try:
            source.backup(target, pages=STEP_PAGES, progress=step)
            target.execute("PRAGMA journal_mode = WAL")
        except sqlite3.Error as exc:
            raise map_driver_error(exc, f"copying to {dest}") from exc
        finally:
            target.close()

    def close(self) -> None:
        for conn in [*self._reads, *self._journals]:
            if conn is not None:
                conn.close()
        self._reads, self._journals = [], []


def take(backend: SQLiteBackend, journals: Sequence[Path], timeout: float = 30.0) -> SQLiteCut:
    """The cut of the graph in `backend`'s directory and of its `journals` (those that
    exist: the directory's own, shared by the processes that open it, and the backing-up
    graph's if it keeps one elsewhere); the caller copies from it and closes it. A shard
    never written has no file yet: its snapshot is None (the directory's setup lock is
    held through the hold, so no shard file appears meanwhile)."""
    cut = SQLiteCut(backend.path, backend.shards)
    try:
        started = time.perf_counter()
        with _held(backend, timeout) as files:
            cut._reads = [None if f is None else _snapshot(f, timeout) for f in files]
            # The cut is the journal's snapshot, between `began` and `at` (microseconds
            # apart, still held): a write acknowledged before `began` was journaled
            # before it (and, if acknowledged as applied, applied before the hold); one
            # begun after `at` is journaled after it.
            cut.began = time.time_ns() // 1000
            for journal in journals:
                if journal.exists():
                    cut._journals.append(_snapshot(journal, timeout))
            cut.at = time.time_ns() // 1000
        cut.held = time.perf_counter() - started
        cut.positions = [None if c is None else _feed_position(c) for c in cut._reads]
    except sqlite3.Error as exc:
        cut.close()
        raise map_driver_error(exc, f"taking a cut of {backend.path}") from exc
    except BaseException:
        cut.close()
        raise
    return cut


@contextmanager
def _held(backend: SQLiteBackend, timeout: float) -> Iterator[list[Path | None]]:
    """Every shard's write turn in this process and write lock in every process; yields
    the shard files (None: not created yet)."""
    with ExitStack() as stack:
        # Turns first: a thread of this process holding its turn may be opening its
        # connection, under the setup lock.
        stack.enter_context(backend.write_turns())
        stack.enter_context(setup_lock(backend.path))
        files: list[Path | None] = []
        for shard in range(backend.shards):
            file = backend.path / f"shard-{shard:04d}.db"
            if not file.exists():
                files.append(None)
                continue
            conn = sqlite3.connect(file, timeout=timeout, isolation_level=None)
            stack.callback(conn.close)
            conn.execute("BEGIN IMMEDIATE")
            stack.callback(conn.rollback)
            files.append(file)
        yield files


def _snapshot(file: Path, timeout: float) -> sqlite3.Connection:
    """A read transaction on `file`, begun now: what it reads stays as it is now."""
    conn = sqlite3.connect(f"file:{file}?mode=ro", uri=True, timeout=timeout, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    return conn


def _feed_position(conn: sqlite3.Connection) -> int | None:
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'changes'").fetchone()
    if has is None:
        return None
    row = conn.execute(_FEED_SEQ).fetchone()
    return 0 if row is None else int(row[0])


class _OnSnapshot:
    """A SQLite backend whose reads run on one snapshot's connection (for `sqltables`)."""

    def __init__(self, backend: SQLiteBackend, conn: sqlite3.Connection) -> None:
        self._backend, self._conn = backend, conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def _query(self, shard: int, sql: str, params: Any = (), slow: bool = False) -> list[Any]:
        return self._conn.execute(sql, params).fetchall()

    def get_meta(self, key: str) -> bytes | None:
        return SQLiteBackend.get_meta(cast(SQLiteBackend, self), key)


def _empty(file: Path, table: str) -> None:
    conn = sqlite3.connect(file, isolation_level=None)
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
            conn.execute(f"DELETE FROM {table}")
    finally:
        conn.close()


def _copy_table(view: SQLiteBackend, copy: SQLiteBackend, shard: int, table: str, cap: int) -> None:
    after: list[Any] | None = None
    while True:
        rows = sqltables.export_table(view, shard, table, after, PAGE)
        if not rows:
            return
        page = Page(table, after, rows)
        write_page(copy, shard, page, cap)
        after = page.last
        if len(rows) < PAGE:
            return
