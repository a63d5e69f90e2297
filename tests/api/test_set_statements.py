"""Set queries answered in few statements (`api.queries._few_statements`,
`storage.sqlsets`): two lists of one shard joined in one statement, a union of many
lists in one statement per shard, a cross-shard intersection whose first operand
is short as a read and a probe. Random graphs against Python sets, on every
backend, with the cache off and on, and the statement counts that are the point."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from assocdb import CacheConfig, Count, Graph, Query
from assocdb.core.ids import shard_of
from assocdb.core.records import STATE_NAMES
from tests.conftest import OpenGraph
from tests.support.helpers import all_edges

NODES = range(1, 25)
STATES = ("normal", "normal", "normal", "archived", "negative", "removed")


def random_writes(g: Graph, rnd: random.Random, n: int) -> None:
    for _ in range(n):
        id1, id2 = rnd.choice(NODES), rnd.choice(NODES)
        g.assoc_add(id1, "follows", id2, time=rnd.randrange(5))
        state = rnd.choice(STATES)
        if state == "archived":
            g.assoc_archive(id1, "follows", id2)
        elif state == "negative":
            g.assoc_negate(id1, "follows", id2)
        elif state == "removed":
            g.assoc_delete(id1, "follows", id2)


class Model:
    """The stored rows as Python sets: a term's id2s by (node, incoming, states)."""

    def __init__(self, g: Graph) -> None:
        self.rows = all_edges(g)
        self.ids = {g.schema.assoc_type(n).id: n for n in ("follows", "followed_by")}

    def term(self, node: int, incoming: bool, states: tuple[str, ...]) -> set[int]:
        name = "followed_by" if incoming else "follows"
        codes = {STATE_NAMES.index(s) for s in states}
        return {
            r.id2
            for r in self.rows
            if r.id1 == node and self.ids.get(r.atype) == name and r.state in codes
        }


def walk(q: Query, limit: int) -> list[int]:
    """Every id page by page forward; walking back from the end gives the same pages."""
    pages, cursor = [], None
    while True:
        page = q.page(cursor, limit)
        pages.append(page.items)
        assert len(pages) <= 200, "paging does not end"  # (the graphs here are smaller)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    back, prev = [page.items], page.prev_cursor
    while prev is not None:
        earlier = q.page(prev, limit)
        back.append(earlier.items)
        prev = earlier.prev_cursor
    assert back[::-1] == pages
    return [i for p in pages for i in p]


def states(rnd: random.Random) -> tuple[str, ...]:
    return rnd.choice([("normal",), ("normal",), ("archived",), ("normal", "negative")])


@pytest.mark.parametrize("cached", [False, True])
def test_set_queries_match_python_sets(open_graph: OpenGraph, cached: bool) -> None:
    """Differences and intersections of two lists (one shard or two), unions of many,
    paged with small limits both ways, before and after more writes."""
    g = open_graph(shards=3, cache=CacheConfig() if cached else None)
    g.define_assoc("follows", inverse="followed_by")
    rnd = random.Random(43 + cached)
    for _ in range(3):
        random_writes(g, rnd, 150)
        model = Model(g)
        for _ in range(40):
            a, b = rnd.choice(NODES), rnd.choice(NODES)
            sa, sb, incoming = states(rnd), states(rnd), rnd.random() < 0.5
            left = g.select(a, "follows", incoming=incoming, states=sa)
            right = g.select(b, "follows", states=sb)
            want_l, want_r = model.term(a, incoming, sa), model.term(b, False, sb)
            limit = rnd.choice([1, 2, 3, 100])
            assert walk(left - right, limit) == sorted(want_l - want_r, reverse=True)
            assert walk(left & right, limit) == sorted(want_l & want_r, reverse=True)
            assert walk(right & left, limit) == sorted(want_l & want_r, reverse=True)
            assert (left - right).count() == Count(len(want_l - want_r), exact=True)
            assert (right & left).count() == Count(len(want_l & want_r), exact=True)
            nodes = rnd.sample(NODES, rnd.randint(1, 12))
            terms = [g.select(n, "follows", states=sa) for n in nodes]
            union = terms[0].union(*terms[1:]) if len(terms) > 1 else terms[0]
            want = set().union(*(model.term(n, False, sa) for n in nodes))
            if len(terms) > 1:
                assert walk(union, limit) == sorted(want, reverse=True)
            assert sorted(walk(union, 1000)) == sorted(want)
            assert union.count() == Count(len(want), exact=True)


def statements(g: Graph, read: Callable[[], Any]) -> tuple[Any, int]:
    """What `read` returns, and how many statements it ran."""
    ran: list[str] = []
    stop = g.trace(lambda shard, sql, seconds: ran.append(sql))
    try:
        return read(), len(ran)
    finally:
        stop()


