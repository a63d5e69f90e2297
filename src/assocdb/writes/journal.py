"""The write journal: a durable local queue of jobs, group-committed.

Every write is appended here, and synced to disk, before it is acknowledged.
The journal is one SQLite file (WAL, synchronous=FULL) shared by the
processes that use the same graph directory. A job is in one of three states:

    new ──applied──► (deleted)
     │
     └─failed──► error ──retried, applied──► (deleted)
                   │  ▲
                   │  └── retried (availability failures: forever)
                   └─too many other failures──► bad ──reinject──► error

* `new`: appended and not yet known to be applied. On open, every `new` job
  is replayed: a crash costs redundant work, never lost work. (Another live
  process's in-flight job may be replayed too; legs are idempotent.)
* `error`: waiting in the error queue until `next_at`; `done` records which of
  its legs were applied, so a retry redoes only the rest.
* `bad`: failed too often for a reason other than availability; kept with its
  error for a person to inspect and re-inject.
* `running`: a long job (moving all edges of a node) that works a page at a
  time; its body records how far it got, and the retrier continues it. While
  a thread walks on, the job is held from retriers, as a claimed job is.

Claims: a process that works on a job (a retrier's claim, a long job walking
on, a job it appended and applies now) writes its *owner* token on the job's
row (`claimed_by`: host, pid and a random part, so a reused pid is another
owner) and pushes `next_at` on by the hold. Each journal holds an exclusive
flock on its own file `<journal>.owners/<owner>.lock` for as long as it is
open; the kernel drops the lock when the process dies, however it dies
(SIGKILL included). A claim whose owner's lock is free (or gone) is stale and
is taken at once, not after the hold; a process that closes the journal or
exits without closing it (atexit) releases its claims first. Owners on
another host cannot be checked from here: their claims wait out the hold.

Group commit: appending threads queue their jobs; the first becomes the
leader and commits everything queued, in one transaction and one fsync,
while the others wait for it; then the next waiting thread leads. Completions
and failures are recorded in memory and ride along in the next commit (or a
periodic flush): losing them in a crash only means replaying an applied job.
"""

from __future__ import annotations

import atexit
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import NamedTuple

import msgspec

from ..core.errors import AssocdbError, InvalidRequest, Unavailable
from ..core.records import JobState
from ..storage.backend import map_driver_error
from .owners import Owners, parse_owner

NEW, ERROR, BAD, RUNNING = 0, 1, 2, 3
STATE_NAMES = {NEW: "new", ERROR: "error", BAD: "bad", RUNNING: "running"}

