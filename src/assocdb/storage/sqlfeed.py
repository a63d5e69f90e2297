"""The change feed on SQL shards: each shard's `changes` table, written in the apply's own
transaction, read by position, trimmed by age and size.

Writing. `record` is called by `SQLBackend._apply` with the rows the merge changed (so a
write the merge refused, a replay or a stale write, records nothing), inside the same
transaction: no change without its record, no record without its change. One row per
changed edge leg, object and node state: `(pos, kind, id1, atype, id2, state, time,
updated_at, data)` (an object is `(id, otype, version, state, 0, updated_at, data)`,
a node state `(node, atype, 0, state, 0, updated_at, NULL)`).

Positions. A record's position is taken from the shard's `seq` row `feed`, bumped by the
number of records in the same transaction (not an AUTO_INCREMENT/identity column: those
are handed out at insert, not at commit, so with several app servers writing one MariaDB
or PostgreSQL shard, position 11 may commit before 10 and a reader past 11 would skip 10).
Bumping the row takes its write lock until the commit, so the shard's recording
transactions are serialized and commit in position order: a reader sees a prefix of the
positions, dense (a rolled-back transaction takes its bump back). Readers therefore
need no fence, and a gap below the oldest row held means exactly "trimmed".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.compress import pack
from ..core.merge import Changes
from .dialect import Session

if TYPE_CHECKING:
    from .sql import SQLBackend

EDGE, OBJECT, NODE = 1, 2, 3  # `kind` in the table (core.feed names them)
COLUMNS = ("pos", "kind", "id1", "atype", "id2", "state", "time", "updated_at", "data")
FeedRow = tuple[int, int, int, int, int, int, int, int, bytes | None]

_INSERT = f"INSERT INTO {{s}}.changes ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * 9)})"
_SEQ = "SELECT value FROM {s}.seq WHERE name = 'feed'"
_READ = f"SELECT {', '.join(COLUMNS)} FROM {{s}}.changes WHERE pos > ? ORDER BY pos LIMIT ?"
_OLDEST = "SELECT MIN(pos) FROM {s}.changes"
_NEWER = "SELECT MIN(pos) FROM {s}.changes WHERE updated_at >= ?"


def ddl(blob: str, suffix: str = "", key: str = "BIGINT") -> str:
    """The `changes` table in an engine's spelling of a blob, table options and the key's
    type (SQLite's `INTEGER PRIMARY KEY` is the rowid itself: no second B-tree)."""
    return (
        f"CREATE TABLE IF NOT EXISTS {{s}}.changes (pos {key} NOT NULL PRIMARY KEY, "
        "kind SMALLINT NOT NULL, id1 BIGINT NOT NULL, atype INTEGER NOT NULL, "
        "id2 BIGINT NOT NULL, state SMALLINT NOT NULL, time BIGINT NOT NULL, "
        f"updated_at BIGINT NOT NULL, data {blob}){suffix}"
    )


def rows_of(changes: Changes) -> list[tuple[Any, ...]]:
    """The records (without positions) of what one apply changed, in a fixed order."""
    rows: list[tuple[Any, ...]] = [
        (NODE, node, atype, 0, state, 0, at, None) for node, atype, state, at in changes.nodes
    ]
    rows += ((EDGE, *new) for _, new in changes.edges)
    rows += ((OBJECT, o[0], o[1], o[3], o[2], 0, o[4], pack(o[5])) for o in changes.objects)
    return rows


def record(b: SQLBackend, session: Session, shard: int, changes: Changes) -> None:
    """Append what one apply changed to the shard's feed, in the apply's transaction."""
    rows = rows_of(changes)
    if not rows:
        return
    b._run(session, shard, b._q(b._add_seq, shard), ("feed", len(rows)))
    last = int(b._run(session, shard, b._q(_SEQ, shard))[0][0])
    first = last - len(rows) + 1
    positioned = [(first + i, *row) for i, row in enumerate(rows)]
    b._run(session, shard, b._q(_INSERT, shard), positioned, many=True)


def enable(b: SQLBackend) -> None:
    """Create every shard's `changes` table (before the first apply records into it; a
    read-only graph, a snapshot, has them or has no feed to read)."""
    if not getattr(b, "read_only", False):
        for shard in range(b.shards):
            b._ddl(shard, b.dialect.feed_ddl)
    b.feed = True


def read(b: SQLBackend, shard: int, after: int, limit: int) -> list[FeedRow]:
    """Up to `limit` records of the shard after position `after`, in position order."""
    rows = b._query(shard, b._q(_READ, shard), (after, limit))
    return [(*row[:8], None if row[8] is None else bytes(row[8])) for row in rows]


def bounds(b: SQLBackend, shard: int) -> tuple[int, int]:
    """(oldest position held, last position given) of the shard; an empty feed holds
    `last + 1` onwards."""
    last = b._query(shard, b._q(_SEQ, shard))
    end = int(last[0][0]) if last else 0
    oldest = b._query(shard, b._q(_OLDEST, shard))[0][0]
    return (end + 1 if oldest is None else int(oldest)), end


def trim(b: SQLBackend, shard: int, before: int, keep: int) -> int:
    """Delete the shard's records older than `updated_at` `before`, and all but the last
    `keep`; the number deleted. Trimmed by age is the prefix older than `before`
    (a record with an older, client-given `updated_at` behind a newer one waits)."""
    oldest, end = bounds(b, shard)
    newer = b._query(shard, b._q(_NEWER, shard), (before,))[0][0]
    upto = max(end - keep, end if newer is None else int(newer) - 1)
    if upto < oldest:
        return 0

    def body(session: Session) -> int:
        sql = b._q("DELETE FROM {s}.changes WHERE pos <= ?", shard)
        b._run(session, shard, sql, (upto,))
        return upto - oldest + 1

    return b._in_transaction(shard, body)
