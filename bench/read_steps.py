"""Where an uncached read's time goes above the hand-written query (issue 43), step by step.

    python -m bench.read_steps [--edges N] [--rounds R]

Loads the same graph and hand-written file as `bench reads`, then times each
layer of a read on the same popularity-weighted nodes: the API call, the
backend call (assocdb's statement choke point), the driver call alone with
assocdb's SQL, the hand-written statement, and the Python steps between them
(validation, type lookup, shard routing, building records); the SQL with
fewer columns (what `updated_at` and `data` cost); and what a cache miss of
`assoc_range(50)` costs with a fill of 1,000 (the default prefix), 100 and 51
edges, against the uncached read and a warm hit. Figures are the least µs
per call over many interleaved rounds of the same 200 calls: on a shared
machine the least is the figure least disturbed by other processes.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import assocdb
from assocdb.api.assoc_reads import _id_list, _limit
from assocdb.core import cursor
from assocdb.core.ids import check_id, shard_of
from assocdb.core.records import CacheConfig
from assocdb.core.scans import EdgeScan, normal_assocs
from assocdb.storage.sqlite import _list_rows

from . import reads
from .bulk import EDGES, NODES, slashdot_like

CALLS = 200
Args = list[tuple[Any, ...]]


def least(variants: dict[str, tuple[Callable[..., Any], Args]], rounds: int) -> dict[str, float]:
    """The least µs per call of each variant over `rounds` interleaved rounds."""
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(rounds):
        for name, (fn, args) in variants.items():
            start = time.perf_counter()
            for arg in args:
                fn(*arg)
            best[name] = min(best[name], (time.perf_counter() - start) / len(args) * 1e6)
    return best


def uncached(where: Path, graph: reads.Graph, rounds: int) -> dict[str, float]:
    g = assocdb.open(where / "assocdb", cache=None)
    hand = reads.Hand(where / "hand.db")
    engine, backend = g.engine, g.engine.backend
    follows, followed_by = engine.assoc_type("follows"), engine.assoc_type("followed_by")
    conns = [backend._conn(s).conn for s in range(g.shards)]  # type: ignore[attr-defined]
    rnd = random.Random(5)
    newest = graph.args(reads.NEWEST, CALLS, rnd)
    counts = graph.args(reads.COUNT, CALLS, rnd)
    which = graph.args(reads.WHICH, CALLS, rnd)
    shard = {a: shard_of(a, g.shards) for args in (newest, counts, which) for a, *_ in args}
    cols = "id2, time, updated_at, data"
    scan = f"SELECT {cols} FROM edges WHERE id1 = ? AND atype = ? AND state = ?"
    scan += " ORDER BY time DESC, id2 DESC LIMIT ?"
    count_sql = "SELECT state, n FROM counts WHERE id1 = ? AND atype = ?"
    get_sql = _list_rows(10)  # assoc_get's statement on SQLite (sorted in Python)
    rows = {a: conns[shard[a]].execute(scan, (a, follows.id, 0, 50)).fetchall() for (a,) in newest}
    run = reads.HAND_SQL

    def on_shard(sql: str, params: Callable[..., tuple[Any, ...]]) -> Callable[..., Any]:
        return lambda a, *rest: conns[shard[a]].execute(sql, params(a, *rest)).fetchall()

    def back_scan(a: int) -> Any:
        return backend.scan(shard[a], EdgeScan(a, follows.id, 0, cursor.START, 50))

    variants: dict[str, tuple[Callable[..., Any], Args]] = {
        "newest: API assoc_range(50)": (lambda a: g.assoc_range(a, "follows", 0, 50), newest),
        "newest: backend.scan": (back_scan, newest),
        "newest: driver, assocdb SQL": (on_shard(scan, lambda a: (a, follows.id, 0, 50)), newest),
        "newest: driver, id2+time+updated_at": (
            on_shard(scan.replace(cols, "id2, time, updated_at"), lambda a: (a, follows.id, 0, 50)),
            newest,
        ),
        "newest: driver, id2+time only": (
            on_shard(scan.replace(cols, "id2, time"), lambda a: (a, follows.id, 0, 50)),
            newest,
        ),
        "newest: driver, empty answer": (on_shard(scan, lambda a: (-a, follows.id, 0, 50)), newest),
        "newest: hand-written": (
            lambda a: hand.conn.execute(run[reads.NEWEST], (a,)).fetchall(),
            newest,
        ),
        "newest: check_id+assoc_type+_limit": (
            lambda a: (check_id(a, "id1"), engine.assoc_type("follows"), _limit(50, follows)),
            newest,
        ),
        "newest: shard_of + EdgeScan": (
            lambda a: EdgeScan(a, follows.id, 0, cursor.START, shard_of(a, 16)),
            newest,
        ),
        "newest: records (normal_assocs)": (lambda a: normal_assocs(a, "follows", rows[a]), newest),
        "count: API assoc_count": (lambda a: g.assoc_count(a, "followed_by"), counts),
        "count: backend.counts": (lambda a: backend.counts(shard[a], a, followed_by.id), counts),
        "count: driver, assocdb SQL": (on_shard(count_sql, lambda a: (a, followed_by.id)), counts),
        "count: hand-written count(*)": (
            lambda a: hand.conn.execute(run[reads.COUNT], (a,)).fetchall(),
            counts,
        ),
        "which: API assoc_get(10)": (lambda a, ids: g.assoc_get(a, "follows", ids), which),
        "which: backend.list_rows": (
            lambda a, ids: backend.list_rows(shard[a], a, follows.id, 0, ids),
            which,
        ),
        "which: driver, assocdb SQL": (
            on_shard(get_sql, lambda a, ids: (*ids, a, follows.id, 0)),
            which,
        ),
        "which: _id_list (10 ids)": (lambda a, ids: _id_list(ids, 6000), which),
        "which: hand-written": (
            lambda a, ids: hand.conn.execute(run[reads.WHICH], (a, *ids)).fetchall(),
            which,
        ),
    }
    found = least(variants, rounds)
    g.close()
    hand.close()
    return found


def misses(where: Path, graph: reads.Graph, rounds: int) -> dict[str, float]:
    """assoc_range(50) of distinct popular nodes, each a miss (the cache emptied before
    every round; connections and pages stay warm), by fill size."""
    picks = list(dict.fromkeys(a for (a,) in graph.args(reads.NEWEST, 5 * CALLS, random.Random(6))))
    args: Args = [(a,) for a in picks[:CALLS]]
    found: dict[str, float] = {}
    plain = assocdb.open(where / "assocdb", cache=None)
    found["uncached assoc_range(50)"] = least(
        {"": (lambda a: plain.assoc_range(a, "follows", 0, 50), args)}, rounds
    )[""]
    plain.close()
    for prefix in (1000, 100, 51):
        g = assocdb.open(where / "assocdb", cache=CacheConfig(prefix=prefix, max_age=3600))
        cache = g.engine.cache
        assert cache is not None

        def missed(a: int, g: assocdb.Graph = g, cache: Any = cache) -> object:
            return g.assoc_range(a, "follows", 0, 50)

        for (a,) in args:
            missed(a)
        best = float("inf")
        for _ in range(max(3, rounds // 4)):
            cache.invalidate()
            best = min(best, least({"": (missed, args)}, 1)[""])
        found[f"miss, fill of up to {prefix} edges"] = best
        if prefix == 1000:
            found["warm hit"] = least({"": (missed, args)}, rounds)[""]
        g.close()
    return found


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.read_steps")
    parser.add_argument("--edges", type=int, default=EDGES)
    parser.add_argument("--rounds", type=int, default=40)
    options = parser.parse_args(argv)
    pairs = slashdot_like(max(10, NODES * options.edges // EDGES), options.edges)
    root = Path(tempfile.mkdtemp(prefix="bench-read-steps-"))
    try:
        reads.load_all(root, pairs, kuzu=False)
        graph = reads.Graph(pairs)
        steps = uncached(root, graph, options.rounds)
        steps.update(misses(root, graph, options.rounds))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nread steps: {len(pairs):,} edges; least µs per call over {options.rounds} rounds")
    for name, us in steps.items():
        print(f"  {name:<44} {us:8.2f}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
