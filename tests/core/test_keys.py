"""The index key encoding: byte order is value order, and it round-trips."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assocdb import InvalidRequest
from assocdb.core.keys import decode, encode, upper

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
keys = st.lists(scalars, max_size=4).map(tuple)


def rank(value: object) -> tuple[object, ...]:
    """The value order the encoding must keep (exact, for ints beyond 2**53)."""
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, (int, float)):
        return (2, Fraction(value))
    assert isinstance(value, str)
    return (3, [ord(c) for c in value])


def key_rank(key: tuple[object, ...]) -> list[tuple[object, ...]]:
    return [rank(v) for v in key]


@given(keys, keys)
def test_byte_order_is_value_order(a: tuple[object, ...], b: tuple[object, ...]) -> None:
    ea, eb = encode(a), encode(b)
    assert (ea < eb) == (key_rank(a) < key_rank(b))
    assert (ea == eb) == (key_rank(a) == key_rank(b))


@given(keys)
def test_round_trip(key: tuple[object, ...]) -> None:
    back = decode(encode(key))
    assert key_rank(back) == key_rank(key)
    assert encode(back) == encode(key)


@given(keys, keys)
def test_prefix_upper_bound(prefix: tuple[object, ...], rest: tuple[object, ...]) -> None:
    p = encode(prefix)
    assert p <= encode(prefix + rest) < upper(p)


@pytest.mark.parametrize(
    ("small", "big"),
    [
        (2**53, 2**53 + 1),
        (2**63 - 2, 2**63 - 1),
        (-(2**63), -(2**63) + 1),
        (-1.5, -1),
        ("a", "a\x00"),
        ("a\x00", "a\x01"),
        ("", None),
    ],
)
def test_edges_of_the_order(small: object, big: object) -> None:
    if big is None:  # null sorts first
        small, big = big, small
    assert encode([small]) < encode([big])


def test_equal_numbers_encode_alike() -> None:
    assert encode([1]) == encode([1.0])
    assert encode([-0.0]) == encode([0])


@pytest.mark.parametrize("bad", [[1], {"a": 1}, float("nan"), float("inf"), 2**63])
def test_unindexable_values_are_refused(bad: object) -> None:
    with pytest.raises(InvalidRequest, match="cannot be indexed"):
        encode([bad])


def test_long_keys_are_refused() -> None:
    with pytest.raises(InvalidRequest, match="limited to"):
        encode(["x" * 2000])


def test_garbage_is_not_a_key() -> None:
    with pytest.raises(ValueError, match="not an index key"):
        decode(b"\x06abc")
