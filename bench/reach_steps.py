"""Where a two-hop reach's time goes against the hand-written join (issue 43).

    python -m bench.reach_steps [--edges N] [--rounds R] [--keep DIR]

Loads the graph of `bench reads` (assocdb, cache off, and the hand-written file),
then times on the same popularity-weighted nodes (out-degree 10-50) the
hand-written `count(DISTINCT ...)` join, `bench reads`' two-hop call, its
statements alone (no assocdb code: the followees' read, then one statement per
shard holding their lists) and its steps. Figures are CPU time per call
(`time.thread_time_ns`), p50 over interleaved rounds of the same calls: a busy
machine slows the variants alike and CPU time leaves out waiting for a core.
`--keep DIR` loads once into DIR and reuses it.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from assocdb.core.ids import by_shard, shard_of
from assocdb.storage.sqlite import _union_rows

from . import reads
from .bulk import EDGES, NODES, slashdot_like

CALLS = 200


def p50s(
    variants: dict[str, Callable[[int], Any]], nodes: list[int], rounds: int
) -> dict[str, float]:
    """The p50 CPU µs per call of each variant, rounds interleaved, variants in turn."""
    clock = time.thread_time_ns
    took: dict[str, list[int]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        for i, a in enumerate(nodes):
            k = (i + r) % len(names)
            for name in names[k:] + names[:k]:
                fn = variants[name]
                start = clock()
                fn(a)
                took[name].append(clock() - start)
    return {name: sorted(t)[len(t) // 2] / 1e3 for name, t in took.items()}


def load(root: Path, pairs: reads.Pairs) -> None:
    if (root / "assocdb").exists() and (root / "hand.db").exists():
        return
    reads.load_all(root, pairs, kuzu=False)


def steps(root: Path, graph: reads.Graph, rounds: int) -> dict[str, float]:
    store = reads.Assocdb("assocdb", root / "assocdb", None)
    hand = reads.Hand(root / "hand.db")
    g = store.g
    backend = g.engine.backend
    follows = g.engine.assoc_type("follows").id
    shards = g.shards
    conns = [backend._conn(s).conn for s in range(shards)]  # type: ignore[attr-defined]
    nodes = [a for (a,) in graph.args(reads.TWO_HOP, CALLS, random.Random(7))]
    for a in nodes[:20]:
        assert store.two_hop(a) == hand.two_hop(a), a
    scan4 = (
        "SELECT id2, time, updated_at, data FROM edges WHERE id1 = ? AND atype = ? AND state = ?"
        " ORDER BY time DESC, id2 DESC LIMIT ?"
    )
    scan1 = (
        "SELECT id2 FROM edges WHERE id1 = ? AND atype = ? AND state IN (?) ORDER BY id2 DESC"
        " LIMIT ?"
    )
    packed = msgspec.json.Decoder(list[int])

    def union(followees: list[int]) -> int:
        by: dict[int, list[int]] = defaultdict(list)
        for b in followees:
            by[shard_of(b, shards)].append(b)
        found: set[int] = set()
        for shard, id1s in by.items():  # (the statement `ListsUnion` runs on SQLite)
            sql = _union_rows(0, 1, False, True)
            params = [f"[{','.join(map(str, id1s))}]", follows, 0, 24001]
            found.update(packed.decode(conns[shard].execute(sql, params).fetchall()[0][0]))
        return len(found)

    def alone4(a: int) -> int:
        rows = conns[shard_of(a, shards)].execute(scan4, (a, follows, 0, 6001)).fetchall()
        return union([r[0] for r in rows])

    def alone1(a: int) -> int:
        rows = conns[shard_of(a, shards)].execute(scan1, (a, follows, 0, 6001)).fetchall()
        return union([r[0] for r in rows])

    def followees(a: int) -> list[int]:
        return g.select(a, "follows").page(limit=reads.BIG).items

    def build(a: int) -> object:
        return g.select(g.select(a, "follows"), "follows")

    def nodes_read(a: int) -> object:  # the executor's read of the followees' ids
        return g._queries._executor().nodes(build(a))  # type: ignore[arg-type]

    def grouped(a: int) -> object:
        return by_shard(graph.follows[a], shards)

    def terms(a: int) -> object:
        first, *rest = (g.select(b, "follows") for b in graph.follows[a])
        return first.union(*rest) if rest else first

    def terms_count(a: int) -> int:  # the call before many-list terms
        items = followees(a)
        if not items:
            return 0
        first, *rest = (g.select(b, "follows") for b in items)
        return (first.union(*rest) if rest else first).count().value

    def ids_count(a: int) -> int:  # a many-list term of the followees' page
        return g.select(followees(a), "follows").count().value

    variants: dict[str, Callable[[int], Any]] = {
        "hand-written count(DISTINCT) join": hand.two_hop,
        "bench reads' two_hop: select(select(a))": store.two_hop,
        "select(followees' ids).count()": ids_count,
        "one term per followee, their union (before)": terms_count,
        "statements alone: 4-column followees + shards": alone4,
        "statements alone: id2 followees + shards": alone1,
        "step: followees page (select(a).page)": followees,
        "step: select() terms and union (before)": terms,
        "step: build select(select(a))": build,
        "step: build + read the followees' ids": nodes_read,
        "step: group the followees by shard": grouped,
    }
    for a in nodes[:20]:  # every way counts what the join counts
        want = hand.two_hop(a)
        assert (alone4(a), alone1(a), ids_count(a), terms_count(a)) == (want,) * 4, a
    found = p50s(variants, nodes, rounds)
    store.close()
    hand.close()
    return found


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.reach_steps")
    parser.add_argument("--edges", type=int, default=EDGES)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", help="a directory to load into once and reuse")
    options = parser.parse_args(argv)
    pairs = slashdot_like(max(10, NODES * options.edges // EDGES), options.edges)
    root = Path(options.keep) if options.keep else Path(tempfile.mkdtemp(prefix="bench-reach-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        load(root, pairs)
        found = steps(root, reads.Graph(pairs), options.rounds)
    finally:
        if not options.keep:
            shutil.rmtree(root, ignore_errors=True)
    hand = found["hand-written count(DISTINCT) join"]
    print(f"\ntwo-hop steps: {len(pairs):,} edges; p50 CPU µs per call, {options.rounds} rounds")
    for name, us in found.items():
        print(f"  {name:<48} {us:8.1f}  {us / hand:5.2f}x")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
