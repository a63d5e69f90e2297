"""Opening a new graph directory from several processes at the same instant.

Creating a graph is a compare-and-swap of its shard count: the first process
wins, a loser asking for another count gets `InvalidRequest`, one asking for
the same count (or none) opens the winner's graph. A shard file's first use is
safe from any number of threads and processes at once.
"""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest

import assocdb
from assocdb import AssocdbError, InvalidRequest

ROUNDS = 4


def _open_and_touch(path: str, shards: int, start: Any, answers: Any) -> None:
    start.wait()
    try:
        g = assocdb.open(path, shards=shards)
    except InvalidRequest as exc:
        answers.put((shards, None, str(exc)))
        return
    except AssocdbError as exc:  # anything else is the bug
        answers.put((shards, None, f"{type(exc).__name__}: {exc}"))
        return
    errors: list[str] = []

    def touch() -> None:  # every shard's first statement, from 4 threads at once
        try:
            for shard in range(g.shards):
                g.engine.backend.node_states(shard, [(1, 1)])
        except AssocdbError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=touch) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    answers.put((shards, g.shards, "; ".join(errors)))
    g.close()


@pytest.mark.parametrize("round", range(ROUNDS))
def test_processes_creating_one_graph_at_once_agree_on_its_shards(
    tmp_path: Path, round: int
) -> None:
    # spawn, not fork: other tests leave threads running here (a fork can copy a
    # lock one of them holds, and the child waits for it forever)
    context = multiprocessing.get_context("spawn")
    asked = (4, 8, 8)
    start, answers = context.Barrier(len(asked)), context.Queue()
    path = str(tmp_path / "g")
    processes = [
        context.Process(target=_open_and_touch, args=(path, n, start, answers)) for n in asked
    ]
    for process in processes:
        process.start()
    results = [answers.get(timeout=60) for _ in processes]
    for process in processes:
        process.join()
    with assocdb.open(path) as g:
        winner = g.shards
    for shards, opened, message in results:
        if opened is None:  # lost the race, asking for another count
            assert shards != winner, message
            assert f"holds a graph with {winner} shards, not {shards}" in message
        else:
            assert (shards, opened, message) == (winner, winner, "")
