"""Many-list terms (`g.select([ids], atype)`, `g.select(query, atype)`): the union of one
term per node, as pages both ways, counts and operands of every operation."""

from __future__ import annotations

import random
import shutil
import tempfile
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import assocdb
from assocdb import Graph, InvalidCursor, InvalidRequest, Query
from assocdb.client.wire import from_spec, to_spec
from assocdb.core.query import MAX_NODES, Lists
from tests.api.test_query_properties import STATES, queries, walk, write
from tests.api.test_query_properties import build as build_term_query
from tests.api.test_query_properties import edges as random_edges

NODES = st.integers(1, 8)


def union_of_terms(g: Graph, nodes: list[int], atype: str, **kw: Any) -> Query | None:
    """What a many-list term stands for, built the long way."""
    terms = [g.select(n, atype, **kw) for n in sorted(set(nodes))]
    if not terms:
        return None
    return terms[0].union(*terms[1:]) if len(terms) > 1 else terms[0]


def ids_of(q: Query | None) -> list[int]:
    """Every id of `q`, descending by id (a union's order)."""
    return [] if q is None else sorted(set(q), reverse=True)


@st.composite
def many(draw: Any) -> Any:
    """A many-list term: ("lists", nodes, atype, incoming, states, only), its nodes ids or
    (one time in three) a query of them."""
    atype = draw(st.sampled_from(["follows", "likes"]))
    incoming = atype == "follows" and draw(st.booleans())
    states = tuple(draw(st.lists(STATES, min_size=1, max_size=2, unique=True)))
    only = draw(st.none() | st.lists(NODES, max_size=4))
    nodes = draw(st.lists(NODES, max_size=6) | queries(2))
    return ("lists", nodes, atype, incoming, states, only)


@st.composite
def specs(draw: Any) -> Any:
    """A many-list term alone or as an operand of a term or query."""
    lists = draw(many())
    if draw(st.booleans()):
        return lists
    other = draw(queries(2))
    op = draw(st.sampled_from(["&", "|", "-", "r-"]))
    return (op, lists, other)


def build(g: Graph, spec: Any) -> Query:
    if spec[0] == "lists":
        _, nodes, atype, incoming, states, only = spec
        of = nodes if isinstance(nodes, list) else build_term_query(g, nodes)
        return g.select(of, atype, incoming=incoming, states=states, id2s=only)
    left, right = build(g, spec[1]), build_term_query(g, spec[2])
    if spec[0] == "r-":
        return right - left
    return {"&": left & right, "|": left | right, "-": left - right}[spec[0]]


def reference(g: Graph, spec: Any) -> list[int]:
    """The ids of the same query with one term per node, read through the graph."""
    if spec[0] == "lists":
        _, nodes, atype, incoming, states, only = spec
        ids = nodes if isinstance(nodes, list) else list(build_term_query(g, nodes))
        kw = {"incoming": incoming, "states": states, "id2s": only}
        return ids_of(union_of_terms(g, ids, atype, **kw))
    left, right = set(reference(g, spec[1])), set(build_term_query(g, spec[2]))
    found = {"&": left & right, "|": left | right, "-": left - right, "r-": right - left}
    return sorted(found[spec[0]], reverse=True)


def check(g: Graph, specs: list[Any], limit: int) -> None:
    for spec in specs:
        q, want = build(g, spec), reference(g, spec)
        assert q.page(limit=100).items == want[:100], spec
        forward, pages = walk(q, limit)
        assert forward == want, spec
        assert [i for p in pages for i in p] == want, spec  # walking back: the same pages
        count = q.count()
        assert count.value == len(want) if count.exact else count.value >= len(want), spec


