"""A cascading deletion (Facebook's DELF), as plain data: the job, its chunks, its report.

`obj_delete(id, cascade=True)` tombstones the object at once and leaves a
`CascadeJob` in the graph's meta; a runner (`api.deletions`) works through it
one bounded step at a time. A step is planned from what is stored, written
down as a `Chunk` (what it removes, with everything needed to put it back),
applied, and only then does the job move past it (`advance`). A crash after
the chunk is written redoes that chunk, whatever the store holds by then, so
the record of what a deletion removed is never lost and nothing is removed
without being recorded.

The walk: for each object in `pending` (the root first), its object row is
recorded and tombstoned, then every list `(object, type)` of every type is
paged in id2 order (a step walks past empty lists to the next page of edges,
so they cost a probe each, not a step); each live edge is removed with its mirrored row (both
directions, counts exact), a *deep* type's target joins `pending`, and a
*refcount* type's target joins it once no live deep or refcount edge points
to it (counted on the target, through the types' inverses). When a pass over
the lists found edges, another pass follows, so that an edge written to the
object while the cascade ran is removed too; the object is done after a pass
that finds none.
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
    pending: list[int] = []  # objects to delete, the current one first
    seen: list[int] = []  # every object that ever joined pending
    phase: Phase = "object"
    list_index: int = 0  # the current type, by position in the schema's types
    after: int | None = None  # the last id2 done in the current list
    found: bool = False  # the current pass over the lists removed something
    objects: dict[int, int] = {}  # otype id -> objects removed
    edges: dict[int, int] = {}  # atype id -> edges removed
    home: int = 0  # entries cleared from deleted objects' own home timelines


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


def advance(job: CascadeJob, chunk: Chunk, orphans: list[int]) -> CascadeJob:
    """The job after `chunk` was applied; `orphans` are its refcount targets left
    with no deep or refcount edge."""
    seen = set(job.seen)
    pending = list(job.pending)
    for target in [*chunk.deep, *orphans]:
        if target not in seen:
            seen.add(target)
            pending.append(target)
    objects, edges = dict(job.objects), dict(job.edges)
    for row in chunk.objects:
        objects[row.otype] = objects.get(row.otype, 0) + 1
    for edge, _ in chunk.edges:
        edges[edge.atype] = edges.get(edge.atype, 0) + 1
    return msgspec.structs.replace(
        job,
        chunks=job.chunks + 1,
        pending=pending,
        seen=sorted(seen),
        phase="edges",
        list_index=chunk.list_index,
        after=chunk.after,
        found=(job.found and not chunk.fresh) or bool(chunk.edges),
        objects=objects,
        edges=edges,
        home=job.home + len(chunk.home),
    )


def next_list(job: CascadeJob, types: int) -> CascadeJob | None:
    """The job moved past its current list: the next list, another pass, the next
    object, or None when every pending object is done."""
    if job.list_index + 1 < types:
        return msgspec.structs.replace(job, list_index=job.list_index + 1, after=None)
    if job.found:  # edges were written meanwhile, maybe behind the cursor: look again
        return msgspec.structs.replace(job, list_index=0, after=None, found=False)
    rest = job.pending[1:]
    if not rest:
        return None
    return msgspec.structs.replace(
        job, pending=rest, phase="object", list_index=0, after=None, found=False
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
