"""Where the bytes on disk go after a bulk load (issue 43): assocdb's 16 shard files beside
the hand-written SQLite store of `bench reads`, B-tree by B-tree, in one run.

    python -m bench space [--edges N | --snap FILE]

The graph is `bench.bulk.slashdot_like` (or the real SNAP file), loaded as
`follows` with inverse `followed_by` by `bulk_load` into 16 shards, and by
`bench.reads.hand_load` into one file (one table keyed by `(id1, id2)`, two
indexes built after the rows). For each store: the files on disk (database,
WAL) with the graph still open and after it is closed, then per table and
index (SQLite's `dbstat`): bytes, how full its pages are, entries, and bytes
per entry; and per input edge, the total. The ratio is the closed stores'
bytes, as `bench reads` reports them; each load's edges/s is printed too.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import assocdb

from .bulk import EDGES, NODES, edges_of, read_snap, slashdot_like
from .reads import disk_bytes, hand_load


@dataclass
class Tree:
    """One table or index, summed over files: bytes in its pages, bytes used, entries."""

    name: str
    size: int = 0
    used: int = 0
    entries: int = 0

    @property
    def fill(self) -> float:
        return self.used / self.size if self.size else 0.0


def trees(files: Iterable[Path]) -> list[Tree]:
    """Every table and index of the SQLite `files`, summed by name, biggest first.
    Entries are cells: an index's (and a WITHOUT ROWID table's) entries, or a rowid
    table's rows and its few interior cells."""
    found: dict[str, Tree] = {}
    for file in files:
        conn = sqlite3.connect(f"file:{file}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT name, sum(pgsize), sum(pgsize - unused), "
                "sum(ncell) FROM dbstat GROUP BY name"
            ).fetchall()
        finally:
            conn.close()
        for name, size, used, entries in rows:
            tree = found.setdefault(name, Tree(name))
            tree.size += size
            tree.used += used
            tree.entries += entries
    return sorted(found.values(), key=lambda t: (-t.size, t.name))


def files_by_kind(where: Path) -> dict[str, int]:
    """Bytes of a store's files by kind: database files, WAL files, the rest."""
    kinds: dict[str, int] = {}
    for path in [where] if where.is_file() else sorted(where.rglob("*")):
        if path.is_file():
            kind = (
                "wal" if path.name.endswith("-wal") else "db" if path.suffix == ".db" else "other"
            )
            kinds[kind] = kinds.get(kind, 0) + path.stat().st_size
    return kinds


def show(title: str, where: Path, files: list[Path], edges: int) -> None:
    print(f"\n{title}: {disk_bytes(where) / 2**20:.1f} MiB closed")
    print(f"  {'table or index':<22} {'MiB':>7} {'fill':>5} {'entries':>10} {'B/entry':>8}")
    for tree in trees(files):
        if not tree.entries or tree.name == "sqlite_schema":  # empty: a page per file
            continue
        per = tree.size / tree.entries if tree.entries else 0.0
        print(
            f"  {tree.name:<22} {tree.size / 2**20:>7.1f} {tree.fill:>5.0%} "
            f"{tree.entries:>10,} {per:>8.1f}"
        )
    print(f"  bytes per input edge: {disk_bytes(where) / edges:.1f}")


def main(args: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench space")
    parser.add_argument("--edges", type=int, default=EDGES)
    parser.add_argument("--snap", help="a SNAP edge list (e.g. soc-Slashdot0902.txt) to load")
    options = parser.parse_args(args)
    if options.snap:
        pairs = read_snap(options.snap)
    else:
        pairs = slashdot_like(max(10, NODES * options.edges // EDGES), options.edges)
    root = Path(tempfile.mkdtemp(prefix="bench-space-"))
    try:
        hand, graph = root / "hand.db", root / "assocdb"
        started = time.perf_counter()
        hand_load(hand, pairs)
        by_hand = len(pairs) / (time.perf_counter() - started)
        with assocdb.open(graph, shards=16) as g:
            g.define_assoc("follows", inverse="followed_by")
            started = time.perf_counter()
            g.bulk_load(edges_of(pairs))
            took = time.perf_counter() - started
            open_kinds = files_by_kind(graph)
        rate = len(pairs) / took
        print(
            f"{len(pairs):,} edges loaded: by hand {by_hand:,.0f} edges/s, assocdb bulk_load "
            f"{rate:,.0f} edges/s ({rate / by_hand:.2f}x; target >= 0.5x)"
        )
        print(
            "assocdb files with the graph open: "
            + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sorted(open_kinds.items()))
        )
        show("SQLite by hand", hand, [hand], len(pairs))
        show("assocdb, 16 shards", graph, sorted(graph.glob("shard-*.db")), len(pairs))
        ratio = disk_bytes(graph) / disk_bytes(hand)
        print(f"\nassocdb / by hand: {ratio:.2f}x (target <= 1.3x)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
