"""The object half of the Graph API: typed, schemaless JSON property bags."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from ..cache.entries import ObjEntry
from ..cache.tier1 import Cache
from ..core import json as _json
from ..core.errors import InvalidRequest, Unavailable
from ..core.ids import allocated_id, check_id, shard_of
from ..core.merge import PLAIN_NORMAL as _NORMAL
from ..core.merge import PLAIN_REMOVED as _REMOVED
from ..core.merge import ObjRow
from ..core.ops import MAX_OBJECT_DATA, ObjectWrite, Rows
from ..core.records import Obj, WriteResult
from ..storage.backend import Backend
from .engine import Engine
from .kept import GONE, object_answer


class Objects:
    """obj_add, obj_get, obj_update, obj_delete (`Graph` documents each)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._backend = engine.backend
        self._cache = engine.cache
        self._shards = engine.shards
        self._ids = _IdBlocks(engine.backend)

    def obj_add(
        self,
        otype: str,
        data: dict[str, Any] | None = None,
        *,
        id: int | None = None,
        near: int | None = None,
        updated_at: int | None = None,
    ) -> int:
        op, ua, new_id = self.add_op(otype, data, id=id, near=near, updated_at=updated_at)
        self._engine.submit(op, ua)
        return new_id

    def add_op(
        self,
        otype: str,
        data: dict[str, Any] | None = None,
        *,
        id: int | None = None,
        near: int | None = None,
        updated_at: int | None = None,
    ) -> tuple[ObjectWrite | Rows, int, int]:
        """The write that adds the object, its `updated_at`, and the object's id."""
        kind = self._engine.object_type(otype)
        raw = _object_data({} if data is None else data)
        if id is not None and near is not None:
            raise InvalidRequest("give either id= or near=, not both")
        if id is not None:
            new_id = check_id(id)
            ua = self._engine.stamp(updated_at)
            return ObjectWrite(new_id, ua, otype=kind.id, data=raw), ua, new_id
        near_shard = None if near is None else shard_of(check_id(near, "near"), self._shards)
        new_id = self._allocate(near_shard)
        ua = self._engine.stamp(updated_at)
        # A freshly allocated id has no stored row: the write is concrete already.
        return Rows(objects=[ObjRow(new_id, kind.id, _NORMAL, 1, ua, raw)]), ua, new_id

    def obj_get(self, id: int) -> Obj | None:
        id = check_id(id)
        cache = self._cache
        if cache is None:
            return self._obj(self._load(id))
        entry = cache.cached_obj(id)
        if entry is None:
            row = cache.obj(id, lambda: self._load(id))
            # The entry a fill installed keeps its answer now: the miss decodes the
            # row anyway, and the next read is then a hit like any other.
            entry = cache.entry_of(id, row)
            if entry is None:  # not installed: not admitted, or a write made it stale
                return self._obj(row)
        kept = entry.answer
        if kept is None:  # filled by another reader, or replaced by a write since
            kept = self._keep(cache, id, entry)
        if type(kept) is Obj:  # flat data: a copy of its dict is the caller's own
            return Obj(kept.id, kept.otype, kept.data.copy(), kept.version, kept.updated_at)
        return None if kept is GONE else kept.fresh()

    def obj_update(
        self, id: int, data: dict[str, Any], *, updated_at: int | None = None
    ) -> WriteResult:
        return self._engine.submit(*self.update_op(id, data, updated_at=updated_at))

    def obj_delete(self, id: int, *, updated_at: int | None = None) -> WriteResult:
        return self._engine.submit(*self.delete_op(id, updated_at=updated_at))

    def update_op(
        self, id: int, data: dict[str, Any], *, updated_at: int | None = None
    ) -> tuple[ObjectWrite, int]:
        id = check_id(id)
        patch = _object_data(data)
        ua = self._engine.stamp(updated_at)
        return ObjectWrite(id, ua, patch=patch, rebase=updated_at is None), ua

    def delete_op(self, id: int, *, updated_at: int | None = None) -> tuple[ObjectWrite, int]:
        id = check_id(id)
        ua = self._engine.stamp(updated_at)
        return ObjectWrite(id, ua, state=_REMOVED, rebase=updated_at is None), ua

    def _load(self, id: int) -> ObjRow | None:
        rows = self._backend.objects(shard_of(id, self._shards), [id])
        return rows[0] if rows else None

    def _obj(self, row: ObjRow | None) -> Obj | None:
        """The object `row` holds (decoded: the caller's own), or None if there is none."""
        if row is None or row.state == _REMOVED:
            return None
        name = self._otype_name(row.otype)
        return Obj(row.id, name, _json.decode(row.data), row.version, row.updated_at)

    def _keep(self, cache: Cache, id: int, entry: ObjEntry) -> object:
        """What the entry's hits answer from (`_answer`), kept on it."""
        kept, nbytes = self._answer(entry.row)
        cache.keep_obj(id, entry, kept, nbytes)
        return kept

    def _answer(self, row: ObjRow | None) -> tuple[object, int]:
        """What hits of an entry holding `row` answer from, and its bytes (`api.kept`;
        re-reads the schema for a type this process has not seen)."""
        if row is None or row.state == _REMOVED:
            return GONE, 0
        return object_answer(row, self._otype_name(row.otype))

    def _allocate(self, shard: int | None) -> int:
        if shard is not None:
            return self._ids.take(shard)
        # Any shard will do: if one is down, try another.
        failure: Unavailable | None = None
        for candidate in random.sample(range(self._shards), min(3, self._shards)):
            try:
                return self._ids.take(candidate)
            except Unavailable as exc:
                failure = exc
        assert failure is not None
        raise failure

    def _otype_name(self, otype: int) -> str:
        return self._engine.named(lambda schema: schema.object_by_id(otype)).name


