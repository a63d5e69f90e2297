"""FlockDB benchmark (issue 5): a celebrity's followers, intersected and archived.

1. First page (limit 50) of followers(celebrity) ∩ following(user), where the
   celebrity has N followers (default 1,000,000) and the user follows 200
   accounts, half of them among those followers; against the best SQL join a
   user would write, driven from the small side (`CROSS JOIN` fixes the order),
   on one SQLite file holding the same two lists (target: at least as fast,
   issue 18), and against the join as SQLite plans it by itself.
2. Archiving all N incoming follows of the celebrity as a background job:
   how long it takes, and read latency on other lists before and during it.

Run: `python -m bench flockdb [followers]`.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path

import assocdb
from assocdb.storage.sqlite import _DDL

from .timing import compare, per_call_us, row

CELEBRITY = 10**15
USER = 10**15 + 1
BASE = 1_600_000_000_000
JOIN_SQL = (
    "SELECT a.id2 FROM edges a JOIN edges b ON b.id2 = a.id2 "
    "WHERE a.id1 = ? AND a.atype = ? AND a.state = 0 AND b.id1 = ? AND b.atype = ? "
    "AND b.state = 0 ORDER BY a.id2 DESC LIMIT 51"
)
SMALL_SIDE_JOIN_SQL = (
    "SELECT b.id2 FROM edges b CROSS JOIN edges a ON a.id1 = ? AND a.atype = ? "
    "AND a.id2 = b.id2 AND a.state = 0 WHERE b.id1 = ? AND b.atype = ? AND b.state = 0 "
    "ORDER BY b.id2 DESC LIMIT 51"
)


def build(directory: Path, followers: int) -> tuple[assocdb.Graph, list[int]]:
    graph = assocdb.open(directory / "graph", shards=16)
    graph.define_assoc("follows", inverse="followed_by")
    graph.bulk_load((n, "follows", CELEBRITY, BASE + n) for n in range(1, followers + 1))
    rnd = random.Random(5)
    followed = rnd.sample(range(1, followers + 1), 100) + list(
        range(followers + 1, followers + 101)
    )
    graph.bulk_load((USER, "follows", n, BASE + i) for i, n in enumerate(followed))
    return graph, followed


def bare_copy(directory: Path, followers: int, followed: list[int]) -> sqlite3.Connection:
    """The same two lists, one SQLite file, the same schema and indexes."""
    conn = sqlite3.connect(directory / "join.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(_DDL)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO edges VALUES (?, 2, ?, 0, ?, 1, NULL)",
        ((CELEBRITY, n, BASE + n) for n in range(1, followers + 1)),
    )
    conn.executemany(
        "INSERT INTO edges VALUES (?, 1, ?, 0, ?, 1, NULL)",
        ((USER, n, BASE + i) for i, n in enumerate(followed)),
    )
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    return conn


def intersection(
    graph: assocdb.Graph, conn: sqlite3.Connection
) -> tuple[float, float, float, int, str]:
    """µs per first page: (assocdb, the small-side join, the join as SQLite plans it),
    the statements assocdb ran, SQLite's plan for the latter."""
    query = graph.select(CELEBRITY, "follows", incoming=True) & graph.select(USER, "follows")
    found = query.page(limit=50).items
    params = (CELEBRITY, 2, USER, 1)
    for sql in (JOIN_SQL, SMALL_SIDE_JOIN_SQL):
        expected = [r[0] for r in conn.execute(sql, params).fetchall()][:50]
        assert found == expected, (found[:5], expected[:5])
    statements: list[str] = []
    undo = graph.trace(lambda shard, sql, seconds: statements.append(sql))
    query.page(limit=50)
    undo()
    plan = " / ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + JOIN_SQL, (1, 2, 3, 4)))
    ours, small = compare(
        lambda i: query.page(limit=50),
        lambda i: conn.execute(SMALL_SIDE_JOIN_SQL, params).fetchall(),
        calls=200,
        rounds=7,
    )
    planned = per_call_us(lambda i: conn.execute(JOIN_SQL, params).fetchall(), 3)
    return ours, small, planned, len(statements), plan


def archive_while_reading(graph: assocdb.Graph, followers: int) -> tuple[float, float, float, int]:
    readers = [random.Random(9).randrange(1, followers) for _ in range(5000)]

    def read_latencies(stop: threading.Event, out: list[float]) -> None:
        n = 0
        while not stop.is_set() and n < len(readers) * 100:
            start = time.perf_counter()
            graph.assoc_range(readers[n % len(readers)], "follows", limit=50)
            out.append(time.perf_counter() - start)
            n += 1
            time.sleep(0.001)  # a steady reader, not one that takes every cycle

    before: list[float] = []
    stop = threading.Event()
    probe = threading.Thread(target=read_latencies, args=(stop, before))
    probe.start()
    time.sleep(1.0)
    stop.set()
    probe.join()

    during: list[float] = []
    stop = threading.Event()
    probe = threading.Thread(target=read_latencies, args=(stop, during))
    start = time.perf_counter()
    graph.node_archive(CELEBRITY, "follows", direction="in")
    probe.start()
    assert graph.drain()
    seconds = time.perf_counter() - start
    stop.set()
    probe.join()
    assert graph.assoc_count(CELEBRITY, "followed_by") == 0
    assert graph.assoc_count(CELEBRITY, "followed_by", "archived") == followers
    return seconds, statistics.median(before), statistics.median(during), len(during)


def main(args: list[str] | None = None) -> None:
    followers = int(args[0]) if args else 1_000_000
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-flockdb-"))
    try:
        start = time.perf_counter()
        graph, followed = build(directory, followers)
        load = time.perf_counter() - start
        conn = bare_copy(directory, followers, followed)
        ours, small, planned, statements, plan = intersection(graph, conn)
        seconds, before, during, reads = archive_while_reading(graph, followers)
        graph.close()
        conn.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"flockdb benchmark: a celebrity with {followers:,} followers (loaded in {load:.0f} s)")
    print(f"{'':<44} {'assocdb':>14} {'baseline':>14} {'ratio':>8}")
    print(
        row(
            "first page of followers ∩ following, µs",
            f"{ours:.0f}",
            f"{small:.0f}",
            ours / small,
            f"target ≤ 1.00x; baseline: small-side join in one file; {statements} statements",
        )
    )
    print(
        row(
            "  the same, vs the join as SQLite plans it",
            f"{ours:.0f}",
            f"{planned:.0f}",
            ours / planned,
            f"its plan: {plan}",
        )
    )
    print(
        f"archive of {followers:,} incoming edges in the background: {seconds:.1f} s "
        f"({followers / seconds:,.0f} edges/s)"
    )
    print(
        f"  assoc_range of other lists meanwhile: median {during * 1e6:.0f} µs over {reads:,} "
        f"reads (before: {before * 1e6:.0f} µs)"
    )


if __name__ == "__main__":
    main()
