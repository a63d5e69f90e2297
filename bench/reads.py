"""Reads on real traffic (issue 43): assocdb with its default cache, with the cache off,
plain SQLite written by hand and, when `kuzu` is importable, Kùzu, in one run.

    python -m bench reads [--edges N | --snap FILE] [--runs R] [--calls C] [--no-kuzu]
                          [--cache-prefix N] [--cache-max-age S] [--cache-admit-after N]

The graph is `bench.bulk.slashdot_like` (the shape of SNAP soc-Slashdot0902:
82,168 nodes, 948,464 edges) or the real file (`--snap`), loaded as `follows`
with inverse `followed_by` by assocdb's `bulk_load` into 16 shards. The
hand-written store is what an application author would write: one file, one
table `edges(id1, id2, time)` keyed by `(id1, id2)` (WITHOUT ROWID) with the
two indexes its queries need, `(id1, time)` and `(id2, time)`, WAL,
synchronous=FULL, counts by `count(*)`, set queries as one SQL statement each.
Kùzu gets a `User` node table and a `Follows` relationship table (COPY from CSV).

Every read picks its nodes in proportion to their edges (in + out), as real
traffic does: a popular node is read more often. The operations:

* newest 50 followees (`assoc_range(a, "follows", 0, 50)`);
* count of followers (`assoc_count(a, "followed_by")`);
* which of 10 ids A follows (`assoc_get`; about half of them are followees);
* followers A doesn't follow back, the first 100 by id, descending (`select` difference);
* mutual followees of A and B, the first 100 by id (`select` intersection);
* two-hop reach: how many distinct nodes A's followees follow, for nodes whose
  out-degree is 10-50 (`select` of the lists of the ids of `select(A)`, counted).

Each run times every operation on every store, one call at a time, the stores
called in turn, each on its own node of the same list (a busy machine slows
them alike; `timed`); the
same nodes for every store within a run, new nodes for each run. Before the
first run, one untimed pass over other nodes warms every store (SQLite's
page cache, assocdb's cache) as traffic before it would have. The table gives
the median over the runs of p50 and p99 µs with the spread of p50, the ratio
of p50 to the hand-written store's p50 in the same run, the cache's hit rate
for the cached column, then bulk-load edges/s and bytes on disk after the
load, and the cache's accounted bytes per cached edge at the end. Answers are
checked to agree across stores on the first calls of every run.

`--cache-prefix`, `--cache-max-age` and `--cache-admit-after` change the cached
column's `CacheConfig` (how many edges a miss fills; how long an entry lives;
on which miss a list is filled), to see what each costs on this traffic.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

import assocdb
from assocdb.core.records import CacheConfig

from .bulk import EDGES, NODES, edges_of, read_snap, slashdot_like

Pairs = list[tuple[int, int]]
#: operation label -> the arguments of one call
OPS = (
    "newest 50 followees",
    "count of followers",
    "which of 10 ids A follows",
    "followers A doesn't follow back (100)",
    "mutual followees of A and B (100)",
    "two-hop reach (degree 10-50)",
)
NEWEST, COUNT, WHICH, NOT_BACK, MUTUAL, TWO_HOP = OPS
BIG = 6000  # assocdb's default per-call limit: a whole Slashdot list (<= 2,500) in one call


# -- the stores ------------------------------------------------------------------------------


class Store:
    """One store under test: each operation as one method, answers normalised so that
    stores can be compared (ids; sorted where the order is not part of the answer)."""

    name = ""
    calls_scale = 1.0  # a slow store runs a fraction of the calls

    def call(self, op: str) -> Callable[..., Any]:
        return {
            NEWEST: self.newest,
            COUNT: self.followers,
            WHICH: self.which,
            NOT_BACK: self.not_back,
            MUTUAL: self.mutual,
            TWO_HOP: self.two_hop,
        }[op]

    def newest(self, a: int) -> list[int]:
        raise NotImplementedError

    def followers(self, a: int) -> int:
        raise NotImplementedError

    def which(self, a: int, ids: list[int]) -> list[int]:
        raise NotImplementedError

    def not_back(self, a: int) -> list[int]:
        raise NotImplementedError

    def mutual(self, a: int, b: int) -> list[int]:
        raise NotImplementedError

    def two_hop(self, a: int) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Assocdb(Store):
    def __init__(self, name: str, where: Path, cache: CacheConfig | None) -> None:
        self.name = name
        self.g = assocdb.open(where, cache=cache)

    def newest(self, a: int) -> list[int]:
        return [e.id2 for e in self.g.assoc_range(a, "follows", 0, 50)]

    def followers(self, a: int) -> int:
        return self.g.assoc_count(a, "followed_by")

    def which(self, a: int, ids: list[int]) -> list[int]:
        return sorted(e.id2 for e in self.g.assoc_get(a, "follows", ids))

    def not_back(self, a: int) -> list[int]:
        g = self.g
        return (
            (g.select(a, "follows", incoming=True) - g.select(a, "follows")).page(limit=100).items
        )

    def mutual(self, a: int, b: int) -> list[int]:
        g = self.g
        return (g.select(a, "follows") & g.select(b, "follows")).page(limit=100).items

    def two_hop(self, a: int) -> int:
        # The followees' lists as one term whose nodes are a's followees: a's list read
        # (id2 only), then one statement per shard holding theirs.
        g = self.g
        reach = g.select(g.select(a, "follows"), "follows")
        count = reach.count()  # exact when at most 10,000, as a count(DISTINCT ...) is
        if count.exact:
            return count.value
        return sum(len(page.items) for page in reach.pages(limit=BIG))

    def hits(self) -> tuple[int, int]:
        stats = self.g.cache_stats()
        return (0, 0) if stats is None else (stats.hits, stats.misses)

    def close(self) -> None:
        self.g.close()


HAND_DDL = """
CREATE TABLE edges (
    id1 INTEGER NOT NULL, id2 INTEGER NOT NULL, time INTEGER NOT NULL,
    PRIMARY KEY (id1, id2)
) WITHOUT ROWID;
"""
HAND_INDEXES = """
CREATE INDEX edges_out ON edges (id1, time);
CREATE INDEX edges_in ON edges (id2, time);
"""
HAND_SQL = {
    NEWEST: "SELECT id2, time FROM edges WHERE id1 = ? ORDER BY time DESC, id2 DESC LIMIT 50",
    COUNT: "SELECT count(*) FROM edges WHERE id2 = ?",
    WHICH: "SELECT id2, time FROM edges WHERE id1 = ? AND id2 IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ORDER BY time DESC",
    NOT_BACK: "SELECT e.id1 FROM edges e WHERE e.id2 = ?1 AND NOT EXISTS"
    " (SELECT 1 FROM edges f WHERE f.id1 = ?1 AND f.id2 = e.id1) ORDER BY e.id1 DESC LIMIT 100",
    MUTUAL: "SELECT a.id2 FROM edges a JOIN edges b ON b.id1 = ?2 AND b.id2 = a.id2"
    " WHERE a.id1 = ?1 ORDER BY a.id2 DESC LIMIT 100",
    TWO_HOP: "SELECT count(DISTINCT e2.id2) FROM edges e1 JOIN edges e2 ON e2.id1 = e1.id2"
    " WHERE e1.id1 = ?",
}


def hand_connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


def hand_load(path: Path, pairs: Pairs) -> None:
    """The load a hand-written app would do: rows sorted by key, one transaction,
    the indexes built after the rows."""
    conn = hand_connect(path)
    conn.executescript(HAND_DDL)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO edges VALUES (?, ?, ?)", ((a, b, t) for a, _, b, t in edges_of(pairs))
    )
    conn.executescript(HAND_INDEXES)  # (commits)
    conn.close()


class Hand(Store):
    name = "SQLite by hand"

    def __init__(self, path: Path) -> None:
        self.conn = hand_connect(path)

    def newest(self, a: int) -> list[int]:
        return [id2 for id2, _ in self.conn.execute(HAND_SQL[NEWEST], (a,))]

    def followers(self, a: int) -> int:
        count: int = self.conn.execute(HAND_SQL[COUNT], (a,)).fetchone()[0]
        return count

    def which(self, a: int, ids: list[int]) -> list[int]:
        return sorted(id2 for id2, _ in self.conn.execute(HAND_SQL[WHICH], (a, *ids)))

    def not_back(self, a: int) -> list[int]:
        return [r[0] for r in self.conn.execute(HAND_SQL[NOT_BACK], (a,))]

    def mutual(self, a: int, b: int) -> list[int]:
        return [r[0] for r in self.conn.execute(HAND_SQL[MUTUAL], (a, b))]

    def two_hop(self, a: int) -> int:
        count: int = self.conn.execute(HAND_SQL[TWO_HOP], (a,)).fetchone()[0]
        return count

    def close(self) -> None:
        self.conn.close()


KUZU_CYPHER = {
    NEWEST: "MATCH (a:User {id: $a})-[f:Follows]->(b:User)"
    " RETURN b.id ORDER BY f.time DESC, b.id DESC LIMIT 50",
    COUNT: "MATCH (:User)-[:Follows]->(a:User {id: $a}) RETURN count(*)",
    WHICH: "MATCH (a:User {id: $a})-[:Follows]->(b:User) WHERE list_contains($ids, b.id)"
    " RETURN b.id",
    NOT_BACK: "MATCH (b:User)-[:Follows]->(a:User {id: $a})"
    " WHERE NOT EXISTS { MATCH (a)-[:Follows]->(b) } RETURN b.id ORDER BY b.id DESC LIMIT 100",
    MUTUAL: "MATCH (a:User {id: $a})-[:Follows]->(c:User)<-[:Follows]-(b:User {id: $b})"
    " RETURN c.id ORDER BY c.id DESC LIMIT 100",
    TWO_HOP: "MATCH (a:User {id: $a})-[:Follows]->(:User)-[:Follows]->(c:User)"
    " RETURN count(DISTINCT c.id)",
}


def kuzu_load(where: Path, pairs: Pairs) -> float:
    """Load Kùzu from CSV files written first; the seconds COPY took."""
    import kuzu

    nodes_csv, edges_csv = where.parent / "kuzu-nodes.csv", where.parent / "kuzu-edges.csv"
    with open(nodes_csv, "w", newline="") as out:
        csv.writer(out).writerows((n,) for n in sorted({x for pair in pairs for x in pair}))
    with open(edges_csv, "w", newline="") as out:
        csv.writer(out).writerows((a, b, t) for a, _, b, t in edges_of(pairs))
    db = kuzu.Database(str(where))
    conn = kuzu.Connection(db)
    conn.execute("CREATE NODE TABLE User(id INT64, PRIMARY KEY (id))")
    conn.execute("CREATE REL TABLE Follows(FROM User TO User, time INT64)")
    started = time.perf_counter()
    conn.execute(f"COPY User FROM '{nodes_csv}' (header=false)")
    conn.execute(f"COPY Follows FROM '{edges_csv}' (header=false)")
    took = time.perf_counter() - started
    conn.close()
    db.close()
    nodes_csv.unlink()
    edges_csv.unlink()
    return took


class Kuzu(Store):
    name = "Kùzu"
    calls_scale = 0.1

    def __init__(self, where: Path) -> None:
        import kuzu

        self.db = kuzu.Database(str(where))
        self.conn = kuzu.Connection(self.db)
        self.prepared = {op: self.conn.prepare(q) for op, q in KUZU_CYPHER.items()}

    def _ids(self, op: str, **params: Any) -> list[Any]:
        result = self.conn.execute(self.prepared[op], params)
        assert not isinstance(result, list)
        return [row[0] for row in result.get_all()]

    def newest(self, a: int) -> list[int]:
        return self._ids(NEWEST, a=a)

    def followers(self, a: int) -> int:
        count: int = self._ids(COUNT, a=a)[0]
        return count

    def which(self, a: int, ids: list[int]) -> list[int]:
        return sorted(self._ids(WHICH, a=a, ids=ids))

    def not_back(self, a: int) -> list[int]:
        return self._ids(NOT_BACK, a=a)

    def mutual(self, a: int, b: int) -> list[int]:
        return self._ids(MUTUAL, a=a, b=b)

    def two_hop(self, a: int) -> int:
        count: int = self._ids(TWO_HOP, a=a)[0]
        return count

    def close(self) -> None:
        self.conn.close()
        self.db.close()


def kuzu_available() -> bool:
    try:
        import kuzu  # noqa: F401
    except ImportError:
        return False
    return True


# -- the traffic -----------------------------------------------------------------------------


@dataclass
class Graph:
    """What the traffic is drawn from: each node's followees, and its weight (its edges)."""

    pairs: Pairs
    follows: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    nodes: list[int] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    small: list[int] = field(default_factory=list)  # out-degree 10-50
    small_weights: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        degree: dict[int, int] = defaultdict(int)
        for a, b in self.pairs:
            self.follows[a].append(b)
            degree[a] += 1
            degree[b] += 1
        self.nodes = sorted(degree)
        self.weights = [degree[n] for n in self.nodes]
        self.small = [n for n in self.nodes if 10 <= len(self.follows.get(n, ())) <= 50]
        self.small_weights = [degree[n] for n in self.small]

    def args(self, op: str, calls: int, rnd: random.Random) -> list[tuple[Any, ...]]:
        """The arguments of `calls` calls of `op`, popularity-weighted."""
        if op == TWO_HOP:
            return [(a,) for a in rnd.choices(self.small, self.small_weights, k=calls)]
        picks = rnd.choices(self.nodes, self.weights, k=2 * calls)
        if op == MUTUAL:
            return list(zip(picks[::2], picks[1::2], strict=True))
        if op == WHICH:
            return [
                (a, self._ten(a, other, rnd))
                for a, other in zip(picks[:calls], picks[calls:], strict=True)
            ]
        return [(a,) for a in picks[:calls]]

    def _ten(self, a: int, other: int, rnd: random.Random) -> list[int]:
        """10 distinct ids: up to 5 of a's followees, the rest popular nodes."""
        followees = self.follows.get(a, [])
        ids = dict.fromkeys(rnd.sample(followees, min(5, len(followees))))
        while len(ids) < 10:
            ids[rnd.choices(self.nodes, self.weights)[0] if ids else other] = None
        return list(ids)


