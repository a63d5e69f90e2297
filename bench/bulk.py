"""Bulk load of a soc-Slashdot0902-shaped graph: assocdb vs bare executemany, one run.

    python -m bench bulk [--edges N] [--runs R] [--mysql URL] [--snap FILE] [--random]

The graph is generated with the shape of SNAP's soc-Slashdot0902 (82,168
nodes, 948,464 directed edges, heavy-tailed out- and in-degree, sorted by
source as SNAP files are), or read from `--snap FILE` (the real one). It is
loaded as `follows` with inverse `followed_by` into 16 shards, three ways, in
alternating rounds:

* assocdb, fresh: `bulk_load` into a new graph (and again with the change feed on:
  both legs of every edge recorded in the feed, in the same transactions);
* assocdb, partly filled: a new graph that already holds a third of the
  edges (and so most lists), then the whole graph loaded on top;
* bare: the same rows (both legs) and counts, sorted by shard and key,
  inserted with one `executemany` per shard and table into a new graph's
  schema, one process, no merge (the floor a store on SQLite can reach).

With `--random`, `--edges` distinct random edges over 2,000,000 ids in random
order instead, loaded fresh, beside the bare rows and count upserts
`executemany`d into one file in the input's order, 100,000 edges a
transaction (the baseline of issue 37), and the sorted 16-file bare load.

Input edges/s and rows/s (edge rows of both legs) per load, medians over the
runs with their spread, and the CPU time of this process and its workers
per input edge (the machine is shared: CPU time says what wall time cannot;
a database server's own CPU is not in it). With `--mysql URL` (or
$ASSOCDB_TEST_MYSQL_URL) the same loads run on MariaDB, beside a bare multi-row INSERT and a bare
`LOAD DATA LOCAL INFILE` of the same rows when the server allows it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import resource
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import assocdb
from assocdb.core.ids import shard_of
from assocdb.storage.sqlite import _DDL

NODES, EDGES = 82_168, 948_464
SHARDS = 16
BASE_TIME = 1_600_000_000_000


def slashdot_like(nodes: int = NODES, edges: int = EDGES, seed: int = 9) -> list[tuple[int, int]]:
    """Distinct (source, target) pairs, ids from 1, sorted by source: out-degrees from a
    Pareto law capped at 2,500 (as Slashdot's are), targets by Pareto popularity."""
    rnd = random.Random(seed)
    cap = max(1, min(2_500, nodes // 4))
    weights = [rnd.paretovariate(1.2) for _ in range(nodes)]
    scale = edges / sum(weights)
    degrees = [max(1, min(cap, round(w * scale))) for w in weights]
    popularity = list(
        itertools.accumulate(min(800.0, rnd.paretovariate(1.0)) for _ in range(nodes))
    )
    ids = range(1, nodes + 1)
    pairs: set[tuple[int, int]] = set()
    for source, degree in enumerate(degrees, 1):
        targets = rnd.choices(ids, cum_weights=popularity, k=degree)
        pairs.update((source, t) for t in targets if t != source)
    sources = list(itertools.accumulate(degrees))
    while len(pairs) < edges:  # top up what repeats and self-loops took away
        more = edges - len(pairs)
        for source, target in zip(
            rnd.choices(ids, cum_weights=sources, k=more),
            rnd.choices(ids, cum_weights=popularity, k=more),
            strict=True,
        ):
            if source != target:
                pairs.add((source, target))
    return sorted(pairs)[:edges]


def read_snap(path: str) -> list[tuple[int, int]]:
    """A SNAP edge list (`# comments`, then `from<TAB>to`), ids shifted to start at 1."""
    with open(path) as lines:
        return [
            (int(a) + 1, int(b) + 1)
            for a, b in (line.split() for line in lines if line.strip() and line[0] != "#")
        ]


def edges_of(pairs: list[tuple[int, int]]) -> Iterator[tuple[int, str, int, int]]:
    for n, (a, b) in enumerate(pairs):
        yield a, "follows", b, BASE_TIME + n


def new_graph(where: str, feed: bool = False) -> assocdb.Graph:
    graph = assocdb.open(where, shards=SHARDS)
    graph.define_assoc("follows", inverse="followed_by")
    if feed:
        graph.enable_feed()
    return graph


class Timer:
    """Wall and CPU seconds (this process and its ended children) of a `with` block."""

    def __enter__(self) -> Timer:
        self._wall, self._cpu = time.perf_counter(), cpu_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        self.took = (time.perf_counter() - self._wall, cpu_seconds() - self._cpu)


def load(
    where: str, pairs: list[tuple[int, int]], before: list[tuple[int, int]], feed: bool = False
) -> tuple[float, float]:
    """How long `bulk_load` takes for `pairs` into a graph that holds `before` already
    (`feed`: with the change feed on, so every row loaded is recorded too)."""
    with new_graph(where, feed) as graph:
        if before:
            graph.bulk_load(edges_of(before))
        with Timer() as timer:
            graph.bulk_load(edges_of(pairs))
        assert graph.assoc_count(pairs[0][0], "follows") > 0
    return timer.took


def bare_rows(pairs: list[tuple[int, int]]) -> dict[int, list[tuple[int, ...]]]:
    """Both legs of every edge, per shard, sorted by key (follows = 1, followed_by = 2).
    Times grow with (source, target), so this is also the tables' primary key order."""
    shards: dict[int, list[tuple[int, ...]]] = {}
    for n, (a, b) in enumerate(pairs):
        time_ = BASE_TIME + n
        shards.setdefault(shard_of(a, SHARDS), []).append((a, 1, b, 0, time_, 1, None))
        shards.setdefault(shard_of(b, SHARDS), []).append((b, 2, a, 0, time_, 1, None))
    for rows in shards.values():
        rows.sort()
    return shards


def bare_sqlite(where: str, pairs: list[tuple[int, int]]) -> tuple[float, float]:
    """How long sorting and inserting the rows and counts takes, one executemany per shard."""
    new_graph(where).close()
    with Timer() as timer:
        for shard, rows in sorted(bare_rows(pairs).items()):
            counts = Counter((row[0], row[1]) for row in rows)
            conn = sqlite3.connect(Path(where) / f"shard-{shard:04d}.db", isolation_level=None)
            conn.execute("PRAGMA journal_mode = WAL")  # assocdb's durability settings
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(_DDL)
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO edges VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            conn.executemany(
                "INSERT INTO counts VALUES (?, ?, 0, ?)",
                ((a, t, n) for (a, t), n in counts.items()),
            )
            conn.execute("COMMIT")
            conn.close()
    return timer.took


def bare_one_file(where: str, pairs: list[tuple[int, int]]) -> tuple[float, float]:
    """How long a bare `executemany` of the same rows (both legs) and count upserts
    takes into one file, in the input's order, in transactions of 100,000 edges."""
    conn = sqlite3.connect(Path(where) / "bare.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(_DDL)
    count = (
        "INSERT INTO counts VALUES (?, ?, 0, 1) "
        "ON CONFLICT (id1, atype, state) DO UPDATE SET n = n + 1"
    )
    with Timer() as timer:
        for start in range(0, len(pairs), 100_000):
            rows = []
            for n, (a, b) in enumerate(pairs[start : start + 100_000], start):
                rows += [(a, 1, b, 0, BASE_TIME + n, 1, None), (b, 2, a, 0, BASE_TIME + n, 1, None)]
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO edges VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            conn.executemany(count, [row[:2] for row in rows])
            conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # on the disk, as a load's end
    conn.close()
    return timer.took


def random_pairs(edges: int, nodes: int = 2_000_000, seed: int = 5) -> list[tuple[int, int]]:
    """`edges` distinct random (source, target) pairs over `nodes` ids, unsorted."""
    rnd, pairs = random.Random(seed), set()
    while len(pairs) < edges:
        a, b = rnd.randrange(1, nodes + 1), rnd.randrange(1, nodes + 1)
        if a != b:
            pairs.add((a, b))
    shuffled = list(pairs)
    rnd.shuffle(shuffled)
    return shuffled


def cpu_seconds() -> float:
    """CPU time of this process and of its children that ended (the bulk workers)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(
    runs: int, pairs: list[tuple[int, int]], ways: dict[str, Callable[[str], tuple[float, float]]]
) -> dict[str, list[tuple[float, float]]]:
    """(wall seconds, CPU seconds) of each way's timed part, per run."""
    seconds: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for _ in range(runs):
        for name, way in ways.items():  # alternating: a busy machine slows all alike
            where = tempfile.mkdtemp(prefix="bench-bulk-")
            try:
                wall, cpu = way(where)
                seconds[name].append((wall, cpu))
                print(f"  {name}: {len(pairs) / wall:,.0f} edges/s", flush=True)
            finally:
                shutil.rmtree(where, ignore_errors=True)
    return seconds


def report(
    title: str, pairs: list[tuple[int, int]], seconds: dict[str, list[tuple[float, float]]]
) -> None:
    edges, rows = len(pairs), 2 * len(pairs)
    bare = statistics.median(wall for wall, _ in seconds["bare"])
    print(f"\n{title}: {edges:,} input edges, {rows:,} edge rows, {SHARDS} shards")
    print(
        f"{'':<34} {'edges/s':>9} {'rows/s':>9} {'spread (edges/s)':>19} {'vs bare':>7} "
        f"{'CPU µs/edge':>11}"
    )
    for name, runs in seconds.items():
        times = [wall for wall, _ in runs]
        median = statistics.median(times)
        cpu = statistics.median(cpu for _, cpu in runs) / edges * 1e6
        low, high = edges / max(times), edges / min(times)
        print(
            f"{name:<34} {edges / median:>9,.0f} {rows / median:>9,.0f} "
            f"{low:>9,.0f}-{high:<9,.0f} {bare / median:>7.2f}x {cpu:>11.1f}"
        )
    print("target: assocdb >= 100,000 input edges/s (>= 200,000 rows/s) on SQLite")


def main(args: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench bulk")
    parser.add_argument("--edges", type=int, default=EDGES)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--snap", help="a SNAP edge list to load instead of a generated graph")
    parser.add_argument("--mysql", default=os.environ.get("ASSOCDB_TEST_MYSQL_URL"))
    parser.add_argument(
        "--random",
        action="store_true",
        help="random edges over 2M ids (unsorted), also against one bare file",
    )
    options = parser.parse_args(args)
    if options.random:
        pairs = random_pairs(options.edges)
        ways = {
            "assocdb bulk_load, fresh": lambda where: load(where, pairs, []),
            "bare": lambda where: bare_one_file(where, pairs),
            "bare, 16 shard files, sorted": lambda where: bare_sqlite(where, pairs),
        }
        report("SQLite, random edges", pairs, measure(options.runs, pairs, ways))
        return
    if options.snap:
        pairs = read_snap(options.snap)
    else:
        nodes = max(10, NODES * options.edges // EDGES)
        pairs = slashdot_like(nodes, options.edges)
    before = random.Random(3).sample(pairs, len(pairs) // 3)
    ways: dict[str, Callable[[str], tuple[float, float]]] = {
        "assocdb bulk_load, fresh": lambda where: load(where, pairs, []),
        "assocdb bulk_load, fresh, feed on": lambda where: load(where, pairs, [], feed=True),
        "assocdb bulk_load, 1/3 loaded": lambda where: load(where, pairs, before),
        "bare": lambda where: bare_sqlite(where, pairs),
    }
    report("SQLite", pairs, measure(options.runs, pairs, ways))
    if options.mysql:
        from . import bulk_mysql

        bulk_mysql.main(options.mysql, pairs, before, options.runs)
