"""What a backend scan takes and gives: list rows, scans of lists and indexes, tracers.

Plain tuples and NamedTuples, shared by the backends, the cache and the
read paths that build records from them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from .cursor import Seek
from .json import decode
from .records import Assoc

#: (shard, sql, seconds) for every statement a backend runs.
Tracer = Callable[[int, str, float], None]

#: A row of an association list: (id2, time, updated_at, data).
ListRow = tuple[int, int, int, bytes | None]

#: A row of a list read in id2 order: (id2,).
Id2Row = tuple[int]


def normal_assocs(id1: int, atype: str, rows: list[ListRow]) -> list[Assoc]:
    """The records of a shard's rows of the normal edges of `(id1, atype)`, built
    straight from the driver's rows (data: JSON bytes or None), in one pass."""
    return [
        Assoc(id1, atype, id2, time, "normal", stamp, None if data is None else decode(data))
        for id2, time, stamp, data in rows
    ]


class EdgeScan(NamedTuple):
    """One index range scan of the list `(id1, atype, state)`, newest first.

    `seek` positions the scan on `(time, id2)`; `high`/`low` bound `time`
    (inclusive); `offset` skips rows (only assoc_range's `pos` uses it).
    """

    id1: int
    atype: int
    state: int
    seek: Seek
    limit: int
    high: int | None = None
    low: int | None = None
    offset: int = 0


class IdsJoin(NamedTuple):
    """The id2s of the list `(id1, atype)` in `states` that are in (`keep`) or not in
    the list `(other, other_atype)` in `other_states`, both on one shard, in id2 order
    (descending when `forward`) past id2 `boundary`, at most `limit`: one statement."""

    id1: int
    atype: int
    states: tuple[int, ...]
    other: int
    other_atype: int
    other_states: tuple[int, ...]
    keep: bool
    boundary: int | None
    forward: bool
    limit: int


class ListsUnion(NamedTuple):
    """The distinct id2s of the lists `(id1, atype)` in `states` for these id1s, all on
    one shard, in id2 order (descending when `forward`) past id2 `boundary`, at most
    `limit`: one statement. Not `ordered`: in no order, repeats allowed, all of them
    or (when the lists are long) `limit` of them (a count's read)."""

    id1s: Sequence[int]
    atype: int
    states: tuple[int, ...]
    boundary: int | None
    forward: bool
    limit: int
    ordered: bool = True


class ListsUnions(NamedTuple):
    """`ListsUnion` on every shard of `groups` (id1s by shard) at once: what
    `Backend.unions` runs, one statement a shard (a two-hop reach reads ~12 shards,
    and a call of the backend each, with its scan, cost ~2.4 µs more a shard)."""

    groups: Mapping[int, Sequence[int]]
    atype: int
    states: tuple[int, ...]
    boundary: int | None
    forward: bool
    limit: int
    ordered: bool = True

    def on(self, shard: int) -> ListsUnion:
        """The union of `shard`'s lists, one statement."""
        return ListsUnion(self.groups[shard], *self[1:])


class IdsProbe(NamedTuple):
    """Those of `id2s` in the list `(id1, atype)` in `states`, at most `limit` (None:
    all), in id2 order (descending when `forward`): `Backend.probe_id2s` for ids the
    caller has already put in that order, distinct (a list's own ids, read in it),
    so that the backend need not sort and check them (~3.6 µs for 200)."""

    id1: int
    atype: int
    states: tuple[int, ...]
    id2s: Sequence[int]
    forward: bool
    limit: int | None


class ShortProbe(NamedTuple):
    """The ids of list `(id1, atype)` in `states` past id2 `boundary` in id2 order
    (descending when `forward`), when it has fewer than `size` of them, probed in the
    list `(other, other_atype)` in `other_states` on shard `other_shard`: those found,
    at most `limit` (`Backend.probe_short`: an intersection's short list read and
    probed in the other, two statements; None when the list has `size` or more)."""

    id1: int
    atype: int
    states: tuple[int, ...]
    other_shard: int
    other: int
    other_atype: int
    other_states: tuple[int, ...]
    boundary: int | None
    forward: bool
    size: int
    limit: int


#: A set statement on one shard (`Backend.set_ids`).
SetScan = IdsJoin | ListsUnion | IdsProbe


#: A secondary index entry: (index id, key, object id, updated_at, version, state)
#: (`core.entities`).
IndexEntry = tuple[int, bytes, int, int, int, int]


class IndexScan(NamedTuple):
    """A range scan of one index's live entries: `low <= key < high`, ordered by `(key, id)`.

    `after` is the last `(key, id)` of the previous page (exclusive), in the
    scan's direction; `desc` reads from the high end down.
    """

    low: bytes
    high: bytes
    after: tuple[bytes, int] | None
    desc: bool
    limit: int
