"""Kept (decoded) answers: within a budget that follows the packed entries, hot lists first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import assocdb
from assocdb import CacheConfig
from assocdb.cache.decoded import PART, RATIO, Decoded
from assocdb.cache.tier1 import Cache
from assocdb.core.cachekeys import LIST, PREFIX

BASE = 1_700_000_000_000


def _rows(n: int) -> list[tuple[int, int, int, Any]]:
    return [(id2, BASE + id2, (BASE + id2) * 1000 + 7, None) for id2 in range(n, 0, -1)]


def _keep_newest_50(cache: Cache, key: tuple[int, int]) -> None:
    """What `assoc_range(limit=50)` keeps: an answer of 50 records (ints stand for them)."""
    before = cache.answers(key)
    cache.keep(key, before, (0, 50), tuple(range(50)), 50)


def test_a_cache_of_read_lists_holds_at_most_32_bytes_per_edge() -> None:
    """Issue 43: every list read (and its answer kept, as before) took ~127 bytes an
    edge; the answers now hold at most RATIO of the packed entries beyond their floor."""
    cache = Cache(CacheConfig(max_age=3600))  # the default max_bytes (128 MiB)
    lists, edges = 3000, 100
    rows = _rows(edges)
    for id1 in range(1, lists + 1):
        cache._install((PREFIX, (id1, 1)), (rows, True))
        _keep_newest_50(cache, (id1, 1))
    decoded = cache.decoded
    assert 0 < decoded.bytes <= decoded.budget()
    assert decoded.bytes <= max(decoded.floor, RATIO * (cache.bytes - decoded.bytes))
    assert cache.bytes / (lists * edges) <= 32
    assert cache.bytes == sum(e.nbytes + e.answer_bytes for e in cache._lists.values())


def test_a_cache_holding_little_keeps_a_mebibyte_of_answers() -> None:
    """Issue 43, bench reads: the lists cached held ~1.3 MiB and RATIO of that kept ~30
    answers; the hits of the other lists decoded the packed prefix (~16 µs against ~3
    for a kept answer). A cache holding little keeps FLOOR of `max_bytes`, 1 MiB."""
    cache = Cache(CacheConfig(max_age=3600))  # the default max_bytes (128 MiB)
    for id1 in range(1, 101):
        cache._install((PREFIX, (id1, 1)), (_rows(60), True))
        _keep_newest_50(cache, (id1, 1))
    assert cache.decoded.count == 100
    assert cache.decoded.bytes <= cache.decoded.floor == (128 << 20) // 128


def test_past_the_budget_only_a_hot_lists_answer_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Cache(CacheConfig(max_bytes=1 << 20, max_age=3600))
    hot = (1, 1)
    monkeypatch.setattr(cache.hot, "is_hot", lambda key: key == (LIST, *hot))
    for id1 in range(1, 201):
        cache._install((PREFIX, (id1, 1)), (_rows(60), True))
    for id1 in range(2, 201):
        _keep_newest_50(cache, (id1, 1))
    decoded = cache.decoded
    kept = decoded.count
    assert 0 < kept < 199  # the budget was reached: later lists kept nothing
    assert cache._lists[(200, 1)].answers == {}
    _keep_newest_50(cache, hot)  # makes room: the oldest answer goes
    assert cache.answer(hot, (0, 50)) == tuple(range(50))
    assert decoded.count == kept
    assert cache.answer((2, 1), (0, 50)) is None
    assert decoded.bytes <= decoded.budget()


def test_answers_shrink_with_the_entries_they_follow() -> None:
    """Lists dropped shrink the budget: the next answer offered trims the old ones."""
    rest = [800_000]
    decoded = Decoded(1 << 20, lambda: rest[0])  # floor 8 KiB, ceiling 256 KiB

    class Entry:
        def __init__(self) -> None:
            self.answers: dict[Any, Any] = {}
            self.answer_bytes = 0

    entries = [Entry() for _ in range(12)]
    assert decoded.budget() == RATIO * 800_000
    for entry in entries[:10]:
        assert decoded.keep(entry, entry.answers, "t", 1, 20_000, hot=False) == 20_000
    assert decoded.keep(entries[10], entries[10].answers, "t", 1, 20_000, hot=False) == 0
    rest[0] = 400_000  # lists were dropped
    added = decoded.keep(entries[11], entries[11].answers, "t", 1, 1000, hot=False)
    assert added == -100_000
    assert decoded.bytes == 100_000 == decoded.budget()
    assert entries[11].answers == {}
    assert sum(len(e.answers) for e in entries) == 5
    rest[0] = 0
    assert decoded.budget() == decoded.floor == 8192


def test_reads_of_lists_without_kept_answers_agree_with_the_shard(tmp_path: Path) -> None:
    """A list whose answer is not kept answers from its packed prefix."""
    config = CacheConfig(max_bytes=300_000, admit_after=1, max_age=3600)
    cached = assocdb.open(tmp_path / "g", shards=2, cache=config)
    plain = assocdb.open(tmp_path / "g", cache=None)
    cached.define_assoc("likes")
    cached.bulk_load([(n, "likes", m, m * 10) for n in range(1, 41) for m in range(1, 61)])
    for _ in range(3):
        for n in range(1, 41):
            assert cached.assoc_range(n, "likes", 0, 50) == plain.assoc_range(n, "likes", 0, 50)
    cache = cached.engine.cache
    assert cache is not None
    unkept = [e for e in cache._lists.values() if e.prefix is not None and not e.answers]
    assert unkept  # some lists answered from their packed prefix
    cached.close()
    plain.close()


def test_a_hot_lists_answer_past_the_budget_is_kept_in_a_room_of_its_own() -> None:
    """LinkBench: a hot list's answer of 10,000 links (~2 MiB) outgrew the whole budget
    (~1 MiB), so each hit decoded its prefix again; kept within a budget of a few MiB,
    first in first out, it was soon pushed out. A hot list's answer over 1/PART of the
    budget is kept in the room of BIG of max_bytes, oldest out first; no other is."""
    decoded = Decoded(1 << 20, lambda: 0)  # budget: the floor, 8 KiB; room 64 KiB

    class Entry:
        def __init__(self) -> None:
            self.answers: dict[Any, Any] = {}
            self.answer_bytes = 0

    small, cold, first, second, third = (Entry() for _ in range(5))
    assert decoded.keep(small, small.answers, "t", 0, 4000, hot=False) == 4000  # the budget's
    assert decoded.keep(cold, cold.answers, "t", 1, 30_000, hot=False) == 0
    assert decoded.keep(first, first.answers, "t", 1, 30_000) == 30_000
    assert decoded.keep(second, second.answers, "t", 2, 30_000) == 30_000
    assert decoded.keep(third, third.answers, "t", 3, 30_000) == 0  # first went
    assert (first.answers, first.answer_bytes) == ({}, 0)
    assert second.answers == {"t": 2}
    assert third.answers == {"t": 3}
    assert decoded.keep(cold, cold.answers, "t", 9, 70_000) == 0  # past the room too
    assert (decoded.bytes, decoded.big_bytes, decoded.count) == (64_000, 60_000, 3)
    assert decoded.forget(second) == 30_000  # a write to the list
    assert (decoded.bytes, decoded.big_bytes) == (34_000, 30_000)
    # A hot list's answer of a third of the budget: large, in the room too.
    assert decoded.budget() // PART < 3000 < decoded.budget()
    decoded.keep(first, first.answers, "t", 4, 3000)
    assert decoded.big_bytes == 33_000
    # The budget's answers are dropped for the budget's, never for the room's.
    for n in range(3):  # (hot, but small: within the budget)
        entry = Entry()
        decoded.keep(entry, entry.answers, "t", n, 2000)
    assert small.answers == {}
    assert third.answers == {"t": 3}
    assert first.answers == {"t": 4}
    assert decoded.bytes - decoded.big_bytes <= decoded.budget()


def test_a_long_hot_list_read_whole_agrees_with_the_shard_through_writes(tmp_path: Path) -> None:
    """Its answer is kept in the room (past the budget) and patched or dropped by writes."""
    config = CacheConfig(max_bytes=16 << 20, admit_after=1, max_age=3600, prefix=3001)
    cached = assocdb.open(tmp_path / "g", shards=2, cache=config)
    plain = assocdb.open(tmp_path / "g", cache=None)
    cached.define_assoc("likes", limit=3001)
    cached.bulk_load([(1, "likes", m, m * 10) for m in range(1, 3001)])
    cache = cached.engine.cache
    assert cache is not None
    cache.hot._hot = frozenset({(LIST, 1, cached.engine.assoc_type("likes").id)})
    for step in range(6):
        assert cached.assoc_range(1, "likes", 0, 3001) == plain.assoc_range(1, "likes", 0, 3001)
        if step == 1:
            assert cache.decoded.big_bytes > cache.decoded.budget()  # kept, past the budget
        if step % 2:
            cached.assoc_add(1, "likes", 5000 + step, time=40_000 + step)
        else:
            cached.assoc_delete(1, "likes", step + 1)
    assert cache.bytes == sum(e.nbytes + e.answer_bytes for e in cache._lists.values())
    cached.close()
    plain.close()


def test_a_long_lists_answer_read_again_is_kept_though_the_list_is_not_hot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LinkBench: a list of 10,000 links outside the hottest keys (by rate) decoded its
    prefix at each read, ~2 ms, its answer never kept. An answer of LONG edges or more
    built a second time lately is kept in the room as a hot list's is; a shorter one
    of a list that is not hot is not (decoding it costs little)."""
    from assocdb.cache.payback import LONG

    config = CacheConfig(max_bytes=16 << 20, admit_after=1, max_age=3600, prefix=LONG + 1)
    cached = assocdb.open(tmp_path / "g", shards=2, cache=config)
    plain = assocdb.open(tmp_path / "g", cache=None)
    cached.define_assoc("likes", limit=LONG + 1)
    cached.bulk_load([(n, "likes", m, m * 10) for n in (1, 2) for m in range(1, LONG + 2)])
    cache = cached.engine.cache
    assert cache is not None
    monkeypatch.setattr(cache.hot, "is_hot", lambda key: False)
    atype = cached.engine.assoc_type("likes").id
    cached.assoc_range(1, "likes", 0, LONG)  # the fill: its answer built, refused, remembered
    assert cache.answer((1, atype), (0, LONG)) is None
    assert cached.assoc_range(1, "likes", 0, LONG) == plain.assoc_range(1, "likes", 0, LONG)
    assert cache.answer((1, atype), (0, LONG)) is not None  # built again: kept, in the room
    assert cache.decoded.big_bytes > cache.decoded.budget()
    for _ in range(3):  # a short answer of a list that is not hot: past the budget, never
        cached.assoc_range(2, "likes", 0, LONG - 1)
    assert cache.answer((2, atype), (0, LONG - 1)) is None
    cached.assoc_add(1, "likes", 5000, time=1)  # writes patch it, as a hot list's
    assert cache.answer((1, atype), (0, LONG)) is not None
    assert cached.assoc_range(1, "likes", 0, LONG) == plain.assoc_range(1, "likes", 0, LONG)
    cached.close()
    plain.close()
