"""Secondary indexes on objects (FriendFeed): define, drop, query, status.

An index is declared at run time (`define_index`), stored in the schema,
and from then on every object write of its type carries the index entries
it implies (`Indexes.entries`, which the engine calls on every object write,
here and in the applier; the rule: `core.entities`). Existing objects are indexed by the build of
`api/cleaner.py`, which also repairs. A query is one range scan of the index on
one shard (when it gives the `shard_on` property by equality) or on every
shard, merged; each entry found is re-checked against the object's current
row, so a stale or dangling entry never returns a wrong object.

Query shape: `eq` gives values of the leading key properties, in order;
`low`/`high` (inclusive) bound the next key component (a property, or the
object's `updated_at` for an index ordered by recency). Results come in key
order, ascending, or descending with `desc=True`; pages are keyset cursors
on `(key, object id)`, opaque and bound to the query like every cursor.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple

import msgspec

from ..core import json as _json
from ..core import keys as _keys
from ..core.cursor import decode_after, encode_after
from ..core.entities import Routed, key_of, maintenance, shard_for_value
from ..core.errors import InvalidRequest, KeyTaken
from ..core.ids import shard_of
from ..core.merge import ObjRow, State
from ..core.ops import Rows
from ..core.records import IndexPage, IndexStatus, Obj
from ..core.scans import IndexScan
from ..core.schema import DEFAULT_LIMIT, IndexDef
from .engine import Engine

_ID = struct.Struct(">q")
BUILD_KEY = "index:{}:build"
DEFINED_KEY = "index:{}:defined"


class Indexes:
    """define_index, drop_index, index_query, index_status, indexes (`Graph` documents
    each), and `entries`, which the engine adds to every object write."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._backend = engine.backend
        self._shards = engine.shards

    def define_index(
        self,
        name: str,
        otype: str,
        properties: list[str],
        *,
        order: str | None = None,
        unique: bool = False,
        shard_on: str | None = None,
    ) -> IndexStatus:
        self._engine.object_type(otype)  # UnknownType, refreshing the schema first
        defined_at = self._engine.clock.now()
        self._engine.change_schema(
            lambda s: s.define_index(
                name, otype, properties, order=order, unique=unique, shard_on=shard_on
            )
        )
        index = self._engine.schema.index(name)
        # The cleaner's recent passes start here: writes from then on that a
        # process made before it saw the index are judged by them.
        self._backend.swap_meta(DEFINED_KEY.format(index.id), None, str(defined_at).encode())
        return self.index_status(name)

    def drop_index(self, name: str) -> None:
        index = self.index(name)
        self._engine.change_schema(lambda s: s.drop_index(name))
        for shard in range(self._shards):
            self._backend.index_drop(shard, index.id)

    def indexes(self) -> list[IndexStatus]:
        schema = self._engine.reload_schema()
        return [self.index_status(index.name) for index in schema.indexes]

    def index_status(self, name: str) -> IndexStatus:
        index = self.index(name)
        raw = self._backend.get_meta(BUILD_KEY.format(index.id))
        scanned = 0 if raw is None else int(_json.decode(raw).get("scanned", 0))
        total = sum(self._backend.objects_count(s, index.otype) for s in range(self._shards))
        return IndexStatus(
            index.name,
            self._engine.schema.object_by_id(index.otype).name,
            index.properties,
            index.order,
            index.unique,
            index.shard_on,
            index.state,
            scanned,
            total,
        )

    def index_query(
        self,
        name: str,
        eq: Sequence[Any] = (),
        low: Any = None,
        high: Any = None,
        *,
        desc: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> IndexPage:
        index = self.index(name)
        plan = _plan(index, eq, low, high, desc, self._shards)
        limit = _check_limit(limit)
        after = None if cursor is None else decode_after(plan.scope, cursor, _keys.MAX_KEY_BYTES)
        items, next_after = self._index_read(index, plan, after, limit)
        token = None if next_after is None else encode_after(plan.scope, next_after)
        return IndexPage(items, token, index.state == "ready")

    # -- for the engine and the cleaner ----------------------------------------------

    def index(self, name: object) -> IndexDef:
        """The index named so (NotFound if none, after a re-read), as stored at most a
        second ago (another process may have built or dropped it)."""
        self._engine.refresh_indexes()
        return self._engine.named(lambda schema: schema.index(name))

    def entries(self, old: ObjRow | None, rows: Rows, owner: Hashable) -> Rows:
        """`rows` with the secondary index entries its object rows imply (`core.entities`).

        The entries of unique indexes are claimed for `owner` (`writes.claims`)
        until the journaled write is applied, so a write resolved before this
        one is applied sees them. Raises InvalidRequest if an object holds a
        value one of its indexes cannot take, Conflict if a unique index holds
        the key for another object (then nothing stays claimed for `owner`).
        """
        self._engine.refresh_indexes()
        schema = self._engine.schema
        entries = list(rows.index)
        unique: list[tuple[IndexDef, Routed]] = []
        for new in rows.objects:
            before = old if old is not None and old.id == new.id else None
            indexes = schema.indexes_of(new.otype)
            made = maintenance(indexes, before, new, self._shards)
            for index in indexes:
                if index.unique:
                    unique += [(index, entry) for entry in made if entry[1] == index.id]
            entries += made
        if unique:
            self._claim_unique(unique, owner)
        if len(entries) == len(rows.index):
            return rows
        return msgspec.structs.replace(rows, index=entries)

    def objects_by_id(self, ids: list[int]) -> dict[int, ObjRow]:
        """The stored rows of these objects (any state), one read per shard."""
        by_shard: dict[int, list[int]] = {}
        for id in ids:
            by_shard.setdefault(shard_of(id, self._shards), []).append(id)
        found: dict[int, ObjRow] = {}
        for shard, some in by_shard.items():
            found.update((row.id, row) for row in self._backend.objects(shard, some))
        return found

    # -- internals -------------------------------------------------------------------

    def _index_read(
        self, index: IndexDef, plan: _Plan, after: tuple[bytes, int] | None, limit: int
    ) -> tuple[list[Obj], tuple[bytes, int] | None]:
        """Up to `limit` verified objects after `after`, and where the next page starts."""
        items: list[Obj] = []
        while True:
            want = limit - len(items) + 1  # one more: is there anything after the page?
            rows = self._index_candidates(index, plan, after, want)
            if not rows:
                return items, None
            checked = self._recheck(index, rows)
            for row in rows:
                if len(items) == limit:
                    return items, after  # `row` is a candidate beyond the page
                found = checked.get(row)
                if found is not None:
                    items.append(found)
                after = row
            if len(rows) < want:
                return items, None

    def _index_candidates(
        self, index: IndexDef, plan: _Plan, after: tuple[bytes, int] | None, want: int
    ) -> list[tuple[bytes, int]]:
        """The first `want` live entries after `after` over the plan's shards, in order."""
        scan = IndexScan(plan.low, plan.high, after, plan.desc, want)
        per_shard = [self._backend.index_scan(s, index.id, scan) for s in plan.shards]
        merged = heapq.merge(*per_shard, reverse=plan.desc)
        return [row for _, row in zip(range(want), merged, strict=False)]

    def _recheck(self, index: IndexDef, rows: list[tuple[bytes, int]]) -> dict[Any, Obj]:
        """The entries that still hold: the object is live and has exactly that key."""
        stored = self.objects_by_id([id for _, id in rows])
        name = self._engine.schema.object_by_id(index.otype).name
        found: dict[Any, Obj] = {}
        for key, id in rows:
            row = stored.get(id)
            if row is None or row.state == State.REMOVED or row.otype != index.otype:
                continue
            data = _json.decode(row.data)
            if key_of(index, data, row.updated_at, strict=False) == key:
                found[(key, id)] = Obj(id, name, data, row.version, row.updated_at)
        return found

    def _claim_unique(self, made: list[tuple[IndexDef, Routed]], owner: Hashable) -> None:
        """Claim a write's unique entries; Conflict (and no claims) if a key it takes
        is held by another object, stored or claimed before."""
        claims = self._engine.applier.pending.claims
        earlier = claims.claim(owner, [entry for _, entry in made])
        try:
            for index, (shard, index_id, key, id, _, _, state) in made:
                if state == State.NORMAL:
                    self._check_unique(index, key, shard, id, earlier[(index_id, key)])
        except BaseException:
            claims.release([owner])
            raise

    def _check_unique(
        self, index: IndexDef, key: bytes, shard: int, id: int, claimed: dict[int, Routed]
    ) -> None:
        """Conflict if another live object holds `key` in a unique index.

        An object with a `claimed` entry for the key (its write is not yet
        applied) holds it if that entry is live, whatever is stored. Otherwise
        the stored entries answer: with `shard_on`, every holder of the key has
        its entry on `shard`; without, entries live with their objects, so
        every shard is asked.
        """
        for other, entry in claimed.items():
            if other != id and entry[6] == State.NORMAL:
                raise _taken(index, other)
        scan = IndexScan(key, key + b"\x00", None, False, 16)
        shards = [shard] if index.shard_on is not None else range(self._shards)
        rows = [
            r
            for s in shards
            for r in self._backend.index_scan(s, index.id, scan)
            if r[1] != id and r[1] not in claimed
        ]
        if rows and (found := self._recheck(index, rows)):
            raise _taken(index, next(iter(found))[1])


def _taken(index: IndexDef, holder: int) -> KeyTaken:
    # The holder: the pipeline asks whether a queued write of it may yet free the key.
    return KeyTaken(
        f"index {index.name!r} is unique and another object has the same "
        f"{', '.join(index.key_properties)}",
        holder,
        index=index.name,
    )


class _Plan(NamedTuple):
    """Where one index query reads: its key range, shards, direction and cursor scope."""

    low: bytes
    high: bytes
    shards: list[int]
    desc: bool
    scope: bytes


def _plan(
    index: IndexDef, eq: object, low: object, high: object, desc: object, shards: int
) -> _Plan:
    if isinstance(eq, (str, bytes)) or not isinstance(eq, (list, tuple)):
        raise InvalidRequest(f"eq must be a list of values, got {eq!r}")
    parts = len(index.key_properties) + index.recency
    if len(eq) > parts:
        raise InvalidRequest(
            f"index {index.name!r} has {parts} key parts ({_parts(index)}); eq gave {len(eq)}"
        )
    if (low is not None or high is not None) and len(eq) == parts:
        raise InvalidRequest(
            f"low/high bound the key part after the eq values; index {index.name!r} has "
            f"no part after {len(eq)} ({_parts(index)})"
        )
    if type(desc) is not bool:
        raise InvalidRequest(f"desc must be true or false, got {desc!r}")
    prefix = _keys.encode(eq, "eq")
    lo = prefix if low is None else prefix + _keys.encode([low], "low")
    hi = _keys.upper(prefix if high is None else prefix + _keys.encode([high], "high"))
    targets = list(range(shards))
    if index.shard_on is not None and index.properties.index(index.shard_on) < len(eq):
        targets = [shard_for_value(eq[index.properties.index(index.shard_on)], shards)]
    scope = _ID.pack(index.id) + bytes([desc]) + _ID.pack(len(lo)) + lo + hi
    return _Plan(lo, hi, targets, desc, scope)


def _parts(index: IndexDef) -> str:
    return ", ".join([*index.key_properties, *(["updated_at"] if index.recency else [])])


def _check_limit(limit: object) -> int:
    if type(limit) is not int or not 0 < limit <= DEFAULT_LIMIT:
        raise InvalidRequest(f"limit must be an integer from 1 to {DEFAULT_LIMIT}, got {limit!r}")
    return limit
