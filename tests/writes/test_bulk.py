"""Planning a bulk load's rows (`writes.bulk.Rounds`, pure)."""

from __future__ import annotations

from typing import Any

from assocdb.core.errors import InvalidRequest, UnknownType
from assocdb.core.ids import shard_of
from assocdb.writes.bulk import Rounds

TYPES = {"follows": (1, 2), "likes": (3, None), "friend": (4, 4)}


def resolve(name: object) -> tuple[int, int | None]:
    if name not in TYPES:
        raise UnknownType(f"no association type {name!r}")
    return TYPES[name]  # type: ignore[index]


def plan(edges: list[Any], size: int = 1_000, shards: int = 4) -> tuple[Rounds, list[Any]]:
    rounds = Rounds(edges, resolve, 7_000_000, 100, shards, size)
    return rounds, list(rounds)


def test_each_edge_becomes_its_rows_on_their_shards() -> None:
    rounds, batches = plan([(1, "follows", 2, 5), (3, "likes", 4), (5, "friend", 5, 6)])
    assert rounds.edges == 3
    assert rounds.error is None
    (batch,) = batches
    assert all(shard_of(row[0], 4) == shard for shard, rows in batch.items() for row in rows)
    rows = sorted(row for rows in batch.values() for row in rows)
    assert rows == [
        (1, 1, 2, 0, 5, 7_000_000, None),
        (2, 2, 1, 0, 5, 7_000_000, None),
        (3, 3, 4, 0, 7_000, 7_000_000, None),  # no time: the load's, in ms
        (5, 4, 5, 0, 6, 7_000_000, None),  # a symmetric self-edge: one row
    ]


def test_rounds_hold_at_least_size_rows() -> None:
    edges = [(n, "follows", n + 1, n) for n in range(1, 101)]
    rounds, batches = plan(edges, size=30)
    sizes = [sum(map(len, batch.values())) for batch in batches]
    assert sizes == [30] * 6 + [20]
    assert rounds.edges == 100


def test_a_bad_edge_ends_the_rounds_after_the_edges_before_it() -> None:
    edges = [(n, "follows", n + 1, n) for n in range(1, 11)] + [(1, "follows", 0), (1, "likes", 2)]
    rounds, batches = plan(edges, size=7)
    assert rounds.edges == 10
    assert isinstance(rounds.error, InvalidRequest)
    assert "edge #11" in rounds.error.message
    assert sum(len(rows) for batch in batches for rows in batch.values()) == 20
