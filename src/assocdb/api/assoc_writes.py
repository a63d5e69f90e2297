"""Association writes: add, delete, change type, and bulk load."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..core import json as _json
from ..core.errors import AssocdbError, InvalidRequest, NotFound
from ..core.ids import check_id, check_time, shard_of
from ..core.merge import EdgeTuple, State
from ..core.ops import MAX_ASSOC_DATA, EdgeWrite, TypeChange
from ..core.records import WriteResult
from ..writes.bulk import bulk_rows
from ..writes.workers import ShardWriter
from .engine import GraphCore

BULK_BATCH = 100_000  # rows per round of shard transactions
BULK_PARALLEL = 10_000  # edges read before a load starts worker processes


class AssocWritesAPI(GraphCore):
    """assoc_add, assoc_delete, assoc_change_type, bulk_load."""

    def assoc_add(
        self,
        id1: int,
        atype: str,
        id2: int,
        time: int | None = None,
        data: Any = None,
        updated_at: int | None = None,
    ) -> WriteResult:
        """Add the association `id1 -atype-> id2` (and its inverse, if the type has one).

        `time` orders the list (default: now, in ms). Re-adding an edge that
        exists (and is not removed) keeps its time and data unless new ones are
        given, so a re-follow does not jump to the top of the list.

        >>> g.assoc_add(1, "follows", 2)
        """
        id1, id2 = check_id(id1, "id1"), check_id(id2, "id2")
        kind = self._assoc_type(atype)
        if time is not None:
            check_time(time)
        raw = None if data is None else _json.encode(data, MAX_ASSOC_DATA, "association data")
        ua = self._stamp(updated_at)
        op = EdgeWrite(
            kind.id, self._inverse_id(kind), id1, id2, State.NORMAL, ua, time, raw, keep=True
        )
        return self._submit(op, ua)

    def assoc_delete(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> WriteResult:
        """Delete the association (and its inverse), leaving tombstones.

        Deleting an edge that does not exist still stores a tombstone, so that
        an older add arriving later cannot bring it back.
        """
        id1, id2 = check_id(id1, "id1"), check_id(id2, "id2")
        kind = self._assoc_type(atype)
        ua = self._stamp(updated_at)
        op = EdgeWrite(kind.id, self._inverse_id(kind), id1, id2, State.REMOVED, ua, time=0)
        return self._submit(op, ua)

    def assoc_archive(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> WriteResult:
        """Archive the association (and its inverse): hidden from lists, kept with its
        time and data; `assoc_add` restores it.

        >>> g.assoc_archive(1, "follows", 2)
        """
        return self._set_state(id1, atype, id2, State.ARCHIVED, updated_at)

    def assoc_negate(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> WriteResult:
        """Mark the association (and its inverse) negative: hidden from lists, but
        `assoc_contains` still finds it (FlockDB's negative edge); `assoc_add` restores it."""
        return self._set_state(id1, atype, id2, State.NEGATIVE, updated_at)

    def _set_state(
        self, id1: int, atype: str, id2: int, state: int, updated_at: int | None
    ) -> WriteResult:
        id1, id2 = check_id(id1, "id1"), check_id(id2, "id2")
        kind = self._assoc_type(atype)
        ua = self._stamp(updated_at)
        op = EdgeWrite(kind.id, self._inverse_id(kind), id1, id2, state, ua, keep=True)
        return self._submit(op, ua)

    def assoc_change_type(
        self, id1: int, atype: str, id2: int, new_atype: str, updated_at: int | None = None
    ) -> WriteResult:
        """Move an association to another type, keeping its time and data; NotFound if none.

        >>> g.assoc_change_type(1, "follows", 2, "blocks")
        """
        id1, id2 = check_id(id1, "id1"), check_id(id2, "id2")
        old, new = self._assoc_type(atype), self._assoc_type(new_atype)
        if old.id == new.id:
            raise InvalidRequest(f"the association is already of type {old.name!r}")
        ua = self._stamp(updated_at)
        op = TypeChange(old.id, self._inverse_id(old), new.id, self._inverse_id(new), id1, id2, ua)
        try:
            return self._submit(op, ua)
        except NotFound:  # the pure rule knows type ids; say the names
            raise NotFound(
                f"no association {id1} -> {id2} of type {old.name!r}", id1=id1, id2=id2
            ) from None

    def bulk_load(
        self,
        edges: Iterable[Sequence[Any]],
        *,
        workers: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Load many edges fast, straight into the shards; return how many were read.

        Each edge is `(id1, atype, id2)`, optionally followed by `time` and
        `data`. Inverse rows and counts are written as for `assoc_add`, under
        the same merge rule, but not through the journal: a load is its own
        record. An edge without a time gets the load's start time (there is no
        read of the existing edge); with explicit times, loading twice changes
        nothing, so a load may be re-run after a crash.

        Edges are validated and written in rounds of 100,000 rows. A bad edge
        (or an error raised by the input iterator) stops the load: every edge
        before it is written first, and the InvalidRequest names the bad edge's
        position and how many edges were stored (`details["stored"]`), so
        the load can go on from there (with explicit times, loading the same
        edges again changes nothing). A load of more than 10,000 edges starts
        `workers` processes (default: one per CPU) that write shards in
        parallel.

        >>> g.bulk_load([(1, "friend", 2), (2, "friend", 3, 1700000000000)])
        """
        workers = os.cpu_count() or 1 if workers is None else workers
        if type(workers) is not int or workers < 1:
            raise InvalidRequest(f"workers must be a positive integer, got {workers!r}")
        if not isinstance(edges, Iterable) or isinstance(edges, (str, bytes, Mapping)):
            raise InvalidRequest(
                f"edges must be an iterable of (id1, atype, id2[, time[, data]]), got {edges!r:.80}"
            )
        ua = self._clock.now()
        shards = self._shards
        shard_cache: dict[int, int] = {}  # ids repeat: an edge list is mostly one id1
        batch: dict[int, list[EdgeTuple]] = {}
        rows = count = 0
        writer = ShardWriter(self._backend)
        try:
            stop = _StopAtBadEdge()
            for count, row in stop.rows(bulk_rows(edges, self._resolve_type, ua, MAX_ASSOC_DATA)):
                shard = shard_cache.get(row[0])
                if shard is None:
                    shard = shard_cache[row[0]] = shard_of(row[0], shards)
                batch.setdefault(shard, []).append(row)
                rows += 1
                if count == BULK_PARALLEL:  # big enough to be worth processes
                    writer.start_workers(min(workers, shards))
                if rows >= BULK_BATCH:
                    writer.write(batch)
                    batch, rows = {}, 0
                    if len(shard_cache) > 1_000_000:
                        shard_cache.clear()
                    if progress is not None:
                        progress(count)
            writer.write(batch)  # every edge before a bad one, too
            stop.raise_if_stopped()
        finally:
            writer.close()
            self._forget()  # rows were written around the cache
        if progress is not None:
            progress(count)
        return count

    def _resolve_type(self, name: object) -> tuple[int, int | None]:
        kind = self._assoc_type(name)
        return kind.id, self._inverse_id(kind)


class _StopAtBadEdge:
    """Ends a load's rows at a bad edge, to raise once the edges before it are stored."""

    def __init__(self) -> None:
        self.stored = 0  # input edges whose rows were all yielded
        self.error: AssocdbError | None = None

    def rows(self, rows: Iterator[tuple[int, EdgeTuple]]) -> Iterator[tuple[int, EdgeTuple]]:
        try:
            for position, row in rows:
                self.stored = position - 1  # the edge at `position` may have another row
                yield position, row
                self.stored = position
        except AssocdbError as exc:
            self.error = exc

    def raise_if_stopped(self) -> None:
        if self.error is None:
            return
        exc = self.error
        raise type(exc)(
            f"{exc.message}; the load stopped there: the {self.stored:,} edges before it were "
            "stored (fix it and load the rest, or everything again: with explicit times "
            "nothing stored changes)",
            **{**exc.details, "stored": self.stored},
        ) from None
