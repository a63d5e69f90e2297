"""Whole tables of an SQL graph's shards, in key order: export, row counts, bounds and
summaries for replica verify and moves, a shard copy's pages merged in, and the recount
of the counts table. The `SQLBackend` methods of the same names call these."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.merge import EdgeKey, EdgeRow, EdgeTuple, State, merge_edges
from ..core.records import CountMismatch
from .backend import Older
from .dialect import Session
from .sqltext import (
    EDGES,
    ENTRY_COLUMNS,
    TABLE_COLUMNS,
    TABLE_KEYS,
    chunks,
    marks,
    past_params,
    plain,
    seek_past,
    table_key,
    walk_after,
)

if TYPE_CHECKING:
    from .sql import SQLBackend


def export_edges(
    b: SQLBackend, shard: int, after: EdgeKey | None, limit: int, older: Older = None
) -> list[EdgeRow]:
    sql = f"SELECT {EDGES} FROM {{s}}.edges{b._by_key}"
    where, params = walk_after(("id1", "atype", "id2"), after, b.dialect.row_values)
    sql += where
    if older is not None:  # the expiry pass: only live rows of ttl types older than the bound
        bounds = sorted(older.items())
        terms = " OR ".join(["(atype = ? AND time < ?)"] * len(bounds)) or "1 = 0"
        sql += f"{' AND' if where else ' WHERE'} state <> ? AND ({terms})"
        params += [int(State.REMOVED), *(v for bound in bounds for v in bound)]
    sql += " ORDER BY id1, atype, id2 LIMIT ?"
    rows = b._query(shard, b._q(sql, shard), [*params, limit], slow=True)
    return [EdgeRow(*r) for r in rows]


def export_table(
    b: SQLBackend, shard: int, table: str, after: Sequence[Any] | None, limit: int
) -> list[tuple[Any, ...]]:
    if table == "meta":  # the graph's settings, beside shard 0 (`shard` -1 renders it)
        key_column = b.dialect.meta_key
        sql = f"SELECT {key_column}, value FROM {{s}}.meta"
        params: list[Any] = []
        if after is not None:
            sql += f" WHERE {key_column} > ?"
            params = [after[0]]
        sql += f" ORDER BY {key_column} LIMIT ?"
        rows = b._query(0, b._q(sql, -1), [*params, limit])
        return [(str(k), bytes(v)) for k, v in rows]
    key = table_key(table)
    columns, decode = b._exported(table)
    sql = f"SELECT {columns} FROM {{s}}.{table}"
    where, params = walk_after(key, after, b.dialect.row_values)
    sql += where
    sql += f" ORDER BY {', '.join(key)} LIMIT ?"
    query = b._q(sql, shard)
    # A table made on first use (an index, old graphs' timelines) may be missing: no rows.
    rows = b._unless_missing(lambda: b._query(shard, query, [*params, limit], slow=True), list)
    return decode(rows)


def count_rows(b: SQLBackend, shard: int, table: str) -> int:
    table_key(table)  # a known table, not any name
    query = b._q(f"SELECT COUNT(*) FROM {{s}}.{table}", shard)
    return int(b._unless_missing(lambda: b._query(shard, query, slow=True), lambda: [(0,)])[0][0])


def table_bound(
    b: SQLBackend, shard: int, table: str, after: Sequence[Any] | None, rows: int
) -> tuple[Any, ...] | None:
    key = table_key(table)
    sql = f"SELECT {', '.join(key)} FROM {{s}}.{table}"
    where, params = walk_after(key, after, b.dialect.row_values)
    sql += where
    sql += f" ORDER BY {', '.join(key)} LIMIT 1 OFFSET ?"
    query = b._q(sql, shard)
    found = b._unless_missing(lambda: b._query(shard, query, [*params, rows - 1], slow=True), list)
    return tuple(map(plain, found[0])) if found else None


def table_summary(
    b: SQLBackend,
    shard: int,
    table: str,
    after: Sequence[Any] | None,
    upto: Sequence[Any] | None,
) -> tuple[str, int, int]:
    key = table_key(table)
    columns = TABLE_COLUMNS.get(table, ENTRY_COLUMNS)
    where: list[str] = ["n <> 0"] if table == "counts" else []  # as good as no row
    params: list[Any] = []
    if after is not None:
        where.append(seek_past(key, ">", False, b.dialect.row_values))
        params += past_params(after, b.dialect.row_values)
    if upto is not None:
        where.append(seek_past(key, "<", True, b.dialect.row_values))
        params += past_params(upto, b.dialect.row_values)
    sql = f"SELECT COUNT(*), SUM({b.dialect.row_hash(columns)}) FROM {{s}}.{table}" + (
        f" WHERE {' AND '.join(where)}" if where else ""
    )
    query = b._q(sql, shard)
    found = b._unless_missing(
        lambda: b._query(shard, query, params, slow=True), lambda: [(0, None)]
    )
    rows, total = found[0]
    return type(b.dialect).__name__, int(rows), int(total or 0)


def recount(
    b: SQLBackend, shard: int, repair: bool, id1s: Sequence[int] | None = None
) -> list[CountMismatch]:
    # Without repair a consistent snapshot is enough; a repair locks the
    # shard's edges (shared) and counts so no write slips in between.
    share, lock = (b.dialect.share, b.dialect.lock) if repair else ("", "")
    if id1s is None:
        return _recount(b, shard, repair, "", (), share, lock)
    found: list[CountMismatch] = []
    for chunk in chunks(sorted(set(id1s))):
        where = f" WHERE id1 IN ({marks(len(chunk))})"
        found += _recount(b, shard, repair, where, chunk, share, lock)
    return found


def _recount(
    b: SQLBackend,
    shard: int,
    repair: bool,
    where: str,
    params: Sequence[int],
    share: str,
    lock: str,
) -> list[CountMismatch]:
    def body(session: Session) -> list[CountMismatch]:
        sql = f"SELECT id1, atype, state, COUNT(*) FROM {{s}}.edges{where}"
        sql += " GROUP BY id1, atype, state"
        actual = {
            (a, b, c): int(n)
            for a, b, c, n in b._run(session, shard, b._q(sql + share, shard), params)
        }
        sql = f"SELECT id1, atype, state, n FROM {{s}}.counts{where}"
        stored = {
            (a, b, c): int(n)
            for a, b, c, n in b._run(session, shard, b._q(sql + lock, shard), params)
        }
        wrong = [
            CountMismatch(shard, *key, stored.get(key, 0), actual.get(key, 0))
            for key in sorted(actual.keys() | stored.keys())
            if stored.get(key, 0) != actual.get(key, 0)
        ]
        if repair:
            fixes = [(m.id1, m.atype, m.state, m.actual) for m in wrong]
            b._store(session, shard, b._set_count, fixes)
        return wrong

    if repair:  # a repair acknowledged is a repair kept
        return b._durably(shard, body, slow=True)
    return b._in_transaction(shard, body, slow=True)


def copy_edges(b: SQLBackend, shard: int, after: EdgeKey | None, edges: Sequence[EdgeTuple]) -> int:
    """Merge a page of another replica's edges, in (id1, atype, id2) order, that
    follows key `after` (None: the table's start): `bulk_merge` for a shard copy.
    The stored rows of the page's whole key range are read in one range scan (and
    locked: a live write in the range waits for the commit, and one committed
    before is merged against), so a newer row is never overwritten and the count
    deltas are exact. Returns how many rows changed."""
    if not edges:
        return 0
    last = (edges[-1][0], edges[-1][1], edges[-1][2])

    def body(session: Session) -> int:
        current = {row[:3]: row for row in _edges_between(b, session, shard, after, last)}
        changed, deltas = merge_edges(current, edges)
        b._bulk_store(session, shard, changed)
        b._store(session, shard, b._add_count, sorted((*k, n) for k, n in deltas.items()))
        return len(changed)

    return b._in_transaction(shard, body, slow=True)


def _edges_between(
    b: SQLBackend, session: Session, shard: int, after: EdgeKey | None, last: EdgeKey
) -> list[EdgeTuple]:
    """The stored edges with keys in (`after`, `last`], locked."""
    rv, key = b.dialect.row_values, TABLE_KEYS["edges"]
    where = [seek_past(key, "<", True, rv)]
    params = past_params(last, rv)
    if after is not None:
        where.insert(0, seek_past(key, ">", False, rv))
        params = [*past_params(after, rv), *params]
    sql = f"SELECT {EDGES} FROM {{s}}.edges{b._by_key} WHERE {' AND '.join(where)}"
    return b._select(session, shard, sql, params)
