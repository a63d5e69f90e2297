"""Write operations: what a journal job holds, and how it becomes rows.

Every write is first an *operation*, a small value the journal can store. Some
operations depend on the row stored now: an add without `time` keeps the live
edge's time (a re-follow does not jump to the top of the list), an object
update patches the stored data, versions count up. Resolving an operation
against that current row (`resolve`) turns it into concrete rows: whole
register values for the merge rule, the forward row and its inverse with
identical fields. Rows are then grouped into *legs*, one per shard, each
applied in one transaction and each idempotent.

The Graph resolves an operation when it enters, by reading the current row,
so the journal normally holds concrete rows and replaying it in any order
gives the same store. When the shard cannot be read (it is down), the
operation is journaled unresolved and resolved once, durably, before its
first leg is applied. Either way, every leg of a job is applied with the same
concrete values, on every replica.

Node states (FlockDB): a list `(node, atype)` may be archived, negated or
removed as a whole. An edge written while one of its two lists has such a
state takes the stronger of the two states ("node state dominates"), so an
edge added to an archived account is written archived. `NodeJob` is the
background job that moves a list's existing edges, page by page.

Everything here is pure: msgspec values in, tuples out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, NamedTuple

import msgspec

from . import json as _json
from .errors import AssocdbError, Conflict, NotFound
from .ids import shard_of
from .merge import PLAIN_NORMAL as _NORMAL
from .merge import PLAIN_REMOVED as _REMOVED
from .merge import EdgeTuple, NodeRow, ObjRow

#: A stored row's identity: (id1, atype, id2) for an edge, (id,) for an object.
RowKey = tuple[int, ...]
ListKey = tuple[int, int]  # (node, atype): one association list
MAX_OBJECT_DATA = 1 << 20  # 1 MiB
MAX_ASSOC_DATA = 64 << 10  # 64 KiB


class Stored(NamedTuple):
    """What resolving an operation needs from the store."""

    row: Any = None  # the stored edge or object of the operation's key, or None
    node_state: int = _NORMAL  # the strongest node state of the lists it writes


class EdgeWrite(msgspec.Struct, tag="edge", array_like=True, frozen=True):
    """Write the edge `id1 -atype-> id2` (and `id2 -inverse-> id1`) in `state`.

    With `keep`, a missing `time` or `data` is taken from the live edge (one
    that exists and is not removed); a new edge gets time `new_time`, else
    `updated_at // 1000`, and no data.
    """

    atype: int
    inverse: int | None
    id1: int
    id2: int
    state: int
    updated_at: int
    time: int | None = None
    data: bytes | None = None
    keep: bool = False
    new_time: int | None = None  # the time of a new edge (a post keeps its first time)

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.id1, self.atype, self.id2)

    @property
    def needs_row(self) -> bool:
        return self.keep and (self.time is None or self.data is None)

    @property
    def needs_current(self) -> bool:
        return self.state != _REMOVED  # a removal beats any node state: no reads

    @property
    def node_lists(self) -> list[ListKey]:
        return _lists(self.atype, self.inverse, self.id1, self.id2)

    @property
    def keys(self) -> list[RowKey]:
        return _edge_keys(self.atype, self.inverse, self.id1, self.id2)

    def resolve(self, stored: Stored) -> list[EdgeTuple]:
        current: EdgeTuple | None = stored.row
        time, data = self.time, self.data
        live = current is not None and current[3] != _REMOVED
        if self.keep and live:
            assert current is not None
            time = current[4] if time is None else time
            data = current[6] if data is None else data
        if time is None:
            time = self.updated_at // 1000 if self.new_time is None else self.new_time
        state = max(self.state, stored.node_state)
        return _with_inverse(
            self.atype, self.inverse, self.id1, self.id2, state, time, self.updated_at, data
        )


class TypeChange(msgspec.Struct, tag="change", array_like=True, frozen=True):
    """Move the live edge `id1 -old-> id2` to type `new`, keeping state, time and data."""

    old: int
    old_inverse: int | None
    new: int
    new_inverse: int | None
    id1: int
    id2: int
    updated_at: int

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.id1, self.old, self.id2)

    needs_row = True
    needs_current = True

    @property
    def node_lists(self) -> list[ListKey]:
        return _lists(self.new, self.new_inverse, self.id1, self.id2)

    @property
    def keys(self) -> list[RowKey]:
        old = _edge_keys(self.old, self.old_inverse, self.id1, self.id2)
        return old + _edge_keys(self.new, self.new_inverse, self.id1, self.id2)

    def resolve(self, stored: Stored) -> list[EdgeTuple]:
        current = stored.row
        if current is None or current[3] == _REMOVED:
            raise NotFound(f"no association {self.id1} -> {self.id2} of type id {self.old}")
        ua, time = self.updated_at, current[4]
        old, old_inverse = self.old, self.old_inverse
        rows = _with_inverse(old, old_inverse, self.id1, self.id2, _REMOVED, time, ua, None)
        state, data = max(current[3], stored.node_state), current[6]
        return rows + _with_inverse(
            self.new, self.new_inverse, self.id1, self.id2, state, time, ua, data
        )


class ObjectWrite(msgspec.Struct, tag="obj", array_like=True, frozen=True):
    """Add, update (patch) or delete the object `id`.

    * add: `otype` and `data`; a live object with different data is a Conflict;
    * update: `patch`, merged into the live object's data (NotFound if none);
    * delete: `state` removed (NotFound if the object never existed).
    The version is one more than the stored one.

    `rebase`: the store stamped this update or delete (the caller gave no
    `updated_at`). It reads the stored row, so it must land after it: resolved
    against a row stamped as new or newer (a write stamped later that entered
    first), it takes the stamp just above that row's. Else it would lose to
    the very row it was resolved against, and a patch acknowledged as applied
    would vanish.
    """

    id: int
    updated_at: int
    state: int = _NORMAL
    otype: int | None = None
    data: bytes | None = None
    patch: bytes | None = None
    rebase: bool = False

    needs_row = True
    needs_current = True
    node_lists: ClassVar[list[ListKey]] = []

    @property
    def keys(self) -> list[RowKey]:
        return [(self.id,)]

    def resolve(self, stored: Stored) -> ObjRow:
        current: ObjRow | None = stored.row
        live = current is not None and current.state != _REMOVED
        version = current.version + 1 if current is not None else 1
        ua = self.updated_at
        if self.rebase and current is not None and current.updated_at >= ua:
            ua = current.updated_at + 1
        if self.state == _REMOVED:
            if current is None:
                raise NotFound(f"no object {self.id}", id=self.id)
            return ObjRow(self.id, current.otype, _REMOVED, version, ua, b"{}")
        if self.patch is not None:
            if not live:
                raise NotFound(f"no object {self.id}", id=self.id)
            assert current is not None
            merged = {**_json.decode(current.data), **_json.decode(self.patch)}
            raw = _json.encode(merged, MAX_OBJECT_DATA, "object data after the update")
            return ObjRow(self.id, current.otype, _NORMAL, version, ua, raw)
        assert self.otype is not None
        assert self.data is not None
        if live:
            assert current is not None
            if (current.otype, current.data) != (self.otype, self.data):
                raise Conflict(f"object {self.id} already exists", id=self.id)
            return current  # adding the same object again changes nothing
        return ObjRow(self.id, self.otype, _NORMAL, version, self.updated_at, self.data)


Operation = EdgeWrite | TypeChange | ObjectWrite


class Rows(msgspec.Struct, tag="rows", array_like=True, frozen=True):
    """Concrete rows: what an operation resolves to."""

    edges: list[EdgeTuple] = []
    objects: list[ObjRow] = []
    nodes: list[NodeRow] = []
    #: Secondary index entries `(shard, index, key, id, updated_at, version, state)`.
    index: list[tuple[int, int, bytes, int, int, int, int]] = []

    @property
    def keys(self) -> list[RowKey]:
        """What the rows write that a resolution may read: edges, objects, and the
        lists whose node state they set (`(node, atype)`)."""
        keys: list[RowKey] = [row[:3] for row in self.edges]
        if self.objects:  # (each part only if there is one: an edge write has edges only)
            keys += [(row[0],) for row in self.objects]
        if self.nodes:
            keys += [(row[0], row[1]) for row in self.nodes]
        return keys


class NodeJob(msgspec.Struct, tag="node", array_like=True, frozen=True):
    """Re-stamp every edge of some lists of `node` with `state` at `updated_at`.

    Each list is `(atype, other, sources)`: the list `(node, atype)`, the type
    of the mirrored rows `(id2, other, node)` (None if there are none), and
    `sources`, kept for jobs journaled before re-stamping (every list is now
    walked whole). `marks[i]` is the stamp of the node state of list i that
    this operation replaced (0 if none; see `restamp_rows`). The job runs in
    the background a page at a time, in id2 order; `at` records where it is,
    `(list, BY_ID2, 0, last id2)` (an older `at` restarts its list).
    """

    node: int
    lists: list[tuple[int, int | None, list[int]]]
    state: int
    updated_at: int
    at: tuple[int, int, int, int] | None = None
    marks: list[int] | None = None

    keys: ClassVar[list[RowKey]] = []  # its pages are journaled as jobs of their own


BY_ID2 = -1  # `at[1]` of a NodeJob walking its list in id2 order


def restamp_rows(
    job: NodeJob,
    atype: int,
    other: int | None,
    marks: Iterable[int],
    page: Iterable[EdgeTuple],
    other_marks: Mapping[int, int],
) -> Rows:
    """The rows that re-stamp one page of stored edges of the list `(job.node, atype)`.

    FlockDB's rule: a whole-node operation writes its state, stamped with its
    own time, onto every edge of the list (time and data kept), so on each
    edge the newer of two node operations wins whatever order they arrive in.
    The merge rule then keeps an edge written later than the operation as it
    is. Removed edges stay removed, so an edge's stamp tells who removed it:

    * an edge whose stamp is that of a node operation of one of its two lists
      (`marks`: this list's current and replaced node states; `other_marks`:
      the mirrored list's current node state, per id2) was last written by
      that operation, and is re-stamped like a live edge (a node removal is
      sticky: a newer operation keeps it removed, at its own stamp);
    * any other removed edge was deleted by its own write and is never touched;
    * a node *removal* also removes the live edges that a newer node operation
      re-stamped (it covers them: they existed before it), at their stamp, so
      an unarchive that arrives first cannot save them.

    `page` is the stored forward rows `(node, atype, id2, ...)`.
    """
    state, stamp = job.state, job.updated_at
    own = set(marks) | {stamp}
    edges: list[EdgeTuple] = []
    for row in page:
        id2, current, time, at, data = row[2], row[3], row[4], row[5], row[6]
        by_node = at in own or at == other_marks.get(id2)
        new: int
        if current == _REMOVED:
            if not by_node or at >= stamp:
                continue
            new, new_at = _REMOVED, stamp
        elif at <= stamp:
            new, new_at = state, stamp
        elif state == _REMOVED and by_node:
            new, new_at = _REMOVED, at
        else:
            continue
        if (new, new_at) == (current, at):
            continue
        edges += _with_inverse(atype, other, job.node, id2, new, time, new_at, data)
    return Rows(edges=edges)


class Leg(NamedTuple):
    """The rows a job stores on one shard, applied there atomically."""

    shard: int
    edges: list[EdgeTuple]
    objects: list[ObjRow]
    nodes: list[NodeRow]
    entries: list[tuple[int, bytes, int, int, int, int]]  # index entries (`core.entities.Entry`)


def resolve(op: Operation, stored: Stored) -> Rows:
    """The rows `op` writes, given what is stored."""
    if isinstance(op, ObjectWrite):
        return Rows(objects=[op.resolve(stored)])
    return Rows(edges=op.resolve(stored))


def legs(rows: Rows, shards: int) -> list[Leg]:
    """The rows grouped by shard, in shard order (so leg numbers are stable)."""
    by_shard: dict[int, Leg] = {}

    def leg(key: int) -> Leg:
        shard = shard_of(key, shards)
        found = by_shard.get(shard)
        if found is None:
            found = by_shard[shard] = Leg(shard, [], [], [], [])
        return found

    for edge in rows.edges:
        leg(edge[0]).edges.append(edge)
    for obj in rows.objects:
        leg(obj[0]).objects.append(obj)
    for node in rows.nodes:
        leg(node[0]).nodes.append(node)
    for shard, index, key, id, updated_at, version, state in rows.index:
        found = by_shard.get(shard)
        if found is None:
            found = by_shard[shard] = Leg(shard, [], [], [], [])
        found.entries.append((index, key, id, updated_at, version, state))
    return [by_shard[shard] for shard in sorted(by_shard)]


def is_rejection(exc: BaseException) -> bool:
    """True for errors that say the write cannot apply, whatever is retried."""
    return isinstance(exc, (NotFound, Conflict)) or (
        isinstance(exc, AssocdbError) and exc.code in {"invalid_request", "data_too_large"}
    )


def _edge_keys(atype: int, inverse: int | None, id1: int, id2: int) -> list[RowKey]:
    keys: list[RowKey] = [(id1, atype, id2)]
    if inverse is not None:
        keys.append((id2, inverse, id1))
    return keys


def _lists(atype: int, inverse: int | None, id1: int, id2: int) -> list[ListKey]:
    lists: list[ListKey] = [(id1, atype)]
    if inverse is not None:
        lists.append((id2, inverse))
    return lists


def _with_inverse(
    atype: int,
    inverse: int | None,
    id1: int,
    id2: int,
    state: int,
    time: int,
    updated_at: int,
    data: bytes | None,
) -> list[EdgeTuple]:
    rows: list[EdgeTuple] = [(id1, atype, id2, state, time, updated_at, data)]
    if inverse is not None and not (inverse == atype and id1 == id2):
        rows.append((id2, inverse, id1, state, time, updated_at, data))
    return rows
