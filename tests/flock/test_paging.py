"""FlockDB's paging rule (`flock/paging.py`), and paging by position (`flock/select.py`)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import assocdb
from assocdb.flock.graphs import GraphTable, parse_table
from assocdb.flock.paging import Window, cursors, window
from assocdb.flock.select import FlockTerm, Selector


def ident(x: int) -> int:
    return x


def test_window_is_flockdbs_result_window() -> None:
    data = [9, 7, 5, 3, 1]
    assert window(data, ident, 2, -1) == Window(0, 2, True, False)
    assert window(data, ident, 2, 7) == Window(2, 4, True, True)  # 7 itself is "back"
    assert window(data, ident, 2, 3) == Window(4, 5, False, True)
    assert window(data, ident, 2, -5) == Window(0, 2, True, False)  # the two above 5
    assert window(data, ident, 1, -5) == Window(1, 2, True, True)
    assert window(data, ident, 10, 0) == Window(5, 5, False, True)
    assert cursors(None, None, True, True) == (0, 0)
    assert cursors(9, 7, True, False) == (7, 0)
    assert cursors(5, 3, True, True) == (3, -5)


@given(
    st.lists(st.integers(2, 10**6), unique=True, max_size=40).map(sorted),
    st.integers(1, 7),
)
def test_pages_cover_a_list_once_each_way(positions: list[int], count: int) -> None:
    data = positions[::-1]
    seen, cursor, last_prev = [], -1, 0
    while True:
        w = window(data, ident, count, cursor)
        page = data[w.start : w.stop]
        seen += page
        nxt, prev = cursors(page[0] if page else None, page[-1] if page else None, *w[2:])
        last_prev = prev
        if nxt == 0:
            break
        cursor = nxt
    assert seen == data
    back = list(page)
    cursor = last_prev
    while cursor != 0:
        w = window(data, ident, count, cursor)
        page = data[w.start : w.stop]
        back = page + back
        cursor = cursors(page[0], page[-1], *w[2:])[1]
    assert back == data


@pytest.mark.parametrize("seed", range(6))
def test_paging_by_position_with_ties_in_process(tmp_path, seed: int) -> None:  # type: ignore[no-untyped-def]
    rnd = random.Random(seed)
    with assocdb.open(tmp_path / "g", shards=2) as g:
        g.define_assoc("follows", inverse="followed_by", limit=50)
        g.bulk_load([(1, "follows", 100 + n, rnd.choice([20, 30, 40, 50])) for n in range(60)])
        select = Selector(g, GraphTable(g, parse_table(["7=follows"])))
        term = select.term(FlockTerm(1, 7, True, None, None))
        everyone = [a.id2 for p in g.assoc_pages(1, "follows") for a in p.items]
        count = rnd.randint(1, 9)
        seen, cursor, pages = [], -1, []
        while True:
            page = select.page(term, count, cursor)
            pages.append(page)
            seen += page.items
            if page.next_cursor == 0:
                break
            cursor = page.next_cursor
        assert seen == everyone
        back, cursor = list(pages[-1].items), pages[-1].prev_cursor
        while cursor != 0:
            page = select.page(term, count, cursor)
            back = page.items + back
            cursor = page.prev_cursor
        assert back == everyone
        g.bulk_load([(2, "follows", 100 + n, 20) for n in range(60)])  # 60 share one time
        crowded = select.term(FlockTerm(2, 7, True, None, None))
        with pytest.raises(assocdb.InvalidRequest, match="share position 20"):
            select.page(crowded, 10, -1)