_DDL = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    state INTEGER NOT NULL DEFAULT 0,
    body BLOB NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    retries INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    error TEXT,
    claimed_by TEXT,
    claimed_at REAL
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state, next_at);
CREATE TABLE IF NOT EXISTS loads (
    name TEXT PRIMARY KEY,
    updated_at INTEGER NOT NULL,
    edges INTEGER NOT NULL,
    started_at REAL NOT NULL
);
"""
_ONE_STATEMENT = 200  # the most jobs one INSERT appends (4 parameters each: < 999, any SQLite)


@functools.lru_cache(maxsize=64)
def _insert_jobs(n: int) -> str:
    """The INSERT of `n` jobs (the same string object for each `n`: the driver's cache)."""
    rows = ", ".join(["(?, ?, ?, ?)"] * n)
    return f"INSERT INTO jobs (body, created_at, claimed_by, claimed_at) VALUES {rows}"


def _inserted(
    run: Callable[..., sqlite3.Cursor], batch: Sequence[_Waiter], now: float, owner: str
) -> range:
    """Insert `batch`'s jobs in one statement; their ids, in order. One INSERT takes
    the file's write lock for all its rows, and AUTOINCREMENT gives each the next id:
    consecutive, the last one `lastrowid`."""
    params: list[object] = []
    for waiter in batch:
        params += (waiter.body, now, owner, now)
    last: int = run(_insert_jobs(len(batch)), params).lastrowid  # type: ignore[assignment]
    return range(last - len(batch) + 1, last + 1)


STALE_NEW = 30.0  # seconds after which a `new` job of a live owner is presumed orphaned
OWNER_CHECK = 0.2  # seconds between claim_due's looks for owners that died
_COLUMNS = "id, state, body, done, attempts, retries, next_at, created_at, error"
#: Added after the first release: a journal written before has no such columns
#: until a writable open adds them (`_add_claim_columns`).
_CLAIM_COLUMNS = ("claimed_by", "claimed_at")


class Job(msgspec.Struct, frozen=True):
    """A journaled job, as stored."""

    id: int
    state: JobState
    body: bytes
    done: int
    attempts: int
    retries: int
    next_at: float
    created_at: float
    error: str | None
    claimed_by: str | None = None  # the owner working on it now (see the module's doc)
    claimed_at: float | None = None


class Holder(NamedTuple):
    """Who works on a job now: an owner token, read for people."""

    host: str
    pid: int
    alive: bool  # False: the owner died; the next claim takes the job at once

    @classmethod
    def of(cls, owner: str, alive: bool) -> Holder:
        host, pid, _ = parse_owner(owner)
        return cls(host, pid, alive)


class Failure(NamedTuple):
    """How a job's attempt ended, for the journal to record."""

    job: int
    done: int
    error: str
    counts: bool  # a non-availability failure: counts towards `bad`
    next_at: float
    bad: bool


class _Waiter:
    __slots__ = ("body", "error", "id")

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.id: int | None = None
        self.error: BaseException | None = None


class Journal:
    """The durable job queue in the SQLite file at `path`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        #: On a read-only file system (a snapshot, a read-only mount) the journal
        #: is read as it is: its jobs can be listed but not applied, and writes
        #: are refused.
        self.read_only = str(path) != ":memory:" and not _writable(self.path)
        try:
            if self.read_only:
                self._conn = _read_only_connection(self.path)
            else:
                self._conn = _open_writable(self.path)
            self._columns = _columns(self._conn)
            #: The appends' cursor, reused (held with `_io`), and its connection:
            #: `Connection.execute` makes a cursor per statement, and a lone write's
            #: commit runs three.
            self._cursor = (self._conn, self._conn.cursor())
        except sqlite3.Error as exc:
            raise map_driver_error(exc, f"journal {self.path}") from exc
        self._closed = False
        self._pid = os.getpid()
        self._next_owner_check = 0.0  # (monotonic) when claim_due looks for dead owners next
        self._owners = Owners(self.path, enabled=not self.read_only)
        #: This process's (this journal object's) name on the jobs it works on.
        self.owner = self._owners.owner
        atexit.register(self._at_exit)
        self._io = threading.RLock()  # one statement or transaction at a time
        self._cond = threading.Condition()
        self._queue: list[_Waiter] = []
        self._leading = False
        self._completed: list[int] = []
        self._failed: list[Failure] = []
        self.commits = 0  # fsyncs, for the group-commit benchmark and tests
        #: Why the last commit of appended jobs failed (a full disk, say), until
        #: one succeeds: see `unwritable`.
        self.failing: str | None = None

    # -- appending --------------------------------------------------------------

    def append(self, body: bytes) -> int:
        """Store a job durably and return its id (group-committed with concurrent appends)."""
        return self.append_many([body])[0]

    def append_many(self, bodies: Sequence[bytes]) -> list[int]:
        """Store jobs durably, in one transaction with whatever else is waiting; their ids."""
        self._refuse_if_read_only()
        waiters = [_Waiter(body) for body in bodies]
        if not waiters:
            return []
        waiter = waiters[-1]  # committed with the others, in one transaction
        with self._cond:
            self._queue.extend(waiters)
            while waiter.id is None and waiter.error is None:
                if self._leading:
                    self._cond.wait()
                    continue
                self._leading = True
                batch, self._queue = self._queue, []
                self._cond.release()
                try:
                    self._commit(batch)
                finally:
                    self._cond.acquire()
                    self._leading = False
                    self._cond.notify_all()
        if waiter.error is not None:
            raise waiter.error
        return [w.id for w in waiters]  # type: ignore[misc]

    def _commit(self, batch: list[_Waiter]) -> None:
        """Insert the batch's jobs in one transaction; only then tell the waiters their ids.

        A waiter returns as soon as it sees an id, so an id is published only
        once the transaction is durable: an id seen before a COMMIT that then
        fails would acknowledge a job the file never held, and its number
        would be reused by the next insert (a rolled-back AUTOINCREMENT).
        """
        now = time.time()
        ids: list[int] = []
        # `_bookkeeping` and `_transaction` written out: this runs once per journal commit
        # (a lone write's), and the two generator context managers (three with
        # `_statements`) cost more than the INSERT's Python.
        with self._cond:
            taken = self._completed, self._failed
            self._completed, self._failed = [], []
        try:
            self._refuse_if_read_only()
            conn = self._conn
            owner, cursor = self._cursor
            run = cursor.execute if owner is conn else conn.execute  # (a test swapped it)
            with self._io:
                try:
                    if len(batch) <= _ONE_STATEMENT and not taken[0] and not taken[1]:
                        # Nothing to record with the jobs: one INSERT, its own transaction
                        # (autocommit, synced as a COMMIT is): one driver call, which holds
                        # the GIL only to start and to end, while a helper thread fills
                        # the round's shard transactions (`writes.overlap`).
                        ids += _inserted(run, batch, now, self.owner)
                    else:
                        self._append_in_transaction(run, conn, batch, now, ids, taken)
                except sqlite3.Error as exc:
                    raise map_driver_error(exc, f"journal {self.path}") from exc
        except BaseException as exc:
            with self._cond:  # (as `_bookkeeping`: they ride along with the next commit)
                self._completed[:0] = taken[0]
                self._failed[:0] = taken[1]
            for waiter in batch:
                waiter.error = exc
            if isinstance(exc, AssocdbError):
                self.failing = exc.message
            return
        for waiter, job in zip(batch, ids, strict=True):
            waiter.id = job
        self.commits += 1
        self.failing = None

    def _append_in_transaction(
        self,
        run: Callable[..., sqlite3.Cursor],
        conn: sqlite3.Connection,
        batch: list[_Waiter],
        now: float,
        ids: list[int],
        taken: tuple[list[int], list[Failure]],
    ) -> None:
        """`_commit`'s jobs and the recorded completions and failures, in one transaction."""
        run("BEGIN IMMEDIATE")
        try:
            for start in range(0, len(batch), _ONE_STATEMENT):
                ids += _inserted(run, batch[start : start + _ONE_STATEMENT], now, self.owner)
            self._write_bookkeeping(*taken)
            run("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction; on any failure, the COMMIT's included, nothing of it stays.

        SQLite may or may not roll back by itself when a statement or the
        COMMIT fails (SQLITE_FULL, SQLITE_IOERR): roll back whatever is left
        open, so the next transaction starts clean instead of failing forever.
        """
        self._refuse_if_read_only()  # (bulk loads' progress, retries, reinjections)
        with self._statements():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.rollback()
                raise

    @contextmanager
    def _statements(self) -> Iterator[None]:
        """The journal's choke point: one statement or transaction at a time, and every
        driver error mapped into assocdb's error tree (a full disk is `Unavailable`)."""
        with self._io:
            try:
                yield
            except sqlite3.Error as exc:
                raise map_driver_error(exc, f"journal {self.path}") from exc

    # -- bookkeeping ------------------------------------------------------------

    def complete(self, jobs: Sequence[int]) -> None:
        """Record that every leg of these jobs was applied durably: they are deleted
        with the next commit (see `Applier.fence` for when that may be)."""
        with self._cond:
            self._completed.extend(jobs)

    def fail(self, failures: Sequence[Failure]) -> None:
        """Record failed attempts now: the retrier reads the error queue from the file."""
        with self._cond:
            self._failed.extend(failures)
        self.flush()

    def flush(self) -> None:
        """Write recorded completions and failures now."""
        if self.read_only:
            return
        with self._cond:
            if not self._completed and not self._failed:
                return
        with self._bookkeeping() as taken, self._transaction():
            self._write_bookkeeping(*taken)

    def unwritable(self) -> str | None:
        """Why appends fail now, or None when they can succeed: once one failed, a probe
        transaction (written and synced, leaving nothing) tells whether it still would.
        A read-only journal (opened so on purpose: a snapshot) is not asked."""
        if self.read_only or self.failing is None:
            return None
        try:
            with self._transaction():  # rewrites the header page: a write, touching no row
                (version,) = self._conn.execute("PRAGMA user_version").fetchone()
                self._conn.execute(f"PRAGMA user_version = {int(version)}")
        except AssocdbError as exc:
            return exc.message
        self.failing = None
        return None

    def _refuse_if_read_only(self) -> None:
        if self.read_only:
            raise Unavailable(
                f"the journal {self.path} is on a read-only file system: "
                "this graph can be read, not written"
            )

    @contextmanager
    def _bookkeeping(self) -> Iterator[tuple[list[int], list[Failure]]]:
        """Take the recorded completions and failures, to write in a transaction inside.

        If that transaction fails (its COMMIT included) they are put back, to
        ride along with the next one: a failure never written would leave its
        job `new`, its delay and its error unrecorded.
        """
        with self._cond:
            taken = self._completed, self._failed
            self._completed, self._failed = [], []
        try:
            yield taken
        except BaseException:
            with self._cond:
                self._completed[:0] = taken[0]
                self._failed[:0] = taken[1]
            raise

    def _write_bookkeeping(self, completed: list[int], failed: list[Failure]) -> None:
        if completed:
            self._conn.executemany("DELETE FROM jobs WHERE id = ?", [(j,) for j in completed])
        if failed:
            self._conn.executemany(
                "UPDATE jobs SET state = ?, done = ?, error = ?, attempts = attempts + ?, "
                "retries = retries + 1, next_at = ?, claimed_by = NULL WHERE id = ?",
                [
                    (BAD if f.bad else ERROR, f.done, f.error, int(f.counts), f.next_at, f.job)
                    for f in failed
                ],
            )

    def resolved(self, job: int, body: bytes) -> None:
        """Replace an unresolved job's body with its resolution, durably."""
        with self._transaction():
            self._conn.execute("UPDATE jobs SET body = ? WHERE id = ?", (body, job))
        self.commits += 1

    # -- bulk loads ---------------------------------------------------------------

    def load(self, name: str, updated_at: int) -> tuple[int, int]:
        """Start the bulk load `name`, or find it unfinished: its `updated_at` (this
        one for a new load) and how many of its input edges are stored."""
        with self._transaction():
            self._conn.execute(
                "INSERT OR IGNORE INTO loads (name, updated_at, edges, started_at) "
                "VALUES (?, ?, 0, ?)",
                (name, updated_at, time.time()),
            )
            row = self._conn.execute(
                "SELECT updated_at, edges FROM loads WHERE name = ?", (name,)
            ).fetchone()
        return int(row[0]), int(row[1])

    def load_progress(self, name: str, edges: int) -> None:
        """The load's first `edges` input edges are stored, durably."""
        with self._transaction():
            self._conn.execute("UPDATE loads SET edges = ? WHERE name = ?", (edges, name))

    def load_finished(self, name: str) -> None:
        with self._transaction():
            self._conn.execute("DELETE FROM loads WHERE name = ?", (name,))

    def loads(self) -> list[tuple[str, int]]:
        """Unfinished bulk loads: each one's name and the input edges stored."""
        with self._statements():
            rows = self._conn.execute("SELECT name, edges FROM loads ORDER BY started_at")
            return [(str(name), int(edges)) for name, edges in rows.fetchall()]

    # -- reading and claiming -----------------------------------------------------

    def progress(self, job: int, body: bytes, hold: float = 0.0) -> None:
        """Record how far a long job got; it continues in the background (state running):
        due now, or after `hold` seconds while this process walks on (as `claim_due`
        holds a claimed job: no retrier takes it meanwhile, unless this process dies)."""
        now = time.time()
        owner = self.owner if hold else None
        with self._transaction():
            self._conn.execute(
                f"UPDATE jobs SET body = ?, state = {RUNNING}, next_at = ?, done = ?, "
                "claimed_by = ?, claimed_at = CASE WHEN claimed_by IS ? THEN claimed_at "
                "ELSE ? END WHERE id = ?",
                (body, now + hold if hold else 0.0, _pack(0), owner, owner, now, job),
            )

    def unfinished(self, after: int = 0, limit: int = 1000) -> list[Job]:
        """`new` jobs with ids above `after`: those a crash may have left unapplied."""
        return self._select(f"state = {NEW} AND id > ? ORDER BY id LIMIT ?", (after, limit))

    def claim_due(self, now: float, limit: int, hold: float) -> list[Job]:
        """Take error-queue jobs due by `now`, pushing their next_at `hold` seconds on.

        The push (and this journal's owner on the row) keeps other processes'
        retriers off a job while this one works on it. Jobs whose owner died
        are due at once, whatever their next_at (`release_dead`). `new` jobs
        of a live owner older than STALE_NEW seconds are taken too: that owner
        most likely lost them (applying one takes milliseconds), and applying
        one twice is harmless; those of no owner (released, or dead) at once.
        """
        with self._transaction():
            if time.monotonic() >= self._next_owner_check:  # a few times a second at most
                self._next_owner_check = time.monotonic() + OWNER_CHECK
                self._release_dead()
            jobs = self._select(
                f"(state IN ({ERROR}, {RUNNING}) AND next_at <= ?) "
                f"OR (state = {NEW} AND (created_at < ? OR claimed_by IS NULL) AND next_at <= ?) "
                "ORDER BY id LIMIT ?",
                (now, now - STALE_NEW, now, limit),
            )
            if jobs:
                self._conn.executemany(
                    "UPDATE jobs SET next_at = ?, claimed_by = ?, claimed_at = ? WHERE id = ?",
                    [(now + hold, self.owner, now, j.id) for j in jobs],
                )
        return jobs

    def release_dead(self) -> int:
        """Make the jobs of owners that died due now; how many there were."""
        if self.read_only:
            return 0
        with self._transaction():
            return self._release_dead()

    def _release_dead(self) -> int:
        """(In a transaction.) Release the claims of every owner whose lock is free."""
        rows = self._conn.execute(
            "SELECT DISTINCT claimed_by FROM jobs WHERE claimed_by IS NOT NULL AND claimed_by != ?",
            (self.owner,),
        ).fetchall()
        released = 0
        for (owner,) in rows:
            if not self._owners.alive(owner):
                released += self._release(owner)
        return released

    def _release(self, owner: str) -> int:
        """(In a transaction.) `owner`'s jobs: due now, held by no one."""
        return self._conn.execute(
            "UPDATE jobs SET next_at = 0, claimed_by = NULL WHERE claimed_by = ?", (owner,)
        ).rowcount

    def owner_alive(self, owner: str) -> bool:
        """Whether the journal owner `owner` (another process's `owner`) is alive."""
        return self._owners.alive(owner)

    def held(self) -> list[tuple[Job, Holder]]:
        """The running and error-queue jobs an owner works on now, with who it is."""
        jobs = self._select(
            f"claimed_by IS NOT NULL AND state IN ({ERROR}, {RUNNING}) ORDER BY id LIMIT 100", ()
        )
        return [
            (job, Holder.of(job.claimed_by, self._owners.alive(job.claimed_by)))
            for job in jobs
            if job.claimed_by is not None
        ]

    def next_due(self) -> float | None:
        """When the earliest error-queue job comes due, if any."""
        with self._statements():
            row = self._conn.execute(
                f"SELECT MIN(MAX(next_at, CASE state WHEN {NEW} THEN created_at + {STALE_NEW} "
                f"ELSE 0 END)) FROM jobs WHERE state IN ({NEW}, {ERROR}, {RUNNING})"
            ).fetchone()
        return None if row[0] is None else float(row[0])

    def get(self, job: int) -> Job | None:
        jobs = self._select("id = ?", (job,))
        return jobs[0] if jobs else None

    def jobs(self, state: JobState, after: int = 0, limit: int = 100) -> list[Job]:
        """Jobs in `state`, by id, after id `after`."""
        code = _state_code(state)
        return self._select(f"state = {code} AND id > ? ORDER BY id LIMIT ?", (after, limit))

    def counts(self) -> dict[JobState, int]:
        """How many jobs are in each state."""
        with self._statements():
            rows = self._conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        found: dict[int, int] = dict(rows)
        return {name: found.get(code, 0) for code, name in STATE_NAMES.items()}  # type: ignore[misc]

    def _select(self, where: str, params: tuple[object, ...]) -> list[Job]:
        with self._statements():
            rows = self._conn.execute(
                f"SELECT {self._columns} FROM jobs WHERE {where}", params
            ).fetchall()
        return [
            Job(r[0], STATE_NAMES[r[1]], r[2], _unpack(r[3]), *r[4:])  # type: ignore[arg-type]
            for r in rows
        ]

    # -- operator actions -----------------------------------------------------------

    def reinject(self, jobs: list[int] | None = None) -> int:
        """Move bad jobs (these, or all) back to the error queue, due now, attempts reset."""
        with self._transaction():
            sql = f"UPDATE jobs SET state = {ERROR}, attempts = 0, next_at = 0 WHERE state = {BAD}"
            if jobs is None:
                return self._conn.execute(sql).rowcount
            return sum(self._conn.execute(sql + " AND id = ?", (j,)).rowcount for j in jobs)

    def retry_now(self) -> int:
        """Make every error-queue job due now, and every job whose owner died (a
        running job included); how many, counting those this journal's retrier works
        on already. Jobs another live process works on are left to it."""
        with self._transaction():
            dead = self._release_dead()
            waiting = self._conn.execute(
                f"UPDATE jobs SET next_at = 0 WHERE state = {ERROR} AND next_at > 0 "
                "AND claimed_by IS NULL"
            ).rowcount
            (mine,) = self._conn.execute(
                f"SELECT COUNT(*) FROM jobs WHERE claimed_by = ? AND state IN ({ERROR}, {RUNNING})",
                (self.owner,),
            ).fetchone()
            return dead + waiting + int(mine)

    def release(self) -> None:
        """Give up this journal's claims: its jobs are due now for any other process."""
        if self.read_only:
            return
        with self._transaction():
            self._release(self.owner)

    def close(self) -> None:
        atexit.unregister(self._at_exit)
        if self._closed:
            return
        self._closed = True
        with suppress(Unavailable):  # bookkeeping only: the jobs replay on the next open
            self.flush()
            self.release()
        with self._io:
            self._conn.close()
        self._owners.close()

    def _at_exit(self) -> None:
        """The process exits without closing the journal: release its claims if the
        journal is free within a moment (a background thread may be mid-transaction;
        then the dropped owner lock tells other processes all the same)."""
        if self._closed or os.getpid() != self._pid or not self._io.acquire(timeout=1.0):
            return  # (a forked child exiting: its parent still works on the claims)
        try:
            with suppress(AssocdbError, sqlite3.Error):
                self.flush()
                self.release()
        finally:
            self._io.release()
        self._owners.close()


def _open_writable(path: Path, patience: float = 10.0) -> sqlite3.Connection:
    """The journal's connection, set up (WAL, its table) even while other processes
    open the same new file: SQLite's busy handler does not cover the switch to WAL,
    so a 'database is locked' during setup is retried for `patience` seconds."""
    give_up = time.monotonic() + patience
    while True:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.executescript(_DDL)
            _add_claim_columns(conn)
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            if "locked" not in str(exc) or time.monotonic() > give_up:
                raise
            time.sleep(0.005)


def _columns(conn: sqlite3.Connection) -> str:
    """The SELECT list of a job; a journal from before claims reads none."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
    return ", ".join([_COLUMNS, *(c if c in have else "NULL" for c in _CLAIM_COLUMNS)])


def _add_claim_columns(conn: sqlite3.Connection) -> None:
    """Add the claim columns to a journal written before them."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
    for column, kind in zip(_CLAIM_COLUMNS, ("TEXT", "REAL"), strict=True):
        if column not in have:
            conn.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")


def _writable(path: Path) -> bool:
    """Whether the journal at `path` can be written (its file, or its directory to create it)."""
    if path.exists():
        return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    return os.access(path.parent, os.W_OK) or not path.parent.exists()


def _read_only_connection(path: Path) -> sqlite3.Connection:
    """The journal of a read-only file system, as it is (an empty one if it has none)."""
    if path.exists():
        uri = f"file:{path}?immutable=1"
        return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.executescript(_DDL)
    return conn


def _pack(done: int) -> bytes:
    """A leg bitmask as bytes: a job may have more legs than a 64-bit integer has bits."""
    return done.to_bytes(max(1, (done.bit_length() + 7) // 8), "big")


def _unpack(done: bytes | int) -> int:
    return done if isinstance(done, int) else int.from_bytes(done, "big")


def _state_code(state: str) -> int:
    for code, name in STATE_NAMES.items():
        if name == state:
            return code
    raise InvalidRequest(f"job state must be one of new, error, bad, running; got {state!r}")
