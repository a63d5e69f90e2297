"""The write pipeline: writes that enter together go through together.

Every write of a Graph enters here, from any thread (`Pipeline.submit`) or
many at once (`Graph.batch`). Two threads carry them through, each taking
everything that waits for it as one batch:

1. the **journal stage** takes the writes waiting to enter. It *resolves*
   them: the stored rows the operations depend on are read with one read
   per shard (`Applier.read_current_many`) and each operation becomes
   concrete rows by the pure rule (`core.ops.resolve`); a refused one
   (NotFound, Conflict) is answered with its error and goes no further. Then
   it *journals* them: every job in one transaction and **one fsync**
   (`Journal.append_many`). From here on each write is acknowledged.
2. the **apply stage** takes every journaled batch waiting for it, groups
   the legs of all their jobs by shard and writes each touched shard in
   **one transaction** (`Applier.run_batch`); a shard that fails turns only
   its own legs into queued retries. Then it answers the writers.

The stages overlap: batch N+1 is resolved and fsynced while batch N is
applied, so the two cores work at once, and the cost of a write falls as
load rises. A write that finds the pipeline empty is carried through both
stages by its own thread (no hand-offs): a lone write costs one fsync plus
one apply, as without a pipeline.

Order. An operation that reads a stored row (a re-add keeping the edge's
time, an object patch, an edge into a list with a node state) must see
every earlier write of that row. Within a batch, one that reads a row an
earlier write of the batch writes waits for the next *round* of the batch,
and so does everything after it. Across batches, a row with a journaled,
unapplied write is *pending* (`applier.Pending`): the journal stage waits
for the apply stage to finish its batches, then resolves against the
applied rows; if the row is still pending (its write is in the error queue,
or a background apply), the operation is journaled unresolved and the
applier resolves it in journal order, as before.

With `sync=False` a write is answered once journaled (`queued`) and the
applier's background threads apply it (in batches as well); one the store
refuses is journaled as it is and becomes a bad job when applied. `sync` is
the pipeline's default; a `submit` may choose for its own writes (FlockDB's
low-priority writes are acknowledged once journaled on a synchronous graph).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from typing import Literal

from ..core.errors import AssocdbError, InvalidRequest
from ..core.ops import Key, Operation, Rows, Stored, is_rejection, resolve
from .applier import FENCE_JOBS, Applier, encode, reads_of

log = logging.getLogger("assocdb.journal")
Work = Operation | Rows
#: What a write came to: applied, queued (journaled, not yet applied), or why it was refused.
Outcome = Literal["applied", "queued"] | BaseException


class _Ticket:
    """One `submit` call: how many of its writes are unanswered, and the event
    that says none is."""

    __slots__ = ("done", "left", "lock")

    def __init__(self, count: int) -> None:
        self.left = count
        self.done = threading.Event()
        self.lock = threading.Lock()  # both stages answer


class _Entry:
    __slots__ = ("handed", "outcome", "sync", "ticket", "work")

    def __init__(self, work: Work, ticket: _Ticket, sync: bool) -> None:
        self.work = work
        self.ticket = ticket
        self.sync = sync  # applied before it is answered, or answered once journaled
        self.outcome: Outcome | None = None
        self.handed = False  # journaled and passed to the apply stage, which answers it

    def answer(self, outcome: Outcome) -> None:
        ticket = self.ticket
        with ticket.lock:
            if self.outcome is not None:
                return
            self.outcome = outcome
            ticket.left -= 1
            if ticket.left == 0:
                ticket.done.set()


class _Journaled:
    """A round the journal stage has fsynced, for the apply stage."""

    __slots__ = ("entries", "jobs", "works")

    def __init__(self, entries: list[_Entry], jobs: list[int], works: list[Work]) -> None:
        self.entries = entries
        self.jobs = jobs
        self.works = works


class Pipeline:
    """Batches concurrent writes through journal → apply; see the module doc."""

    def __init__(self, applier: Applier, *, sync: bool = True) -> None:
        self.applier = applier
        self.journal = applier.journal
        self.sync = sync
        self.batches = 0  # batches taken, and the writes in them: for benchmarks and tests
        self.writes = 0
        self._inbox: list[_Entry] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._to_apply: queue.Queue[_Journaled | None] = queue.Queue()
        self._applying = 0  # rounds journaled and not yet applied
        self._applied = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._journaling = False  # the journal stage is working on a batch
        self._inline = False  # a lone writer is carrying its writes through (`_run_inline`)

    def submit(self, works: Sequence[Work], sync: bool | None = None) -> list[Outcome]:
        """Write `works` (in this order) with whatever else is waiting; their outcomes.
        `sync` (default: the pipeline's) says whether they are applied before the
        answer or answered once journaled (`queued`) and applied in the background."""
        if not works:
            return []
        ticket = _Ticket(len(works))
        sync = self.sync if sync is None else sync
        mine = [_Entry(work, ticket, sync) for work in works]
        with self._lock:
            if self._closed:
                raise InvalidRequest("this graph has been closed")
            if not self._threads:
                self._start()
            alone = not (self._inbox or self._journaling or self._inline or self._applying)
            if alone:
                self._inline = True
            else:
                self._inbox.extend(mine)
                self._arrived.notify()
        if alone:
            self._run_inline(mine)
        ticket.done.wait()
        return [entry.outcome for entry in mine]  # type: ignore[misc]

    def _run_inline(self, entries: list[_Entry]) -> None:
        """A pipeline with nothing in it: the writer carries its own writes through both
        stages (no thread hand-offs: a lone write costs one fsync plus one apply). Writes
        arriving meanwhile wait in the inbox for the stage threads."""
        try:
            self._run_batch(entries, inline=True)
        finally:
            with self._lock:
                self._inline = False
                if self._inbox or self._closed:  # else waking the journal stage is wasted
                    self._arrived.notify()

    def close(self) -> None:
        """Finish what has entered, then stop the stage threads."""
        with self._lock:
            self._closed = True
            self._arrived.notify()
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join()

    def _start(self) -> None:
        self._threads = [
            threading.Thread(target=self._journal_stage, name="assocdb-journal", daemon=True),
            threading.Thread(target=self._apply_stage, name="assocdb-apply", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # -- the journal stage --------------------------------------------------------------

    def _journal_stage(self) -> None:
        while True:
            with self._lock:
                while (not self._inbox or self._inline) and not self._closed:
                    self._arrived.wait()
                while self._inline:  # closing: let the inline writer finish first
                    self._arrived.wait()
                if not self._inbox:  # closed, and everything entered has gone through
                    self._to_apply.put(None)
                    return
                batch, self._inbox = self._inbox, []
                self._journaling = True
            try:
                self._run_batch(batch, inline=False)
            finally:
                with self._lock:
                    self._journaling = False

    def _run_batch(self, batch: list[_Entry], inline: bool) -> None:
        """Resolve and journal the batch round by round; apply each round here (inline)
        or hand it to the apply stage."""
        self.batches += 1
        self.writes += len(batch)
        rest = batch
        try:
            while rest:
                this_round, rest = _rounds(rest)
                journaled = self._journal_round(this_round)
                if journaled is None:
                    continue
                if inline:
                    self._apply([journaled])
                else:
                    for entry in journaled.entries:
                        entry.handed = True
                    with self._applied:
                        self._applying += 1
                    self._to_apply.put(journaled)
        except BaseException as exc:  # nothing may leave a writer without an answer
            log.exception("the write pipeline failed on a batch of %d writes", len(batch))
            for entry in batch:
                if not entry.handed:
                    entry.answer(exc)

    def _journal_round(self, entries: list[_Entry]) -> _Journaled | None:
        """Resolve and journal one round: what is left for the apply stage, if anything."""
        claims = self.applier.pending.claims
        try:
            works = self._resolve(entries)
        except BaseException:  # nothing of the round is journaled: its unique keys are free
            claims.release(entries)
            raise
        live = [(e, w) for e, w in zip(entries, works, strict=True) if w is not None]
        if not live:
            return None
        try:
            jobs = self.journal.append_many([encode(work) for _, work in live])
        except BaseException as exc:  # not journaled: not acknowledged
            claims.release(entries)
            for entry, _ in live:
                entry.answer(exc)
            return None
        self.applier.pending.add_many(jobs, [work.keys for _, work in live])
        for job, (entry, _) in zip(jobs, live, strict=True):
            claims.bind(entry, job)  # released when the job is applied
        applying = []
        for job, (entry, work) in zip(jobs, live, strict=True):
            if entry.sync:
                applying.append((job, entry, work))
            else:
                self.applier.enqueue(job, work)
                entry.answer("queued")
        if not applying:
            return None
        return _Journaled(
            [e for _, e, _ in applying], [j for j, _, _ in applying], [w for _, _, w in applying]
        )

    def _resolve(self, entries: list[_Entry]) -> list[Work | None]:
        """Each entry's work as it is journaled: concrete rows when the stored rows it
        depends on could be read, else the operation itself; None if it was refused.

        Index entries are made in the round's order, each entry the owner of its
        write's unique claims: a write sees the keys the writes before it take or
        free, as if they had been applied one by one."""
        stored = self._read_current(entries)
        works: list[Work | None] = []
        for number, entry in enumerate(entries):
            work = entry.work
            works.append(work)
            old = None
            try:
                if isinstance(work, Rows):
                    rows = work
                elif not work.needs_current:
                    rows = resolve(work, Stored())
                elif number in stored:
                    old = stored[number].row
                    rows = resolve(work, stored[number])
                else:
                    continue  # journaled unresolved, resolved by the applier in journal order
                works[number] = self._with_entries(old, rows, entry)
            except Exception as exc:  # refused: only this write fails
                if not is_rejection(exc):
                    raise
                if entry.sync or isinstance(work, Rows):  # refused before it is acknowledged
                    entry.answer(exc)
                    works[number] = None
                # Else acknowledged all the same (`queued`): the applier resolves it
                # again and parks it as a bad job with this error.
        return works

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
        pending = self.applier.pending
        blocked = pending.which_blocked([reads_of(op) for _, op in reads])
        if any(blocked):
            self._wait_applied()  # then only writes in the error queue are pending
            blocked = pending.which_blocked([reads_of(op) for _, op in reads])
            reads = [read for read, no in zip(reads, blocked, strict=True) if not no]
        stored = self.applier.read_current_many([op for _, op in reads])
        return {
            number: current
            for (number, _), current in zip(reads, stored, strict=True)
            if not isinstance(current, AssocdbError)  # else resolved when its shard answers
        }

    def _with_entries(self, old: object, rows: Rows, owner: _Entry) -> Rows:
        entries = self.applier.entries
        return rows if entries is None or not rows.objects else entries(old, rows, owner)

    def _wait_applied(self) -> None:
        """Wait until the apply stage has applied every round journaled so far."""
        with self._applied:
            while self._applying:
                self._applied.wait()

    # -- the apply stage ----------------------------------------------------------------

    def _apply_stage(self) -> None:
        while (first := self._to_apply.get()) is not None:
            rounds = [first]
            stop = False
            while True:
                try:
                    more = self._to_apply.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                rounds.append(more)
            try:
                self._apply(rounds)
            except BaseException as exc:  # the journal holds them: replayed on the next open
                log.exception("applying %d journaled rounds failed", len(rounds))
                for journaled in rounds:
                    for entry in journaled.entries:
                        if entry.outcome is None:
                            entry.answer(exc)
            finally:
                with self._applied:
                    self._applying -= len(rounds)
                    self._applied.notify_all()
            if stop:
                return

    def _apply(self, rounds: list[_Journaled]) -> None:
        """Apply journaled rounds together: every concrete job in one `run_batch` (the
        rounds were resolved in order, each after the rows it read were applied), then
        the unresolved ones one by one, in journal order."""
        applier = self.applier
        concrete = [
            (job, work)
            for journaled in rounds
            for job, work in zip(journaled.jobs, journaled.works, strict=True)
            if isinstance(work, Rows)
        ]
        applied = dict(zip([job for job, _ in concrete], applier.run_batch(concrete), strict=True))
        for journaled in rounds:
            for job, work, entry in zip(
                journaled.jobs, journaled.works, journaled.entries, strict=True
            ):
                ok = applied[job] if isinstance(work, Rows) else applier.run(job, work)
                entry.answer("applied" if ok else "queued")
        if applier.unfenced() >= FENCE_JOBS:
            applier.fence()


def _rounds(batch: list[_Entry]) -> tuple[list[_Entry], list[_Entry]]:
    """The batch's first round, and the rest: an operation that reads a row (or a
    node state) written by an earlier entry of the round waits for the next round,
    and so does every entry after it."""
    written: set[Key] = set()
    nodes: set[tuple[int, int]] = set()
    for number, entry in enumerate(batch):
        work = entry.work
        if isinstance(work, Rows):
            written.update(work.keys)
            nodes.update((row[0], row[1]) for row in work.nodes)
            continue
        keys = work.keys
        if work.needs_current and (
            any(key in written for key in keys) or any(lst in nodes for lst in work.node_lists)
        ):
            return batch[:number], batch[number:]
        written.update(keys)
    return batch, []
