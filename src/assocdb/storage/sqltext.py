"""The SQL text every engine shares: table columns and keys, inserts, the keyset
scan and its seek (`past`), IN lists, and rows read back as records."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any, TypeVar

from ..core.compress import unpack
from ..core.errors import InvalidRequest
from ..core.merge import (
    ObjRow,
)
from ..core.scans import IndexEntry

EDGE_COLUMNS = ("id1", "atype", "id2", "state", "time", "updated_at", "data")
OBJ_COLUMNS = ("id", "otype", "state", "version", "updated_at", "data")
NODE_COLUMNS = ("node", "atype", "state", "updated_at")
COUNT_COLUMNS = ("id1", "atype", "state", "n")
ENTRY_COLUMNS = ("ikey", "id", "updated_at", "version", "state")
#: The tables `export_table` reads (besides `index_N`), and the key each is read in order of.
TABLE_COLUMNS = {
    "edges": EDGE_COLUMNS,
    "counts": COUNT_COLUMNS,
    "node_states": NODE_COLUMNS,
    "objects": OBJ_COLUMNS,
    "timelines": ("owner", "entries"),
}
TABLE_KEYS = {
    "edges": ("id1", "atype", "id2"),
    "counts": ("id1", "atype", "state"),
    "node_states": ("node", "atype"),
    "objects": ("id",),
    "timelines": ("owner",),
}
INDEX_TABLE = re.compile(r"index_[0-9]{1,9}")
EDGES = ", ".join(EDGE_COLUMNS)
OBJECTS = ", ".join(OBJ_COLUMNS)
ENTRIES = ", ".join(ENTRY_COLUMNS)
NODES = ", ".join(NODE_COLUMNS)
SELECT_EDGES = f"SELECT {EDGES} FROM {{s}}.edges WHERE"

IN_CHUNK = 500  # ids per IN (...) list
K = TypeVar("K")


def table_key(table: str) -> tuple[str, ...]:
    """The key columns of a table `export_table` reads; InvalidRequest for another name."""
    key = TABLE_KEYS.get(table)
    if key is not None:
        return key
    if INDEX_TABLE.fullmatch(table):
        return ("ikey", "id")
    raise InvalidRequest(f"no table {table!r} to export (known: {', '.join(TABLE_KEYS)}, index_N)")


def insert(table: str, columns: Sequence[str]) -> str:
    """`INSERT INTO` a shard's table, with a mark for each column (for `Dialect.upsert`)."""
    return f"INSERT INTO {{s}}.{table} ({', '.join(columns)}) VALUES ({marks(len(columns))})"


@lru_cache(maxsize=128)
def scan_sql(
    row_values: bool,
    high: bool,
    low: bool,
    boundary: bool,
    forward: bool,
    inclusive: bool,
    offset: bool,
    columns: str,
) -> str:
    where = "id1 = ? AND atype = ? AND state = ?"
    if high:
        where += " AND time <= ?"
    if low:
        where += " AND time >= ?"
    if boundary:
        where += " AND " + seek_past(
            ("time", "id2"), "<" if forward else ">", inclusive, row_values
        )
    order = "DESC" if forward else "ASC"
    sql = (
        f"SELECT {columns} FROM {{s}}.edges WHERE {where} "
        f"ORDER BY time {order}, id2 {order} LIMIT ?"
    )
    return sql + " OFFSET ?" if offset else sql


@lru_cache(maxsize=256)
def list_rows_sql(by_key: str, n: int) -> str:
    """The edges of `n` id2s of a list in one state as list rows, newest first: each
    id2 a lookup of the key index (`by_key`: the engine's hint to use it), the state
    filtered and the few rows sorted by the engine (`assoc_get`)."""
    return (
        f"SELECT id2, time, updated_at, data FROM {{s}}.edges{by_key}"
        f" WHERE id1 = ? AND atype = ? AND state = ? AND id2 IN ({marks(n)})"
        " ORDER BY time DESC, id2 DESC"
    )


def seek_past(columns: Sequence[str], op: str, inclusive: bool, row_values: bool) -> str:
    """Rows past a key of `columns` in the direction `op` ("<" or ">") walks.

    With row values, `(a, b) > (?, ?)`. Without, spelled out as
    `(a > ? OR (a = ? AND b > ?))`, which MySQL's range optimizer turns into
    ranges of the index; `past_params` gives the parameters either way.
    """
    last = op + "=" if inclusive else op
    if row_values:
        return f"({', '.join(columns)}) {last} ({marks(len(columns))})"
    terms = [f"{columns[0]} {last if len(columns) == 1 else op} ?"]
    for n in range(1, len(columns)):
        equal = " AND ".join(f"{column} = ?" for column in columns[:n])
        terms.append(f"({equal} AND {columns[n]} {last if n == len(columns) - 1 else op} ?)")
    return f"({' OR '.join(terms)})"


def past_params(key: Sequence[Any], row_values: bool) -> list[Any]:
    if row_values:
        return list(key)
    return [value for n in range(len(key)) for value in key[: n + 1]]


def chunks(ids: Sequence[K], size: int = IN_CHUNK) -> Iterator[Sequence[K]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def marks(n: int) -> str:
    """`n` parameter marks, comma-separated (`?,?,?`)."""
    return ",".join("?" * n)


def plain_rows(rows: list[Any]) -> list[tuple[Any, ...]]:
    return [tuple(map(plain, row)) for row in rows]


def plain(value: Any) -> Any:
    """A column value as every engine gives it back: blobs as bytes (not memoryview)."""
    return bytes(value) if isinstance(value, (bytearray, memoryview)) else value


def obj_row(row: Any) -> ObjRow:
    return ObjRow(row[0], row[1], row[2], row[3], row[4], unpack(bytes(row[5])))


def entry_row(index: int, row: Any) -> IndexEntry:
    key, id, updated_at, version, state = row
    return (index, bytes(key), int(id), int(updated_at), int(version), int(state))


def walk_after(
    key: Sequence[str], after: Sequence[Any] | None, row_values: bool
) -> tuple[str, list[Any]]:
    """The keyset walk of a whole table in `key` order, never OFFSET: the WHERE clause
    that continues past `after` and its parameters ("" and none from the start)."""
    if after is None:
        return "", []
    return " WHERE " + seek_past(key, ">", False, row_values), past_params(after, row_values)
