"""Consumer groups whose members share the shards (api/feed_groups.py): members read
disjoint shards that together are the whole feed; a member that stops reading has its
shards read again by the others from the group's committed position; whatever members
do, nothing committed was skipped and a member reading on sees every change."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assocdb import Graph, InvalidRequest
from assocdb.core import feed as core_feed
from tests.support.stores import Stores

KEY = "feed.group.g.members"


def _graph(stores: Stores) -> Graph:
    g = stores.open("g", shards=4, cache=None)
    g.define_assoc("likes")
    g.enable_feed()
    return g


def _write(g: Graph, first: int, n: int) -> None:
    with g.batch() as batch:
        for id1 in range(first, first + n):
            batch.assoc_add(id1, "likes", 1)


def _expire(g: Graph, member: str) -> None:
    """The member's lease ran out (it died, or stopped reading)."""
    backend = g.engine.backend
    while True:
        raw = backend.get_meta(KEY)
        leases = msgspec.json.decode(raw or b"{}")
        leases[member] = 0.0
        if backend.swap_meta(KEY, raw, msgspec.json.encode(leases)):
            return


def _keys(page: Any) -> set[tuple[int, int]]:
    return {(c.shard, c.position) for c in page.items}


def test_members_of_a_group_share_the_shards(stores: Stores) -> None:
    g = _graph(stores)
    _write(g, 1, 40)
    everything = _keys(g.changes(limit=1000))
    g.changes(group="g", member="a")  # a read joins: both have before either reads on
    g.changes(group="g", member="b")
    a = g.changes(group="g", member="a", limit=1000)
    b = g.changes(group="g", member="b", limit=1000)
    assert {c.shard for c in a.items}.isdisjoint({c.shard for c in b.items})
    assert _keys(a) | _keys(b) == everything
    g.feed_commit("g", a.next_cursor, member="a")
    g.feed_commit("g", b.next_cursor, member="b")  # neither takes back the other's shards
    assert g.changes(group="g").items == []


def test_a_member_that_stopped_reading_has_its_shards_read_again(stores: Stores) -> None:
    g = _graph(stores)
    _write(g, 1, 40)
    g.changes(group="g", member="a")
    g.changes(group="g", member="b")
    a = g.changes(group="g", member="a", limit=1000)  # read, never committed
    b = g.changes(group="g", member="b", limit=1000)
    g.feed_commit("g", b.next_cursor, member="b")
    _expire(g, "a")
    again = g.changes(group="g", member="b", limit=1000)
    assert _keys(again) == _keys(a)  # at-least-once: read again, not skipped
    g.feed_commit("g", again.next_cursor, member="b")
    assert g.changes(group="g").items == []


def test_a_member_needs_its_group(stores: Stores) -> None:
    g = _graph(stores)
    with pytest.raises(InvalidRequest):
        g.changes(member="a")
    with pytest.raises(InvalidRequest):
        g.changes(group="g", member="")


MEMBERS = st.sampled_from(["a", "b", "c"])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(1, 6)),
        st.tuples(st.just("read"), MEMBERS, st.integers(1, 8), st.booleans()),  # commit?
        st.tuples(st.just("die"), MEMBERS),  # its lease runs out, its cursor is lost
    ),
    max_size=30,
)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_whatever_members_do_nothing_committed_is_skipped(
    backend_kind: str, ops: list[Any]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stores = Stores(backend_kind, Path(tmp))
        try:
            g = _graph(stores)
            processed: set[tuple[int, int]] = set()
            cursors: dict[str, str | None] = {}
            written = 0
            for op in ops:
                if op[0] == "write":
                    _write(g, 100 + written, op[1])
                    written += op[1]
                elif op[0] == "read":
                    page = g.changes(cursors.get(op[1]), group="g", member=op[1], limit=op[2])
                    processed |= _keys(page)
                    cursors[op[1]] = page.next_cursor
                    if op[3]:
                        g.feed_commit("g", page.next_cursor, member=op[1])
                else:
                    _expire(g, op[1])
                    cursors.pop(op[1], None)
            committed = g.services.feed.committed("g")
            held = core_feed.decode(committed, 4) if committed else (0,) * 4
            for shard, upto in enumerate(held):  # every committed position was processed
                assert {(shard, p) for p in range(1, upto + 1)} <= processed
            everything = _keys(g.changes(limit=10_000))
            rest = g.changes(group="g", limit=10_000)  # one reader goes on from the group
            assert everything <= processed | _keys(rest)
        finally:
            stores.close()
