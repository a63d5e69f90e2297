"""A bulk load's round on a SQLite shard, inserted without reading when its keys are new.

`SQLBackend.bulk_merge` reads the stored rows of the lists a round writes and
merges them with the rule of single writes. When none of the round's keys is
stored and no key comes twice in the round (a load into new lists: every
round of a fresh load of distinct edges), the merge changes nothing: every
row is stored as written and adds one to its list's count in its state
(rounds with tombstones, whose time the merge places, are left to it).
SQLite tells us when that holds: the rows go in with a plain `INSERT` (no
`OR REPLACE`) under a savepoint, and the primary key and the unique index
`edges_key` refuse a row whose key is stored or came before in the round.
Then the savepoint is rolled back and the round takes the merging path
(nothing of the attempt stays), and the same load (its rows' one
`updated_at`) does not try the shard this way again (a load on top of stored
lists would throw away a prefix of each round). Both paths run in the round's
one transaction with `edges_key` in place, so no reader or writer can tell
them apart; the feed records the rows as `bulk_merge` does.

A load's rows come packed (`core.bulkrows.PackedRows`): the values a load's rows
share (state, `updated_at`, no data) are written in the statement, and each
row binds its four own, 200 rows a multi-row INSERT (`executemany` steps its
statement once a row: ~2 of the ~3.4 µs a row took), in `id1` order as packed
(a list's rows in the round's order, near each other). Rows with data, or
rows given as tuples, are sorted by `id1` and bound whole or without the
shared columns.
"""

from __future__ import annotations

import sqlite3
from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any

from ..core.bulkrows import QUAD, PackedRows
from ..core.errors import AssocdbError
from ..core.merge import PLAIN_NORMAL as _NORMAL
from ..core.merge import Changes, EdgeTuple, State
from . import sqlfeed as _feed
from .dialect import Session

_INSERT = "INSERT INTO edges VALUES (?, ?, ?, ?, ?, ?, ?)"
#: Packed rows a statement: a multi-row INSERT binds the same values as `executemany`
#: of its rows but steps one statement (one row at a time through the sqlite3
#: module cost ~2 us of its ~3.4 a row; 800 values stay under SQLite's old 999).
ROWS = 200
_INSERT_ROWS = "INSERT INTO edges VALUES "
_ID1 = itemgetter(0)
_COUNT_KEY = itemgetter(0, 1, 3)  # (id1, atype, state): a count row's key
_SHARED = itemgetter(3, 5, 6)  # (state, updated_at, data): one value for a whole load
_OWN = itemgetter(0, 1, 2, 4)  # (id1, atype, id2, time)


class NewRows:
    """The insert-first path of `SQLiteBackend.bulk_merge` (one per backend)."""

    def __init__(self) -> None:
        #: Per shard, the `updated_at` of the load (all its rows carry it) that met a
        #: stored or repeated key there: its later rounds on the shard are merged.
        self.merging: dict[int, int] = {}

    def insert(
        self, b: Any, session: Session, shard: int, edges: Sequence[EdgeTuple]
    ) -> int | None:
        """Insert `edges` as new rows and count them, in the caller's transaction (`b` the
        SQLiteBackend); how many (all), or None if a key is stored or repeated (then
        nothing was written)."""
        if not edges:
            return None
        updated_at = edges.updated_at if isinstance(edges, PackedRows) else edges[0][5]
        if self.merging.get(shard) == updated_at:
            return None
        run: Callable[..., list[Any]] = b._run
        counted: Counter[tuple[int, int, int]]
        inserts: list[tuple[str, Any, bool]]  # (statement, its rows, executemany'd)
        if isinstance(edges, PackedRows):  # (a load's rows: those without data packed)
            inserts = _packed_inserts(edges.packed, updated_at)
            counted = _packed_counts(edges.packed)
            if edges.others:
                statement = _statement(edges.others)
                if statement is None:
                    return None
                inserts.append((*statement, True))
                counted.update(map(_COUNT_KEY, edges.others))
        else:
            statement = _statement(edges)
            if statement is None:
                return None
            inserts = [(*statement, True)]
            counted = Counter(map(_COUNT_KEY, edges))
        run(session, shard, "SAVEPOINT bulk_new")
        try:
            for sql, rows, many in inserts:
                run(session, shard, sql, rows, many=many)
        except AssocdbError as exc:
            if not isinstance(exc.__cause__, sqlite3.IntegrityError):
                raise
            run(session, shard, "ROLLBACK TO bulk_new")
            run(session, shard, "RELEASE bulk_new")
            self.merging[shard] = updated_at
            return None
        run(session, shard, "RELEASE bulk_new")
        for sql, rows, many in _count_upserts(counted):
            run(session, shard, sql, rows, many=many)
        if b.change_feed().turned_on(session, shard):  # (asked first: no changes to build)
            changes = Changes(list(zip(repeat(None), edges)), [], [])
            _feed.record(b, session, shard, changes, seen=True)
        return len(edges)


