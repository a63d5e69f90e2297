"""The write pipeline: writes that enter together go through together.

Every write of a Graph enters here, from any thread (`Pipeline.submit`) or
many at once (`Graph.batch`). One thread carries them through, taking
everything that waits as one batch:

1. it *resolves* them: the stored rows the operations depend on are read
   with one read per shard (`Applier.read_current_many`) and each operation
   becomes concrete rows by the pure rule (`core.ops.resolve`); a refused
   one (NotFound, Conflict) is answered with its error and goes no further.
   (A round of many edge writes on SQLite reads inside its shard
   transactions instead, opened first: `Overlap.journal_resolving`);
2. it *journals* them: every job in one transaction and **one fsync**
   (`Journal.append_many`). From here on each write is acknowledged;
3. it *applies* them: the legs of all their jobs grouped by shard, each
   touched shard written in **one transaction** (`Applier.run_batch`); a
   shard that fails turns only its own legs into queued retries. Then it
   answers the writers.

Writes that arrive meanwhile wait for the next batch, so the cost of a write
falls as load rises. A write that finds the pipeline empty is carried
through by its own thread (no hand-off): a lone write costs one fsync plus
one apply. After a batch that answered several writers, the pipeline
*gathers*: for up to `GATHER_SECONDS` it waits for as many writes as it
answered (writers that got their answer usually write again), and a write
arriving meanwhile joins the next batch instead of going alone. Without it,
the first writer back found the pipeline empty and went through alone while
the others queued behind it: 8 writers made batches of 1 and 7 in turn
(4.5 on average) where they could make batches of 8, and a batch of one
costs nearly as much as a batch of eight (each leg its own shard
transaction, a journal fsync each). The stages do not overlap on purpose: a
second thread applying batch N while batch N+1 is resolved and fsynced was
measured slower (8 writers: 1,400 against 2,100 writes/s; 64: 3,800
against 4,400): both threads need the GIL after every statement, and each
waited for the other.

Order. An operation that reads a stored row (a re-add keeping the edge's
time, an object patch, an edge into a list with a node state) must see
every earlier write of that row. Within a batch, one that reads a row an
earlier write of the batch writes waits for the next *round* of the batch,
and so does everything after it. Earlier batches are applied before a batch
is resolved; a row whose journaled write is still unapplied (it is in the
error queue, or a background apply) is *pending* (`writes.pending.Pending`), and an
operation reading it is journaled unresolved: the applier resolves it in
journal order, as before.

With `sync=False` a write is answered once journaled (`queued`) and the
applier's background threads apply it (in batches as well), unless a later
round of its batch follows: the pipeline applies it before resolving that
round, as it does a synced round (see `_journal_round`); an operation the
store refuses is journaled as it is and becomes a bad job when applied (new
rows an index refuses cannot be resolved again: they are refused, unless the
key's holder has a queued write journaled unresolved that may free it: then
they are journaled as the operation adding them, judged in journal order).
`sync` is the pipeline's default; a `submit` may choose for its own writes
(FlockDB's low-priority writes are acknowledged once journaled on a
synchronous graph).

Background work (a cascading deletion's removals) enters the *low lane*
(`submit(..., low=True)`, `writes.lanes`): it never shares a batch with client
writes, goes through a slice at a time, and gives way to client writes while
it has had its share of the pipeline's time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from operator import attrgetter, itemgetter
from typing import Literal

import msgspec

from ..core.clock import HybridClock
from ..core.errors import AssocdbError, InvalidRequest, KeyTaken, Unavailable
from ..core.ops import EdgeWrite, ObjectWrite, Operation, RowKey, Rows, Stored, is_rejection
from .applier import FENCE_JOBS, Applier, PreparedBatch, encode, exclusive, reads_of, restamped
from .lanes import LowLane
from .overlap import RESOLVE_IN_SHARDS_FROM, Overlap

log = logging.getLogger("assocdb.journal")
#: How long the pipeline waits, after a batch that answered several writers, for them
#: to write again (see the module doc): a few lone writes' worth of time at most.
GATHER_SECONDS = 0.001
Submitted = Operation | Rows
#: What a write came to: applied, queued (journaled, not yet applied), or why it was refused.
Outcome = Literal["applied", "queued"] | BaseException
#: A write's outcome, and the stamp its resolution raised it to if it did.
Answer = tuple[Outcome, int | None]
# (Comprehensions are calls of their own in this Python: a lone write's few lists
# are built by `map` over these instead.)
_WORK = attrgetter("work")
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
_KEYS = attrgetter("keys")


class _Ticket:
    """One `submit` call: how many of its writes are unanswered, and the latch that
    says none is (a lock held until then: its one waiter, the submitting thread,
    takes it; cheaper than an `Event`'s condition on every write)."""

    __slots__ = ("done", "left", "lock")

    def __init__(self, count: int) -> None:
        self.left = count
        self.done = threading.Lock()
        self.done.acquire()  # released once every write is answered
        self.lock = threading.Lock()  # both stages answer


class _Entry:
    __slots__ = ("outcome", "stamp", "stamp_on_entry", "sync", "ticket", "work")

    def __init__(self, work: Submitted, ticket: _Ticket, sync: bool, stamp_on_entry: bool) -> None:
        self.work = work
        self.ticket = ticket
        self.sync = sync  # applied before it is answered, or answered once journaled
        self.stamp_on_entry = stamp_on_entry  # node rows stamped as they are resolved
        self.outcome: Outcome | None = None
        #: Raised by its resolution (`ObjectWrite.rebase`), or given on entry.
        self.stamp: int | None = None

    def answer(self, outcome: Outcome) -> None:
        """Answer the entry (a second answer is ignored: the first one stands)."""
        ticket = self.ticket
        with ticket.lock:
            if self.outcome is not None:
                return
            self.outcome = outcome
            ticket.left -= 1
            if ticket.left == 0:
                ticket.done.release()


class _Journaled:
    """A round that is journaled (acknowledged), to apply."""

    __slots__ = ("entries", "handled", "jobs", "prepared", "works")

    def __init__(
        self,
        entries: list[_Entry],
        jobs: list[int],
        works: list[Submitted],
        prepared: PreparedBatch | None = None,
    ) -> None:
        self.entries = entries
        self.jobs = jobs
        self.works = works
        #: Its shard transactions, prepared while it was journaled (`writes.overlap`).
        self.prepared = prepared
        #: The jobs an attempt was made for (applied, or sent to the error queue).
        self.handled: set[int] = set()


class Pipeline:
    """Batches concurrent writes through journal → apply; see the module doc."""

    def __init__(
        self, applier: Applier, *, sync: bool = True, now: Callable[[], int] | None = None
    ) -> None:
        self.applier = applier
        self._now = now or HybridClock().now  # the Graph's clock
        self.journal = applier.journal
        self.overlap = Overlap(applier)
        self.sync = sync
        self.batches = 0  # batches taken, and the writes in them: for benchmarks and tests
        self.writes = 0
        self._inbox: list[_Entry] = []
        self._low: LowLane[_Entry] = LowLane()  # background writes (`writes.lanes`)
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._busy = False  # a batch is going through (the pipeline's thread or a lone writer)
        #: Writers answered by the last batch, while the pipeline gathers their next writes.
        self._gathering = 0

    def submit(
        self,
        works: Sequence[Submitted],
        sync: bool | None = None,
        *,
        stamp_on_entry: bool = False,
        low: bool = False,
    ) -> list[Answer]:
        """Write `works` (in this order) with whatever else is waiting; their outcomes,
        each with the stamp its resolution raised it to, if it did (`ObjectWrite.rebase`).
        `sync` (default: the pipeline's) says whether they are applied before the
        answer or answered once journaled (`queued`) and applied in the background.

        `stamp_on_entry`: the works' node rows (a node operation the store stamped)
        are stamped now as they are resolved, in the order writes enter: a write
        stamped earlier that enters after it must see the node state (it reads
        it), and one that entered before it is covered by its node job (which
        takes the edges stamped before it).

        `low`: background work, carried through in the low lane (see the module doc)."""
        if not works:
            return []
        ticket = _Ticket(len(works))
        sync = self.sync if sync is None else sync
        mine = [_Entry(work, ticket, sync, stamp_on_entry) for work in works]
        with self._lock:
            if self._closed:
                raise InvalidRequest("this graph has been closed")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="assocdb-writes", daemon=True
                )
                self._thread.start()
            alone = not (low or self._inbox or self._busy or self._gathering or self._low.owed())
            if alone:
                self._busy = True
            else:
                (self._low.waiting if low else self._inbox).extend(mine)
                self._arrived.notify()
        if alone:
            self._run_alone(mine)
        ticket.done.acquire()  # (the submitting thread alone waits for its writes)
        return [(entry.outcome, entry.stamp) for entry in mine]  # type: ignore[misc]

    def _run_alone(self, entries: list[_Entry]) -> None:
        """A pipeline with nothing in it: the writer carries its own writes through (no
        thread hand-off: a lone write costs one fsync plus one apply). Writes arriving
        meanwhile wait in the inbox for the pipeline's thread."""
        start = time.monotonic()
        try:
            self._run_batch(entries)
        finally:
            with self._lock:
                self._busy = False
                now = time.monotonic()
                self._low.ran(now - start, False, now)
                if self._inbox or self._low.waiting or self._closed:  # else waking is wasted
                    self._arrived.notify()

    def close(self) -> None:
        """Finish what has entered, then stop the pipeline's thread."""
        with self._lock:
            self._closed = True
            self._arrived.notify()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        self.overlap.close()

    # -- the pipeline's thread --------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._gathering:
                    self._gather()
                if not self._wait_for_work():  # closed, and everything has gone through
                    return
                batch, low = self._take()
                self._busy = True
            # (a slice answers no client: nothing to gather for)
            writers = 0 if low else len({id(entry.ticket) for entry in batch})
            start = time.monotonic()
            try:
                self._run_batch(batch)
            finally:
                with self._lock:
                    self._busy = False
                    now = time.monotonic()
                    self._low.ran(now - start, low, now)
                    self._gathering = writers if writers > 1 else 0

    def _wait_for_work(self) -> bool:
        """(Holding the lock) wait until a batch may be taken; False once closed with
        nothing left. Only background work waiting: it gives a client that was just
        answered its grace to write again first (`writes.lanes`)."""
        while True:
            while not (self._inbox or self._low.waiting) or self._busy:
                if self._closed and not self._busy:
                    break
                self._arrived.wait()
            if not (self._inbox or self._low.waiting):
                return False
            left = 0.0 if self._inbox or self._closed else self._low.grace(time.monotonic())
            if left <= 0:
                return True
            self._arrived.wait(left)

    def _take(self) -> tuple[list[_Entry], bool]:
        """(Holding the lock) the next batch, and whether it is a slice of the low lane:
        the client writes waiting, unless the low lane is owed its share."""
        if self._inbox and not self._low.owed():
            batch, self._inbox = self._inbox, []
            return batch, False
        return self._low.take(), True

    def _gather(self) -> None:
        """Wait (holding the lock's condition) until as many writes wait as the last
        batch answered writers, or `GATHER_SECONDS` have passed; then writes may go
        alone again."""
        deadline = time.monotonic() + GATHER_SECONDS
        while len(self._inbox) < self._gathering and not self._closed:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._arrived.wait(left)
        self._gathering = 0

    def _run_batch(self, batch: list[_Entry]) -> None:
        """Resolve, journal and apply the batch, round by round."""
        self.batches += 1
        self.writes += len(batch)
        try:
            # No other process writes between the reads a round resolves against and
            # its apply, when that would lose part of a write (`applier.exclusive`).
            if any(map(exclusive, map(_WORK, batch))):
                with ExitStack() as held:
                    rest = batch
                    try:
                        held.enter_context(self.applier.backend.exclusive_writes())
                    except Unavailable as exc:  # (its holder is stuck: nothing journaled)
                        rest = self._refuse_exclusive(batch, exc)
                    self._run_rounds(rest)
            else:
                self._run_rounds(batch)
        except BaseException as exc:  # nothing may leave a writer without an answer
            log.exception("the write pipeline failed on a batch of %d writes", len(batch))
            for entry in batch:
                entry.answer(exc)  # (those answered already keep their answer)

    def _run_rounds(self, rest: list[_Entry]) -> None:
        """Resolve, journal and apply `rest`, round by round."""
        while rest:
            this_round, rest = _rounds(rest)
            journaled = self._journal_round(this_round, bool(rest))
            if journaled is not None:
                self._apply(journaled)

    def _refuse_exclusive(self, batch: list[_Entry], exc: Unavailable) -> list[_Entry]:
        """Answer the batch's writes that need the writer lock, which could not be
        taken, with why; the others (edge writes) do not need it: they go on."""
        log.warning("%s", exc)
        rest = []
        for entry in batch:
            if exclusive(entry.work):
                entry.answer(exc)
            else:
                rest.append(entry)
        return rest

    def _journal_round(self, entries: list[_Entry], more: bool = False) -> _Journaled | None:
        """Resolve and journal one round: what is left to apply, if anything.

        With `more` rounds to follow, the round's unsynced writes are applied here
        too (answered `queued` all the same, once journaled): the next round reads
        rows they write, and must be resolved against them, as after a synced
        round. Left to the background, they would be pending when it is resolved:
        its writes of those rows would be journaled unresolved, their unique keys
        unclaimed, so a later write of the round taking a key one of them frees
        (a delete, then an add of its key) would be refused."""
        claims = self.applier.pending.claims
        if self._resolves_in_shards(entries, more):
            ops: list[EdgeWrite] = list(map(_WORK, entries))
            try:
                done = self.overlap.journal_resolving(ops)
            except BaseException as exc:  # not journaled: not acknowledged
                claims.release(entries)
                for entry in entries:
                    entry.answer(exc)
                return None
            if done is not None:
                resolved, jobs, batch = done
                pairs: list[tuple[_Entry, Submitted]] = list(zip(entries, resolved, strict=True))
                return self._journaled(pairs, jobs, batch, more)
        try:
            works = self._resolve(entries)
        except BaseException:  # nothing of the round is journaled: its unique keys are free
            claims.release(entries)
            raise
        live = [(e, w) for e, w in zip(entries, works, strict=True) if w is not None]
        if not live:
            return None
        prepared = None
        try:
            bodies = [encode(work) for _, work in live]
            if self._overlaps(live, more):
                rows = [work for _, work in live]
                jobs, prepared = self.overlap.journal(bodies, rows)  # type: ignore[arg-type]
            else:
                jobs = self.journal.append_many(bodies)
        except BaseException as exc:  # not journaled: not acknowledged
            claims.release(entries)
            for entry, _ in live:
                entry.answer(exc)
            return None
        return self._journaled(live, jobs, prepared, more)

    def _journaled(
        self,
        live: Sequence[tuple[_Entry, Submitted]],
        jobs: list[int],
        prepared: PreparedBatch | None,
        more: bool,
    ) -> _Journaled | None:
        """Record a journaled round's jobs (pending, their claims), answer the writes not
        applied now (`queued`): what is left to apply, if anything."""
        claims = self.applier.pending.claims
        unresolved = [not isinstance(w, Rows) for _, w in live]
        self.applier.pending.add_many(
            jobs, list(map(_KEYS, map(_SECOND, live))), unresolved if any(unresolved) else None
        )
        for job, (entry, _) in zip(jobs, live, strict=True):
            claims.bind(entry, job)  # released when the job is applied
        entries: list[_Entry] = []
        applying: list[int] = []
        works: list[Submitted] = []
        for job, (entry, work) in zip(jobs, live, strict=True):
            if entry.sync or more:
                entries.append(entry)
                applying.append(job)
                works.append(work)
                if not entry.sync:
                    entry.answer("queued")
            else:
                self.applier.enqueue(job, work)
                entry.answer("queued")
        if not applying:
            return None
        return _Journaled(entries, applying, works, prepared)

    def _resolves_in_shards(self, entries: list[_Entry], more: bool) -> bool:
        """Whether the round is resolved inside its shard transactions
        (`Overlap.journal_resolving`): enough edge writes applied now, on a local
        engine, none reading a row whose journaled write is still pending."""
        if not self.overlap.enabled or len(entries) < RESOLVE_IN_SHARDS_FROM:
            return False
        for e in entries:
            if not (isinstance(e.work, EdgeWrite) and (e.sync or more)):
                return False
        pending = self.applier.pending
        if not pending.waiting():  # (nothing pending: no read is blocked)
            return True
        reads = [reads_of(entry.work) for entry in entries]  # type: ignore[arg-type]
        return not any(pending.which_blocked(reads))

    def _overlaps(self, live: list[tuple[_Entry, Submitted]], more: bool) -> bool:
        """Whether the round's shard transactions are prepared while it is journaled
        (`writes.overlap`): on a local engine, when it is all concrete rows applied now."""
        return self.overlap.enabled and all(
            isinstance(work, Rows) and (entry.sync or more) for entry, work in live
        )

    def _resolve(self, entries: list[_Entry]) -> list[Submitted | None]:
        """Each entry's work as it is journaled: concrete rows when the stored rows it
        depends on could be read, else the operation itself; None if it was refused.

        Index entries are made in the round's order, each entry the owner of its
        write's unique claims: a write sees the keys the writes before it take or
        free, as if they had been applied one by one."""
        stored = self._read_current(entries)
        works: list[Submitted | None] = []
        for number, entry in enumerate(entries):
            work = entry.work
            works.append(work)
            try:
                if isinstance(work, Rows):
                    if entry.stamp_on_entry and work.nodes:
                        entry.stamp = now = self._now()
                        work = works[number] = _stamped(work, now)
                    entries_of = self.applier.entries
                    if entries_of is not None and work.objects:
                        works[number] = entries_of(None, work, entry)
                elif not work.needs_current or number in stored:
                    rows = self.applier.resolution(work, stored.get(number, Stored()), entry)
                    entry.stamp = restamped(work, rows)
                    works[number] = rows
                # Else journaled unresolved, resolved by the applier in journal order.
            except AssocdbError as exc:  # only this write fails
                if not entry.sync and isinstance(exc, KeyTaken) and self._may_free(exc):
                    added = _as_add(entry.work)
                    if added is not None:  # judged in journal order, like an operation
                        works[number] = added
                        continue
                if isinstance(exc, Unavailable) and not isinstance(work, Rows):
                    # Its index entries could not be made (a shard holding a unique
                    # key down): journaled unresolved, like a row that could not be read.
                    continue
                # Refused before it is acknowledged; concrete rows (a new object)
                # cannot be resolved again by the applier: refused now, even unsynced
                # (unless `_may_free`, above).
                if entry.sync or isinstance(work, Rows) or not is_rejection(exc):
                    entry.answer(exc)
                    works[number] = None
                # Else acknowledged all the same (`queued`): the applier resolves it
                # again and parks it as a bad job with this error.
        return works

    def _may_free(self, exc: KeyTaken) -> bool:
        """Whether the object holding the unique key an unsynced write was refused has a
        queued write journaled unresolved (a delete, an update), which may free it:
        acknowledged writes are applied in journal order, so the write is judged
        after it (journaled unresolved, resolved by the applier)."""
        return self.applier.pending.unresolved((exc.holder,))

    def _read_current(self, entries: list[_Entry]) -> dict[int, Stored]:
        """The stored rows the round's operations depend on, by entry number: those
        that are not pending (or only in the error queue) and whose shard answered."""
        reads = [
            (number, work)
            for number, entry in enumerate(entries)
            if not isinstance(work := entry.work, Rows) and work.needs_current
        ]
        if not reads:
            return {}
        # Earlier batches are applied: only writes in the error queue (or applied in
        # the background) are pending; what reads their rows is journaled unresolved.
        blocked = self.applier.pending.which_blocked([reads_of(op) for _, op in reads])
        if any(blocked):
            reads = [read for read, no in zip(reads, blocked, strict=True) if not no]
        stored = self.applier.read_current_many([op for _, op in reads])
        return {
            number: current
            for (number, _), current in zip(reads, stored, strict=True)
            if not isinstance(current, AssocdbError)  # else resolved when its shard answers
        }

    # -- applying -----------------------------------------------------------------------

    def _apply(self, journaled: _Journaled) -> None:
        """Apply a journaled round (see `_apply_round`). Its writes are acknowledged: an
        unexpected error (a fence that fails, the journal's bookkeeping) answers none of
        them as refused. Those not answered yet are `queued` and go to the applier's
        background threads, and the batch's later rounds go on."""
        try:
            self._apply_round(journaled)
        except Exception:
            log.exception("applying %d journaled writes failed", len(journaled.jobs))
            if journaled.prepared is not None and not journaled.handled:
                self.applier.rollback_batch(journaled.prepared)  # (the retries apply them)
            for job, work, entry in zip(
                journaled.jobs, journaled.works, journaled.entries, strict=True
            ):
                if job not in journaled.handled:  # (an unsynced one is answered already)
                    self.applier.enqueue(job, work)
                    entry.answer("queued")

    def _apply_round(self, journaled: _Journaled) -> None:
        """Apply a journaled round: its concrete jobs in one `run_batch` (the round was
        resolved after the rows it read were applied), then the unresolved ones one by
        one, in journal order."""
        applier = self.applier
        if journaled.prepared is not None:  # (every job of the round, in its order)
            outcomes = applier.commit_batch(journaled.prepared, journaled.jobs)
            if all(outcomes):  # (the usual case: every job concrete rows, all applied)
                journaled.handled.update(journaled.jobs)
                _answer_all(journaled.entries, "applied")
                if applier.unfenced() >= FENCE_JOBS:
                    applier.fence()
                return
            applied = dict(zip(journaled.jobs, outcomes, strict=True))
        else:
            concrete = [
                (job, work)
                for job, work in zip(journaled.jobs, journaled.works, strict=True)
                if isinstance(work, Rows)
            ]
            outcomes = applier.run_batch(concrete)
            applied = dict(zip(map(_FIRST, concrete), outcomes, strict=True))
        journaled.handled.update(applied)
        for job, work, entry in zip(
            journaled.jobs, journaled.works, journaled.entries, strict=True
        ):
            if isinstance(work, Rows):
                ok = applied[job]
            else:  # resolved now: its answer reports the stamp that may have raised
                ok, rows = applier.run_resolving(job, work)
                journaled.handled.add(job)
                if rows is not None and entry.outcome is None:  # (unsynced: answered)
                    entry.stamp = restamped(work, rows)
            entry.answer("applied" if ok else "queued")
        if applier.unfenced() >= FENCE_JOBS:
            applier.fence()


