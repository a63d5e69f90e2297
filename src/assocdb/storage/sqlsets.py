"""Set queries in id2 order, one statement each: a list's id2s past a boundary,
two lists of one shard joined (intersection, difference), and the union of many lists of one shard.
The `SQLBackend` methods `scan_id2`, `set_ids` and `unions` call these.

Every statement reads the `(id1, atype, id2)` key index alone (it holds the
state too, in SQLite's WITHOUT ROWID tables, InnoDB and PostgreSQL's INCLUDE),
walking it in id2 order, so a page stops at its limit; the hand-written query
of the same work is one such statement, and a page of a set query on one
shard costs what it does (issue 43: a difference of two lists of one node
took four statements and ~4x the hand-written join).

Statements are rendered once per shape (the `_template`s): the ids of a
union's lists are padded to a power of two with 0 (no list has that id) so
that a driver's statement cache holds a handful of shapes, not one per count
of lists. SQLite with JSON (`SQLBackend._union_packed`) binds a union's ids
as one JSON array instead, read by `json_each` as the outer loop of the join
(`SQLiteBackend._union_rows_template`; not an `IN` list, which it first
builds into a temporary index on every run, ~25% of the statement), and has
the engine pack the rows into one JSON array: a two-hop reach's ~500 ids
cost the driver a tuple and an int each. A union read for a count
(`ListsUnion.ordered` false) leaves its ids unsorted.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import msgspec

from ..core.scans import Id2Row, IdsJoin, IdsProbe, ListsUnion, ListsUnions, SetScan
from .sqltext import IN_CHUNK, chunks, marks

if TYPE_CHECKING:
    from .dialect import Session
    from .sql import SQLBackend

_UNORDERED = 4  # a union reads up to this many times its limit of rows unordered
#: A union's rows as one JSON array (`SQLBackend._union_packed`)
_PACKED = msgspec.json.Decoder(list[int])


def scan_id2(
    b: SQLBackend,
    shard: int,
    id1: int,
    atype: int,
    states: Sequence[int],
    boundary: int | None,
    forward: bool,
    limit: int,
) -> list[Id2Row]:
    bounded = boundary is not None
    shape = (shard, 0, len(states), bounded, forward)  # (0: no join's shape)
    sql = b._set_sql.get(shape)
    if sql is None:
        sql = b._set_sql[shape] = b._q(_scan_template(b._by_key, *shape[2:]), shard)
    params = [id1, atype, boundary, *states, limit] if bounded else [id1, atype, *states, limit]
    return b._query(shard, sql, params)


def set_ids(b: SQLBackend, shard: int, query: SetScan) -> list[int]:
    if isinstance(query, IdsJoin):
        return _joined(b, shard, query)
    if isinstance(query, IdsProbe):
        q = query
        return probe(b, shard, q.id1, q.atype, q.states, q.id2s, q.forward, q.limit)
    return _united(b, shard, query)


def probe(
    b: SQLBackend,
    shard: int,
    id1: int,
    atype: int,
    states: Sequence[int],
    ordered: Sequence[int],
    forward: bool,
    limit: int | None,
) -> list[int]:
    """Those of `ordered` (distinct, in id2 order) in the list, at most `limit`: one
    statement per 500 ids (`SQLBackend.probe_id2s`)."""
    found: list[int] = []
    if not ordered:
        return found
    for chunk in (ordered,) if len(ordered) <= IN_CHUNK else chunks(ordered):  # (no copy)
        left = None if limit is None else limit - len(found)
        width = 0 if b._union_packed else len(chunk)  # (bound as one JSON array: one shape)
        sql = b._probe_sql(shard, width, len(states), forward, left is not None)
        params = b._probe_params(id1, atype, chunk, states, left)
        found += [row[0] for row in b._query(shard, sql, params)]
        if limit is not None and len(found) >= limit:
            break
    if limit is None:  # the engine's order is its own
        found.sort(reverse=forward)
    return found


def _joined(b: SQLBackend, shard: int, q: IdsJoin) -> list[int]:
    """Two lists of one shard joined (`IdsJoin`): one statement, its SQL looked up by
    shape and shard in one dict (a page of a node's two lists is little more)."""
    id1, atype, states, other, other_atype, other_states, keep, boundary, forward, limit = q
    shape = (shard, len(states), len(other_states), keep, boundary is not None, forward)
    sql = b._set_sql.get(shape)
    if sql is None:
        sql = b._set_sql[shape] = b._q(_join_template(b._by_key, *shape[1:]), shard)
    if boundary is None:
        params = [id1, atype, *states, other, other_atype, *other_states, limit]
    else:
        params = [id1, atype, boundary, *states, other, other_atype, *other_states, limit]
    return [row[0] for row in b._query(shard, sql, params)]


def _united(b: SQLBackend, shard: int, q: ListsUnion) -> list[int]:
    if b._union_packed:  # the ids as one JSON array (SQLite: `_union_rows_template`)
        width, params = 0, [f"[{','.join(map(str, q.id1s))}]", q.atype]
    else:
        id1s = list(q.id1s)
        width = 1 << (len(id1s) - 1).bit_length()  # padded: a few shapes, not one per count
        id1s += [0] * (width - len(id1s))  # (no list has id 0)
        params = [*id1s, q.atype]
    bounded = q.boundary is not None
    if bounded:
        params.append(q.boundary)
    params += q.states
    # First the lists' rows as they lie, at most a few times the limit: most unions
    # (the lists of someone's followees) are short, and sorting a few hundred ids in
    # Python costs less than the engine's two temporary B-trees for DISTINCT and
    # ORDER BY (~3x the statement). Lists longer than that: the ordered statement.
    most = _UNORDERED * q.limit + 1
    shape = (width, len(q.states), bounded, q.forward)
    rows = b._query(shard, b._q(b._union_rows_template(*shape), shard), [*params, most])
    ids = _PACKED.decode(rows[0][0]) if b._union_packed else [row[0] for row in rows]
    if len(ids) < most:
        if not q.ordered:  # (the caller's set drops the repeats)
            return ids
        return sorted(set(ids), reverse=q.forward)[: q.limit]
    return ordered_union(b, shard, q, width, params)


def packed_unions(
    b: SQLBackend, q: ListsUnions, sessions: Sequence[Session], sqls: Sequence[str]
) -> list[list[int]]:
    """`_united` on each shard of `q` on SQLite with JSON, its usual case in few steps
    (a two-hop reach runs ~12 a call): `sessions` and `sqls` (its rows statement) by
    shard, the parameters past the ids built once, each statement through the choke
    point (`_run`) and nothing else."""
    groups, atype, states, boundary, forward, limit, ordered = q
    most = _UNORDERED * limit + 1
    tail: list[Any] = [atype] if boundary is None else [atype, boundary]
    tail += states
    tail.append(most)
    run, found = b._run, []
    for shard, id1s in groups.items():
        params = [f"[{','.join(map(str, id1s))}]", *tail]
        ids: list[int] = _PACKED.decode(run(sessions[shard], shard, sqls[shard], params)[0][0])
        if len(ids) >= most:
            ids = ordered_union(b, shard, q.on(shard), 0, params[:-1])
        elif ordered:
            ids = sorted(set(ids), reverse=forward)[:limit]
        found.append(ids)
    return found


def ordered_union(
    b: SQLBackend, shard: int, q: ListsUnion, width: int, params: list[Any]
) -> list[int]:
    """The first `limit` distinct ids of lists too long to read unordered (`params`:
    the rows statement's, but its limit)."""
    sql = b._q(
        _union_template(b._by_key, width, len(q.states), q.boundary is not None, q.forward), shard
    )
    return [row[0] for row in b._query(shard, sql, [*params, q.limit])]


@lru_cache(maxsize=256)
def _scan_template(by_key: str, states: int, bounded: bool, forward: bool) -> str:
    """A list's id2s past a boundary in id2 order, a walk of its key index (rendered
    once per shape: building it on every call cost ~1 µs of a page's statement). Only
    id2: the index holds state and time too, but no caller needs them, and building
    Python ints for them costs more than the walk."""
    op, order = ("<", "DESC") if forward else (">", "ASC")
    bound = f" AND id2 {op} ?" if bounded else ""
    return (
        f"SELECT id2 FROM {{s}}.edges{by_key} WHERE id1 = ? AND atype = ?{bound}"
        f" AND state IN ({marks(states)}) ORDER BY id2 {order} LIMIT ?"
    )


def short_ids_template(by_key: str, states: int, bounded: bool, forward: bool) -> str:
    """`_scan_template`'s ids as one JSON array, and how many (SQLite with JSON:
    `SQLiteBackend.probe_short` binds the array for its probe as it comes)."""
    scan = _scan_template(by_key, states, bounded, forward)
    return f"SELECT count(*), json_group_array(id2) FROM ({scan})"


@lru_cache(maxsize=256)
def _join_template(
    by_key: str, states: int, other_states: int, keep: bool, bounded: bool, forward: bool
) -> str:
    """The id2s of list a that are (or are not) in list b: a walk of a's key index in
    id2 order, each id looked up in b's (the join a hand-written query would be)."""
    op, order = ("<", "DESC") if forward else (">", "ASC")
    bound = f" AND a.id2 {op} ?" if bounded else ""
    return (
        f"SELECT a.id2 FROM {{s}}.edges a{by_key} WHERE a.id1 = ? AND a.atype = ?{bound}"
        f" AND a.state IN ({marks(states)}) AND {'' if keep else 'NOT '}EXISTS"
        f" (SELECT 1 FROM {{s}}.edges b{by_key} WHERE b.id1 = ? AND b.atype = ?"
        f" AND b.id2 = a.id2 AND b.state IN ({marks(other_states)}))"
        f" ORDER BY a.id2 {order} LIMIT ?"
    )


@lru_cache(maxsize=256)
def rows_template(id1s: int, states: int, bounded: bool, forward: bool) -> str:
    """The rows of many lists of one type on one shard past a boundary, in no order."""
    bound = f" AND id2 {'<' if forward else '>'} ?" if bounded else ""
    return (
        f"SELECT id2 FROM {{s}}.edges WHERE id1 IN ({marks(id1s)}) AND atype = ?{bound}"
        f" AND state IN ({marks(states)}) LIMIT ?"
    )


@lru_cache(maxsize=256)
def _union_template(by_key: str, id1s: int, states: int, bounded: bool, forward: bool) -> str:
    """The distinct id2s of many lists of one type on one shard, in id2 order (`id1s`
    0: the ids bound as one JSON array, SQLite's `json_each`)."""
    op, order = ("<", "DESC") if forward else (">", "ASC")
    bound = f" AND id2 {op} ?" if bounded else ""
    ids = marks(id1s) if id1s else "SELECT value FROM json_each(?)"
    return (
        f"SELECT DISTINCT id2 FROM {{s}}.edges{by_key} WHERE id1 IN ({ids})"
        f" AND atype = ?{bound} AND state IN ({marks(states)}) ORDER BY id2 {order} LIMIT ?"
    )
