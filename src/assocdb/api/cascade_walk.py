"""One step of a cascading deletion: planning its chunk from what is stored, applying it.

`Deletions` (api/deletions.py) keeps the job and its chunks; this module only
reads the graph to plan the next `Chunk` (`core.deletion` explains the walk)
and writes a chunk's removals. Planning reads, never writes, so a crash before
the chunk is stored loses nothing; a chunk applied twice writes the same rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import msgspec

from ..core.deletion import (
    BATCH_OBJECTS,
    STEP_EDGES,
    CascadeJob,
    Chunk,
    new_pass,
    next_list,
    targets,
)
from ..core.errors import NotFound, Unavailable
from ..core.ids import shard_of
from ..core.merge import PLAIN_REMOVED as _REMOVED
from ..core.merge import EdgeRow, ObjRow, State
from ..core.ops import EdgeWrite, ObjectWrite, Operation
from ..core.schema import AssocType
from ..core.timeline_list import TimelineEntry, entry
from .engine import Engine
from .timelines import Timelines

LIVE = [State.NORMAL, State.NEGATIVE, State.ARCHIVED]

#: (object, type, the id2s of its live edges found) for one list's page
_Found = tuple[int, AssocType, list[int]]


class CascadeWalk:
    """plan(job) -> the next chunk; apply(chunk); owners_left(target)."""

    def __init__(
        self, engine: Engine, timelines: Timelines, chunk: Callable[[int, int], Chunk]
    ) -> None:
        self._engine = engine
        self._backend = engine.backend
        self._timelines = timelines
        self._chunk = chunk  # (deletion, k) -> its stored chunk k

    # -- planning -------------------------------------------------------------------

    def plan(self, job: CascadeJob) -> Chunk | None:
        """The job's next chunk, or None when every object it reached is done."""
        ua = self._engine.clock.now()
        if job.phase == "object":  # the root's batch (or a job stored before batches)
            return self._objects(ua, job.batch, None, 0, fresh=False, new=False)
        types = self._engine.schema.assoc_types
        found: list[_Found] = []
        budget, fresh = STEP_EDGES, False
        while True:  # empty lists cost a probe each, not a step (a job rewrite) each
            if job.node_index >= len(job.batch):  # a pass over the batch ended
                if found:
                    break  # applied before the next pass looks again
                if not job.found:
                    return self._next_batch(ua, job)
                job, fresh = new_pass(job), True
                continue
            node = job.batch[job.node_index]
            kind = types[job.list_index] if job.list_index < len(types) else None
            ids = [] if kind is None else self._page(node, kind, job.after, budget)
            if kind is not None and ids:
                found.append((node, kind, ids))
                budget -= len(ids)
                if budget == 0:  # maybe more in this list: the next step goes on from here
                    job = msgspec.structs.replace(job, after=ids[-1])
                    break
            job = next_list(job, len(types))
        return self._edges(ua, job, found, fresh)

    def _page(self, node: int, kind: AssocType, after: int | None, limit: int) -> list[int]:
        shard = shard_of(node, self._engine.shards)
        rows = self._backend.scan_id2(shard, node, kind.id, LIVE, after, True, limit)
        return [row[0] for row in rows]

    def _edges(self, ua: int, job: CascadeJob, found: list[_Found], fresh: bool) -> Chunk:
        edges: list[tuple[EdgeRow, EdgeRow | None]] = []
        deep: list[int] = []
        refcount: list[int] = []
        for node, kind, ids in found:
            shard = shard_of(node, self._engine.shards)
            rows = self._backend.edges(shard, node, kind.id, ids)
            rows = [row for row in rows if row.state != State.REMOVED]
            mirrored = self._mirrored(rows, self._engine.inverse_id(kind))
            edges.extend((row, mirrored.get(row.id2)) for row in rows)
            if kind.on_delete == "deep":
                deep.extend(row.id2 for row in rows)
            elif kind.on_delete == "refcount":
                refcount.extend(row.id2 for row in rows)
        node = job.batch[min(job.node_index, len(job.batch) - 1)]
        return Chunk(
            ua,
            node,
            "edges",
            job.list_index,
            job.after,
            [],
            edges,
            deep,
            refcount,
            fresh=fresh,
            node_index=job.node_index,
        )

    def _next_batch(self, ua: int, job: CascadeJob) -> Chunk | None:
        """The chunk that takes and records the next batch of objects, or None. First,
        the one clearing what reached the batch's home timelines since its objects'
        step (`_late_homes`)."""
        late = self._late_homes(ua, job)
        if late is not None:
            return late
        batch, queue, taken = self._take(job)
        if not batch:
            return None
        return self._objects(ua, batch, queue, taken, fresh=True, new=True)

    def _late_homes(self, ua: int, job: CascadeJob) -> Chunk | None:
        """The chunk clearing live entries in the home timelines of the batch's objects,
        now that its walk is done, or None if there are none. A fan-out that read its
        followers before the walk removed their follows edges delivers after the
        objects' step cleared those homes; once the edges are gone, only a delivery
        whose page was read before and is applied after this (one in the error queue)
        can still land."""
        if not job.batch or self._timelines.timeline_config(fresh=True) is None:
            return None
        homes = [(id, held) for id in job.batch if (held := self._timelines.home_held(id))]
        if not homes:
            return None
        return Chunk(
            ua,
            job.batch[0],
            "edges",
            job.list_index,
            job.after,
            homes=homes,
            node_index=job.node_index,
        )

    def _take(self, job: CascadeJob) -> tuple[list[int], tuple[int, int], int]:
        """Up to BATCH_OBJECTS objects from the queue (the job's `pending` first, then
        the applied chunks' targets; a refcount target only with no owner left), the
        queue's place after them, and how many came from `pending`."""
        batch: list[int] = []
        chosen: set[int] = set()

        def take(target: int, refcount: bool) -> None:
            if target in chosen or (refcount and self.owners_left(target)):
                return
            chosen.add(target)
            batch.append(target)

        taken = min(len(job.pending), BATCH_OBJECTS)
        for target in job.pending[:taken]:
            take(target, False)
        k, at = job.queue
        while len(batch) < BATCH_OBJECTS and k < job.chunks:
            queued = targets(self._chunk(job.id, k))
            while len(batch) < BATCH_OBJECTS and at < len(queued):
                take(*queued[at])
                at += 1
            if at >= len(queued):
                k, at = k + 1, 0
        return batch, (k, at), taken

    def _objects(
        self,
        ua: int,
        batch: list[int],
        queue: tuple[int, int] | None,
        taken: int,
        fresh: bool,
        new: bool,
    ) -> Chunk:
        """The chunk that records and tombstones `batch`'s live objects and clears their
        home timelines; the walk then starts on their lists."""
        by_shard: dict[int, list[int]] = {}
        for id in batch:
            by_shard.setdefault(shard_of(id, self._engine.shards), []).append(id)
        objects: list[ObjRow] = []
        for shard, ids in sorted(by_shard.items()):
            objects += [r for r in self._backend.objects(shard, ids) if r.state != State.REMOVED]
        homes: list[tuple[int, list[TimelineEntry]]] = []
        if self._timelines.timeline_config(fresh=True) is not None:
            homes = [(id, held) for id in batch if (held := self._timelines.home_held(id))]
        return Chunk(
            ua,
            batch[0],
            "edges",
            0,
            None,
            objects=objects,
            fresh=fresh,
            batch=batch if new else None,
            queue=queue,
            taken=taken,
            homes=homes,
        )

    def _mirrored(self, rows: list[EdgeRow], inverse: int | None) -> dict[int, EdgeRow]:
        if inverse is None:
            return {}
        by_shard: dict[int, list[tuple[int, int, int]]] = {}
        for row in rows:
            key = (row.id2, inverse, row.id1)
            by_shard.setdefault(shard_of(row.id2, self._engine.shards), []).append(key)
        found: dict[int, EdgeRow] = {}
        for shard, keys in sorted(by_shard.items()):
            for row in self._backend.edges_at(shard, keys):
                found[row.id1] = row
        return found

    # -- applying -------------------------------------------------------------------

    def apply(self, chunk: Chunk) -> None:
        """Write the chunk's removals (applied before this returns)."""
        ua = chunk.updated_at
        writes: list[Operation] = [ObjectWrite(r.id, ua, state=_REMOVED) for r in chunk.objects]
        posts = self.posts_type()
        for row, _ in chunk.edges:
            if row.atype == posts:
                self._unpost(row.id1, row.id2)
            kind = self._engine.schema.assoc_by_id(row.atype)
            inverse = self._engine.inverse_id(kind)
            writes.append(EdgeWrite(row.atype, inverse, row.id1, row.id2, _REMOVED, ua))
        self._submit(writes, ua)
        homes = [(chunk.node, chunk.home)] if chunk.home else []
        for node, held in [*homes, *chunk.homes]:
            # tombstones that win over every entry it held (merged again on a redo)
            cleared = [entry(t, item, author, ua, deleted=True) for t, item, author, _ in held]
            self._timelines.home_merge(node, cleared)

    def owners_left(self, target: int) -> int:
        """How many live deep or refcount edges point to `target` (through inverses)."""
        schema = self._engine.schema
        shard = shard_of(target, self._engine.shards)
        total = 0
        for kind in schema.assoc_types:
            inverse = schema.inverse(kind)
            if kind.on_delete in ("deep", "refcount") and inverse is not None:
                counts = self._backend.counts(shard, target, inverse.id)
                total += sum(counts.get(state, 0) for state in LIVE)
        return total

    def _submit(self, writes: list[Operation], ua: int) -> None:
        """Apply the step's removals in the pipeline's low lane: other clients' writes
        go first, between its slices (a step's 500 in one batch held them up to ~10x
        their quiet p99; merged with them in batches of 100, x9 on their p50)."""
        batch = [(op, ua) for op in writes]
        for result in self._engine.submit_many(batch, sync=True, low=True):
            if isinstance(result, NotFound):
                continue  # an object deleted meanwhile with no row left: nothing to do
            if isinstance(result, BaseException):
                raise result
            if result.status != "applied":
                raise Unavailable("a removal was queued (a shard is down); will retry")

    # -- timelines ------------------------------------------------------------------

    def posts_type(self) -> int | None:
        """The id of the timelines' posts type, if timelines are defined."""
        config = self._timelines.timeline_config()
        if config is None:
            return None
        kind = self._engine.schema.assoc_by_name(config.posts)
        return None if kind is None else kind.id

    def _unpost(self, author: int, item: int) -> None:
        with contextlib.suppress(NotFound):  # removed by an earlier try of this chunk
            self._timelines.post_delete(author, item)
