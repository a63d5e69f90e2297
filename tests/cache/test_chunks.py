"""The packed list against a sorted Python list."""

from __future__ import annotations

import sys
from array import array

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from assocdb.cache import chunks as _chunks
from assocdb.cache.chunks import PackedList

keys = st.tuples(st.integers(-5, 40), st.integers(1, 6))
stamps = st.sampled_from([0, 5, 999, 2**40, -(2**33)])


class PackedListMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        _chunks.CHUNK = 4  # tiny chunks: splits and empties happen often
        self.packed = PackedList()
        self.model: dict[tuple[int, int], int] = {}

    def teardown(self) -> None:
        _chunks.CHUNK = 256

    def ordered(self) -> list[tuple[int, int, int]]:
        return [(t, i, u) for (t, i), u in sorted(self.model.items(), reverse=True)]

    @rule(key=keys, stamp=stamps)
    def insert(self, key: tuple[int, int], stamp: int) -> None:
        if key not in self.model:
            updated_at = key[0] * 1000 + stamp
            self.packed.insert((*key, updated_at))
            self.model[key] = updated_at

    @rule(key=keys)
    def remove(self, key: tuple[int, int]) -> None:
        assert self.packed.remove(key) == (key in self.model)
        self.model.pop(key, None)

    @rule()
    def pop_last(self) -> None:
        if self.model:
            expected = self.ordered()[-1]
            assert self.packed.pop_last() == expected
            del self.model[expected[:2]]

    @rule(key=keys, inclusive=st.booleans(), limit=st.integers(1, 9))
    def seeks(self, key: tuple[int, int], inclusive: bool, limit: int) -> None:
        ordered = self.ordered()
        older = [e for e in ordered if e[:2] < key or (inclusive and e[:2] == key)]
        newer = [e for e in reversed(ordered) if e[:2] > key or (inclusive and e[:2] == key)]
        assert self.packed.after(key, inclusive, limit) == older[:limit]
        assert self.packed.before(key, inclusive, limit) == newer[:limit]
        assert self.packed.find(key) == (next((e for e in ordered if e[:2] == key), None))

    @rule(start=st.integers(0, 12), size=st.integers(0, 12))
    def slices(self, start: int, size: int) -> None:
        assert self.packed.slice(start, start + size) == self.ordered()[start : start + size]

    @invariant()
    def same_entries(self) -> None:
        assert list(self.packed) == self.ordered()
        assert len(self.packed) == len(self.model)
        assert self.packed.last() == (self.ordered()[-1][:2] if self.model else None)


TestPackedList = PackedListMachine.TestCase
TestPackedList.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


@given(
    st.lists(st.tuples(st.integers(0, 10**12), st.integers(1, 2**62)), unique=True, max_size=600)
)
def test_bulk_built_lists_match(pairs: list[tuple[int, int]]) -> None:
    entries = sorted(((t, i, t * 1000 + 7) for t, i in pairs), reverse=True)
    rows = [(i, t, u, None) for t, i, u in entries]  # as a shard returns a list
    for packed in (PackedList(entries), PackedList.from_rows(rows)):
        assert list(packed) == entries
        assert packed.slice(10, 60) == entries[10:60]
        assert len(packed) == len(entries)


