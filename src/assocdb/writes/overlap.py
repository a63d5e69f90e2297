"""Journaling a round while its shard transactions are prepared (issue 37).

A durable write waits for one fsync, the journal's; its shard transactions
need none of their own (shards sync lazily, at fences). Done one after the
other, a lone write cost the fsync *plus* its shard transactions. Here the
writer's own thread runs the journal's commit (`Journal.append_many`: a
round's jobs are one INSERT, its own synced transaction, one driver call that
releases the GIL for the whole fsync) while a helper thread opens and fills the
round's shard transactions (`Applier.prepare_batch`, `storage.prepared`); the
writer commits them only once the journal's commit returned:

* acknowledged still means journaled and fsynced: nothing is committed on a
  shard, nor answered, before the journal holds it;
* if the journal's commit fails, the prepared transactions are rolled back
  and the writes are refused as before: nothing applied that was not journaled;
* a process killed meanwhile leaves the shard transactions uncommitted (the
  engine discards them) and the journal with the round or without it; a
  replay applies what it holds.

The journal on the writer's thread and the shards on the helper's, not the
other way round: the helper's wake-up (~40 µs on a VM's idle core) then falls
inside the fsync instead of before it, and the writer finds the fill done
when the fsync returns (another ~30 µs wake-up less); and the journal's
commit, one driver call, takes the GIL back once instead of at each of its
three statements, each of which had waited for the filling thread to let go
of it (`bench.write_steps`, a lone `assoc_add` on a tree of 200,000 edges:
667 -> 405 µs, against a bare same-work write's ~240).

Only rounds of concrete rows that are applied now (synced, or followed by
another round) overlap, on a local engine (`storage.prepared.can_prepare`);
others journal, then apply, as before.

A round of edge writes goes further (`journal_resolving`): its shard
transactions are opened *first*, each reading in one statement the stored
rows and node states the round's writes depend on (`storage.opened`); the
writes are resolved against those rows, journaled, and the transactions
filled meanwhile (on the helper thread, through the sessions opened on the
writer's), merging against the rows already read. This replaces the
reads before journaling, one statement per shard and kind outside any
transaction, and the shard transactions' own second read of the same keys.
A shard that cannot be opened sends the round the usual way. Every round
of edge writes goes this way (`RESOLVE_IN_SHARDS_FROM`), a lone write too:
opening its shards cannot overlap the journal's fsync (the journal needs the
resolved rows), but it replaces the reads before journaling, and the
transactions' second read of the same keys, so a lone write runs 5 shard
statements per shard instead of 7 (the opened read also takes the change
feed's row, `storage.opened`).

The helper thread is a `_Helper`: one thread, a queue and a lock per call,
without a `ThreadPoolExecutor`'s futures, conditions and semaphores.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from queue import SimpleQueue
from typing import Any, Generic, TypeVar

from ..core.ids import shard_of
from ..core.merge import EdgeKey
from ..core.ops import EdgeWrite, ListKey, Rows, Stored
from ..storage.prepared import can_prepare
from .applier import Applier, PreparedBatch, encode
from .shards import OpenedLeg

#: The fewest writes of a round resolved in its shard transactions (see the module doc).
RESOLVE_IN_SHARDS_FROM = 1
_NOTHING = Stored()

T = TypeVar("T")
A = TypeVar("A")


class _Call(Generic[A, T]):
    """One call run on the helper's thread: `wait` for its result (or its error)."""

    __slots__ = ("_done", "arg", "error", "fn", "result")

    def __init__(self, fn: Callable[[A], T], arg: A) -> None:
        self.fn = fn
        self.arg = arg
        self.result: T | None = None
        self.error: BaseException | None = None
        self._done = threading.Lock()
        self._done.acquire()  # released by the helper's thread once the call returned

    def run(self) -> None:
        try:
            self.result = self.fn(self.arg)
        except BaseException as exc:
            self.error = exc
        finally:
            self._done.release()

    def join(self) -> None:
        """Wait for the call to return, whatever it returned or raised."""
        self._done.acquire()
        self._done.release()  # (a second wait returns at once)

    def wait(self) -> T:
        """The call's result, once it returned; raises what it raised."""
        self.join()
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


class _Helper:
    """A thread that runs one call at a time for the writer: a `ThreadPoolExecutor` of
    one thread without its futures, conditions and semaphores (a lone write hands
    its shards' fill over once per write: issue 37 measured the executor's
    bookkeeping at ~4% of a lone write's instructions)."""

    def __init__(self) -> None:
        self._calls: SimpleQueue[_Call[object, object] | None] = SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="assocdb-fill", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[A], T], arg: A) -> _Call[A, T]:
        call = _Call(fn, arg)
        self._calls.put(call)  # type: ignore[arg-type]
        return call

    def _run(self) -> None:
        calls = self._calls
        while (call := calls.get()) is not None:
            call.run()

    def shutdown(self) -> None:
        """Stop the thread once the calls submitted have run."""
        self._calls.put(None)
        self._thread.join()


