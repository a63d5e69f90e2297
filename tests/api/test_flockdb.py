"""FlockDB's query power: edge states, whole-node operations, set arithmetic."""

from __future__ import annotations

import pytest

import assocdb
from assocdb import Graph, InvalidCursor, InvalidRequest, UnknownType
from tests.support.stores import Stores


@pytest.fixture
def follows(open_graph) -> Graph:  # type: ignore[no-untyped-def]
    g = open_graph()
    g.define_assoc("follows", inverse="followed_by")
    g.define_assoc("likes")
    g.define_assoc("friend", symmetric=True)
    return g


def following(g: Graph, node: int) -> assocdb.Query:
    return g.select(node, "follows")


def followers(g: Graph, node: int) -> assocdb.Query:
    return g.select(node, "follows", incoming=True)


def test_the_conformance_scenario(follows: Graph) -> None:
    g = follows
    for n, fan in enumerate((20, 21, 22)):  # a second apart, in that order
        g.assoc_add(fan, "follows", 1, time=1_000_000 + 1000 * n)
    assert followers(g, 1).page().items == [22, 21, 20]
    g.assoc_add(1, "follows", 20, time=1_010_000)
    g.assoc_add(1, "follows", 30, time=1_011_000)
    assert (following(g, 1) & followers(g, 1)).page().items == [20]
    assert (following(g, 1) | followers(g, 1)).page().items == [30, 22, 21, 20]
    assert (followers(g, 1) - following(g, 1)).page().items == [22, 21]

    union = following(g, 1).union(followers(g, 1))
    first = union.page(limit=2)
    assert (first.items, first.prev_cursor) == ([30, 22], None)
    assert first.next_cursor is not None
    second = union.page(first.next_cursor, limit=2)
    assert (second.items, second.next_cursor) == ([21, 20], None)
    assert second.prev_cursor is not None
    assert union.page(second.prev_cursor, limit=2).items == [30, 22]

    times = {a.id2: a.time for a in g.assoc_range(1, "follows")}
    g.node_archive(1, "follows")  # node 1's outgoing follows
    assert g.drain(timeout=10)
    assert following(g, 1).page().items == []
    assert followers(g, 20).page().items == []
    assert followers(g, 30).page().items == []
    assert followers(g, 1).page().items == [22, 21, 20]  # incoming ones are untouched
    assert g.assoc_count(1, "follows") == 0
    assert g.assoc_count(1, "follows", "archived") == 2
    assert g.assoc_count(20, "followed_by") == 0
    assert g.node_state(1, "follows") == "archived"

    g.node_unarchive(1, "follows")
    assert g.drain(timeout=10)
    assert following(g, 1).page().items == [30, 20]
    assert {a.id2: a.time for a in g.assoc_range(1, "follows")} == times
    assert [a.id2 for a in g.assoc_range(30, "followed_by")] == [1]
    assert g.assoc_count(1, "follows") == 2
    assert g.check_counts() == []


# -- single-edge states ----------------------------------------------------------


def test_edge_states_keep_time_and_move_counts(follows: Graph) -> None:
    g = follows
    g.assoc_add(1, "follows", 2, time=10, data="d")
    g.assoc_archive(1, "follows", 2)
    assert g.assoc_range(1, "follows") == []
    assert g.assoc_range(2, "followed_by") == []
    edge = g.assoc_edge(1, "follows", 2)
    assert edge is not None
    assert (edge.state, edge.time, edge.data) == ("archived", 10, "d")
    assert (g.assoc_count(1, "follows"), g.assoc_count(1, "follows", "archived")) == (0, 1)
    assert not g.assoc_contains(1, "follows", 2)
    g.assoc_negate(1, "follows", 2)
    assert g.assoc_contains(1, "follows", 2)  # FlockDB: negative edges are contained
    assert g.assoc_count(2, "followed_by", "negative") == 1
    g.assoc_add(1, "follows", 2)  # restore = add
    assert [(a.id2, a.time, a.data) for a in g.assoc_range(1, "follows")] == [(2, 10, "d")]
    g.assoc_delete(1, "follows", 2)
    removed = g.assoc_edge(2, "followed_by", 1)
    assert removed is not None
    assert removed.state == "removed"
    assert not g.assoc_contains(1, "follows", 2)
    assert g.assoc_edge(1, "follows", 99) is None
    assert g.check_counts() == []