def test_a_fill_packs_one_chunk_or_many_at_the_chunk_boundaries() -> None:
    # `from_rows` packs up to CHUNK rows as one chunk without slicing, more as
    # several; rows from tier 2 may be lists rather than tuples.
    for n in (0, 1, _chunks.CHUNK - 1, _chunks.CHUNK, _chunks.CHUNK + 1, 2 * _chunks.CHUNK + 3):
        entries = [(10**12 - k, k + 1, (10**12 - k) * 1000 + 3) for k in range(n)]
        for rows in (
            [(i, t, u, None) for t, i, u in entries],
            [[i, t, u, b"1"] for t, i, u in entries],
        ):
            packed = PackedList.from_rows(rows)
            assert list(packed) == entries
            assert len(packed._chunks) == -(-n // _chunks.CHUNK)
            assert packed.nbytes() == 18 * n
            if n:
                assert packed.find(entries[n // 2][:2]) == entries[n // 2]
                assert packed.index(entries[-1][:2], True) == n - 1


def test_an_entry_costs_18_bytes_in_the_common_case() -> None:
    entries = [(10**12 - n, n, (10**12 - n) * 1000 + 500) for n in range(1000)]
    assert PackedList(entries).nbytes() == 18 * 1000  # offsets under 2^15: 16 bits
    wider = [(10**12 - n, n, (10**12 - n) * 1000 + 40_000) for n in range(1000)]
    assert PackedList(wider).nbytes() == 20 * 1000
    odd = [(n, n, 10**15) for n in range(1000)]  # explicit times: offsets need 64 bits
    assert PackedList(sorted(odd, reverse=True)).nbytes() == 24 * 1000


def test_a_built_list_holds_its_arrays_at_their_exact_size() -> None:
    # An array grown from bytes over-allocates by ~1/16: 1.3 bytes an edge more than
    # the cache counts (bench cache: packed B/edge).
    entries = [(10**12 - n, n, (10**12 - n) * 1000 + 500) for n in range(600)]
    rows = [(i, t, u, None) for t, i, u in entries]
    for packed in (PackedList(entries), PackedList.from_rows(rows)):
        for chunk in packed._chunks:
            for column in (chunk.keys, chunk.offsets):
                empty = sys.getsizeof(array(column.typecode))
                assert sys.getsizeof(column) == empty + column.itemsize * len(column)


def test_times_at_the_ends_of_int64() -> None:
    # An edge's time is any signed 64-bit integer; `time * 1000` then is not,
    # and the offset from it must still fit its array.
    now = 1_795_000_000_000_000  # µs, as write stamps are
    entries = [(2**63 - 1, 1, now), (2**53, 4, now + 1), (5, 2, now), (-(2**63), 3, now)]
    inserted = PackedList()
    for e in reversed(entries):
        inserted.insert(e)
    from_rows = PackedList.from_rows([(i, t, u, None) for t, i, u in entries])
    for packed in (PackedList(entries), inserted, from_rows):
        assert list(packed) == entries
        assert packed.columns(0, 4) == (
            [1, 4, 2, 3],
            [e[0] for e in entries],
            [e[2] for e in entries],
        )
        assert packed.find((-(2**63), 3)) == entries[-1]


def test_an_insert_widens_the_offsets_it_does_not_fit() -> None:
    entries = [(100 - n, n, (100 - n) * 1000 + 5) for n in range(10)]
    packed = PackedList(entries)
    for entry in [(50, 100, 50 * 1000 + 40_000), (40, 101, 40 * 1000 + 2**40)]:
        packed.insert(entry)
        entries = sorted([*entries, entry], reverse=True)
        assert list(packed) == entries


def test_a_chunk_whose_offsets_need_64_bits_holds_the_stamps() -> None:
    # Explicit times (a bulk load of old edges): the stamps, not offsets, packed and
    # decoded without arithmetic; a small first offset does not hide a large later one.
    now = 1_795_000_000_000_000
    for first in (now, 1_600_000_000_123 * 1000 + 7):
        entries = [(1_600_000_000_123, 9, first)]
        entries += [(1_600_000_000_000 - n, n, now + n) for n in range(300)]
        packed = PackedList.from_rows([(i, t, u, None) for t, i, u in entries])
        assert [c.offsets.typecode for c in packed._chunks] == ["q", "q"]
        assert list(packed) == entries
        assert packed.columns(1, 260) == (
            [e[1] for e in entries[1:260]],
            [e[0] for e in entries[1:260]],
            [e[2] for e in entries[1:260]],
        )
        packed.insert((1_600_000_000_001, 5, 3))
        assert packed.find((1_600_000_000_001, 5)) == (1_600_000_000_001, 5, 3)
        assert packed.nbytes() == 24 * 302
