"""Write pipeline benchmark (issue 17): durable `assoc_add` against bare SQL, one run.

Every write is durable when acknowledged, on both sides:

* bare, the same work by hand: one SQLite file (WAL, synchronous=FULL), each
  write the forward and inverse edge rows (`INSERT OR REPLACE` on the primary
  key) and both lists' count upserts; one COMMIT (fsync) per write from one
  writer, one per 8 writes and one per 100;
* assocdb: 16 SQLite shards, `assoc_add` of a type with an inverse (journal
  fsync, both legs, counts), from 1, 8 and 64 threads one write at a time,
  and `Graph.batch()` of 100 from one thread; ids random over 2,000,000
  nodes, so writes spread over shards and lists as in a real graph;
* every store is preloaded with `--preload` random edges (default 1,000,000,
  both legs and counts) first: on fresh tiny tables every insert hits the
  same cached pages, and every store looks 5-7x faster than on real data;
* a mixed load on 8 threads, 90% `assoc_range(limit=50)` / 10% `assoc_add`:
  reads/s and writes/s;
* assocdb's own statements run bare (`OwnStatements`): per write batch, the
  reads before journaling, the journal's INSERTs (and DELETEs of the jobs
  fenced since the last batch) and fsynced COMMIT, and per
  touched shard BEGIN IMMEDIATE, the read of the written keys, the edges'
  upsert, the counts' upsert and COMMIT, on the same schema and pragmas,
  from one thread with no layer of assocdb in between: the floor that its
  SQL and schema put under assocdb's writes, 1 and 100 writes per batch.

Each row is run `--rounds` times (default 3), subject and baseline
alternating; the table shows the median and the spread (min-max), and for
the one-writer rows the median latency of a write (p50).

With `--http`, the same writes through `assocdb serve --workers 2` on the
same machine: `assoc_add` one per request from 8 client threads, and
`Client.batch()` of 100 writes (one request each) from 4 threads.

Run: `python -m bench writes [--seconds 2] [--rounds 3] [--preload 1000000]
[--http]`. MariaDB's rows (`assoc_add` from 1, 8 and 64 threads beside bare
InnoDB transactions at the same concurrency) are in `python -m bench mysql`.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import assocdb
from assocdb.core.ids import shard_of
from assocdb.storage.sqlite import _DDL as SHARD_DDL
from assocdb.writes.applier import FENCE_SECONDS
from assocdb.writes.journal import _DDL as JOURNAL_DDL

NODES = 2_000_000
EDGE_DDL = """CREATE TABLE IF NOT EXISTS edges (
    id1 INTEGER NOT NULL, atype INTEGER NOT NULL, id2 INTEGER NOT NULL,
    state INTEGER NOT NULL, time INTEGER NOT NULL, updated_at INTEGER NOT NULL, data BLOB,
    PRIMARY KEY (id1, atype, id2)) WITHOUT ROWID"""
UPSERT = "INSERT OR REPLACE INTO edges VALUES (?, ?, ?, 0, ?, ?, NULL)"
COUNT_DDL = """CREATE TABLE IF NOT EXISTS counts (
    id1 INTEGER NOT NULL, atype INTEGER NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (id1, atype)) WITHOUT ROWID"""
COUNT = "INSERT INTO counts VALUES (?, ?, 1) ON CONFLICT (id1, atype) DO UPDATE SET n = n + 1"


def rate(
    threads: int,
    seconds: float,
    work: Callable[[random.Random], int],
    latencies: list[float] | None = None,
) -> float:
    """Writes per second of `work(rnd) -> writes done` looping in `threads` threads;
    each call's seconds are added to `latencies` if given."""
    counts = [0] * threads
    stop = time.perf_counter() + seconds

    def loop(t: int) -> None:
        rnd, n = random.Random(t * 7919 + time.perf_counter_ns()), 0
        clock = time.perf_counter
        while (started := clock()) < stop:
            n += work(rnd)
            if latencies is not None:
                latencies.append(clock() - started)
        counts[t] = n

    runners = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    return sum(counts) / (time.perf_counter() - start)


def pair(rnd: random.Random) -> tuple[int, int]:
    return rnd.randrange(1, NODES), rnd.randrange(1, NODES)


