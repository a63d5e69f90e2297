"""A writer for the crash test: `python crash_writer.py DIR THREADS COUNT [KILL_AT]`.

Opens the graph in DIR and writes COUNT `follows` edges (which have inverses)
from THREADS threads, printing `id1 id2` after each write is acknowledged.
The test kills it with SIGKILL at a random moment.

With KILL_AT, it writes in `Graph.batch()`es of 200 instead and kills itself
at its KILL_AT-th shard statement: in the middle of a batch's shard
transactions, after the batch was journaled (fsynced) but before all its legs
are applied, or between a shard's commit and the fence that syncs it.

With KILL_AT and WHERE it kills itself, from its KILL_AT-th shard statement on,
while a batch's shard transactions are prepared during its journal commit
(`writes.overlap`): WHERE is `during` (at a shard's BEGIN or INSERT once the journal's
commit has begun: earlier shards prepared, the fsync in flight), `journaled`
(just after the journal's commit returned, before any shard's COMMIT) or
`unjournaled` (just before the journal's commit).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

import assocdb


def main() -> None:
    directory, threads, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    graph = assocdb.open(directory, shards=8)
    graph.define_assoc("follows", inverse="followed_by")
    lock = threading.Lock()
    out = sys.stdout
    if len(sys.argv) > 5:
        prepared(graph, count, int(sys.argv[4]), sys.argv[5])
        return
    if len(sys.argv) > 4:
        batches(graph, count, int(sys.argv[4]))
        return

    def write(worker: int) -> None:
        for n in range(worker, count, threads):
            id1, id2 = n // 300 + 1, n % 300 + 1_000
            graph.assoc_add(id1, "follows", id2, time=n)
            with lock:
                out.write(f"{id1} {id2}\n")
                out.flush()

    workers = [threading.Thread(target=write, args=(w,)) for w in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    graph.close()


def batches(graph: assocdb.Graph, count: int, kill_at: int) -> None:
    statements = 0

    def kill_there(shard: int, sql: str) -> None:
        nonlocal statements
        statements += 1
        if statements == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    graph.engine.backend.faults.append(kill_there)
    for start in range(0, count, 200):
        with graph.batch() as batch:
            for n in range(start, start + 200):
                batch.assoc_add(n // 300 + 1, "follows", n % 300 + 1_000, time=n)
        sys.stdout.write(
            "".join(f"{n // 300 + 1} {n % 300 + 1_000}\n" for n in range(start, start + 200))
        )
        sys.stdout.flush()


def prepared(graph: assocdb.Graph, count: int, kill_at: int, where: str) -> None:
    journal = graph.engine.journal
    commit = journal._commit
    cond = threading.Condition()
    # Shard statements; rounds whose shard transactions began being prepared (a
    # BEGIN after the last round's COMMITs); journal commits begun (one a round).
    seen = {"statements": 0, "prepared": 0, "open": 0, "journaled": 0}

    def kill() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def shard_statement(shard: int, sql: str) -> None:
        with cond:
            seen["statements"] += 1
            if sql == "COMMIT":  # the round's journal commit returned
                seen["open"] = 0
            elif sql.startswith(("BEGIN", "INSERT")):
                if not seen["open"]:
                    seen["open"] = 1
                    seen["prepared"] += 1
                    cond.notify_all()
                # (A round resolved in its shard transactions, `Overlap.journal_resolving`,
                # opens them before its journal commit and fills them during it.)
                # Killed at the first such statement once the journal's commit began:
                # not waiting for it here, on the thread that would begin it (a round
                # opens its shards before journaling, so a wait at its BEGIN only ended
                # by its timeout, 60 s a run).
                if (
                    where == "during"
                    and seen["statements"] >= kill_at
                    and seen["journaled"] >= seen["prepared"]
                ):
                    kill()

    def gated_commit(batch: Any) -> None:
        with cond:
            seen["journaled"] += 1
            cond.notify_all()
            # This round's shard transactions are being prepared: the commit overlaps them.
            cond.wait_for(lambda: seen["prepared"] >= seen["journaled"], timeout=60)
            late = seen["statements"] >= kill_at
        if where == "unjournaled" and late:
            kill()
        commit(batch)
        if where == "journaled" and late:
            kill()

    journal._commit = gated_commit  # type: ignore[method-assign]
    graph.engine.backend.faults.append(shard_statement)
    for start in range(0, count, 200):
        with graph.batch() as batch:
            for n in range(start, start + 200):
                batch.assoc_add(n // 300 + 1, "follows", n % 300 + 1_000, time=n)
        sys.stdout.write(
            "".join(f"{n // 300 + 1} {n % 300 + 1_000}\n" for n in range(start, start + 200))
        )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
