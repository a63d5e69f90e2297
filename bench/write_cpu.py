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
`--writes 800`: the difference over 600 writes).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import assocdb

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
    return parser.parse_args(args)


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


def main(args: list[str] | None = None) -> None:
    options = parse(args)
    if options.make is not None:
        preloaded_graph(options.make, options.preload).close()
        return
    if options.graph is None:
        raise SystemExit("--make DIR or --graph DIR")
    process: list[float] = []
    thread: list[float] = []
    wall: list[float] = []
    for number in range(options.rounds):
        directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-write-cpu-"))
        try:
            shutil.copytree(options.graph, directory / "graph")
            graph = assocdb.open(directory / "graph")
            started = (time.perf_counter(), time.process_time(), time.thread_time())
            if options.batch:
                write_batches(graph, options.writes, options.batch, 4 + number * 100)
            else:
                write(graph, options.writes, options.threads, 4 + number * 100)
            wall.append(time.perf_counter() - started[0])
            process.append(time.process_time() - started[1])
            thread.append(time.thread_time() - started[2])
            graph.close()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    per = 1e6 / options.writes
    who = f"batches of {options.batch}" if options.batch else f"{options.threads} thread(s)"
    print(f"{who}, µs per write, median (min-max) of {options.rounds} rounds of {options.writes}")
    rows = [("wall", wall), ("CPU, process", process)]
    if options.threads == 1:  # a batch's helper thread journals; its writer is this one
        rows.append(("CPU, the writing thread", thread))
    for label, values in rows:
        us = [v * per for v in values]
        print(f"  {label:<24} {statistics.median(us):>7.0f} ({min(us):.0f}-{max(us):.0f})")


if __name__ == "__main__":
    main()
