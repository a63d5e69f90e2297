"""Graph: the whole assocdb API over one backend, usable in-process.

Reads route to the shard of `id1` (or of the object id) and are one index
range scan or one point lookup there. Writes are validated, stamped with
`updated_at` by the hybrid logical clock, planned into legs (`_plan`) and
applied leg by leg; each leg is idempotent under the merge rule (`_merge`).

Where a write needs the current row to be complete (a re-add keeps the edge's
time; an object update patches the stored data), the Graph reads it when the
write *enters* and plans a write of concrete values. What is stored, and what
a journal would replay, is therefore always a whole register value, and
replaying it in any order gives the same result.
"""

from __future__ import annotations

import os
import random
import threading
import time as _time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from . import _cursor, _json
from ._backend import Backend, CountMismatch, EdgeScan, ListRow
from ._bulk import bulk_rows
from ._clock import HybridClock
from ._errors import Conflict, InvalidRequest, NotFound, UnknownType
from ._ids import allocated_id, check_id, check_int64, shard_of
from ._merge import EdgeRow, EdgeTuple, ObjRow, State
from ._plan import Leg, edge_legs, edge_rows, object_leg
from ._records import Assoc, Obj, Page, WriteResult
from ._schema import DEFAULT_LIMIT, AssocType, ObjectType, Schema
from ._workers import ShardWriter

MAX_OBJECT_DATA = 1 << 20  # 1 MiB
MAX_ASSOC_DATA = 64 << 10  # 64 KiB
BULK_BATCH = 100_000  # rows per round of shard transactions
BULK_PARALLEL = 10_000  # edges read before a load starts worker processes
_NORMAL = State.NORMAL
_REMOVED = State.REMOVED
_SCHEMA_KEY = "schema"
_SCHEMA_RELOAD_SECONDS = 1.0


