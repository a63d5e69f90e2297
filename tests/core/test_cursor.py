"""Keyset paging rules, against a list in memory."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assocdb import InvalidCursor
from assocdb.core.cursor import START, Seek, decode, decode_after, encode, encode_after, paginate

SCOPE = b"test:1"


def scanner(items: list[int]):  # type: ignore[no-untyped-def]
    """A scan over a descending list of distinct ints, counting calls."""
    ordered = sorted(items, reverse=True)
    calls: list[Seek] = []

    def scan(seek: Seek, limit: int) -> Sequence[int]:
        calls.append(seek)
        if seek.boundary is None:
            rows = ordered
        elif seek.forward:
            (b,) = seek.boundary
            rows = [x for x in ordered if x < b or (seek.inclusive and x == b)]
        else:
            (b,) = seek.boundary
            rows = [x for x in reversed(ordered) if x > b or (seek.inclusive and x == b)]
        return rows[:limit]

    return scan, calls


def key(x: int) -> tuple[int]:
    return (x,)


def page(
    items: list[int], cursor: str | None, limit: int
) -> tuple[list[int], str | None, str | None]:
    scan, _ = scanner(items)
    seek = START if cursor is None else decode(SCOPE, cursor, 1)
    return paginate(scan, key, SCOPE, seek, limit)


def test_first_middle_last_and_back() -> None:
    items = [10, 9, 8, 7, 6]
    first, nxt, prev = page(items, None, 2)
    assert (first, prev) == ([10, 9], None)
    middle, nxt2, prev2 = page(items, nxt, 2)
    assert middle == [8, 7]
    last, nxt3, prev3 = page(items, nxt2, 2)
    assert (last, nxt3) == ([6], None)
    assert page(items, prev3, 2)[0] == [8, 7]
    back, next_from_back, prev_first = page(items, prev2, 2)
    assert (back, prev_first) == ([10, 9], None)
    assert page(items, next_from_back, 2)[0] == [8, 7]


def test_exact_multiple_has_no_empty_last_page() -> None:
    first, nxt, _ = page([4, 3, 2, 1], None, 2)
    second, nxt2, prev = page([4, 3, 2, 1], nxt, 2)
    assert (first, second, nxt2) == ([4, 3], [2, 1], None)
    assert prev is not None


def test_empty_list() -> None:
    assert page([], None, 5) == ([], None, None)


def test_every_page_is_one_scan() -> None:
    scan, calls = scanner(list(range(100)))
    _, nxt, _ = paginate(scan, key, SCOPE, START, 10)
    _, _, prev = paginate(scan, key, SCOPE, decode(SCOPE, nxt, 1), 10)
    paginate(scan, key, SCOPE, decode(SCOPE, prev, 1), 10)
    assert [(c.forward, c.boundary) for c in calls] == [(True, None), (True, (90,)), (False, (89,))]


def test_empty_page_after_deletes_still_leads_back() -> None:
    _, nxt, _ = page([5, 4, 3], None, 2)  # next cursor: below 4
    items, nxt2, prev = page([5, 4], nxt, 2)  # 3 was deleted meanwhile
    assert (items, nxt2) == ([], None)
    assert prev is not None
    assert page([5, 4], prev, 2)[0] == [5, 4]  # the boundary itself is included


def test_stable_under_inserts_above() -> None:
    items = [9, 7, 5, 3, 1]
    _, nxt, _ = page(items, None, 2)
    items += [8, 10]  # new items arrive while paging
    assert page(items, nxt, 2)[0] == [5, 3]  # no duplicates, no skips
    back = page(items, page(items, nxt, 2)[2], 10)[0]
    assert back == [10, 9, 8, 7]


@given(st.sets(st.integers(-50, 50), max_size=40), st.integers(1, 7))
def test_walking_forward_then_back_visits_everything_once(values: set[int], limit: int) -> None:
    items = sorted(values, reverse=True)
    seen: list[int] = []
    cursor = None
    pages = []
    while True:
        chunk, nxt, _ = page(items, cursor, limit)
        seen += chunk
        pages.append(chunk)
        if nxt is None:
            break
        cursor = nxt
    assert seen == items
    # and back from the last page with prev cursors
    back: list[list[int]] = []
    _, _, prev = page(items, cursor, limit)
    while prev is not None:
        chunk, nxt, prev = page(items, prev, limit)
        back.append(chunk)
        # from any page reached backwards, next leads to what follows it
        following = items[items.index(chunk[-1]) + 1 :][:limit]
        assert (page(items, nxt, limit)[0] if nxt else []) == following
    before_last = items[: len(items) - len(pages[-1])]
    assert [x for chunk in reversed(back) for x in chunk] == before_last


def test_cursors_are_opaque_and_scoped() -> None:
    token = encode(SCOPE, Seek(True, (123,), False))
    assert "123" not in token
    assert decode(SCOPE, token, 1) == Seek(True, (123,), False)
    with pytest.raises(InvalidCursor, match="not issued for this list"):
        decode(b"test:2", token, 1)


@pytest.mark.parametrize(
    "bad", ["", "!!!", "abc", 42, None, "A" * 500, encode(SCOPE, Seek(True, (1,), False))[:-2]]
)
def test_malformed_cursors_are_refused(bad: object) -> None:
    with pytest.raises(InvalidCursor):
        decode(SCOPE, bad, 1)


def test_a_cursor_for_another_key_shape_is_refused() -> None:
    token = encode(SCOPE, Seek(True, (1, 2), False))
    with pytest.raises(InvalidCursor):
        decode(SCOPE, token, 1)


def test_an_overlong_cursor_is_not_echoed_whole() -> None:
    with pytest.raises(InvalidCursor) as caught:
        decode(b"scope", "A" * 100_000, 2)
    assert len(str(caught.value)) < 200


@given(key=st.binary(max_size=1024), id_=st.integers(-(2**63), 2**63 - 1))
def test_index_cursors_round_trip_in_the_same_codec(key: bytes, id_: int) -> None:
    token = encode_after(SCOPE, (key, id_))
    assert decode_after(SCOPE, token, 1024) == (key, id_)


def test_index_cursors_are_scoped_and_checked_like_list_cursors() -> None:
    token = encode_after(SCOPE, (b"city", 7))
    with pytest.raises(InvalidCursor, match="not issued for this query"):
        decode_after(b"test:2", token, 1024)
    with pytest.raises(InvalidCursor, match="short string"):
        decode_after(SCOPE, "A" * 5000, 1024)
    for bad in ("", "!!!", token[:-2], 42):
        with pytest.raises(InvalidCursor):
            decode_after(SCOPE, bad, 1024)
