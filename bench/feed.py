"""The change feed's cost on durable writes: feed on vs off, in one run (issue 38).

    python -m bench feed [--seconds S] [--rounds N]

Two graphs preloaded alike (2,000 lists of 100 edges); one has `enable_feed()`. Each
round measures both, alternately, with 1 and 8 writers of `assoc_add` and with
`batch()` of 100; the ratio is feed on / feed off (target ≥ 0.85).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from pathlib import Path

import assocdb

from .writes import NODES, in_batches, one_by_one, rate


def _graph(path: Path, feed: bool) -> assocdb.Graph:
    graph = assocdb.open(path, shards=16)
    graph.define_assoc("follows", inverse="followed_by")
    if feed:
        graph.enable_feed()
    with graph.batch() as batch:
        for a in range(1, 2001):
            for b in random.Random(a).sample(range(1, NODES), 100):
                batch.assoc_add(a, "follows", b)
    return graph


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench feed")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args(args)
    with tempfile.TemporaryDirectory() as tmp:
        graphs = {"off": _graph(Path(tmp) / "off", False), "on": _graph(Path(tmp) / "on", True)}
        cases = {
            "assoc_add, 1 writer": (1, one_by_one),
            "assoc_add, 8 writers": (8, one_by_one),
            "batch() of 100, 1 writer": (1, lambda g: in_batches(g, 100)),
        }
        runs: dict[tuple[str, str], list[float]] = {}
        for _ in range(options.rounds):
            for case, (threads, work) in cases.items():
                for feed, graph in graphs.items():
                    runs.setdefault((case, feed), []).append(
                        rate(threads, options.seconds, work(graph))
                    )
        for graph in graphs.values():
            graph.close()
    print(f"{'writes/s (median)':<28} {'feed off':>10} {'feed on':>10} {'on/off':>7}")
    for case in cases:
        off = statistics.median(runs[(case, "off")])
        on = statistics.median(runs[(case, "on")])
        print(f"{case:<28} {off:>10,.0f} {on:>10,.0f} {on / off:>7.2f}")


if __name__ == "__main__":
    main()
