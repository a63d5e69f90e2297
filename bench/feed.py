"""The change feed against issue 38's targets, every one in one run:

    python -m bench feed [--seconds S] [--rounds N] [--preload E] [--changes C] [--workers W]

* Write cost: two 16-shard SQLite graphs preloaded alike (`--preload` random `follows`
  edges, default 1,000,000, with inverses and counts: the tree `bench writes` uses), one
  with `enable_feed()`; each round measures both, alternately, with 1 and 8 writers of
  durable `assoc_add` and one of `batch()` of 100. Ratio: feed on / feed off (target
  ≥ 0.85).
* Consumer rate: `--changes` records (default 200,000) read from the start in pages of
  10,000, in process (`g.changes`; also per CPU second of the process, steadier than the
  wall clock on a busy machine) and over HTTP (`Client.changes` against `assocdb serve`)
  (targets ≥ 100,000/s and ≥ 30,000/s).
* Write → seen: 8 writer threads of `assoc_add` and one consumer waiting in
  `changes(wait=…)`; for each write, the time from its acknowledgment to the consumer
  holding it (0 if it held it first), p50 and p99, in process and over HTTP (the writes
  and the long poll both through the server) (targets p50 ≤ 5 ms, p99 ≤ 50 ms).

Medians of `--rounds` runs, with the spread (min-max).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import assocdb

from .feed_consume import consume_rate, seen_latency
from .writes import in_batches, one_by_one, preloaded_graph, rate, spread


def _write_rows(
    directory: Path, seconds: float, rounds: int, preload: int
) -> list[tuple[str, list[float], list[float]]]:
    preloaded_graph(directory / "off", preload).close()
    shutil.copytree(directory / "off", directory / "on")
    graphs = {"off": assocdb.open(directory / "off"), "on": assocdb.open(directory / "on")}
    graphs["on"].enable_feed()
    cases: dict[str, tuple[int, Callable[[assocdb.Graph], Callable[[random.Random], int]]]] = {
        "assoc_add, 1 writer": (1, one_by_one),
        "assoc_add, 8 writers": (8, one_by_one),
        "batch() of 100, 1 writer": (1, lambda g: in_batches(g, 100)),
    }
    runs: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(rounds):
            for case, (threads, work) in cases.items():
                for feed, graph in graphs.items():
                    runs.setdefault((case, feed), []).append(rate(threads, seconds, work(graph)))
    finally:
        for graph in graphs.values():
            graph.close()
    return [(case, runs[(case, "off")], runs[(case, "on")]) for case in cases]


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench feed")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--preload", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=1, help="of the HTTP server")
    options = parser.parse_args(args)
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-feed-"))
    try:
        writes = _write_rows(directory, options.seconds, options.rounds, options.preload)
        reads = consume_rate(directory / "read", options.changes, options.rounds, options.workers)
        latency = seen_latency(directory / "seen", options.seconds, options.rounds, options.workers)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    _print(options, writes, reads, latency)


def _print(
    options: Any,
    writes: list[tuple[str, list[float], list[float]]],
    reads: dict[str, list[float]],
    latency: dict[str, tuple[list[float], list[float]]],
) -> None:
    print(f"durable writes/s, median (min-max) of {options.rounds} runs of {options.seconds} s")
    print(f"{'':<28} {'feed off':>26} {'feed on':>26} {'on/off':>7}  (target ≥ 0.85)")
    for case, off, on in writes:
        ratio = statistics.median(on) / statistics.median(off)
        print(f"{case:<28} {spread(off):>26} {spread(on):>26} {ratio:>7.2f}")
    print(f"\nconsumer, changes/s from the start ({options.changes:,} records, pages of 10,000)")
    for where, values in reads.items():
        target = "30,000" if where == "HTTP" else "100,000"
        print(f"{where:<28} {spread(values):>26}   (target ≥ {target})")
    print("\nacknowledged write → a waiting consumer holds it, 8 writers, ms")
    print(f"{'':<28} {'p50':>20} {'p99':>20}  (targets 5, 50)")
    for where, (p50s, p99s) in latency.items():
        print(f"{where:<28} {_ms(p50s):>20} {_ms(p99s):>20}")
    print(f"(HTTP: assocdb serve --workers {options.workers} on this machine)")


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


if __name__ == "__main__":
    main()
