"""A write to a list brings its kept answers to "the newest N edges" up to date
(`cache.decoded.patched_range`) instead of dropping them: the read after the
write is a dict lookup, and it must still equal what an uncached read says.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import assocdb
from assocdb import CacheConfig, Graph
from tests.support.helpers import statements

PREFIX = 12  # cached edges per list: some limits below reach past it
LIMITS = (1, 5, 12, 20)
DATAS = (None, "s", 7, [1, 2])  # an array is kept as JSON: such answers are never shared

edge = st.integers(min_value=1, max_value=25)
change = st.one_of(
    st.tuples(
        st.just("add"),
        edge,
        st.integers(min_value=0, max_value=6),  # few times: ties ordered by id2
        st.sampled_from(DATAS),
    ),
    st.tuples(st.sampled_from(("delete", "archive", "negate")), edge),
)


def open_pair(directory: Path) -> tuple[Graph, Graph]:
    cached = assocdb.open(
        directory / "g",
        shards=2,
        cache=CacheConfig(prefix=PREFIX, admit_after=1, max_age=3600),
    )
    cached.define_assoc("likes", inverse="liked_by")
    plain = assocdb.open(directory / "g", cache=None)
    return cached, plain


def apply(g: Graph, step: tuple[Any, ...]) -> None:
    if step[0] == "add":
        _, id2, time, data = step
        g.assoc_add(1, "likes", id2, time=time, data=data)
    else:
        getattr(g, f"assoc_{step[0]}")(1, "likes", step[1])


@settings(max_examples=60, deadline=None)
@given(
    start=st.lists(st.tuples(edge, st.integers(0, 6), st.sampled_from(DATAS)), max_size=30),
    steps=st.lists(change, min_size=1, max_size=25),
)
def test_every_read_after_a_write_equals_the_uncached_read(
    start: list[tuple[int, int, Any]], steps: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        cached, plain = open_pair(Path(directory))
        with cached, plain:
            for id2, time, data in start:
                cached.assoc_add(1, "likes", id2, time=time, data=data)
            for limit in LIMITS:  # fills the entry, then keeps each answer
                cached.assoc_range(1, "likes", 0, limit)
                cached.assoc_range(1, "likes", 0, limit)
            for step in steps:
                apply(cached, step)
                for limit in LIMITS:
                    want = plain.assoc_range(1, "likes", 0, limit)
                    assert cached.assoc_range(1, "likes", 0, limit) == want, (step, limit)
                    assert cached.assoc_range(1, "likes", 0, limit) == want, (step, limit)


def test_a_write_keeps_the_answers_of_its_list_and_the_next_read_issues_no_sql(
    tmp_path: Path,
) -> None:
    cached, plain = open_pair(tmp_path)
    with cached, plain:
        cached.bulk_load([(1, "likes", m, m, f"d{m}") for m in range(1, 31)])
        key = (1, cached.engine.assoc_type("likes").id)
        cache = cached.engine.cache
        assert cache is not None
        cached.assoc_range(1, "likes", 0, 10)  # fills the entry
        cached.assoc_range(1, "likes", 0, 10)  # keeps the answer
        kept = cache.answer(key, (0, 10))
        assert kept is not None
        writes = [
            lambda: cached.assoc_add(1, "likes", 100, time=100, data="new"),  # newest
            lambda: cached.assoc_delete(1, "likes", 25),  # inside: the 11th moves up
            lambda: cached.assoc_add(1, "likes", 24, time=24, data=3),  # data changed
            lambda: cached.assoc_add(1, "likes", 5, time=5),  # older than the answer
        ]
        for write in writes:
            write()
            assert cache.answer(key, (0, 10)) is not None  # patched, not dropped
            found: list[Any] = []
            read = lambda found=found: found.append(cached.assoc_range(1, "likes", 0, 10))  # noqa: E731
            assert statements(cached, read) == []
            assert found[0] == plain.assoc_range(1, "likes", 0, 10)
        assert [a.id2 for a in found[0]] == [100, 30, 29, 28, 27, 26, 24, 23, 22, 21]
        # An array or object is kept as JSON and decoded for each reader: an answer
        # holding one is not shared, so the write drops it.
        cached.assoc_add(1, "likes", 23, time=23, data={"a": 1})
        assert cache.answer(key, (0, 10)) is None
        assert cached.assoc_range(1, "likes", 0, 10) == plain.assoc_range(1, "likes", 0, 10)


def test_answers_at_other_positions_and_pages_are_dropped_by_a_write(tmp_path: Path) -> None:
    cached, plain = open_pair(tmp_path)
    with cached, plain:
        cached.bulk_load([(1, "likes", m, m) for m in range(1, 31)])
        key = (1, cached.engine.assoc_type("likes").id)
        cache = cached.engine.cache
        assert cache is not None
        reads = [
            lambda g: g.assoc_range(1, "likes", 3, 5),
            lambda g: g.assoc_page(1, "likes", limit=5),
            lambda g: g.assoc_range(1, "likes", 0, 5),
        ]
        for read in reads * 2:
            read(cached)
        cached.assoc_add(1, "likes", 50, time=50)
        assert cache.answer(key, (3, 5)) is None
        assert cache.answer(key, ("page", None, 5)) is None
        assert cache.answer(key, (0, 5)) is not None
        for read in reads:
            assert read(cached) == read(plain)
