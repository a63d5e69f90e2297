"""Write planning: which rows a write stores, on which shards.

A write is planned into *legs*, one per shard it touches, each applied there
in one transaction and each idempotent under the merge rule. Writing an edge
of a type with an inverse (`follows` ↔ `followed_by`) or a symmetric type
(`friend`) plans two rows with identical state, time, updated_at and data: the
forward row on `shard_of(id1)` and the inverse row on `shard_of(id2)`. Pure:
no I/O, so the journal can store a plan and replay it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ._ids import shard_of
from ._merge import EdgeTuple, ObjRow
from ._schema import AssocType, Schema


class Leg(NamedTuple):
    """The rows a write stores on one shard, applied there atomically."""

    shard: int
    edges: tuple[EdgeTuple, ...] = ()
    objects: tuple[ObjRow, ...] = ()


def edge_rows(
    schema: Schema,
    atype: AssocType,
    id1: int,
    id2: int,
    state: int,
    time: int,
    updated_at: int,
    data: bytes | None,
) -> list[EdgeTuple]:
    """The forward row and, if the type has one, its inverse row."""
    rows: list[EdgeTuple] = [(id1, atype.id, id2, state, time, updated_at, data)]
    inverse = schema.inverse(atype)
    if inverse is not None and not (inverse.id == atype.id and id1 == id2):
        rows.append((id2, inverse.id, id1, state, time, updated_at, data))
    return rows


def edge_legs(rows: Iterable[EdgeTuple], shards: int) -> list[Leg]:
    """Group edge rows into legs by the shard of their id1, first-seen order."""
    by_shard: dict[int, list[EdgeTuple]] = {}
    for row in rows:
        by_shard.setdefault(shard_of(row[0], shards), []).append(row)
    return [Leg(shard, tuple(rows)) for shard, rows in by_shard.items()]


def object_leg(row: ObjRow, shards: int) -> Leg:
    return Leg(shard_of(row[0], shards), objects=(row,))
