"""The dangling-data verifier (`assocdb check --dangling`): found by a scan, not guessed.

Two kinds of problem, read from every shard:

* a live edge whose end is a deleted object (a tombstone), or, for an edge of
  a deep or refcount type (whose targets are objects by declaration), whose
  target has no object at all: left by a plain `obj_delete`, by an edge of a
  type without an inverse (a cascade cannot find it from its target), or by
  an edge written after a cascade ended;
* a live object of an *owned* type that no live deep or refcount edge points to.

With `repair`, such edges are removed (both directions, counts exact) and
orphans are deleted with `cascade=True` (restorable like any deletion).
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.deletion import DanglingEdge, DanglingReport, Orphan
from ..core.errors import NotFound
from ..core.ids import shard_of
from ..core.merge import PLAIN_REMOVED as _REMOVED
from ..core.merge import EdgeRow, State
from ..core.ops import EdgeWrite, Operation
from .engine import Engine

PAGE = 5000


def find_dangling(
    engine: Engine,
    owners_left: Callable[[int], int],
    delete: Callable[[int], object],
    repair: bool,
) -> DanglingReport:
    """Scan every shard (see the module doc); `delete(id)` cascades an orphan away."""
    edges: list[DanglingEdge] = []
    for shard in range(engine.shards):
        after = None
        while page := engine.backend.export_edges(shard, after, PAGE):
            live = [row for row in page if row.state != State.REMOVED]
            found = _dangling(engine, live)
            if repair and found:
                _remove(engine, found)
            edges += [_edge(engine, row, end, why) for row, end, why in found]
            after = page[-1][:3]
    orphans = _orphans(engine, owners_left)
    if repair:
        for orphan in orphans:
            delete(orphan.id)
    return DanglingReport(edges, orphans, repair)


def _dangling(engine: Engine, rows: list[EdgeRow]) -> list[tuple[EdgeRow, int, str]]:
    states = _object_states(engine, {id for row in rows for id in (row.id1, row.id2)})
    schema = engine.schema
    found = []
    for row in rows:
        objectish = schema.assoc_by_id(row.atype).on_delete in ("deep", "refcount")
        for end in (row.id1, row.id2):
            state = states.get(end)
            if state == State.REMOVED:
                found.append((row, end, "deleted"))
                break
            if state is None and end == row.id2 and objectish:
                found.append((row, end, "missing"))
                break
    return found


def _object_states(engine: Engine, ids: set[int]) -> dict[int, int]:
    by_shard: dict[int, list[int]] = {}
    for id in sorted(ids):
        by_shard.setdefault(shard_of(id, engine.shards), []).append(id)
    return {
        row.id: row.state
        for shard, some in by_shard.items()
        for row in engine.backend.objects(shard, some)
    }


def _remove(engine: Engine, found: list[tuple[EdgeRow, int, str]]) -> None:
    ua = engine.clock.now()
    writes: list[tuple[Operation, int]] = []
    for row, _, _ in found:
        inverse = engine.inverse_id(engine.schema.assoc_by_id(row.atype))
        writes.append((EdgeWrite(row.atype, inverse, row.id1, row.id2, _REMOVED, ua), ua))
    for result in engine.submit_many(writes, sync=True):
        if isinstance(result, BaseException) and not isinstance(result, NotFound):
            raise result


def _orphans(engine: Engine, owners_left: Callable[[int], int]) -> list[Orphan]:
    found = []
    for otype in engine.schema.object_types:
        if not otype.owned:
            continue
        for shard in range(engine.shards):
            after = 0
            while page := engine.backend.objects_page(shard, otype.id, after, PAGE):
                for row in page:
                    if row.state != State.REMOVED and owners_left(row.id) == 0:
                        found.append(Orphan(row.id, otype.name))
                after = page[-1].id
    return found


def _edge(engine: Engine, row: EdgeRow, end: int, why: str) -> DanglingEdge:
    name = engine.schema.assoc_by_id(row.atype).name
    return DanglingEdge(row.id1, name, row.id2, end, "deleted" if why == "deleted" else "missing")
