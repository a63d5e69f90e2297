"""The bare LinkBench schema on PostgreSQL (the reference's `LinkStorePgsql` tables).

`linktable` is hash-partitioned by id1 into 16 (as the MySQL schema is by
key), with the primary key `(link_type, id1, id2)` and the list index
`(id1, link_type, visibility, time, id2) INCLUDE (version, data)`, so a list
page is an index-only range. A link write is one READ COMMITTED transaction:
`INSERT ... ON CONFLICT DO NOTHING RETURNING` says whether the link is new
(then the count goes up); otherwise the row is read `FOR UPDATE` and
updated, and the count goes up if the link was hidden. A delete reads the
visibility `FOR UPDATE` first. Counts stay exact under concurrency: the
locking read sees the latest committed row.

Every statement runs in the schema `linkbench_bare` (dropped and made anew)
of the URL's database, one autocommit connection per thread; durability is
the server's (`describe()` reports `synchronous_commit`). The URL is
`postgresql://user@host:port/db`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any

from ..load import LoadLink, LoadNode
from .base import LinkRow, NodeRow

SCHEMA = "linkbench_bare"
DDL = [
    """CREATE TABLE linktable (
      id1 BIGINT NOT NULL DEFAULT 0,
      id2 BIGINT NOT NULL DEFAULT 0,
      link_type BIGINT NOT NULL DEFAULT 0,
      visibility SMALLINT NOT NULL DEFAULT 0,
      data BYTEA NOT NULL DEFAULT '',
      time BIGINT NOT NULL DEFAULT 0,
      version INT NOT NULL DEFAULT 0,
      PRIMARY KEY (link_type, id1, id2)
    ) PARTITION BY HASH (id1)""",
    *(
        f"CREATE TABLE linktable_{n} PARTITION OF linktable "
        f"FOR VALUES WITH (MODULUS 16, REMAINDER {n})"
        for n in range(16)
    ),
    "CREATE INDEX id1_type ON linktable (id1, link_type, visibility, time, id2) "
    "INCLUDE (version, data)",
    """CREATE TABLE counttable (
      id BIGINT NOT NULL DEFAULT 0,
      link_type BIGINT NOT NULL DEFAULT 0,
      count INT NOT NULL DEFAULT 0,
      time BIGINT NOT NULL DEFAULT 0,
      version BIGINT NOT NULL DEFAULT 0,
      PRIMARY KEY (id, link_type)
    )""",
    """CREATE TABLE nodetable (
      id BIGSERIAL PRIMARY KEY,
      type INT NOT NULL,
      version BIGINT NOT NULL,
      time INT NOT NULL,
      data BYTEA NOT NULL
    )""",
]
_BATCH = 1024
_COUNT_UP = (
    "INSERT INTO counttable (id, link_type, count, time, version) VALUES (%s, %s, 1, %s, 0)"
    " ON CONFLICT (id, link_type) DO UPDATE SET count = counttable.count + 1"
)


class BarePostgresStore:
    """LinkBench's schema on one PostgreSQL database, one connection per thread."""

    name = "bare-postgres"

    def __init__(self, url: str, schema: str = SCHEMA) -> None:
        import psycopg  # only needed when this store runs

        self._psycopg = psycopg
        self._url = url
        self._schema = schema
        self._local = threading.local()
        self._all: list[Any] = []
        self._lock = threading.Lock()
        conn = self._conn()
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
        for statement in DDL:
            conn.execute(statement)
        self._version, self._commit = conn.execute(
            "SELECT current_setting('server_version'), current_setting('synchronous_commit')"
        ).fetchone()

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._psycopg.connect(
                self._url, autocommit=True, options=f"-c search_path={self._schema}"
            )
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def _one(self, sql: str, args: Sequence[Any]) -> Any:
        return self._conn().execute(sql, args).fetchone()

    def _all_rows(self, sql: str, args: Sequence[Any]) -> Any:
        return self._conn().execute(sql, args).fetchall()

    # -- load phase ----------------------------------------------------------------

    def load_links(self, links: Iterable[LoadLink]) -> int:
        conn, total = self._conn(), 0
        counts: dict[tuple[int, int], list[int]] = {}
        it = iter(links)
        with conn.cursor() as cur:
            while batch := list(islice(it, _BATCH)):
                with conn.transaction():
                    cur.executemany(
                        "INSERT INTO linktable"
                        " (id1, id2, link_type, visibility, data, time, version)"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s)"
                        " ON CONFLICT (link_type, id1, id2)"
                        " DO UPDATE SET visibility = EXCLUDED.visibility",
                        [(k.id1, k.id2, k.link_type, 1, k.data, k.time, 0) for k in batch],
                    )
                for k in batch:
                    entry = counts.setdefault((k.id1, k.link_type), [0, 0])
                    entry[0] += 1
                    entry[1] = max(entry[1], k.time)
                total += len(batch)
            rows = [(i, t, n, when) for (i, t), (n, when) in counts.items()]
            for start in range(0, len(rows), _BATCH):
                with conn.transaction():
                    cur.executemany(
                        "INSERT INTO counttable (id, link_type, count, time, version)"
                        " VALUES (%s, %s, %s, %s, 0) ON CONFLICT (id, link_type) DO UPDATE"
                        " SET count = EXCLUDED.count, time = EXCLUDED.time, version = 0",
                        rows[start : start + _BATCH],
                    )
        return total

    def load_nodes(self, nodes: Iterable[LoadNode]) -> int:
        conn, total = self._conn(), 0
        it = iter(nodes)
        with conn.cursor() as cur:
            while batch := list(islice(it, _BATCH)):
                with conn.transaction():
                    cur.executemany(
                        "INSERT INTO nodetable (id, type, version, time, data)"
                        " VALUES (%s, %s, %s, %s, %s)",
                        batch,
                    )
                total += len(batch)
            # New nodes take ids after the loaded ones, as AUTO_INCREMENT does.
            cur.execute(
                "SELECT setval(pg_get_serial_sequence('nodetable', 'id'),"
                " GREATEST((SELECT MAX(id) FROM nodetable), 1))"
            )
        return total

    # -- links -----------------------------------------------------------------------

    def add_link(self, id1: int, link_type: int, id2: int, time: int, data: bytes) -> None:
        conn = self._conn()
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(
                "INSERT INTO linktable (id1, id2, link_type, visibility, data, time, version)"
                " VALUES (%s, %s, %s, 1, %s, %s, 0)"
                " ON CONFLICT (link_type, id1, id2) DO NOTHING RETURNING 1",
                (id1, id2, link_type, data, time),
            )
            if cur.fetchone() is not None:  # a new link
                cur.execute(_COUNT_UP, (id1, link_type, time))
                return
            cur.execute(
                "SELECT visibility FROM linktable"
                " WHERE link_type = %s AND id1 = %s AND id2 = %s FOR UPDATE",
                (link_type, id1, id2),
            )
            row = cur.fetchone()
            if row is not None and row[0] != 1:  # a hidden link shown again
                cur.execute(_COUNT_UP, (id1, link_type, time))
            cur.execute(
                "UPDATE linktable SET visibility = 1, data = %s, time = %s, version = 0"
                " WHERE link_type = %s AND id1 = %s AND id2 = %s",
                (data, time, link_type, id1, id2),
            )

    def delete_link(self, id1: int, link_type: int, id2: int) -> None:
        conn = self._conn()
        with conn.transaction(), conn.cursor() as cur:
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
                    " VALUES (%s, %s, 0, %s, 0) ON CONFLICT (id, link_type) DO UPDATE"
                    " SET count = GREATEST(counttable.count - 1, 0), time = EXCLUDED.time,"
                    " version = counttable.version + 1",
                    (id1, link_type, _now_ms()),
                )

    def count_links(self, id1: int, link_type: int) -> int:
        row = self._one(
            "SELECT count FROM counttable WHERE id = %s AND link_type = %s", (id1, link_type)
        )
        return 0 if row is None else int(row[0])

    def get_links(self, id1: int, link_type: int, id2s: Sequence[int]) -> Any:
        return self._all_rows(
            "SELECT id2, visibility, time, data FROM linktable"
            " WHERE link_type = %s AND id1 = %s AND id2 = ANY(%s)",
            (link_type, id1, list(id2s)),
        )

    def get_link_list(
        self, id1: int, link_type: int, max_time: int, offset: int, limit: int
    ) -> Any:
        return self._all_rows(
            "SELECT id2, time, data FROM linktable"
            " WHERE id1 = %s AND link_type = %s AND visibility = 1"
            " AND time >= 0 AND time <= %s"
            " ORDER BY time DESC, id2 DESC OFFSET %s LIMIT %s",
            (id1, link_type, max_time, offset, limit),
        )

    def last_time(self, links: Sequence[Any]) -> int:
        return int(links[-1][1])

    # -- nodes -----------------------------------------------------------------------

    def add_node(self, node_type: int, version: int, time: int, data: bytes) -> int:
        row = self._one(
            "INSERT INTO nodetable (type, version, time, data) VALUES (%s, %s, %s, %s)"
            " RETURNING id",
            (node_type, version, time, data),
        )
        return int(row[0])

    def get_node(self, node_type: int, node_id: int) -> Any:
        row = self._one(
            "SELECT id, type, version, time, data FROM nodetable WHERE id = %s", (node_id,)
        )
        return row if row is not None and row[1] == node_type else None

    def update_node(
        self, node_id: int, node_type: int, version: int, time: int, data: bytes
    ) -> bool:
        cur = self._conn().execute(
            "UPDATE nodetable SET version = %s, time = %s, data = %s WHERE id = %s AND type = %s",
            (version, time, data, node_id, node_type),
        )
        return bool(cur.rowcount == 1)

    def delete_node(self, node_type: int, node_id: int) -> bool:
        cur = self._conn().execute(
            "DELETE FROM nodetable WHERE id = %s AND type = %s", (node_id, node_type)
        )
        return bool(cur.rowcount == 1)

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
            f"{self.name}: LinkBench schema on PostgreSQL {self._version},"
            f" synchronous_commit={self._commit}"
        )

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        if conns:
            conns[0].execute(f"DROP SCHEMA IF EXISTS {self._schema} CASCADE")
        for conn in conns:
            conn.close()
        self._local = threading.local()


def _now_ms() -> int:
    import time

    return time.time_ns() // 1_000_000
