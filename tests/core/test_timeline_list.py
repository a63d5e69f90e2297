"""The packed home-list merge: commutative, associative, idempotent, and equal to a model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from assocdb.core.cursor import Seek
from assocdb.core.timeline_list import (
    Entry,
    entry,
    is_deleted,
    merge,
    merge_blob,
    pack,
    unpack,
    visible,
)

# Few distinct items, so deliveries and deletes of the same item collide often.
ITEMS = st.integers(1, 12)


@st.composite
def writes(draw: st.DrawFn) -> list[Entry]:
    out = []
    for _ in range(draw(st.integers(0, 30))):
        item = draw(ITEMS)
        time = item * 10  # an item keeps one time, as post_delete guarantees
        author = draw(st.integers(1, 3))
        out.append(entry(time, item, author, draw(st.integers(1, 6)), draw(st.booleans())))
    return out


def model(all_writes: list[Entry], cap: int) -> list[Entry]:
    """The highest-stamped write per key; the `cap` newest keys, tombstones included."""
    best: dict[tuple[int, int], Entry] = {}
    for e in all_writes:
        key = (e[0], e[1])
        if key not in best or (e[3], e[2]) > (best[key][3], best[key][2]):
            best[key] = e
    return [best[k] for k in sorted(best, reverse=True)[:cap]]


@settings(max_examples=300)
@given(writes(), st.integers(1, 8), st.randoms(use_true_random=False), st.integers(1, 5))
def test_any_order_and_batching_gives_the_model(
    log: list[Entry], cap: int, rnd: object, batches: int
) -> None:
    import random

    assert isinstance(rnd, random.Random)
    replayed = log + rnd.sample(log, len(log) // 2)  # duplicates
    rnd.shuffle(replayed)
    state: list[Entry] = []
    step = max(1, len(replayed) // batches)
    for start in range(0, len(replayed), step):
        state = merge(state, replayed[start : start + step], cap)
    assert state == model(log, cap)


def test_delete_then_deliver_equals_deliver_then_delete_at_the_cap() -> None:
    deliveries = [entry(t, t, 1, 1) for t in range(1, 4)]
    tombstone = entry(3, 3, 1, 2, deleted=True)
    a = merge(merge([], deliveries, 2), [tombstone], 2)
    b = merge(merge([], [tombstone], 2), deliveries, 2)
    assert a == b == [tombstone, deliveries[1]]


def test_a_tombstone_beats_a_delivery_with_the_same_stamp() -> None:
    assert merge([entry(5, 5, 1, 7)], [entry(5, 5, 1, 7, deleted=True)], 10) == [
        entry(5, 5, 1, 7, deleted=True)
    ]
    assert is_deleted(merge([entry(5, 5, 1, 7, deleted=True)], [entry(5, 5, 1, 7)], 10)[0])
    assert not is_deleted(merge([entry(5, 5, 1, 7, deleted=True)], [entry(5, 5, 1, 8)], 10)[0])


@given(writes())
def test_pack_round_trips_and_merge_blob_reports_no_change(log: list[Entry]) -> None:
    merged = merge([], log, 100)
    blob = pack(merged)
    assert len(blob) == 32 * len(merged)
    assert unpack(blob) == merged
    assert merge_blob(blob, log, 100) is None
    assert unpack(blob + b"") == merged
    assert unpack(None) == []


def test_visible_skips_tombstones_and_honours_the_seek() -> None:
    entries = merge([], [entry(t, t, 1, 1, deleted=t == 3) for t in range(1, 6)], 10)
    keys = lambda seek: [e[1] for e in visible(entries, seek)]  # noqa: E731
    assert keys(Seek(True, None, False)) == [5, 4, 2, 1]
    assert keys(Seek(True, (4, 4), False)) == [2, 1]
    assert keys(Seek(True, (4, 4), True)) == [4, 2, 1]
    assert keys(Seek(False, (2, 2), False)) == [4, 5]
    assert keys(Seek(False, (2, 2), True)) == [2, 4, 5]


@settings(max_examples=300)
@given(writes(), writes(), st.integers(1, 8))
def test_merge_blob_one_write_at_a_time_is_merge(
    first: list[Entry], more: list[Entry], cap: int
) -> None:
    blob: bytes | None = pack(merge([], first, cap))
    for write in more:
        blob = merge_blob(blob, [write], cap) or blob
    assert unpack(blob) == model(first + more, cap)
