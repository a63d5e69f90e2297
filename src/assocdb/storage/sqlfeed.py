"""The change feed on SQL shards: each shard's `changes` table, written in the apply's own
transaction, read by position, trimmed by age and size.

Writing. `record` is called by `SQLBackend._apply` (and `bulk_merge`, a bulk load's round)
with the rows the merge changed (so a write the merge refused, a replay or a stale write,
records nothing), inside the same transaction: no change without its record, no record
without its change. One row per changed edge leg, object and node state: `(pos, kind,
id1, atype, id2, state, time, updated_at, data)` (an object is `(id, otype, version,
state, 0, updated_at, data)`, a node state `(node, atype, 0, state, 0, updated_at, NULL)`).

Positions. A record's position is taken from the shard's `seq` row `feed`, bumped by the
number of records in the same transaction (not an AUTO_INCREMENT/identity column: those
are handed out at insert, not at commit, so with several app servers writing one MariaDB
or PostgreSQL shard, position 11 may commit before 10 and a reader past 11 would skip 10).
Bumping the row takes its write lock until the commit, so the shard's recording
transactions are serialized and commit in position order: a reader sees a prefix of the
positions, dense (a rolled-back transaction takes its bump back). Readers therefore
need no fence, and a gap below the oldest row held means exactly "trimmed".

Turning it on, in every process. `enable` creates a shard's table, then gives the shard
its `seq` row `feed` (value 0 until the first record), shard by shard. A process records
on a shard once it knows that row is there: an apply on a shard not yet known to be on
reads the row in its transaction (`turned_on`, only while the feed is off), and records
if it exists. So no change commits without its record once `enable` has returned, in any
process that has the graph open, with no thread watching. On SQLite every apply reads it
(a cached page, ~3 us) while holding the shard's write lock, so `enable`'s insert waits
for the apply or precedes it (a transaction opened with its reads, `storage.opened`,
reads it as an arm of that one statement, `SEQ_ARM`: no statement of its own). On a
database server the read is a round trip, so a process believes a shard found off for
`Dialect.feed_recheck` (0.25 s) without asking again, and `enable` waits that long after
its inserts and then until every transaction begun before has ended (MariaDB's
`information_schema.innodb_trx`, PostgreSQL's `pg_stat_activity`; at most
`SETTLE_SECONDS`): an apply that did not ask began before that, and has committed when
`enable` returns; one that asks sees the row (MariaDB's read is a share-mode locking
read, PostgreSQL's transaction began after the inserts).

Waking. `SQLFeed.committed` is called after each apply's commit; a reader in this process
waits on it (`wait`) instead of polling, and polls only for other processes' changes.
"""

from __future__ import annotations

import logging
import threading
import time
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ..core.compress import pack
from ..core.errors import AssocdbError
from ..core.feed import EDGE, NODE, OBJECT, FeedRow
from ..core.merge import Changes
from .dialect import Session

if TYPE_CHECKING:
    from .sql import SQLBackend

__all__ = ["EDGE", "NODE", "OBJECT", "FeedRow", "SQLFeed"]

log = logging.getLogger("assocdb.feed")
COLUMNS = ("pos", "kind", "id1", "atype", "id2", "state", "time", "updated_at", "data")
_DATA = itemgetter(8)
SETTLE_SECONDS = 1.5  # how long `enable` waits for older transactions, at most (a client's 2 s)

_INSERT = f"INSERT INTO {{s}}.changes ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * 9)})"
_SEQ = "SELECT value FROM {s}.seq WHERE name = 'feed'"
#: The `feed` row read as an arm of a wider read (`storage.opened`), `width` columns
#: (a first column of 2 tells it apart): its write transaction asks no statement of
#: its own (`record`'s `seen`).
SEQ_ARM = " UNION ALL SELECT 2, value{nulls} FROM {{s}}.seq WHERE name = 'feed'"
_READ = f"SELECT {', '.join(COLUMNS)} FROM {{s}}.changes WHERE pos > ? ORDER BY pos LIMIT ?"
_OLDEST = "SELECT MIN(pos) FROM {s}.changes"
_CHECKPOINT = (
    "SELECT name, value FROM {s}.seq WHERE name >= ? AND name <= ? ORDER BY name DESC LIMIT 1"
)
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


