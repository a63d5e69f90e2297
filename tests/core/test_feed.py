"""core/feed.py: the feed cursor round-trips and refuses what is not one; a page merge
keeps each shard's order, takes at most `limit`, consumes what it filters out, and is a
k-way heap merge (`_heap_merge`), record for record, even where a shard's times fall back;
records of one time fill a page from every shard."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assocdb.core import feed
from assocdb.core.errors import InvalidCursor

POSITIONS = st.lists(st.integers(0, 2**63), min_size=1, max_size=64)


@given(POSITIONS)
def test_a_cursor_round_trips(positions: list[int]) -> None:
    token = feed.encode(tuple(positions))
    assert feed.decode(token, len(positions)) == tuple(positions)


@pytest.mark.parametrize("token", ["", "x", None, 5, "A" * 500])
def test_what_is_not_a_cursor_is_refused(token: object) -> None:
    with pytest.raises(InvalidCursor):
        feed.decode(token, 4)


def test_a_cursor_of_another_shard_count_or_mangled_is_refused() -> None:
    token = feed.encode((1, 2, 3, 4))
    with pytest.raises(InvalidCursor):
        feed.decode(token, 3)
    with pytest.raises(InvalidCursor):
        feed.decode(token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1], 4)


RUNS = st.lists(st.lists(st.integers(0, 50), max_size=8), min_size=1, max_size=4)


@given(RUNS, st.integers(1, 10), st.integers(0, 2))
def test_a_merge_keeps_each_shards_order_and_moves_past_what_it_took(
    times: list[list[int]], limit: int, odd: int
) -> None:
    runs = [[(shard, pos + 1, t) for pos, t in enumerate(run)] for shard, run in enumerate(times)]
    pairs, moved = _pairs(
        feed.merge(
            runs, lambda r: r[1], lambda r: r[2], limit, lambda r: r[2] % 3 != odd, (0,) * len(runs)
        )
    )
    assert all(shard == item[0] for shard, item in pairs)
    taken = [item for _, item in pairs]
    assert len(taken) <= limit
    assert all(r[2] % 3 != odd for r in taken)
    for shard, run in enumerate(runs):
        mine = [r for r in taken if r[0] == shard]
        assert mine == sorted(mine, key=lambda r: r[1])
        consumed = run[: moved[shard]]  # positions are 1.. in order: a prefix is consumed
        assert mine == [r for r in consumed if r[2] % 3 != odd]
    if len(taken) < limit:  # nothing left behind
        assert moved == tuple(len(run) for run in runs)


@given(
    st.lists(st.lists(st.integers(0, 50), max_size=40), min_size=1, max_size=6),
    st.integers(1, 30),
    st.integers(1, 5),
)
def test_pages_of_a_shards_share_read_every_item_once_in_each_shards_order(
    times: list[list[int]], limit: int, read: int
) -> None:
    runs = [[(shard, pos + 1, t) for pos, t in enumerate(run)] for shard, run in enumerate(times)]
    after: tuple[int, ...] = (0,) * len(runs)
    taken: list[tuple[int, int, int]] = []
    while after != tuple(len(run) for run in runs):
        partial = [run[pos : pos + read] for run, pos in zip(runs, after, strict=True)]
        merged = feed.merge(partial, lambda r: r[1], lambda r: r[2], limit, None, after, read)
        page, moved = _pairs(merged)
        assert moved != after  # every page moves on while something is left
        assert len(page) <= limit
        taken += [item for _, item in page]
        after = moved
    for shard, run in enumerate(runs):
        assert [r for r in taken if r[0] == shard] == run


def test_a_shards_share_of_a_page() -> None:
    assert feed.share(10_000, 16) == 782
    assert feed.share(10, 16) == 10  # never more than the page
    assert feed.share(1000, 16) == 79


@given(
    st.lists(st.lists(st.integers(0, 12), max_size=30), min_size=1, max_size=5),
    st.integers(1, 40),
    st.one_of(st.none(), st.integers(1, 30)),
    st.integers(0, 3),
)
def test_a_merge_is_the_heap_merge_record_for_record(
    times: list[list[int]], limit: int, read: int | None, odd: int
) -> None:
    runs = [[(shard, pos + 1, t) for pos, t in enumerate(run)] for shard, run in enumerate(times)]
    runs = [run if read is None else run[:read] for run in runs]
    after = (0,) * len(runs)
    keep = None if odd == 3 else (lambda r: r[2] % 3 != odd)
    args = (runs, lambda r: r[1], lambda r: r[2], limit, keep, after, read)
    assert _pairs(feed.merge(*args)) == _heap_merge(*args)


def _pairs(merged: feed.Merged[Any]) -> tuple[list[tuple[int, Any]], tuple[int, ...]]:
    return merged.pairs(), merged.moved


def _heap_merge(
    runs: Sequence[Sequence[Any]],
    position: Callable[[Any], int],
    time: Callable[[Any], int],
    limit: int,
    keep: Callable[[Any], bool] | None,
    after: tuple[int, ...],
    read: int | None,
) -> tuple[list[tuple[int, Any]], tuple[int, ...]]:
    """The model `feed.merge` must equal: one heap step per item, as the merge was, which
    stops before an item newer (by its run's running maximum) than the newest item of a
    run of `read` items (what follows that run is not older)."""
    tagged = [
        [(time(item), shard, n, item) for n, item in enumerate(run, 1)]
        for shard, run in enumerate(runs)
    ]
    ends = [max(map(time, run)) for run in runs if run and len(run) == read]
    newest: dict[int, int] = {}
    taken: list[tuple[int, Any]] = []
    moved = list(after)
    for at, shard, _, item in heapq.merge(*tagged):
        newest[shard] = max(newest.get(shard, at), at)
        if len(taken) >= limit or (ends and newest[shard] > min(ends)):
            break
        moved[shard] = position(item)
        if keep is None or keep(item):
            taken.append((shard, item))
    return taken, tuple(moved)


def test_records_of_one_time_fill_a_page_from_every_shard() -> None:
    runs = [[(shard, pos, 7) for pos in range(1, 5)] for shard in range(4)]  # one bulk load
    merged = feed.merge(runs, lambda r: r[1], lambda r: r[2], 10, None, (0,) * 4, read=4)
    assert [len(taken) for taken in merged.taken] == [4, 4, 2, 0]  # not 4, 0, 0, 0
    assert merged.moved == (4, 4, 2, 0)
