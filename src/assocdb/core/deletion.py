"""A cascading deletion (Facebook's DELF), as plain data: the job, its chunks, its report.

`obj_delete(id, cascade=True)` tombstones the object at once and leaves a
`CascadeJob` in the graph's meta; a runner (`api.deletions`) works through it
one bounded step at a time. A step is planned from what is stored, written
down as a `Chunk` (what it removes, with everything needed to put it back),
applied, and only then does the job move past it (`advance`). A crash after
the chunk is written redoes that chunk, whatever the store holds by then, so
the record of what a deletion removed is never lost and nothing is removed
without being recorded.

The walk goes a *batch* of objects at a time (up to `BATCH_OBJECTS`, the root
alone first): one step records and tombstones the batch's objects (and clears
their home timelines), then every list `(object, type)` of every object of the
batch is paged in id2 order, one step taking up to `STEP_EDGES` edges across
lists and objects (empty lists cost a probe each, not a step); each live edge
is removed with its mirrored row (both directions, counts exact). When a pass
over the batch's lists found edges, another pass follows, so that an edge
written to an object while the cascade ran is removed too; the batch is done
after a pass that finds none.

The objects still to delete are not kept in the job: they are the *deep* and
*refcount* targets recorded in the applied chunks, in chunk order, and the job
keeps only its place in that queue (`queue`: a chunk and a position in its
targets), so the job stays small and is rewritten in constant time per step,
however many objects the cascade reaches. A refcount target joins a batch when
it is taken from the queue and no live deep or refcount edge points to it any
more (counted on the target, through the types' inverses); the choice is
recorded in the batch's chunk, so a redo makes the same batch. An object
reached twice costs a second walk of probes over its (empty) lists, never a
second record: its row is tombstoned already and left out.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .merge import EdgeRow, ObjRow
from .timeline_list import TimelineEntry

DeletionStatus = Literal["running", "done", "restored", "purged"]
Phase = Literal["object", "edges"]
#: Objects stay restorable this long after their deletion, unless configured otherwise.
DEFAULT_WINDOW = 14 * 24 * 3600.0
STEP_EDGES = 500  # edges removed per step: one step holds the job's lock this long
#: Objects deleted together: tombstoned in one step, their lists walked in few.
BATCH_OBJECTS = 100


class Deletion(msgspec.Struct, frozen=True):
    """One cascading deletion: what it removed, by type, and whether it can be undone.

    `objects` and `edges` count what was removed per type name (an edge counts
    once, with its mirrored row); `restorable_until` is a Unix time, after which
    `purge_deletions` erases the record (status "purged"). `home` counts the
    entries cleared from the deleted objects' own home timelines (a restore puts
    back those whose item is still posted).
    """

    id: int
    root: int
    status: DeletionStatus
    started_at: float
    finished_at: float | None
    restorable_until: float
    objects: dict[str, int]
    edges: dict[str, int]
    home: int = 0


class DanglingEdge(msgspec.Struct, frozen=True):
    """A live edge `id1 -atype-> id2` whose end `end` is `deleted` or `missing`."""

    id1: int
    atype: str
    id2: int
    end: int
    reason: Literal["deleted", "missing"]


class Orphan(msgspec.Struct, frozen=True):
    """A live object of an owned type that no live deep or refcount edge points to."""

    id: int
    otype: str


class DanglingReport(msgspec.Struct, frozen=True):
    """What `check --dangling` found (and, with `repaired`, fixed)."""

    edges: list[DanglingEdge]
    orphans: list[Orphan]
    repaired: bool


class CascadeJob(msgspec.Struct):
    """A deletion's state and where its walk stands (kept in meta, rewritten each step)."""

    id: int
    root: int
    status: DeletionStatus
    started_at: float
    window: float
    owner: str = ""
    finished_at: float | None = None
    chunks: int = 0  # chunks applied; chunk `chunks` may be written and not yet applied
    #: objects still to take before the chunks' targets (jobs stored before batches:
    #: see `current`); new jobs leave it empty
    pending: list[int] = []
    seen: list[int] = []  # unused since batches (kept so stored jobs still decode)
    phase: Phase = "object"  # "object": the batch's objects are not yet recorded
    list_index: int = 0  # the current type, by position in the schema's types
    after: int | None = None  # the last id2 done in the current list
    found: bool = False  # the current pass over the batch's lists removed something
    objects: dict[int, int] = {}  # otype id -> objects removed
    edges: dict[int, int] = {}  # atype id -> edges removed
    home: int = 0  # entries cleared from deleted objects' own home timelines
    batch: list[int] = []  # the objects being deleted now
    node_index: int = 0  # the batch's object whose lists are walked; len(batch): pass ended
    #: the next object to take: (chunk, position in its deep then refcount targets)
    queue: tuple[int, int] = (0, 0)
    #: the object was deleted again while the job ran: once the walk ends, the root's
    #: lists are walked once more (`rewalk`), taking what was written to it meanwhile
    again: bool = False


