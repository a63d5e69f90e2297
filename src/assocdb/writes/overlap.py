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
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait

from ..core.ops import Rows
from ..storage.prepared import can_prepare
from .applier import Applier, PreparedBatch


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
