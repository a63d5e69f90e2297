"""Secondary indexes: definitions, maintenance by writes, queries, the cleaner, corruption."""

from __future__ import annotations

import contextlib
import random
import sqlite3
import time
from typing import Any

import pytest

import assocdb
from assocdb import (
    AssocdbError,
    Conflict,
    Graph,
    InvalidCursor,
    InvalidRequest,
    NotFound,
    SchemaError,
    Unavailable,
    UnknownType,
)
from assocdb.api import cleaner as _cleaner
from assocdb.core import keys as _keys
from assocdb.core.entities import Routed, expected


def live_entries(g: Graph, name: str) -> set[tuple[int, bytes, int]]:
    """Every live entry of an index: (shard, key, object id)."""
    index = g.schema.index(name)
    found = set()
    for shard in range(g.shards):
        after = None
        while page := g.engine.backend.index_export(shard, index.id, after, 500):
            found |= {(shard, e[1], e[2]) for e in page if e[5] == 0}
            after = (page[-1][1], page[-1][2])
    return found


def rebuilt(g: Graph, name: str) -> set[tuple[int, bytes, int]]:
    """The live entries an index built from scratch from the stored objects would hold."""
    index = g.schema.index(name)
    want = set()
    for shard in range(g.shards):
        after = 0
        while rows := g.engine.backend.objects_page(shard, index.otype, after, 500):
            for row in rows:
                e: Routed | None = expected(index, row, g.shards)
                if e is not None:
                    want.add((e[0], e[2], e[3]))
            after = rows[-1].id
    return want


def emails(page: Any) -> list[str]:
    return [o.data["email"] for o in page.items]


def test_writes_maintain_the_index(graph: Graph) -> None:
    graph.define_index("by_email", "user", ["email"], shard_on="email")
    a = graph.obj_add("user", {"email": "a@x", "n": 1})
    b = graph.obj_add("user", {"email": "b@x"})
    graph.obj_add("user", {"name": "no email"})
    assert [o.id for o in graph.index_query("by_email", eq=["a@x"]).items] == [a]
    graph.obj_update(a, {"email": "c@x"})
    assert graph.index_query("by_email", eq=["a@x"]).items == []
    assert [o.id for o in graph.index_query("by_email", eq=["c@x"]).items] == [a]
    graph.obj_delete(b)
    assert graph.index_query("by_email", eq=["b@x"]).items == []
    assert live_entries(graph, "by_email") == rebuilt(graph, "by_email")


