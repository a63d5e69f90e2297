"""Backups of a Slashdot-shaped graph: backup and restore edges/s beside a bare copy of the
same files, roll-forward changes/s, and write latency during a backup beside a quiet run.

    python -m bench backup [--edges N] [--runs R] [--writers W] [--source URL]

The graph (`bench.bulk.slashdot_like`, default 948,464 follows with their inverses:
~1.9M edge rows, 16 shards, change feed on) is bulk-loaded once. Each run, alternately:

* bare: every shard file and the journal copied with SQLite's backup API in one step
  each, no cut, no replay, no checksums (the floor of a page copy);
* `assocdb.backup` of the same graph while W writer threads add edges (one `assoc_add`
  at a time, acknowledged as applied), with the latency of each write recorded, then
  the same writers for as long again with no backup (quiet);
* `assocdb.restore` of that backup, and `restore --to` now (the writes since the cut
  rolled forward from the feed);
* an incremental backup of the graph (`backup --since` that backup: the quiet run's
  writes since), timed beside the full backup.

With `--source URL` (a MariaDB or PostgreSQL URL), the graph is built on that server
(its schemas dropped at the end) and there is no bare copy.

Rates count edge rows (both legs) in the backup. Medians over the runs, with the spread.
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

import assocdb

from .bulk import edges_of, slashdot_like


def _bare_copy(source: Path, dest: Path) -> float:
    dest.mkdir()
    started = time.perf_counter()
    for file in sorted(source.glob("*.db")):
        src = sqlite3.connect(file)
        dst = sqlite3.connect(dest / file.name)
        src.backup(dst)
        dst.close()
        src.close()
    return time.perf_counter() - started


class _Writers:
    """W threads writing new edges one at a time; latencies in ms."""

    def __init__(self, g: assocdb.Graph, writers: int) -> None:
        self.g, self.stop = g, threading.Event()
        self.latencies: list[float] = []
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(w,)) for w in range(writers)]

    def _run(self, w: int) -> None:
        rnd = random.Random(w * 7919 + time.perf_counter_ns())
        mine: list[float] = []
        while not self.stop.is_set():
            a, b = rnd.randrange(1, 82_168), rnd.randrange(100_000, 200_000)
            started = time.perf_counter()
            self.g.assoc_add(a, "follows", b)
            mine.append((time.perf_counter() - started) * 1000)
        with self._lock:
            self.latencies += mine

    def __enter__(self) -> _Writers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()


Note = Callable[[str, float], None]


def _since(old: list[int | None], new: list[int | None]) -> list[int]:
    """Per shard, the feed records between two cuts."""
    return [(b or 0) - (a or 0) for a, b in zip(old, new, strict=True)]


def _drop(url: str) -> None:
    if url.startswith("postgres"):
        from assocdb.storage.postgres import PostgresBackend

        PostgresBackend.drop(url)
    else:
        from assocdb.storage.mysql import MySQLBackend

        MySQLBackend.drop(url)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _spread(values: list[float], fmt: str = ",.0f") -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench backup")
    parser.add_argument("--edges", type=int, default=948_464)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--source", help="build the graph on this MariaDB/PostgreSQL URL")
    options = parser.parse_args(args)
    results: dict[str, list[float]] = {}

    def note(name: str, value: float) -> None:
        results.setdefault(name, []).append(value)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        where = options.source or root / "graph"
        journal = root / "graph.journal.db" if options.source else None
        g = assocdb.open(where, shards=16, journal=journal)
        try:
            g.define_assoc("follows", inverse="followed_by")
            g.enable_feed()
            g.bulk_load(edges_of(slashdot_like(edges=options.edges)))
            for run in range(options.runs):
                _run(g, root, run, options.writers, options.source is None, note)
        finally:
            g.close()
            if options.source:
                _drop(options.source)
    print(f"{options.edges:,} follows (x2 edge rows), {options.runs} runs, median (min-max)")
    for name, values in results.items():
        fmt = ".2f" if "/ " in name or "ms" in name or name.endswith(" s") else ",.0f"
        print(f"{name:<26} {_spread(values, fmt)}")


def _run(g: assocdb.Graph, root: Path, run: int, writers: int, bare: bool, note: Note) -> None:
    if bare:
        copied = _bare_copy(root / "graph", root / f"bare{run}")
        shutil.rmtree(root / f"bare{run}")
    with _Writers(g, writers) as busy:
        started = time.perf_counter()
        manifest = assocdb.backup(g, root / f"backup{run}")
        took = time.perf_counter() - started
    rows = manifest.edges
    with _Writers(g, writers) as quiet:
        time.sleep(took)  # the quiet run lasts as long as the backup did
    started = time.perf_counter()
    assocdb.restore(root / f"backup{run}", root / f"restored{run}")
    restored = time.perf_counter() - started
    started = time.perf_counter()
    done = assocdb.restore(root / f"backup{run}", root / f"rolled{run}", to=time.time_ns() // 1000)
    rolled = time.perf_counter() - started
    # A full and an incremental backup of the quiet graph (the quiet run's writes since).
    started = time.perf_counter()
    assocdb.backup(g, root / f"full{run}")
    full = time.perf_counter() - started
    started = time.perf_counter()
    inc = assocdb.backup(g, root / f"inc{run}", since=root / f"backup{run}")
    incremental = time.perf_counter() - started
    for name in ("restored", "rolled", "backup", "full", "inc"):
        shutil.rmtree(root / f"{name}{run}")
    note("backup edges/s", rows / took)
    if bare:
        note("bare copy edges/s", rows / copied)
        note("backup / bare", copied / took)
    note("full backup s", full)
    note("incremental s", incremental)
    note("incremental / full", incremental / full)
    note("incremental: changes", sum(_since(manifest.positions, inc.positions)))
    note("incremental: caught up", inc.caught_up)
    note("restore edges/s", rows / restored)
    note("restore --to: changes", done.rolled_forward)
    note("restore --to s", rolled)
    note("held ms", manifest.held * 1000)
    for label, lat in (("during backup", busy.latencies), ("quiet", quiet.latencies)):
        note(f"p50 ms {label}", statistics.median(lat))
        note(f"p99 ms {label}", _p(lat, 0.99))
        note(f"max ms {label}", max(lat))
        note(f"writes/s {label}", len(lat) / took)


if __name__ == "__main__":
    main()
