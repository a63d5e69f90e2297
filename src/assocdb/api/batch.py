"""`Graph.batch()`: calls collected in a `with` block and run when it ends.

Writes are the point: each is checked when it is made (a bad id or an unknown
type raises at once, and nothing of the batch is written if the block does
not finish); when the block ends, the writes go through the pipeline
together: one journal fsync, one transaction per touched shard
(`writes.pipeline`). A write refused by the store (NotFound, Conflict) does
not stop the others: its `result()` raises. Reads (the same ones the
Client's batch sends in one request) may be mixed in and run in order: a read
sees the writes queued before it (the writes before a read are written
first, together).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from ..core.errors import InvalidRequest, NotFound
from ..core.merge import State
from ..core.ops import Operation, Rows, TypeChange
from ..core.records import Deferred, WriteResult
from .assoc_writes import AssocWrites
from .engine import Engine
from .objects import Objects

#: The reads a batch runs: the Graph's share of the Client batch's (`client.wire.BATCHABLE`).
READS = frozenset(
    {
        *("assoc_contains", "assoc_count", "assoc_edge", "assoc_get", "assoc_page"),
        *("assoc_range", "assoc_time_range", "home_timeline", "index_query"),
        *("index_status", "indexes", "node_state", "obj_get", "timeline_config"),
        "user_timeline",
    }
)
#: The writes a batch runs (the Client batch's `client.wire.BATCH_WRITES`).
WRITES = frozenset(
    {
        *("assoc_add", "assoc_delete", "assoc_archive", "assoc_negate", "assoc_change_type"),
        *("obj_add", "obj_update", "obj_delete"),
    }
)


class WriteBatch:
    """The write (and read) methods of a Graph, each returning a `Deferred` answer; see
    the module doc.

    >>> with g.batch() as b:
    ...     added = b.assoc_add(1, "follows", 2)
    ...     b.assoc_delete(1, "follows", 3)
    >>> added.result().status
    'applied'
    """

    def __init__(
        self,
        engine: Engine,
        assoc_writes: AssocWrites,
        objects: Objects,
        read: Callable[[str], Callable[..., Any]],
    ) -> None:
        self._engine = engine
        self._assoc = assoc_writes
        self._objects = objects
        self._read = read  # the Graph's read method of a name
        #: Writes `(op, updated_at, deferred, value)` and reads `(call, deferred)`, in order.
        self._calls: list[tuple[Any, ...]] = []
        self._ran = False

    def __getattr__(self, name: str) -> Callable[..., Deferred[Any]]:
        if name not in READS:
            raise AttributeError(f"a batch runs the Graph's reads and writes; {name!r} is neither")
        method = self._read(name)

        def queue(*args: Any, **kwargs: Any) -> Deferred[Any]:
            self._check_open()
            deferred: Deferred[Any] = Deferred(name)
            self._calls.append((lambda: method(*args, **kwargs), deferred))
            return deferred

        return queue

    def assoc_add(
        self,
        id1: int,
        atype: str,
        id2: int,
        time: int | None = None,
        data: Any = None,
        updated_at: int | None = None,
    ) -> Deferred[WriteResult]:
        return self._queue(
            "assoc_add", *self._assoc.add_op(id1, atype, id2, time, data, updated_at)
        )

    def assoc_delete(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> Deferred[WriteResult]:
        return self._queue("assoc_delete", *self._assoc.delete_op(id1, atype, id2, updated_at))

    def assoc_archive(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> Deferred[WriteResult]:
        op = self._assoc.state_op(id1, atype, id2, State.ARCHIVED, updated_at)
        return self._queue("assoc_archive", *op)

    def assoc_negate(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> Deferred[WriteResult]:
        op = self._assoc.state_op(id1, atype, id2, State.NEGATIVE, updated_at)
        return self._queue("assoc_negate", *op)

    def assoc_change_type(
        self, id1: int, atype: str, id2: int, new_atype: str, updated_at: int | None = None
    ) -> Deferred[WriteResult]:
        op = self._assoc.change_type_op(id1, atype, id2, new_atype, updated_at)
        return self._queue("assoc_change_type", *op)

    def obj_add(
        self,
        otype: str,
        data: dict[str, Any] | None = None,
        *,
        id: int | None = None,
        near: int | None = None,
        updated_at: int | None = None,
    ) -> Deferred[int]:
        op, ua, new_id = self._objects.add_op(otype, data, id=id, near=near, updated_at=updated_at)
        return self._queue("obj_add", op, ua, new_id)

    def obj_update(
        self, id: int, data: dict[str, Any], *, updated_at: int | None = None
    ) -> Deferred[WriteResult]:
        return self._queue("obj_update", *self._objects.update_op(id, data, updated_at=updated_at))

    def obj_delete(
        self, id: int, *, updated_at: int | None = None, cascade: bool = False
    ) -> Deferred[WriteResult]:
        if cascade:  # a job of its own, recorded for a restore: not one write among others
            raise InvalidRequest("obj_delete(cascade=True) cannot run in a batch; call it alone")
        return self._queue("obj_delete", *self._objects.delete_op(id, updated_at=updated_at))

    def _queue(
        self, method: str, op: Operation | Rows, updated_at: int, value: Any = None
    ) -> Deferred[Any]:
        self._check_open()
        deferred: Deferred[Any] = Deferred(method)
        self._calls.append((op, updated_at, deferred, value))
        return deferred

    def _check_open(self) -> None:
        if self._ran:
            raise RuntimeError("this batch has been written; start another with g.batch()")

    def run(self) -> None:
        """Run everything queued: the writes together, each read after the writes before
        it (the `with` block does this when it ends)."""
        self._ran = True
        calls, self._calls = self._calls, []
        writes: list[tuple[Any, ...]] = []
        for call in calls:
            if len(call) == 4:
                writes.append(call)
                continue
            self._write(writes)
            writes = []
            read, deferred = call
            try:
                deferred.settle(read())
            except Exception as exc:
                deferred.settle(error=exc)
        self._write(writes)

    def _write(self, writes: list[tuple[Any, ...]]) -> None:
        if not writes:
            return
        answers = self._engine.submit_many([(op, ua) for op, ua, _, _ in writes])
        for (op, _, deferred, value), answer in zip(writes, answers, strict=True):
            if isinstance(answer, NotFound) and isinstance(op, TypeChange):
                deferred.settle(error=self._assoc.not_found(op))
            elif isinstance(answer, BaseException):
                deferred.settle(error=answer)
            else:
                deferred.settle(answer if value is None else value)

    def __enter__(self) -> WriteBatch:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.run()
