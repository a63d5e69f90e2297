"""A writer for the crash test: `python crash_writer.py DIR THREADS COUNT`.

Opens the graph in DIR and writes COUNT `follows` edges (which have inverses)
from THREADS threads, printing `id1 id2` after each write is acknowledged.
The test kills it with SIGKILL at a random moment.
"""

from __future__ import annotations

import sys
import threading

import assocdb


def main() -> None:
    directory, threads, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    graph = assocdb.open(directory, shards=8)
    graph.define_assoc("follows", inverse="followed_by")
    lock = threading.Lock()
    out = sys.stdout

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


if __name__ == "__main__":
    main()
