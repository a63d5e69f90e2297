"""The copy step of a shard move (`storage.copier`): pages in key order, written by
multi-row merges while the next page is read, on SQLite directories and MariaDB."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from assocdb import Graph
from assocdb.core.ids import shard_of
from assocdb.core.merge import EdgeTuple, merge_edges
from assocdb.storage import copier
from assocdb.storage.moves import move_shard
from assocdb.storage.shardmap_config import load
from tests.storage.test_moves import Load, assert_final, ready_to_move
from tests.storage.test_shardmap import (  # noqa: F401 (make_map is a fixture)
    MapMaker,
    cluster,
    make_map,
    open_cluster,
)


@pytest.fixture
def graph(make_map: MapMaker) -> Iterator[Graph]:  # noqa: F811 (the fixture)
    g = open_cluster(make_map, cache=None)  # every read goes to a replica
    yield g
    g.close()


def numbered(n: int) -> Iterator[copier.Page]:
    for k in range(n):
        yield copier.Page("edges", None if k == 0 else [k - 1, 0, 0], [(k, 0, 0)])


def test_pages_are_done_in_order_while_later_ones_are_written() -> None:
    done: list[int] = []
    written: list[int] = []
    lock = threading.Lock()

    def write(page: copier.Page) -> None:
        with lock:
            written.append(page.rows[0][0])

    copier.run(numbered(20), write, lambda page: done.append(page.rows[0][0]))
    assert done == list(range(20))
    assert written == list(range(20))  # one writer: committed in key order


def test_a_failed_page_stops_the_copy_and_no_later_page_is_done() -> None:
    done: list[int] = []

    def write(page: copier.Page) -> None:
        if page.rows[0][0] == 5:
            raise RuntimeError("page 5")

    with pytest.raises(RuntimeError, match="page 5"):
        copier.run(numbered(20), write, lambda page: done.append(page.rows[0][0]))
    assert done == [0, 1, 2, 3, 4]  # the saved position never passes a page not written


def test_pages_follow_the_key_and_stop_at_a_short_one() -> None:
    table = [(k, 1, k * 10) for k in range(10)]

    def read(name: str, after: Any, size: int) -> list[tuple[Any, ...]]:
        start = 0 if after is None else next(i for i, r in enumerate(table) if r[:3] > tuple(after))
        return table[start : start + size]

    got = list(copier.pages(read, "edges", None, 4, copier.Throttle(None)))
    assert [len(p.rows) for p in got] == [4, 4, 2]
    assert [p.after for p in got] == [None, [3, 1, 30], [7, 1, 70]]


def test_copied_pages_keep_newer_rows_and_counts_right(graph: Graph) -> None:
    """Pages of 3 rows (tombstones and data blobs among them) merged onto a copy that
    live writes reached first: a newer row on the copy is kept, an older one replaced,
    and the copy's counts equal a recount of its rows."""
    backend = cluster(graph)
    shard = 0
    names = [r.backend for r in backend.map.replicas[shard]]
    spare = next(name for name in backend.map.backends if name not in names)
    source, target = backend.member(names[0]), backend.member(spare)
    node = next(n for n in range(1, 1000) if shard_of(n, graph.shards) == shard)
    for k in range(25):
        graph.assoc_add(
            node, "likes", 500 + k, time=k, data={"q": "'%s\\" * (k % 3)} if k % 3 else None
        )
    for k in range(0, 25, 4):
        graph.assoc_delete(node, "likes", 500 + k)
    rows = source.export_table(shard, "edges", None, 1000)
    atype = rows[0][1]
    # Live writes on the copy: a newer row, an older one, and a key the source lacks.
    newer: EdgeTuple = (node, atype, 501, 0, 99, rows[1][5] + 10**9, b"live")
    older: EdgeTuple = (node, atype, 502, 0, 98, 1, None)
    fresh: EdgeTuple = (node, atype, 999, 0, 97, rows[0][5], None)
    target.apply(shard, [newer, older, fresh], ())
    before = {row[:3]: row for row in target.export_table(shard, "edges", None, 1000)}
    expected = dict(before)
    for _, new in merge_edges(before, [tuple(r) for r in rows])[0]:  # type: ignore[misc]
        expected[new[:3]] = new
    pages = copier.pages(
        lambda t, after, size: source.export_table(shard, t, after, size),
        "edges",
        None,
        3,
        copier.Throttle(None),
    )
    copier.run(pages, lambda page: copier.write_page(target, shard, page, 100), lambda p: None)
    after = {row[:3]: tuple(row) for row in target.export_table(shard, "edges", None, 1000)}
    assert after == {key: tuple(row) for key, row in expected.items()}
    assert after[newer[:3]] == newer
    assert after[fresh[:3]] == fresh
    assert target.recount(shard, False) == []


def test_a_move_in_small_pages_under_writes_ends_equal_and_verified(graph: Graph) -> None:
    """Many pages (4 rows each) copied while a writer and a reader run: nothing lost, no
    wrong read, counts right, and the verify step finds every replica equal."""
    fixed, _, path, shard = ready_to_move(graph)
    old = [r.backend for r in load(path).replicas[shard]]
    with Load(graph, fixed) as running:
        result = move_shard(path, shard, "db4", move=True, remove=old[0], settle=1.5, page=4)
    assert result.copied > 8  # more than two pages
    assert load(path).moves == []
    assert_final(graph, running, shard)