def _answer_all(entries: list[_Entry], outcome: Outcome) -> None:
    """`_Entry.answer` for each entry, under one lock per submit call (a batch's entries
    share their ticket), not one per entry."""
    start, count = 0, len(entries)
    while start < count:
        ticket = entries[start].ticket
        end = start + 1
        while end < count and entries[end].ticket is ticket:
            end += 1
        with ticket.lock:
            left = ticket.left
            for entry in entries[start:end]:
                if entry.outcome is None:  # (a second answer is ignored)
                    entry.outcome = outcome
                    left -= 1
            if left != ticket.left:
                ticket.left = left
                if left == 0:
                    ticket.done.release()
        start = end


def _as_add(work: Submitted) -> ObjectWrite | None:
    """A new object's concrete rows as the operation adding it (resolved against its
    stored row, which is none: the same row), or None if `work` is not that."""
    if not isinstance(work, Rows) or work.edges or work.nodes or work.index:
        return None
    if len(work.objects) != 1 or work.objects[0].version != 1:
        return None
    obj = work.objects[0]
    return ObjectWrite(obj.id, obj.updated_at, obj.state, otype=obj.otype, data=obj.data)


def _stamped(rows: Rows, stamp: int) -> Rows:
    """`rows` with every node row stamped `stamp`."""
    nodes = [row._replace(updated_at=stamp) for row in rows.nodes]
    return msgspec.structs.replace(rows, nodes=nodes)


def _rounds(batch: list[_Entry]) -> tuple[list[_Entry], list[_Entry]]:
    """The batch's first round, and the rest: an operation that reads a row (or a
    node state) written by an earlier entry of the round waits for the next round,
    and so does every entry after it."""
    if len(batch) == 1:  # (a lone write is its own round)
        return batch, []
    written: set[RowKey] = set()
    nodes: set[tuple[int, int]] = set()
    for number, entry in enumerate(batch):
        work = entry.work
        if isinstance(work, Rows):
            written.update(work.keys)
            nodes.update((row[0], row[1]) for row in work.nodes)
            continue
        keys = work.keys
        # (`isdisjoint`, not `any` over a generator: a call less per key, on every
        # write of a batch; `nodes` is empty unless the batch writes node rows)
        if work.needs_current and not (
            written.isdisjoint(keys) and (not nodes or nodes.isdisjoint(work.node_lists))
        ):
            return batch[:number], batch[number:]
        written.update(keys)
    return batch, []
