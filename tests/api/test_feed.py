"""The change feed (api/feed.py, storage/sqlfeed.py) on every configured backend: replayed
from the start it reproduces every shard's rows, through shard failures and duplicate
writes; retention and FeedExpired; consumer groups are at-least-once."""

from __future__ import annotations

import sqlite3
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assocdb import Change, FeedExpired, Graph, InvalidCursor
from assocdb.client.wire import status_of
from assocdb.core.errors import InvalidRequest, NotFound, Unavailable, UnknownType
from assocdb.storage import sqlfeed
from assocdb.storage.sql import SQLBackend
from assocdb.writes.applier import RetryPolicy
from tests.support.stores import Stores

FAST = RetryPolicy(base=0.005, cap=0.05, max_attempts=3, down_after=2, down_for=0.02, down_max=0.1)
NODES = st.integers(1, 9)
TYPES = ["follows", "friend", "likes"]

Op = tuple[Any, ...]
OPS = st.one_of(
    st.tuples(st.just("add"), NODES, st.sampled_from(TYPES), NODES, st.integers(0, 3)),
    st.tuples(st.just("delete"), NODES, st.sampled_from(TYPES), NODES),
    st.tuples(st.just("object"), NODES, st.integers(0, 3)),  # a new object
    st.tuples(st.just("unobject"), NODES),
    st.tuples(st.just("archive"), NODES),
    st.tuples(st.just("fail"), st.integers(0, 2)),  # shard N fails from now on
    st.tuples(st.just("heal")),
    st.tuples(st.just("replay")),  # the last assoc write again, same updated_at
)


def _feed_graph(stores: Stores, name: str) -> Graph:
    g = stores.open(name, shards=3, retry=FAST, timeout=0.2, cache=None)
    g.define_assoc("follows", inverse="followed_by")
    g.define_assoc("friend", symmetric=True)
    g.define_assoc("likes")
    g.define_object("user")
    g.enable_feed()
    return g


def _backend(g: Graph) -> SQLBackend:
    backend = g.engine.backend
    assert isinstance(backend, SQLBackend)
    return backend


def _failing(shard: int) -> Callable[[int, str], None]:
    def fault(at: int, sql: str) -> None:
        if at == shard:
            raise sqlite3.OperationalError("disk I/O error (injected)")

    return fault


def _run(g: Graph, ops: list[Op]) -> None:
    faults = _backend(g).faults
    last: tuple[int, str, int, int] | None = None
    for n, op in enumerate(ops):
        try:
            if op[0] == "add":
                result = g.assoc_add(op[1], op[2], op[3], data=op[4])
                last = (op[1], op[2], op[3], result.updated_at)
            elif op[0] == "delete":
                g.assoc_delete(op[1], op[2], op[3])
            elif op[0] == "object":
                g.obj_add("user", {"v": op[2]}, id=op[1] * 1000 + n)
            elif op[0] == "unobject":
                g.obj_delete(op[1] * 1000 + 1)  # one added by op 1, or none
            elif op[0] == "archive":
                g.node_archive(op[1], "likes")
            elif op[0] == "fail":
                faults.append(_failing(op[1]))
            elif op[0] == "heal":
                faults.clear()
            elif op[0] == "replay" and last is not None:
                g.assoc_add(last[0], last[1], last[2], updated_at=last[3])
        except (Unavailable, NotFound):  # a failed shard's read; an object deleted first
            pass
    faults.clear()
    assert g.drain(timeout=30)


def _replayed(backend: SQLBackend, shard: int) -> dict[str, dict[tuple[int, ...], tuple[Any, ...]]]:
    """The shard's rows rebuilt from its feed alone, replayed from the start."""
    rows: dict[str, dict[tuple[int, ...], tuple[Any, ...]]] = {"e": {}, "o": {}, "n": {}}
    after = 0
    while batch := sqlfeed.read(backend, shard, after, 500):
        for pos, kind, id1, atype, id2, state, time, at, data in batch:
            assert pos == after + 1  # dense, in order
            after = pos
            if kind == sqlfeed.EDGE:
                rows["e"][(id1, atype, id2)] = (id1, atype, id2, state, time, at, data)
            elif kind == sqlfeed.OBJECT:
                rows["o"][(id1,)] = (id1, atype, state, id2, at, data)
            else:
                rows["n"][(id1, atype)] = (id1, atype, state, at)
    return rows


