"""The write pipeline: writes that enter together go through together.

Every write of a Graph enters here, from any thread (`Pipeline.submit`) or
many at once (`Graph.write_many`, the server's batches). Writes waiting to
enter are taken as one *batch* by whichever caller comes first (the leader;
the others wait for their answers), and the batch goes through three stages:

1. **resolve**: the stored rows the batch's operations depend on are read
   once per shard (`Applier.read_current_many`) and each operation becomes
   concrete rows with the pure rule (`core.ops.resolve`); a rejected one
   (NotFound, Conflict) is answered with its error and goes no further;
2. **journal**: every job of the batch is appended in one transaction and
   **one fsync** (`Journal.append_many`): from here on, each is acknowledged;
3. **apply**: the legs of all jobs are grouped by shard and each touched shard
   is written in **one transaction** (`Applier.run_batch`); a shard that
   fails turns only its own legs into queued retries.

So the cost of a write falls as load rises: with one writer a batch is one
write (one fsync plus one apply, as before), with many the fsync and each
shard's transaction are shared.

Per-key order is kept: batches go through one at a time, in the order their
writes entered, and within a batch an operation that reads a row an earlier
operation of the same batch writes (a re-add keeping the edge's time, an
object patch, an edge into a list whose node state changes) waits for the
next *round*, after that write is applied. An operation whose row has an
earlier write still queued (the error queue, or a background apply) is
journaled unresolved and resolved by the applier in journal order, as before
(`applier.Pending`).

With `sync=False` a batch is acknowledged after stage 2 and applied by the
background threads, which take whatever is queued as one batch too.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Literal

from ..core.errors import AssocdbError
from ..core.ops import Key, Operation, Rows, Stored, is_rejection, resolve
from .applier import Applier, encode

Work = Operation | Rows
#: What a write came to: applied, queued (journaled, not yet applied), or why it was refused.
Outcome = Literal["applied", "queued"] | BaseException


class _Entry:
    __slots__ = ("outcome", "work")

    def __init__(self, work: Work) -> None:
        self.work = work
        self.outcome: Outcome | None = None


class Pipeline:
    """Batches concurrent writes through resolve → journal → apply; see the module doc."""

    def __init__(self, applier: Applier, *, sync: bool = True) -> None:
        self.applier = applier
        self.journal = applier.journal
        self.sync = sync
        self.batches = 0  # batches taken, for the benchmark and tests
        self._inbox: list[_Entry] = []
        self._cond = threading.Condition()
        self._leading = False

    def submit(self, works: Sequence[Work]) -> list[Outcome]:
        """Write `works` (in this order) with whatever else is waiting; their outcomes."""
        mine = [_Entry(work) for work in works]
        with self._cond:
            self._inbox.extend(mine)
            while mine[-1].outcome is None:
                if self._leading:
                    self._cond.wait()
                    continue
                self._leading = True
                batch, self._inbox = self._inbox, []
                self._cond.release()
                try:
                    self._run(batch)
                finally:
                    self._cond.acquire()
                    self._leading = False
                    self._cond.notify_all()
        return [entry.outcome for entry in mine]  # type: ignore[misc]

    # -- one batch ----------------------------------------------------------------------

    def _run(self, batch: list[_Entry]) -> None:
        try:
            while batch:
                this_round, batch = _rounds(batch)
                self._round(this_round)
        except BaseException as exc:  # nothing may leave a waiter without an answer
            for entry in batch:
                entry.outcome = exc
            raise

    def _round(self, entries: list[_Entry]) -> None:
        works = self._resolve(entries)
        live = [
            (entry, work) for entry, work in zip(entries, works, strict=True) if work is not None
        ]
        if not live:
            return
        try:
            jobs = self.journal.append_many([encode(work) for _, work in live])
        except BaseException as exc:  # not journaled: not acknowledged
            for entry, _ in live:
                entry.outcome = exc
            return
        pending = self.applier.pending
        for job, (_, work) in zip(jobs, live, strict=True):
            pending.add(job, work.keys)
        if not self.sync:
            for job, (entry, work) in zip(jobs, live, strict=True):
                self.applier.enqueue(job, work)
                entry.outcome = "queued"
            return
        concrete = [
            (job, work) for job, (_, work) in zip(jobs, live, strict=True) if isinstance(work, Rows)
        ]
        applied = dict(
            zip((job for job, _ in concrete), self.applier.run_batch(concrete), strict=True)
        )
        for job, (entry, work) in zip(jobs, live, strict=True):
            ok = applied[job] if isinstance(work, Rows) else self.applier.run(job, work)
            entry.outcome = "applied" if ok else "queued"

    def _resolve(self, entries: list[_Entry]) -> list[Work | None]:
        """Each entry's work as it is journaled: concrete rows when the stored rows it
        depends on could be read, else the operation itself; None if it was refused."""
        applier = self.applier
        works: list[Work | None] = []
        reads: list[tuple[int, Operation]] = []
        for number, entry in enumerate(entries):
            work = entry.work
            if isinstance(work, Rows) or not work.needs_current:
                works.append(
                    self._entries(None, work if isinstance(work, Rows) else resolve(work, Stored()))
                )
                continue
            works.append(work)
            if not applier.pending.blocked(work.keys):
                reads.append((number, work))
        if not reads:
            return works
        stored = applier.read_current_many([op for _, op in reads])
        for (number, op), current in zip(reads, stored, strict=True):
            if isinstance(current, AssocdbError):
                continue  # journaled unresolved, resolved when its shard answers again
            try:
                works[number] = self._entries(current.row, resolve(op, current))
            except Exception as exc:
                if not is_rejection(exc):
                    raise
                entries[number].outcome = exc
                works[number] = None
        return works

    def _entries(self, old: object, rows: Rows) -> Rows:
        entries = self.applier.entries
        return rows if entries is None or not rows.objects else entries(old, rows)


def _rounds(batch: list[_Entry]) -> tuple[list[_Entry], list[_Entry]]:
    """The batch's first round, and the rest: an operation that reads a row (or a
    node state) written by an earlier entry of the round waits for the next round."""
    written: set[Key] = set()
    nodes: set[tuple[int, int]] = set()
    first: list[_Entry] = []
    rest: list[_Entry] = []
    for entry in batch:
        work = entry.work
        if rest:
            rest.append(entry)  # keep order: everything after a deferred entry waits too
            continue
        if isinstance(work, Rows):
            keys = work.keys
            touched_nodes = [(row[0], row[1]) for row in work.nodes]
            reads_row = False
        else:
            keys = work.keys
            touched_nodes = []
            reads_row = work.needs_current
        if reads_row and (
            any(key in written for key in keys) or any(lst in nodes for lst in work.node_lists)  # type: ignore[union-attr]
        ):
            rest.append(entry)
            continue
        first.append(entry)
        written.update(keys)
        nodes.update(touched_nodes)
    return first, rest