def record(
    b: SQLBackend, session: Session, shard: int, changes: Changes, seen: bool | None = None
) -> None:
    """Append what one apply changed to the shard's feed, in the apply's transaction, if
    the feed is on there (`SQLFeed.turned_on`: asked only when something changed).
    `seen`: whether the transaction already read the shard's `feed` row (`SEQ_ARM`),
    and found it; None: not read."""
    if not (changes.edges or changes.objects or changes.nodes):
        return
    feed = b.change_feed()
    if seen is not None:
        if not seen:
            return
        feed._turn_on([shard])
    elif not feed.turned_on(session, shard):
        return
    rows = rows_of(changes)
    b._run(session, shard, b._q(b._add_seq, shard), ("feed", len(rows)))
    last = int(b._run(session, shard, b._q(_SEQ, shard))[0][0])
    first = last - len(rows) + 1
    positioned = [(first + i, *row) for i, row in enumerate(rows)]
    b._run(session, shard, b._q(_INSERT, shard), positioned, many=True)


class SQLFeed:
    """The `ChangeFeed` of SQL shards (`Backend.change_feed()`); see the module doc."""

    def __init__(self, backend: SQLBackend) -> None:
        self._b = backend
        self._on: set[int] = set()  # shards known to record (all: `backend.feed`)
        self._off_until: dict[int, float] = {}  # shard: not asked again before (monotonic)
        self._changed = threading.Condition()
        self._generation = 0  # applies committed since the backend opened (with the feed on)

    checks_held = False  # (the reader compares `bounds`)
    missing: tuple[str, ...] = ()  # (one database: on or not)

    @property
    def shards(self) -> int:
        return self._b.shards

    @property
    def on(self) -> bool:
        """Whether every apply of this process records (the feed was turned on)."""
        return self._b.feed

    @property
    def read_only(self) -> bool:
        """A snapshot: it has its feed or none; no tables are made, nothing is trimmed."""
        return bool(getattr(self._b, "read_only", False))

    def enable(self) -> None:
        """Give every shard its table and its `feed` row (see the module doc), then record
        in this process."""
        b = self._b
        flagged = False
        for shard in range(b.shards):
            if self.read_only or b._query(shard, b._q(_SEQ, shard)):
                continue  # (a graph opened again: its feed is on already)
            b._ddl(shard, b.dialect.feed_ddl)

            def flag(session: Session, shard: int = shard) -> None:
                b._run(session, shard, b._q(b._add_seq, shard), ("feed", 0))

            b._durably(shard, flag)
            flagged = True
        if flagged:
            self._settle()
        self._turn_on(range(b.shards))

    def known_on(self, shard: int) -> bool:
        """Whether this process knows `shard` records (then it is not asked again)."""
        return shard in self._on

    def turned_on(self, session: Session, shard: int) -> bool:
        """Whether an apply on `shard`, in `session`'s transaction, must record: its `feed`
        row exists (the read holds what it found until the commit: see the module doc)."""
        if self.known_on(shard):
            return True
        b, now = self._b, time.monotonic()
        if now < self._off_until.get(shard, 0.0):
            return False  # (asked less than `feed_recheck` ago: see the module doc)
        if not b._run(session, shard, b._q(_SEQ + b.dialect.share, shard)):
            if b.dialect.feed_recheck:
                self._off_until[shard] = now + b.dialect.feed_recheck
            return False
        self._turn_on([shard])
        return True

    def committed(self) -> None:
        """An apply committed: wake this process's readers (called after each commit)."""
        if self._on:
            with self._changed:
                self._generation += 1
                self._changed.notify_all()

    @property
    def generation(self) -> int:
        """How many applies this process committed with the feed on (`wait`'s token)."""
        return self._generation

    def wait(self, seen: int, timeout: float) -> int:
        """Wait up to `timeout` seconds for an apply of this process to commit after
        `generation` was `seen`, or for `wake`; the generation now."""
        with self._changed:
            self._changed.wait_for(lambda: self._generation != seen, timeout)
            return self._generation

    def wake(self) -> None:
        """Wake every waiting reader (a closing graph)."""
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def read(self, shard: int, after: int, limit: int) -> list[FeedRow]:
        """Up to `limit` records of the shard after position `after`, in position order."""
        return read(self._b, shard, after, limit)

    def bounds(self, shard: int) -> tuple[int, int]:
        """(oldest position held, last position given) of the shard."""
        return bounds(self._b, shard)

    def trim(self, shard: int, before: int, keep: int) -> int:
        """Delete the shard's records older than `before` and all but the last `keep`."""
        return trim(self._b, shard, before, keep)

    def checkpoint(self, shard: int, peer: int, at: tuple[int, int]) -> None:
        """Store the alignment checkpoint `at` = (P, Q) against the replica tagged `peer`
        (`core.feedalign`): a `seq` row `fa:PEER:P` of value Q, on this shard."""
        b = self._b
        sql = b._q(b.dialect.upsert("seq", ("name", "value"), 1), shard)
        b._durably(shard, lambda s: b._run(s, shard, sql, (_align_name(peer, at[0]), at[1])))

    def translate(self, shard: int, peer: int, position: int) -> tuple[int, int] | None:
        """The newest checkpoint (P, Q) against `peer` with P <= `position`, or None."""
        b = self._b
        sql = b._q(_CHECKPOINT, shard)
        rows = b._query(shard, sql, (_align_name(peer, 0), _align_name(peer, position)))
        return (int(rows[0][0][7:]), int(rows[0][1])) if rows else None

    def forget_checkpoints(self, shard: int, below: int) -> None:
        """Delete the checkpoints that translate to a position before `below` (trimmed)."""
        b = self._b
        sql = b._q("DELETE FROM {s}.seq WHERE name LIKE 'fa:%' AND value < ?", shard)
        b._durably(shard, lambda s: b._run(s, shard, sql, (below,)))

    def _turn_on(self, shards: Any) -> None:
        self._on.update(shards)
        if len(self._on) == self._b.shards:
            self._b.feed = True

    def _settle(self) -> None:
        """Wait `feed_recheck`, then until each shard's transactions begun before then
        have ended (see the module doc; SQLite needs neither)."""
        b = self._b
        if not b.dialect.feed_settle:
            return
        time.sleep(b.dialect.feed_recheck)  # every process asks again after this
        deadline = time.monotonic() + SETTLE_SECONDS
        try:
            since = [b._query(s, b._q(b.dialect.feed_now, s))[0][0] for s in range(b.shards)]
            for shard, at in enumerate(since):
                while b._query(shard, b._q(b.dialect.feed_settle, shard), (at,))[0][0]:
                    if time.monotonic() > deadline:
                        log.warning("the feed is on; transactions older than it still run")
                        return
                    time.sleep(0.005)
        except AssocdbError as exc:  # e.g. no PROCESS privilege on MariaDB
            log.warning("the feed is on; could not wait for older transactions: %s", exc)


def _align_name(peer: int, position: int) -> str:
    return f"fa:{peer:03d}:{position:020d}"  # (names sort as positions do: 27 characters)


def enable(b: SQLBackend) -> None:
    """`SQLFeed.enable` of the backend's feed."""
    b.change_feed().enable()


def read(b: SQLBackend, shard: int, after: int, limit: int) -> list[FeedRow]:
    """Up to `limit` records of the shard after position `after`, in position order."""
    rows = b._query(shard, b._q(_READ, shard), (after, limit))
    if memoryview not in set(map(type, map(_DATA, rows))):  # (PostgreSQL's bytea; in C)
        return [tuple(row) for row in rows] if rows and type(rows[0]) is not tuple else rows
    return [(*row[:8], None if row[8] is None else bytes(row[8])) for row in rows]


def recording(b: SQLBackend, shard: int) -> bool:
    """Whether the shard's feed is on (its `seq` row `feed` is there)."""
    return bool(b._query(shard, b._q(_SEQ, shard)))


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