def _stored(backend: SQLBackend, shard: int) -> dict[str, dict[tuple[int, ...], tuple[Any, ...]]]:
    edges = {tuple(r[:3]): tuple(r) for r in backend.export_edges(shard, None, 100_000)}
    objects = backend.export_table(shard, "objects", None, 100_000)
    nodes = backend.export_table(shard, "node_states", None, 100_000)
    return {
        "e": {k: (*v[:6], None if v[6] is None else bytes(v[6])) for k, v in edges.items()},
        "o": {(r[0],): (*r[:5], bytes(r[5])) for r in objects},
        "n": {tuple(r[:2]): tuple(r) for r in nodes},
    }


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(OPS, max_size=40))
def test_the_feed_replayed_from_the_start_is_every_shards_rows(
    backend_kind: str, ops: list[Op]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stores = Stores(backend_kind, Path(tmp))
        try:
            g = _feed_graph(stores, "g")
            _run(g, ops)
            backend = _backend(g)
            for shard in range(backend.shards):
                assert _replayed(backend, shard) == _stored(backend, shard)
        finally:
            stores.close()


def _all(g: Graph, cursor: str | None = None, limit: int = 3) -> tuple[list[Change], str]:
    found: list[Change] = []
    while True:
        page = g.changes(cursor, limit=limit)
        found += page.items
        if not page.items:
            return found, page.next_cursor
        cursor = page.next_cursor


def test_pages_cover_the_feed_once_in_each_shards_order(stores: Stores) -> None:
    g = _feed_graph(stores, "g")
    for n in range(1, 8):
        g.assoc_add(n, "follows", n + 1, data={"n": n})
    g.obj_add("user", {"a": 1}, id=5001)
    found, end = _all(g)
    assert len(found) == 7 * 2 + 1  # each leg, and the object
    for shard in range(3):
        positions = [c.position for c in found if c.shard == shard]
        assert positions == list(range(1, len(positions) + 1))
    legs = {(c.type, c.id1, c.id2) for c in found if c.kind == "edge"}
    assert ("followed_by", 2, 1) in legs
    assert ("follows", 1, 2) in legs
    assert g.changes(end).items == []
    g.assoc_add(1, "likes", 2)
    assert [(c.type, c.id1) for c in g.changes(end).items] == [("likes", 1)]
    assert {c.kind for c in g.changes(kinds=["object"]).items} == {"object"}
    assert {c.type for c in g.changes(types=["followed_by"]).items} == {"followed_by"}


def test_a_filter_naming_an_unknown_type_or_kind_is_refused(stores: Stores) -> None:
    g = _feed_graph(stores, "g")
    g.assoc_add(1, "likes", 2)
    with pytest.raises(UnknownType) as caught:
        g.changes(types=["likes", "liked"])
    assert "'liked'" in str(caught.value)
    assert status_of(caught.value) == 400
    with pytest.raises(InvalidRequest, match="'edges'"):
        g.changes(kinds=["edges"])
    with pytest.raises(InvalidRequest):
        g.changes(types="likes")  # a string is not a list of names
    assert {c.type for c in g.changes(types=["likes", "user"]).items} == {"likes"}


def test_unchanged_rows_record_nothing(stores: Stores) -> None:
    g = _feed_graph(stores, "g")
    first = g.assoc_add(1, "likes", 2)
    _, end = _all(g)
    g.assoc_add(1, "likes", 2, updated_at=first.updated_at)  # a replay: the merge refuses it
    assert g.changes(end).items == []


def test_a_foreign_cursor_is_refused(stores: Stores) -> None:
    g = _feed_graph(stores, "g")
    with pytest.raises(InvalidCursor):
        g.changes("nope")


def test_a_trimmed_cursor_raises_feed_expired_naming_the_oldest(stores: Stores) -> None:
    g = _feed_graph(stores, "g")
    for n in range(1, 5):
        g.assoc_add(n, "likes", n + 1)
    start = g.changes(limit=1).next_cursor
    assert g.services.feed.trim(rows=1) > 0
    with pytest.raises(FeedExpired) as caught:
        g.changes(start)
    oldest = caught.value.details["oldest"]
    assert len(oldest) == 3
    assert max(oldest) > 1
    assert g.services.feed.trim(seconds=0) >= 0  # everything older than now
    with pytest.raises(FeedExpired) as caught:
        g.changes()
    assert status_of(caught.value) == 410


def test_a_consumer_that_dies_before_committing_sees_the_changes_again(stores: Stores) -> None:
    g = _feed_graph(stores, "g")
    g.assoc_add(1, "likes", 2)
    first = g.changes(group="mailer")
    assert len(first.items) == 1
    # the consumer dies here, before feed_commit: the group reads them again
    assert g.changes(group="mailer").items == first.items
    g.feed_commit("mailer", first.next_cursor)
    assert g.changes(group="mailer").items == []
    g.assoc_add(3, "likes", 4)
    assert [c.id1 for c in g.changes(group="mailer").items] == [3]
    assert g.changes(group="other").items[0].id1 == 1  # groups are independent


def test_the_feed_stays_on_when_the_graph_is_opened_again(tmp_path: Path) -> None:
    stores = Stores("sqlite", tmp_path)
    try:
        where = stores.location("g")
        g = stores.open(at=where, shards=2)
        g.define_assoc("likes")
        g.enable_feed()
        g.close()
        again = stores.open(at=where)
        again.assoc_add(1, "likes", 2)
        assert [c.id1 for c in again.changes().items] == [1]
    finally:
        stores.close()


def test_follow_changes_waits_for_a_new_change(stores: Stores) -> None:
    g = _feed_graph(stores, "g")
    _, end = _all(g)
    seen: list[Change] = []

    def follow() -> None:
        for change in g.follow_changes(end):
            seen.append(change)
            return

    follower = threading.Thread(target=follow)
    follower.start()
    g.assoc_add(7, "likes", 8)
    follower.join(timeout=30)
    assert [c.id1 for c in seen] == [7]