class Overlap:
    """The helper thread that prepares a round's shards while the writer journals it."""

    def __init__(self, applier: Applier) -> None:
        self.applier = applier
        self.enabled = can_prepare(applier.backend)
        self._pool: _Helper | None = None
        self._lock = threading.Lock()

    def journal(
        self, bodies: Sequence[bytes], rows: Sequence[Rows]
    ) -> tuple[list[int], PreparedBatch]:
        """Journal `bodies` (the encoded `rows`) and meanwhile prepare the rows' shard
        transactions; the jobs' ids and the prepared batch to commit. Raises what the
        journal raised, with nothing prepared left open."""
        preparing = self._helper().submit(self.applier.prepare_batch, rows)
        return self._journaled(bodies, preparing), self._prepared(preparing)

    def journal_resolving(
        self, ops: Sequence[EdgeWrite]
    ) -> tuple[list[Rows], list[int], PreparedBatch] | None:
        """Resolve `ops` in their opened shard transactions, journal them and meanwhile
        fill the transactions (see the module doc): their rows, the jobs' ids and the
        prepared batch to commit; None, with nothing done, if a shard could not be
        opened. Raises what the journal raised, with nothing left open."""
        applier = self.applier
        where: dict[int, int] = {}  # node -> its shard, for the round
        opened = self._open(ops, where)
        if opened is None:
            return None
        try:
            rows = [self._resolved(op, opened, where) for op in ops]
            bodies = list(map(encode, rows))
        except BaseException:
            applier.shards.close_opened(list(opened.values()))
            raise
        filling = self._helper().submit(self._fill, (rows, opened, where))
        return rows, self._journaled(bodies, filling), self._prepared(filling)

    def _fill(
        self, args: tuple[Sequence[Rows], dict[int, OpenedLeg], dict[int, int]]
    ) -> PreparedBatch:
        """`Applier.fill_batch`, on the helper thread (`journal_resolving`)."""
        return self.applier.fill_batch(*args)

    def _journaled(
        self, bodies: Sequence[bytes], preparing: _Call[Any, PreparedBatch]
    ) -> list[int]:
        """Journal `bodies` on this thread while the helper prepares their shards: the
        jobs' ids; if the journal fails (or this is interrupted), what was prepared is
        rolled back and the error raised: nothing applied that was not journaled."""
        try:
            return self.applier.journal.append_many(bodies)
        except BaseException:
            self._undo(preparing)
            raise

    def _prepared(self, preparing: _Call[Any, PreparedBatch]) -> PreparedBatch:
        """The batch the helper prepared, once the journal holds it; raises the helper's
        error (the jobs journaled, not acknowledged: a replay applies them). Interrupted
        while waiting, it rolls the batch back (the journal's replay applies it)."""
        try:
            return preparing.wait()
        except BaseException:
            if preparing.error is None:  # (interrupted: not the preparing's own error)
                self._undo(preparing)
            raise

    def _undo(self, preparing: _Call[Any, PreparedBatch]) -> None:
        """Wait for the helper's preparing to end, and roll back what it prepared."""
        preparing.join()
        if preparing.error is None:
            self.applier.rollback_batch(preparing.result)  # type: ignore[arg-type]

    def _open(self, ops: Sequence[EdgeWrite], where: dict[int, int]) -> dict[int, OpenedLeg] | None:
        """Each shard the ops write, opened (in shard order) with what they read there;
        `where` learns each node's shard (an edge's nodes are its lists' too)."""
        n = self.applier.backend.shards
        keys: dict[int, list[EdgeKey]] = {}
        lists: dict[int, list[ListKey]] = {}
        for op in ops:
            for key in op.keys:
                shard = where.get(key[0])
                if shard is None:
                    shard = where[key[0]] = shard_of(key[0], n)
                keys.setdefault(shard, []).append(key)  # type: ignore[arg-type]
            for lst in op.node_lists:
                shard = where.get(lst[0])
                if shard is None:
                    shard = where[lst[0]] = shard_of(lst[0], n)
                lists.setdefault(shard, []).append(lst)
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

    def _resolved(self, op: EdgeWrite, opened: dict[int, OpenedLeg], where: dict[int, int]) -> Rows:
        """`op`'s rows, resolved against what its opened shards read (as `CurrentRows`
        reads it: the row of its key if it needs it, its lists' strongest node state);
        `where`: each node's shard, from `_open`."""
        # (`Rows` of `op.resolve`, as `Applier.resolution` makes them: an edge write has
        # no object rows, so no index entries and no stamp to observe; two calls less)
        if not op.needs_current:  # (a removal: resolved against nothing, as before)
            return Rows(edges=op.resolve(_NOTHING))
        row = None
        if op.needs_row:
            row = opened[where[op.id1]].opened.current.get(op.key)
        state = 0
        for node, atype in op.node_lists:
            found = opened[where[node]].opened.states.get((node, atype))
            if found is not None and found.state > state:
                state = found.state
        return Rows(edges=op.resolve(Stored(row, state)))

    def _helper(self) -> _Helper:
        pool = self._pool
        if pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = _Helper()
                pool = self._pool
        return pool

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown()
