"""Cascading deletions: the durable job (`core.deletion`), its runner, restore and purge.

Everything a deletion keeps lives in the graph's meta (on shard 0): the job
`deletion:<n>` (JSON, rewritten after each step, by compare-and-swap, so two
processes never both advance it) and its chunks `deletion:<n>:<k>` (msgpack:
the rows each step removed). `deletion:root:<object id>` names an object's
latest deletion. A process works on a running job only if the job's owner
(a journal owner token) is itself or has died; `obj_delete(cascade=True)`
makes the first step, the object's tombstone, before it answers.

Removals and restores are ordinary journaled writes (`EdgeWrite`,
`ObjectWrite`) stamped by the chunk, so a redone chunk writes the same rows.
A step waits for its writes to be applied (a refcount is read after them): a
write left queued makes the step fail and the runner try again later.
"""

from __future__ import annotations

import logging
import threading
import time as _time
from collections.abc import Callable
from datetime import UTC, datetime

import msgspec

from ..core.deletion import (
    DEFAULT_WINDOW,
    CascadeJob,
    Chunk,
    DanglingReport,
    Deletion,
    advance,
    current,
    public,
    rewalk,
)
from ..core.errors import AssocdbError, Conflict, InvalidRequest, NotFound, Unavailable
from ..core.ids import check_id, shard_of
from ..core.merge import State
from ..core.ops import EdgeWrite, ObjectWrite, Operation
from ..core.records import WriteResult
from ..core.timeline_list import entry
from .cascade_walk import CascadeWalk
from .dangling import find_dangling
from .engine import Engine
from .timelines import Timelines

log = logging.getLogger("assocdb.deletions")

_LIVE = [State.NORMAL, State.NEGATIVE, State.ARCHIVED]
_SEQ = "deletion:seq"
#: The ids of running deletions (JSON list): what runners read, rather than every job.
_ACTIVE = "deletion:active"
_WINDOW = "deletion:window"
RETRY_SECONDS = 1.0  # the runner's wait before it tries a failed step again


def _job_key(n: int) -> str:
    return f"deletion:{n}"


def _chunk_key(n: int, k: int) -> str:
    return f"deletion:{n}:{k}"


def _root_key(root: int) -> str:
    return f"deletion:root:{root}"