def test_bad_state_names(follows: Graph) -> None:
    with pytest.raises(InvalidRequest, match="state must be one of"):
        follows.assoc_count(1, "follows", "hidden")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="state must be one of"):
        follows.select(1, "follows", states=["gone"])  # type: ignore[list-item]


# -- whole-node operations ----------------------------------------------------------


def test_new_edges_of_an_archived_node_are_written_archived(follows: Graph) -> None:
    g = follows
    g.node_archive(7, "follows", direction="both")
    assert g.drain(timeout=10)
    g.assoc_add(7, "follows", 8)  # from the archived node
    g.assoc_add(9, "follows", 7)  # to it
    assert g.assoc_range(7, "follows") == []
    assert g.assoc_range(8, "followed_by") == []
    assert g.assoc_range(9, "follows") == []
    assert g.assoc_count(9, "follows", "archived") == 1
    g.node_unarchive(7, "follows", direction="both")
    assert g.drain(timeout=10)
    assert [a.id2 for a in g.assoc_range(9, "follows")] == [7]
    assert [a.id2 for a in g.assoc_range(8, "followed_by")] == [7]


def test_unarchive_never_resurrects_removed_edges(follows: Graph) -> None:
    g = follows
    for n in range(2, 6):
        g.assoc_add(1, "follows", n, time=n)
    g.node_archive(1, "follows")
    assert g.drain(timeout=10)
    g.assoc_delete(1, "follows", 3)
    g.node_unarchive(1, "follows")
    assert g.drain(timeout=10)
    assert [a.id2 for a in g.assoc_range(1, "follows")] == [5, 4, 2]
    assert g.assoc_count(1, "follows", "removed") == 1


def test_negate_and_remove_all(follows: Graph) -> None:
    g = follows
    for n in range(2, 6):
        g.assoc_add(1, "follows", n, time=n)
    g.node_negate(1, "follows")
    assert g.drain(timeout=10)
    assert g.assoc_count(1, "follows", "negative") == 4
    assert g.assoc_contains(1, "follows", 4)
    g.node_unarchive(1, "follows")  # undoes the negate
    assert g.drain(timeout=10)
    assert g.assoc_count(1, "follows") == 4
    g.node_remove(1, "follows")
    assert g.drain(timeout=10)
    assert g.assoc_count(1, "follows", "removed") == 4
    assert g.assoc_count(3, "followed_by") == 0
    g.assoc_add(1, "follows", 9)  # a removed node's new edges are removed too
    assert g.assoc_count(1, "follows") == 0
    assert g.check_counts() == []


def test_symmetric_types_have_one_list_per_node(follows: Graph) -> None:
    g = follows
    g.assoc_add(1, "friend", 2)
    g.assoc_add(3, "friend", 1)
    g.node_archive(1, "friend", direction="both")
    assert g.drain(timeout=10)
    assert g.assoc_range(1, "friend") == []
    assert g.assoc_range(2, "friend") == []
    assert g.assoc_count(3, "friend", "archived") == 1


def test_node_operations_on_a_type_without_inverse(follows: Graph) -> None:
    follows.node_archive(1, "likes")
    with pytest.raises(InvalidRequest, match="no inverse"):
        follows.node_archive(1, "likes", direction="in")
    with pytest.raises(InvalidRequest, match="direction must be"):
        follows.node_archive(1, "follows", direction="sideways")  # type: ignore[arg-type]
    assert follows.node_state(1, "likes") == "archived"


def test_a_big_node_job_pages_through_and_survives_a_restart(stores: Stores) -> None:
    where = stores.location("g")
    g = stores.open(at=where, shards=4)
    g.define_assoc("follows", inverse="followed_by")
    g.bulk_load([(n, "follows", 1, n) for n in range(2, 4502)])  # 4,500 followers of 1
    g.engine.applier.stop()  # no background work: the job stays journaled, not done
    result = g.node_archive(1, "follows", direction="in")
    assert result.status == "queued"
    g.engine.journal.close()
    g.engine.backend.close()
    stores.forget(g)
    with stores.open(at=where) as again:  # the next open picks the job up
        assert again.drain(timeout=60)
        assert again.assoc_count(1, "followed_by") == 0
        assert again.assoc_count(1, "followed_by", "archived") == 4500
        assert again.assoc_count(77, "follows", "archived") == 1
        assert again.check_counts() == []


# -- set arithmetic -----------------------------------------------------------------


