"""The merge rule: a total order on values makes every store a max-register."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from assocdb.core.merge import (
    EdgeTuple,
    ObjRow,
    State,
    edge_rank,
    merge_edges,
    merge_objects,
    place,
    source_of,
    user_data,
)

KEYS = [(1, 1, 2), (1, 1, 3), (2, 2, 1)]

edge_writes = st.builds(
    lambda key, state, time, ua, data: (*key, state, time, ua, data),
    st.sampled_from(KEYS),
    st.sampled_from(list(State)).map(int),
    st.integers(0, 3),
    st.integers(1, 4),  # few timestamps: ties are the interesting case
    st.sampled_from([None, b"", b"a", b"b"]),
)


def winners(result: tuple[list[tuple[Any, EdgeTuple]], Any]) -> list[EdgeTuple]:
    """The new rows of a merge's changes."""
    return [new for _, new in result[0]]


def fold(writes: list[EdgeTuple]) -> dict[tuple[int, int, int], EdgeTuple]:
    """Apply writes one at a time, as a store would, tracking counts."""
    stored: dict[tuple[int, int, int], EdgeTuple] = {}
    for write in writes:
        for row in winners(merge_edges(stored, [write])):
            stored[row[:3]] = row
    return stored


def counts_of(stored: dict[tuple[int, int, int], EdgeTuple]) -> dict[tuple[int, int, int], int]:
    counts: dict[tuple[int, int, int], int] = {}
    for row in stored.values():
        key = (row[0], row[1], row[3])
        counts[key] = counts.get(key, 0) + 1
    return counts


def test_later_updated_at_wins() -> None:
    old = (1, 1, 2, State.NORMAL, 10, 100, None)
    new = (1, 1, 2, State.NORMAL, 5, 101, None)
    assert winners(merge_edges({}, [old, new])) == [new]
    assert winners(merge_edges({}, [new, old])) == [new]


def test_equal_updated_at_stronger_state_wins() -> None:
    add = (1, 1, 2, State.NORMAL, 10, 100, b"x")
    delete = (1, 1, 2, State.REMOVED, 0, 100, None)
    archive = (1, 1, 2, State.ARCHIVED, 10, 100, None)
    negate = (1, 1, 2, State.NEGATIVE, 10, 100, None)
    placed = place(delete, (100, State.NORMAL, 10))  # at the add's time, which it records
    assert winners(merge_edges({}, [add, delete])) == [placed]
    assert winners(merge_edges({}, [delete, add])) == [placed]
    assert user_data(placed) is None
    assert winners(merge_edges({}, [add, archive, negate])) == [archive]
    assert winners(merge_edges({}, [negate, add])) == [negate]


def test_equal_updated_at_and_state_resolved_by_time_then_data() -> None:
    a = (1, 1, 2, State.NORMAL, 10, 100, b"a")
    b = (1, 1, 2, State.NORMAL, 11, 100, None)
    c = (1, 1, 2, State.NORMAL, 11, 100, b"")
    assert winners(merge_edges({}, [a, b, c])) == [c]
    assert winners(merge_edges({}, [c, b, a])) == [c]


def test_rewriting_the_stored_value_changes_nothing() -> None:
    row = (1, 1, 2, State.NORMAL, 10, 100, None)
    assert merge_edges({row[:3]: row}, [row]) == ([], {})


def test_older_write_loses_to_stored_row() -> None:
    stored = (1, 1, 2, State.ARCHIVED, 0, 200, None)
    assert merge_edges({stored[:3]: stored}, [(1, 1, 2, State.NORMAL, 5, 100, None)]) == ([], {})


def test_a_tombstone_keeps_the_time_of_the_best_live_value_below_it() -> None:
    add = (1, 1, 2, State.NORMAL, 5, 100, b"x")
    moved = (1, 1, 2, State.NORMAL, 7, 150, None)  # re-added at another time
    delete = (1, 1, 2, State.REMOVED, 999, 200, None)  # its own time until placed
    in_order = fold([add, moved, delete])
    assert in_order[add[:3]] == place(delete, (150, State.NORMAL, 7))
    # Arriving after the tombstone, an older live value still places it, and
    # only the best one counts, whatever their order: no count moves.
    for late in ([add, moved], [moved, add]):
        stored = {delete[:3]: delete}
        for write in late:
            changed, deltas = merge_edges(stored, [write])
            assert deltas == {}
            for _, row in changed:
                stored[row[:3]] = row
        assert stored == in_order
    assert source_of(delete) is None  # a tombstone no live value was seen for


