"""What one SQL engine supplies to the shared SQL (`sql.SQLBackend`): its `Dialect`, and the
`Session` a connection in use is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..core.errors import AssocdbError


class Dialect(Protocol):
    """How one engine spells what `SQLBackend` says."""

    #: Starts a write transaction.
    begin: str
    #: Ends a read inside a write transaction so that what it read (and the absence
    #: of what it did not find) holds until the commit ("" where `begin` locks).
    lock: str
    #: The same for a read that must only not change (recount's edges).
    share: str
    #: Whether `(a, b) > (?, ?)` seeks an index; else it is spelled out (`_past`).
    row_values: bool
    #: The key column of the `meta` table.
    meta_key: str
    #: Creates the `timelines` table.
    timelines_ddl: str
    #: Creates the `changes` table of the change feed (`sqlfeed`).
    feed_ddl: str
    #: Counts the shard's transactions begun before a time (`?`, from `feed_now`), which
    #: `sqlfeed.SQLFeed.enable` waits for ("": a write transaction holds the shard).
    feed_settle: str
    #: The server's time, for `feed_settle`.
    feed_now: str
    #: Seconds a shard found without its feed is believed so without asking again (0: ask
    #: in every apply; a server engine's round trip is worth saving: `sqlfeed`).
    feed_recheck: float

    def use_index(self, name: str) -> str:
        """The hint, after a table name, to read it through index `name`."""

    def upsert(self, table: str, columns: Sequence[str], key: int, add: bool = False) -> str:
        """Insert rows of `columns`, whose first `key` are the primary key; a row that
        exists gets the other columns replaced (`add`: added to)."""

    def index_ddl(self, index: int) -> list[str]:
        """Creates the table `index_N` of a secondary index, with an index on `id`."""

    def missing_table(self, exc: AssocdbError) -> bool:
        """Whether the statement failed because its table does not exist."""

    def retryable(self, exc: AssocdbError) -> bool:
        """Whether the transaction was aborted to break a deadlock (run it again)."""

    def gone(self, exc: AssocdbError) -> bool:
        """Whether the server had closed the connection."""

    def row_hash(self, columns: Sequence[str]) -> str:
        """An expression: a deterministic 32-bit hash of a row's `columns`, computed on the
        server (summed over a range by `table_summary`)."""


class Session:
    """A connection in use. `broken`: a driver error may have left it unusable (a pool
    closes it rather than lend it again); `reused`: it sat idle in a pool before (the
    server may have closed it meanwhile)."""

    __slots__ = ("broken", "conn", "cursor", "reused")

    def __init__(self, conn: Any, reused: bool = False) -> None:
        self.conn = conn
        self.broken = False
        self.reused = reused
        #: A cursor the engine reuses for every statement it runs whole (SQLite's
        #: `_execute`), or None.
        self.cursor: Any = None
