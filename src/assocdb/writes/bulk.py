"""Turning a stream of edge tuples into per-shard rounds of rows for a bulk load (pure).

Each input edge is `(id1, atype, id2)`, optionally followed by `time` and
`data`; it becomes its forward row and, for types with an inverse, the inverse
row, exactly as `assoc_add` would plan them, all stamped with the load's one
`updated_at`. The checks are those of single writes; an error names the
edge's position in the input. The common shapes take a fast path, since a
load of millions of edges spends most of its Python time here.

`Rounds` gathers the rows into rounds of per-shard batches; a bad edge ends
the rounds after the edges before it, so the caller stores those and then
raises `Rounds.error`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ..core import json as _json
from ..core.errors import AssocdbError, InvalidRequest
from ..core.ids import MAX_INT64, MIN_TIME, check_id, check_time, shard_of
from ..core.merge import EdgeTuple, State

#: name -> (type id, inverse type id or None)
Resolve = Callable[[object], tuple[int, int | None]]

_NORMAL = int(State.NORMAL)


Batch = dict[int, list[EdgeTuple]]  # shard -> rows


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
        # of edges spends most of its Python time here.
        ua, shards, size = self._updated_at, self._shards, self._size
        default_time = ua // 1000
        kinds: dict[object, tuple[int, int | None]] = {}
        where: dict[int, list[EdgeTuple]] = {}  # id -> its shard's rows in this round
        batch: Batch = {}
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
                try:
                    id1, atype, id2, time, raw = _unpack(edge, default_time, self._max_data)
                    kind = kinds.get(atype)
                    if kind is None:
                        kind = kinds[atype] = self._resolve(atype)
                except AssocdbError as exc:
                    message = f"edge #{position} {edge!r}: {exc.message}"
                    self.error = type(exc)(message, **exc.details)
                    bad = True
                    break
            atype_id, inverse_id = kind
            rows = where.get(id1)
            if rows is None:
                rows = where[id1] = batch.setdefault(shard_of(id1, shards), [])
            rows.append((id1, atype_id, id2, _NORMAL, time, ua, raw))
            count += 1
            if inverse_id is not None and not (inverse_id == atype_id and id1 == id2):
                rows = where.get(id2)
                if rows is None:
                    rows = where[id2] = batch.setdefault(shard_of(id2, shards), [])
                rows.append((id2, inverse_id, id1, _NORMAL, time, ua, raw))
                count += 1
            if count >= size:
                self.edges = position
                yield batch
                batch, where, count = {}, {}, 0
        self.edges = position - 1 if bad else position
        if batch:
            yield batch


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
