"""The bare LinkBench schema on SQLite, used straight from SQL: the baseline.

This is what a user would write without assocdb: LinkBench's three tables
(`linktable` keyed on (link_type, id1, id2) with the covering index
(id1, link_type, visibility, time, id2, version, data), `counttable`,
`nodetable`) in one database file, with the durability assocdb gives: every
acknowledged write survives a power failure. assocdb gets that from its
journal (fsynced, group-committed) with shards at synchronous=NORMAL; here
every commit is fsynced (WAL, synchronous=FULL). Page, cache and mmap
settings are assocdb's.

Link writes follow the reference's `LinkStoreMysql`: one transaction reads
the link's visibility, writes the link, and changes the count only when
visibility changed. MySQL reports that through the affected-rows count of
`INSERT ... ON DUPLICATE KEY UPDATE`; SQLite has no such signal, so the
transaction reads the row first (`BEGIN IMMEDIATE` takes the write lock
before the read, so no other writer can slip in between).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

from ..load import LoadLink, LoadNode
from .base import LinkRow, NodeRow

DDL = """
CREATE TABLE IF NOT EXISTS linktable (
    id1 INTEGER NOT NULL, id2 INTEGER NOT NULL, link_type INTEGER NOT NULL,
    visibility INTEGER NOT NULL, data BLOB NOT NULL, time INTEGER NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (link_type, id1, id2)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS id1_type
    ON linktable (id1, link_type, visibility, time, id2, version, data);
CREATE TABLE IF NOT EXISTS counttable (
    id INTEGER NOT NULL, link_type INTEGER NOT NULL, count INTEGER NOT NULL,
    time INTEGER NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (id, link_type)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS nodetable (
    id INTEGER PRIMARY KEY AUTOINCREMENT, type INTEGER NOT NULL,
    version INTEGER NOT NULL, time INTEGER NOT NULL, data BLOB NOT NULL
);
"""

_VISIBILITY = "SELECT visibility FROM linktable WHERE link_type = ? AND id1 = ? AND id2 = ?"
_INSERT_LINK = (
    "INSERT INTO linktable (id1, id2, link_type, visibility, data, time, version) "
    "VALUES (?, ?, ?, 1, ?, ?, 0)"
)
_UPDATE_LINK = (
    "UPDATE linktable SET visibility = 1, data = ?, time = ?, version = 0 "
    "WHERE link_type = ? AND id1 = ? AND id2 = ?"
)
_COUNT_UP = (
    "INSERT INTO counttable (id, link_type, count, time, version) VALUES (?, ?, 1, ?, 0) "
    "ON CONFLICT (id, link_type) DO UPDATE SET count = count + 1"
)
_HIDE = "UPDATE linktable SET visibility = 0 WHERE link_type = ? AND id1 = ? AND id2 = ?"
_COUNT_DOWN = (
    "INSERT INTO counttable (id, link_type, count, time, version) VALUES (?, ?, 0, ?, 0) "
    "ON CONFLICT (id, link_type) DO UPDATE SET count = max(count - 1, 0), "
    "time = excluded.time, version = version + 1"
)
_COUNT = "SELECT count FROM counttable WHERE id = ? AND link_type = ?"
_LIST = (
    "SELECT id2, time, data FROM linktable "
    "WHERE id1 = ? AND link_type = ? AND visibility = 1 AND time >= 0 AND time <= ? "
    "ORDER BY time DESC, id2 DESC LIMIT ? OFFSET ?"
)
_BATCH = 50_000


class BareSQLiteStore:
    """LinkBench's schema in one SQLite file, one connection per thread."""

    name = "bare-sqlite"

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / "linkbench.db"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._conn().executescript(DDL)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            # assocdb's durability and SQLite settings, so only the design differs.
            for pragma in (
                "journal_mode = WAL",
                "synchronous = FULL",
                "mmap_size = 268435456",
                "cache_size = -16000",
            ):
                conn.execute(f"PRAGMA {pragma}")
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # -- load phase ----------------------------------------------------------------

    def load_links(self, links: Iterable[LoadLink]) -> int:
        counts: dict[tuple[int, int], list[int]] = {}
        total = 0
        it = iter(links)
        while batch := list(islice(it, _BATCH)):
            rows = []
            for link in batch:
                rows.append((link.id1, link.id2, link.link_type, link.data, link.time))
                entry = counts.setdefault((link.id1, link.link_type), [0, 0])
                entry[0] += 1
                entry[1] = max(entry[1], link.time)
            with self._write() as conn:
                conn.executemany(_INSERT_LINK, rows)
            total += len(batch)
        with self._write() as conn:
            conn.executemany(
                "REPLACE INTO counttable (id, link_type, count, time, version) "
                "VALUES (?, ?, ?, ?, 0)",
                [(id1, t, n, when) for (id1, t), (n, when) in counts.items()],
            )
        return total

    def load_nodes(self, nodes: Iterable[LoadNode]) -> int:
        total = 0
        it = iter(nodes)
        while batch := list(islice(it, _BATCH)):
            with self._write() as conn:
                conn.executemany(
                    "INSERT INTO nodetable (id, type, version, time, data) VALUES (?, ?, ?, ?, ?)",
                    batch,
                )
            total += len(batch)
        return total

    # -- links -----------------------------------------------------------------------

    def add_link(self, id1: int, link_type: int, id2: int, time: int, data: bytes) -> None:
        with self._write() as conn:
            row = conn.execute(_VISIBILITY, (link_type, id1, id2)).fetchone()
            if row is None:
                conn.execute(_INSERT_LINK, (id1, id2, link_type, data, time))
            else:
                conn.execute(_UPDATE_LINK, (data, time, link_type, id1, id2))
            if row is None or row[0] == 0:
                conn.execute(_COUNT_UP, (id1, link_type, time))

    def delete_link(self, id1: int, link_type: int, id2: int) -> None:
        with self._write() as conn:
            row = conn.execute(_VISIBILITY, (link_type, id1, id2)).fetchone()
            if row is not None and row[0] == 1:
                conn.execute(_HIDE, (link_type, id1, id2))
                conn.execute(_COUNT_DOWN, (id1, link_type, _now_ms()))

    def count_links(self, id1: int, link_type: int) -> int:
        row = self._conn().execute(_COUNT, (id1, link_type)).fetchone()
        return 0 if row is None else int(row[0])

    def get_links(self, id1: int, link_type: int, id2s: Sequence[int]) -> list[Any]:
        marks = ",".join("?" * len(id2s))
        sql = (
            "SELECT id2, visibility, time, data FROM linktable "
            f"WHERE link_type = ? AND id1 = ? AND id2 IN ({marks})"
        )
        return self._conn().execute(sql, (link_type, id1, *id2s)).fetchall()

    def get_link_list(
        self, id1: int, link_type: int, max_time: int, offset: int, limit: int
    ) -> list[Any]:
        return self._conn().execute(_LIST, (id1, link_type, max_time, limit, offset)).fetchall()

    def last_time(self, links: Sequence[Any]) -> int:
        return int(links[-1][1])

    # -- nodes -----------------------------------------------------------------------

    def add_node(self, node_type: int, version: int, time: int, data: bytes) -> int:
        cursor = self._conn().execute(
            "INSERT INTO nodetable (type, version, time, data) VALUES (?, ?, ?, ?)",
            (node_type, version, time, data),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def get_node(self, node_type: int, node_id: int) -> Any:
        row = (
            self._conn()
            .execute("SELECT id, type, version, time, data FROM nodetable WHERE id = ?", (node_id,))
            .fetchone()
        )
        return row if row is not None and row[1] == node_type else None

    def update_node(
        self, node_id: int, node_type: int, version: int, time: int, data: bytes
    ) -> bool:
        cursor = self._conn().execute(
            "UPDATE nodetable SET version = ?, time = ?, data = ? WHERE id = ? AND type = ?",
            (version, time, data, node_id, node_type),
        )
        return cursor.rowcount == 1

    def delete_node(self, node_type: int, node_id: int) -> bool:
        cursor = self._conn().execute(
            "DELETE FROM nodetable WHERE id = ? AND type = ?", (node_id, node_type)
        )
        return cursor.rowcount == 1

    # -- reporting -------------------------------------------------------------------

    def normal_links(self, links: Sequence[Any]) -> list[LinkRow]:
        if links and len(links[0]) == 4:  # get_links: (id2, visibility, time, data)
            return [LinkRow(r[0], r[1] == 1, r[2], bytes(r[3])) for r in links]
        return [LinkRow(r[0], True, r[1], bytes(r[2])) for r in links]

    def normal_node(self, node: Any) -> NodeRow | None:
        if node is None:
            return None
        node_id, node_type, version, time, data = node
        return NodeRow(node_id, node_type, version, time, bytes(data))

    def cache_hit_rate(self) -> float | None:
        return None

    def describe(self) -> str:
        return f"{self.name}: LinkBench schema in one SQLite file, WAL, synchronous=FULL"

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()


def _now_ms() -> int:
    import time

    return time.time_ns() // 1_000_000
