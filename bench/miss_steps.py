"""What each kind of cached read costs against the same read cache off, per call in CPU time.

`python -m bench.miss_steps [--edges 300000] [--rounds 3] [--calls 2000] [--where DIR]`

bench reads' graph and traffic (popularity-weighted nodes) for newest 50, count and which
of 10: after bench reads' untimed pass, each node is read by a default-cache graph and a
cache-off graph in one process, in turn, the order alternating call by call (the read
second finds the node's pages warm); each cached call is classed by what the cache did
(a kept answer, a hit decoded from the packed prefix, a fill, a miss) and the
difference to the cache-off call of the same node is taken (`time.thread_time_ns`). It
prints per class the calls and the median difference in each order, and their mean:
what that kind of read costs over an uncached read in context.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import assocdb
from assocdb.core.records import CacheConfig

from .bulk import EDGES, NODES, edges_of, slashdot_like
from .reads import COUNT, NEWEST, WHICH, Assocdb, Graph

OPS = (NEWEST, COUNT, WHICH)


def load(where: Path, pairs: list[tuple[int, int]]) -> None:
    if (where / "done").exists():
        return
    with assocdb.open(where, shards=16) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.bulk_load(edges_of(pairs))
    (where / "done").write_text("")


def kind_of(cache: Any, key: tuple[int, int], before: tuple[int, int, int], kept: bool) -> str:
    hits, fills = cache.hits, cache.fills + getattr(cache, "count_fills", 0)
    if fills > before[2]:
        return "fill"
    if kept:
        return "kept"
    if hits > before[0]:
        return "hit"
    return "miss"


def main(argv: list[str]) -> None:  # noqa: PLR0915
    parser = argparse.ArgumentParser(prog="python -m bench.miss_steps")
    parser.add_argument("--edges", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--where", help="a directory to keep the loaded graph in")
    options = parser.parse_args(argv)
    pairs = slashdot_like(max(10, NODES * options.edges // EDGES), options.edges)
    where = Path(options.where or tempfile.mkdtemp(prefix="miss-steps-"))
    where.mkdir(parents=True, exist_ok=True)
    load(where, pairs)
    graph = Graph(pairs)
    cached = Assocdb("cached", where, CacheConfig())
    plain = Assocdb("plain", where, None)
    cache = cached.g.engine.cache
    assert cache is not None
    ids = {NEWEST: cached.g.engine.assoc_type("follows").id}
    ids[WHICH] = ids[NEWEST]
    ids[COUNT] = cached.g.engine.assoc_type("followed_by").id
    tags = {NEWEST: (0, 50), WHICH: "index", COUNT: None}
    warm = random.Random(options.seed - 1)
    for op in OPS:  # bench reads' untimed pass
        for store in (cached, plain):
            for arg in graph.args(op, options.calls, warm):
                store.call(op)(*arg)
    clock = time.thread_time_ns
    diffs: dict[str, dict[str, list[list[int]]]] = {op: defaultdict(lambda: [[], []]) for op in OPS}
    sides: dict[str, list[list[int]]] = {op: [[], []] for op in OPS}
    for r in range(options.rounds):
        rnd = random.Random(options.seed + r)
        for op in OPS:
            fc, fp = cached.call(op), plain.call(op)
            for i, arg in enumerate(graph.args(op, options.calls, rnd)):
                key = (arg[0], ids[op])
                entry = cache._lists.get(key)
                kept = entry is not None and tags[op] is not None and tags[op] in entry.answers
                before = (cache.hits, 0, cache.fills + getattr(cache, "count_fills", 0))
                order = i % 2
                if order:
                    t0 = clock()
                    fp(*arg)
                    t1 = clock()
                    fc(*arg)
                    t2 = clock()
                    took_p, took_c = t1 - t0, t2 - t1
                else:
                    t0 = clock()
                    fc(*arg)
                    t1 = clock()
                    fp(*arg)
                    t2 = clock()
                    took_c, took_p = t1 - t0, t2 - t1
                kind = kind_of(cache, key, before, kept)
                diffs[op][kind][order].append(took_c - took_p)
                diffs[op]["all"][order].append(took_c - took_p)
                sides[op][0].append(took_c)
                sides[op][1].append(took_p)
    stats = cache.stats()
    print(
        f"miss_steps: {len(pairs):,} edges, {options.rounds} rounds of {options.calls:,} calls,"
        f" CPU us; list fills open {stats.list_fills_open}, gets open {stats.gets_open}"
    )
    for op in OPS:
        c, p = (statistics.median(s) / 1e3 for s in sides[op])
        print(f"{op}: cached p50 {c:.1f} us, uncached p50 {p:.1f} us, {c / p:.3f}x")
        for kind, (first, second) in sorted(diffs[op].items()):
            if not first or not second:
                continue
            a, b = statistics.median(first) / 1e3, statistics.median(second) / 1e3
            n = len(first) + len(second)
            print(
                f"  {kind:5} {n:6} calls: {a:+7.2f} cached first, {b:+7.2f} second,"
                f" mean {(a + b) / 2:+7.2f} us"
            )
    cached.close()
    plain.close()


if __name__ == "__main__":
    main(sys.argv[1:])
