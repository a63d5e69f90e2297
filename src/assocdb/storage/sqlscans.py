"""One range of an association list read by its index: `Backend.scan` (list rows, what
records are built from) and `Backend.scan_keys` (each row's place in its list, `(time,
id2)`: what a query's page of ids needs, two columns of the row, not four).

Every uncached list read comes here: the statement is looked up once per shape and
shard, and the driver's rows are returned as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.cursor import START
from ..core.scans import EdgeScan
from .sqltext import past_params, scan_sql

if TYPE_CHECKING:
    from .sql import SQLBackend

#: What a scan selects: a list row (`ListRow`), or its place in the list.
ROWS, KEYS = "id2, time, updated_at, data", "time, id2"


class Scans:
    """A backend's rendered scan statements of one column list, by shard and shape."""

    __slots__ = ("columns", "first", "shaped")

    def __init__(self, columns: str) -> None:
        self.columns = columns
        self.first: dict[int, str] = {}  # shard: the statement of a list's first page
        self.shaped: dict[tuple[int, bool, bool, bool, bool, bool, bool], str] = {}


def scan(backend: SQLBackend, scans: Scans, shard: int, query: EdgeScan) -> list[Any]:
    """The rows (`scans.columns`) of one list range, in the seek's direction."""
    id1, atype, state, seek, limit, high, low, offset = query
    row_values = backend.dialect.row_values
    if seek == START and high is None and low is None and not offset:
        # A list's first page (assoc_range's usual read): its statement per shard.
        sql = scans.first.get(shard)
        if sql is None:
            first = scan_sql(row_values, False, False, False, True, False, False, scans.columns)
            sql = scans.first[shard] = backend._render(first, shard)
        return backend._query(shard, sql, [id1, atype, state, limit])
    boundary = seek.boundary
    params: list[Any] = [id1, atype, state]
    if boundary is not None:
        # A boundary tighter than the time bound must be the one the index
        # seeks on; otherwise SQLite seeks on time and filters its way down.
        if seek.forward and high is not None and boundary[0] <= high:
            high = None
        if not seek.forward and low is not None and boundary[0] >= low:
            low = None
    if high is not None:
        params.append(high)
    if low is not None:
        params.append(low)
    if boundary is not None:
        params += past_params(boundary, row_values)
    params.append(limit)
    if offset:
        params.append(offset)
    shape = (
        high is not None,
        low is not None,
        boundary is not None,
        seek.forward,
        seek.inclusive,
        bool(offset),
    )
    sql = scans.shaped.get((shard, *shape))
    if sql is None:
        template = scan_sql(row_values, *shape, scans.columns)
        sql = scans.shaped[(shard, *shape)] = backend._render(template, shard)
    return backend._query(shard, sql, params)
