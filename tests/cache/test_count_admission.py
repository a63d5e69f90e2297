"""A count miss of a list with no entry (`Graph.assoc_count`, `Cache.put_counts`): the
uncached read's statement, its counts then cached (on the first miss, whatever
`admit_after` says), unless a write or invalidation overlapped the read; every read right
after a write equals the shard's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import assocdb
from assocdb import CacheConfig, Graph
from assocdb.cache.tier1 import Cache
from assocdb.core.cachekeys import COUNTS
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


def test_a_count_miss_is_one_statement_and_fills_the_list_on_its_first_miss(
    graphs: tuple[Graph, Graph],
) -> None:
    cached, plain = graphs
    cache = cached.engine.cache
    assert cache is not None
    key = (100, cached.engine.assoc_type("followed_by").id)
    for n in range(1, 6):
        cached.assoc_add(n, "follows", 100)
    before, seconds = cached.cache_stats(), cache.fill_seconds
    assert before is not None
    read = lambda: cached.assoc_count(100, "followed_by")  # noqa: E731
    assert len(statements(cached, read)) == 1  # a first miss: the uncached read, kept
    assert cache._lists[key].counts == [5, 0, 0, 0]
    after = cached.cache_stats()
    assert after is not None
    assert (after.misses, after.fills) == (before.misses + 1, before.fills + 1)
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
def test_a_count_fill_that_a_write_overlaps_installs_nothing(tmp_path: Path, during: str) -> None:
    """`assoc_count`'s own fill (`put_counts`) reads the cache's generation before its
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

    backend.counts = overlapped  # type: ignore[method-assign]
    if during == "begun":  # a write between its commit and `apply` when the read began
        cache.writing(ticket)
    assert cached.assoc_count(100, "followed_by") == 1
    assert key not in cache._lists
    assert cache.stale_fills == 1
    backend.counts = stored  # type: ignore[method-assign]
    if during in ("unfinished write", "begun"):
        assert cached.assoc_count(100, "followed_by") == 1
        assert key not in cache._lists  # still being written
        cache.written(ticket)
    assert cached.assoc_count(100, "followed_by") == 1  # filled now
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