class _IdBlocks:
    """Hands out allocated ids per shard from reserved blocks of sequence numbers.

    A reservation is one synced shard transaction (`Backend.allocate`, a few ms on
    a busy disk, while every obj_add of the process waits), so a block that runs
    out within GROW_SECONDS makes the next one twice as large (up to MAX_BLOCK),
    and one that lasts past SHRINK_SECONDS makes it smaller again: a steady stream
    of objects syncs a reservation per shard every few seconds at most, and a
    process that adds a few objects leaves at most BLOCK numbers unused (ids are
    plentiful: 2^63 / shards per shard)."""

    BLOCK = 64
    MAX_BLOCK = 16384

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        #: shard -> (next seq, end, the block's size, when it was reserved)
        self._blocks: dict[int, tuple[int, int, int, float]] = {}
        self._lock = threading.Lock()

    def take(self, shard: int) -> int:
        with self._lock:
            seq, end, size, at = self._blocks.get(shard, (0, 0, 0, float("-inf")))
            if seq >= end:
                now = time.monotonic()
                size = block_size(size, now - at, self.BLOCK, self.MAX_BLOCK)
                seq, at = self._reserve(shard, size), now
                end = seq + size
            self._blocks[shard] = (seq + 1, end, size, at)
        return allocated_id(seq, shard, self._backend.shards)

    def _reserve(self, shard: int, size: int) -> int:
        """The first number of a new block. A reservation is durable before it is used
        (`Backend.allocate`); should one be taken back anyway (a disk that lied about
        a sync, a shard restored from an older copy), the block's first id, the first
        one handed out, is stored: that block is skipped. One keyed read per block."""
        while True:
            seq = self._backend.allocate(shard, size)
            first = allocated_id(seq, shard, self._backend.shards)
            if not self._backend.objects(shard, [first]):
                return seq


GROW_SECONDS = 10.0  # a block used up faster than this: the next one is twice as large
SHRINK_SECONDS = 600.0  # a block that lasted longer: the next one is half as large


def block_size(previous: int, lasted: float, smallest: int, largest: int) -> int:
    """The size of a shard's next id block, given the last one's size and how many
    seconds it lasted (`smallest` for the first)."""
    if previous < smallest:
        return smallest
    if lasted < GROW_SECONDS:
        return min(largest, previous * 2)
    if lasted > SHRINK_SECONDS:
        return max(smallest, previous // 2)
    return previous


def _object_data(data: object) -> bytes:
    if not isinstance(data, dict):
        raise InvalidRequest(f"object data must be a JSON object (dict), got {type(data).__name__}")
    return _json.encode(data, MAX_OBJECT_DATA, "object data")
