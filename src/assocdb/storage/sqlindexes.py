"""The secondary index tables of an SQL graph's shards (`core.entities`): entries merged
under the write rule, scanned, exported, purged and dropped; a table is made when first
written. The `SQLBackend` methods of the same names call these."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.entities import merge_entries
from ..core.errors import AssocdbError, Unavailable
from ..core.scans import IndexEntry, IndexScan
from .dialect import Session
from .sqltext import (
    ENTRIES,
    ENTRY_COLUMNS,
    chunks,
    entry_row,
    marks,
    past_params,
    seek_past,
    walk_after,
)

if TYPE_CHECKING:
    from .sql import SQLBackend


def index_apply(b: SQLBackend, shard: int, entries: Sequence[IndexEntry]) -> int:
    by_index: dict[int, list[IndexEntry]] = {}
    for entry in entries:
        by_index.setdefault(entry[0], []).append(entry)
    for index in by_index:
        _index_table(b, shard, index)

    def body(session: Session) -> int:
        changed = 0
        for index, writes in sorted(by_index.items()):
            ids = sorted({entry[2] for entry in writes})
            current = {e[:3]: e for e in _entries(b, session, shard, index, ids)}
            winners = merge_entries(current, writes)
            upsert = b.dialect.upsert(f"index_{index}", ENTRY_COLUMNS, 2)
            b._store(session, shard, upsert, [entry[1:] for entry in winners])
            changed += len(winners)
        return changed

    try:
        return b._in_transaction(shard, body)
    except AssocdbError as exc:
        if not b.dialect.missing_table(exc):
            raise
        with b._tables_lock:
            b._tables.difference_update((shard, index) for index in by_index)
        raise Unavailable(f"shard {shard}: an index table was dropped; retrying") from exc


def index_entries(b: SQLBackend, shard: int, index: int, ids: Sequence[int]) -> list[IndexEntry]:
    # No table: nothing written to this index on this shard yet.
    return b._unless_missing(lambda: _entries(b, None, shard, index, ids), list)


def index_scan(b: SQLBackend, shard: int, index: int, scan: IndexScan) -> list[tuple[bytes, int]]:
    cmp, order = ("<", "DESC") if scan.desc else (">", "ASC")
    sql = f"SELECT ikey, id FROM {{s}}.index_{index} WHERE ikey >= ? AND ikey < ?"
    params: list[Any] = [scan.low, scan.high]
    if scan.after is not None:
        sql += " AND " + seek_past(("ikey", "id"), cmp, False, b.dialect.row_values)
        params += past_params(scan.after, b.dialect.row_values)
    sql += f" AND state = 0 ORDER BY ikey {order}, id {order} LIMIT ?"
    query = b._q(sql, shard)
    rows = b._unless_missing(lambda: b._query(shard, query, [*params, scan.limit]), list)
    return [(bytes(k), int(i)) for k, i in rows]


def index_export(
    b: SQLBackend, shard: int, index: int, after: tuple[bytes, int] | None, limit: int
) -> list[IndexEntry]:
    sql = f"SELECT {ENTRIES} FROM {{s}}.index_{index}"
    where, params = walk_after(("ikey", "id"), after, b.dialect.row_values)
    sql += where
    sql += " ORDER BY ikey, id LIMIT ?"
    query = b._q(sql, shard)
    rows = b._unless_missing(lambda: b._query(shard, query, [*params, limit]), list)
    return [entry_row(index, row) for row in rows]


def index_purge(b: SQLBackend, shard: int, index: int, before: int) -> int:
    where = f"FROM {{s}}.index_{index} WHERE state = 3 AND updated_at < ?"

    def body(session: Session) -> int:  # drivers disagree on affected rows: count first
        (found,) = b._select(session, shard, f"SELECT COUNT(*) {where}", (before,))[0]
        b._run(session, shard, b._q(f"DELETE {where}", shard), (before,))
        return int(found)

    return b._unless_missing(lambda: b._in_transaction(shard, body), int)


def index_drop(b: SQLBackend, shard: int, index: int) -> None:
    with b._tables_lock:
        b._tables.discard((shard, index))
    b._ddl(shard, f"DROP TABLE IF EXISTS {{s}}.index_{index}")


def _index_table(b: SQLBackend, shard: int, index: int) -> None:
    """Create the index's table on the shard, unless this process knows it exists."""
    if (shard, index) in b._tables:
        return
    b._ddl(shard, *b.dialect.index_ddl(index))
    with b._tables_lock:
        b._tables.add((shard, index))


def _entries(
    b: SQLBackend, session: Session | None, shard: int, index: int, ids: Sequence[int]
) -> list[IndexEntry]:
    found: list[IndexEntry] = []
    for chunk in chunks(ids):
        sql = f"SELECT {ENTRIES} FROM {{s}}.index_{index} WHERE id IN ({marks(len(chunk))})"
        found += (entry_row(index, row) for row in b._select(session, shard, sql, chunk))
    return found