def test_range_queries_are_ordered_and_paged(graph: Graph) -> None:
    graph.define_index("by_age", "user", ["age"])
    ids = {age: graph.obj_add("user", {"age": age}) for age in [30, 5, 17, 18, 99, 18.5, 42]}
    page = graph.index_query("by_age", low=18, high=42)
    assert [o.data["age"] for o in page.items] == [18, 18.5, 30, 42]
    down = graph.index_query("by_age", low=18, desc=True)
    assert [o.data["age"] for o in down.items] == [99, 42, 30, 18.5, 18]
    seen, cursor = [], None
    while True:
        page = graph.index_query("by_age", limit=2, cursor=cursor)
        seen += [o.id for o in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [ids[a] for a in sorted(ids)]


def test_compound_and_recency_indexes(graph: Graph) -> None:
    graph.define_index("by_city_name", "user", ["city", "name"], shard_on="city")
    graph.define_index("by_city_recent", "user", ["city"], order="recency", shard_on="city")
    for city, name in [("oslo", "b"), ("oslo", "a"), ("rome", "c"), ("oslo", "c")]:
        graph.obj_add("user", {"city": city, "name": name})
    page = graph.index_query("by_city_name", eq=["oslo"])
    assert [o.data["name"] for o in page.items] == ["a", "b", "c"]
    page = graph.index_query("by_city_name", eq=["oslo"], low="b")
    assert [o.data["name"] for o in page.items] == ["b", "c"]
    newest = graph.index_query("by_city_recent", eq=["oslo"], desc=True)
    assert [o.data["name"] for o in newest.items] == ["c", "a", "b"]
    first = newest.items[-1]
    graph.obj_update(first.id, {"x": 1})  # a write moves it to the top
    newest = graph.index_query("by_city_recent", eq=["oslo"], desc=True)
    assert [o.data["name"] for o in newest.items] == ["b", "c", "a"]


def test_bad_definitions_get_clear_errors(graph: Graph) -> None:
    with pytest.raises(UnknownType, match="no object type 'usr'; did you mean 'user'"):
        graph.define_index("x", "usr", ["email"])
    with pytest.raises(SchemaError, match="list of property names"):
        graph.define_index("x", "user", "email")  # type: ignore[arg-type]
    with pytest.raises(SchemaError, match="shard_on must be one of"):
        graph.define_index("x", "user", ["email"], shard_on="name")
    with pytest.raises(SchemaError, match="must not repeat"):
        graph.define_index("x", "user", ["a", "a"])
    with pytest.raises(SchemaError, match="cannot be ordered by recency"):
        graph.define_index("x", "user", ["email"], unique=True, order="recency")
    with pytest.raises(SchemaError, match="index name"):
        graph.define_index("1x", "user", ["a"])
    graph.define_index("x", "user", ["email"])
    graph.define_index("x", "user", ["email"])  # the same again: a no-op
    with pytest.raises(SchemaError, match="already defined differently"):
        graph.define_index("x", "user", ["name"])
    with pytest.raises(NotFound, match="no index 'y'"):
        graph.index_query("y")


def test_unindexable_values_are_refused_and_the_store_is_unchanged(graph: Graph) -> None:
    graph.define_index("by_email", "user", ["email"])
    a = graph.obj_add("user", {"email": "a@x"})
    with pytest.raises(InvalidRequest, match="cannot be indexed"):
        graph.obj_add("user", {"email": ["a", "b"]})
    with pytest.raises(InvalidRequest, match="cannot be indexed"):
        graph.obj_update(a, {"email": {"nested": 1}})
    assert graph.obj_get(a).data == {"email": "a@x"}  # type: ignore[union-attr]
    graph.obj_add("post", {"email": ["fine"]})  # other types are not indexed


def test_an_object_stored_before_its_index_with_an_unindexable_value_stays_writable(
    graph: Graph,
) -> None:
    a = graph.obj_add("user", {"tags": ["x"], "name": "ada"})
    graph.define_index("by_tags", "user", ["tags"])
    graph.index_build("by_tags")
    graph.obj_update(a, {"name": "ada2"})  # left out of the index, not frozen by it
    assert graph.obj_get(a).data == {"tags": ["x"], "name": "ada2"}  # type: ignore[union-attr]
    with pytest.raises(InvalidRequest, match="cannot be indexed"):
        graph.obj_update(a, {"tags": ["y"]})  # a new unindexable value is still refused
    graph.obj_update(a, {"tags": "x"})
    assert [o.id for o in graph.index_query("by_tags", ["x"]).items] == [a]
    assert live_entries(graph, "by_tags") == rebuilt(graph, "by_tags")


def test_bad_queries_get_clear_errors(graph: Graph) -> None:
    graph.define_index("by_email", "user", ["email"])
    with pytest.raises(InvalidRequest, match="eq must be a list"):
        graph.index_query("by_email", eq="a")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="has 1 key parts"):
        graph.index_query("by_email", eq=["a", "b"])
    with pytest.raises(InvalidRequest, match="no part after"):
        graph.index_query("by_email", eq=["a"], low="b")
    with pytest.raises(InvalidRequest, match="limit must be"):
        graph.index_query("by_email", limit=0)
    with pytest.raises(InvalidRequest, match="rate must be a positive number"):
        graph.index_build("by_email", rate=0)
    with pytest.raises(InvalidRequest, match="seconds must be a non-negative number"):
        graph.index_build("by_email", seconds=-1)
    graph.obj_add("user", {"email": "a"})
    graph.obj_add("user", {"email": "b"})
    cursor = graph.index_query("by_email", limit=1).next_cursor
    assert cursor is not None
    with pytest.raises(InvalidCursor, match="not issued for this query"):
        graph.index_query("by_email", low="a", limit=1, cursor=cursor)


def test_unique_index_refuses_a_second_holder(graph: Graph) -> None:
    graph.define_index("email", "user", ["email"], unique=True, shard_on="email")
    a = graph.obj_add("user", {"email": "a@x"})
    with pytest.raises(Conflict, match="unique"):
        graph.obj_add("user", {"email": "a@x"})
    graph.obj_update(a, {"name": "same key, same object"})
    graph.obj_update(a, {"email": "b@x"})
    graph.obj_add("user", {"email": "a@x"})  # free again


def test_unique_index_without_shard_on_refuses_a_holder_on_another_shard(graph: Graph) -> None:
    # Without shard_on, entries live with their objects: a holder of the key
    # may be on any shard, not only on the new object's.
    graph.define_index("email", "user", ["email"], unique=True)
    graph.obj_add("user", {"email": "a@x"})
    for _ in range(2 * graph.shards):  # new objects land on every shard
        with pytest.raises(Conflict, match="unique"):
            graph.obj_add("user", {"email": "a@x"})
    assert len(graph.index_query("email", ["a@x"]).items) == 1


