"""The merge rule: every stored row is a last-writer-wins register.

Each edge `(id1, atype, id2)` and each object `id` holds one value. A write
carries a whole new value, stamped with `updated_at` (a hybrid logical clock,
µs) when it entered the system. The stored value changes only if the written
value *ranks* higher:

1. the later `updated_at` wins;
2. on an equal `updated_at`, the stronger state wins:
   removed > archived > negative > normal (a delete beats a concurrent add);
3. then a fixed total order on the remaining fields (time, then data for
   edges; version, type, then data for objects), so that even two different
   writes with the same timestamp and state resolve the same way everywhere.

Because `rank` is a total order on values and the stored value is the maximum
of all values written, applying any set of writes in any order, any number of
times, leaves the same rows: merge is commutative, associative and idempotent.
Counts per `(id1, atype, state)` are derived from the row transitions that
merge reports, so they are exact under every order too.

Deletes are writes of a `removed` value (a tombstone), never row deletions: a
tombstone must stay to beat a late-arriving older add.

A tombstone keeps the position of the edge it removes: its `time` is that of
the newest live value ever written to the key (the highest-ranked one below
it), so a query of removed edges lists it where it was. Which write that is
does not depend on arrival order, and the tombstone records it in its `data`
(a marker byte that no JSON starts with, then that write's
`(updated_at, state, time)`; a tombstone has no data of its own), so a live
write older than the tombstone that arrives after it still places it, and
only if it ranks above the one recorded. A tombstone no live value was seen
for keeps the time its writer gave it (a deletion: its own time).

Node states (the state of a whole list, `(node, atype)`) are registers too,
ranked by `(updated_at, state)`.

Everything here is pure (plain tuples in and out). Every backend and the cache
call these functions; none re-implements the rule in SQL.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterable, Mapping
from enum import IntEnum
from operator import itemgetter
from typing import NamedTuple


class State(IntEnum):
    """Edge (and object) states; the integer is the state's strength in a merge."""

    NORMAL = 0
    NEGATIVE = 1
    ARCHIVED = 2
    REMOVED = 3


#: NORMAL and REMOVED as plain ints, as rows carry them to a driver: SQLite's adapts an
#: IntEnum parameter by failed `__adapt__`/`__conform__` lookups (~3.5k instructions each).
PLAIN_NORMAL, PLAIN_REMOVED = int(State.NORMAL), int(State.REMOVED)


EdgeKey = tuple[int, int, int]  # (id1, atype id, id2)
#: An edge as written and merged: (id1, atype, id2, state, time, updated_at, data).
#: Plain tuples, so a bulk load builds and ships millions of them cheaply.
EdgeTuple = tuple[int, int, int, int, int, int, bytes | None]
CountKey = tuple[int, int, int]  # (id1, atype id, state)


class EdgeRow(NamedTuple):
    """One stored edge, in the column order of every backend's edge table (an EdgeTuple)."""

    id1: int
    atype: int
    id2: int
    state: int
    time: int
    updated_at: int
    data: bytes | None


class ObjRow(NamedTuple):
    """One stored object, in the column order of every backend's object table."""

    id: int
    otype: int
    state: int
    version: int
    updated_at: int
    data: bytes


class NodeRow(NamedTuple):
    """The state of all edges of one list `(node, atype)`, as a register (FlockDB's node state)."""

    node: int
    atype: int
    state: int
    updated_at: int


def edge_rank(row: EdgeTuple) -> tuple[int, int, int, bool, bytes]:
    """The sort key of the merge rule for edges: higher wins."""
    data = row[6]
    return (row[5], row[3], row[4], data is not None, data or b"")


def obj_rank(row: ObjRow) -> tuple[int, int, int, int, bytes]:
    """The sort key of the merge rule for objects: higher wins."""
    return (row[4], row[2], row[3], row[1], row[5])


#: A tombstone's `data`: the marker, then (updated_at, state, time) of the live
#: value whose time it keeps.
_PLACED = struct.Struct(">qbq")
_MARK = b"\x00"
_PLACED_SIZE = 1 + _PLACED.size
_STATE = itemgetter(2)  # of a count key
Source = tuple[int, int, int]  # (updated_at, state, time) of a live value


def source_of(row: EdgeTuple) -> Source | None:
    """The live value whose time `row` keeps: itself if live; the recorded one if a
    placed tombstone; None for a tombstone no live value was seen for."""
    if row[3] != State.REMOVED:
        return (row[5], row[3], row[4])
    data = row[6]
    if data is not None and len(data) == _PLACED_SIZE and data[:1] == _MARK:
        placed: Source = _PLACED.unpack_from(data, 1)
        return placed
    return None


def user_data(row: EdgeTuple) -> bytes | None:
    """The edge's data as written: a tombstone has none (its `data` places it)."""
    return None if row[3] == State.REMOVED else row[6]


