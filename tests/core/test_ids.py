from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assocdb import InvalidRequest
from assocdb.core.ids import MAX_INT64, allocated_id, by_shard, check_id, mix, shard_of, unmix

ids = st.integers(0, MAX_INT64)


@given(ids)
def test_mix_is_a_bijection(x: int) -> None:
    assert 0 <= mix(x) <= MAX_INT64
    assert unmix(mix(x)) == x
    assert mix(unmix(x)) == x


@given(
    st.integers(1, 10**12),
    st.integers(1, 4096).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))),
)
def test_allocated_ids_carry_their_shard(seq: int, shards_and_shard: tuple[int, int]) -> None:
    shards, shard = shards_and_shard
    new = allocated_id(seq, shard, shards)
    assert 1 <= new <= MAX_INT64
    assert shard_of(new, shards) == shard


def test_allocated_ids_are_distinct() -> None:
    made = {allocated_id(seq, shard, 16) for seq in range(1, 500) for shard in range(16)}
    assert len(made) == 499 * 16


def test_structured_ids_spread_over_shards() -> None:
    # Snowflake-like ids (low 22 bits zero) and multiples of the shard count.
    for step in (1 << 22, 16, 1):
        seen = [0] * 16
        for n in range(1, 16001):
            seen[shard_of(n * step, 16)] += 1
        assert min(seen) > 800, (step, seen)


@pytest.mark.parametrize("bad", [0, -1, 2**63, 1.0, "1", None, True, [1]])
def test_check_id_refuses(bad: object) -> None:
    with pytest.raises(InvalidRequest, match="id"):
        check_id(bad)


def test_check_id_accepts_the_whole_range() -> None:
    assert check_id(1) == 1
    assert check_id(MAX_INT64) == MAX_INT64


@given(st.lists(st.integers(1, 2**63 - 1), max_size=50), st.integers(1, 64))
def test_by_shard_groups_ids_as_shard_of_places_them(ids: list[int], shards: int) -> None:
    groups = by_shard(ids, shards)
    assert {s: [i for i in ids if shard_of(i, shards) == s] for s in groups} == groups
    assert sum(map(len, groups.values())) == len(ids)
