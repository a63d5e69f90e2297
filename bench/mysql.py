"""MySQL/MariaDB backend benchmark (issue 6), against bare SQL on the same server, in one run:

1. `bulk_load` of ego-Facebook (symmetric: both directions, with counts) into
   16 shards vs a bare multi-row `executemany` of the same rows and count rows
   into one schema of the same DDL, in one transaction, same driver;
2. uncached `assoc_range(limit=50)` vs the bare SQL query on the same primary
   key range, over a connection of the same driver (the bare query skips the
   pool, the merge-free read path and the record types);
3. `assoc_add` end to end (journal fsync with group commit, then the forward
   and inverse legs, each its own InnoDB transaction with a locking read), 1
   and 8 threads, vs the bare write: the edge, its inverse and both count
   rows upserted in one autocommitted transaction per write.

The server's durability is what it is (`innodb_flush_log_at_trx_commit` is
printed); both sides pay it. The URL comes from ASSOCDB_BENCH_MYSQL_URL or
ASSOCDB_TEST_MYSQL_URL (default mysql://root@127.0.0.1:3306/).

Run: `python -m bench mysql`.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import assocdb
from assocdb.cli.datasets import ego_facebook
from assocdb.core.ids import shard_of
from assocdb.storage.mysql import _SHARD_DDL, MySQLBackend
from assocdb.storage.mysqlpool import connect_args, parse_url

from .timing import HEADER, compare, row

BASE = 1_600_000_000_000
SECONDS = 3.0
RANGE_SQL = (
    "SELECT id2, time, updated_at, data FROM {s}.edges WHERE id1 = %s AND atype = %s "
    "AND state = 0 ORDER BY time DESC, id2 DESC LIMIT 50"
)
BARE_EDGE = (
    "INSERT INTO {s}.edges VALUES (%s, %s, %s, 0, %s, %s, NULL) "
    "ON DUPLICATE KEY UPDATE time = VALUES(time), updated_at = VALUES(updated_at)"
)
BARE_COUNT = (
    "INSERT INTO {s}.counts VALUES (%s, %s, 0, 1) ON DUPLICATE KEY UPDATE n = n + VALUES(n)"
)


def server() -> str:
    return os.environ.get(
        "ASSOCDB_BENCH_MYSQL_URL",
        os.environ.get("ASSOCDB_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/"),
    ).rstrip("/")


def connect(backend: MySQLBackend) -> Any:
    """A bare connection of the backend's driver, with the backend's settings."""
    args = connect_args(backend.settings, backend._mysqlclient, 60.0)
    return backend._driver.connect(**args)


def bulk_load(url: str) -> tuple[assocdb.Graph, float, int]:
    edges = [(a, "friend", b, BASE + n) for n, (a, b) in enumerate(ego_facebook())]
    graph = assocdb.open(url, shards=16, journal=":memory:", cache=None)
    graph.define_assoc("friend", symmetric=True)
    start = time.perf_counter()
    graph.bulk_load(edges)
    return graph, time.perf_counter() - start, len(edges)


def bare_insert(conn: Any, schema: str) -> float:
    """The same rows (both directions) and count rows, into one schema, one transaction."""
    rows = []
    for n, (a, b) in enumerate(ego_facebook()):
        rows.append((a, 1, b, 0, BASE + n, 1, None))
        rows.append((b, 1, a, 0, BASE + n, 1, None))
    counts: dict[int, int] = {}
    for r in rows:
        counts[r[0]] = counts.get(r[0], 0) + 1
    with conn.cursor() as cur:
        for ddl in _SHARD_DDL:
            cur.execute(ddl.format(s=schema))
        start = time.perf_counter()
        cur.execute("START TRANSACTION")
        cur.executemany(f"INSERT INTO {schema}.edges VALUES (%s, %s, %s, %s, %s, %s, %s)", rows)
        cur.executemany(f"INSERT INTO {schema}.counts VALUES (%s, 1, 0, %s)", list(counts.items()))
        cur.execute("COMMIT")
    return time.perf_counter() - start


def range_vs_sql(graph: assocdb.Graph, conn: Any) -> tuple[float, float]:
    backend: MySQLBackend = graph.engine.backend  # type: ignore[assignment]
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


def rate(threads: int, work: Callable[[int, int], None]) -> float:
    """Calls per second of `work(thread, n)` from `threads` threads for SECONDS."""
    counts = [0] * threads
    stop = time.perf_counter() + SECONDS

    def loop(t: int) -> None:
        n = 0
        while time.perf_counter() < stop:
            work(t, n)
            n += 1
        counts[t] = n

    runners = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    started = time.perf_counter()
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    return sum(counts) / (time.perf_counter() - started)


def assoc_add(url: str, journal: Path, threads: int) -> float:
    graph = assocdb.open(url, shards=16, journal=journal)
    graph.define_assoc("follows", inverse="followed_by")

    def write(t: int, n: int) -> None:
        assert graph.assoc_add(10**9 + t, "follows", n + 1).status == "applied"

    try:
        return rate(threads, write)
    finally:
        graph.close()


def bare_add(backend: MySQLBackend, threads: int) -> float:
    schema = backend._schemas[0]
    conns = [connect(backend) for _ in range(threads)]
    edge, count = BARE_EDGE.format(s=schema), BARE_COUNT.format(s=schema)

    def write(t: int, n: int) -> None:
        a, b, now = 10**9 + t, n + 1, time.time_ns() // 1000
        with conns[t].cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute(edge, (a, 1, b, now // 1000, now))
            cur.execute(edge, (b, 2, a, now // 1000, now))
            cur.execute(count, (a, 1))
            cur.execute(count, (b, 2))
            cur.execute("COMMIT")

    try:
        return rate(threads, write)
    finally:
        for conn in conns:
            conn.close()


def main() -> None:
    base = server()
    name = f"bench_{uuid.uuid4().hex[:8]}"
    urls = [f"{base}/{name}_{part}" for part in ("load", "bare", "add1", "add8")]
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-mysql-"))
    try:
        graph, load_s, edges = bulk_load(urls[0])
        backend: MySQLBackend = graph.engine.backend  # type: ignore[assignment]
        conn = connect(backend)
        with conn.cursor() as cur:
            cur.execute("SELECT @@version, @@innodb_flush_log_at_trx_commit")
            version, flush = cur.fetchone()
        bare_schema = f"`{parse_url(urls[1]).name}_s0`"
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {bare_schema}")
        bare_s = bare_insert(conn, bare_schema)
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
            MySQLBackend.drop(url)
        shutil.rmtree(directory, ignore_errors=True)
    driver = backend._driver.__name__
    print(
        f"MySQL backend benchmark ({version}, innodb_flush_log_at_trx_commit={flush}, "
        f"driver {driver}, 16 shards; baselines: bare SQL on the same server in this run)"
    )
    print(HEADER)
    ours, bare = edges / load_s, edges / bare_s
    print(
        row(
            "bulk_load ego-Facebook, edges/s (2 rows each)",
            f"{ours:,.0f}",
            f"{bare:,.0f}",
            ours / bare,
            "bare: one multi-row INSERT txn",
        )
    )
    print(
        row(
            "assoc_range(limit=50) uncached, µs",
            f"{range_us:.1f}",
            f"{sql_us:.1f}",
            range_us / sql_us,
            "bare: the same query",
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
