"""Turning a stream of edge tuples into per-shard rounds of rows for a bulk load (pure).

Each input edge is `(id1, atype, id2)`, optionally followed by `time` and
`data`; it becomes its forward row and, for types with an inverse, the inverse
row, exactly as `assoc_add` would plan them, all stamped with the load's one
`updated_at`. The checks are those of single writes; an error names the
edge's position in the input. The common shapes take a fast path, since a
load of millions of edges spends most of its Python time here.

`Rounds` gathers the rows into rounds of per-shard batches, the rows without
data packed (`core.bulkrows`: four ints each, grouped by id1); a bad edge ends
the rounds after the edges before it, so the caller stores those and then
raises `Rounds.error`.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ..core import json as _json
from ..core.bulkrows import PackedRows
from ..core.errors import AssocdbError, InvalidRequest
from ..core.ids import MAX_INT64, MIN_TIME, by_shard, check_id, check_time, shard_of
from ..core.merge import PLAIN_NORMAL as _NORMAL
from ..core.merge import EdgeTuple

#: name -> (type id, inverse type id or None)
Resolve = Callable[[object], tuple[int, int | None]]


Batch = dict[int, PackedRows]  # shard -> rows


class Rounds:
    """The rows of a load in rounds of at least `size` rows, per shard; iterate once.

    `edges` is the position of the latest input edge whose rows are in the
    rounds so far; `error` is a bad edge's error, if one ended the rounds
    early (the bad edge has no rows in them; every edge before it has).
    """

    def __init__(
        self,
        edges: Iterable[Sequence[Any]],
        resolve: Resolve,
        updated_at: int,
        max_data: int,
        shards: int,
        size: int,
    ) -> None:
        self._edges, self._resolve = edges, resolve
        self._updated_at, self._max_data = updated_at, max_data
        self._shards, self._size = shards, size
        self.edges = 0
        self.error: AssocdbError | None = None

    def __iter__(self) -> Iterator[Batch]:
        # One loop per edge, its checks and both rows inline: a load of millions
        # of edges spends most of its Python time here. A row without data is four
        # ints on its id1's list (`core.bulkrows`): no tuple per row, no shard per row.
        ua, shards, size = self._updated_at, self._shards, self._size
        default_time = ua // 1000
        kinds: dict[object, tuple[int, int | None]] = {}
        lists: dict[int, list[int]] = {}  # id1 -> its rows' quads in this round
        with_data: dict[int, list[EdgeTuple]] = {}  # shard -> its rows with data
        count = position = 0
        bad = False  # a bad edge ended the loop (not the input's own error)
        for position, edge in enumerate(_until_error(self._edges, self), 1):
            kind = None
            if type(edge) is tuple and len(edge) == 4 and type(edge[1]) is str:
                id1, atype, id2, time = edge
                raw = None
                kind = kinds.get(atype)
            if (
                kind is None
                or type(id1) is not int
                or type(id2) is not int
                or type(time) is not int
                or not 0 < id1 <= MAX_INT64
                or not 0 < id2 <= MAX_INT64
                or not MIN_TIME <= time <= MAX_INT64
            ):
                checked = self._checked(edge, position, kinds, default_time)
                if checked is None:  # (`error` says why)
                    bad = True
                    break
                id1, id2, time, raw, kind = checked
            atype_id, inverse_id = kind
            if inverse_id == atype_id and id1 == id2:
                inverse_id = None  # a symmetric self-edge: one row
            if raw is not None:
                count += _with_data(
                    with_data, shards, (id1, atype_id, id2, time, ua, raw), inverse_id
                )
            else:
                rows = lists.get(id1)
                if rows is None:
                    rows = lists[id1] = []
                rows += (id1, atype_id, id2, time)
                count += 1
                if inverse_id is not None:
                    rows = lists.get(id2)
                    if rows is None:
                        rows = lists[id2] = []
                    rows += (id2, inverse_id, id1, time)
                    count += 1
            if count >= size:
                self.edges = position
                yield _batch(lists, with_data, ua, shards)
                lists, with_data, count = {}, {}, 0
        self.edges = position - 1 if bad else position
        if lists or with_data:
            yield _batch(lists, with_data, ua, shards)

    def _checked(
        self,
        edge: Sequence[Any],
        position: int,
        kinds: dict[object, tuple[int, int | None]],
        default_time: int,
    ) -> tuple[int, int, int, bytes | None, tuple[int, int | None]] | None:
        """Any edge's checks (the loop's inline ones cover the common shape): its id1, id2,
        time, data and type ids, or None with `error` set if it is bad."""
        try:
            id1, atype, id2, time, raw = _unpack(edge, default_time, self._max_data)
            kind = kinds.get(atype)
            if kind is None:
                kind = kinds[atype] = self._resolve(atype)
        except AssocdbError as exc:
            message = f"edge #{position} {edge!r}: {exc.message}"
            self.error = type(exc)(message, **exc.details)
            return None
        return id1, id2, time, raw, kind


def _with_data(
    with_data: dict[int, list[EdgeTuple]],
    shards: int,
    edge: tuple[int, int, int, int, int, bytes],
    inverse_id: int | None,
) -> int:
    """Add an edge with data (`edge`: id1, atype, id2, time, updated_at, data) as tuples
    to its shards' rows; how many rows (1 or 2)."""
    id1, atype_id, id2, time, ua, raw = edge
    with_data.setdefault(shard_of(id1, shards), []).append(
        (id1, atype_id, id2, _NORMAL, time, ua, raw)
    )
    if inverse_id is None:
        return 1
    with_data.setdefault(shard_of(id2, shards), []).append(
        (id2, inverse_id, id1, _NORMAL, time, ua, raw)
    )
    return 2


def _batch(
    lists: dict[int, list[int]], with_data: dict[int, list[EdgeTuple]], ua: int, shards: int
) -> Batch:
    """A round's rows per shard: each shard's lists in ascending id1 order (a sort of
    the round's distinct ids, not of its rows), packed, beside its rows with data."""
    batch: Batch = {}
    for shard, ids in by_shard(sorted(lists), shards).items():
        packed = array("q")
        add = packed.fromlist
        for id in ids:
            add(lists[id])
        batch[shard] = PackedRows(packed, ua, with_data.pop(shard, None))
    for shard, rows in with_data.items():
        batch[shard] = PackedRows(array("q"), ua, rows)
    return batch


def _until_error(edges: Iterable[Sequence[Any]], rounds: Rounds) -> Iterator[Sequence[Any]]:
    """The input's edges, ending where reading it raises an AssocdbError (the input's
    own bad line, as `assocdb import` raises): the edges before it are stored."""
    try:
        yield from edges
    except AssocdbError as exc:
        rounds.error = exc


def _unpack(
    edge: Sequence[Any], default_time: int, max_data: int
) -> tuple[int, object, int, int, bytes | None]:
    if not isinstance(edge, (tuple, list)) or not 3 <= len(edge) <= 5:
        raise InvalidRequest("an edge is (id1, atype, id2[, time[, data]])")
    id1 = check_id(edge[0], "id1")
    if not isinstance(edge[1], str):
        raise InvalidRequest(f"atype must be a type name, got {edge[1]!r}")
    id2 = check_id(edge[2], "id2")
    time = check_time(edge[3]) if len(edge) > 3 and edge[3] is not None else default_time
    data = edge[4] if len(edge) > 4 else None
    raw = None if data is None else _json.encode(data, max_data, "association data")
    return id1, edge[1], id2, time, raw