class Bare:
    """The same work by hand: the forward and inverse rows of each write and both
    lists' count upserts, in one SQLite file, fsynced per COMMIT."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute(EDGE_DDL)
        self.conn.execute(COUNT_DDL)
        self.lock = threading.Lock()

    def preload(self, edges: int, rnd: random.Random) -> None:
        """`edges` random edges (both rows and counts), in large transactions."""
        for start in range(0, edges, 100_000):
            self.commit(rnd, min(100_000, edges - start))

    def commit(self, rnd: random.Random, writes: int) -> int:
        rows = []
        now = time.time_ns() // 1000
        for _ in range(writes):
            a, b = pair(rnd)
            rows += [(a, 1, b, now // 1000, now), (b, 2, a, now // 1000, now)]
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(UPSERT, rows)
            self.conn.executemany(COUNT, [row[:2] for row in rows])
            self.conn.execute("COMMIT")
        return writes


class OwnStatements:
    """The statements assocdb runs for a batch of `assoc_add`s with an inverse, on its
    own schema and pragmas (16 shard files and a journal), with nothing around them."""

    SHARDS = 16
    KEYS = "SELECT * FROM edges INDEXED BY edges_key WHERE "
    NODES = "SELECT * FROM node_states WHERE "
    EDGE = "INSERT OR REPLACE INTO edges VALUES (?, ?, ?, ?, ?, ?, ?)"
    COUNT = (
        "INSERT INTO counts VALUES (?, ?, ?, ?) "
        "ON CONFLICT (id1, atype, state) DO UPDATE SET n = n + excluded.n"
    )

    def __init__(self, directory: Path) -> None:
        directory.mkdir()
        self.shards = [
            self._open(directory / f"shard-{n:04d}.db", "NORMAL", SHARD_DDL)
            for n in range(self.SHARDS)
        ]
        self.journal = self._open(directory / "journal.db", "FULL", JOURNAL_DDL)
        self.lock = threading.Lock()
        #: As assocdb's fences: jobs applied before one are deleted from the journal
        #: with its next transaction (the shards' fsyncs are left out: not statements).
        self.fence_seconds = FENCE_SECONDS
        self._fenced_at = time.monotonic()
        self._applied: list[int | None] = []
        self._completed: list[int | None] = []

    @staticmethod
    def _open(path: Path, synchronous: str, ddl: str) -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA mmap_size = 268435456")
        conn.execute("PRAGMA cache_size = -16000")
        conn.executescript(ddl)
        return conn

    def commit(self, rnd: random.Random, writes: int) -> int:
        now = time.time_ns() // 1000
        legs: dict[int, list[tuple[Any, ...]]] = {}
        for _ in range(writes):
            a, b = pair(rnd)
            for row in ((a, 1, b, 0, now // 1000, now, None), (b, 2, a, 0, now // 1000, now, None)):
                legs.setdefault(shard_of(row[0], self.SHARDS), []).append(row)
        with self.lock:
            # What resolving reads: each write's forward row (`op.key`; not its
            # inverse) and its two lists' node states, each on its node's shard.
            for shard, rows in legs.items():
                forward = [r for r in rows if r[1] == 1]
                if forward:
                    self._keys(self.shards[shard], forward)
                nodes = " OR ".join(["(node = ? AND atype = ?)"] * len(rows))
                self.shards[shard].execute(self.NODES + nodes, [v for r in rows for v in r[:2]])
            if time.monotonic() - self._fenced_at >= self.fence_seconds:
                self._fenced_at = time.monotonic()
                self._completed += self._applied
                self._applied = []
            self.journal.execute("BEGIN IMMEDIATE")
            if self._completed:  # `Journal._write_bookkeeping`
                self.journal.executemany(
                    "DELETE FROM jobs WHERE id = ?", [(j,) for j in self._completed]
                )
                self._completed = []
            jobs = [
                self.journal.execute(
                    "INSERT INTO jobs (body, created_at) VALUES (?, ?)", (b"j" * 70, now)
                ).lastrowid
                for _ in range(writes)
            ]
            self.journal.execute("COMMIT")
            for shard, rows in sorted(legs.items()):
                conn = self.shards[shard]
                conn.execute("BEGIN IMMEDIATE")
                self._keys(conn, rows)
                conn.executemany(self.EDGE, rows)
                conn.executemany(self.COUNT, [(r[0], r[1], 0, 1) for r in rows])
                conn.execute("COMMIT")
            self._applied += jobs
        return writes

    def preload(self, edges: int, rnd: random.Random) -> None:
        """`edges` random edges (both legs and counts) straight into the shards."""
        for start in range(0, edges, 100_000):
            legs: dict[int, list[tuple[Any, ...]]] = {}
            for _ in range(min(100_000, edges - start)):
                a, b = pair(rnd)
                for row in ((a, 1, b, 0, 1, 1, None), (b, 2, a, 0, 1, 1, None)):
                    legs.setdefault(shard_of(row[0], self.SHARDS), []).append(row)
            for shard, rows in legs.items():
                conn = self.shards[shard]
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(self.EDGE, rows)
                conn.executemany(self.COUNT, [(r[0], r[1], 0, 1) for r in rows])
                conn.execute("COMMIT")

    def _keys(self, conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
        match = " OR ".join(["(id1 = ? AND atype = ? AND id2 = ?)"] * len(rows))
        conn.execute(self.KEYS + match, [v for r in rows for v in r[:3]]).fetchall()

    def close(self) -> None:
        for conn in [*self.shards, self.journal]:
            conn.close()


def one_by_one(graph: assocdb.Graph) -> Callable[[random.Random], int]:
    def work(rnd: random.Random) -> int:
        a, b = pair(rnd)
        graph.assoc_add(a, "follows", b)
        return 1

    return work


def in_batches(graph: assocdb.Graph, size: int) -> Callable[[random.Random], int]:
    def work(rnd: random.Random) -> int:
        with graph.batch() as batch:
            for _ in range(size):
                a, b = pair(rnd)
                batch.assoc_add(a, "follows", b)
        return size

    return work


def objects_in_batches(
    graph: assocdb.Graph, size: int, given: bool
) -> Callable[[random.Random], int]:
    """obj_add in batches of `size`: ids allocated by the graph (a reserved block of 64
    ids, synced, per 64 objects of a shard), or `given` (no reservation)."""

    def work(rnd: random.Random) -> int:
        with graph.batch() as batch:
            for _ in range(size):
                id = rnd.randrange(1, 2**62) if given else None
                batch.obj_add("user", {"n": 1}, id=id)
        return size

    return work


def mixed(graph: assocdb.Graph, seconds: float) -> tuple[float, float]:
    """Reads/s and writes/s of 8 threads doing 90% assoc_range(50), 10% assoc_add."""
    reads, writes = [0] * 8, [0] * 8
    stop = time.perf_counter() + seconds

    def loop(t: int) -> None:
        rnd = random.Random(t)
        while time.perf_counter() < stop:
            if rnd.random() < 0.1:
                a, b = pair(rnd)
                graph.assoc_add(a, "follows", b)
                writes[t] += 1
            else:
                graph.assoc_range(rnd.randrange(1, NODES), "follows", limit=50)
                reads[t] += 1

    runners = [threading.Thread(target=loop, args=(t,)) for t in range(8)]
    start = time.perf_counter()
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    elapsed = time.perf_counter() - start
    return sum(reads) / elapsed, sum(writes) / elapsed


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):>9,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def preloaded_graph(where: Path, edges: int) -> assocdb.Graph:
    """A 16-shard graph holding `edges` random `follows` edges (and their inverses
    and counts), loaded with `bulk_load`."""
    graph = assocdb.open(where, shards=16)
    graph.define_assoc("follows", inverse="followed_by")
    graph.define_object("user")
    rnd = random.Random(1)
    graph.bulk_load(_edge(rnd) for _ in range(edges))
    return graph


def _edge(rnd: random.Random) -> tuple[int, str, int]:
    a, b = pair(rnd)
    return a, "follows", b


def p50(values: list[float]) -> str:
    return f"p50 {statistics.median(values) * 1e6:,.0f} us" if values else ""


def sqlite_rows(
    directory: Path, seconds: float, rounds: int, preload: int
) -> list[tuple[str, Any, Any]]:
    bare = Bare(directory / "bare.db")
    own = OwnStatements(directory / "own")
    started = time.perf_counter()
    bare.preload(preload, random.Random(2))
    own.preload(preload, random.Random(3))
    graph = preloaded_graph(directory / "graph", preload)
    print(
        f"preloaded {preload:,} edges over {NODES:,} ids in {time.perf_counter() - started:.0f} s"
    )
    runs: dict[str, list[float]] = {}
    latencies: dict[str, list[float]] = {}

    def measure(name: str, threads: int, work: Callable[[random.Random], int]) -> None:
        timed = latencies.setdefault(name, []) if threads == 1 else None
        runs.setdefault(name, []).append(rate(threads, seconds, work, timed))

    for _ in range(rounds):
        measure("bare1", 1, lambda rnd: bare.commit(rnd, 1))
        measure("one", 1, one_by_one(graph))
        measure("own1", 1, lambda rnd: own.commit(rnd, 1))
        measure("bare8", 1, lambda rnd: bare.commit(rnd, 8))
        measure("t8", 8, one_by_one(graph))
        measure("bare100", 1, lambda rnd: bare.commit(rnd, 100))
        measure("batch", 1, in_batches(graph, 100))
        measure("own100", 1, lambda rnd: own.commit(rnd, 100))
        measure("t64", 64, one_by_one(graph))
        measure("objects", 1, objects_in_batches(graph, 100, given=False))
        measure("objects_given", 1, objects_in_batches(graph, 100, given=True))
        r, w = mixed(graph, seconds)
        runs.setdefault("mixed_r", []).append(r)
        runs.setdefault("mixed_w", []).append(w)
    pipeline = graph.engine.pipeline
    per_batch = pipeline.writes / max(1, pipeline.batches)
    graph.close()
    bare.conn.close()
    own.close()
    med = {name: statistics.median(values) for name, values in runs.items()}
    lat = {name: statistics.median(values) for name, values in latencies.items() if values}
    return [
        (
            f"bare: 1 write per COMMIT (fsync), 1 writer, {p50(latencies['bare1'])}",
            runs["bare1"],
            None,
        ),
        ("bare: 8 writes per COMMIT", runs["bare8"], None),
        ("bare: 100 writes per COMMIT", runs["bare100"], None),
        ("own statements bare: 1 write per batch", runs["own1"], med["own1"] / med["bare1"]),
        (
            "own statements bare: 100 writes per batch",
            runs["own100"],
            med["own100"] / med["bare100"],
        ),
        (f"assoc_add, 1 thread, {p50(latencies['one'])}", runs["one"], med["one"] / med["bare1"]),
        ("assoc_add, 1 thread: p50 latency vs bare's", [], lat["one"] / lat["bare1"]),
        ("assoc_add, 8 threads (vs bare 8 per COMMIT)", runs["t8"], med["t8"] / med["bare8"]),
        ("assoc_add, 64 threads", runs["t64"], med["t64"] / med["bare100"]),
        ("Graph.batch() of 100, 1 thread", runs["batch"], med["batch"] / med["bare100"]),
        (
            "obj_add, batch() of 100, ids allocated vs given",
            runs["objects"],
            med["objects"] / med["objects_given"],
        ),
        ("obj_add, batch() of 100, ids given", runs["objects_given"], None),
        ("mixed 90/10, 8 threads: writes/s", runs["mixed_w"], None),
        ("mixed 90/10, 8 threads: reads/s", runs["mixed_r"], None),
        ("assoc_add, 1 thread, vs own statements 1 per batch", [], med["one"] / med["own1"]),
        ("Graph.batch() of 100 vs own statements 100 per batch", [], med["batch"] / med["own100"]),
        (f"(writes per pipeline batch, all rows: {per_batch:.1f})", [], None),
    ]


def http_rows(directory: Path, seconds: float, rounds: int) -> list[tuple[str, Any, Any]]:
    """Writes/s through the HTTP server (2 workers), one write per request and 100 per
    `Client.batch()`, beside bare 100-per-COMMIT SQLite from the same run."""
    from bench.http import serve

    bare = Bare(directory / "bare-http.db")
    with assocdb.open(directory / "served", shards=16) as graph:
        graph.define_assoc("follows", inverse="followed_by")
    port = 18000 + random.randrange(2000)
    server = serve(directory / "served", port, workers=2, cache_mb=64)
    url = f"http://127.0.0.1:{port}"
    local = threading.local()

    def client() -> assocdb.Client:
        if not hasattr(local, "client"):
            local.client = assocdb.Client(url, timeout=30)
        return local.client  # type: ignore[no-any-return]

    def single(rnd: random.Random) -> int:
        a, b = pair(rnd)
        client().assoc_add(a, "follows", b)
        return 1

    def batched(rnd: random.Random) -> int:
        with client().batch() as batch:
            for _ in range(100):
                a, b = pair(rnd)
                batch.assoc_add(a, "follows", b)
        return 100

    runs: dict[str, list[float]] = {}
    try:
        for _ in range(rounds):
            runs.setdefault("bare100", []).append(rate(1, seconds, lambda r: bare.commit(r, 100)))
            runs.setdefault("single", []).append(rate(8, seconds, single))
            runs.setdefault("batch", []).append(rate(4, seconds, batched))
    finally:
        server.terminate()
        server.wait()
        bare.conn.close()
    med = {name: statistics.median(values) for name, values in runs.items()}
    return [
        ("bare: 100 writes per COMMIT (HTTP rows' baseline)", runs["bare100"], None),
        (
            "HTTP assoc_add, 1 per request, 8 threads",
            runs["single"],
            med["single"] / med["bare100"],
        ),
        ("HTTP Client.batch() of 100, 4 threads", runs["batch"], med["batch"] / med["bare100"]),
    ]


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench writes")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--preload", type=int, default=1_000_000, help="random edges in every store first"
    )
    parser.add_argument("--http", action="store_true", help="also through assocdb serve")
    options = parser.parse_args(args)
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-writes-"))
    try:
        rows = sqlite_rows(directory, options.seconds, options.rounds, options.preload)
        if options.http:
            rows += http_rows(directory, options.seconds, options.rounds)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"durable writes/s, median (min-max) of {options.rounds} runs of {options.seconds} s")
    print(f"{'':<52} {'writes/s':>28} {'ratio':>7}")
    for label, values, ratio in rows:
        shown = spread(values) if values else ""
        print(f"{label:<52} {shown:>28} {'' if ratio is None else f'{ratio:.2f}x':>7}")
    print("ratios: 1 write vs bare 1 per COMMIT; 8 threads vs bare 8, else vs bare 100 per COMMIT")


if __name__ == "__main__":
    main()
