"""A count miss of a list with no entry (`Graph.assoc_count`, `Cache.put_probation`): the
uncached read's statement, its counts then kept on probation (on the first miss, whatever
`admit_after` says) unless a write or invalidation overlapped the read, and made the
list's entry by the next read (a hit); writes and invalidations drop them; every read
right after a write equals the shard's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import assocdb
from assocdb import CacheConfig, Graph
from assocdb.cache.count_reads import PROBATION
from assocdb.cache.tier1 import Cache
from assocdb.core.cachekeys import COUNTS, PREFIX
from assocdb.core.records import StateName
from tests.support.helpers import statements

STATES: tuple[StateName, ...] = ("normal", "archived", "removed")


def open_pair(where: Path, admit_after: int) -> tuple[Graph, Graph]:
    config = CacheConfig(prefix=100, admit_after=admit_after, max_age=3600)
    cached = assocdb.open(where, shards=4, cache=config)
    cached.define_assoc("follows", inverse="followed_by")
    return cached, assocdb.open(where, cache=None)


@pytest.fixture
def graphs(tmp_path: Path) -> Iterator[tuple[Graph, Graph]]:
    cached, plain = open_pair(tmp_path / "g", admit_after=2)  # the default's admission
    yield cached, plain
    plain.close()
    cached.close()


def agree(cached: Graph, plain: Graph, id1: int) -> None:
    for state in STATES:
        want = plain.assoc_count(id1, "followed_by", state)
        assert cached.assoc_count(id1, "followed_by", state) == want, state


def test_a_count_miss_is_one_statement_kept_on_probation_and_its_next_read_a_hit(
    graphs: tuple[Graph, Graph],
) -> None:
    cached, plain = graphs
    cache = cached.engine.cache
    assert cache is not None
    key = (100, cached.engine.assoc_type("followed_by").id)
    for n in range(1, 6):
        cached.assoc_add(n, "follows", 100)
    before, seconds, held = cached.cache_stats(), cache.fill_seconds, cache.bytes
    assert before is not None
    read = lambda: cached.assoc_count(100, "followed_by")  # noqa: E731
    assert len(statements(cached, read)) == 1  # a first miss: the uncached read
    assert key not in cache._lists
    assert key in cache.probation
    assert cache.bytes == held
    after = cached.cache_stats()
    assert after is not None
    assert (after.misses, after.fills) == (before.misses + 1, before.fills)
    assert statements(cached, read) == []  # read again: a hit, which makes it an entry
    assert cache._lists[key].counts == [5, 0, 0, 0]
    assert key not in cache.probation
    after = cached.cache_stats()
    assert after is not None
    assert (after.hits, after.fills) == (before.hits + 1, before.fills + 1)
    assert cache.fill_seconds == seconds  # (not timed: `fill_us` is the other fills')
    assert cache.bytes == sum(entry.nbytes for entry in cache._lists.values())
    cached.assoc_add(6, "follows", 100)
    assert statements(cached, read) == []  # a hit, written through
    assert read() == 6
    for write in (
        lambda: cached.assoc_add(7, "follows", 100),
        lambda: cached.assoc_delete(2, "follows", 100),
        lambda: cached.assoc_archive(3, "follows", 100),
        lambda: cached.assoc_add(3, "follows", 100),
        lambda: cached.assoc_delete(100, "followed_by", 4),  # through the inverse
    ):
        write()
        assert statements(cached, read) == []  # written through, still cached
        agree(cached, plain, 100)
    assert cached.assoc_count(100, "followed_by") == 5


def test_a_write_drops_counts_on_probation(graphs: tuple[Graph, Graph]) -> None:
    """Counts a first miss left on probation are no entry `apply` could bring up to
    date: the write drops them, and the next read is exact."""
    cached, plain = graphs
    cache = cached.engine.cache
    assert cache is not None
    key = (300, cached.engine.assoc_type("followed_by").id)
    for write in (
        lambda: cached.assoc_add(1, "follows", 300),
        lambda: cached.assoc_add(2, "follows", 300),
        lambda: cached.assoc_archive(1, "follows", 300),
        lambda: cached.assoc_delete(300, "followed_by", 2),  # through the inverse
    ):
        cache.invalidate([(COUNTS, key)])  # (no entry: the next read is a first miss)
        assert cached.assoc_count(300, "followed_by") == plain.assoc_count(300, "followed_by")
        assert key in cache.probation
        assert key not in cache._lists
        write()
        assert key not in cache.probation
        agree(cached, plain, 300)


def test_an_invalidation_drops_counts_on_probation(graphs: tuple[Graph, Graph]) -> None:
    cached, _ = graphs
    cache = cached.engine.cache
    assert cache is not None
    kind = cached.engine.assoc_type("followed_by").id
    cached.assoc_count(400, "followed_by")
    cached.assoc_count(401, "followed_by")
    cache.invalidate([(COUNTS, (400, kind))])
    assert (400, kind) not in cache.probation
    assert (401, kind) in cache.probation
    cache.invalidate()
    assert not cache.probation


def test_probation_drops_its_older_half_when_full_and_ages_as_entries_do() -> None:
    now = [0.0]
    cache = Cache(CacheConfig(max_age=10), clock=lambda: now[0])
    for id1 in range(2 * PROBATION):
        cache.put_probation((id1, 1), {0: id1}, cache.generation)
    assert list(cache.probation) == [(id1, 1) for id1 in range(PROBATION, 2 * PROBATION)]
    assert cache.bytes == 0  # (probation is not in the cache's bytes)
    found = cache.probation_get((PROBATION, 1))
    assert found is not None
    assert cache.probation_hit((PROBATION, 1), found)  # a hit: an entry now
    assert cache.count((PROBATION, 1), 0) == PROBATION
    assert (PROBATION, 1) not in cache.probation
    assert cache.bytes == sum(entry.nbytes for entry in cache._lists.values())
    now[0] = 10.0  # its oldest counts as old as `max_age`: refilled, as an entry would be
    found = cache.probation_get((2 * PROBATION - 1, 1))
    assert found is not None
    assert not cache.probation_hit((2 * PROBATION - 1, 1), found)
    assert not cache.probation
    cache.put_probation((1, 1), {0: 1}, cache.generation)  # (kept from now on)
    found = cache.probation_get((1, 1))
    assert found is not None
    assert cache.probation_hit((1, 1), found)


def test_counts_on_probation_promoted_onto_an_entry_filled_meanwhile() -> None:
    cache = Cache(CacheConfig())
    key = (1, 2)
    cache.put_probation(key, {0: 1, 2: 3}, cache.generation)
    cache._install((PREFIX, key), ([(7, 70, 70, None)], True))  # (a range read's fill)
    assert cache._lists[key].counts is None
    found = cache.probation_get(key)
    assert found is not None
    assert cache.probation_hit(key, found)
    assert cache._lists[key].counts == [1, 0, 3, 0]
    assert cache.count(key, 0) == 1
    assert cache.bytes == sum(entry.nbytes for entry in cache._lists.values())


def test_every_count_read_right_after_a_write_is_exact(
    graphs: tuple[Graph, Graph],
) -> None:
    cached, plain = graphs
    for id1 in range(200, 220):  # each list: a fill, writes and hits, an empty list's too
        for n in range(id1 % 4):
            cached.assoc_add(n + 1, "follows", id1)
        agree(cached, plain, id1)
        cached.assoc_add(id1 + 1000, "follows", id1)
        agree(cached, plain, id1)
        cached.assoc_delete(1, "follows", id1)
        agree(cached, plain, id1)


@pytest.mark.parametrize("during", ["write", "unfinished write", "invalidation", "begun"])
def test_a_count_miss_that_a_write_overlaps_keeps_nothing(tmp_path: Path, during: str) -> None:
    """`assoc_count`'s miss (`put_probation`) reads the cache's generation before its
    statement: what a write or invalidation overlapped is answered and not kept."""
    cached, plain = open_pair(tmp_path / "g", admit_after=2)
    cache = cached.engine.cache
    assert cache is not None
    backend = cached.engine.backend
    key = (100, cached.engine.assoc_type("followed_by").id)
    ticket = [(COUNTS, key)]
    cached.assoc_add(1, "follows", 100)
    stored = backend.counts

    def overlapped(shard: int, id1: int, atype: int) -> dict[int, int]:
        if during == "invalidation":
            cache.invalidate(ticket)
        elif during != "begun":
            cache.writing(ticket)
            if during == "write":
                cache.written(ticket)
        return stored(shard, id1, atype)

    def kept() -> bool:
        return key in cache._lists or key in cache.probation

    backend.counts = overlapped  # type: ignore[method-assign]
    if during == "begun":  # a write between its commit and `apply` when the read began
        cache.writing(ticket)
    assert cached.assoc_count(100, "followed_by") == 1
    assert not kept()
    assert cache.stale_fills == 1
    backend.counts = stored  # type: ignore[method-assign]
    if during in ("unfinished write", "begun"):
        assert cached.assoc_count(100, "followed_by") == 1
        assert not kept()  # still being written
        cache.written(ticket)
    assert cached.assoc_count(100, "followed_by") == 1  # on probation now
    assert key in cache.probation
    assert statements(cached, lambda: cached.assoc_count(100, "followed_by")) == []
    assert cache._lists[key].counts == [1, 0, 0, 0]
    cached.assoc_add(2, "follows", 100)
    agree(cached, plain, 100)
    plain.close()
    cached.close()


def test_a_count_fill_over_an_existing_entry_keeps_the_bytes_exact() -> None:
    cache = Cache(CacheConfig())
    key = (1, 2)
    cache.put_counts(key, {0: 5}, cache.generation)
    cache.put_counts(key, {0: 7, 2: 1}, cache.generation)  # (a racing miss's fill)
    cache.put_counts((3, 2), {}, cache.generation)
    assert cache.count(key, 0) == 7
    assert cache.count(key, 2) == 1
    assert cache.count((3, 2), 0) == 0
    assert cache.bytes == sum(entry.nbytes for entry in cache._lists.values())
    assert cache.stats().fills == 3
    cache.invalidate([(COUNTS, key)])
    assert cache.bytes == sum(entry.nbytes for entry in cache._lists.values())


def test_a_write_between_a_probation_hit_and_its_promotion_keeps_nothing() -> None:
    """A hit answers from probation without the lock; a write that drops the counts
    before the hit makes them an entry (`_promote`) leaves no entry of them."""
    armed: list[Callable[[], None]] = []

    def clock() -> float:  # (asked by the hit's age check, between lookup and promotion)
        while armed:
            armed.pop()()
        return 0.0

    cache = Cache(CacheConfig(max_age=10), clock=clock)
    key = (1, 2)
    cache.put_probation(key, {0: 1}, cache.generation)
    armed.append(lambda: cache.invalidate([(COUNTS, key)]))
    found = cache.probation_get(key)
    assert found is not None
    assert cache.probation_hit(key, found)  # answered as read before the write
    assert key not in cache._lists
    assert cache.probation_get(key) is None


def test_probation_ages_from_its_oldest_counts_not_from_the_first_ever() -> None:
    now = [0.0]
    cache = Cache(CacheConfig(max_age=10), clock=lambda: now[0])
    for round_ in range(3):  # each round fills probation: its older half dropped
        now[0] = 5.0 * round_
        for id1 in range(PROBATION):
            cache.put_probation((round_ * PROBATION + id1, 1), {0: 1}, cache.generation)
    now[0] = 12.0  # the oldest counts kept were read at 5.0: not aged
    key = (3 * PROBATION - 1, 1)
    found = cache.probation_get(key)
    assert found is not None
    assert cache.probation_hit(key, found)
