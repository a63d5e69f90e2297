"""The Graph API on every backend: objects, associations, counts, lists, pages."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import assocdb
import assocdb.api.assoc_writes
from assocdb import Assoc, Conflict, Graph, InvalidRequest, NotFound, UnknownType
from assocdb.core.ids import shard_of
from tests.conftest import OpenGraph
from tests.support.helpers import all_edges


def ids(assocs: list[Assoc]) -> list[int]:
    return [a.id2 for a in assocs]


# -- opening ------------------------------------------------------------------


def test_schema_and_data_persist_across_opens(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "g", shards=8) as g:
        g.define_assoc("follows", inverse="followed_by", limit=123)
        g.assoc_add(1, "follows", 2, time=5)
    with assocdb.open(tmp_path / "g") as g:
        assert g.shards == 8
        assert g.schema.assoc_type("followed_by").limit == 123
        assert ids(g.assoc_range(2, "followed_by")) == [1]


def test_shard_count_is_fixed_at_creation(tmp_path: Path) -> None:
    assocdb.open(tmp_path / "g", shards=8).close()
    with pytest.raises(InvalidRequest, match="holds a graph with 8 shards"):
        assocdb.open(tmp_path / "g", shards=16)
    for bad in (0, -1, 5000, "8", 2.0):
        with pytest.raises(InvalidRequest, match="shards must be"):
            assocdb.open(tmp_path / "other", shards=bad)  # type: ignore[arg-type]


def test_schema_file_is_applied_on_open(tmp_path: Path) -> None:
    schema = tmp_path / "schema.toml"
    schema.write_text('[assoc.follows]\ninverse = "followed_by"\n[object.user]\n')
    with assocdb.open(tmp_path / "g", schema=schema) as g:
        assert g.schema.assoc_type("followed_by").inverse == "follows"
        assert g.schema.object_type("user").id == 1


def test_types_defined_by_another_process_are_picked_up(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "g") as first, assocdb.open(tmp_path / "g") as second:
        first.define_assoc("likes")
        second.assoc_add(1, "likes", 2)
        assert first.assoc_count(1, "likes") == 1


def test_closed_graph_refuses_work(open_graph: OpenGraph) -> None:
    g = open_graph()
    g.define_assoc("likes")
    g.close()
    with pytest.raises(InvalidRequest, match="closed"):
        g.assoc_count(1, "likes")


# -- objects -------------------------------------------------------------------


def test_object_life_cycle(graph: Graph) -> None:
    uid = graph.obj_add("user", {"name": "ada"})
    obj = graph.obj_get(uid)
    assert obj is not None
    assert (obj.otype, obj.data, obj.version) == ("user", {"name": "ada"}, 1)
    graph.obj_update(uid, {"bio": "analyst"})
    obj = graph.obj_get(uid)
    assert obj is not None
    assert obj.data == {"name": "ada", "bio": "analyst"}
    assert obj.version == 2
    graph.obj_delete(uid)
    assert graph.obj_get(uid) is None
    graph.obj_delete(uid)  # deleting again is harmless
    with pytest.raises(NotFound):
        graph.obj_update(uid, {"x": 1})


def test_allocated_ids_are_distinct_and_can_be_colocated(graph: Graph) -> None:
    made = [graph.obj_add("user") for _ in range(200)]
    assert len(set(made)) == 200
    assert len({shard_of(i, graph.shards) for i in made}) == graph.shards
    post = graph.obj_add("post", {"t": "hi"})
    comments = [graph.obj_add("post", near=post) for _ in range(10)]
    assert {shard_of(c, graph.shards) for c in comments} == {shard_of(post, graph.shards)}


def test_external_ids(graph: Graph) -> None:
    assert graph.obj_add("user", {"n": 1}, id=42) == 42
    assert graph.obj_add("user", {"n": 1}, id=42) == 42  # a retry is a no-op
    with pytest.raises(Conflict, match="already exists"):
        graph.obj_add("user", {"n": 2}, id=42)
    graph.obj_delete(42)
    graph.obj_add("post", {"n": 3}, id=42)  # a deleted id may be reused
    obj = graph.obj_get(42)
    assert obj is not None
    assert (obj.otype, obj.version) == ("post", 3)


def test_missing_objects(graph: Graph) -> None:
    assert graph.obj_get(12345) is None
    with pytest.raises(NotFound):
        graph.obj_delete(12345)


def test_object_writes_follow_the_merge_rule(graph: Graph) -> None:
    uid = graph.obj_add("user", {"v": 1}, id=7, updated_at=1_000)
    graph.obj_update(uid, {"v": 0}, updated_at=500)  # older: loses
    obj = graph.obj_get(uid)
    assert obj is not None
    assert obj.data == {"v": 1}


# -- association writes ------------------------------------------------------------


def test_inverse_rows_are_identical(graph: Graph) -> None:
    result = graph.assoc_add(1, "follows", 2, time=100, data={"via": "search"})
    assert result.status == "applied"
    (forward,) = graph.assoc_get(1, "follows", [2])
    (inverse,) = graph.assoc_get(2, "followed_by", [1])
    assert (forward.time, forward.updated_at, forward.data) == (
        100,
        result.updated_at,
        {"via": "search"},
    )
    assert (inverse.time, inverse.updated_at, inverse.data) == (
        forward.time,
        forward.updated_at,
        forward.data,
    )
    assert graph.assoc_count(1, "follows") == graph.assoc_count(2, "followed_by") == 1
    assert graph.assoc_count(2, "follows") == 0


def test_symmetric_types_write_both_directions(graph: Graph) -> None:
    graph.assoc_add(1, "friend", 2)
    assert ids(graph.assoc_range(2, "friend")) == [1]
    graph.assoc_add(3, "friend", 3)  # a self-loop is one row
    assert graph.assoc_count(3, "friend") == 1
    assert len([r for r in all_edges(graph) if r.id1 == 3]) == 1


def test_plain_types_write_one_row(graph: Graph) -> None:
    graph.assoc_add(1, "likes", 2)
    assert len(all_edges(graph)) == 1


def test_delete_leaves_tombstones_and_fixes_counts(graph: Graph) -> None:
    graph.assoc_add(1, "follows", 2)
    graph.assoc_add(1, "follows", 3)
    graph.assoc_delete(1, "follows", 2)
    assert ids(graph.assoc_range(1, "follows")) == [3]
    assert graph.assoc_count(1, "follows") == 1
    assert graph.assoc_count(2, "followed_by") == 0
    states = {(r.id1, r.id2): r.state for r in all_edges(graph)}
    assert states[(1, 2)] == states[(2, 1)] == 3  # removed, both directions
    assert graph.check_counts() == []


def test_delete_before_an_older_add_arrives_wins(graph: Graph) -> None:
    graph.assoc_delete(1, "follows", 2, updated_at=2_000)
    graph.assoc_add(1, "follows", 2, updated_at=1_000)  # late, older
    assert graph.assoc_count(1, "follows") == 0
    assert graph.assoc_get(1, "follows", [2]) == []


def test_readding_keeps_time_and_data(graph: Graph) -> None:
    graph.assoc_add(1, "follows", 2, time=100, data="first")
    graph.assoc_add(1, "follows", 3, time=200)
    graph.assoc_add(1, "follows", 2)  # a re-follow does not jump to the top
    assert ids(graph.assoc_range(1, "follows")) == [3, 2]
    (edge,) = graph.assoc_get(1, "follows", [2])
    assert (edge.time, edge.data) == (100, "first")
    graph.assoc_add(1, "follows", 2, time=300, data="moved")  # explicit values win
    assert ids(graph.assoc_range(1, "follows")) == [2, 3]
    assert graph.assoc_count(1, "follows") == 2


def test_readding_after_delete_starts_afresh(graph: Graph) -> None:
    graph.assoc_add(1, "follows", 2, time=100, data="old")
    graph.assoc_delete(1, "follows", 2)
    result = graph.assoc_add(1, "follows", 2)
    (edge,) = graph.assoc_get(1, "follows", [2])
    assert (edge.time, edge.data) == (result.updated_at // 1000, None)
    assert graph.assoc_count(1, "follows") == 1


def test_change_type_moves_the_edge_and_its_inverse(graph: Graph) -> None:
    graph.assoc_add(1, "follows", 2, time=50, data=[1])
    graph.assoc_change_type(1, "follows", 2, "blocks")
    assert graph.assoc_count(1, "follows") == 0
    assert graph.assoc_count(2, "followed_by") == 0
    (edge,) = graph.assoc_get(1, "blocks", [2])
    assert (edge.time, edge.data) == (50, [1])
    assert graph.check_counts() == []
    with pytest.raises(NotFound):
        graph.assoc_change_type(1, "follows", 2, "blocks")
    with pytest.raises(InvalidRequest, match="already of type"):
        graph.assoc_change_type(1, "blocks", 2, "blocks")


def test_change_type_into_an_inverse_type(graph: Graph) -> None:
    graph.assoc_add(1, "likes", 2, time=7)
    graph.assoc_change_type(1, "likes", 2, "follows")
    assert ids(graph.assoc_range(2, "followed_by")) == [1]


def test_concurrent_writers_keep_counts_exact(graph: Graph) -> None:
    def work(seed: int) -> None:
        for n in range(150):
            id2 = (seed * 7 + n * 13) % 40 + 2
            if n % 3 == 2:
                graph.assoc_delete(1, "follows", id2)
            else:
                graph.assoc_add(1, "follows", id2)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert graph.check_counts() == []
    assert graph.assoc_count(1, "follows") == len(graph.assoc_range(1, "follows", limit=1000))
    followers = sum(graph.assoc_count(i, "followed_by") for i in range(2, 42))
    assert followers == graph.assoc_count(1, "follows")


# -- association reads -----------------------------------------------------------


@pytest.fixture
def timeline(graph: Graph) -> Graph:
    """1 follows 2..21 at times 10, 20, …, 200; 5 and 6 share a time."""
    for n in range(2, 22):
        graph.assoc_add(1, "follows", n, time=(n - 1) * 10)
    graph.assoc_add(1, "follows", 6, time=40)
    return graph


def test_range_is_newest_first_with_id2_breaking_ties(timeline: Graph) -> None:
    assert ids(timeline.assoc_range(1, "follows", limit=5)) == [21, 20, 19, 18, 17]
    tail = ids(timeline.assoc_range(1, "follows", pos=15, limit=10))
    assert tail == [6, 5, 4, 3, 2]  # 6 and 5 share time 40: higher id2 first
    assert timeline.assoc_range(1, "follows", pos=100) == []


def test_time_range_bounds_are_inclusive(timeline: Graph) -> None:
    got = timeline.assoc_time_range(1, "follows", high=100, low=40, limit=50)
    assert ids(got) == [11, 10, 9, 8, 7, 6, 5]
    assert ids(timeline.assoc_time_range(1, "follows", high=100, low=40, limit=2)) == [11, 10]
    assert timeline.assoc_time_range(1, "follows", high=10, low=100) == []


def test_get_filters_by_id2_and_time(timeline: Graph) -> None:
    assert ids(timeline.assoc_get(1, "follows", [2, 3, 99, 21])) == [21, 3, 2]
    assert ids(timeline.assoc_get(1, "follows", [2, 3, 21], high=100, low=20)) == [3]
    assert timeline.assoc_get(1, "follows", []) == []


def test_get_answers_each_id2_once(timeline: Graph) -> None:
    asked = [3, 21, 3, 2, 21]
    assert ids(timeline.assoc_get(1, "follows", asked)) == [21, 3, 2]
    assert asked == [3, 21, 3, 2, 21]  # the caller's list as it was
    many = [*range(2, 22)] * 400  # more ids than the type's limit, fewer once distinct
    assert ids(timeline.assoc_get(1, "follows", many)) == [*range(21, 1, -1)]


def test_limit_is_clamped_to_the_type_limit(graph: Graph) -> None:
    graph.bulk_load([(1, "likes", n, n) for n in range(1, 151)])
    assert len(graph.assoc_range(1, "likes", limit=10**9)) == 100
    page = graph.assoc_page(1, "likes", limit=10**9)
    assert len(page.items) == 100
    assert page.next_cursor is not None
    rest = graph.assoc_page(1, "likes", page.next_cursor, limit=10**9)
    assert len(rest.items) == 50
    assert rest.next_cursor is None


def test_pages_walk_the_whole_list_both_ways(timeline: Graph) -> None:
    seen, cursor, pages = [], None, []
    while True:
        page = timeline.assoc_page(1, "follows", cursor, limit=3)
        pages.append(page)
        seen += ids(page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == ids(timeline.assoc_range(1, "follows", limit=100))
    assert pages[0].prev_cursor is None
    assert all(p.prev_cursor is not None for p in pages[1:])
    back = timeline.assoc_page(1, "follows", pages[-1].prev_cursor, limit=3)
    assert back.items == pages[-2].items


def test_pages_are_stable_while_items_arrive(timeline: Graph) -> None:
    first = timeline.assoc_page(1, "follows", limit=5)
    timeline.assoc_add(1, "follows", 100, time=1_000)  # newer than everything
    second = timeline.assoc_page(1, "follows", first.next_cursor, limit=5)
    assert ids(second.items) == [16, 15, 14, 13, 12]
    newer = timeline.assoc_page(1, "follows", second.prev_cursor, limit=5)
    assert ids(newer.items) == [21, 20, 19, 18, 17]
    top = timeline.assoc_page(1, "follows", newer.prev_cursor, limit=5)
    assert ids(top.items) == [100]
    assert top.prev_cursor is None


def test_a_cursor_only_works_for_its_own_list(timeline: Graph) -> None:
    page = timeline.assoc_page(1, "follows", limit=2)
    with pytest.raises(assocdb.InvalidCursor):
        timeline.assoc_page(2, "follows", page.next_cursor)
    with pytest.raises(assocdb.InvalidCursor):
        timeline.assoc_page(1, "likes", page.next_cursor)


def test_unknown_types_are_refused(graph: Graph) -> None:
    with pytest.raises(UnknownType, match="did you mean 'follows'"):
        graph.assoc_count(1, "folows")


# -- bulk load --------------------------------------------------------------------


def test_bulk_load_matches_single_writes(open_graph: OpenGraph) -> None:
    edges = [(a, b) for a in range(1, 30) for b in range(1, 30) if (a * b) % 7 == 1]
    bulk, single = open_graph(), open_graph()
    for g in (bulk, single):
        g.define_assoc("follows", inverse="followed_by")
    bulk.bulk_load([(a, "follows", b, a * 100 + b) for a, b in edges])
    for a, b in edges:
        single.assoc_add(a, "follows", b, time=a * 100 + b, updated_at=5_000)
    strip = lambda rows: [r[:5] + r[6:] for r in rows]  # noqa: E731 - updated_at differs
    assert strip(all_edges(bulk)) == strip(all_edges(single))
    assert bulk.check_counts() == []


def test_bulk_load_twice_changes_nothing(graph: Graph) -> None:
    edges = [(1, "follows", n, n) for n in range(2, 50)] + [
        (3, "friend", 4, 9),
        (4, "friend", 3, 9),
    ]
    graph.bulk_load(edges)
    before = [r[:5] for r in all_edges(graph)]
    graph.bulk_load(edges)
    assert [r[:5] for r in all_edges(graph)] == before
    assert graph.assoc_count(1, "follows") == 48
    assert graph.assoc_count(3, "friend") == 1
    assert graph.check_counts() == []


def test_bulk_load_default_time_is_the_load_time(graph: Graph) -> None:
    graph.bulk_load([(1, "likes", 2)])
    (edge,) = graph.assoc_get(1, "likes", [2])
    assert edge.time == edge.updated_at // 1000


def test_bulk_load_with_worker_processes(graph: Graph) -> None:
    edges = [(a, "follows", b, a + b) for a in range(1, 200) for b in range(1, 120)]
    assert graph.bulk_load(edges, workers=2) == len(edges)
    assert graph.assoc_count(7, "follows") == 119
    assert graph.assoc_count(7, "followed_by") == 199
    assert graph.check_counts() == []


def test_bulk_load_refuses_a_bad_edge_by_position(graph: Graph) -> None:
    with pytest.raises(UnknownType, match=r"edge #1"):
        graph.bulk_load([(1, "nope", 2)])
    with pytest.raises(InvalidRequest, match=r"edge #1 .*an edge is"):
        graph.bulk_load([(1, "likes")])
    assert all_edges(graph) == []  # a bad first edge: nothing is written
    with pytest.raises(InvalidRequest, match=r"edge #3 .*id2 must be.* the 2 edges before") as bad:
        graph.bulk_load([(1, "likes", 2, 7), (1, "likes", 3, 7), (1, "likes", 0), (1, "likes", 4)])
    assert bad.value.details["stored"] == 2
    assert [(e.id1, e.id2) for e in all_edges(graph)] == [(1, 2), (1, 3)]  # those before it
    assert graph.assoc_count(1, "likes") == 2
    with pytest.raises(InvalidRequest, match=r"edge #2 .*atype must be a type name"):
        graph.bulk_load([(1, "likes", 2, 7), (1, [], 2, 3)])
    assert [(e.id1, e.id2, e.time) for e in all_edges(graph)] == [(1, 2, 7), (1, 3, 7)]


def test_bulk_load_stops_at_a_bad_edge_after_whole_rounds(
    graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(assocdb.api.assoc_writes, "BULK_BATCH", 1_000)  # rows per round

    def edges() -> Iterator[tuple[object, ...]]:
        for n in range(1, 1_501):  # more than one round
            yield (n, "likes", n + 1, n)
        yield (0, "likes", 1)

    with pytest.raises(InvalidRequest, match=r"edge #1,?501 .* the 1,500 edges before"):
        graph.bulk_load(edges(), workers=1)
    assert len(all_edges(graph)) == 1_500
    assert graph.check_counts() == []


@pytest.mark.parametrize("edges", [42, "1 likes 2", {"id1": 1}, None])
def test_bulk_load_takes_an_iterable_of_edges(graph: Graph, edges: object) -> None:
    with pytest.raises(InvalidRequest, match="edges must be an iterable"):
        graph.bulk_load(edges)  # type: ignore[arg-type]


def test_every_edge_of_a_list_by_iterating(graph: Graph) -> None:
    """assoc_iter/assoc_pages walk the cursors and end after the last edge (issue 35
    item 8: a loop that passed the last page's next_cursor=None back read page 1 again)."""
    for id2 in range(1, 8):
        graph.assoc_add(100, "follows", id2, time=id2)
    assert [a.id2 for a in graph.assoc_iter(100, "follows", limit=3)] == [7, 6, 5, 4, 3, 2, 1]
    assert [len(p.items) for p in graph.assoc_pages(100, "follows", limit=3)] == [3, 3, 1]
    assert list(graph.assoc_iter(200, "follows")) == []


def test_the_documented_paging_loop_ends(graph: Graph) -> None:
    """The hand-written cursor loop of docs/api.md, run as written, reads each edge once."""
    text = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    loop = text.split("A loop over\n  `assoc_page` by hand", 1)[1].split("```python\n", 1)[1]
    code = "\n".join(line.removeprefix("  ") for line in loop.split("```", 1)[0].splitlines())
    bob = 1
    for fan in range(2, 252):
        graph.assoc_add(fan, "follows", bob, time=fan)
    seen: list[int] = []

    def handle(items: list[Assoc]) -> None:
        seen.extend(a.id2 for a in items)
        assert len(seen) <= 250, "the loop read a page twice"

    exec(code, {"g": graph, "bob": bob, "handle": handle})
    assert seen == list(range(251, 1, -1))
