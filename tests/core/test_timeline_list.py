"""The packed home-list merge: commutative, associative, idempotent, equal to a model, and
a delete never costs a list more than its own item."""

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
    """The highest-stamped write per key, counted if a delivery of it came; the `cap`
    newest counted keys, and the loose tombstones (author negated) among the `cap`
    newest keys."""
    best: dict[tuple[int, int], Entry] = {}
    received: set[tuple[int, int]] = set()
    for e in all_writes:
        key = (e[0], e[1])
        if not is_deleted(e):
            received.add(key)
        if key not in best or (e[3], e[2]) > (best[key][3], best[key][2]):
            best[key] = e
    newest = sorted(best, reverse=True)
    kept = set([k for k in newest if k in received][:cap])
    kept |= {k for k in newest[:cap] if k not in received}
    out = [best[k] for k in newest if k in kept]
    return [e if (e[0], e[1]) in received else (e[0], e[1], -e[2], e[3]) for e in out]


def deliveries_first(log: list[Entry]) -> list[Entry]:
    """`log` with each item's deliveries moved ahead of its tombstones (into the same
    places): the order in which the merge is commutative (see the module doc's corner)."""
    slots: dict[tuple[int, int], list[Entry]] = {}
    for e in log:
        slots.setdefault((e[0], e[1]), []).append(e)
    for writes in slots.values():
        writes.sort(key=is_deleted)
    return [slots[(e[0], e[1])].pop(0) for e in log]


@settings(max_examples=300)
@given(writes(), st.integers(1, 8), st.randoms(use_true_random=False), st.integers(1, 5))
def test_any_order_and_batching_gives_the_model(
    log: list[Entry], cap: int, rnd: object, batches: int
) -> None:
    import random

    assert isinstance(rnd, random.Random)
    replayed = log + rnd.sample(log, len(log) // 2)  # duplicates
    rnd.shuffle(replayed)
    replayed = deliveries_first(replayed)
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


def test_a_tombstone_of_an_item_never_received_takes_no_slot() -> None:
    held = [entry(t, t, 1, 1) for t in (30, 20, 10)]
    tombstone = entry(15, 15, 2, 5, deleted=True)
    state = merge(held, [tombstone], 3)
    assert [e for e in state if not is_deleted(e)] == held
    assert state == [held[0], held[1], (15, 15, -2, 11), held[2]]  # loose: author negated
    # A delivery of the item that comes after its delete finds the tombstone…
    assert merge(state, [entry(15, 15, 2, 1)], 3) == [held[0], held[1], (15, 15, 2, 11)]
    # …while newer items push a loose tombstone out like any other key.
    newer = [entry(t, t, 1, 1) for t in (40, 50, 60)]
    assert merge(state, newer, 3) == merge(held, newer, 3)


@settings(max_examples=300)
@given(writes(), st.integers(1, 8), st.integers(1, 12), st.integers(1, 9))
def test_a_delete_costs_a_list_at_most_its_own_item(
    log: list[Entry], cap: int, item: int, stamp: int
) -> None:
    state = merge([], log, cap)
    after = merge(state, [entry(item * 10, item, 1, stamp, deleted=True)], cap)
    live = {(e[0], e[1]) for e in state if not is_deleted(e)}
    assert {(e[0], e[1]) for e in after if not is_deleted(e)} >= live - {(item * 10, item)}


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
    state = merge([], first, cap)
    blob: bytes | None = pack(state)
    for write in more:
        blob = merge_blob(blob, [write], cap) or blob
        state = merge(state, [write], cap)
    assert unpack(blob) == state