def test_count_deltas_follow_state_transitions() -> None:
    stored = (1, 1, 2, State.NORMAL, 10, 100, None)
    _changed, deltas = merge_edges({stored[:3]: stored}, [(1, 1, 2, State.ARCHIVED, 10, 101, None)])
    assert deltas == {(1, 1, State.NORMAL): -1, (1, 1, State.ARCHIVED): 1}
    _, deltas = merge_edges({}, [(1, 1, 2, 0, 1, 1, None), (1, 1, 3, 0, 1, 1, None)])
    assert deltas == {(1, 1, 0): 2}


def test_count_deltas_that_cancel_out_are_left_out() -> None:
    # One edge of the list archived and another restored in one merge: both states'
    # counts move by +1 and -1, and neither is a change to store.
    a = (1, 1, 2, State.NORMAL, 10, 100, None)
    b = (1, 1, 3, State.ARCHIVED, 10, 100, None)
    stored = {a[:3]: a, b[:3]: b}
    writes = [(1, 1, 2, State.ARCHIVED, 10, 101, None), (1, 1, 3, State.NORMAL, 10, 101, None)]
    changed, deltas = merge_edges(stored, writes)
    assert len(changed) == 2
    assert deltas == {}
    _, deltas = merge_edges(stored, writes[:1])  # (and one that does not cancel stays)
    assert deltas == {(1, 1, State.NORMAL): -1, (1, 1, State.ARCHIVED): 1}


@given(st.lists(edge_writes, max_size=12), st.randoms(use_true_random=False))
def test_any_order_and_duplication_gives_the_same_rows(
    writes: list[EdgeTuple], rnd: random.Random
) -> None:
    expected = fold(writes)
    shuffled = writes + rnd.sample(writes, k=len(writes) // 2)
    rnd.shuffle(shuffled)
    assert fold(shuffled) == expected
    # The winner is the maximum by rank, whatever the order; a tombstone is
    # placed at the time of the best live value below it, if there is one.
    for key, row in expected.items():
        mine = [w for w in writes if w[:3] == key]
        best = max(mine, key=edge_rank)
        assert row[3:6:2] == best[3:6:2]  # state and updated_at
        live = [w for w in mine if w[3] != State.REMOVED]
        if row[3] == State.REMOVED and live:
            top = max(live, key=edge_rank)
            assert row == place(best, (top[5], top[3], top[4]))
        elif row[3] == State.REMOVED:
            assert edge_rank(row) == edge_rank(best)
        else:
            assert row == best


@given(st.lists(edge_writes, max_size=12), st.lists(edge_writes, max_size=12))
def test_batches_and_single_writes_agree_and_counts_are_exact(
    first: list[EdgeTuple], second: list[EdgeTuple]
) -> None:
    stored: dict[tuple[int, int, int], EdgeTuple] = {}
    counts: dict[tuple[int, int, int], int] = {}
    for batch in (first, second):
        result = merge_edges(stored, batch)
        deltas = result[1]
        for row in winners(result):
            stored[row[:3]] = row
        for key, n in deltas.items():
            counts[key] = counts.get(key, 0) + n
    assert stored == fold(first + second)
    assert {k: n for k, n in counts.items() if n} == counts_of(stored)


def test_objects_merge_by_rank() -> None:
    v1 = ObjRow(7, 1, State.NORMAL, 1, 100, b"{}")
    v2 = ObjRow(7, 1, State.NORMAL, 2, 101, b'{"a":1}')
    gone = ObjRow(7, 1, State.REMOVED, 3, 101, b"{}")
    assert merge_objects({}, [v2, v1]) == [v2]
    assert merge_objects({7: v2}, [v1]) == []
    assert merge_objects({7: v2}, [gone]) == [gone]
