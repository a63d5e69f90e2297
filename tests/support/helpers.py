"""Helpers for tests: whole-store snapshots and a brute-force model of lists."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from assocdb import Graph
from assocdb.core.merge import EdgeRow


def all_edges(graph: Graph) -> list[EdgeRow]:
    """Every stored edge row of every shard, tombstones included, in key order."""
    backend = graph.engine.backend
    rows: list[EdgeRow] = []
    for shard in range(backend.shards):
        after = None
        while page := backend.export_edges(shard, after, 1000):
            rows += page
            after = page[-1][:3]
    return sorted(rows)


def snapshot(graph: Graph, object_ids: list[int] = ()) -> tuple[Any, ...]:  # type: ignore[assignment]
    """Everything a bad request must leave unchanged."""
    objects = [graph.obj_get(i) for i in object_ids]
    return all_edges(graph), graph.check_counts(), objects


def wait_until(condition: Callable[[], bool], patience: float = 120.0) -> None:
    """Until `condition()` holds; `patience` only turns a hang into a failure."""
    give_up = time.monotonic() + patience
    while not condition():
        assert time.monotonic() < give_up, "the condition never held"
        time.sleep(0.002)


def statements(g: Graph, read: Callable[[], object]) -> list[str]:
    """The SQL statements `read()` issued on `g`'s shards."""
    seen: list[str] = []
    undo = g.trace(lambda shard, sql, seconds: seen.append(sql))
    try:
        read()
    finally:
        undo()
    return seen
