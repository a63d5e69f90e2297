"""The cache's cheap paths answer as the shard does: a count filled on its first miss
(`Cache.put_counts`, no `count` call for a list with no entry), a list miss while list
fills are closed (one dict lookup, then the uncached read; one miss in SAMPLE makes its
list a ghost, nothing filled),
and a hit decoded from the packed prefix whose answer cannot be kept (`may_keep`: not
built, no lock) — each read again right after writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import assocdb
from assocdb import CacheConfig, Graph
from assocdb.cache.payback import SAMPLE
from assocdb.core.records import StateName
from tests.support.helpers import statements

STATES: tuple[StateName, ...] = ("normal", "archived", "removed")


@pytest.fixture
def graphs(tmp_path: Path) -> Iterator[tuple[Graph, Graph]]:
    cached = assocdb.open(
        tmp_path / "g", shards=4, cache=CacheConfig(prefix=100, admit_after=1, max_age=3600)
    )
    cached.define_assoc("follows", inverse="followed_by")
    plain = assocdb.open(tmp_path / "g", cache=None)
    yield cached, plain
    plain.close()
    cached.close()


def test_a_count_filled_on_its_first_miss_is_exact_right_after_writes(
    graphs: tuple[Graph, Graph],
) -> None:
    cached, plain = graphs
    for n in range(1, 6):
        cached.assoc_add(n, "follows", 100)
    assert cached.assoc_count(100, "followed_by") == 5  # the fill, on the first miss
    assert statements(cached, lambda: cached.assoc_count(100, "followed_by")) == []
    writes = [
        lambda: cached.assoc_add(6, "follows", 100),
        lambda: cached.assoc_delete(2, "follows", 100),
        lambda: cached.assoc_archive(3, "follows", 100),
        lambda: cached.assoc_add(3, "follows", 100),
    ]
    for write in writes:
        write()
        for state in STATES:
            want = plain.assoc_count(100, "followed_by", state)
            assert cached.assoc_count(100, "followed_by", state) == want, state
    assert cached.assoc_count(100, "followed_by") == 5


def test_list_misses_while_fills_are_closed_read_the_shard_and_one_in_sample_is_a_ghost(
    graphs: tuple[Graph, Graph],
) -> None:
    cached, plain = graphs
    cache = cached.engine.cache
    assert cache is not None
    for n in range(1, 21):
        cached.assoc_add(1, "follows", 100 + n, time=n)
    key = (1, cached.engine.assoc_type("follows").id)
    payback = cache.payback
    payback.open = False
    payback.skip = SAMPLE
    misses, fills = cache.misses, payback.new_fills
    for _ in range(SAMPLE - 1):  # passes: no fill, the shard's answer
        assert cached.assoc_range(1, "follows", 0, 10) == plain.assoc_range(1, "follows", 0, 10)
    assert key not in cache._lists
    assert not payback.ghosts
    assert cache.misses == misses
    # The sampled miss: the shard's answer, and the list a ghost counted as a fill.
    got = statements(cached, lambda: cached.assoc_range(1, "follows", 0, 10))
    assert len(got) == 1
    assert cache.misses == misses + SAMPLE  # the sample counts the passes before it
    assert key not in cache._lists
    assert payback.ghosts == {key: payback.current}
    assert payback.new_fills == fills + 1
    # Its later misses read the shard and count as the hits its fill would have earned.
    hits = payback.new_hits
    for _ in range(3):
        assert len(statements(cached, lambda: cached.assoc_range(1, "follows", 0, 10))) == 1
    assert payback.new_hits == hits + 3
    assert cached.assoc_time_range(1, "follows", 15, 0) == plain.assoc_time_range(
        1, "follows", 15, 0
    )
    assert payback.new_hits == hits + 4  # (`Cache.passes`: the other reads of a list too)
    assert key not in cache._lists
    cached.assoc_add(1, "follows", 500, time=50)
    cached.assoc_delete(1, "follows", 120)
    assert cached.assoc_range(1, "follows", 0, 10) == plain.assoc_range(1, "follows", 0, 10)
    cached.assoc_add(2, "follows", 7)  # a list with no entry, closed: read as uncached
    assert cached.assoc_range(2, "follows") == plain.assoc_range(2, "follows")


def test_a_decoded_hit_whose_answer_cannot_be_kept_answers_right_and_keeps_none(
    graphs: tuple[Graph, Graph],
) -> None:
    cached, plain = graphs
    cache = cached.engine.cache
    assert cache is not None
    for n in range(1, 31):
        cached.assoc_add(1, "follows", 100 + n, time=n, data="d" if n % 4 else None)
    cache.decoded.floor = cache.decoded.ceiling = 0  # no answer fits the budget
    cache.decoded.room = 0  # nor the room of hot lists' answers past it
    for _ in range(3):
        assert cached.assoc_range(1, "follows", 0, 10) == plain.assoc_range(1, "follows", 0, 10)
    assert cache.decoded.count == 0
    assert not cache.decoded.may_keep(10, lambda key: True, None)
    cached.assoc_add(1, "follows", 400, time=99)
    cached.assoc_delete(1, "follows", 130)
    for pos in (0, 5):
        got = statements(cached, lambda pos=pos: cached.assoc_range(1, "follows", pos, 10))
        assert got == []  # from the packed prefix
        assert cached.assoc_range(1, "follows", pos, 10) == plain.assoc_range(1, "follows", pos, 10)
    cache.decoded.floor = cache.decoded.ceiling = 1 << 20  # room again: kept
    assert cache.decoded.may_keep(10, lambda key: False, None)
    cached.assoc_range(1, "follows", 0, 10)
    assert cache.decoded.count == 1


@pytest.mark.parametrize("fills_open", [True, False])
def test_a_long_read_fills_its_list_on_the_first_miss(tmp_path: Path, fills_open: bool) -> None:
    """A read of LONG edges or more costs milliseconds: its list is filled on its first
    miss, not its second (LinkBench read each long list whole twice before a hit),
    and whether the fills of short lists pay or not (closed, LinkBench's long lists
    went to the shard at every read: 0.6-0.7x bare). A read that asks for as many but
    finds a short list leaves it to the doorkeeper."""
    from assocdb.cache.offers import LONG

    config = CacheConfig(prefix=LONG + 1, max_age=3600)  # admit_after: the default, 2
    cached = assocdb.open(tmp_path / "g", shards=2, cache=config)
    plain = assocdb.open(tmp_path / "g", cache=None)
    cache = cached.engine.cache
    assert cache is not None
    cache.payback.open = fills_open
    cached.define_assoc("likes", limit=LONG + 1)
    cached.bulk_load([(1, "likes", m, m * 10) for m in range(1, LONG + 2)])
    cached.bulk_load([(2, "likes", m, m * 10) for m in range(1, 6)])
    for id1 in (1, 2):  # the first read of each: a miss, from the shard
        assert cached.assoc_range(id1, "likes", 0, LONG) == plain.assoc_range(id1, "likes", 0, LONG)
    got = statements(cached, lambda: cached.assoc_range(1, "likes", 0, LONG))
    assert got == []  # the long list was filled by its first read
    assert len(statements(cached, lambda: cached.assoc_range(2, "likes", 0, LONG))) == 1
    # Long fills are outside the verdict on short lists' fills: it counts only the short
    # list's, on its second miss, and none while those are closed.
    assert cache.payback.new_fills == (1 if fills_open else 0)
    cached.assoc_delete(1, "likes", LONG + 1)  # writes keep the filled list exact
    cached.assoc_add(1, "likes", 5000, time=1)
    for limit in (10, LONG):
        assert cached.assoc_range(1, "likes", 0, limit) == plain.assoc_range(1, "likes", 0, limit)
    # Paging back from a time (LinkBench's history reads) is answered by the filled list.
    back = lambda g: g.assoc_time_range(1, "likes", 5000, 0, LONG)  # noqa: E731
    assert statements(cached, lambda: back(cached)) == []
    assert back(cached) == back(plain)
    assert cache.payback.open is fills_open
    cached.close()
    plain.close()