def test_single_terms_page_in_list_order(follows: Graph) -> None:
    g = follows
    for n, id2 in enumerate([5, 3, 9, 7]):
        g.assoc_add(1, "follows", id2, time=n)
    q = following(g, 1)
    assert q.page().items == [7, 9, 3, 5]  # newest first, not by id
    assert list(q) == [7, 9, 3, 5]
    first = q.page(limit=3)
    rest = q.page(first.next_cursor, limit=3)
    assert (rest.items, rest.next_cursor) == ([5], None)
    assert q.page(rest.prev_cursor, limit=3).items == [7, 9, 3]


def test_terms_with_states_and_id2_restrictions(follows: Graph) -> None:
    g = follows
    for n in range(2, 8):
        g.assoc_add(1, "follows", n, time=10 - n)
    g.assoc_archive(1, "follows", 3)
    g.assoc_negate(1, "follows", 4)
    assert g.select(1, "follows", states=["archived", "negative"]).page().items == [3, 4]
    both = g.select(1, "follows", states=["normal", "archived"])
    assert both.page().items == [2, 3, 5, 6, 7]
    assert both.count() == assocdb.Count(5, exact=True)
    only = g.select(1, "follows", id2s=[3, 5, 6, 99])
    assert only.page().items == [5, 6]
    assert only.count().value == 2
    assert (g.select(1, "follows") & only).page().items == [6, 5]


def test_cursor_rules_for_compound_queries(follows: Graph) -> None:
    g = follows
    for n in range(1, 8):
        g.assoc_add(100, "likes", n)
    q = g.select(100, "likes") - g.select(100, "likes", id2s=[4])
    assert q.page().items == [7, 6, 5, 3, 2, 1]
    start = q.page(limit=2)
    assert (start.items, start.prev_cursor) == ([7, 6], None)
    middle = q.page(start.next_cursor, limit=2)
    assert middle.items == [5, 3]
    end = q.page(middle.next_cursor, limit=2)
    assert (end.items, end.next_cursor) == ([2, 1], None)
    assert q.page(end.prev_cursor, limit=2).items == [5, 3]
    assert q.page(middle.prev_cursor, limit=2).items == [7, 6]
    empty = g.select(100, "likes") & g.select(200, "likes")
    assert empty.page() == assocdb.Page([], None, None)
    assert empty.count() == assocdb.Count(0, exact=True)


def test_a_warm_intersection_over_a_cached_small_side_runs_only_the_probe(follows: Graph) -> None:
    """The small side comes from tier 1 (its whole list is cached), and writes to it
    are read at once, as every cached read is."""
    g = follows
    g.bulk_load([(n, "follows", 1) for n in range(2, 400)])  # 1's followers: 2..399
    for n in (5, 7, 450, 398):
        g.assoc_add(1000, "follows", n)
    q = followers(g, 1) & following(g, 1000)
    for _ in range(3):  # the first reads fill the cache
        assert q.page(limit=2).items == [398, 7]
    seen: list[str] = []
    undo = g.trace(lambda shard, sql, seconds: seen.append(sql))
    first = q.page(limit=2)
    rest = q.page(first.next_cursor, limit=2)
    undo()
    assert (first.items, rest.items, rest.next_cursor) == ([398, 7], [5], None)
    assert len(seen) == 2, seen
    assert all(" IN (" in sql and "LIMIT" in sql for sql in seen), seen
    assert q.page(rest.prev_cursor, limit=2).items == [398, 7]
    g.assoc_add(1000, "follows", 399)
    assert q.page(limit=2).items == [399, 398]
    g.assoc_delete(1000, "follows", 398)
    g.assoc_archive(1000, "follows", 7)
    assert q.page().items == [399, 5]
    assert (followers(g, 1) & g.select(1000, "follows", states=["archived"])).page().items == [7]


def test_an_intersection_page_gathers_survivors_over_several_chunks(follows: Graph) -> None:
    """A page takes whole probes' survivors until it has enough, across the small
    side's chunks (500 ids each), and cuts them at the page's end, both ways."""
    g = follows
    g.bulk_load([(7000, "follows", n) for n in range(1, 1301)])  # 7000 follows 1..1300
    g.bulk_load([(n, "follows", 8000) for n in range(3, 3001, 3)])  # followers: 3, 6 .. 3000
    q = following(g, 7000) & followers(g, 8000)
    both = list(range(1299, 2, -3))  # 433 ids, descending
    first = q.page(limit=300)
    assert (first.items, first.prev_cursor) == (both[:300], None)
    second = q.page(first.next_cursor, limit=300)
    assert (second.items, second.next_cursor) == (both[300:], None)
    assert q.page(second.prev_cursor, limit=300).items == both[:300]
    assert q.page(second.prev_cursor, limit=7).items == both[293:300]
    assert list(q) == both
    assert q.count() == assocdb.Count(433, exact=True)


