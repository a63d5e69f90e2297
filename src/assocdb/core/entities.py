"""Secondary index entries: what an object write, a build and a repair store.

FriendFeed kept entities as schemaless property bags and every index in a
table of its own. Here an index entry is a last-writer-wins register, like
every other stored row:

    (index, key, object id) -> (updated_at, version, state)

where `key` is the order-preserving encoding (`core.keys`) of the object's
indexed property values. An object write that resolves from `old` to `new`
(a newer row) produces, for each index on the type, a *removed* entry for
the old key and a *normal* entry for the new key, both stamped with the
new row's `updated_at` and `version`. Along an object's history of
winning writes `(updated_at, version)` strictly increases (each write is
resolved against the stored row: `updated_at` never goes down and `version`
goes up by one, even when a client stamps two writes alike), so entries
rank by `(updated_at, version, state)`, and applying them in any order, any
number of times, leaves the index the objects' final rows imply: the entry
for a key an object held is removed by the object's next write that moves
it, stamped later, and only the current key's entry has no later removal.
The entries ride in the same journal job as the object row (legs on the
index's shards), so they are retried like any other leg.

The builder and the repair pass (`judge`) derive the same entries from the
stored object row, stamped with its `(updated_at, version)`: an entry the builder
writes from a row that a concurrent write has since changed loses to that
write's removal. A stored entry newer than the object (its write's object
leg is still queued) is left alone.

Entries are placed on the shard of their `shard_on` value (so an equality
query on it reads one shard) or, without `shard_on`, on the object's shard.

Everything here is pure.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import json as _json
from . import keys as _keys
from .errors import InvalidRequest
from .ids import shard_of
from .merge import PLAIN_NORMAL as _NORMAL
from .merge import PLAIN_REMOVED as _REMOVED
from .merge import ObjRow, obj_rank
from .schema import IndexDef

#: An entry as written: (index id, key, object id, updated_at, version, state).
Entry = tuple[int, bytes, int, int, int, int]
#: An entry with the shard it is stored on, as journaled: (shard, *Entry).
Routed = tuple[int, int, bytes, int, int, int, int]
EntryKey = tuple[int, bytes, int]  # (index id, key, object id)


def entry_rank(entry: Entry) -> tuple[int, int, int]:
    """The merge rule for entries: the later `(updated_at, version)` wins, then removal."""
    return (entry[3], entry[4], entry[5])


def merge_entries(current: Mapping[EntryKey, Entry], writes: Iterable[Entry]) -> list[Entry]:
    """Fold `writes` into the `current` entries of their keys; the entries that changed."""
    winners: dict[EntryKey, Entry] = {}
    for entry in writes:
        key = entry[:3]
        best = winners.get(key) or current.get(key)
        if best is None or entry_rank(entry) > entry_rank(best):
            winners[key] = entry
    return list(winners.values())


def key_of(index: IndexDef, data: Mapping[str, Any], updated_at: int, strict: bool) -> bytes | None:
    """The index key of an object with these properties, or None if it has no entry.

    An object lacking one of the key properties is not in the index. A value
    that cannot be indexed (a list, an object) raises InvalidRequest when
    `strict` (a write), and leaves the object out of the index otherwise (a
    row stored before the index existed).
    """
    values: list[object] = []
    for prop in index.key_properties:
        if prop not in data:
            return None
        values.append(data[prop])
    if index.recency:
        values.append(updated_at)
    if not strict and not all(_keys.indexable(v) for v in values):
        return None
    try:
        return _keys.encode(values, f"property {index.key_properties} of index {index.name!r}")
    except InvalidRequest:
        if strict:
            raise
        return None


def shard_of_entry(index: IndexDef, data: Mapping[str, Any], obj_id: int, shards: int) -> int:
    """The shard an entry is stored on."""
    if index.shard_on is None:
        return shard_of(obj_id, shards)
    return shard_for_value(data[index.shard_on], shards)


def shard_for_value(value: object, shards: int) -> int:
    """The shard of entries whose `shard_on` property holds `value`."""
    return zlib.crc32(_keys.encode([value])) % shards


def expected(
    index: IndexDef, row: ObjRow | None, shards: int, strict: bool = False
) -> Routed | None:
    """The one live entry the stored object `row` implies for `index`, if any."""
    if row is None or row.state == _REMOVED or row.otype != index.otype:
        return None
    data = _json.decode(row.data)
    key = key_of(index, data, row.updated_at, strict)
    if key is None:
        return None
    shard = shard_of_entry(index, data, row.id, shards)
    return (shard, index.id, key, row.id, row.updated_at, row.version, _NORMAL)


def maintenance(
    indexes: Sequence[IndexDef], old: ObjRow | None, new: ObjRow, shards: int
) -> list[Routed]:
    """The entries a write from `old` to `new` stores (nothing if `new` would not win).

    Raises InvalidRequest if `new` holds a value an index cannot take, unless
    `old` held the same values (stored before the index existed, it is left
    out of the index, and a write of its other properties goes through).
    """
    if not indexes or (old is not None and obj_rank(new) <= obj_rank(old)):
        return []
    routed: list[Routed] = []
    for index in indexes:
        before = expected(index, old, shards)
        after = expected(index, new, shards, strict=not _same_key_values(index, old, new))
        if before is not None and (after is None or before[2] != after[2]):
            stamp = (new.updated_at, new.version)
            routed.append((before[0], index.id, before[2], new.id, *stamp, _REMOVED))
        if after is not None:
            routed.append(after)
    return routed


def _same_key_values(index: IndexDef, old: ObjRow | None, new: ObjRow) -> bool:
    """True if `old` is live and holds `new`'s values of the index's key properties."""
    if old is None or _REMOVED in (old.state, new.state):
        return False
    before, after = _json.decode(old.data), _json.decode(new.data)
    return all(p in before and p in after and before[p] == after[p] for p in index.key_properties)


def judge(
    index: IndexDef, row: ObjRow | None, obj_id: int, stored: Iterable[Routed], shards: int
) -> list[Routed]:
    """The entries that repair the index for one object, given its stored entries.

    `row` is the stored object (None if there is none), `stored` its entries
    in this index on every shard. A live entry for another key than the
    object's is stale (dangling if the object is gone or deleted) and gets a
    removal; a missing live entry for the object's key is written. Entries
    newer than the object are left alone: the write that made them is not
    fully applied yet.
    """
    want = expected(index, row, shards)
    seen = (row.updated_at, row.version) if row is not None else (0, 0)
    fixes: list[Routed] = []
    has_live = False
    newer_at_want = False
    for shard, index_id, key, _, updated_at, version, state in stored:
        if want is not None and key == want[2]:
            has_live = has_live or state == _NORMAL
            newer_at_want = newer_at_want or (updated_at, version) > (want[4], want[5])
            continue
        if state == _NORMAL and (row is None or (updated_at, version) <= seen):
            stamp = max((updated_at, version), seen)
            fixes.append((shard, index_id, key, obj_id, *stamp, _REMOVED))
    if want is not None and not has_live and not newer_at_want:
        fixes.append(want)
    return fixes