@pytest.mark.parametrize("cached", [False, True])
@settings(max_examples=60, deadline=None)
@given(random_edges, st.lists(specs(), min_size=1, max_size=3), st.integers(1, 4), random_edges)
def test_a_many_list_term_is_the_union_of_its_terms(
    cached: bool, writes: list[Any], specs: list[Any], limit: int, later: list[Any]
) -> None:
    """On random graphs, with the cache and without; again after more writes."""
    directory = tempfile.mkdtemp(prefix="assocdb-lists-")
    try:
        g = assocdb.open(directory, shards=3, cache=assocdb.CacheConfig() if cached else None)
        g.define_assoc("follows", inverse="followed_by")
        g.define_assoc("likes")
        write(g, writes)
        check(g, specs, limit)
        check(g, specs, limit)  # (lists the first reads cached)
        write(g, later)
        check(g, specs, limit)
        g.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_many_lists_on_every_backend(graph: Graph) -> None:
    """A random graph of long lists on the backend under test: pages past many chunks
    (the stream of an operand in a difference reads each shard 500 ids at a time)."""
    rnd = random.Random(43)
    rows = {(a, "follows", rnd.randrange(1, 3000)) for a in range(1, 41) for _ in range(200)}
    graph.bulk_load(sorted(rows))
    graph.bulk_load([(1000, "follows", n) for n in range(1, 3000, 3)])
    nodes = list(range(1, 41, 2))
    reach = graph.select(nodes, "follows")
    want = ids_of(union_of_terms(graph, nodes, "follows"))
    assert len(want) > 2000
    assert reach.count().value == len(want)
    for limit in (7, 250, 1000):
        assert [i for p in reach.pages(limit) for i in p.items] == want
    mine = set(graph.select(1000, "follows"))
    for limit in (7, 500):  # (a first chunk of 2 * limit + 1 per shard, then 500)
        pages = (reach - graph.select(1000, "follows")).pages(limit)
        assert [i for p in pages for i in p.items] == [i for i in want if i not in mine]
    assert list(graph.select(1000, "follows") - reach) == sorted(mine - set(want), reverse=True)
    assert list(reach & graph.select(1000, "follows")) == [i for i in want if i in mine]
    two_hop = graph.select(graph.select(7, "follows"), "follows")
    assert list(two_hop) == ids_of(
        union_of_terms(graph, list(graph.select(7, "follows")), "follows")
    )
    back = graph.select(nodes, "follows", incoming=True)
    assert list(back) == ids_of(union_of_terms(graph, nodes, "follows", incoming=True))


def test_a_many_list_term_and_its_terms_share_a_union() -> None:
    """A union of a many-list term and terms of its type is one plan: the same ids."""
    g = assocdb.open(tempfile.mkdtemp(prefix="assocdb-lists-"), shards=4)
    g.define_assoc("follows", inverse="followed_by")
    g.bulk_load([(a, "follows", b) for a in range(1, 20) for b in range(a, a + 30)])
    q = g.select([1, 2, 3], "follows") | g.select(10, "follows") | g.select([3, 15], "follows")
    want = ids_of(union_of_terms(g, [1, 2, 3, 10, 15], "follows"))
    assert list(q) == want
    assert q.count().value == len(want)
    g.close()


def test_empty_and_single_lists(graph: Graph) -> None:
    graph.assoc_add(1, "follows", 5)
    graph.assoc_add(1, "follows", 9, time=1)
    assert graph.select([], "follows").page().items == []
    assert graph.select([], "follows").count() == assocdb.Count(0, exact=True)
    assert graph.select(graph.select(2, "follows"), "follows").page().items == []
    # A many-list term pages by id, like any union, even of one list.
    assert graph.select([1], "follows").page().items == [9, 5]
    assert graph.select(1, "follows").page().items == [5, 9]
    assert graph.select([1, 1, 2], "follows").scope == graph.select([2, 1], "follows").scope


def test_cursors_are_bound_to_the_many_list_term(graph: Graph) -> None:
    graph.bulk_load([(a, "follows", b) for a in (1, 2, 3) for b in range(1, 20)])
    page = graph.select([1, 2], "follows").page(limit=3)
    assert graph.select([1, 2], "follows").page(page.next_cursor, limit=3).items == [16, 15, 14]
    for other in (graph.select([1, 3], "follows"), graph.select(1, "follows")):
        with pytest.raises(InvalidCursor):
            other.page(page.next_cursor, limit=3)


def test_bad_nodes_are_refused(graph: Graph) -> None:
    for bad in ([0], [1, "2"], [2**63], [[1]], "12", b"1", 1.5, None):
        with pytest.raises(InvalidRequest):
            graph.select(bad, "follows")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest):
        graph.select(list(range(1, MAX_NODES + 2)), "follows")
    with pytest.raises(InvalidRequest):
        graph.select([1, 2], "nope")
    with pytest.raises(InvalidRequest):
        graph.select([1, 2], "blocks", incoming=True)  # no inverse


def test_a_query_of_nodes_must_be_of_the_graph_and_not_too_long(tmp_path: Any) -> None:
    g = assocdb.open(tmp_path / "a", shards=2)
    h = assocdb.open(tmp_path / "b", shards=2)
    for x in (g, h):
        x.define_assoc("follows")
    with pytest.raises(InvalidRequest):
        g.select(h.select(1, "follows"), "follows")
    g.bulk_load([(1, "follows", n) for n in range(1, MAX_NODES + 2)])
    with pytest.raises(InvalidRequest):
        g.select(g.select(1, "follows"), "follows").count()
    g.close()
    h.close()


def test_the_wire_form_round_trips() -> None:
    g = assocdb.open(tempfile.mkdtemp(prefix="assocdb-lists-"), shards=2)
    g.define_assoc("follows", inverse="followed_by")
    for q in (
        g.select([3, 1, 2], "follows", incoming=True, states=["normal", "archived"], id2s=[4]),
        g.select(g.select(1, "follows") - g.select([2, 3], "follows"), "follows"),
    ):
        back = from_spec(to_spec(q), g)
        assert isinstance(back, Lists)
        assert back.scope == q.scope
    g.close()
