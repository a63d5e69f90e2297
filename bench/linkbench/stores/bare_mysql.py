"""The bare LinkBench schema on MariaDB/MySQL, with the reference's own SQL.

The tables are LinkBench's documented ones (InnoDB, latin1, `linktable`
partitioned by key(id1) into 16). Link writes are `LinkStoreMysql`'s:
`INSERT ... ON DUPLICATE KEY UPDATE visibility = VALUES(visibility)`, whose
affected-rows count (1 inserted, 2 changed, 0 unchanged; PyMySQL, like the
reference's JDBC settings, does not ask for found rows) decides whether to
change the count and whether to write the data, all in one transaction.
One difference: the delete reads the visibility `FOR UPDATE`, where the
reference reads it without a lock and can miscount under concurrent deletes.

The connection runs in autocommit (a read is one round trip, a node write
one statement); link writes and load batches open a transaction with BEGIN.
Durability is the server's: `describe()` reports
`innodb_flush_log_at_trx_commit` (1 fsyncs every commit; 2 is what matches
SQLite's WAL with synchronous=NORMAL). The URL is `mysql://user:pw@host:port/db`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any
from urllib.parse import unquote, urlparse

from ..load import LoadLink, LoadNode
from .base import LinkRow, NodeRow

DDL = [
    "DROP TABLE IF EXISTS linktable",
    "DROP TABLE IF EXISTS counttable",
    "DROP TABLE IF EXISTS nodetable",
    """CREATE TABLE linktable (
      id1 BIGINT UNSIGNED NOT NULL DEFAULT 0,
      id2 BIGINT UNSIGNED NOT NULL DEFAULT 0,
      link_type BIGINT UNSIGNED NOT NULL DEFAULT 0,
      visibility TINYINT NOT NULL DEFAULT 0,
      data VARBINARY(255) NOT NULL DEFAULT '',
      time BIGINT UNSIGNED NOT NULL DEFAULT 0,
      version INT UNSIGNED NOT NULL DEFAULT 0,
      PRIMARY KEY (link_type, id1, id2),
      KEY id1_type (id1, link_type, visibility, time, id2, version, data)
    ) ENGINE=InnoDB DEFAULT CHARSET=latin1 PARTITION BY KEY(id1) PARTITIONS 16""",
    """CREATE TABLE counttable (
      id BIGINT UNSIGNED NOT NULL DEFAULT 0,
      link_type BIGINT UNSIGNED NOT NULL DEFAULT 0,
      count INT UNSIGNED NOT NULL DEFAULT 0,
      time BIGINT UNSIGNED NOT NULL DEFAULT 0,
      version BIGINT UNSIGNED NOT NULL DEFAULT 0,
      PRIMARY KEY (id, link_type)
    ) ENGINE=InnoDB DEFAULT CHARSET=latin1""",
    """CREATE TABLE nodetable (
      id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      type INT UNSIGNED NOT NULL,
      version BIGINT UNSIGNED NOT NULL,
      time INT UNSIGNED NOT NULL,
      data MEDIUMBLOB NOT NULL,
      PRIMARY KEY (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=latin1""",
]
_BATCH = 1024  # mysql_bulk_insert_batch's default in the reference


def connect_args(url: str, database: str | None = None) -> dict[str, Any]:
    """PyMySQL connect() arguments for a `mysql://user:pw@host:port/db` URL."""
    parts = urlparse(url)
    if parts.scheme not in ("mysql", "mariadb"):
        raise ValueError(f"not a mysql:// URL: {url!r}")
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        "database": database or parts.path.lstrip("/") or "linkbench",
        # Reads are single statements: autocommit spares them a COMMIT round
        # trip; link writes open their own transaction with BEGIN.
        "autocommit": True,
    }


class BareMySQLStore:
    """LinkBench's schema on one MariaDB database, one connection per thread."""

    name = "bare-mariadb"

    def __init__(self, url: str, database: str = "linkbench") -> None:
        import pymysql  # type: ignore[import-untyped]  # only needed when this store runs

        self._pymysql = pymysql
        self._args = connect_args(url, database)
        admin_args = {**self._args, "database": None, "autocommit": True}
        admin = pymysql.connect(**admin_args)
        with admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{self._args['database']}`")
            cur.execute("SELECT @@innodb_flush_log_at_trx_commit, @@version")
            self._flush, self._version = cur.fetchone()
        admin.close()
        self._local = threading.local()
        self._all: list[Any] = []
        self._lock = threading.Lock()
        conn = self._conn()
        with conn.cursor() as cur:
            for statement in DDL:
                cur.execute(statement)
        conn.commit()

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._pymysql.connect(**self._args)
            with self._lock:
                self._all.append(conn)
        return conn

    def _one(self, sql: str, args: Sequence[Any]) -> Any:
        with self._conn().cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchone()

    def _all_rows(self, sql: str, args: Sequence[Any]) -> Any:
        with self._conn().cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()

    # -- load phase ----------------------------------------------------------------

    def load_links(self, links: Iterable[LoadLink]) -> int:
        conn, total = self._conn(), 0
        counts: dict[tuple[int, int], list[int]] = {}
        it = iter(links)
        with conn.cursor() as cur:
            while batch := list(islice(it, _BATCH)):
                conn.begin()
                # Only placeholders in VALUES: then PyMySQL sends one multi-row
                # INSERT per batch (with a literal it sends a statement per row).
                cur.executemany(
                    "INSERT INTO linktable (id1, id2, link_type, visibility, data, time, version)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
                    " ON DUPLICATE KEY UPDATE visibility = VALUES(visibility)",
                    [(k.id1, k.id2, k.link_type, 1, k.data, k.time, 0) for k in batch],
                )
                conn.commit()
                for k in batch:
                    entry = counts.setdefault((k.id1, k.link_type), [0, 0])
                    entry[0] += 1
                    entry[1] = max(entry[1], k.time)
                total += len(batch)
            rows = [(i, t, n, when) for (i, t), (n, when) in counts.items()]
            for start in range(0, len(rows), _BATCH):
                conn.begin()
                cur.executemany(
                    "REPLACE INTO counttable (id, link_type, count, time, version)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    [(*row, 0) for row in rows[start : start + _BATCH]],
                )
                conn.commit()
        return total

    def load_nodes(self, nodes: Iterable[LoadNode]) -> int:
        conn, total = self._conn(), 0
        it = iter(nodes)
        with conn.cursor() as cur:
            while batch := list(islice(it, _BATCH)):
                conn.begin()
                cur.executemany(
                    "INSERT INTO nodetable (id, type, version, time, data)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    batch,
                )
                conn.commit()
                total += len(batch)
        return total

    # -- links -----------------------------------------------------------------------

    def add_link(self, id1: int, link_type: int, id2: int, time: int, data: bytes) -> None:
        conn = self._conn()
        conn.begin()
        with conn.cursor() as cur:
            changed = cur.execute(
                "INSERT INTO linktable (id1, id2, link_type, visibility, data, time, version)"
                " VALUES (%s, %s, %s, 1, %s, %s, 0)"
                " ON DUPLICATE KEY UPDATE visibility = VALUES(visibility)",
                (id1, id2, link_type, data, time),
            )
            if changed in (1, 2):  # inserted, or a hidden link shown again
                cur.execute(
                    "INSERT INTO counttable (id, link_type, count, time, version)"
                    " VALUES (%s, %s, 1, %s, 0) ON DUPLICATE KEY UPDATE count = count + 1",
                    (id1, link_type, time),
                )
            if changed in (0, 2):  # the link was there: write its data and time too
                cur.execute(
                    "UPDATE linktable SET visibility = 1, data = %s, time = %s, version = 0"
                    " WHERE link_type = %s AND id1 = %s AND id2 = %s",
                    (data, time, link_type, id1, id2),
                )
        conn.commit()

    def delete_link(self, id1: int, link_type: int, id2: int) -> None:
        conn = self._conn()
        conn.begin()
        with conn.cursor() as cur:
            cur.execute(
                "SELECT visibility FROM linktable"
                " WHERE link_type = %s AND id1 = %s AND id2 = %s FOR UPDATE",
                (link_type, id1, id2),
            )
            row = cur.fetchone()
            if row is not None and row[0] == 1:
                cur.execute(
                    "UPDATE linktable SET visibility = 0"
                    " WHERE link_type = %s AND id1 = %s AND id2 = %s",
                    (link_type, id1, id2),
                )
                cur.execute(
                    "INSERT INTO counttable (id, link_type, count, time, version)"
                    " VALUES (%s, %s, 0, %s, 0) ON DUPLICATE KEY UPDATE"
                    " count = IF(count = 0, 0, count - 1), time = VALUES(time),"
                    " version = version + 1",
                    (id1, link_type, _now_ms()),
                )
        conn.commit()

    def count_links(self, id1: int, link_type: int) -> int:
        row = self._one(
            "SELECT count FROM counttable WHERE id = %s AND link_type = %s", (id1, link_type)
        )
        return 0 if row is None else int(row[0])

    def get_links(self, id1: int, link_type: int, id2s: Sequence[int]) -> Any:
        marks = ",".join(["%s"] * len(id2s))
        return self._all_rows(
            "SELECT id2, visibility, time, data FROM linktable"
            f" WHERE link_type = %s AND id1 = %s AND id2 IN ({marks})",
            (link_type, id1, *id2s),
        )

    def get_link_list(
        self, id1: int, link_type: int, max_time: int, offset: int, limit: int
    ) -> Any:
        return self._all_rows(
            "SELECT id2, time, data FROM linktable"
            " WHERE id1 = %s AND link_type = %s AND visibility = 1"
            " AND time >= 0 AND time <= %s"
            " ORDER BY time DESC, id2 DESC LIMIT %s, %s",
            (id1, link_type, max_time, offset, limit),
        )

    def last_time(self, links: Sequence[Any]) -> int:
        return int(links[-1][1])

    # -- nodes -----------------------------------------------------------------------

    def add_node(self, node_type: int, version: int, time: int, data: bytes) -> int:
        with self._conn().cursor() as cur:
            cur.execute(
                "INSERT INTO nodetable (type, version, time, data) VALUES (%s, %s, %s, %s)",
                (node_type, version, time, data),
            )
            return int(cur.lastrowid)

    def get_node(self, node_type: int, node_id: int) -> Any:
        row = self._one(
            "SELECT id, type, version, time, data FROM nodetable WHERE id = %s", (node_id,)
        )
        return row if row is not None and row[1] == node_type else None

    def update_node(
        self, node_id: int, node_type: int, version: int, time: int, data: bytes
    ) -> bool:
        with self._conn().cursor() as cur:
            rows = cur.execute(
                "UPDATE nodetable SET version = %s, time = %s, data = %s"
                " WHERE id = %s AND type = %s",
                (version, time, data, node_id, node_type),
            )
        return bool(rows == 1)

    def delete_node(self, node_type: int, node_id: int) -> bool:
        with self._conn().cursor() as cur:
            rows = cur.execute(
                "DELETE FROM nodetable WHERE id = %s AND type = %s", (node_id, node_type)
            )
        return bool(rows == 1)

    # -- reporting -------------------------------------------------------------------

    def normal_links(self, links: Sequence[Any]) -> list[LinkRow]:
        if links and len(links[0]) == 4:
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
        return (
            f"{self.name}: LinkBench schema on MariaDB {self._version} (InnoDB),"
            f" innodb_flush_log_at_trx_commit={self._flush}"
        )

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()


def _now_ms() -> int:
    import time

    return time.time_ns() // 1_000_000
