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

The Applier decides what an attempt does; its parts do the rest, each in its
own module: `CurrentRows` (`current.py`) reads the rows resolving needs,
`ShardWriter` (`shards.py`) writes legs to shards through their circuit
breakers (`ShardHealth`, `health.py`), `Outcomes` (`attempts.py`) tells the
journal how attempts ended, `Fence` (`fence.py`) completes jobs once their
shards are synced, and `Background` (`retrier.py`) runs the threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from contextlib import ExitStack
from functools import partial
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from ..cache.tier1 import Cache
from ..core.errors import AssocdbError, Unavailable
from ..core.ids import shard_of
from ..core.ops import (
    EdgeWrite,
    Leg,
    NodeJob,
    ObjectWrite,
    Operation,
    RowKey,
    Rows,
    Stored,
    TypeChange,
    legs,
    resolve,
)
from ..storage.backend import Backend
from .attempts import ApplyStats, Attempt, Outcomes
from .current import CurrentRows
from .fanout import Deliveries, FanoutJob, fanout_page
from .fence import FENCE_JOBS, FENCE_SECONDS, Fence
from .health import RetryPolicy, ShardHealth
from .journal import Journal
from .nodejob import node_job_page
from .pending import Pending
from .retrier import Background
from .shards import Landed, OpenedLeg, Preparing, ShardWriter, landed_somewhere
from .work import Work, decode, encode