class Chunk(msgspec.Struct, array_like=True):
    """What one step removes (rows as they were) and where the walk stands after it."""

    updated_at: int
    node: int
    phase: Phase
    list_index: int
    after: int | None
    objects: list[ObjRow] = []
    #: (the edge's row, its mirrored row or None)
    edges: list[tuple[EdgeRow, EdgeRow | None]] = []
    deep: list[int] = []  # targets to delete
    refcount: list[int] = []  # targets to delete once nothing deep points to them
    #: the live entries of the node's own home timeline (fan-out on write), cleared
    home: list[TimelineEntry] = []
    #: the step moved past empty lists into a new pass over them: the job's `found`
    #: (of the pass before) is reset before this chunk's edges count
    fresh: bool = False
    node_index: int = 0  # the walk's place after the chunk: the batch's object
    #: a new batch taken by this chunk (None: the job's batch goes on)
    batch: list[int] | None = None
    queue: tuple[int, int] | None = None  # the queue's place after the new batch
    taken: int = 0  # how many of the job's `pending` the new batch took
    #: (object, the live entries of its home timeline) cleared, for a batch
    homes: list[tuple[int, list[TimelineEntry]]] = []


def advance(job: CascadeJob, chunk: Chunk) -> CascadeJob:
    """The job after `chunk` was applied."""
    objects, edges = dict(job.objects), dict(job.edges)
    for row in chunk.objects:
        objects[row.otype] = objects.get(row.otype, 0) + 1
    for edge, _ in chunk.edges:
        edges[edge.atype] = edges.get(edge.atype, 0) + 1
    batch, queue, pending = job.batch, job.queue, job.pending
    if chunk.batch is not None:
        batch, pending = chunk.batch, job.pending[chunk.taken :]
        queue = job.queue if chunk.queue is None else chunk.queue
    return msgspec.structs.replace(
        job,
        chunks=job.chunks + 1,
        pending=pending,
        batch=batch,
        queue=queue,
        phase="edges",
        node_index=chunk.node_index,
        list_index=chunk.list_index,
        after=chunk.after,
        found=(job.found and not chunk.fresh) or bool(chunk.edges),
        objects=objects,
        edges=edges,
        home=job.home + len(chunk.home) + sum(len(held) for _, held in chunk.homes),
    )


def next_list(job: CascadeJob, types: int) -> CascadeJob:
    """The job moved past its current list: the next list of the batch's object, or
    the next object's first list (`node_index == len(batch)`: the pass ended)."""
    if job.list_index + 1 < types:
        return msgspec.structs.replace(job, list_index=job.list_index + 1, after=None)
    return msgspec.structs.replace(job, node_index=job.node_index + 1, list_index=0, after=None)


def rewalk(job: CascadeJob, owner: str) -> CascadeJob:
    """The job walking its root's lists afresh, running (again), adding to its record:
    what it reached before may be live again; its queue starts after the chunks
    recorded so far."""
    return msgspec.structs.replace(
        job,
        status="running",
        finished_at=None,
        owner=owner,
        again=False,
        pending=[],
        batch=[job.root],
        queue=(job.chunks, 0),
        phase="object",
        node_index=0,
        list_index=0,
        after=None,
        found=False,
    )


def new_pass(job: CascadeJob) -> CascadeJob:
    """The job at the start of another pass over its batch's lists."""
    return msgspec.structs.replace(job, node_index=0, list_index=0, after=None, found=False)


def targets(chunk: Chunk) -> list[tuple[int, bool]]:
    """The objects `chunk` queued, in order: (id, whether it is a refcount target)."""
    return [(t, False) for t in chunk.deep] + [(t, True) for t in chunk.refcount]


def current(job: CascadeJob) -> CascadeJob:
    """A running job stored before batches (its queue in `pending`, the object being
    walked first) as a batched one: that object alone is the batch, the rest of
    `pending` is taken before the queue, which starts at the job's next chunk."""
    if job.status != "running" or job.batch or not job.pending:
        return job
    return msgspec.structs.replace(
        job, batch=job.pending[:1], pending=job.pending[1:], seen=[], queue=(job.chunks, 0)
    )


def public(job: CascadeJob, otype_name: dict[int, str], atype_name: dict[int, str]) -> Deletion:
    """The job as users see it: counts by type name."""
    return Deletion(
        job.id,
        job.root,
        job.status,
        job.started_at,
        job.finished_at,
        job.started_at + job.window,
        {otype_name.get(k, str(k)): n for k, n in sorted(job.objects.items())},
        {atype_name.get(k, str(k)): n for k, n in sorted(job.edges.items())},
        job.home,
    )