def _sources(writes: Iterable[EdgeTuple]) -> dict[EdgeKey, Source]:
    best: dict[EdgeKey, Source] = {}
    for row in writes:
        source = source_of(row)
        if source is not None:
            key = row[:3]
            found = best.get(key)
            if found is None or source > found:
                best[key] = source
    return best


def _settle(old: EdgeTuple | None, row: EdgeTuple, source: Source | None) -> EdgeTuple:
    """The stored value of a key after `row` (the winner of the writes) meets `old`,
    a tombstone placed by the best live value of both (`source`: the writes')."""
    final = row if old is None or edge_rank(row) > edge_rank(old) else old
    if final[3] != State.REMOVED:
        return final
    if old is not None:
        stored = source_of(old)
        if stored is not None and (source is None or stored > source):
            source = stored
    return final if source is None else place(final, source)


def place(tombstone: EdgeTuple, source: Source) -> EdgeTuple:
    """`tombstone` at the time of the live value `source`, which it records."""
    return (*tombstone[:4], source[2], tombstone[5], _MARK + _PLACED.pack(*source))


#: Writes `merge_edges` counts in its loop even when none is stored (a Counter costs more).
_FEW = 16


def merge_edges(
    current: Mapping[EdgeKey, EdgeTuple], writes: Iterable[EdgeTuple]
) -> tuple[list[tuple[EdgeTuple | None, EdgeTuple]], dict[CountKey, int]]:
    """Fold `writes` into the `current` rows of their keys.

    Returns the changes, `(stored row or None, new row)` for each key whose
    row changed, and the count deltas per (id1, atype, state) that storing
    them implies (zeros left out). `current` must hold the stored row of
    every written key that exists.
    """
    # The winner among the writes first (max is associative), then against
    # the stored row: each key is compared with its stored row only once.
    if not isinstance(writes, (list, tuple)):
        writes = list(writes)
    winners: dict[EdgeKey, EdgeTuple] = {}
    first = winners.setdefault
    for row in writes:
        best = first(row[:3], row)
        if best is not row and edge_rank(row) > edge_rank(best):
            winners[row[:3]] = row
    removed = State.REMOVED
    if not current and len(winners) > _FEW:  # every winner is a new row (a bulk load's
        # new lists): count them in C (a few are counted faster by the loop below)
        counts = Counter((row[0], row[1], row[3]) for row in winners.values())
        if removed not in map(_STATE, counts):  # (no tombstone to place: far fewer keys)
            return [(None, row) for row in winners.values()], dict(counts)
    changed: list[tuple[EdgeTuple | None, EdgeTuple]] = []
    deltas: dict[CountKey, int] = {}
    get = deltas.get
    sources: dict[EdgeKey, Source] | None = None
    for key, winner in winners.items():
        old = current.get(key)
        row = winner
        if row[3] == removed or (old is not None and old[3] == removed):
            if sources is None:
                sources = _sources(writes)
            row = _settle(old, winner, sources.get(key))
            if row == old:
                continue
        elif old is not None and edge_rank(row) <= edge_rank(old):
            continue
        if old is None:
            new = (key[0], key[1], row[3])
            deltas[new] = get(new, 0) + 1
        elif old[3] != row[3]:
            new, gone = (key[0], key[1], row[3]), (key[0], key[1], old[3])
            deltas[gone] = get(gone, 0) - 1
            deltas[new] = get(new, 0) + 1
        changed.append((old, row))
    # (Rebuilt only if a delta cancelled out: none did, usually.)
    return changed, deltas if all(deltas.values()) else {k: n for k, n in deltas.items() if n}


def merge_nodes(
    current: Mapping[tuple[int, int], NodeRow], writes: Iterable[NodeRow]
) -> list[NodeRow]:
    """Fold node-state `writes` into the `current` rows; return the rows that changed."""
    winners: dict[tuple[int, int], NodeRow] = {}
    for row in writes:
        key = (row[0], row[1])
        best = winners.get(key)
        if best is None:
            best = current.get(key)
        if best is None or (row[3], row[2]) > (best[3], best[2]):
            winners[key] = row
    return list(winners.values())


class Changes(NamedTuple):
    """What one `Backend.apply` changed: the cache applies these in place."""

    edges: list[tuple[EdgeTuple | None, EdgeTuple]]  # (stored before, stored now)
    objects: list[ObjRow]
    nodes: list[NodeRow]


NO_CHANGES = Changes([], [], [])


def merge_objects(current: Mapping[int, ObjRow], writes: Iterable[ObjRow]) -> list[ObjRow]:
    """Fold object `writes` into the `current` rows; return the rows that changed."""
    winners: dict[int, ObjRow] = {}
    for row in writes:
        best = winners.get(row[0])
        if best is None:
            best = current.get(row[0])
        if best is None or obj_rank(row) > obj_rank(best):
            winners[row[0]] = row
    return list(winners.values())