class Graph:
    """A graph of objects and associations. Thread-safe; use one per process.

    >>> g = assocdb.open("data/")
    >>> g.define_assoc("follows", inverse="followed_by")
    >>> g.assoc_add(1, "follows", 2)
    """

    def __init__(self, backend: Backend, *, clock: HybridClock | None = None) -> None:
        self._backend = backend
        self._shards = backend.shards
        self._clock = clock or HybridClock()
        self._schema = self._read_schema()
        self._schema_read_at = float("-inf")  # the first unknown type always re-reads
        self._ids = _IdBlocks(backend)

    # -- lifecycle -------------------------------------------------------------

    def close(self) -> None:
        """Close every connection. The graph cannot be used afterwards."""
        self._backend.close()

    def __enter__(self) -> Graph:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def shards(self) -> int:
        """The number of logical shards, fixed when the graph was created."""
        return self._shards

    def trace(self, tracer: Callable[[int, str, float], None]) -> Callable[[], None]:
        """Call `tracer(shard, sql, seconds)` after every SQL statement; returns an undo."""
        self._backend.tracers.append(tracer)
        return lambda: self._backend.tracers.remove(tracer)

    # -- schema ----------------------------------------------------------------

    @property
    def schema(self) -> Schema:
        """The association and object types defined so far."""
        return self._schema

    def define_assoc(
        self,
        name: str,
        *,
        inverse: str | None = None,
        symmetric: bool = False,
        limit: int = DEFAULT_LIMIT,
    ) -> AssocType:
        """Define an association type (and its inverse); a no-op if already so defined.

        >>> g.define_assoc("follows", inverse="followed_by")
        >>> g.define_assoc("friend", symmetric=True, limit=5000)
        """
        self._change_schema(
            lambda s: s.define_assoc(name, inverse=inverse, symmetric=symmetric, limit=limit)
        )
        return self._schema.assoc_type(name)

    def define_object(self, name: str) -> ObjectType:
        """Define an object type; a no-op if it exists."""
        self._change_schema(lambda s: s.define_object(name))
        return self._schema.object_type(name)

    def load_schema(self, path: str | Path) -> None:
        """Apply every definition in a TOML schema file (see `_schema`)."""
        text = Path(path).read_text(encoding="utf-8")
        self._change_schema(lambda s: s.apply_toml(text))

    def _change_schema(self, change: Callable[[Schema], Schema]) -> None:
        # Compare-and-swap, so two processes defining types at once cannot
        # hand out the same type id.
        while True:
            raw = self._backend.get_meta(_SCHEMA_KEY)
            current = Schema.from_json(raw) if raw else Schema()
            changed = change(current)
            if changed == current or self._backend.swap_meta(_SCHEMA_KEY, raw, changed.to_json()):
                self._schema = changed
                return

    def _read_schema(self) -> Schema:
        raw = self._backend.get_meta(_SCHEMA_KEY)
        return Schema.from_json(raw) if raw else Schema()

    def _assoc_type(self, name: object) -> AssocType:
        try:
            return self._schema.assoc_type(name)
        except UnknownType:
            if not self._refresh_schema():
                raise
            return self._schema.assoc_type(name)

    def _object_type(self, name: object) -> ObjectType:
        try:
            return self._schema.object_type(name)
        except UnknownType:
            if not self._refresh_schema():
                raise
            return self._schema.object_type(name)

    def _refresh_schema(self) -> bool:
        """Re-read the schema (another process may have defined a type), at most once a second."""
        now = _time.monotonic()
        if now - self._schema_read_at < _SCHEMA_RELOAD_SECONDS:
            return False
        self._schema_read_at = now
        self._schema = self._read_schema()
        return True

    # -- objects ---------------------------------------------------------------

    def obj_add(
        self,
        otype: str,
        data: dict[str, Any] | None = None,
        *,
        id: int | None = None,
        near: int | None = None,
        updated_at: int | None = None,
    ) -> int:
        """Create an object and return its id.

        Without `id`, an id is allocated on a random shard, or on the shard of
        `near` to colocate related objects. With `id` (an external id), adding
        the same object again is a no-op; a different live object there raises
        Conflict.

        >>> uid = g.obj_add("user", {"name": "ada"})
        """
        kind = self._object_type(otype)
        raw = self._object_data(data)
        if id is not None and near is not None:
            raise InvalidRequest("give either id= or near=, not both")
        if id is None:
            shard = (
                shard_of(check_id(near, "near"), self._shards)
                if near is not None
                else random.randrange(self._shards)
            )
            new_id, version = self._ids.take(shard), 1
        else:
            new_id = check_id(id)
            current = self._object_row(new_id)
            if current is not None and current.state != _REMOVED:
                if (current.otype, current.data) == (kind.id, raw):
                    return new_id
                raise Conflict(f"object {new_id} already exists", id=new_id)
            version = current.version + 1 if current is not None else 1
        ua = self._stamp(updated_at)
        self._write(
            [object_leg(ObjRow(new_id, kind.id, _NORMAL, version, ua, raw), self._shards)], ua
        )
        return new_id

    def obj_get(self, id: int) -> Obj | None:
        """The object with this id, or None if there is none (or it was deleted)."""
        row = self._object_row(check_id(id))
        if row is None or row.state == _REMOVED:
            return None
        return Obj(
            row.id, self._otype_name(row.otype), _json.decode(row.data), row.version, row.updated_at
        )

    def obj_update(
        self, id: int, data: dict[str, Any], *, updated_at: int | None = None
    ) -> WriteResult:
        """Set the given properties of an object (a shallow merge); NotFound if none.

        >>> g.obj_update(uid, {"bio": "Analyst"})
        """
        id = check_id(id)
        if not isinstance(data, dict):
            raise InvalidRequest(
                f"object data must be a JSON object (dict), got {type(data).__name__}"
            )
        _json.encode(data, MAX_OBJECT_DATA, "object data")  # validate before reading
        current = self._live_object(id)
        merged = {**_json.decode(current.data), **data}
        raw = _json.encode(merged, MAX_OBJECT_DATA, "object data after the update")
        ua = self._stamp(updated_at)
        row = ObjRow(id, current.otype, _NORMAL, current.version + 1, ua, raw)
        return self._write([object_leg(row, self._shards)], ua)

    def obj_delete(self, id: int, *, updated_at: int | None = None) -> WriteResult:
        """Delete an object, leaving a tombstone; NotFound if it never existed.

        Deleting a deleted object again is harmless (a retry may do that).
        """
        id = check_id(id)
        current = self._object_row(id)
        if current is None:
            raise NotFound(f"no object {id}", id=id)
        ua = self._stamp(updated_at)
        row = ObjRow(id, current.otype, _REMOVED, current.version + 1, ua, b"{}")
        return self._write([object_leg(row, self._shards)], ua)

    def _object_data(self, data: object) -> bytes:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise InvalidRequest(
                f"object data must be a JSON object (dict), got {type(data).__name__}"
            )
        return _json.encode(data, MAX_OBJECT_DATA, "object data")

    def _object_row(self, id: int) -> ObjRow | None:
        rows = self._backend.objects(shard_of(id, self._shards), [id])
        return rows[0] if rows else None

    def _live_object(self, id: int) -> ObjRow:
        row = self._object_row(id)
        if row is None or row.state == _REMOVED:
            raise NotFound(f"no object {id}", id=id)
        return row

    def _otype_name(self, otype: int) -> str:
        try:
            return self._schema.object_by_id(otype).name
        except KeyError:
            self._schema = self._read_schema()
            return self._schema.object_by_id(otype).name

    # -- association writes ------------------------------------------------------

    def assoc_add(
        self,
        id1: int,
        atype: str,
        id2: int,
        time: int | None = None,
        data: Any = None,
        updated_at: int | None = None,
    ) -> WriteResult:
        """Add the association `id1 -atype-> id2` (and its inverse, if the type has one).

        `time` orders the list (default: now, in ms). Re-adding an edge that
        exists (and is not removed) keeps its time and data unless new ones are
        given, so a re-follow does not jump to the top of the list.

        >>> g.assoc_add(1, "follows", 2)
        """
        id1, id2 = check_id(id1, "id1"), check_id(id2, "id2")
        kind = self._assoc_type(atype)
        if time is not None:
            check_int64(time, "time")
        raw = None if data is None else _json.encode(data, MAX_ASSOC_DATA, "association data")
        ua = self._stamp(updated_at)
        if time is None or raw is None:
            current = self._edge_row(id1, kind, id2)
            if current is not None and current.state != _REMOVED:
                time = current.time if time is None else time
                raw = current.data if raw is None else raw
        if time is None:
            time = ua // 1000
        rows = edge_rows(self._schema, kind, id1, id2, _NORMAL, time, ua, raw)
        return self._write(edge_legs(rows, self._shards), ua)

    def assoc_delete(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> WriteResult:
        """Delete the association (and its inverse), leaving tombstones.

        Deleting an edge that does not exist still stores a tombstone, so that
        an older add arriving later cannot bring it back.
        """
        id1, id2 = check_id(id1, "id1"), check_id(id2, "id2")
        kind = self._assoc_type(atype)
        ua = self._stamp(updated_at)
        rows = edge_rows(self._schema, kind, id1, id2, _REMOVED, 0, ua, None)
        return self._write(edge_legs(rows, self._shards), ua)

    def assoc_change_type(
        self, id1: int, atype: str, id2: int, new_atype: str, updated_at: int | None = None
    ) -> WriteResult:
        """Move an association to another type, keeping its time and data.

        >>> g.assoc_change_type(1, "follows", 2, "blocks")
        """
        id1, id2 = check_id(id1, "id1"), check_id(id2, "id2")
        old, new = self._assoc_type(atype), self._assoc_type(new_atype)
        if old.id == new.id:
            raise InvalidRequest(f"the association is already of type {old.name!r}")
        current = self._edge_row(id1, old, id2)
        if current is None or current.state == _REMOVED:
            raise NotFound(f"no association {id1} -{old.name}-> {id2}", id1=id1, id2=id2)
        ua = self._stamp(updated_at)
        rows = edge_rows(self._schema, old, id1, id2, _REMOVED, 0, ua, None)
        rows += edge_rows(
            self._schema, new, id1, id2, current.state, current.time, ua, current.data
        )
        return self._write(edge_legs(rows, self._shards), ua)

    def bulk_load(
        self,
        edges: Iterable[Sequence[Any]],
        *,
        workers: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Load many edges fast; return how many were read.

        Each edge is `(id1, atype, id2)`, optionally followed by `time` and
        `data`. Inverse rows and counts are written as for `assoc_add`, under
        the same merge rule. An edge without a time gets the load's start time
        (there is no read of the existing edge); with explicit times, loading
        twice changes nothing, so a load may be re-run after a crash.

        Edges are validated and written in rounds of 100,000 rows; a bad edge
        raises InvalidRequest naming its position, after the rounds before it
        were written. A load of more than 10,000 edges starts `workers`
        processes (default: one per CPU) that write shards in parallel.

        >>> g.bulk_load([(1, "friend", 2), (2, "friend", 3, 1700000000000)])
        """
        workers = os.cpu_count() or 1 if workers is None else workers
        if type(workers) is not int or workers < 1:
            raise InvalidRequest(f"workers must be a positive integer, got {workers!r}")
        ua = self._clock.now()
        shards = self._shards
        shard_cache: dict[int, int] = {}  # ids repeat: an edge list is mostly one id1
        batch: dict[int, list[EdgeTuple]] = {}
        rows = count = 0
        writer = ShardWriter(self._backend)
        try:
            for count, row in bulk_rows(edges, self._resolve, ua, MAX_ASSOC_DATA):
                shard = shard_cache.get(row[0])
                if shard is None:
                    shard = shard_cache[row[0]] = shard_of(row[0], shards)
                batch.setdefault(shard, []).append(row)
                rows += 1
                if count == BULK_PARALLEL:  # big enough to be worth processes
                    writer.start_workers(min(workers, shards))
                if rows >= BULK_BATCH:
                    writer.write(batch)
                    batch, rows = {}, 0
                    if len(shard_cache) > 1_000_000:
                        shard_cache.clear()
                    if progress is not None:
                        progress(count)
            writer.write(batch)
        finally:
            writer.close()
        if progress is not None:
            progress(count)
        return count

    def _resolve(self, name: object) -> tuple[int, int | None]:
        kind = self._assoc_type(name)
        inverse = self._schema.inverse(kind)
        return kind.id, None if inverse is None else inverse.id

    def _write(self, legs: list[Leg], updated_at: int) -> WriteResult:
        for leg in legs:
            self._backend.apply(leg.shard, leg.edges, leg.objects)
        return WriteResult("applied", updated_at)

    def _stamp(self, updated_at: object) -> int:
        return self._clock.now() if updated_at is None else self._clock.accept(updated_at)

    def _edge_row(self, id1: int, kind: AssocType, id2: int) -> EdgeRow | None:
        rows = self._backend.edges(shard_of(id1, self._shards), id1, kind.id, [id2])
        return rows[0] if rows else None

    # -- association reads -------------------------------------------------------

    def assoc_get(
        self,
        id1: int,
        atype: str,
        id2s: Iterable[int],
        high: int | None = None,
        low: int | None = None,
    ) -> list[Assoc]:
        """The associations from `id1` to any of `id2s`, with `low <= time <= high`.

        Returns only visible (normal) edges, newest first.

        >>> [a.id2 for a in g.assoc_get(1, "follows", [2, 3, 4])]
        """
        id1 = check_id(id1, "id1")
        kind = self._assoc_type(atype)
        wanted = _id_list(id2s, kind.limit)
        high = check_int64(high, "high") if high is not None else None
        low = check_int64(low, "low") if low is not None else None
        rows = self._backend.edges(shard_of(id1, self._shards), id1, kind.id, wanted)
        found = [
            r
            for r in rows
            if r.state == _NORMAL
            and (high is None or r.time <= high)
            and (low is None or r.time >= low)
        ]
        found.sort(key=lambda r: (r.time, r.id2), reverse=True)
        return [
            Assoc(id1, kind.name, r.id2, r.time, "normal", r.updated_at, _data(r.data))
            for r in found
        ]

    def assoc_count(self, id1: int, atype: str) -> int:
        """How many visible (normal) associations `id1` has of this type. Never a COUNT(*)."""
        id1 = check_id(id1, "id1")
        kind = self._assoc_type(atype)
        return self._backend.counts(shard_of(id1, self._shards), id1, kind.id).get(_NORMAL, 0)

    def assoc_range(self, id1: int, atype: str, pos: int = 0, limit: int = 50) -> list[Assoc]:
        """Up to `limit` associations, newest first, skipping the first `pos`.

        The cost grows with `pos`; page deep lists with `assoc_page` instead.
        """
        id1 = check_id(id1, "id1")
        kind = self._assoc_type(atype)
        if type(pos) is not int or not 0 <= pos <= 2**62:
            raise InvalidRequest(f"pos must be a non-negative integer, got {pos!r}")
        scan = EdgeScan(id1, kind.id, _NORMAL, _cursor.START, _limit(limit, kind), offset=pos)
        return self._assocs(id1, kind, self._scan(id1, scan))

    def assoc_time_range(
        self, id1: int, atype: str, high: int, low: int, limit: int = 50
    ) -> list[Assoc]:
        """Up to `limit` associations with `low <= time <= high`, newest first."""
        id1 = check_id(id1, "id1")
        kind = self._assoc_type(atype)
        high, low = check_int64(high, "high"), check_int64(low, "low")
        scan = EdgeScan(id1, kind.id, _NORMAL, _cursor.START, _limit(limit, kind), high, low)
        return self._assocs(id1, kind, self._scan(id1, scan) if low <= high else [])

    def assoc_page(
        self, id1: int, atype: str, cursor: str | None = None, limit: int = 50
    ) -> Page[Assoc]:
        """One page of the list, newest first; pass `next_cursor` back for the next.

        Every page costs what the first costs, and pages stay consistent while
        items are added (keyset paging on `(time, id2)`).

        >>> page = g.assoc_page(1, "follows", limit=100)
        >>> older = g.assoc_page(1, "follows", page.next_cursor, limit=100)
        """
        id1 = check_id(id1, "id1")
        kind = self._assoc_type(atype)
        limit = _limit(limit, kind)
        scope = b"assoc:%d:%d:%d" % (id1, kind.id, _NORMAL)
        seek = _cursor.START if cursor is None else _cursor.decode(scope, cursor, 2)

        def scan(seek: _cursor.Seek, n: int) -> list[ListRow]:
            return self._scan(id1, EdgeScan(id1, kind.id, _NORMAL, seek, n))

        rows, next_cursor, prev_cursor = _cursor.paginate(scan, _list_key, scope, seek, limit)
        return Page(self._assocs(id1, kind, rows), next_cursor, prev_cursor)

    def _scan(self, id1: int, query: EdgeScan) -> list[ListRow]:
        return self._backend.scan(shard_of(id1, self._shards), query)

    def _assocs(self, id1: int, kind: AssocType, rows: list[ListRow]) -> list[Assoc]:
        name = kind.name
        return [
            Assoc(id1, name, id2, time, "normal", ua, None if data is None else _json.decode(data))
            for id2, time, ua, data in rows
        ]

    # -- maintenance ---------------------------------------------------------------

    def check_counts(self, *, repair: bool = False) -> list[CountMismatch]:
        """Compare every stored count with a recount of the edges; optionally fix them."""
        return [m for shard in range(self._shards) for m in self._backend.recount(shard, repair)]


class _IdBlocks:
    """Hands out allocated ids per shard, reserving sequence numbers 64 at a time."""

    BLOCK = 64

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._blocks: dict[int, tuple[int, int]] = {}  # shard -> (next seq, end)
        self._lock = threading.Lock()

    def take(self, shard: int) -> int:
        with self._lock:
            seq, end = self._blocks.get(shard, (0, 0))
            if seq >= end:
                seq = self._backend.allocate(shard, self.BLOCK)
                end = seq + self.BLOCK
            self._blocks[shard] = (seq + 1, end)
        return allocated_id(seq, shard, self._backend.shards)


def _limit(limit: object, kind: AssocType) -> int:
    if type(limit) is not int or limit <= 0:
        raise InvalidRequest(f"limit must be a positive integer, got {limit!r}")
    return min(limit, kind.limit)


def _id_list(id2s: Iterable[int], most: int) -> list[int]:
    if isinstance(id2s, (str, bytes)) or not isinstance(id2s, Iterable):
        raise InvalidRequest(f"id2s must be a list of ids, got {type(id2s).__name__}")
    wanted = list(dict.fromkeys(check_id(i, "id2") for i in id2s))
    if len(wanted) > most:
        raise InvalidRequest(f"at most {most} id2s per call, got {len(wanted)}")
    return wanted


def _data(raw: bytes | None) -> Any:
    return None if raw is None else _json.decode(raw)


def _list_key(row: ListRow) -> tuple[int, int]:
    return (row[1], row[0])