# -- timing ----------------------------------------------------------------------------------


@dataclass
class Samples:
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    ratio: list[float] = field(default_factory=list)  # p50 / the hand-written p50, per run
    hits: int = 0
    misses: int = 0


def timed(
    fns: Sequence[Callable[..., Any]], args: Sequence[tuple[Any, ...]], counts: Sequence[int]
) -> list[tuple[float, float]]:
    """(p50, p99) µs per function of one call each with the first `counts[i]` arguments,
    the functions called in turn on each argument, in every order in turn: a busy
    machine slows them alike. Each store reads its own node of the turn (its
    arguments shifted by a share of them): a read of the node another store just
    read finds its shard pages in the CPU's caches (the stores map the same files),
    which made the store called second ~10% faster. (Timed one store after the
    other, two identical stores differed by up to 1.3x at p50 on a loaded machine.)"""
    clock = time.perf_counter_ns
    took: list[list[int]] = [[] for _ in fns]
    # Every order of the stores in turn, not one order rotated: rotated, a store always
    # followed the same one (the second after the hand-written store, the third after
    # the second), and two identical assocdb stores differed by 2-3% at p50 (the one
    # after another assocdb store finds its code paths warm).
    n, orders = len(args), list(itertools.permutations(range(len(fns))))
    for i in range(n):
        for k in orders[i % len(orders)]:
            at = (i + k * n // len(fns)) % n  # each store a different node at a time
            if at < counts[k]:
                start = clock()
                fns[k](*args[at])
                took[k].append(clock() - start)
    found = []
    for times in took:
        times.sort()
        found.append(
            (times[len(times) // 2] / 1e3, times[min(len(times) - 1, len(times) * 99 // 100)] / 1e3)
        )
    return found


def check_agree(stores: list[Store], op: str, args: Sequence[tuple[Any, ...]]) -> None:
    for arg in args:
        answers = {store.name: store.call(op)(*arg) for store in stores}
        if len({repr(a) for a in answers.values()}) != 1:
            raise AssertionError(f"{op}{arg}: stores disagree: {answers}")


def run(
    stores: list[Store], graph: Graph, runs: int, calls: dict[str, int], seed: int
) -> dict[str, dict[str, Samples]]:
    """Samples per operation and store over `runs` runs; the first store is the baseline."""
    samples = {op: {s.name: Samples() for s in stores} for op in OPS}
    warm = random.Random(seed - 1)
    for op in OPS:  # the untimed pass
        for store in stores:
            for arg in graph.args(op, max(1, int(calls[op] * store.calls_scale)), warm):
                store.call(op)(*arg)
    for r in range(runs):
        rnd = random.Random(seed + r)
        for op in OPS:
            args = graph.args(op, calls[op], rnd)
            check_agree(stores, op, args[:5])
            before = [s.hits() if isinstance(s, Assocdb) else (0, 0) for s in stores]
            counts = [max(1, int(len(args) * s.calls_scale)) for s in stores]
            found = timed([s.call(op) for s in stores], args, counts)
            base = found[0][0]
            for store, (p50, p99), (hits, misses) in zip(stores, found, before, strict=True):
                s = samples[op][store.name]
                if isinstance(store, Assocdb):
                    after = store.hits()
                    s.hits += after[0] - hits
                    s.misses += after[1] - misses
                s.p50.append(p50)
                s.p99.append(p99)
                s.ratio.append(p50 / base)
            print(f"  run {r + 1}/{runs}: {op}", flush=True)
    return samples


# -- loading and the report ------------------------------------------------------------------


def disk_bytes(where: Path) -> int:
    if where.is_file():
        return where.stat().st_size
    return sum(p.stat().st_size for p in where.rglob("*") if p.is_file())


def load_all(
    root: Path, pairs: Pairs, kuzu: bool
) -> tuple[dict[str, tuple[float, int]], dict[str, Path]]:
    """Each store loaded once: {store: (edges/s, bytes on disk)}, {store: where}."""
    loads: dict[str, tuple[float, int]] = {}
    where = {"hand": root / "hand.db", "assocdb": root / "assocdb", "kuzu": root / "kuzu"}
    started = time.perf_counter()
    hand_load(where["hand"], pairs)
    loads["hand"] = (len(pairs) / (time.perf_counter() - started), disk_bytes(where["hand"]))
    with assocdb.open(where["assocdb"], shards=16) as g:
        g.define_assoc("follows", inverse="followed_by")
        started = time.perf_counter()
        g.bulk_load(edges_of(pairs))
        took = time.perf_counter() - started
    loads["assocdb"] = (len(pairs) / took, disk_bytes(where["assocdb"]))
    if kuzu:
        took = kuzu_load(where["kuzu"], pairs)
        loads["kuzu"] = (len(pairs) / took, disk_bytes(where["kuzu"]))
    return loads, where


def cache_bytes_per_edge(store: Assocdb) -> tuple[float, float, float, int, int, int]:
    """By the cache's accounting: (bytes per cached edge, all told; of them the list
    entries holding edges; the kept answers; edges cached; entries holding counts only,
    and their bytes)."""
    cache = store.g.engine.cache
    assert cache is not None
    lists = list(cache._lists.values())
    held = [e for e in lists if e.prefix is not None]
    edges = max(1, sum(len(e.prefix) for e in held if e.prefix is not None))
    counted = [e for e in lists if e.prefix is None]
    return (
        cache.bytes / edges,
        sum(e.nbytes for e in held) / edges,
        cache.decoded.bytes / edges,
        edges,
        len(counted),
        sum(e.nbytes for e in counted),
    )


def fmt(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} µs"


def report(
    samples: dict[str, dict[str, Samples]],
    names: list[str],
    loads: dict[str, tuple[float, int]],
    cached: Assocdb,
) -> None:
    width = max(31, 2 + max(map(len, names)))
    print(f"\n{'p50 (p99) [spread of p50]':<38}" + "".join(f"{n:>{width}}" for n in names))
    for op in OPS:
        line = f"{op:<38}"
        for name in names:
            s = samples[op][name]
            p50, p99 = statistics.median(s.p50), statistics.median(s.p99)
            cell = f"{fmt(p50)} ({fmt(p99)}) [{min(s.p50):.0f}-{max(s.p50):.0f}]"
            line += f"{cell:>{width}}"
        print(line)
        line = f"{'  p50 vs by hand, same run; hit rate':<38}"
        for name in names:
            s = samples[op][name]
            cell = f"{statistics.median(s.ratio):.2f}x"
            if s.hits + s.misses and name == cached.name:
                cell = f"hits {s.hits / (s.hits + s.misses):.0%}  " + cell
            line += f"{cell:>{width}}"
        print(line)
    on, off = names[1], names[2]
    for op in (NEWEST, COUNT, WHICH):  # the first target, per run then the median
        a, b = samples[op][on], samples[op][off]
        p50 = statistics.median(x / y for x, y in zip(a.p50, b.p50, strict=True))
        p99 = statistics.median(x / y for x, y in zip(a.p99, b.p99, strict=True))
        hits = a.hits / max(1, a.hits + a.misses)
        print(f"{op:<38}cache on/off, same run: p50 {p50:.2f}x, p99 {p99:.2f}x (hits {hits:.0%})")
    keys = {names[0]: "hand", names[1]: "assocdb", names[2]: "assocdb"}
    keys.update(dict.fromkeys(names[3:], "kuzu"))
    rate = {n: f"{loads[k][0]:,.0f}" for n, k in keys.items()}
    size = {n: f"{loads[k][1] / 2**20:.1f} MiB" for n, k in keys.items()}
    base_rate, base_size = loads["hand"]
    rate_ratio = {n: f"{loads[k][0] / base_rate:.2f}x" for n, k in keys.items()}
    size_ratio = {n: f"{loads[k][1] / base_size:.2f}x" for n, k in keys.items()}
    for label, cells in (
        ("bulk load, edges/s", rate),
        ("  vs by hand", rate_ratio),
        ("bytes on disk after the load", size),
        ("  vs by hand", size_ratio),
    ):
        print(f"{label:<38}" + "".join(f"{cells[n]:>{width}}" for n in names))
    total, packed, answers, edges, counted, counted_bytes = cache_bytes_per_edge(cached)
    stats = cached.g.cache_stats()
    assert stats is not None
    print(
        f"cache: {total:.1f} B per cached edge by its accounting, all told ({packed:.1f} B "
        f"in the list entries holding them, {answers:.1f} B kept answers, the rest "
        f"{counted:,} entries of counts only, {counted_bytes / 2**20:.1f} MiB); {edges:,} "
        f"edges in {stats.entries:,} entries, {stats.bytes / 2**20:.1f} MiB; overall hit "
        f"rate {stats.hit_rate:.1%}, {stats.fills:,} fills, {stats.evictions:,} evictions; "
        f"lists filled on miss {getattr(stats, 'lists_admit_after', '?')} "
        f"(hits per recent fill {getattr(stats, 'hits_per_fill', '?')}); list fills "
        f"{'open' if getattr(stats, 'list_fills_open', True) else 'closed'}"
        f"{': ' + stats.list_fills_why if getattr(stats, 'list_fills_why', '') else ''}; "
        f"assoc_get {'asks the cache' if getattr(stats, 'gets_open', True) else 'skips it'}"
        f"{': ' + stats.gets_why if getattr(stats, 'gets_why', '') else ''}"
    )
    print(
        "targets (issue 43): cache on/off p50 and p99 <= 1.0x for the first three; "
        "off vs hand p50 <= 1.2x (first three), <= 1.5x (sets, two-hop); "
        "disk <= 1.3x; load >= 0.5x"
    )


def cache_config(
    prefix: int | None, max_age: float | None, admit_after: int | None = None
) -> tuple[CacheConfig, str]:
    """The cached column's config and its label ("default cache" when unchanged)."""
    config, changed = CacheConfig(), []
    if admit_after is not None:
        config = msgspec.structs.replace(config, admit_after=admit_after)
        changed.append(f"admit_after {admit_after}")
    if prefix is not None:
        config = msgspec.structs.replace(config, prefix=prefix)
        changed.append(f"prefix {prefix}")
    if max_age is not None:
        config = msgspec.structs.replace(config, max_age=max_age)
        changed.append(f"max_age {max_age:g}")
    return config, ("cache " + ", ".join(changed)) if changed else "default cache"


def main(args: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench reads")
    parser.add_argument("--edges", type=int, default=EDGES)
    parser.add_argument("--snap", help="a SNAP edge list (e.g. soc-Slashdot0902.txt) to load")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000, help="calls per point read per run")
    parser.add_argument("--no-kuzu", action="store_true", help="leave Kùzu out")
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--cache-prefix", type=int, help="edges a list's fill keeps")
    parser.add_argument("--cache-max-age", type=float, help="seconds a cached entry lives")
    parser.add_argument("--cache-admit-after", type=int, help="the miss that fills a list")
    options = parser.parse_args(args)
    if options.snap:
        pairs = read_snap(options.snap)
    else:
        pairs = slashdot_like(max(10, NODES * options.edges // EDGES), options.edges)
    kuzu = kuzu_available() and not options.no_kuzu
    c = options.calls
    calls = {NEWEST: c, COUNT: c, WHICH: c, NOT_BACK: c // 2, MUTUAL: c // 2, TWO_HOP: c // 5}
    calls = {op: max(5, n) for op, n in calls.items()}
    root = Path(tempfile.mkdtemp(prefix="bench-reads-"))
    stores: list[Store] = []
    try:
        loads, where = load_all(root, pairs, kuzu)
        config, label = cache_config(
            options.cache_prefix, options.cache_max_age, options.cache_admit_after
        )
        cached = Assocdb(f"assocdb, {label}", where["assocdb"], config)
        stores = [
            Hand(where["hand"]),
            cached,
            Assocdb("assocdb, cache off", where["assocdb"], None),
        ]
        if kuzu:
            stores.append(Kuzu(where["kuzu"]))
        samples = run(stores, Graph(pairs), options.runs, calls, options.seed)
        print(
            f"\nreads: {len(pairs):,} follows edges (+ inverses), popularity-weighted nodes; "
            f"medians of {options.runs} runs of {c:,} calls (sets {calls[NOT_BACK]:,}, "
            f"two-hop {calls[TWO_HOP]:,}; Kùzu a tenth)"
        )
        report(samples, [s.name for s in stores], loads, cached)
    finally:
        for store in stores:
            store.close()
        shutil.rmtree(root, ignore_errors=True)
