"""Foundation benchmark (issue 2), on SQLite, in one run:

1. uncached `assoc_range(limit=50)` vs the bare SQL query on the same index,
   over the ego-Facebook friend lists (target: ratio <= 1.3);
2. a page 100,000 items deep vs page 1 of a 200,000-edge list, both by
   cursor (target: ratio <= 1.2);
3. `bulk_load` of ego-Facebook (symmetric, so both directions, with counts)
   vs a bare `executemany` of the same rows into the same schema in one
   process (target: >= 100,000 edges/s).

Run: `make bench` or `python -m bench foundation`.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import assocdb
from assocdb.cli.datasets import ego_facebook
from assocdb.core.ids import shard_of
from assocdb.storage.sqlite import _DDL

from .timing import HEADER, compare, row

BASE = 1_600_000_000_000
CELEBRITY = 10**12
CELEBRITY_FOLLOWERS = 200_000
RANGE_SQL = (
    "SELECT id2, time, updated_at, data FROM edges WHERE id1 = ? AND atype = ? AND state = 0 "
    "ORDER BY time DESC, id2 DESC LIMIT 50"
)


def bulk_load(directory: Path) -> tuple[assocdb.Graph, float, int]:
    edges = [(a, "friend", b, BASE + n) for n, (a, b) in enumerate(ego_facebook())]
    # No cache: these figures are the store's own (bench/cache.py measures the cache).
    graph = assocdb.open(directory / "graph", shards=16, cache=None)
    graph.define_assoc("friend", symmetric=True)
    graph.define_assoc("follows", inverse="followed_by")
    start = time.perf_counter()
    graph.bulk_load(edges)
    seconds = time.perf_counter() - start
    return graph, seconds, len(edges)


def bare_insert(directory: Path) -> tuple[float, int]:
    """The same rows (both directions) and count rows, straight into one SQLite file."""
    rows = []
    for n, (a, b) in enumerate(ego_facebook()):
        rows.append((a, 1, b, 0, BASE + n, 1, None))
        rows.append((b, 1, a, 0, BASE + n, 1, None))
    counts: dict[int, int] = {}
    for r in rows:
        counts[r[0]] = counts.get(r[0], 0) + 1
    conn = sqlite3.connect(directory / "bare.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(_DDL)
    start = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO edges VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.executemany("INSERT INTO counts VALUES (?, 1, 0, ?)", list(counts.items()))
    conn.execute("COMMIT")
    seconds = time.perf_counter() - start
    conn.close()
    return seconds, len(rows) // 2


def range_vs_sql(graph: assocdb.Graph, directory: Path) -> tuple[float, float]:
    people = list(range(1, 4040))
    random.Random(7).shuffle(people)
    atype = graph.schema.assoc_type("friend").id
    conns = [
        sqlite3.connect(directory / "graph" / f"shard-{s:04d}.db") for s in range(graph.shards)
    ]
    shard = [shard_of(p, graph.shards) for p in people]

    def ours(i: int) -> object:
        return graph.assoc_range(people[i % 4039], "friend", limit=50)

    def bare(i: int) -> object:
        j = i % 4039
        return conns[shard[j]].execute(RANGE_SQL, (people[j], atype)).fetchall()

    return compare(ours, bare, calls=4000)


def deep_vs_first_page(graph: assocdb.Graph) -> tuple[float, float]:
    graph.bulk_load(
        (CELEBRITY + n, "follows", CELEBRITY, BASE + n) for n in range(CELEBRITY_FOLLOWERS)
    )
    cursor, depth = None, 0
    while depth < 100_000:
        page = graph.assoc_page(CELEBRITY, "followed_by", cursor, limit=5000)
        depth += len(page.items)
        cursor = page.next_cursor
    assert graph.assoc_count(CELEBRITY, "followed_by") == CELEBRITY_FOLLOWERS

    def deep(i: int) -> object:
        return graph.assoc_page(CELEBRITY, "followed_by", cursor, limit=50)

    def first(i: int) -> object:
        return graph.assoc_page(CELEBRITY, "followed_by", None, limit=50)

    return compare(deep, first, calls=2000)


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-"))
    try:
        graph, load_s, edges = bulk_load(directory)
        bare_s, _ = bare_insert(directory)
        range_us, sql_us = range_vs_sql(graph, directory)
        deep_us, first_us = deep_vs_first_page(graph)
        graph.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print("foundation benchmark (SQLite, 16 shards; baselines measured in this run)")
    print(HEADER)
    print(
        row(
            "assoc_range(limit=50) uncached, µs",
            f"{range_us:.1f}",
            f"{sql_us:.1f}",
            range_us / sql_us,
            "<= 1.3x the bare SQL query",
        )
    )
    print(
        row(
            "page 100k deep vs page 1, µs (limit=50)",
            f"{deep_us:.1f}",
            f"{first_us:.1f}",
            deep_us / first_us,
            "<= 1.2x page 1",
        )
    )
    ours, bare = edges / load_s, edges / bare_s
    print(
        row(
            "bulk_load ego-Facebook, edges/s (2 rows each)",
            f"{ours:,.0f}",
            f"{bare:,.0f}",
            ours / bare,
            ">= 100,000 edges/s",
        )
    )


if __name__ == "__main__":
    main()
