"""PostgreSQL backend benchmark (issue 20), against bare SQL on the same server, in one run:

1. `bulk_load` of ego-Facebook (symmetric: both directions, with counts) into
   16 shards vs a bare binary `COPY` of the same rows and count rows into one
   schema of the same DDL, in one transaction, same driver;
2. uncached `assoc_range(limit=50)` vs the bare SQL query on the same index
   range, over a connection of the same driver and settings (the bare query
   skips the pool, the read path and the record types);
3. `assoc_add` end to end (journal fsync with group commit, then the forward
   and inverse legs, each its own REPEATABLE READ transaction with a locking
   read), 1, 8 and 64 threads, vs the bare write: the edge, its inverse and
   both count rows upserted in one transaction per write.

The server's durability is what it is (`fsync` and `synchronous_commit` are
printed); both sides pay it. The URL comes from ASSOCDB_BENCH_POSTGRES_URL or
ASSOCDB_TEST_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/postgres;
its path is the database).

Run: `python -m bench postgres`.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import assocdb
from assocdb.cli.datasets import ego_facebook
from assocdb.core.ids import shard_of
from assocdb.storage.pgconn import connect, parse_url
from assocdb.storage.postgres import _SHARD_DDL, PostgresBackend

from .mysql import rate
from .timing import HEADER, compare, row

BASE = 1_600_000_000_000
RANGE_SQL = (
    "SELECT id2, time, updated_at, data FROM {s}.edges WHERE id1 = %s AND atype = %s "
    "AND state = 0 ORDER BY time DESC, id2 DESC LIMIT 50"
)
BARE_EDGE = (
    "INSERT INTO {s}.edges AS t VALUES (%s, %s, %s, 0, %s, %s, NULL) ON CONFLICT (id1, atype, id2) "
    "DO UPDATE SET time = EXCLUDED.time, updated_at = EXCLUDED.updated_at"
)
BARE_COUNT = (
    "INSERT INTO {s}.counts AS t VALUES (%s, %s, 0, 1) "
    "ON CONFLICT (id1, atype, state) DO UPDATE SET n = t.n + EXCLUDED.n"
)


def server() -> tuple[str, str]:
    """The server URL (no path) and the database the benchmark's schemas go in."""
    url = os.environ.get(
        "ASSOCDB_BENCH_POSTGRES_URL",
        os.environ.get(
            "ASSOCDB_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    parts = urlparse(url)
    return parts._replace(path="", query="").geturl(), parts.path.strip("/") or "postgres"


def bulk_load(url: str) -> tuple[assocdb.Graph, float, int]:
    edges = [(a, "friend", b, BASE + n) for n, (a, b) in enumerate(ego_facebook())]
    graph = assocdb.open(url, shards=16, journal=":memory:", cache=None)
    graph.define_assoc("friend", symmetric=True)
    start = time.perf_counter()
    graph.bulk_load(edges)
    return graph, time.perf_counter() - start, len(edges)


def bare_copy(conn: Any, schema: str) -> float:
    """The same rows (both directions) and count rows, into one schema, one transaction."""
    rows = []
    for n, (a, b) in enumerate(ego_facebook()):
        rows.append((a, 1, b, 0, BASE + n, 1, None))
        rows.append((b, 1, a, 0, BASE + n, 1, None))
    rows.sort()
    counts: dict[int, int] = {}
    for r in rows:
        counts[r[0]] = counts.get(r[0], 0) + 1
    conn.execute(f"CREATE SCHEMA {schema}")
    for ddl in _SHARD_DDL:
        conn.execute(ddl.format(s=schema))
    start = time.perf_counter()
    with conn.transaction(), conn.cursor() as cur:
        edges = f"COPY {schema}.edges FROM STDIN (FORMAT BINARY)"
        with cur.copy(edges) as copy:
            copy.set_types(["int8", "int4", "int8", "int2", "int8", "int8", "bytea"])
            for r in rows:
                copy.write_row(r)
        with cur.copy(f"COPY {schema}.counts FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "int4", "int2", "int8"])
            for id1, n in sorted(counts.items()):
                copy.write_row((id1, 1, 0, n))
    return time.perf_counter() - start


def range_vs_sql(graph: assocdb.Graph, conn: Any) -> tuple[float, float]:
    backend: PostgresBackend = graph.engine.backend  # type: ignore[assignment]
    people = list(range(1, 4040))
    random.Random(7).shuffle(people)
    atype = graph.schema.assoc_type("friend").id
    sql = [RANGE_SQL.format(s=schema) for schema in backend._schemas]
    shard = [shard_of(p, graph.shards) for p in people]
    cur = conn.cursor()

    def ours(i: int) -> object:
        return graph.assoc_range(people[i % 4039], "friend", limit=50)

    def bare(i: int) -> object:
        j = i % 4039
        cur.execute(sql[shard[j]], (people[j], atype))
        return cur.fetchall()

    return compare(ours, bare, calls=1000, rounds=5)


def assoc_add(url: str, journal: Path, threads: int) -> float:
    graph = assocdb.open(url, shards=16, journal=journal)
    graph.define_assoc("follows", inverse="followed_by")

    def write(t: int, n: int) -> None:
        assert graph.assoc_add(10**9 + t, "follows", n + 1).status == "applied"

    try:
        return rate(threads, write)
    finally:
        graph.close()


def bare_add(backend: PostgresBackend, threads: int) -> float:
    schema = backend._schemas[0]
    conns = [connect(backend.settings, 60.0) for _ in range(threads)]
    edge, count = BARE_EDGE.format(s=schema), BARE_COUNT.format(s=schema)

    def write(t: int, n: int) -> None:
        a, b, now = 10**9 + t, n + 1, time.time_ns() // 1000
        conn = conns[t]
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(edge, (a, 1, b, now // 1000, now))
            cur.execute(edge, (b, 2, a, now // 1000, now))
            cur.execute(count, (a, 1))
            cur.execute(count, (b, 2))

    try:
        return rate(threads, write)
    finally:
        for conn in conns:
            conn.close()


def main() -> None:
    base, database = server()
    name = f"bench_{uuid.uuid4().hex[:8]}"
    urls = [
        f"{base}/{name}_{part}?database={database}" for part in ("load", "bare", "add1", "add8")
    ]
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-postgres-"))
    try:
        graph, load_s, edges = bulk_load(urls[0])
        backend: PostgresBackend = graph.engine.backend  # type: ignore[assignment]
        conn = connect(backend.settings, 600.0)
        version, fsync, commit = conn.execute(
            "SELECT split_part(version(), ' ', 2), current_setting('fsync'), "
            "current_setting('synchronous_commit')"
        ).fetchone()
        bare_s = bare_copy(conn, f'"{parse_url(urls[1]).name}_s0"')
        range_us, sql_us = range_vs_sql(graph, conn)
        add1 = assoc_add(urls[2], directory / "j1.db", 1)
        bare1 = bare_add(backend, 1)
        add8 = assoc_add(urls[3], directory / "j8.db", 8)
        bare8 = bare_add(backend, 8)
        add64 = assoc_add(urls[3], directory / "j64.db", 64)
        bare64 = bare_add(backend, 64)
        conn.close()
        graph.close()
    finally:
        for url in urls:
            PostgresBackend.drop(url)
        shutil.rmtree(directory, ignore_errors=True)
    print(
        f"PostgreSQL backend benchmark ({version}, fsync={fsync}, synchronous_commit={commit}, "
        f"psycopg, 16 shards; baselines: bare SQL on the same server in this run)"
    )
    print(HEADER)
    ours, bare = edges / load_s, edges / bare_s
    print(
        row(
            "bulk_load ego-Facebook, edges/s (2 rows each)",
            f"{ours:,.0f}",
            f"{bare:,.0f}",
            ours / bare,
            "bare: one binary COPY txn",
        )
    )
    print(
        row(
            "assoc_range(limit=50) uncached, µs",
            f"{range_us:.1f}",
            f"{sql_us:.1f}",
            range_us / sql_us,
            "≤ 1.3x; bare: the same query",
        )
    )
    for threads, ours_rate, bare_rate in ((1, add1, bare1), (8, add8, bare8), (64, add64, bare64)):
        print(
            row(
                f"assoc_add, journaled, {threads} thread(s), writes/s",
                f"{ours_rate:,.0f}",
                f"{bare_rate:,.0f}",
                ours_rate / bare_rate,
                "bare: 1 txn, edge+inverse+counts",
            )
        )


if __name__ == "__main__":
    main()