class Deletions:
    """obj_delete(cascade=True), obj_restore, deletions, purge (`Graph` documents each)."""

    def __init__(
        self, engine: Engine, timelines: Timelines, clock: Callable[[], float] = _time.time
    ) -> None:
        self._engine = engine
        self._backend = engine.backend
        self._timelines = timelines
        self._clock = clock
        self._lock = threading.Lock()  # one step at a time in this process
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None
        self._walk = CascadeWalk(engine, timelines, self._chunk)
        #: Deletions this process has purged (by `purge`, or the cleaner thread's).
        self.purged = 0
        self._low = 1  # every deletion before it has ended (`_unlisted`)
        if self._runnable():
            self._start()

    # -- public -------------------------------------------------------------------

    def delete(self, id: int, updated_at: int | None) -> WriteResult:
        """Tombstone `id` now (NotFound if it never existed) and start its cascade."""
        id = check_id(id)
        rows = self._backend.objects(shard_of(id, self._engine.shards), [id])
        if not rows:
            raise NotFound(f"no object {id}", id=id)
        if self._engine.journal.read_only:
            raise InvalidRequest("this graph is open read-only: it cannot delete")
        again = self._again(id, rows[0].state)
        if again is not None:  # a retry (a client's, after a lost answer): the same deletion
            return again
        self._engine.stamp(updated_at)  # checked like any write's; the chunks stamp their own
        n = self._next_id()
        job = CascadeJob(
            n, id, "running", self._clock(), self.window(), owner=self._engine.journal.owner
        )
        job = msgspec.structs.replace(job, batch=[id])
        self._set_active(n, True)  # before the job exists: a runner never misses it
        if not self._backend.swap_meta(_job_key(n), None, _encode(job)):
            raise Conflict(f"deletion {n} exists already")  # a seq swap makes this unreachable
        self._backend.swap_meta(_root_key(id), self._backend.get_meta(_root_key(id)), b"%d" % n)
        with self._lock:
            # The object's tombstone, so that it reads as gone at once, unless the runner
            # (woken by another deletion) took the job up as soon as it was saved: then
            # the job as stored moves on, never this copy (stepping a copy older than the
            # record would save a finished job as running again, and no runner would
            # ever pick it up: it is unlisted and older than `_low`).
            claimed = self._claim(n)
            stepped = None if claimed is None else self._step(claimed)
        if stepped is not None:
            self._start()
            self._wake.set()
        return WriteResult("queued" if stepped is not None else "applied", self._engine.clock.now())

    def _again(self, id: int, state: int) -> WriteResult | None:
        """Deleting `id` again while its last deletion stands (the object still
        deleted) is that deletion, and takes into it what was written to the object
        since: once done, it walks the object's lists again now; while it runs, it
        does so when its walk ends (`CascadeJob.again`). Either way one `obj_restore`
        undoes all of it. None: a new deletion (none stands)."""
        raw = self._backend.get_meta(_root_key(id))
        if raw is None or state != State.REMOVED:
            return None
        n = int(raw)
        while True:  # by compare-and-swap: the runner may save the job meanwhile
            stored = self._backend.get_meta(_job_key(n))
            job = self._job(n) if stored is None else _decode(stored)
            if job.status == "done":
                again = rewalk(job, self._engine.journal.owner)
            elif job.status == "running":
                if job.again:
                    break  # flagged already
                again = msgspec.structs.replace(job, again=True)
            else:
                return None
            if self._backend.swap_meta(_job_key(n), stored, _encode(again)):
                break
        # Listed after it runs (a runner unlists jobs that do not run); should this
        # process die in between, asking again lists it.
        self._set_active(n, True)
        self._start()
        self._wake.set()
        return WriteResult("queued", self._engine.clock.now())

    def get(self, id: int) -> Deletion:
        """Deletion `id`, or NotFound."""
        return self._public(self._job(id))

    def of_object(self, id: int) -> Deletion:
        """The latest deletion of object `id`, or NotFound."""
        return self._public(self._job(self._latest(check_id(id))))

    def all(self) -> list[Deletion]:
        """Every deletion, oldest first."""
        raw = self._backend.get_meta(_SEQ)
        last = 0 if raw is None else int(raw)
        jobs = [self._backend.get_meta(_job_key(n)) for n in range(1, last + 1)]
        return [self._public(_decode(found)) for found in jobs if found is not None]

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no deletion runs here; False if `timeout` seconds pass first."""
        deadline = None if timeout is None else _time.monotonic() + timeout
        with self._idle:
            while self._runnable():
                self._start()
                self._wake.set()
                left = None if deadline is None else deadline - _time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(0.05 if left is None else min(0.05, left))
        return True

    def pause(self) -> None:
        """Stop working on cascades in this process (a lever for busy hours); new
        deletions still tombstone their object at once."""
        self._paused.set()

    def resume(self) -> None:
        """Work on cascades again."""
        self._paused.clear()
        self._wake.set()

    def window(self) -> float:
        """Seconds a deletion stays restorable (default 14 days)."""
        raw = self._backend.get_meta(_WINDOW)
        return DEFAULT_WINDOW if raw is None else float(raw)

    def set_window(self, seconds: float) -> None:
        """Keep deletions started from now on restorable for `seconds`."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise InvalidRequest(f"the restore window is a number of seconds >= 0, got {seconds!r}")
        key = _WINDOW
        while not self._backend.swap_meta(key, self._backend.get_meta(key), repr(seconds).encode()):
            pass

    def restore(self, root: int) -> Deletion:
        """Put back what object `root`'s latest deletion removed; see `Graph.obj_restore`."""
        n = self._latest(check_id(root))
        raw = self._backend.get_meta(_job_key(n))
        job = self._job(n)
        if job.status == "running":
            raise InvalidRequest(f"deletion {n} of object {root} is still running; wait for it")
        if job.status in ("restored", "purged"):
            raise InvalidRequest(f"deletion {n} of object {root} was {job.status} already")
        if self._clock() > job.started_at + job.window:
            raise InvalidRequest(f"deletion {n} of object {root} is past its restore window")
        # Every step's rows first, then every step's posts, then the homes: a re-post's
        # fan-out reads the author's followers when it runs, so a follow put back by a
        # later step must be back before any item is posted again; and a home entry is
        # kept only if its item is posted, so an item of a later step (a deep target's)
        # must be posted again before an earlier step's home is given back.
        for k in range(job.chunks):
            self._restore_rows(self._chunk(n, k))
        for k in range(job.chunks):
            self._restore_posts(self._chunk(n, k))
        for k in range(job.chunks):
            self._restore_homes(self._chunk(n, k))
        done = msgspec.structs.replace(job, status="restored")
        if not self._backend.swap_meta(_job_key(n), raw, _encode(done)):
            raise Conflict(f"deletion {n} changed while it was restored; restore it again")
        return self._public(done)

    def purge(self) -> list[Deletion]:
        """Erase the records of finished deletions past their window; return them (the
        cleaner thread calls this too). Each purge is logged at INFO and counted in
        `purged`."""
        now = self._clock()
        purged = []
        raw_seq = self._backend.get_meta(_SEQ)
        for n in range(1, 1 + (0 if raw_seq is None else int(raw_seq))):
            raw = self._backend.get_meta(_job_key(n))
            if raw is None:
                continue
            job = _decode(raw)
            if job.status not in ("done", "restored") or now <= job.started_at + job.window:
                continue
            for k in range(job.chunks + 1):
                key = _chunk_key(job.id, k)
                found = self._backend.get_meta(key)
                if found:
                    self._backend.swap_meta(key, found, b"")
            gone = msgspec.structs.replace(job, status="purged")
            # The report is made (a schema read: it may fail) before the swap, so that a
            # purge that happened is always counted and logged: once the status says
            # "purged", no later pass would log it.
            report = self._public(gone)
            if self._backend.swap_meta(_job_key(job.id), raw, _encode(gone)):
                purged.append(report)
                self.purged += 1
                log.info(
                    "purged deletion %d of object %d for good (restorable until %s): %s",
                    report.id,
                    report.root,
                    _iso(report.restorable_until),
                    _removed(report),
                )
        return purged

    def dangling(self, repair: bool = False) -> DanglingReport:
        """Edges whose end is deleted or missing, and owned objects without an owner
        (a scan of every shard: an operator's tool); `repair` removes the edges and
        deletes the orphans with cascade=True (`api.dangling`)."""

        def delete(id: int) -> None:
            self.delete(id, None)
            self.wait()

        return find_dangling(self._engine, self.owners_left, delete, repair)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    # -- the runner ---------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is not None or self._engine.journal.read_only or self._stop.is_set():
            return
        self._thread = threading.Thread(target=self._run, name="assocdb-deletions", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                worked = self._work()
            except AssocdbError as exc:  # a backend down: try again later
                log.warning("a deletion step failed (%s); trying again", exc)
                self._stop.wait(RETRY_SECONDS)
                continue
            except Exception as exc:  # never let the thread die; no traceback in logs
                log.error("a deletion step failed: %s: %s", type(exc).__name__, exc)
                self._stop.wait(RETRY_SECONDS)
                continue
            if not worked:
                with self._idle:
                    self._idle.notify_all()
                self._wake.wait(RETRY_SECONDS)
                self._wake.clear()

    def _work(self) -> bool:
        """Run the running deletions this process may work on; False if there were none."""
        worked = False
        if self._paused.is_set():
            return False
        for n in self._running():
            while not self._stop.is_set() and not self._paused.is_set():
                with self._lock:
                    job = self._claim(n)
                    if job is None:
                        break
                    if self._step(job) is None:
                        break
                worked = True
        return worked

    def _runnable(self) -> bool:
        return bool(self._running())

    def _running(self) -> list[int]:
        """The running deletions (those listed active whose job ended are unlisted), and
        any running one the active list does not name (`_unlisted`)."""
        raw = self._backend.get_meta(_ACTIVE)
        listed = [] if raw is None else msgspec.json.decode(raw, type=list[int])
        found = []
        for n in listed:
            stored = self._backend.get_meta(_job_key(n))
            if stored is None or _decode(stored).status == "running":
                found.append(n)  # none yet: being created
            else:
                self._set_active(n, False)
        return found + self._unlisted(set(listed))

    def _unlisted(self, listed: set[int]) -> list[int]:
        """Running deletions missing from the active list, found by their own records.
        On MySQL and PostgreSQL a running job was seen dropped from the list (its
        cascade then never ran and `wait` returned at once); the cause is not found, so
        a job's record, not the list, has the last word. Reads the records from the
        oldest that may still run (`_low`) to the newest: a few per call."""
        raw_seq = self._backend.get_meta(_SEQ)
        newest = 0 if raw_seq is None else int(raw_seq)
        found, settled = [], True
        for n in range(self._low, newest + 1):
            stored = self._backend.get_meta(_job_key(n))
            running = stored is None or _decode(stored).status == "running"
            if settled and not running:
                self._low = n + 1
            settled = settled and not running
            if running and stored is not None and n not in listed:
                found.append(n)
        return found

    def _set_active(self, n: int, running: bool) -> None:
        """List (`running`) or unlist deletion `n`. A job is unlisted only while its
        record says it does not run, read after the list: a deletion run again (deleted
        again once done: `_again` saves the job running, then lists it) is never
        unlisted by a late unlisting of its previous run, which `_unlisted` would not
        make up for (it reads no job below `_low`)."""
        if running:
            self._low = min(self._low, n)
        while True:
            raw = self._backend.get_meta(_ACTIVE)
            active = set() if raw is None else set(msgspec.json.decode(raw, type=list[int]))
            if not running and n in active:
                stored = self._backend.get_meta(_job_key(n))
                if stored is None or _decode(stored).status == "running":
                    return
            changed = active | {n} if running else active - {n}
            if changed == active:
                return
            if self._backend.swap_meta(_ACTIVE, raw, msgspec.json.encode(sorted(changed))):
                return

    def _claim(self, n: int) -> CascadeJob | None:
        """Job `n` if it runs and is (now) this process's, else None."""
        raw = self._backend.get_meta(_job_key(n))
        if raw is None:
            return None
        job = _decode(raw)
        if job.status != "running":
            return None
        me = self._engine.journal.owner
        if job.owner == me:
            return current(job)
        if job.owner and self._engine.journal.owner_alive(job.owner):
            return None
        mine = msgspec.structs.replace(job, owner=me)
        return current(mine) if self._backend.swap_meta(_job_key(n), raw, _encode(mine)) else None

    # -- one step -----------------------------------------------------------------

    def _step(self, job: CascadeJob) -> CascadeJob | None:
        """Make the job's next step and save it; the job after it, or None when it ended."""
        raw = self._backend.get_meta(_job_key(job.id))
        if raw is not None and _decode(raw).again:  # deleted again since it was read
            job = msgspec.structs.replace(job, again=True)
        key = _chunk_key(job.id, job.chunks)
        written = self._backend.get_meta(key)
        after: CascadeJob | None
        if written:  # planned and maybe applied before a crash: apply it (again)
            chunk = msgspec.msgpack.decode(written, type=Chunk)
            self._walk.apply(chunk)
            after = advance(job, chunk)
        elif (planned := self._walk.plan(job)) is not None:
            self._backend.swap_meta(key, written, msgspec.msgpack.encode(planned))
            self._walk.apply(planned)
            after = advance(job, planned)
        elif job.again:  # deleted again while it ran: its lists once more (no chunk)
            after = rewalk(job, job.owner)
        else:
            after = None
        if after is None:
            after = msgspec.structs.replace(
                job, status="done", finished_at=self._clock(), batch=[], node_index=0
            )
        after = self._save(raw, after)
        if after.status == "done":
            self._set_active(job.id, False)
            return None
        return after

    def _save(self, raw: bytes | None, after: CascadeJob) -> CascadeJob:
        """Store `after` over `raw` (the job as the step read it) and return it. Should
        the object have been deleted again meanwhile (`_again` set the flag, and nothing
        else changed), the flag is kept: the job ending now walks its root's lists
        again instead. Conflict if another process changed the job."""
        key = _job_key(after.id)
        if self._backend.swap_meta(key, raw, _encode(after)):
            return after
        now = self._backend.get_meta(key)
        if raw is not None and now is not None and _unflagged(now) == _unflagged(raw):
            if after.status == "done":
                after = rewalk(after, after.owner)
            else:
                after = msgspec.structs.replace(after, again=True)
            if self._backend.swap_meta(key, now, _encode(after)):
                return after
        raise Conflict(f"deletion {after.id} was changed by another process")

    def owners_left(self, target: int) -> int:
        """How many live deep or refcount edges point to `target` (through inverses)."""
        return self._walk.owners_left(target)

    # -- restore ------------------------------------------------------------------

    def _restore_rows(self, chunk: Chunk) -> None:
        """Put back a step's objects and edges (its posts go back with the timelines)."""
        ua = self._engine.clock.now()
        writes: list[Operation] = []
        for obj in chunk.objects:
            writes.append(ObjectWrite(obj.id, ua, otype=obj.otype, data=obj.data))
        posts = self._walk.posts_type()
        for row, _ in chunk.edges:
            if row.atype == posts:
                continue
            kind = self._engine.schema.assoc_by_id(row.atype)
            inverse = self._engine.inverse_id(kind)
            writes.append(
                EdgeWrite(row.atype, inverse, row.id1, row.id2, row.state, ua, row.time, row.data)
            )
        results = self._engine.submit_many([(op, ua) for op in writes], sync=True)
        for result in results:
            if isinstance(result, Conflict):
                continue  # a new live object took the id since: it stays
            if isinstance(result, BaseException):
                raise result
            if result.status != "applied":
                # A re-post's fan-out reads the author's followers: no item goes back
                # before every row is. The queued rows are journaled and will land; the
                # deletion stays restorable, and restoring it again writes the same rows.
                raise Unavailable(
                    "a restored row was queued (a shard is busy or down): nothing was "
                    "posted again; restore it again once the queue drains"
                )

    def _restore_posts(self, chunk: Chunk) -> None:
        """Post a step's items again (with their times)."""
        posts = self._walk.posts_type()
        for row, _ in chunk.edges:
            if row.atype == posts:
                self._timelines.post(row.id1, row.id2, row.time)

    def _restore_homes(self, chunk: Chunk) -> None:
        """Give back the home entries a step cleared, but for items deleted since."""
        ua = self._engine.clock.now()
        homes = [(chunk.node, chunk.home)] if chunk.home else []
        for node, held in [*homes, *chunk.homes]:
            # deliveries newer than the cascade's tombstones; not items deleted since
            kept = self._timelines.still_posted(held)
            back = [entry(t, item, author, ua) for t, item, author, _ in kept]
            self._timelines.home_merge(node, back)

    # -- meta ---------------------------------------------------------------------

    def _next_id(self) -> int:
        while True:
            raw = self._backend.get_meta(_SEQ)
            n = 1 if raw is None else int(raw) + 1
            if self._backend.swap_meta(_SEQ, raw, b"%d" % n):
                return n

    def _job(self, n: int) -> CascadeJob:
        raw = self._backend.get_meta(_job_key(n))
        if raw is None:
            raise NotFound(f"no deletion {n}", deletion=n)
        return _decode(raw)

    def _latest(self, root: int) -> int:
        raw = self._backend.get_meta(_root_key(root))
        if raw is None:
            raise NotFound(f"object {root} was never deleted with cascade=True", id=root)
        return int(raw)

    def _chunk(self, n: int, k: int) -> Chunk:
        raw = self._backend.get_meta(_chunk_key(n, k))
        if not raw:
            raise NotFound(f"deletion {n} has lost its record (chunk {k})", deletion=n)
        return msgspec.msgpack.decode(raw, type=Chunk)

    def _public(self, job: CascadeJob) -> Deletion:
        schema = self._engine.reload_schema()
        otypes = {t.id: t.name for t in schema.object_types}
        atypes = {t.id: t.name for t in schema.assoc_types}
        return public(job, otypes, atypes)


def _encode(job: CascadeJob) -> bytes:
    return msgspec.json.encode(job)


def _decode(raw: bytes) -> CascadeJob:
    return msgspec.json.decode(raw, type=CascadeJob)


def _unflagged(raw: bytes) -> CascadeJob:
    """The stored job, but for its `again` flag."""
    return msgspec.structs.replace(_decode(raw), again=False)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _removed(report: Deletion) -> str:
    """What a deletion removed, by type: `objects user=1 post=2; edges follows=3`."""
    objects = " ".join(f"{k}={v}" for k, v in sorted(report.objects.items())) or "none"
    edges = " ".join(f"{k}={v}" for k, v in sorted(report.edges.items())) or "none"
    return f"objects {objects}; edges {edges}"
