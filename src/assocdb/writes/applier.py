"""Applying journaled jobs: now, in the background, and again after failures.

There is one code path for every attempt, first or hundredth ("make every
case an error case"): `Applier.run` resolves the job if it is not yet
concrete, applies each leg that is not yet done, and tells the journal how it
ended. A failed job goes to the error queue with exponential backoff and
jitter; the retrier thread feeds due jobs back into `run`.

* Availability failures (`Unavailable`: a backend down, locked, timing out)
  retry forever and never count against the job.
* Other failures count; after `RetryPolicy.max_attempts` the job is moved to
  the bad jobs with its error. A job whose write is rejected outright (the
  object it updates does not exist) goes there at once.

A shard that fails repeatedly is marked down by `ShardHealth` for a growing
cool-down: jobs for it go straight to the error queue instead of waiting for
its timeout each time, and the retrier's attempts double as probes.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, suppress
from typing import Any, TypeVar

from ..cache.tier1 import Cache
from ..core.errors import AssocdbError, Unavailable
from ..core.ids import shard_of
from ..core.merge import EdgeKey, NodeRow
from ..core.ops import (
    EdgeWrite,
    Key,
    Leg,
    ListKey,
    NodeJob,
    ObjectWrite,
    Operation,
    Rows,
    Stored,
    TypeChange,
    is_rejection,
    legs,
    resolve,
)
from ..storage.backend import Backend
from .fanout import Deliveries, FanoutJob, fanout_page
from .health import RetryPolicy, ShardHealth
from .journal import Failure, Journal
from .nodejob import node_job_page
from .pending import Pending
from .work import Work, decode, encode

__all__ = [
    "FENCE_JOBS",
    "FENCE_SECONDS",
    "NODE_JOB_PAGE",
    "Applier",
    "ApplyStats",
    "Pending",
    "RetryPolicy",
    "ShardHealth",
    "Work",
    "decode",
    "encode",
    "exclusive",
    "reads_of",
    "replay",
    "restamped",
]

log = logging.getLogger("assocdb.journal")
T = TypeVar("T")

NODE_JOB_PAGE = 2000  # edges moved per page of a NodeJob
NODE_JOB_PAGES = 10  # pages per turn before a NodeJob yields to other work
ASYNC_BATCH = 1000  # queued jobs a background thread applies together
FENCE_SECONDS = 0.2  # how long applied jobs wait for their shards' fsync, at most…
FENCE_JOBS = 5000  # …or until this many wait
SHARD_THREADS = 8  # shards of a batch applied at once on database servers (the pool's size)


class _Wanted:
    """The stored rows one shard is asked for, to resolve a batch of operations."""

    __slots__ = ("edges", "lists", "objects")

    def __init__(self) -> None:
        self.edges: set[EdgeKey] = set()
        self.objects: set[int] = set()
        self.lists: set[ListKey] = set()


class ApplyStats:
    """Counters the metrics layer reads."""

    def __init__(self) -> None:
        self.applied = 0
        self.failed = 0
        self.retries = 0
        self.bad = 0
        self.latencies: deque[float] = deque(maxlen=2048)
        self.lock = threading.Lock()

    def record(self, seconds: float, ok: bool, retry: bool, bad: bool) -> None:
        with self.lock:
            self.latencies.append(seconds)
            self.applied += ok
            self.failed += not ok
            self.retries += retry
            self.bad += bad

    def percentile(self, q: float) -> float:
        with self.lock:
            ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


class Applier:
    """Runs jobs against a backend and keeps the journal informed."""

    def __init__(
        self,
        backend: Backend,
        journal: Journal,
        policy: RetryPolicy | None = None,
        health: ShardHealth | None = None,
        cache: Cache | None = None,
    ) -> None:
        self.backend = backend
        self.cache = cache
        self.journal = journal
        self.policy = policy or RetryPolicy()
        self.health = health or ShardHealth(
            self.policy.down_after, self.policy.down_for, self.policy.down_max
        )
        self.stats = ApplyStats()
        self.pending = Pending()
        #: Adds the secondary index entries of a resolved object write (`core.entities`):
        #: `entries(stored row, rows, owner) -> rows`, its unique ones claimed for `owner`
        #: (`Claims`). Set by the Graph, which knows the indexes.
        self.entries: Callable[[Any, Rows, Hashable], Rows] | None = None
        #: Told every stamp a resolution raised (`ObjectWrite.rebase`), so that this
        #: process stamps its later writes above it: the Graph's clock.
        self.observe: Callable[[int], None] | None = None
        self._shards = backend.shards
        self._random = random.Random()
        self._queue: queue.Queue[tuple[int, Work] | None] = queue.Queue()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._busy_lock = threading.Lock()
        self._unfenced: list[int] = []
        self._unfenced_shards: set[int] = set()
        #: When the oldest applied job still waiting for a fence was applied (monotonic).
        self._unfenced_since: float | None = None
        self._fence_lock = threading.Lock()
        self._fencing = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None  # applies a batch's shards at once

    # -- one attempt ---------------------------------------------------------------

    def read_current(self, op: Operation) -> Stored:
        """What resolving `op` needs (see `read_current_many`); raises if a shard fails."""
        current = self.read_current_many([op])[0]
        if isinstance(current, AssocdbError):
            raise current
        return current

    def read_current_many(self, ops: Sequence[Operation]) -> list[Stored | AssocdbError]:
        """What resolving each of `ops` needs: its key's stored row and its lists'
        strongest node state, read with one call per shard and kind; an op whose
        shard could not be read gets that error instead.

        On a shard map, only from replicas that missed none of this process's
        writes of the shard (`fresh_reads`): a later write of a row whose earlier
        write is still queued for some replicas resolves against one that has it.
        """
        n = self._shards
        wanted: dict[int, _Wanted] = {}
        needs: list[tuple[Key | None, list[ListKey], list[int]]] = []  # per op
        for op in ops:
            lists = op.node_lists
            touched = []
            for node, atype in lists:
                shard = shard_of(node, n)
                touched.append(shard)
                want = wanted.get(shard)
                if want is None:
                    want = wanted[shard] = _Wanted()
                want.lists.add((node, atype))
            key: Key | None = None
            if op.needs_row:
                if isinstance(op, ObjectWrite):
                    key, shard = (op.id,), shard_of(op.id, n)
                    wanted.setdefault(shard, _Wanted()).objects.add(op.id)
                else:
                    key = op.key
                    shard = touched[0] if lists and lists[0][0] == op.id1 else shard_of(op.id1, n)
                    wanted.setdefault(shard, _Wanted()).edges.add(op.key)
                touched.append(shard)
            needs.append((key, lists, touched))
        rows: dict[Key, Any] = {}
        states: dict[ListKey, NodeRow] = {}
        failed: dict[int, AssocdbError] = {}
        with self.backend.fresh_reads():
            for shard in sorted(wanted):
                try:
                    self._read_wanted(shard, wanted[shard], rows, states)
                except AssocdbError as exc:
                    failed[shard] = exc
        answers: list[Stored | AssocdbError] = []
        for key, lists, touched in needs:
            if failed:
                error = next((failed[shard] for shard in touched if shard in failed), None)
                if error is not None:
                    answers.append(error)
                    continue
            node_state = 0
            if states:
                node_state = max((states[lst].state for lst in lists if lst in states), default=0)
            answers.append(Stored(None if key is None else rows.get(key), node_state))
        return answers

    def _read_wanted(
        self, shard: int, wanted: _Wanted, rows: dict[Key, Any], states: dict[ListKey, NodeRow]
    ) -> None:
        backend = self.backend
        if wanted.edges:
            for row in self._read(backend.edges_at, shard, sorted(wanted.edges)):
                rows[row[:3]] = row
        if wanted.objects:
            for obj in self._read(backend.objects, shard, sorted(wanted.objects)):
                rows[(obj[0],)] = obj
        if wanted.lists:
            states.update(self._read(backend.node_states, shard, sorted(wanted.lists)))

    def _read(self, read: Callable[..., T], shard: int, *args: Any) -> T:
        """One read of a shard, reported to its circuit breaker like a leg.

        A read may be the caller let through as the probe of a shard marked
        down: unless it reports back, the shard stays down while every write
        first reads, so under load it would never come back.
        """
        self.health.check(shard)
        try:
            result = read(shard, *args)
        except Unavailable as exc:
            self._leg_unavailable(shard, exc)
            raise
        self.health.succeeded(shard)
        return result

    def run(
        self,
        job: int,
        work: Work,
        done: int = 0,
        attempts: int = 0,
        retries: int = 0,
        *,
        lock_refused: list[Unavailable] | None = None,
    ) -> bool:
        """Apply what is left of `job`; True if it is now fully applied.

        `lock_refused`, shared by the jobs of one round (a retrier's claim, a
        background batch), holds the error of a wait for the writer lock that gave
        up: the round's later jobs that need the lock fail at once with it instead
        of each waiting out the timeout behind the same stuck holder."""
        start = time.perf_counter()
        if isinstance(work, (NodeJob, FanoutJob)):
            return self._run_node_job(job, work, attempts, retries)
        if isinstance(work, Deliveries):
            return self._run_deliveries(job, work, done, attempts, retries)
        if isinstance(work, Rows):
            return self._run_rows(job, work, done, attempts, retries, start)
        with ExitStack() as held:
            if exclusive(work):
                if lock_refused:
                    return self._failed(job, done, attempts, retries, start, [lock_refused[0]])
                try:
                    held.enter_context(self.backend.exclusive_writes())
                except Unavailable as exc:  # an attempt like any other: retried
                    if lock_refused is not None:
                        lock_refused.append(exc)
                    return self._failed(job, done, attempts, retries, start, [exc])
            resolved = self._resolve(job, work)
            if isinstance(resolved, BaseException):
                return self._failed(job, done, attempts, retries, start, [resolved])
            return self._run_rows(job, resolved, done, attempts, retries, start)

    def _run_rows(
        self, job: int, work: Rows, done: int, attempts: int, retries: int, start: float
    ) -> bool:
        errors: list[BaseException] = []
        was_done, landed = done, []
        for number, leg in enumerate(legs(work, self._shards)):
            if done >> number & 1:
                continue
            try:
                self.health.check(leg.shard)
            except Unavailable as exc:  # cooling down: not a new failure of the shard
                errors.append(exc)
                continue
            try:
                self._apply_leg(leg)
            except Unavailable as exc:
                self._leg_unavailable(leg.shard, exc)
                errors.append(exc)
                continue
            except Exception as exc:  # a bug or a bad row must not lose the write
                errors.append(exc)
                continue
            self.health.succeeded(leg.shard)
            done |= 1 << number
            landed.append(leg.shard)
        if errors:
            if not self._durable(landed):
                done = was_done  # the retry redoes them
            if all(_landed_somewhere(e) for e in errors):
                # Every leg is on some replica of its shard (a shard map), and
                # reads prefer replicas that did not miss it: later writes of
                # these rows resolve against that instead of waiting unapplied
                # (they could not be read back until the retry). Its unique
                # claims stay: a leg writes its index entries after its rows
                # (`_apply_leg`), so a partial one stored none of them.
                self.pending.discard(job, keep_claims=True)
            return self._failed(job, done, attempts, retries, start, errors)
        self._applied([job], {leg.shard for leg in legs(work, self._shards)})
        self.stats.record(time.perf_counter() - start, ok=True, retry=retries > 0, bad=False)
        return True

    def run_resolving(self, job: int, op: Operation) -> tuple[bool, Rows | None]:
        """`run` for a fresh job journaled unresolved: whether it is now applied, and the
        rows it was resolved to (journaled: they are applied as they are, whatever
        happens), or None if it could not be resolved now."""
        start = time.perf_counter()
        resolved = self._resolve(job, op)
        if isinstance(resolved, BaseException):
            return self._failed(job, 0, 0, 0, start, [resolved]), None
        return self.run(job, resolved), resolved

    def run_batch(self, jobs: Sequence[tuple[int, Rows]]) -> list[bool]:
        """Apply fresh jobs of concrete rows together: their rows grouped by shard, each
        touched shard written in one transaction. Whether each job is now fully applied;
        a failed shard sends only the jobs with rows there to the error queue, with
        their other legs recorded as done."""
        start = time.perf_counter()
        by_shard: dict[int, Leg] = {}
        members: dict[int, set[int]] = {}  # shard -> indexes of the jobs with rows there
        n = self._shards
        for index, (_, rows) in enumerate(jobs):
            for edge in rows.edges:
                _leg(by_shard, members, shard_of(edge[0], n), index).edges.append(edge)
            for obj in rows.objects:
                _leg(by_shard, members, shard_of(obj[0], n), index).objects.append(obj)
            for node in rows.nodes:
                _leg(by_shard, members, shard_of(node[0], n), index).nodes.append(node)
            for shard, *entry in rows.index:
                _leg(by_shard, members, shard, index).entries.append(tuple(entry))  # type: ignore[arg-type]
        order = sorted(by_shard)
        if self.backend.local or len(order) == 1:
            outcomes = [self._try_leg(by_shard[shard]) for shard in order]
        else:  # database servers: the shards' commits (and their log flushes) overlap
            outcomes = list(self._shard_pool().map(self._try_leg, [by_shard[s] for s in order]))
        failed_shards = {
            shard: exc for shard, exc in zip(order, outcomes, strict=True) if exc is not None
        }
        hit = {index for shard in failed_shards for index in members[shard]}
        applied = [job for index, (job, _) in enumerate(jobs) if index not in hit]
        self._applied(applied, set(by_shard))
        seconds = time.perf_counter() - start
        for _ in applied:
            self.stats.record(seconds, ok=True, retry=False, bad=False)
        if hit:
            shared = {shard for shard in failed_shards if len(members[shard]) > 1}
            hit_jobs = [jobs[index] for index in sorted(hit)]
            self._batch_failed(hit_jobs, failed_shards, shared, start)
        return [index not in hit for index in range(len(jobs))]

    def _try_leg(self, leg: Leg) -> BaseException | None:
        """Apply one shard's rows of a batch; the error if that failed."""
        try:
            self.health.check(leg.shard)
        except Unavailable as exc:  # cooling down: not a new failure of the shard
            return exc
        try:
            self._apply_leg(leg)
        except Exception as exc:  # a bug or a bad row must not lose the writes
            if isinstance(exc, Unavailable):
                self._leg_unavailable(leg.shard, exc)
            return exc
        self.health.succeeded(leg.shard)
        return None

    def _shard_pool(self) -> ThreadPoolExecutor:
        with self._busy_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(SHARD_THREADS, thread_name_prefix="assocdb-shard")
            return self._pool

    def _batch_failed(
        self,
        jobs: list[tuple[int, Rows]],
        failed: dict[int, BaseException],
        shared: set[int],
        start: float,
    ) -> None:
        """Send jobs with rows on failed shards to the error queue, their legs on the
        other shards recorded as done. The error of a transaction `shared` by several
        jobs is that of one of them: it rejects none at once (each is retried alone)."""
        failures = []
        landed = {
            leg.shard
            for _, rows in jobs
            for leg in legs(rows, self._shards)
            if leg.shard not in failed
        }
        durable = self._durable(sorted(landed))
        for job, rows in jobs:
            done, errors = 0, []
            for number, leg in enumerate(legs(rows, self._shards)):
                if leg.shard in failed:
                    errors.append(failed[leg.shard])
                elif durable:
                    done |= 1 << number
            if all(_landed_somewhere(e) for e in errors):  # (claims kept: see `run`)
                self.pending.discard(job, keep_claims=True)
            own = not any(leg.shard in shared for leg in legs(rows, self._shards))
            failures.append(self._failure(job, done, 0, 0, start, errors, own))
        self._record(failures)

    def _durable(self, shards: Sequence[int]) -> bool:
        """Make the shards of a failed job's applied legs durable before the journal
        records those legs as done (a retry skips done legs): without the `fence`,
        a power loss could take them back. False if that failed: the retry redoes them."""
        if not shards:
            return True
        try:
            self.backend.make_durable(sorted(set(shards)))
        except AssocdbError:
            log.warning("shards %s could not be synced; their legs will be redone", shards)
            return False
        return True

    def _applied(self, jobs: list[int], shards: set[int]) -> None:
        """These jobs are applied: later writes of their rows need not wait for them, and
        the journal forgets them once their shards' transactions are durable (`fence`)."""
        self.pending.discard_many(jobs)
        with self._fence_lock:
            first = self._unfenced_since is None
            if first:
                self._unfenced_since = time.monotonic()
            self._unfenced.extend(jobs)
            self._unfenced_shards.update(shards)
        if first:  # the retrier may be sleeping longer than a fence may wait: wake it
            self._wake.set()

    def fence(self) -> None:
        """Make the shard transactions of applied jobs durable, then let the journal
        delete those jobs.

        Shards commit without waiting for the disk (SQLite's synchronous=NORMAL):
        a power loss may take back a transaction a crash would not. So a job stays
        in the journal, where a replay finds it, until the shards it wrote are
        synced (`Backend.make_durable`): one fsync per shard for every job applied
        since the last fence, run by the retrier once the oldest of them has
        waited FENCE_SECONDS (the first one wakes it) and by the pipeline when
        many jobs wait. Losing the fence only costs the redundant replay of
        applied jobs.
        """
        with self._fencing:  # one at a time: when a fence returns, earlier ones are done
            with self._fence_lock:
                jobs, self._unfenced = self._unfenced, []
                shards, self._unfenced_shards = self._unfenced_shards, set()
                since, self._unfenced_since = self._unfenced_since, None
            if not jobs and not shards:
                return
            try:
                self.backend.make_durable(sorted(shards))
            except BaseException:
                with self._fence_lock:
                    self._unfenced[:0] = jobs
                    self._unfenced_shards |= shards
                    waiting = [t for t in (since, self._unfenced_since) if t is not None]
                    self._unfenced_since = min(waiting, default=time.monotonic())
                raise
            self.journal.complete(jobs)

    def unfenced(self) -> int:
        """How many applied jobs wait for the next fence."""
        return len(self._unfenced)

    def _resolve(self, job: int, work: EdgeWrite | TypeChange | ObjectWrite) -> Rows | Exception:
        """The rows a write comes to against what is stored (journaled), or why not yet."""
        if self.pending.blocked(reads_of(work), before=job):
            return Unavailable("waiting for an earlier write to the same row")
        try:
            rows = self.resolution(work, self.read_current(work), job)
        except Exception as exc:
            return exc
        try:
            # Recorded before it is applied: a replay must not resolve it again against
            # the row it wrote (a rebased stamp would rise again).
            self.journal.resolved(job, encode(rows))
        except AssocdbError as exc:  # not applied now; resolved again by the retry
            return exc
        self.pending.resolved(job)
        return rows

    def resolution(self, op: Operation, stored: Stored, owner: Hashable) -> Rows:
        """The rows `op` comes to against `stored`, with their secondary index entries
        (unique keys claimed for `owner`); a stamp the resolution raised is observed by
        the clock."""
        rows = resolve(op, stored)
        if rows.objects:
            if self.entries is not None:
                rows = self.entries(stored.row, rows, owner)
            stamp = restamped(op, rows)
            if stamp is not None and self.observe is not None:
                self.observe(stamp)
        return rows

    def _apply_leg(self, leg: Leg) -> None:
        if leg.edges or leg.objects or leg.nodes:
            cache = self.cache
            if cache is None:
                self.backend.apply(leg.shard, leg.edges, leg.objects, leg.nodes)
            else:
                tickets = _tickets(leg)
                cache.writing(tickets)  # no fill lands between the commit and `apply`
                try:
                    changes = self.backend.apply(leg.shard, leg.edges, leg.objects, leg.nodes)
                    # Now, not after the entries: if they fail, the retry of the leg
                    # finds the rows stored and changes nothing, so the cache would
                    # never learn.
                    cache.apply(changes)
                finally:
                    cache.written(tickets)
        if leg.entries:  # secondary index entries: no cache holds them
            self.backend.index_apply(leg.shard, leg.entries)

    def _leg_unavailable(self, shard: int, exc: Unavailable) -> None:
        """Count a failed leg against its shard, unless it landed on some of the shard's
        replicas (`partial`, from `storage.shardmap`): then the shard works, one replica is down."""
        if not exc.details.get("partial"):
            self.health.failed(shard)

    def _run_node_job(
        self, job: int, work: NodeJob | FanoutJob, attempts: int, retries: int
    ) -> bool:
        """Do up to NODE_JOB_PAGES pages of a long job, recording progress after each.

        A NodeJob moves a node's edges; a FanoutJob delivers a post to followers.
        """
        start = time.perf_counter()
        for page in range(1, NODE_JOB_PAGES + 1):
            try:
                following: NodeJob | FanoutJob | None
                if isinstance(work, FanoutJob):
                    following = fanout_page(self.backend, work, deliver=self._deliver)
                else:
                    following = self._node_job_page(work)
            except Exception as exc:
                return self._failed(job, 0, attempts, retries, start, [exc])
            if following is None:
                self._applied([job], set(range(self._shards)))
                self.stats.record(
                    time.perf_counter() - start, ok=True, retry=retries > 0, bad=False
                )
                return True
            work = following
            # Held from retriers while this thread walks on; due when it yields.
            hold = self.policy.claim_hold if page < NODE_JOB_PAGES else 0.0
            self.journal.progress(job, encode(work), hold)
        self._wake.set()  # the retrier carries on from here
        return False

    def _deliver(self, work: Deliveries) -> None:
        """Journal and run one page of a fan-out; a failed shard retries on its own."""
        self.run(self.journal.append(encode(work)), work)

    def _run_deliveries(
        self, job: int, work: Deliveries, done: int, attempts: int, retries: int
    ) -> bool:
        """Merge a page of deliveries into home timelines, one leg per shard."""
        start = time.perf_counter()
        errors: list[BaseException] = []
        was_done, landed = done, []
        for number, (shard, writes) in enumerate(work.legs(self._shards)):
            if done >> number & 1:
                continue
            try:
                self.health.check(shard)
            except Unavailable as exc:  # cooling down: not a new failure of the shard
                errors.append(exc)
                continue
            try:
                self.backend.merge_timelines(shard, writes, work.cap)
            except Unavailable as exc:
                self._leg_unavailable(shard, exc)
                errors.append(exc)
                continue
            except Exception as exc:  # a bug must not lose the delivery
                errors.append(exc)
                continue
            self.health.succeeded(shard)
            if self.cache is not None:
                self.cache.deliver(writes, work.cap)
            done |= 1 << number
            landed.append(shard)
        if errors:
            if not self._durable(landed):
                done = was_done  # the retry redoes them
            return self._failed(job, done, attempts, retries, start, errors)
        self._applied([job], {shard for shard, _ in work.legs(self._shards)})
        self.stats.record(time.perf_counter() - start, ok=True, retry=retries > 0, bad=False)
        return True

    def _node_job_page(self, work: NodeJob) -> NodeJob | None:
        """Re-stamp the next page of the job's edges; the job after it, or None when done."""
        return node_job_page(self.backend, work, NODE_JOB_PAGE, self._run_page)

    def _run_page(self, rows: Rows) -> None:
        """Journal and run one page of a node job: its own job, retried on its own."""
        sub = self.journal.append(encode(rows))
        self.pending.add(sub, rows.keys)
        self.run(sub, rows)

    def _failed(
        self,
        job: int,
        done: int,
        attempts: int,
        retries: int,
        start: float,
        errors: list[BaseException],
    ) -> bool:
        self._record([self._failure(job, done, attempts, retries, start, errors)])
        return False

    def _record(self, failures: list[Failure]) -> None:
        """Record failed attempts in the journal, for the retrier.

        If the journal cannot write them now (a full disk), it keeps them and
        writes them with its next commit (the retrier flushes a few times a
        second): the attempts ended all the same, and their jobs are journaled.
        Raising here would tell writers whose writes the journal holds that they
        were refused, and leave the rest of a batch unanswered.
        """
        try:
            self.journal.fail(failures)
        except AssocdbError as exc:
            log.warning("%d failed attempts are recorded later: %s", len(failures), exc)
        self._wake.set()

    def _failure(
        self,
        job: int,
        done: int,
        attempts: int,
        retries: int,
        start: float,
        errors: list[BaseException],
        own: bool = True,
    ) -> Failure:
        """How the attempt ended, for the journal; counted, and logged if the job is now
        bad (at once if rejected, unless the errors may be another job's: not `own`)."""
        counts = any(not isinstance(e, Unavailable) for e in errors)
        rejected = own and any(is_rejection(e) for e in errors)
        bad = rejected or (counts and attempts + 1 >= self.policy.max_attempts)
        message = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
        next_at = time.time() + self.policy.delay(retries, self._random)
        self.stats.record(time.perf_counter() - start, ok=False, retry=retries > 0, bad=bad)
        if bad:
            self.pending.discard(job)  # parked: later writes no longer wait for it
            log.error("job %d is now a bad job: %s", job, message)
        return Failure(job, done, message, counts, next_at, bad)

    # -- background work -------------------------------------------------------------

    def start(self, async_threads: int = 1) -> None:
        """Start the retrier and `async_threads` threads applying queued jobs."""
        self._threads = [
            threading.Thread(target=self._retry_loop, name="assocdb-retrier", daemon=True)
        ]
        self._threads += [
            threading.Thread(target=self._async_loop, name=f"assocdb-apply-{n}", daemon=True)
            for n in range(async_threads)
        ]
        for thread in self._threads:
            thread.start()

    def enqueue(self, job: int, work: Work) -> None:
        """Apply `job` in the background (the journal already holds it)."""
        with self._busy_lock:
            self._busy += 1
        self._queue.put((job, work))

    def idle(self) -> bool:
        """True when no background apply is waiting or running."""
        return self._busy == 0

    def wake(self) -> None:
        self._wake.set()

    def _async_loop(self) -> None:
        """Apply queued jobs, taking whatever is waiting as one batch."""
        while (item := self._queue.get()) is not None:
            items = [item]
            while len(items) < ASYNC_BATCH:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)  # this thread's stop: after the batch
                    break
                items.append(more)
            try:
                self._run_queued(items)
            except Exception:  # the journal still holds them; the next open replays them
                log.exception("applying jobs %d… failed unexpectedly", items[0][0])
            finally:
                with self._busy_lock:
                    self._busy -= len(items)

    def _run_queued(self, items: list[tuple[int, Work]]) -> None:
        """Concrete rows together (`run_batch`), then the rest one by one, in journal order."""
        rows = [(job, work) for job, work in items if isinstance(work, Rows)]
        if rows:
            self.run_batch(rows)
        refused: list[Unavailable] = []
        for job, work in items:
            if not isinstance(work, Rows):
                self.run(job, work, lock_refused=refused)
        if self.unfenced() >= FENCE_JOBS:
            self.fence()

    def _retry_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._retry_due()
                if self._fence_wait() == 0.0:
                    self.fence()
                self.journal.flush()
                pause = self._pause()
            except Exception:
                log.exception("the retrier met an error; trying again shortly")
                pause = 1.0
            self._wake.wait(pause)
            self._wake.clear()

    def _retry_due(self) -> None:
        while not self._stop.is_set():
            if self._retry_round() < 100:
                return

    def _retry_round(self) -> int:
        """Claim up to 100 due jobs and run them; how many there were."""
        jobs = self.journal.claim_due(time.time(), 100, self.policy.claim_hold)
        refused: list[Unavailable] = []  # a round waits for a stuck writer lock once
        for job in jobs:
            work = decode(job.body)
            self.run(job.id, work, job.done, job.attempts, job.retries + 1, lock_refused=refused)
        return len(jobs)

    def _pause(self) -> float:
        """How long the retrier may sleep: until the next due retry or the next fence
        (a write that leaves the first job waiting for a fence wakes it to ask again)."""
        due = self.journal.next_due()
        pause = 1.0 if due is None else max(0.005, min(1.0, due - time.time()))
        fence = self._fence_wait()
        return pause if fence is None else max(0.005, min(pause, fence))

    def _fence_wait(self) -> float | None:
        """Seconds until the oldest unfenced job has waited FENCE_SECONDS (0.0: it has);
        None when no job waits for a fence."""
        since = self._unfenced_since
        if since is None:
            return None
        return max(0.0, since + FENCE_SECONDS - time.monotonic())

    def stop(self, drain: float = 5.0) -> None:
        """Stop the threads, first giving queued background applies `drain` seconds."""
        deadline = time.monotonic() + drain
        while not self.idle() and time.monotonic() < deadline:
            time.sleep(0.005)
        self._stop.set()
        self._wake.set()
        for _ in self._threads[1:]:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=max(0.1, deadline - time.monotonic()))
        with suppress(AssocdbError):  # if not now, the jobs are replayed on the next open
            self.fence()
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def restamped(op: Operation | Rows, rows: Rows) -> int | None:
    """The stamp `op`'s resolution `rows` raised it to (`ObjectWrite.rebase`), if it did."""
    if isinstance(op, ObjectWrite) and op.rebase and rows.objects:
        stamp = rows.objects[0].updated_at
        if stamp > op.updated_at:
            return stamp
    return None