def test_set_pages_take_the_statements_a_hand_written_query_would(
    open_graph: OpenGraph,
) -> None:
    g = open_graph(shards=4, cache=None)
    g.define_assoc("follows", inverse="followed_by")
    # 1 follows 2..40; 41..80 follow 1; 1 follows back the even ones of them.
    g.bulk_load([(1, "follows", n, n) for n in range(2, 41)])
    g.bulk_load([(n, "follows", 1, n) for n in range(41, 81)])
    g.bulk_load([(1, "follows", n, n) for n in range(42, 81, 2)])
    # Not followed back: both lists on 1's shard, one statement.
    back = g.select(1, "follows", incoming=True) - g.select(1, "follows")
    page, ran = statements(g, lambda: back.page(limit=10))
    assert (page.items, ran) == (list(range(79, 60, -2)), 1)
    assert walk(back, 7) == list(range(79, 40, -2))
    # Mutual followees of 1 and a node on another shard with a short list: a read of
    # the first operand and a probe of the other.
    other = next(n for n in range(81, 200) if shard_of(n, 4) != shard_of(1, 4))
    g.bulk_load([(other, "follows", n, n) for n in range(30, 50)])
    mutual = g.select(other, "follows") & g.select(1, "follows")
    page, ran = statements(g, lambda: mutual.page(limit=100))
    assert (page.items, ran) == ([48, 46, 44, 42, *range(40, 29, -1)], 2)
    # The first operand long (59 ids, a page of 10 reads 21) and the other short: a
    # read of each and a probe of the first, no count read (the counts' plan took 5).
    mutual = g.select(1, "follows") & g.select(other, "follows")
    page, ran = statements(g, lambda: mutual.page(limit=10))
    assert (page.items, ran) == ([48, 46, 44, 42, *range(40, 34, -1)], 3)
    assert walk(mutual, 10) == [48, 46, 44, 42, *range(40, 29, -1)]
    # Mutual followees of 1 and a node on its shard with a short list: its ids read,
    # then probed in 1's list (the counts to choose a side were two statements more).
    near = next(n for n in range(81, 200) if shard_of(n, 4) == shard_of(1, 4))
    g.bulk_load([(near, "follows", n, n) for n in range(36, 46)])
    mutual = g.select(near, "follows") & g.select(1, "follows")
    page, ran = statements(g, lambda: mutual.page(limit=100))
    assert (page.items, ran) == ([44, 42, *range(40, 35, -1)], 2)
    # A union of the lists of 1's followees: one statement per shard they are on.
    followees = g.select(1, "follows").page(limit=100).items
    terms = [g.select(n, "follows") for n in followees]
    reach = terms[0].union(*terms[1:])
    page, ran = statements(g, lambda: reach.page(limit=1000))
    assert page.items == [1]
    assert page.next_cursor is None
    assert ran == len({shard_of(n, 4) for n in followees})


def test_a_count_of_a_union_of_lists_is_exact_in_one_statement_per_shard(
    open_graph: OpenGraph,
) -> None:
    """A two-hop reach's count: the union's ids read as a page's are, in no order, one
    statement per shard and no count read; exact while the ids are few, however
    much the lists overlap (their counts' sum was the bound: 2 x 6,000 > 10,000 was
    an estimate), and an estimate beyond."""
    g = open_graph(shards=4, cache=None)
    g.define_assoc("follows", inverse="followed_by")
    nodes = list(range(1, 13))
    g.bulk_load([(n, "follows", 100 + n * m, 0) for n in nodes for m in range(1, 40)])
    g.assoc_delete(1, "follows", 101)
    g.assoc_archive(2, "follows", 102)
    reach = g.select(nodes[0], "follows").union(*(g.select(n, "follows") for n in nodes[1:]))
    want = {100 + n * m for n in nodes for m in range(1, 40)} - {101}
    count, ran = statements(g, reach.count)
    assert count == Count(len(want), exact=True)
    assert ran == len({shard_of(n, 4) for n in nodes})
    # Two lists of the same 6,000 ids: exact; three lists of 4,000 ids each: over 10,000.
    g.bulk_load([(n, "follows", 10_000 + i, 0) for n in (50, 51) for i in range(6000)])
    same = g.select(50, "follows") | g.select(51, "follows")
    assert same.count() == Count(6000, exact=True)
    g.bulk_load(
        [(60 + k, "follows", 20_000 + k * 4000 + i, 0) for k in range(3) for i in range(4000)]
    )
    many = g.select(60, "follows").union(g.select(61, "follows"), g.select(62, "follows"))
    assert many.count() == Count(12_000, exact=False)
