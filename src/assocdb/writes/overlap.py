"""Journaling a round while its shard transactions are prepared (issue 37).

A durable write waits for one fsync, the journal's; its shard transactions
need none of their own (shards sync lazily, at fences). Done one after the
other, a lone write cost the fsync *plus* its shard transactions. Here the
journal's commit (its INSERTs and fsynced COMMIT, which release the GIL)
runs on a helper thread while the writer's own thread opens and fills the
round's shard transactions (`Applier.prepare_batch`, `storage.prepared`);
the writer commits them only once the journal's commit returned:

* acknowledged still means journaled and fsynced: nothing is committed on a
  shard, nor answered, before the journal holds it;
* if the journal's commit fails, the prepared transactions are rolled back
  and the writes are refused as before: nothing applied that was not journaled;
* a process killed meanwhile leaves the shard transactions uncommitted (the
  engine discards them) and the journal with the round or without it; a
  replay applies what it holds.

Only rounds of concrete rows that are applied now (synced, or followed by
another round) overlap, on a local engine (`storage.prepared.can_prepare`);
others journal, then apply, as before.

A round of edge writes goes further (`journal_resolving`): its shard
transactions are opened *first*, each reading in one statement the stored
rows and node states the round's writes depend on (`storage.opened`); the
writes are resolved against those rows, journaled, and the transactions
filled meanwhile, merging against the rows already read. This replaces the
reads before journaling, one statement per shard and kind outside any
transaction, and the shard transactions' own second read of the same keys.
A shard that cannot be opened sends the round the usual way. Only rounds of
`RESOLVE_IN_SHARDS_FROM` writes or more: opening the shards cannot overlap
the journal's fsync (the journal needs the resolved rows), so a lone write,
whose shard work hides under the fsync, keeps the reads before journaling.
From two writes on it pays: 8 writers one write at a time (rounds of ~7) ran
+13-17% faster (7 of 9 A/B rounds on a tree of 1M edges, load 6-8) with 11%
less CPU per write, and a round of 100 1.2-1.5x (CPU per write -24%). (An
earlier measurement of the rounds of ~7, 0.8-0.9x, was taken while shards
checkpointed in their COMMITs and fences ran five times a second.)
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait

from ..core.ids import shard_of
from ..core.merge import EdgeKey
from ..core.ops import EdgeWrite, ListKey, Rows, Stored
from ..storage.prepared import can_prepare
from .applier import Applier, PreparedBatch, encode
from .shards import OpenedLeg

#: The fewest writes of a round resolved in its shard transactions (see the module doc).
RESOLVE_IN_SHARDS_FROM = 2


class Overlap:
    """The helper thread that commits the journal while the writer prepares shards."""

    def __init__(self, applier: Applier) -> None:
        self.applier = applier
        self.enabled = can_prepare(applier.backend)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def journal(
        self, bodies: Sequence[bytes], rows: Sequence[Rows]
    ) -> tuple[list[int], PreparedBatch]:
        """Journal `bodies` (the encoded `rows`) and meanwhile prepare the rows' shard
        transactions; the jobs' ids and the prepared batch to commit. Raises what the
        journal raised, with nothing prepared left open."""
        applier = self.applier
        pending = self._committer().submit(applier.journal.append_many, bodies)
        try:
            batch = applier.prepare_batch(rows)
        except BaseException:
            wait([pending])  # (an interrupt: journaled or not, not acknowledged)
            raise
        try:
            jobs = pending.result()
        except BaseException:
            applier.rollback_batch(batch)
            raise
        return jobs, batch

    def journal_resolving(
        self, ops: Sequence[EdgeWrite]
    ) -> tuple[list[Rows], list[int], PreparedBatch] | None:
        """Resolve `ops` in their opened shard transactions, journal them and meanwhile
        fill the transactions (see the module doc): their rows, the jobs' ids and the
        prepared batch to commit; None, with nothing done, if a shard could not be
        opened. Raises what the journal raised, with nothing left open."""
        applier = self.applier
        opened = self._open(ops)
        if opened is None:
            return None
        try:
            rows = [self._resolved(op, opened) for op in ops]
            bodies = [encode(work) for work in rows]
        except BaseException:
            applier.shards.close_opened(list(opened.values()))
            raise
        pending = self._committer().submit(applier.journal.append_many, bodies)
        try:
            batch = applier.fill_batch(rows, opened)
        except BaseException:
            wait([pending])  # (an interrupt: journaled or not, not acknowledged)
            raise
        try:
            jobs = pending.result()
        except BaseException:
            applier.rollback_batch(batch)
            raise
        return rows, jobs, batch

    def _open(self, ops: Sequence[EdgeWrite]) -> dict[int, OpenedLeg] | None:
        """Each shard the ops write, opened (in shard order) with what they read there."""
        n = self.applier.backend.shards
        keys: dict[int, list[EdgeKey]] = {}
        lists: dict[int, list[ListKey]] = {}
        for op in ops:
            for key in op.keys:
                keys.setdefault(shard_of(key[0], n), []).append(key)  # type: ignore[arg-type]
            for lst in op.node_lists:
                lists.setdefault(shard_of(lst[0], n), []).append(lst)
        writer = self.applier.shards
        opened: dict[int, OpenedLeg] = {}
        try:
            for shard in sorted(keys.keys() | lists.keys()):
                opened[shard] = writer.open_leg(shard, keys.get(shard, []), lists.get(shard, []))
        except Exception:  # a shard down, locked or cooling down: the usual way
            writer.close_opened(list(opened.values()))
            return None
        except BaseException:
            writer.close_opened(list(opened.values()))
            raise
        return opened

    def _resolved(self, op: EdgeWrite, opened: dict[int, OpenedLeg]) -> Rows:
        """`op`'s rows, resolved against what its opened shards read (as `CurrentRows`
        reads it: the row of its key if it needs it, its lists' strongest node state)."""
        if not op.needs_current:  # (a removal: resolved against nothing, as before)
            return self.applier.resolution(op, Stored(), None)
        n = self.applier.backend.shards
        row = None
        if op.needs_row:
            row = opened[shard_of(op.id1, n)].opened.current.get(op.key)
        state = 0
        for node, atype in op.node_lists:
            found = opened[shard_of(node, n)].opened.states.get((node, atype))
            if found is not None and found.state > state:
                state = found.state
        return self.applier.resolution(op, Stored(row, state), None)

    def _committer(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="assocdb-journal")
            return self._pool

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