def exclusive(work: object) -> bool:
    """Whether resolving `work` keeps part of a row another process writing the graph
    may change meanwhile: an object's other properties (a patch; a unique key), an
    edge's whole row (a type change). It is then read, resolved and applied holding
    the backend's writer lock (`storage.writerlock`). A new object's concrete rows
    (an id allocated here) are too: their unique keys are checked against the stored
    index as the pipeline resolves them. An edge write keeping its time or data is
    not: as before, the later `updated_at` wins as a whole (holding the lock for
    those would serialize every batch of processes writing at once)."""
    if isinstance(work, Rows):
        return bool(work.objects)
    return isinstance(work, (ObjectWrite, TypeChange))


def reads_of(op: Operation) -> list[Key]:
    """The stored rows resolving `op` reads, as `Pending` knows them: its keys and the
    lists whose node states it reads."""
    return [*op.keys, *op.node_lists]


def _tickets(leg: Leg) -> list[tuple[str, Any]]:
    """The cache entries a leg's rows change (`Cache.writing`)."""
    lists = dict.fromkeys((edge[0], edge[1]) for edge in leg.edges)
    tickets: list[tuple[str, Any]] = [("counts", key) for key in lists]
    tickets += [("prefix", key) for key in lists]
    tickets += [("object", obj[0]) for obj in leg.objects]
    return tickets


