"""What the cache keeps on its entries for hits to answer from, built without I/O.

An object entry keeps the object decoded (`GONE` for "no such object"): the
object itself when its data is flat (every value immutable), else a `Nested`
that decodes its JSON afresh for each reader. A list entry keeps the answers
readers built (`Cache.keep`); a write to the list brings a kept answer to its
newest edges up to date (`patch_answer`) instead of dropping it.

`KeptAnswers` is what the engine hands the cache when it builds it
(`Cache(answers=…)`); the object and list reads (`objects.py`,
`assoc_reads.py`) build the same answers on a miss.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any

import msgspec

from ..cache.decoded import patched_range
from ..cache.entries import ListEntry, kept
from ..core import json as _json
from ..core.merge import PLAIN_NORMAL as _NORMAL
from ..core.merge import ObjRow, State
from ..core.records import Assoc, Obj
from ..core.schema import Schema

_REMOVED = State.REMOVED
GONE = object()  # kept on an entry that says "no such object" (or a tombstone)
_IMMUTABLE = frozenset({str, int, float, bool, type(None)})
_KEPT_BYTES = 200  # a kept Obj (or a Nested, its Obj and an empty dict)


class KeptAnswers:
    """The cache's `Answers`: what a written entry keeps, from the schema as this
    process knows it (a write's apply does no I/O for it)."""

    def __init__(self, schema: Callable[[], Schema]) -> None:
        self._schema = schema

    def obj_answer(self, row: ObjRow | None) -> tuple[object, int] | None:
        """What hits of an entry holding `row` answer from, and its bytes; None if its
        type is not in the schema as this process knows it."""
        if row is None or row.state == _REMOVED:
            return GONE, 0
        try:
            name = self._schema().object_by_id(row.otype).name
        except KeyError:
            return None
        return object_answer(row, name)

    def patch_answer(
        self, key: tuple[int, int], tag: Any, answer: Any, entry: ListEntry, old: Any, new: Any
    ) -> tuple[Assoc, ...] | None:
        """A kept answer to the newest `limit` edges (tag `(0, limit)`) brought up to
        date with a write to its list; the others (other positions, pages, encoded
        JSON, the index) are dropped."""
        if type(tag) is not tuple or len(tag) != 2 or tag[0] != 0:
            return None
        id1 = key[0]
        name = answer[0].atype if answer else self._schema().assoc_by_id(key[1]).name

        def build(
            id2s: list[int], times: list[int], stamps: list[int], datas: list[Any]
        ) -> tuple[Assoc, ...] | None:
            if not shareable_data(datas):
                return None
            return tuple(column_records(id1, name, id2s, times, stamps, datas))

        visible = new[3] == _NORMAL and new[6] is not None  # a tombstone's data places it
        data = kept(new[6]) if visible else None
        return patched_range(answer, tag[1], old, new, data, entry, build)


def object_answer(row: ObjRow, name: str) -> tuple[object, int]:
    """What hits of an entry holding the live object `row` (of type `name`) answer
    from, and its bytes: the object itself if its data is flat (the cache's own, never
    handed out), else a Nested."""
    obj = Obj(row.id, name, _json.decode(row.data), row.version, row.updated_at)
    if _IMMUTABLE.issuperset(map(type, obj.data.values())):
        return obj, _kept_bytes(obj.data)
    return Nested(obj, row.data), _KEPT_BYTES


class Nested:
    """A kept object whose data holds lists or dicts: each caller gets it decoded anew
    from its JSON (the cheapest deep copy), so no caller can change what another reads."""

    __slots__ = ("raw", "template")

    def __init__(self, obj: Obj, raw: bytes) -> None:
        self.template = msgspec.structs.replace(obj, data={})  # no decoded data kept
        self.raw = raw

    def fresh(self) -> Obj:
        return msgspec.structs.replace(self.template, data=_json.decode(self.raw))


def _kept_bytes(data: dict[str, Any]) -> int:
    """What a kept object with this flat data costs: the template and its tuple, the dict,
    its keys and values (an overestimate: equal keys may be shared)."""
    size = sys.getsizeof
    return _KEPT_BYTES + size(data) + sum(map(size, data)) + sum(map(size, data.values()))


def column_records(
    id1: int,
    name: str,
    id2s: list[int],
    times: list[int],
    stamps: list[int],
    datas: Iterable[Any],
) -> list[Assoc]:
    """Records of a list's visible edges given as columns, built in C (no Python call
    per record)."""
    n = len(id2s)
    return list(
        map(Assoc, repeat(id1, n), repeat(name), id2s, times, repeat("normal"), stamps, datas)
    )


def shareable_data(datas: list[Any]) -> bool:
    """Whether records with these (kept) data values may be shared between reads:
    arrays and objects, kept as JSON bytes, are decoded afresh for each reader."""
    return bytes not in set(map(type, datas))
