"""Random nested queries over random graphs, against Python set arithmetic."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import assocdb
from assocdb import Graph, Query
from assocdb.core.records import STATE_NAMES
from tests.support.helpers import all_edges

NODES = st.integers(1, 6)
STATES = st.sampled_from(["normal", "negative", "archived", "removed"])

edges = st.lists(
    st.tuples(NODES, st.sampled_from(["follows", "likes"]), NODES, st.integers(0, 5), STATES),
    max_size=40,
)


@st.composite
def queries(draw: Any, depth: int = 0) -> Any:
    """A query description: ("term", …) or (op, left, right)."""
    if depth >= 3 or (depth > 0 and draw(st.integers(0, 2)) == 0):
        node = draw(NODES)
        atype = draw(st.sampled_from(["follows", "likes"]))
        incoming = atype == "follows" and draw(st.booleans())
        states = draw(st.lists(STATES, min_size=1, max_size=2, unique=True))
        only = draw(st.none() | st.lists(NODES, max_size=4))
        return ("term", node, atype, incoming, tuple(states), only)
    op = draw(st.sampled_from(["&", "|", "-"]))
    return (op, draw(queries(depth + 1)), draw(queries(depth + 1)))


def build(g: Graph, spec: Any) -> Query:
    if spec[0] == "term":
        _, node, atype, incoming, states, only = spec
        return g.select(node, atype, incoming=incoming, states=states, id2s=only)
    left, right = build(g, spec[1]), build(g, spec[2])
    return {"&": left & right, "|": left | right, "-": left - right}[spec[0]]


def expected(g: Graph, spec: Any, rows: list[Any]) -> list[int]:
    """The result computed from the stored rows with Python sets, in result order."""
    if spec[0] == "term":
        _, node, atype, incoming, states, only = spec
        name = "followed_by" if incoming else atype
        type_id = g.schema.assoc_type(name).id
        codes = {STATE_NAMES.index(s) for s in states}
        hits = [
            (r.time, r.id2)
            for r in rows
            if r.id1 == node
            and r.atype == type_id
            and r.state in codes
            and (only is None or r.id2 in only)
        ]
        return [id2 for _, id2 in sorted(hits, reverse=True)]
    left = set(expected(g, spec[1], rows))
    right = set(expected(g, spec[2], rows))
    result = {"&": left & right, "|": left | right, "-": left - right}[spec[0]]
    return sorted(result, reverse=True)


def walk(q: Query, limit: int) -> tuple[list[int], list[list[int]]]:
    """All ids page by page forward, and the pages again walking back."""
    pages, cursor, last = [], None, None
    while True:
        last = q.page(cursor, limit)
        pages.append(last.items)
        if last.next_cursor is None:
            break
        cursor = last.next_cursor
    back, prev = [], last.prev_cursor
    while prev is not None:
        page = q.page(prev, limit)
        back.append(page.items)
        prev = page.prev_cursor
    return [i for p in pages for i in p], [*back[::-1], pages[-1]]


def write(g: Graph, writes: list[Any]) -> None:
    for id1, atype, id2, time, state in writes:
        g.assoc_add(id1, atype, id2, time=time)
        if state == "archived":
            g.assoc_archive(id1, atype, id2)
        elif state == "negative":
            g.assoc_negate(id1, atype, id2)
        elif state == "removed":
            g.assoc_delete(id1, atype, id2)


def check(g: Graph, specs: list[Any], limit: int) -> None:
    rows = all_edges(g)
    for spec in specs:
        q = build(g, spec)
        want = expected(g, spec, rows)
        assert q.page(limit=100).items == want, spec
        forward, pages = walk(q, limit)
        assert forward == want, spec
        if len(pages) > 1:  # walking back gives the same pages
            assert [i for p in pages for i in p] == want, spec
        count = q.count()
        assert count.value == len(want) if count.exact else count.value >= len(want), spec


@settings(max_examples=100, deadline=None)
@given(edges, st.lists(queries(), min_size=1, max_size=4), st.integers(1, 4), edges)
def test_queries_match_python_sets(
    writes: list[Any], specs: list[Any], limit: int, later: list[Any]
) -> None:
    """Also after more writes: lists the queries read from the cache are read anew."""
    directory = tempfile.mkdtemp(prefix="assocdb-q-")
    try:
        g = assocdb.open(directory, shards=3)
        g.define_assoc("follows", inverse="followed_by")
        g.define_assoc("likes")
        write(g, writes)
        check(g, specs, limit)
        check(g, specs, limit)  # the lists read twice are cached now
        write(g, later)
        check(g, specs, limit)
        g.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_nested_operands_are_probed_correctly(tmp_path: Any) -> None:
    """Compounds as probed (not walked) operands: the smaller side drives, the rest is probed."""
    g = assocdb.open(tmp_path / "g", shards=3)
    g.define_assoc("likes")
    g.bulk_load([(1, "likes", n) for n in range(1, 200)])  # A: 1..199
    g.bulk_load([(2, "likes", n) for n in range(1, 200, 2)])  # B: odd
    g.bulk_load([(3, "likes", n) for n in (4, 5, 6, 7, 500)])  # X: small
    a, b, x = g.select(1, "likes"), g.select(2, "likes"), g.select(3, "likes")
    assert (x & (a - b)).page().items == [6, 4]
    assert (x - (a - b)).page().items == [500, 7, 5]
    assert (x & (a & b)).page().items == [7, 5]
    assert (x - (a | b)).page().items == [500]
    assert (x & (b | g.select(3, "likes", id2s=[500]))).page().items == [500, 7, 5]
    g.close()


@pytest.mark.parametrize("cached", [False, True])
def test_a_difference_pages_past_its_first_small_chunk(tmp_path: Any, cached: bool) -> None:
    """A page of a difference reads a first chunk of about twice its limit, then full
    chunks: pages whose survivors are sparse, or span chunks, are the same either way."""
    g = assocdb.open(tmp_path / "g", shards=4, cache=assocdb.CacheConfig() if cached else None)
    g.define_assoc("follows", inverse="followed_by")
    g.bulk_load([(n, "follows", 1, n) for n in range(2, 1302)])  # 1,300 followers of 1
    g.bulk_load([(1, "follows", n, n) for n in range(2, 1302) if n % 7 and n < 1200])
    want = sorted((n for n in range(2, 1302) if not n % 7 or n >= 1200), reverse=True)
    q = g.select(1, "follows", incoming=True) - g.select(1, "follows")
    for limit in (1, 10, 100, 600):
        for _ in range(2):  # (cold, then what a cache kept)
            got = [i for page in q.pages(limit) for i in page.items]
            assert got == want, limit
    assert q.page(limit=5).items == want[:5]
    g.close()


def test_a_small_list_a_set_query_fills_answers_as_the_shard(tmp_path: Any) -> None:
    """A set query's small operand is filled into the cache on its second miss and its
    ids taken from the fill's rows: the same pages as without a cache, before and
    after writes."""
    g = assocdb.open(tmp_path / "g", shards=4, cache=assocdb.CacheConfig())
    plain = assocdb.open(tmp_path / "g", cache=None)
    g.define_assoc("follows", inverse="followed_by")
    g.bulk_load([(n, "follows", 1, n) for n in range(2, 200)])
    g.bulk_load([(1, "follows", n, n, {"n": n}) for n in range(2, 200) if n % 3])
    g.bulk_load([(5, "follows", n, n) for n in range(2, 300, 2)])

    def pages(h: Graph) -> list[list[int]]:
        back = h.select(1, "follows", incoming=True) - h.select(1, "follows")
        mutual = h.select(1, "follows") & h.select(5, "follows")
        return [back.page(limit=50).items, mutual.page(limit=50).items]

    for _ in range(3):  # a miss, a fill, a hit
        assert pages(g) == pages(plain)
    g.assoc_add(1, "follows", 6)
    g.assoc_delete(5, "follows", 4)
    for _ in range(2):
        assert pages(g) == pages(plain)
    plain.close()
    g.close()
