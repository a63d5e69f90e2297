"""Where a lone durable write's time goes (issue 37), step by step.

    python -m bench.write_steps [--preload N] [--writes W] [--rounds R] [--ab]
        [--batch B] [--ab-in-shards]

Preloads a 16-shard graph with N random `follows` edges (inverse
`followed_by`, ids over 2,000,000; default 1,000,000) and a bare file with
the same work (`bench.writes.Bare`), then alternates rounds of W lone
`assoc_add`s (one thread, one write at a time) with rounds of W bare
same-work commits (edge, inverse edge, two count upserts, one fsynced COMMIT
each). Each step of assocdb's write path is timed by wrapping its method
(the wrappers cost ~1 µs a call, counted in the step that calls them):

* resolve: the reads before journaling (`Pipeline._read_current`, one
  statement per shard and kind) and the pure resolution around them;
* journal + prepare, overlapped (`Overlap.journal`): the journal's INSERT
  and its synced commit (`Journal._commit`, on the writer's thread) while a
  helper thread opens and fills the shard transactions
  (`Applier.prepare_batch`: BEGIN IMMEDIATE, read the written keys, upsert
  the edges and the counts, per touched shard; no COMMIT);
* commit: the shards' COMMITs, the cache's changes, the applier's
  bookkeeping (`Applier.commit_batch`);
* apply, not overlapped (`Applier.run_batch`): rounds that are not prepared
  (none, for lone edge writes on SQLite);
* the rest: the API, the pipeline's bookkeeping;
* off the write path: the fence's shard fsyncs (`make_durable`, the
  retrier's thread), per write.

With `--ab`, each round also writes W lone `assoc_add`s with the overlap off
(journal, then prepare and commit: the write path before issue 37's overlap),
an A/B pair on the same tree.

With `--threads T`, T threads write one edge at a time each (W in all), and
the bare side commits T writes at a time; the table adds what a round of the
pipeline takes: writes per pipeline batch, journal commits (fsyncs) and fence
calls (and shards fsynced) per batch, the time writers waited for a shard's
write turn, and the process's CPU seconds per wall second (the GIL lets
Python run on one core: near 1.0 with the disk idle means Python bounds it).

With `--batch B`, the writes go in `g.batch()`es of B (the bare side: B per
COMMIT), and the p50 latencies are a batch's. With `--ab-in-shards`, the A/B
rounds turn off only the resolution of rounds of edge writes inside
their shard transactions (`Overlap.journal_resolving`: open, fill), so they
read before journaling and prepare during the fsync (as a round with a pending
row does). Every other round runs its A/B round first, so neither side always
follows the bare writes.

Figures are µs per write, the median over the rounds (spread in brackets); the
p50 latencies are over every write of the rounds, the journal commit's
(`Journal._commit`, on whichever thread ran it) beside the bare write's.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assocdb.storage.sqlite import SQLiteBackend
from assocdb.writes import fence, pipeline
from assocdb.writes.applier import Applier
from assocdb.writes.journal import Journal
from assocdb.writes.overlap import RESOLVE_IN_SHARDS_FROM, Overlap
from assocdb.writes.pipeline import Pipeline

from .writes import NODES, Bare, preloaded_graph

STEPS = [
    ("resolve: reads before journaling", Pipeline, "_read_current"),
    ("resolve: in all", Pipeline, "_resolve"),
    ("journal + prepare, overlapped: in all", Overlap, "journal"),
    ("  journal: INSERT + fsynced COMMIT", Journal, "_commit"),
    ("  prepare: shard transactions, no COMMIT", Applier, "prepare_batch"),
    ("resolved in the shards (edge writes): in all", Overlap, "journal_resolving"),
    ("  open: BEGIN + one read per shard", Overlap, "_open"),
    ("  fill: merge + upserts, no COMMIT", Applier, "fill_batch"),
    ("commit: shard COMMITs, cache, bookkeeping", Applier, "commit_batch"),
    ("apply, not overlapped: in all", Applier, "run_batch"),
    ("pipeline in all", Pipeline, "submit"),
    ("(off the path) fence fsyncs", SQLiteBackend, "make_durable"),
]
#: The steps that follow one another on the writer's thread (the rest is the API's).
SERIAL = [
    "resolve: in all",
    "journal + prepare, overlapped: in all",
    "resolved in the shards (edge writes): in all",
    "commit: shard COMMITs, cache, bookkeeping",
    "apply, not overlapped: in all",
]


def timed(spent: dict[str, float], label: str, method: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            took = time.perf_counter() - started
            spent[label] += took
            if method.__name__ == "_commit":
                COMMITS.append(took)

    return call


#: Writes per `g.batch()` (`--batch`; 1: lone `assoc_add`s).
BATCH = 1
#: Threads writing at once (`--threads`), each one write at a time.
THREADS = 1
#: `--ab` compares the resolution in the shards on and off, not the overlap.
IN_SHARDS_OFF = False
#: Each journal commit's seconds (`Journal._commit`), for its p50 beside the bare write's.
COMMITS: list[float] = []


def lone_writes(graph: Any, rnd: random.Random, writes: int, latencies: list[float]) -> float:
    """Write `writes` random edges one at a time (or in batches of `BATCH`, or from
    `THREADS` threads); the seconds it took."""
    if THREADS > 1:
        return threaded_writes(graph, rnd, writes, latencies)
    started = time.perf_counter()
    for _ in range(0, writes, BATCH):
        pairs = [(rnd.randrange(1, NODES), rnd.randrange(1, NODES)) for _ in range(BATCH)]
        t = time.perf_counter()
        if BATCH == 1:
            a, b = pairs[0]
            graph.assoc_add(a, "follows", b)
        else:
            with graph.batch() as batch:
                for a, b in pairs:
                    batch.assoc_add(a, "follows", b)
        latencies.append(time.perf_counter() - t)
    return time.perf_counter() - started


def threaded_writes(graph: Any, rnd: random.Random, writes: int, latencies: list[float]) -> float:
    """`writes` random edges from `THREADS` threads, one write at a time each; seconds."""
    seeds = [rnd.randrange(2**32) for _ in range(THREADS)]

    def loop(seed: int) -> None:
        own = random.Random(seed)
        for _ in range(writes // THREADS):
            t = time.perf_counter()
            graph.assoc_add(own.randrange(1, NODES), "follows", own.randrange(1, NODES))
            latencies.append(time.perf_counter() - t)

    runners = [threading.Thread(target=loop, args=(seed,)) for seed in seeds]
    started = time.perf_counter()
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    return time.perf_counter() - started


class TurnWaits:
    """A shard's write-turn lock that adds the seconds its takers waited to `spent`."""

    def __init__(self, lock: Any, spent: dict[str, float]) -> None:
        self._lock = lock
        self._spent = spent

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        started = time.perf_counter()
        try:
            return bool(self._lock.acquire(blocking, timeout))
        finally:
            self._spent["shard write-turn waits"] += time.perf_counter() - started

    def release(self) -> None:
        self._lock.release()