def _leg(by_shard: dict[int, Leg], members: dict[int, set[int]], shard: int, job: int) -> Leg:
    """The batch's leg on `shard`, noting that job number `job` has rows there."""
    leg = by_shard.get(shard)
    if leg is None:
        leg = by_shard[shard] = Leg(shard, [], [], [], [])
        members[shard] = set()
    members[shard].add(job)
    return leg


def _landed_somewhere(error: BaseException) -> bool:
    """Whether a failed leg was written to some replicas of its shard (`storage.shardmap`)."""
    return isinstance(error, Unavailable) and bool(error.details.get("partial"))


def replay(applier: Applier, journal: Journal, on_job: Callable[[int], None] | None = None) -> int:
    """Apply every `new` job (the ones a crash may have left); return how many.

    First every unfinished job (new or in the error queue) is registered as
    pending, so writes resolved from now on wait for the ones before them.
    """
    for state in ("new", "error"):
        after = 0
        while batch := journal.jobs(state, after, 1000):
            for job in batch:
                body = decode(job.body)
                applier.pending.add(job.id, body.keys, not isinstance(body, Rows))
                if isinstance(body, Rows) and body.index:
                    applier.pending.claims.claim(job.id, body.index)
            after = batch[-1].id
    count, after = 0, 0
    while batch := journal.unfinished(after):
        for job in batch:
            applier.run(job.id, decode(job.body), job.done, job.attempts, job.retries)
            count += 1
            if on_job is not None:
                on_job(job.id)
        after = batch[-1].id
    return count