def _packed_inserts(packed: array[int], updated_at: int) -> list[tuple[str, Any, bool]]:
    """The INSERTs of the packed rows, `ROWS` a statement (one executemany, each of its
    parameter sets a slice of the array) and one for the rest, if any."""
    row = f"(?, ?, ?, {_NORMAL}, ?, {int(updated_at)}, NULL)"
    step = ROWS * QUAD
    whole = len(packed) // step * step
    inserts: list[tuple[str, Any, bool]] = []
    if whole:
        chunks = (packed[at : at + step] for at in range(0, whole, step))
        inserts.append((_INSERT_ROWS + ",".join([row] * ROWS), chunks, True))
    if whole < len(packed):
        rest = (len(packed) - whole) // QUAD
        inserts.append((_INSERT_ROWS + ",".join([row] * rest), packed[whole:].tolist(), False))
    return inserts


def replacing(rows: list[EdgeTuple]) -> list[tuple[str, Any, bool]]:
    """The `INSERT OR REPLACE`s of a merged round's changed rows (tuples), `ROWS` // 2 a
    statement (7 values a row: under SQLite's old 999) and one for the rest, in the
    order given: each row replaces what holds its keys, as one statement a row would."""
    values = [value for row in rows for value in row]
    return _statements(values, 7, ROWS // 2, _replace_rows)


def _replace_rows(rows: int) -> str:
    return "INSERT OR REPLACE INTO edges VALUES " + ",".join(["(?, ?, ?, ?, ?, ?, ?)"] * rows)


def _count_upserts(counted: Counter[tuple[int, int, int]]) -> list[tuple[str, Any, bool]]:
    """The count upserts of a round, `ROWS` a statement as the rows' INSERTs (a key's
    count row is one row of one statement: each adds to what is stored)."""
    values = [value for key, n in sorted(counted.items()) for value in (*key, n)]
    return _statements(values, 4, ROWS, _add_counts)


def _statements(
    values: list[Any], width: int, per: int, sql: Callable[[int], str]
) -> list[tuple[str, Any, bool]]:
    """Rows of `width` values (flat, in order) as multi-row statements `sql(n)` of `per`
    rows, run many (one parameter set a chunk), and one statement for the rest."""
    step = per * width
    whole = len(values) // step * step
    statements: list[tuple[str, Any, bool]] = []
    if whole:
        chunks = (values[at : at + step] for at in range(0, whole, step))
        statements.append((sql(per), chunks, True))
    if whole < len(values):
        statements.append((sql((len(values) - whole) // width), values[whole:], False))
    return statements


def _add_counts(rows: int) -> str:
    return (
        f"INSERT INTO counts VALUES {','.join(['(?, ?, ?, ?)'] * rows)} "
        "ON CONFLICT (id1, atype, state) DO UPDATE SET n = n + excluded.n"
    )


def _packed_counts(packed: array[int]) -> Counter[tuple[int, int, int]]:
    """How many rows each (id1, atype, NORMAL) list gets from the packed rows."""
    return Counter(zip(packed[0::QUAD], packed[1::QUAD], repeat(_NORMAL)))


def _statement(edges: Sequence[EdgeTuple]) -> tuple[str, list[Any]] | None:
    """The INSERT for `edges` and its rows, in id1 order: the shared columns written
    as constants when every row has the same ones and no data. None if a row is a
    tombstone (its time is placed by the merge: left to it)."""
    shared = set(map(_SHARED, edges))
    if len(shared) == 1:
        ((state, updated_at, data),) = shared
        if data is None and state != State.REMOVED:
            sql = f"INSERT INTO edges VALUES (?, ?, ?, {int(state)}, ?, {int(updated_at)}, NULL)"
            return sql, sorted(map(_OWN, edges), key=_ID1)
    if any(state == State.REMOVED for state, _, _ in shared):
        return None
    return _INSERT, sorted(edges, key=_ID1)