def counted(calls: dict[str, int], label: str, method: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        calls[label] += 1
        if label == "fence calls":
            calls["shards fsynced by fences"] += len(args[1])
        return method(*args, **kwargs)

    return call


def ab_round(
    graph: Any,
    rnd: random.Random,
    writes: int,
    spent: dict[str, float],
    rows: dict[str, list[float]],
    latencies: dict[str, list[float]],
) -> None:
    """A round of the same writes with the overlap off (journal, then apply), or with
    `IN_SHARDS_OFF` only the resolution in the shards off (read before journaling)."""
    lapped = graph.engine.pipeline.overlap
    name = "not in the shards" if IN_SHARDS_OFF else "overlap off"
    spent.clear()
    del COMMITS[:]
    if IN_SHARDS_OFF:
        pipeline.RESOLVE_IN_SHARDS_FROM = 10**9
    else:
        lapped.enabled = False
    try:
        total = lone_writes(graph, rnd, writes, latencies[f"assoc_add, {name}"])
    finally:
        lapped.enabled = True
        pipeline.RESOLVE_IN_SHARDS_FROM = RESOLVE_IN_SHARDS_FROM
    latencies[f"journal commit, {name}"] += COMMITS
    rows[f"{name} (A/B): assoc_add, in all"].append(total)
    labels = ["  journal: INSERT + fsynced COMMIT", "apply, not overlapped: in all"]
    if IN_SHARDS_OFF:
        labels = ["resolve: in all", "journal + prepare, overlapped: in all"]
    for label in labels:
        rows[f"{name} (A/B): {label.strip()}"].append(spent[label])


def parse(args: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.write_steps")
    parser.add_argument("--preload", type=int, default=1_000_000)
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--fence-seconds", type=float, default=fence.FENCE_SECONDS, help="(an experiment)"
    )
    parser.add_argument(
        "--ab",
        action="store_true",
        help="each round also writes with the overlap off (journal, then apply): an A/B pair",
    )
    parser.add_argument(
        "--batch", type=int, default=1, help="writes per g.batch() (bare: per COMMIT)"
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="threads writing one edge at a time each"
    )
    parser.add_argument(
        "--ab-in-shards",
        action="store_true",
        help="the A/B rounds turn off the resolution in the shards (edge writes) only",
    )
    return parser.parse_args(args)


def instrument(graph: Any, spent: dict[str, float], calls: dict[str, int]) -> None:
    """Time the steps (`STEPS`), count journal commits and fences, time write-turn waits."""
    for label, owner, name in STEPS:
        setattr(owner, name, timed(spent, label, getattr(owner, name)))
    Journal._commit = counted(calls, "journal commits", Journal._commit)  # type: ignore[method-assign]
    SQLiteBackend.make_durable = counted(calls, "fence calls", SQLiteBackend.make_durable)  # type: ignore[method-assign]
    backend = graph.engine.backend
    backend._writers = [TurnWaits(lock, spent) for lock in backend._writers]


def configure(options: argparse.Namespace) -> None:
    """The module's settings from the command line's options."""
    global BATCH, IN_SHARDS_OFF, THREADS
    fence.FENCE_SECONDS = options.fence_seconds
    BATCH = options.batch
    THREADS = options.threads
    IN_SHARDS_OFF = options.ab_in_shards


def main(args: list[str] | None = None) -> None:
    options = parse(args)
    configure(options)
    bare_per_commit = max(BATCH, THREADS)
    calls: dict[str, int] = defaultdict(int)
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-write-steps-"))
    spent: dict[str, float] = defaultdict(float)
    try:
        bare = Bare(directory / "bare.db")
        bare.preload(options.preload, random.Random(2))
        graph = preloaded_graph(directory / "graph", options.preload)
        instrument(graph, spent, calls)
        pipe = graph.engine.pipeline
        rnd = random.Random(4)
        rows: dict[str, list[float]] = defaultdict(list)
        latencies: dict[str, list[float]] = defaultdict(list)
        counts: dict[str, list[float]] = defaultdict(list)
        ab = options.ab or options.ab_in_shards
        for number in range(options.rounds):
            if ab and number % 2:  # (the A/B round first every other round: no order bias)
                ab_round(graph, rnd, options.writes, spent, rows, latencies)
            spent.clear()
            calls.clear()
            del COMMITS[:]
            batches, writes, cpu = pipe.batches, pipe.writes, time.process_time()
            total = lone_writes(graph, rnd, options.writes, latencies["assoc_add"])
            cpu = time.process_time() - cpu
            rows["assoc_add, in all"].append(total)
            batches = max(1, pipe.batches - batches)
            counts["writes per pipeline batch"].append((pipe.writes - writes) / batches)
            for name in ("journal commits", "fence calls", "shards fsynced by fences"):
                counts[f"{name} per batch"].append(calls[name] / batches)
            counts["CPU s per wall s (process)"].append(cpu / total)
            for label in ["shard write-turn waits", *(label for label, _, _ in STEPS)]:
                rows[label].append(spent[label])
            rows["the rest (API, pipeline, cache)"].append(
                total - sum(spent[label] for label in SERIAL)
            )
            latencies["journal commit"] += COMMITS
            if ab and not number % 2:
                ab_round(graph, rnd, options.writes, spent, rows, latencies)
            started = time.perf_counter()
            for _ in range(0, options.writes, bare_per_commit):
                t = time.perf_counter()
                bare.commit(rnd, bare_per_commit)
                latencies["bare"].append(time.perf_counter() - t)
            rows["bare same-work write, in all"].append(time.perf_counter() - started)
        graph.close()
        bare.conn.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    report(options, rows, counts, latencies)


def report(
    options: argparse.Namespace,
    rows: dict[str, list[float]],
    counts: dict[str, list[float]],
    latencies: dict[str, list[float]],
) -> None:
    per = 1e6 / options.writes
    print(
        f"{THREADS} thread(s), writes in batches of {BATCH}, µs per write: median (min-max) of "
        f"{options.rounds} rounds of {options.writes}, preloaded with {options.preload:,} edges"
    )
    for label, values in rows.items():
        us = [v * per for v in values]
        print(f"  {label:<40} {statistics.median(us):>7.0f} ({min(us):.0f}-{max(us):.0f})")
    for name, values in counts.items():
        print(
            f"  {name:<40} {statistics.median(values):>7.2f} ({min(values):.2f}-{max(values):.2f})"
        )
    for name, values in latencies.items():
        print(f"  p50 latency, {name:<27} {statistics.median(values) * 1e6:>7.0f}")


if __name__ == "__main__":
    main()
