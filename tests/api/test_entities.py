"""The index entry rule: any order and any repetition of the entries that object
writes (and concurrent builds) produce leaves the index that the final objects imply."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import assocdb
from assocdb import Conflict, InvalidRequest, NotFound
from assocdb.core import json as _json
from assocdb.core.entities import (
    Entry,
    EntryKey,
    Routed,
    expected,
    judge,
    maintenance,
    merge_entries,
)
from assocdb.core.ids import shard_of
from assocdb.core.merge import ObjRow, State, obj_rank
from assocdb.core.schema import IndexDef
from tests.api.test_indexes import live_entries, rebuilt

SHARDS = 4
INDEXES = [
    IndexDef("by_email", 1, 1, ["email"], shard_on="email"),
    IndexDef("by_city_recent", 2, 1, ["city"], order="recency"),
    IndexDef("by_city_email", 3, 1, ["city", "email"]),
]
values = st.sampled_from(["a", "b", 1, 1.0, None, True])
patches = st.dictionaries(st.sampled_from(["email", "city", "other"]), values, max_size=3)
ops = st.lists(
    st.tuples(st.integers(1, 4), st.one_of(patches, st.just("delete"))), min_size=1, max_size=25
)


def resolve(current: ObjRow | None, id: int, op: Any, ua: int) -> ObjRow | None:
    """What the Graph stores for an object write (a simplified `core.ops.ObjectWrite`)."""
    if op == "delete":
        if current is None:
            return None
        return ObjRow(id, 1, State.REMOVED, current.version + 1, ua, b"{}")
    live = current is not None and current.state != State.REMOVED
    data = {**_json.decode(current.data), **op} if live and current else dict(op)
    version = current.version + 1 if current else 1
    return ObjRow(id, 1, State.NORMAL, version, ua, msgspec.json.encode(data))


def fold(entries: list[Routed]) -> set[tuple[int, int, bytes, int]]:
    store: dict[EntryKey, Entry] = {}
    for shard, *rest in entries:
        entry: Entry = (rest[0], rest[1], rest[2], rest[3], rest[4], rest[5])
        for won in merge_entries(store, [entry]):
            store[won[:3]] = won
        assert shard >= 0
    return {(e[0], e[1], e[2], e[3]) for e in store.values() if e[5] == State.NORMAL}


def wanted(rows: dict[int, ObjRow]) -> set[tuple[int, int, bytes, int]]:
    found = set()
    for index in INDEXES:
        for row in rows.values():
            e = expected(index, row, SHARDS)
            if e is not None:
                found.add((e[1], e[2], e[3], e[4]))
    return found


@settings(max_examples=500)
@given(
    ops,
    st.randoms(use_true_random=False),
    st.lists(st.integers(0, 30), max_size=10),
    st.lists(st.integers(-1, 2), min_size=25, max_size=25),
)
def test_any_order_of_entries_converges(
    writes: list[tuple[int, Any]], rnd: Any, build_points: list[int], steps: list[int]
) -> None:
    """Clients may stamp writes alike, or older than what is stored (those lose)."""
    rows: dict[int, ObjRow] = {}
    entries: list[Routed] = []
    ua = 10
    for step, (id, op) in enumerate(writes):
        if step in build_points:  # a build reads the rows as they are now
            for index in INDEXES:
                entries += [e for row in rows.values() if (e := expected(index, row, SHARDS))]
        ua += steps[step]
        current = rows.get(id)
        new = resolve(current, id, op, ua=ua)
        if new is None:
            continue
        entries += maintenance(INDEXES, current, new, SHARDS)
        if current is None or obj_rank(new) > obj_rank(current):  # the merge rule
            rows[id] = new
    replayed = entries + rnd.sample(entries, len(entries) // 2)  # duplicates too
    rnd.shuffle(replayed)
    got = {(i, k, o) for i, k, o, _ in fold(replayed)}
    assert got == {(i, k, o) for i, k, o, _ in wanted(rows)}


@settings(max_examples=500)
@given(ops, st.lists(st.tuples(st.integers(1, 5), values, st.integers(0, 40)), max_size=6))
def test_judge_repairs_any_corruption(writes: list[tuple[int, Any]], junk: list[Any]) -> None:
    rows: dict[int, ObjRow] = {}
    entries: list[Routed] = []
    for step, (id, op) in enumerate(writes):
        new = resolve(rows.get(id), id, op, ua=100 + step)
        if new is not None:
            entries += maintenance(INDEXES, rows.get(id), new, SHARDS)
            rows[id] = new
    index = INDEXES[0]
    kept = [e for e in entries if e[1] == index.id][::2]  # half the entries lost
    for id, value, ua in junk:  # entries for wrong keys, older than their objects
        kept.append((0, index.id, msgspec.json.encode([value]), id, ua, 1, State.NORMAL))
    stored: dict[tuple[int, bytes, int], Routed] = {}  # one merged row per (shard, key, id)
    for e in kept:
        have = stored.get((e[0], e[2], e[3]))
        if have is None or (e[4], e[5], e[6]) > (have[4], have[5], have[6]):
            stored[(e[0], e[2], e[3])] = e
    by_object: dict[int, list[Routed]] = {}
    for e in stored.values():
        by_object.setdefault(e[3], []).append(e)
    fixes = [
        f
        for id in {*rows, *by_object}
        for f in judge(index, rows.get(id), id, by_object.get(id, []), SHARDS)
    ]
    got = {(k, o) for i, k, o, _ in fold(kept + fixes) if i == index.id}
    want = {(k, o) for i, k, o, _ in wanted(rows) if i == index.id}
    assert got == want


write_ops = st.lists(
    st.tuples(
        st.integers(0, 3),  # which object
        st.sampled_from(["update", "delete", "add"]),
        st.sampled_from(["a", "b", 1, None]),
        st.one_of(st.none(), st.integers(-3, 3)),  # a client-supplied updated_at, near the last
    ),
    max_size=30,
)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(write_ops)
def test_graph_writes_keep_the_index_equal_to_a_rebuild(tmp_path_factory: Any, ops: Any) -> None:
    """Through the Graph, with clients stamping writes (some older than what is stored,
    which must lose and leave no entries behind)."""
    g = assocdb.open(tmp_path_factory.mktemp("g"), shards=3)
    try:
        g.define_object("user")
        g.define_index("by_email", "user", ["email"], shard_on="email")
        g.define_index("by_email_recent", "user", ["email"], order="recency")
        ids = [g.obj_add("user", {"email": "a"}, id=n + 1) for n in range(4)]
        for which, kind, value, skew in ops:
            id = ids[which]
            stored = g.engine.backend.objects(shard_of(id, g.shards), [id])[0]
            ua = None if skew is None else stored.updated_at + skew
            try:
                if kind == "update":
                    g.obj_update(id, {"email": value}, updated_at=ua)
                elif kind == "delete":
                    g.obj_delete(id, updated_at=ua)
                else:
                    g.obj_add("user", {"email": value}, id=id, updated_at=ua)
            except (NotFound, Conflict, InvalidRequest):
                pass
        for name in ("by_email", "by_email_recent"):
            assert live_entries(g, name) == rebuilt(g, name), (name, ops)
    finally:
        g.close()


def test_writes_stamped_alike_keep_the_last_key() -> None:
    """A client stamps three writes with one updated_at: a -> b -> a. Versions order them."""
    rows: dict[int, ObjRow] = {}
    entries: list[Routed] = []
    for email in ["a", "b", "a"]:
        new = resolve(rows.get(1), 1, {"email": email}, ua=7)
        assert new is not None
        entries += maintenance(INDEXES[:1], rows.get(1), new, SHARDS)
        rows[1] = new
    for order in (entries, entries[::-1]):
        assert {(k, o) for _, k, o, _ in fold(order)} == {(k, o) for _, k, o, _ in wanted(rows)}
