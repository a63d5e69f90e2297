"""The CPU a durable write costs (issue 37), load-independent.

    python -m bench.write_cpu --make DIR [--preload N]
    python -m bench.write_cpu --graph DIR [--writes W] [--threads T] [--rounds R]
    python -m bench.write_cpu --graph DIR --batch N [--writes W] [--rounds R]

`--make` preloads a 16-shard graph in DIR with N random `follows` edges
(inverse `followed_by`, ids over 2,000,000; default 200,000) and stops.
`--graph` copies that graph, writes W random edges (lone `assoc_add`s, or T
threads one write at a time each, or `g.batch()`es of N writes with
`--batch N`) and prints the process's CPU time per
write (`time.process_time`: every thread, the journal's helper included) and
the writing thread's (`time.thread_time`, one thread only). CPU time still
moves with the machine's load (caches, frequency); instruction counts do not:

    valgrind --tool=callgrind python -m bench.write_cpu --graph DIR --writes 104
    valgrind --tool=callgrind python -m bench.write_cpu --graph DIR --writes 408

and the difference of the two runs' `I refs` over 304 writes is the
instructions per write, start-up and preload excluded. For batches, the same
with two run lengths that are multiples of N (`--batch 100 --writes 200` and
`--writes 800`: the difference over 600 writes). `--warm W` writes W edges
first, uncounted (a steady state: connections, statement caches and pages
warm); `--statements` adds the CPU of each kind of shard statement per write
(the thread running it: BEGIN, the combined read, the upserts, COMMIT).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import assocdb
from assocdb.storage.sqlite import SQLiteBackend

from .writes import NODES, preloaded_graph


def parse(args: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.write_cpu")
    parser.add_argument("--make", type=Path, help="preload a graph here, and stop")
    parser.add_argument("--preload", type=int, default=200_000)
    parser.add_argument("--graph", type=Path, help="a graph --make preloaded (copied)")
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--batch", type=int, default=0, help="g.batch()es of N writes")
    parser.add_argument("--warm", type=int, default=0, help="writes first, not counted")
    parser.add_argument(
        "--statements", action="store_true", help="the CPU of each kind of shard statement"
    )
    parsed = parser.parse_args(args)
    if parsed.graph is not None and not parsed.graph.is_dir():
        parser.error(f"--graph {parsed.graph}: no such graph (make one with --make DIR)")
    for name in ("writes", "threads", "rounds"):
        if getattr(parsed, name) < 1:
            parser.error(f"--{name} must be at least 1")
    for name in ("batch", "warm", "preload"):
        if getattr(parsed, name) < 0:
            parser.error(f"--{name} must not be negative")
    return parsed


def write_batches(graph: assocdb.Graph, writes: int, size: int, seed: int) -> None:
    """`writes` random edges in `g.batch()`es of `size`, from one thread."""
    rnd = random.Random(seed)
    for start in range(0, writes, size):
        with graph.batch() as batch:
            add = batch.assoc_add
            for _ in range(min(size, writes - start)):
                add(rnd.randrange(1, NODES), "follows", rnd.randrange(1, NODES))


def write(graph: assocdb.Graph, writes: int, threads: int, seed: int) -> None:
    """`writes` random edges, one at a time, from `threads` threads."""

    def loop(seed: int, count: int) -> None:
        rnd = random.Random(seed)
        add = graph.assoc_add
        for _ in range(count):
            add(rnd.randrange(1, NODES), "follows", rnd.randrange(1, NODES))

    if threads == 1:
        loop(seed, writes)
        return
    runners = [
        threading.Thread(target=loop, args=(seed + n, writes // threads)) for n in range(threads)
    ]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()


@contextmanager
def timed_statements() -> Iterator[Counter[str]]:
    """Wrap every shard statement (`SQLiteBackend._run`), while in the block, to sum the
    calling thread's CPU time by the statement's kind (its first word, an INSERT's
    table)."""
    spent: Counter[str] = Counter()
    run = SQLiteBackend._run

    def timed(
        self: SQLiteBackend, session: Any, shard: int, sql: str, *args: Any, **kwargs: Any
    ) -> Any:
        started = time.thread_time()
        try:
            return run(self, session, shard, sql, *args, **kwargs)
        finally:
            words = sql.split(None, 6)
            kind = f"INSERT {words[words.index('INTO') + 1]}" if words[0] == "INSERT" else words[0]
            spent[kind] += time.thread_time() - started

    SQLiteBackend._run = timed  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        SQLiteBackend._run = run  # type: ignore[method-assign]


def main(args: list[str] | None = None) -> None:
    options = parse(args)
    if options.make is not None:
        preloaded_graph(options.make, options.preload).close()
        return
    if options.graph is None:
        raise SystemExit("--make DIR or --graph DIR")
    with timed_statements() if options.statements else nullcontext(Counter[str]()) as spent:
        measure(options, spent)


def measure(options: argparse.Namespace, spent: Counter[str]) -> None:
    """Write the rounds `options` ask for and print what they cost per write."""
    process: list[float] = []
    thread: list[float] = []
    wall: list[float] = []
    counted: Counter[str] = Counter()
    for number in range(options.rounds):
        directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-write-cpu-"))
        try:
            shutil.copytree(options.graph, directory / "graph")
            graph = assocdb.open(directory / "graph")
            if options.warm:
                go(graph, options.warm, options, 3 + number * 100)
            warm = Counter(spent)  # (the statements of the warm-up writes left out)
            started = (time.perf_counter(), time.process_time(), time.thread_time())
            go(graph, options.writes, options, 4 + number * 100)
            wall.append(time.perf_counter() - started[0])
            process.append(time.process_time() - started[1])
            thread.append(time.thread_time() - started[2])
            counted.update(spent - warm)
            graph.close()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    per = 1e6 / options.writes
    who = f"batches of {options.batch}" if options.batch else f"{options.threads} thread(s)"
    print(f"{who}, µs per write, median (min-max) of {options.rounds} rounds of {options.writes}")
    rows = [("wall", wall), ("CPU, process", process)]
    if options.threads == 1:  # a helper thread fills the shards; the writer is this one
        rows.append(("CPU, the writing thread", thread))
    for label, values in rows:
        us = [v * per for v in values]
        print(f"  {label:<24} {statistics.median(us):>7.0f} ({min(us):.0f}-{max(us):.0f})")
    if counted:
        print("  the shard statements' CPU per write (the thread running them), by kind:")
    for kind, seconds in counted.most_common():
        print(f"  {kind:<40} {seconds * per / options.rounds:>7.1f}")


def go(graph: assocdb.Graph, writes: int, options: argparse.Namespace, seed: int) -> None:
    if options.batch:
        write_batches(graph, writes, options.batch, seed)
    else:
        write(graph, writes, options.threads, seed)


if __name__ == "__main__":
    main()