def test_a_query_pages_by_its_type_limit_as_it_is_now(follows: Graph) -> None:
    """Terms are resolved against the schema once and reused by later pages, until
    the schema changes: a type's new limit holds for a query made before it."""
    g = follows
    g.bulk_load([(n, "follows", 900) for n in range(1, 21)])
    g.bulk_load([(901, "follows", n) for n in range(1, 21)])
    q = followers(g, 900) & following(g, 901)
    assert len(q.page(limit=100).items) == 20
    g.define_assoc("follows", inverse="followed_by", limit=5)
    assert q.page(limit=100).items == [20, 19, 18, 17, 16]
    assert len(followers(g, 900).page(limit=100).items) == 5


def test_bad_queries_are_refused(follows: Graph) -> None:
    g = follows
    q = following(g, 1)
    with pytest.raises(UnknownType):
        g.select(1, "folows")
    with pytest.raises(InvalidRequest, match="at least one other query"):
        q.intersect()
    with pytest.raises(InvalidRequest, match="takes queries"):
        q.union(3)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="limit must be"):
        q.page(limit=0)
    with pytest.raises(InvalidRequest, match="no inverse"):
        g.select(1, "likes", incoming=True)
    g.assoc_add(1, "follows", 2)
    g.assoc_add(1, "follows", 3)
    cursor = q.page(limit=1).next_cursor
    with pytest.raises(InvalidCursor):
        followers(g, 1).page(cursor)
    with pytest.raises(InvalidCursor):
        (q & followers(g, 1)).page(cursor)


def test_counts_of_big_compounds_are_flagged_as_estimates(follows: Graph) -> None:
    g = follows
    g.bulk_load(
        [(1, "follows", n, n) for n in range(2, 12_003)]
        + [(2, "follows", n, n) for n in range(2, 12_003)]
    )
    both = g.select(1, "follows") & g.select(2, "follows")
    assert both.count() == assocdb.Count(12_001, exact=False)  # an upper bound, said to be one
    small = g.select(1, "follows") & g.select(2, "follows", id2s=[5, 6, 70_000])
    assert small.count() == assocdb.Count(2, exact=True)


def test_the_checker_finds_and_repairs_hanging_edges(follows: Graph) -> None:
    g = follows
    g.assoc_add(1, "follows", 2, time=5)
    g.assoc_add(3, "follows", 4, time=6)
    g.assoc_add(5, "friend", 6, time=7)
    backend = g.engine.backend
    # the inverse leg of one edge never landed; another's is stale
    backend.apply(
        assocdb.core.ids.shard_of(2, g.shards), [(2, 2, 1, 3, 0, 1, None)], ()
    )  # older tombstone: ignored
    from assocdb.core.ops import Rows, legs

    missing = (1, 1, 9, 0, 8, 10**15, None)  # follows 1 -> 9, no followed_by row
    for leg in legs(Rows(edges=[missing]), g.shards):
        backend.apply(leg.shard, leg.edges, leg.objects)
    found = g.check_inverses()
    assert [(h.edge.id1, h.edge.id2, h.mirror) for h in found] == [(1, 9, None)]
    g.check_inverses(repair=True)
    assert g.check_inverses() == []
    assert [a.id2 for a in g.assoc_range(9, "followed_by")] == [1]
    assert g.check_counts() == []


def test_unarchive_of_a_node_never_archived_keeps_removed_edges_removed(follows: Graph) -> None:
    """Issue 35's reading of FlockFixRegressionSpec: unarchive restores archived edges,
    never removed ones (a removed follow does not come back with a restored account)."""
    g = follows
    for id2 in range(100, 110):
        g.assoc_add(1, "follows", id2, time=1_000 + id2)
    for id2 in range(101, 110, 2):
        g.assoc_delete(1, "follows", id2)
    g.assoc_archive(1, "follows", 100)
    g.node_unarchive(1, "follows", direction="both")
    assert g.drain(timeout=10)
    assert [a.id2 for a in g.assoc_range(1, "follows")] == [108, 106, 104, 102, 100]
    assert g.assoc_count(1, "follows", "removed") == 5
    assert [a.id2 for a in g.assoc_range(101, "followed_by")] == []
