"""What each B-tree a leg writes costs the write floor (issue 37), measured by leaving it out.

    python -m bench.floor_trees [--preload N] [--rounds R] [--seconds S]

16 shard files of assocdb's schema and pragmas are preloaded with N random
edges (both legs and counts, `bench.writes.OwnStatements.preload`; default
1,000,000 over 2,000,000 ids), and a copy of them without `edges_key`. Then
batches of 100 random writes with inverses run the shards' own statements
(per touched shard: BEGIN IMMEDIATE, the read of the written keys, the
edges' upsert, the counts' upsert, COMMIT; no journal, whose fsync is the
same whatever the layout), each variant leaving out one piece of work:

* all: what assocdb's shards do;
* no key read: the read of the written keys left out;
* no counts: the counts' upsert left out too (one B-tree fewer a leg);
* no edges_key: the copy without the index, counts kept;
* no edges_key, no counts: the list-order tree alone.

Variants without a tree are not correct stores (no count, or no unique key):
they bound what a layout that drops or merges that tree could gain. Writes/s
and CPU µs per write (this process, system time included) per variant,
medians over the rounds (variants interleaved) with the spread, and the ratio
to "all".
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from assocdb.core.ids import shard_of

from .writes import OwnStatements, pair

SHARDS = OwnStatements.SHARDS
#: variant -> (directory: the full schema or the copy without edges_key, counts, key read)
VARIANTS = {
    "all (key read, edges, edges_key, counts)": ("full", True, True),
    "no key read": ("full", True, False),
    "no key read, no counts": ("full", False, False),
    "no key read, no edges_key": ("nokey", True, False),
    "no key read, no edges_key, no counts": ("nokey", False, False),
}
BASE = next(iter(VARIANTS))


def shards(where: Path) -> list[sqlite3.Connection]:
    """The shard files of `where`, with assocdb's pragmas (as `OwnStatements` opens them)."""
    conns = []
    for n in range(SHARDS):
        conn = sqlite3.connect(where / f"shard-{n:04d}.db", isolation_level=None)
        for pragma in (
            "journal_mode = WAL",
            "synchronous = NORMAL",
            "mmap_size = 268435456",
            "cache_size = -16000",
        ):
            conn.execute(f"PRAGMA {pragma}")
        conns.append(conn)
    return conns


def prepare(root: Path, preload: int) -> dict[str, list[sqlite3.Connection]]:
    """The preloaded shards, and a copy of them without `edges_key`."""
    own = OwnStatements(root / "full")
    own.preload(preload, random.Random(1))
    own.close()
    shutil.copytree(root / "full", root / "nokey")
    for file in (root / "nokey").glob("shard-*.db"):
        conn = sqlite3.connect(file)
        conn.execute("DROP INDEX edges_key")
        conn.close()
    return {name: shards(root / name) for name in ("full", "nokey")}


def batch(conns: list[sqlite3.Connection], rnd: random.Random, counts: bool, read: bool) -> int:
    """100 random writes with inverses, one transaction per touched shard."""
    now = time.time_ns() // 1000
    legs: dict[int, list[tuple[Any, ...]]] = {}
    for _ in range(100):
        a, b = pair(rnd)
        for row in ((a, 1, b, 0, now // 1000, now, None), (b, 2, a, 0, now // 1000, now, None)):
            legs.setdefault(shard_of(row[0], SHARDS), []).append(row)
    for shard, rows in sorted(legs.items()):
        conn = conns[shard]
        conn.execute("BEGIN IMMEDIATE")
        if read:
            match = " OR ".join(["(id1 = ? AND atype = ? AND id2 = ?)"] * len(rows))
            conn.execute(OwnStatements.KEYS + match, [v for r in rows for v in r[:3]]).fetchall()
        conn.executemany(OwnStatements.EDGE, rows)
        if counts:
            conn.executemany(OwnStatements.COUNT, [(r[0], r[1], 0, 1) for r in rows])
        conn.execute("COMMIT")
    return 100


def measure(
    stores: dict[str, list[sqlite3.Connection]], rounds: int, seconds: float
) -> dict[str, list[tuple[float, float]]]:
    """(writes/s, CPU µs a write) of each variant, per round."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
    for r in range(rounds):
        for n, (name, (where, counts, read)) in enumerate(VARIANTS.items()):
            rnd, writes = random.Random(1000 * r + n), 0
            wall, cpu = time.perf_counter(), time.process_time()
            while time.perf_counter() - wall < seconds:
                writes += batch(stores[where], rnd, counts, read)
            took, used = time.perf_counter() - wall, time.process_time() - cpu
            runs[name].append((writes / took, used / writes * 1e6))
        print(f"  round {r + 1}/{rounds}", flush=True)
    return runs


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.floor_trees")
    parser.add_argument("--preload", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    options = parser.parse_args(args)
    root = Path(tempfile.mkdtemp(prefix="bench-floor-trees-"))
    try:
        stores = prepare(root, options.preload)
        runs = measure(stores, options.rounds, options.seconds)
        for conns in stores.values():
            for conn in conns:
                conn.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base = statistics.median(rate for rate, _ in runs[BASE])
    print(f"\nshard statements, batches of 100, preloaded with {options.preload:,} edges")
    print(f"{'':<42} {'writes/s':>9} {'spread':>13} {'vs all':>7} {'CPU µs/write':>12}")
    for name, samples in runs.items():
        rates = [rate for rate, _ in samples]
        median = statistics.median(rates)
        cpu = statistics.median(c for _, c in samples)
        spread = f"{min(rates):,.0f}-{max(rates):,.0f}"
        print(f"{name:<42} {median:>9,.0f} {spread:>13} {median / base:>6.2f}x {cpu:>12.0f}")


if __name__ == "__main__":
    main()
