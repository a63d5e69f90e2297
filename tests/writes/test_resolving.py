"""A round of edge writes resolved inside its shard transactions (`Overlap.journal_resolving`,
`storage.opened`): one read per shard, in the transaction, and the same rows as
the resolution before journaling gave. (Killed meanwhile: tests/system/test_crash.py,
the crash writer's `during`.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import assocdb
from assocdb import Graph
from assocdb.core.errors import Unavailable
from assocdb.writes import pipeline
from assocdb.writes.overlap import RESOLVE_IN_SHARDS_FROM
from tests.writes.test_overlap import failing_journal

ROUND = max(40, RESOLVE_IN_SHARDS_FROM)


def open_graph(path: Path, **options: Any) -> Graph:
    g = assocdb.open(path, shards=4, **options)
    g.define_assoc("follows", inverse="followed_by")
    return g


def statements_of(g: Graph) -> list[tuple[int, str]]:
    """The shard statements run from now on: (shard, first word, or READ for a read of
    edges or node states)."""
    seen: list[tuple[int, str]] = []

    def record(shard: int, sql: str) -> None:
        word = sql.split(maxsplit=1)[0]
        reads = word == "SELECT" and ("edges" in sql or "node_states" in sql)
        seen.append((shard, "READ" if reads else word))

    g.engine.backend.faults.append(record)
    return seen


def test_a_big_round_reads_once_per_shard_inside_its_transaction(tmp_path: Path) -> None:
    """Each shard the round writes: BEGIN, one read (its rows and node states), the
    upserts, COMMIT; nothing is read outside a transaction before journaling."""
    g = open_graph(tmp_path / "g")
    seen = statements_of(g)
    with g.batch() as b:
        for n in range(ROUND):
            b.assoc_add(1 + n % 7, "follows", 100 + n)
    assert all(s in ("BEGIN", "READ", "SELECT", "INSERT", "COMMIT") for _, s in seen), seen
    for shard in {shard for shard, _ in seen}:
        mine = [s for sh, s in seen if sh == shard]
        assert mine[:2] == ["BEGIN", "READ"]
        assert mine[-1] == "COMMIT"
        assert mine.count("READ") == 1  # (a SELECT left: the change feed's, now and then)
        assert mine.count("BEGIN") == 1
    assert g.check_counts() == []
    assert g.check_inverses() == []
    g.close()


def test_a_lone_write_and_a_round_of_two_are_resolved_in_their_shards(tmp_path: Path) -> None:
    """A lone write reads in its shard transactions, as a round of two (and 8 writers'
    rounds of ~7) do: on each shard BEGIN, one read (its rows, node states and the
    change feed's row), the two upserts, COMMIT; nothing read outside a transaction,
    no statement of its own for the feed's row (`writes.overlap`'s module doc)."""
    g = open_graph(tmp_path / "g")
    seen = statements_of(g)
    with g.batch() as b:
        b.assoc_add(1, "follows", 100)
        b.assoc_add(2, "follows", 101)
    for shard in {shard for shard, _ in seen}:
        assert [s for sh, s in seen if sh == shard][:2] == ["BEGIN", "READ"], seen
    seen.clear()
    g.assoc_add(3, "follows", 102)
    for shard in {shard for shard, _ in seen}:
        mine = [s for sh, s in seen if sh == shard]
        assert mine == ["BEGIN", "READ", "INSERT", "INSERT", "COMMIT"], seen
    assert g.check_counts() == []
    assert g.check_inverses() == []
    g.close()


def test_a_feed_turned_on_by_another_handle_is_seen_by_the_read_in_the_shard(
    tmp_path: Path,
) -> None:
    """The feed's row, read in the opened shard transaction's one statement: a feed
    another handle turned on after this one opened records this one's next writes."""
    g = open_graph(tmp_path / "g")
    g.assoc_add(1, "follows", 100)
    other = assocdb.open(tmp_path / "g")
    other.enable_feed()
    g.assoc_add(2, "follows", 101)
    with g.batch() as b:
        b.assoc_add(3, "follows", 102)
        b.assoc_add(4, "follows", 103)
    changes = other.changes(limit=100)
    edges = {(c.id1, c.id2) for c in changes.items if c.kind == "edge"}
    assert {(2, 101), (101, 2), (3, 102), (102, 3), (4, 103), (103, 4)} <= edges, changes
    assert (1, 100) not in edges
    other.close()
    g.close()


@pytest.mark.parametrize("in_shards", [True, False])
def test_a_big_round_resolves_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_shards: bool
) -> None:
    """Re-adds keep the live edge's time, edges into an archived list are written
    archived, removals remove; the same outcome by either path (the old one is the
    oracle), counts and inverses exact."""
    if not in_shards:
        monkeypatch.setattr(pipeline, "RESOLVE_IN_SHARDS_FROM", 10**9)
    g = open_graph(tmp_path / "g")
    with g.batch() as b:
        for n in range(ROUND):
            b.assoc_add(1 + n % 5, "follows", 100 + n, time=1_000 + n)
    g.node_archive(9, "follows")
    assert g.drain(timeout=60)
    with g.batch() as b:
        for n in range(0, ROUND, 2):  # re-added without a time: keeps 1_000 + n
            b.assoc_add(1 + n % 5, "follows", 100 + n)
        for n in range(1, ROUND, 4):
            b.assoc_delete(1 + n % 5, "follows", 100 + n)
        for n in range(ROUND // 4):  # into an archived list
            b.assoc_add(9, "follows", 500 + n)
    for n in range(ROUND):
        edge = g.assoc_edge(1 + n % 5, "follows", 100 + n)
        assert edge is not None
        assert edge.time == 1_000 + n
        assert edge.state == ("removed" if n % 4 == 1 else "normal")
    for n in range(ROUND // 4):
        edge = g.assoc_edge(9, "follows", 500 + n)
        assert edge is not None
        assert edge.state == "archived"
        mirrored = g.assoc_edge(500 + n, "followed_by", 9)
        assert mirrored is not None
        assert mirrored.state == "archived"
    live = ROUND - len(range(1, ROUND, 4))
    assert sum(g.assoc_count(1 + k, "follows") for k in range(5)) == live
    assert g.assoc_count(9, "follows") == 0
    assert g.check_counts() == []
    assert g.check_inverses() == []
    g.close()


def test_a_failed_journal_commit_leaves_a_big_round_unstored(tmp_path: Path) -> None:
    """The journal refuses the round: every write refused, nothing stored (the opened
    transactions rolled back), the cache as before, the shards free for the next round."""
    g = open_graph(tmp_path / "g")
    g.assoc_add(1, "follows", 100)
    assert g.assoc_count(100, "followed_by") == 1  # (cached)
    conn = failing_journal(g)
    conn.failing = ("COMMIT",)
    with g.batch() as b:
        refused = [b.assoc_add(1 + n % 7, "follows", 100 + n) for n in range(ROUND)]
    for write in refused:
        with pytest.raises(Unavailable):
            write.result()
    conn.failing = ()
    assert g.assoc_count(1, "follows") == 1
    assert g.assoc_count(100, "followed_by") == 1
    assert g.assoc_edge(2, "follows", 101) is None
    with g.batch() as b:
        for n in range(ROUND):
            b.assoc_add(1 + n % 7, "follows", 100 + n)
    assert sum(g.assoc_count(1 + k, "follows") for k in range(7)) == ROUND
    assert g.check_counts() == []
    assert g.check_inverses() == []
    g.close()