def test_a_refused_index_write_does_not_fail_the_rest_of_its_batch(graph: Graph) -> None:
    graph.define_index("email", "user", ["email"], unique=True, shard_on="email")
    graph.obj_add("user", {"email": "a@x"})
    with graph.batch() as b:
        follow = b.assoc_add(1, "follows", 2)
        taken = b.obj_add("user", {"email": "a@x"})
        unindexable = b.obj_add("user", {"email": ["a list"]})
        free = b.obj_add("user", {"email": "b@x"})
    with pytest.raises(Conflict, match="unique"):
        taken.result()
    with pytest.raises(InvalidRequest, match="cannot be indexed"):
        unindexable.result()
    assert follow.result().status == "applied"
    assert graph.obj_get(free.result()) is not None
    assert graph.assoc_count(2, "followed_by") == 1
    assert [o.data for o in graph.index_query("email", ["b@x"]).items] == [{"email": "b@x"}]


def test_build_indexes_existing_objects_and_resumes(
    graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [graph.obj_add("user", {"email": f"u{i}@x"}) for i in range(250)]
    status = graph.define_index("by_email", "user", ["email"], shard_on="email")
    assert status.state == "building"
    assert status.total == 250
    page = graph.index_query("by_email", eq=["u7@x"])
    assert page.items == []
    assert not page.complete
    monkeypatch.setattr(_cleaner, "PAGE", 10)
    status = graph.index_build("by_email", seconds=0.0)
    assert status.state == "building"
    assert status.scanned == 0
    steps = []
    while status.state != "ready":  # a few pages per call, each call resuming
        status = graph.index_build("by_email", rate=2000, seconds=0.02)
        steps.append(status.scanned)
    assert len(steps) > 2
    assert steps == sorted(steps)
    assert status.scanned == 250
    page = graph.index_query("by_email", eq=["u7@x"])
    assert [o.id for o in page.items] == [ids[7]]
    assert page.complete
    assert live_entries(graph, "by_email") == rebuilt(graph, "by_email")
    assert graph.index_check("by_email").missing == 0


def corrupt(g: Graph, name: str, sql: str, *params: Any) -> None:
    """Change index rows behind assocdb's back, on every shard."""
    index = g.schema.index(name)
    backend: Any = g.engine.backend
    if backend.spec()["kind"] in ("mysql", "postgres"):
        for shard in range(g.shards):
            statement = backend._q(sql.format(t=f"{{s}}.index_{index.id}"), shard)

            def run(session: Any, shard: int = shard, statement: str = statement) -> Any:
                return backend._run(session, shard, statement, params)

            with contextlib.suppress(AssocdbError):  # no table on this shard
                backend._in_transaction(shard, run)
        return
    for shard in range(g.shards):
        conn = sqlite3.connect(g.engine.backend.path / f"shard-{shard:04d}.db")  # type: ignore[attr-defined]
        try:
            conn.execute(sql.format(t=f"index_{index.id}").replace("%s", "?"), params)
            conn.commit()
        except sqlite3.OperationalError:
            pass  # no table on this shard
        finally:
            conn.close()


def test_corrupted_rows_are_never_returned_and_are_repaired(graph: Graph) -> None:
    graph.define_index("by_email", "user", ["email"], shard_on="email")
    a = graph.obj_add("user", {"email": "a@x"})
    b = graph.obj_add("user", {"email": "b@x"})
    c = graph.obj_add("user", {"email": "c@x"})
    graph.index_build("by_email")
    good = live_entries(graph, "by_email")
    # missing: a's entry is gone; stale: b's entry now says "z@x"; dangling: c deleted
    # behind the index's back (its removal entry dropped), and an entry for no object.
    index = graph.schema.index("by_email")
    corrupt(graph, "by_email", "DELETE FROM {t} WHERE id = %s", a)
    z = _keys.encode(["z@x"])
    graph.engine.backend.index_apply(0, [(index.id, z, b, 1, 1, 0), (index.id, z, 999, 1, 1, 0)])
    graph.obj_delete(c)
    corrupt(graph, "by_email", "UPDATE {t} SET state = 0 WHERE id = %s", c)
    assert graph.index_query("by_email", eq=["a@x"]).items == []  # missing: not found …
    assert graph.index_query("by_email", eq=["z@x"]).items == []  # stale: never returned
    assert graph.index_query("by_email", eq=["c@x"]).items == []  # dangling: never returned
    assert len(graph.index_query("by_email").items) == 1  # only b, under its real key
    found = graph.index_check("by_email")
    assert (found.missing, found.stale, found.dangling) == (1, 1, 2)
    assert not found.repaired
    assert live_entries(graph, "by_email") != rebuilt(graph, "by_email")
    fixed = graph.index_check("by_email", repair=True)
    assert (fixed.missing, fixed.stale, fixed.dangling) == (1, 1, 2)
    assert live_entries(graph, "by_email") == rebuilt(graph, "by_email")
    assert live_entries(graph, "by_email") == {e for e in good if e[2] != c}
    again = graph.index_check("by_email")
    assert (again.missing, again.stale, again.dangling) == (0, 0, 0)
    assert [o.id for o in graph.index_query("by_email", eq=["a@x"]).items] == [a]


def test_recent_pass_repairs_recent_writes(graph: Graph) -> None:
    graph.define_index("by_email", "user", ["email"])
    graph.index_build("by_email")
    a = graph.obj_add("user", {"email": "a@x"})
    corrupt(graph, "by_email", "DELETE FROM {t} WHERE id = %s", a)
    assert graph.index_query("by_email", eq=["a@x"]).items == []
    result = graph.index_repair_recent("by_email")
    assert result.missing == 1
    assert [o.id for o in graph.index_query("by_email", eq=["a@x"]).items] == [a]


def test_drop_index_stops_writes_and_removes_rows(graph: Graph) -> None:
    graph.define_index("by_email", "user", ["email"])
    graph.obj_add("user", {"email": "a@x"})
    graph.drop_index("by_email")
    with pytest.raises(NotFound):
        graph.index_query("by_email")
    graph.obj_add("user", {"email": ["now", "fine"]})  # no index: any value goes
    graph.define_index("by_email", "user", ["email"])  # a new index, a new id and table
    assert graph.schema.index("by_email").id == 2
    with pytest.raises(NotFound):
        graph.drop_index("nope")


def test_cleaner_thread_builds_in_the_background(graph: Graph) -> None:
    for i in range(50):
        graph.obj_add("user", {"email": f"u{i}@x"})
    graph.define_index("by_email", "user", ["email"])
    graph.start_cleaner(interval=0.01)
    deadline = time.monotonic() + 10
    while graph.index_status("by_email").state != "ready":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert len(graph.index_query("by_email", limit=100).items) == 50


def test_background_writes_carry_entries_too(tmp_path: Any) -> None:
    """With sync=False, writes are resolved by the applier later; entries come along."""
    g = assocdb.open(tmp_path / "g", shards=4, sync=False)
    try:
        g.define_object("user")
        g.define_index("by_city", "user", ["city"], shard_on="city")
        rnd = random.Random(7)
        ids = [g.obj_add("user", {"city": "a"}, id=i) for i in range(1, 21)]
        g.drain(10)
        for _ in range(200):
            id = rnd.choice(ids)
            if rnd.random() < 0.1:
                g.obj_delete(id)
                g.obj_add("user", {"city": "z"}, id=id)  # queued behind the delete
            else:
                g.obj_update(id, {"city": rnd.choice("abcd")})
        assert g.drain(10)
        assert live_entries(g, "by_city") == rebuilt(g, "by_city")
        for city in "abcdz":
            page = g.index_query("by_city", eq=[city], limit=100)
            assert {o.id for o in page.items} == {
                o.id for o in map(g.obj_get, ids) if o is not None and o.data["city"] == city
            }
    finally:
        g.close()


def test_writes_of_a_process_that_has_not_seen_the_index_are_repaired(tmp_path: Any) -> None:
    a = assocdb.open(tmp_path / "g", shards=4)
    b = assocdb.open(tmp_path / "g")
    try:
        a.define_object("user")
        old = b.obj_add("user", {"email": "old@x"})
        a.define_index("by_email", "user", ["email"])
        b.engine._indexes_read_at = time.monotonic() + 3600  # b has not re-read the schema yet
        new = b.obj_add("user", {"email": "new@x"})
        b.obj_update(old, {"email": "moved@x"})
        assert live_entries(a, "by_email") == set()
        assert a.index_build("by_email").state == "ready"  # the build, then a recent pass
        assert live_entries(a, "by_email") == rebuilt(a, "by_email")
        assert [o.id for o in a.index_query("by_email", ["new@x"]).items] == [new]
        assert [o.id for o in a.index_query("by_email", ["moved@x"]).items] == [old]
        b.obj_update(old, {"email": "again@x"})  # after the build: only the cleaner sees it
        assert a.index_query("by_email", ["moved@x"]).items == []  # stale entry, re-checked
        assert a.index_query("by_email", ["again@x"]).items == []  # missing entry
        found = a.index_repair_recent("by_email")
        assert (found.missing, found.stale) == (1, 1)
        assert [o.id for o in a.index_query("by_email", ["again@x"]).items] == [old]
        assert live_entries(a, "by_email") == rebuilt(a, "by_email")
    finally:
        b.close()
        a.close()


def test_an_index_table_dropped_behind_a_writers_back_is_created_again(graph: Graph) -> None:
    graph.define_index("by_email", "user", ["email"])
    a = graph.obj_add("user", {"email": "a@x"})
    corrupt(graph, "by_email", "DROP TABLE {t}")
    graph.obj_update(a, {"email": "b@x"})  # queued: its first attempt finds no table
    assert graph.drain(5)
    assert [o.id for o in graph.index_query("by_email", ["b@x"]).items] == [a]
    # The same connection again: the failure made it forget the table, so it is created.
    index = graph.schema.index("by_email").id
    backend = graph.engine.backend
    backend.index_apply(0, [(index, b"k", 1, 1, 1, 0)])
    corrupt(graph, "by_email", "DROP TABLE {t}")
    with pytest.raises(Unavailable, match=r"no such table|was dropped"):
        backend.index_apply(0, [(index, b"k", 1, 2, 1, 0)])
    assert backend.index_apply(0, [(index, b"k", 1, 2, 1, 0)]) == 1


def test_indexes_in_a_toml_schema(graph: Graph, tmp_path: Any) -> None:
    schema = tmp_path / "schema.toml"
    schema.write_text(
        '[object.user]\n[index.by_email]\notype = "user"\nproperties = ["email"]\n'
        'shard_on = "email"\nunique = true\n'
    )
    graph.load_schema(schema)
    graph.load_schema(schema)  # applying it again changes nothing
    index = graph.schema.index("by_email")
    assert (index.properties, index.shard_on, index.unique) == (["email"], "email", True)
    schema.write_text('[index.x]\notype = "user"\n')
    with pytest.raises(SchemaError, match=r"\[index.x\] needs otype and properties"):
        graph.load_schema(schema)


def test_purge_deletes_old_removal_entries_only(graph: Graph) -> None:
    graph.define_index("by_city_recent", "user", ["city"], order="recency")
    a = graph.obj_add("user", {"city": "oslo"})
    for n in range(5):
        graph.obj_update(a, {"n": n})  # every write moves a recency entry
    index = graph.schema.index("by_city_recent")

    def removals() -> int:
        return sum(
            e[5] == 3
            for shard in range(graph.shards)
            for e in graph.engine.backend.index_export(shard, index.id, None, 100)
        )

    assert removals() == 5
    assert graph._cleaner.purge(index) == 0  # younger than an hour: kept
    assert graph._cleaner.purge(index, older_than=0) == 5
    assert removals() == 0
    assert live_entries(graph, "by_city_recent") == rebuilt(graph, "by_city_recent")
    assert [o.id for o in graph.index_query("by_city_recent", ["oslo"]).items] == [a]


def test_a_failed_index_write_does_not_leave_the_cache_stale(graph: Graph) -> None:
    # The object row and its entries are two statements on one shard; when the
    # entries fail, the row is already stored, and the retry changes nothing
    # more: the cache must have learnt of the row the first time.
    graph.define_index("by_age", "user", ["age"])
    graph.index_build("by_age")
    id = graph.obj_add("user", {"age": 1})
    assert graph.obj_get(id).data == {"age": 1}  # type: ignore[union-attr]  # cached now

    def entries_fail(shard: int, sql: str) -> None:
        if "index_" in sql and sql.lstrip().upper().startswith("INSERT"):
            raise sqlite3.OperationalError("disk I/O error")

    faults = graph.engine.backend.faults  # type: ignore[attr-defined]
    faults.append(entries_fail)
    assert graph.obj_update(id, {"age": 2}).status == "queued"
    faults.clear()
    graph.queue_retry()
    assert graph.drain(10)
    assert graph.obj_get(id).data == {"age": 2}  # type: ignore[union-attr]
    assert [o.id for o in graph.index_query("by_age", [2]).items] == [id]


def test_an_overlong_index_cursor_is_not_echoed_whole(graph: Graph) -> None:
    graph.define_index("by_age", "user", ["age"])
    with pytest.raises(InvalidCursor) as caught:
        graph.index_query("by_age", cursor="A" * 100_000)
    assert len(str(caught.value)) < 200
