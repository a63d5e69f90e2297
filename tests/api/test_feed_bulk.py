"""A bulk load with the feed on (api/assoc_writes.py `bulk_load` → storage/sql.py
`bulk_merge` → storage/sqlfeed.py `record`): every row it changes is recorded in the same
transaction, so the feed replayed from the start is still every shard's rows, through the
load's worker processes too, a consumer that writes each change into an empty graph ends
with the same associations, and a point-in-time restore rolls a load forward."""

from __future__ import annotations

from pathlib import Path

import assocdb
from assocdb import Graph
from tests.api.test_feed import _all, _backend, _feed_graph, _replayed, _stored
from tests.support.stores import Stores


def _replays_to_the_stored_rows(g: Graph) -> None:
    backend = _backend(g)
    for shard in range(backend.shards):
        assert _replayed(backend, shard) == _stored(backend, shard)


def test_a_bulk_load_is_in_the_feed(stores: Stores) -> None:
    g = _feed_graph(stores, "g")
    g.assoc_add(1, "follows", 2, data={"old": 1})
    g.assoc_delete(3, "likes", 4)
    _, end = _all(g)
    loaded = [(1, "follows", 2, 5), (3, "likes", 4), (5, "friend", 6, 7, {"n": 1})]
    assert g.bulk_load(loaded) == 3
    found = g.changes(end, limit=100).items
    legs = {(c.type, c.id1, c.id2, c.state) for c in found}
    assert legs == {
        ("follows", 1, 2, "normal"),
        ("followed_by", 2, 1, "normal"),
        ("likes", 3, 4, "normal"),
        ("friend", 5, 6, "normal"),
        ("friend", 6, 5, "normal"),
    }
    assert [c.data for c in found if c.type == "friend"] == [{"n": 1}] * 2
    assert [c.time for c in found if c.type == "follows"] == [5]
    _replays_to_the_stored_rows(g)
    _, end = _all(g, end)
    assert g.bulk_load([]) == 0
    assert g.changes(end).items == []


def test_a_parallel_load_is_recorded_by_its_worker_processes(stores: Stores) -> None:
    g = _feed_graph(stores, "g")
    edges = [(n, "follows", n + 1) for n in range(1, 12_002)]  # past BULK_PARALLEL
    assert g.bulk_load(edges, workers=2) == len(edges)
    found, _ = _all(g, limit=10_000)
    assert len(found) == 2 * len(edges)  # both legs of every edge
    _replays_to_the_stored_rows(g)


def test_a_consumer_applying_the_feed_to_an_empty_store_ends_equal(stores: Stores) -> None:
    g = _feed_graph(stores, "g")
    g.assoc_add(1, "follows", 2, data={"old": 1})
    g.assoc_add(1, "likes", 3)
    g.assoc_delete(1, "likes", 3)
    loaded = [(1, "follows", 2, 5, {"new": 1}), (1, "follows", 4, 6), (2, "friend", 4, 7)]
    g.bulk_load(loaded)
    g.assoc_add(4, "follows", 1)
    copy = stores.open("copy", shards=2, cache=None)  # (another shape: changes carry no shard)
    for name, inverse in (("follows", "followed_by"), ("likes", None)):
        copy.define_assoc(name, inverse=inverse)
    copy.define_assoc("friend", symmetric=True)
    changes, _ = _all(g, limit=4)
    for c in changes:  # the consumer: each leg as a write of its own (the other is a no-op)
        if c.state == "removed":
            copy.assoc_delete(c.id1, c.type, c.id2, updated_at=c.updated_at)
        else:
            copy.assoc_add(c.id1, c.type, c.id2, time=c.time, data=c.data, updated_at=c.updated_at)
    for id1 in (1, 2, 4):
        for atype in ("follows", "followed_by", "likes", "friend"):
            assert copy.assoc_range(id1, atype) == g.assoc_range(id1, atype)
            assert copy.assoc_count(id1, atype) == g.assoc_count(id1, atype)
    assert [e.id2 for e in copy.assoc_range(1, "follows")] == [4, 2]


def test_a_restore_rolls_a_bulk_load_forward(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "g", shards=4)
    g.define_assoc("follows", inverse="followed_by")
    g.enable_feed()
    g.assoc_add(1, "follows", 2)
    assocdb.backup(g, tmp_path / "backup")
    g.bulk_load([(1, "follows", n) for n in range(3, 50)])
    upto = g.engine.clock.now()
    g.close()
    assocdb.restore(tmp_path / "backup", tmp_path / "r", to=upto)
    with assocdb.open(tmp_path / "r") as r:
        assert r.assoc_count(1, "follows") == 48
        assert r.assoc_count(49, "followed_by") == 1
        assert r.check_inverses() == []
