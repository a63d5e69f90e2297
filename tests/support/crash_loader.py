"""A bulk loader for the crash test: `python crash_loader.py DIR EDGES KILL_AT`.

Opens the graph in DIR and loads EDGES `follows` edges (which have inverses)
as the named load "crash", in rounds of 100 edges on two worker processes,
and kills itself with SIGKILL while reading its KILL_AT-th input edge: rounds
before it are applied (some recorded in the journal, the latest perhaps not),
one may be in flight on the workers.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator

import assocdb
from assocdb.api import assoc_writes

assoc_writes.BULK_BATCH = 200  # rows: 100 edges and their inverses per round
assoc_writes.BULK_PARALLEL = 150


def edges(count: int, kill_at: int) -> Iterator[tuple[int, str, int, int]]:
    for n in range(1, count + 1):
        if n == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        yield (n % 97 + 1, "follows", n + 1000, n)


def main() -> None:
    directory, count, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    graph = assocdb.open(directory, shards=8)
    graph.define_assoc("follows", inverse="followed_by")
    graph.bulk_load(edges(count, kill_at), workers=2, name="crash")


if __name__ == "__main__":
    main()
