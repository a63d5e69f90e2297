"""A whole-node operation's background job: one page at a time.

`Nodes` (api/nodes.py) writes a node state and journals a `NodeJob`; the
applier runs it here a page at a time, recording `at` after each page so a
restart resumes where it stopped. A page is the next NODE_JOB_PAGE edges of
the list in id2 order, every state at once (one index walk, and an edge
that changes state meanwhile is still met exactly once); the pure rule
(`core.ops.restamp_rows`) turns them into rows stamped with the operation's
time, which run as a journal job of their own. Redoing a page changes
nothing: its rows carry the job's stamp, so the merge keeps what is stored.

Which node operations wrote an edge is read from the node states of its two
lists when the page is read: this list's (on the node's shard) and the
mirrored list's of each id2 (on that id2's shard), one read per shard.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ..core.ids import shard_of
from ..core.merge import State
from ..core.ops import BY_ID2, NodeJob, Rows, restamp_rows
from ..storage.backend import Backend

_ALL_STATES: list[int] = [State.NORMAL, State.NEGATIVE, State.ARCHIVED, State.REMOVED]


def node_job_page(
    backend: Backend, work: NodeJob, size: int, run: Callable[[Rows], object]
) -> NodeJob | None:
    """Re-stamp the next page of the job's edges (`run` applies the rows); the job as
    it stands after, or None when done."""
    list_index, after = 0, None
    if work.at is not None:
        list_index = work.at[0]
        if work.at[1] == BY_ID2:
            after = work.at[3]  # else journaled by an older version: redo the list
    shard = shard_of(work.node, backend.shards)
    while list_index < len(work.lists):
        atype, other, _ = work.lists[list_index]
        ids = backend.scan_id2(shard, work.node, atype, _ALL_STATES, after, True, size)
        if ids:
            id2s = [row[0] for row in ids]
            page = backend.edges(shard, work.node, atype, id2s)
            marks = _marks(backend, work, list_index, shard, atype)
            rows = restamp_rows(work, atype, other, marks, page, _other_marks(backend, other, id2s))
            if rows.edges:
                run(rows)
            return msgspec.structs.replace(work, at=(list_index, BY_ID2, 0, id2s[-1]))
        list_index, after = list_index + 1, None
    return None


def _marks(backend: Backend, work: NodeJob, index: int, shard: int, atype: int) -> list[int]:
    """The stamps of this list's node operations an edge may carry: the one the job
    replaced, and the list's node state now (a newer operation's, or the job's own)."""
    marks = [] if work.marks is None else [work.marks[index]]
    now = backend.node_states(shard, [(work.node, atype)]).get((work.node, atype))
    if now is not None:
        marks.append(now.updated_at)
    return [mark for mark in marks if mark]


def _other_marks(backend: Backend, other: int | None, id2s: list[int]) -> dict[int, int]:
    """id2 -> the stamp of the node state of the mirrored list `(id2, other)`, if any."""
    if other is None:
        return {}
    by_shard: dict[int, list[tuple[int, int]]] = {}
    for id2 in id2s:
        by_shard.setdefault(shard_of(id2, backend.shards), []).append((id2, other))
    found: dict[int, int] = {}
    for number, keys in sorted(by_shard.items()):
        for (id2, _), row in backend.node_states(number, keys).items():
            found[id2] = row.updated_at
    return found