__all__ = [
    "FENCE_JOBS",
    "FENCE_SECONDS",
    "NODE_JOB_PAGE",
    "Applier",
    "ApplyStats",
    "Pending",
    "PreparedBatch",
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


_FIRST = itemgetter(0)
_SHARD = attrgetter("shard")


class PreparedBatch(NamedTuple):
    """A batch of jobs' rows as one leg per touched shard (in shard order), when it
    started, and, once prepared, each leg's open transaction or why it could not be
    opened."""

    rows: list[Rows]
    legs: list[Leg]
    start: float
    prepared: list[Preparing]


NODE_JOB_PAGE = 2000  # edges moved per page of a NodeJob
NODE_JOB_PAGES = 10  # pages per turn before a NodeJob yields to other work


class Applier:
    """Runs jobs against a backend and keeps the journal informed."""

    def __init__(
        self,
        backend: Backend,
        journal: Journal,
        policy: RetryPolicy | None = None,
        health: ShardHealth | None = None,
        cache: Cache | None = None,
        *,
        observe: Callable[[int], None] | None = None,
        entries: Callable[[Any, Rows, Hashable], Rows] | None = None,
    ) -> None:
        self.backend = backend
        self.cache = cache
        self.journal = journal
        self.policy = policy or RetryPolicy()
        self.health = health or ShardHealth(
            self.policy.down_after, self.policy.down_for, self.policy.down_max
        )
        self.pending = Pending()
        #: Adds the secondary index entries of a resolved object write (`core.entities`):
        #: `entries(stored row, rows, owner) -> rows`, its unique ones claimed for `owner`
        #: (`Claims`). The engine's, which the Graph tells the indexes.
        self.entries = entries
        #: Told every stamp a resolution raised (`ObjectWrite.rebase`), so that this
        #: process stamps its later writes above it: the Graph's clock.
        self.observe = observe
        self._shards = backend.shards
        self.shards = ShardWriter(backend, self.health, cache)
        self.current = CurrentRows(backend, self.shards)
        self.fences = Fence(backend, journal)
        self.background = Background(self, journal, self.policy, self.fences)
        self.outcomes = Outcomes(journal, self.policy, self.pending, self.background.wake)
        self.stats = self.outcomes.stats

    # -- one attempt ---------------------------------------------------------------

    def read_current(self, op: Operation) -> Stored:
        """What resolving `op` needs (see `read_current_many`); raises if a shard fails."""
        return self.current.one(op)

    def read_current_many(self, ops: Sequence[Operation]) -> list[Stored | AssocdbError]:
        """What resolving each of `ops` needs: its key's stored row and its lists'
        strongest node state, read with one call per shard and kind; an op whose
        shard could not be read gets that error instead.

        On a shard map, only from replicas that missed none of this process's
        writes of the shard (`fresh_reads`): a later write of a row whose earlier
        write is still queued for some replicas resolves against one that has it.
        """
        return self.current.many(ops)

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
        attempt = Attempt(job, done, attempts, retries)
        if isinstance(work, (NodeJob, FanoutJob)):
            return self._run_node_job(attempt, work)
        if isinstance(work, Deliveries):
            return self._run_deliveries(attempt, work)
        if isinstance(work, Rows):
            return self._run_rows(attempt, work)
        with ExitStack() as held:
            if exclusive(work):
                if lock_refused:
                    return self.outcomes.failed(attempt, [lock_refused[0]])
                try:
                    held.enter_context(self.backend.exclusive_writes())
                except Unavailable as exc:  # an attempt like any other: retried
                    if lock_refused is not None:
                        lock_refused.append(exc)
                    return self.outcomes.failed(attempt, [exc])
            resolved = self._resolve(job, work)
            if isinstance(resolved, BaseException):
                return self.outcomes.failed(attempt, [resolved])
            return self._run_rows(attempt, resolved)

    def _run_rows(self, attempt: Attempt, work: Rows) -> bool:
        apply = self.shards.apply
        writes = [(leg.shard, partial(apply, leg)) for leg in legs(work, self._shards)]
        landed = self.shards.write_legs(writes, attempt.done)
        if landed.errors:
            return self._legs_failed(attempt, landed)
        self._applied([attempt.job], {shard for shard, _ in writes})
        return self.outcomes.succeeded(attempt)

    def _legs_failed(self, attempt: Attempt, landed: Landed) -> bool:
        """A job whose legs did not all land: the ones that did are recorded as done
        once durable, and the job goes to the error queue."""
        done = landed.done if self.fences.durable(landed.shards) else attempt.done
        if all(landed_somewhere(e) for e in landed.errors):
            # Every leg is on some replica of its shard (a shard map), and
            # reads prefer replicas that did not miss it: later writes of
            # these rows resolve against that instead of waiting unapplied
            # (they could not be read back until the retry). Its unique
            # claims stay: a leg writes its index entries after its rows
            # (`ShardWriter.apply`), so a partial one stored none of them.
            self.pending.discard(attempt.job, keep_claims=True)
        return self.outcomes.failed(attempt, landed.errors, done)

    def run_resolving(self, job: int, op: Operation) -> tuple[bool, Rows | None]:
        """`run` for a fresh job journaled unresolved: whether it is now applied, and the
        rows it was resolved to (journaled: they are applied as they are, whatever
        happens), or None if it could not be resolved now."""
        attempt = Attempt(job)
        resolved = self._resolve(job, op)
        if isinstance(resolved, BaseException):
            return self.outcomes.failed(attempt, [resolved]), None
        return self.run(job, resolved), resolved

    def run_batch(self, jobs: Sequence[tuple[int, Rows]]) -> list[bool]:
        """Apply fresh jobs of concrete rows together: their rows grouped by shard, each
        touched shard written in one transaction. Whether each job is now fully applied;
        a failed shard sends only the jobs with rows there to the error queue, with
        their other legs recorded as done."""
        start = time.perf_counter()
        batch = self._by_shard([rows for _, rows in jobs], start)
        outcomes = self.shards.write_batch(batch.legs)
        return self._settle(jobs, batch, outcomes)

    def prepare_batch(self, rows: Sequence[Rows]) -> PreparedBatch:
        """`run_batch` up to its shards' COMMITs, before the jobs are journaled: each
        touched shard's transaction opened and filled (`ShardWriter.prepare_batch`).
        Then `commit_batch` once the journal holds them, or `rollback_batch`."""
        batch = self._by_shard(rows, time.perf_counter())
        batch.prepared.extend(self.shards.prepare_batch(batch.legs))
        return batch

    def commit_batch(self, batch: PreparedBatch, jobs: Sequence[int]) -> list[bool]:
        """Commit a prepared batch whose rows the journal holds as `jobs` (in the order
        prepared); whether each job is now fully applied, as `run_batch`."""
        outcomes = self.shards.commit_batch(batch.prepared)
        if not any(outcomes):  # (`_settle`'s usual case, without its pairs)
            self._applied(list(jobs), set(map(_SHARD, batch.legs)))
            self.stats.record_applied(time.perf_counter() - batch.start, len(jobs))
            return [True] * len(jobs)
        return self._settle(list(zip(jobs, batch.rows, strict=True)), batch, outcomes)

    def fill_batch(
        self,
        rows: Sequence[Rows],
        opened: dict[int, OpenedLeg],
        where: dict[int, int] | None = None,
    ) -> PreparedBatch:
        """`prepare_batch` into shard transactions opened before `rows` were resolved
        (`ShardWriter.open_leg`, one per shard they write): each filled, or rolled back
        if no row lands there. Nothing is left open if it raises. `where`: nodes' shards
        known already."""
        batch = self._by_shard(rows, time.perf_counter(), where)
        prepared = batch.prepared  # (filled in place: no `_replace`, a lone write's batch)
        try:
            for leg in batch.legs:
                found = opened.pop(leg.shard, None)
                if found is None:  # (its keys were read on it: unreachable)
                    prepared.append(RuntimeError(f"shard {leg.shard} was not opened"))
                else:
                    prepared.append(self.shards.fill_leg(found, leg))
        except BaseException:
            self.shards.rollback_batch(prepared)
            raise
        finally:
            if opened:
                self.shards.close_opened(list(opened.values()))
        return batch

    def rollback_batch(self, batch: PreparedBatch) -> None:
        """Undo a prepared batch (the journal did not take it)."""
        self.shards.rollback_batch(batch.prepared)

    def _by_shard(
        self, jobs: Sequence[Rows], start: float, where: dict[int, int] | None = None
    ) -> PreparedBatch:
        """The jobs' rows as one leg per touched shard, in shard order (`where`: nodes'
        shards known already)."""
        by_shard: dict[int, Leg] = {}
        n = self._shards
        known = {} if where is None else where
        found = by_shard.get
        for rows in jobs:
            for edge in rows.edges:  # (two a write: `_leg` inlined)
                shard = known.get(edge[0])
                if shard is None:
                    shard = shard_of(edge[0], n)
                leg = found(shard)
                if leg is None:
                    leg = by_shard[shard] = Leg(shard, [], [], [], [])
                leg.edges.append(edge)
            for obj in rows.objects:
                _leg(by_shard, shard_of(obj[0], n)).objects.append(obj)
            for node in rows.nodes:
                _leg(by_shard, shard_of(node[0], n)).nodes.append(node)
            for shard, *entry in rows.index:
                _leg(by_shard, shard).entries.append(tuple(entry))  # type: ignore[arg-type]
        legs = [by_shard[shard] for shard in sorted(by_shard)]
        return PreparedBatch(list(jobs), legs, start, [])

    def _settle(
        self,
        jobs: Sequence[tuple[int, Rows]],
        batch: PreparedBatch,
        outcomes: Sequence[BaseException | None],
    ) -> list[bool]:
        """Record how a batch's shards went: the jobs applied, and the jobs with rows on a
        failed shard sent to the error queue."""
        if not any(outcomes):  # (every shard committed: the usual case, said briefly)
            applied = list(map(_FIRST, jobs))
            self._applied(applied, set(map(_SHARD, batch.legs)))
            self.stats.record_applied(time.perf_counter() - batch.start, len(applied))
            return [True] * len(applied)
        members = _members(batch.rows, self._shards)
        failed_shards = {
            leg.shard: exc for leg, exc in zip(batch.legs, outcomes, strict=True) if exc is not None
        }
        hit = {index for shard in failed_shards for index in members[shard]}
        applied = [job for index, (job, _) in enumerate(jobs) if index not in hit]
        self._applied(applied, {leg.shard for leg in batch.legs})
        self.stats.record_applied(time.perf_counter() - batch.start, len(applied))
        if hit:
            shared = {shard for shard in failed_shards if len(members[shard]) > 1}
            hit_jobs = [jobs[index] for index in sorted(hit)]
            self._batch_failed(hit_jobs, failed_shards, shared, batch.start)
        return [index not in hit for index in range(len(jobs))]

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
        durable = self.fences.durable(sorted(landed))
        for job, rows in jobs:
            done, errors = 0, []
            for number, leg in enumerate(legs(rows, self._shards)):
                if leg.shard in failed:
                    errors.append(failed[leg.shard])
                elif durable:
                    done |= 1 << number
            if all(landed_somewhere(e) for e in errors):  # (claims kept: see `_legs_failed`)
                self.pending.discard(job, keep_claims=True)
            own = not any(leg.shard in shared for leg in legs(rows, self._shards))
            failures.append(self.outcomes.failure(Attempt(job, done, start=start), errors, own))
        self.outcomes.record(failures)

    def _applied(self, jobs: list[int], shards: set[int]) -> None:
        """These jobs are applied: later writes of their rows need not wait for them, and
        the journal forgets them once their shards' transactions are durable (`fence`)."""
        self.pending.discard_many(jobs)
        if self.fences.applied(jobs, shards):  # the retrier may sleep longer: wake it
            self.background.wake()

    def fence(self) -> None:
        """Make the shard transactions of applied jobs durable, then let the journal
        delete those jobs (`writes.fence`)."""
        self.fences.fence()

    def unfenced(self) -> int:
        """How many applied jobs wait for the next fence."""
        return self.fences.unfenced()

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

    def _run_node_job(self, attempt: Attempt, work: NodeJob | FanoutJob) -> bool:
        """Do up to NODE_JOB_PAGES pages of a long job, recording progress after each.

        A NodeJob moves a node's edges; a FanoutJob delivers a post to followers.
        """
        job = attempt.job
        for page in range(1, NODE_JOB_PAGES + 1):
            try:
                following: NodeJob | FanoutJob | None
                if isinstance(work, FanoutJob):
                    following = fanout_page(self.backend, work, deliver=self._deliver)
                else:
                    following = self._node_job_page(work)
            except Exception as exc:
                return self.outcomes.failed(attempt, [exc], done=0)
            if following is None:
                self._applied([job], set(range(self._shards)))
                return self.outcomes.succeeded(attempt)
            work = following
            # Held from retriers while this thread walks on; due when it yields.
            hold = self.policy.claim_hold if page < NODE_JOB_PAGES else 0.0
            self.journal.progress(job, encode(work), hold)
        self.background.wake()  # the retrier carries on from here
        return False

    def _deliver(self, work: Deliveries) -> None:
        """Journal and run one page of a fan-out; a failed shard retries on its own."""
        self.run(self.journal.append(encode(work)), work)

    def _run_deliveries(self, attempt: Attempt, work: Deliveries) -> bool:
        """Merge a page of deliveries into home timelines, one leg per shard."""
        pairs = work.legs(self._shards)
        writes = [
            (shard, partial(self._merge_timelines, shard, found, work.cap))
            for shard, found in pairs
        ]
        landed = self.shards.write_legs(writes, attempt.done)
        if landed.errors:
            done = landed.done if self.fences.durable(landed.shards) else attempt.done
            return self.outcomes.failed(attempt, landed.errors, done)
        self._applied([attempt.job], {shard for shard, _ in pairs})
        return self.outcomes.succeeded(attempt)

    def _merge_timelines(self, shard: int, writes: Any, cap: int) -> None:
        self.backend.merge_timelines(shard, writes, cap)
        if self.cache is not None:
            self.cache.deliver(writes, cap)

    def _node_job_page(self, work: NodeJob) -> NodeJob | None:
        """Re-stamp the next page of the job's edges; the job after it, or None when done."""
        return node_job_page(self.backend, work, NODE_JOB_PAGE, self._run_page)

    def _run_page(self, rows: Rows) -> None:
        """Journal and run one page of a node job: its own job, retried on its own."""
        sub = self.journal.append(encode(rows))
        self.pending.add(sub, rows.keys)
        self.run(sub, rows)

    # -- background work (`writes.retrier`) ------------------------------------------

    def start(self, async_threads: int = 1) -> None:
        """Start the retrier and `async_threads` threads applying queued jobs."""
        self.background.start(async_threads)

    def enqueue(self, job: int, work: Work) -> None:
        """Apply `job` in the background (the journal already holds it)."""
        self.background.enqueue(job, work)

    def idle(self) -> bool:
        """True when no background apply is waiting or running."""
        return self.background.idle()

    def wake(self) -> None:
        self.background.wake()

    def stop(self, drain: float = 5.0) -> None:
        """Stop the threads, first giving queued background applies `drain` seconds."""
        self.background.stop(drain)
        self.shards.close()

    # The parts tests reach for: the fence's lock, the retrier's thread and round.

    @property
    def _fencing(self) -> Any:
        return self.fences.running

    @property
    def _stop(self) -> Any:
        return self.background.stopping

    @property
    def _wake(self) -> Any:
        return self.background.woken

    @_wake.setter
    def _wake(self, event: Any) -> None:  # a test records the retrier's sleeps
        self.background.woken = event

    @property
    def _threads(self) -> Any:
        return self.background.threads

    def _retry_round(self) -> int:
        return self.background.retry_round()


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


def reads_of(op: Operation) -> list[RowKey]:
    """The stored rows resolving `op` reads, as `Pending` knows them: its keys and the
    lists whose node states it reads."""
    return [*op.keys, *op.node_lists]


def _leg(by_shard: dict[int, Leg], shard: int) -> Leg:
    """The batch's leg on `shard`."""
    leg = by_shard.get(shard)
    if leg is None:
        leg = by_shard[shard] = Leg(shard, [], [], [], [])
    return leg


def _members(jobs: Sequence[Rows], shards: int) -> dict[int, set[int]]:
    """The jobs (by index) with rows on each shard, as `Applier._by_shard` placed them:
    wanted only when a shard failed, so worked out then, not for every batch."""
    members: dict[int, set[int]] = {}
    for index, rows in enumerate(jobs):
        for leg in legs(rows, shards):
            members.setdefault(leg.shard, set()).add(index)
    return members


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
