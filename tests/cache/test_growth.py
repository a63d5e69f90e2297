"""A prefix one delete too short for its reads grows by its tail (`cache.growth`), not
by a refill of the whole list, and stays exact through writes."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

import assocdb
from assocdb import CacheConfig, Graph
from assocdb.cache import growth
from assocdb.cache.entries import MARGIN
from assocdb.cache.tier1 import Cache
from tests.support.helpers import statements

N = 300  # the newest edges each read asks for


@pytest.fixture
def graphs(tmp_path: Path) -> Iterator[tuple[Graph, Graph]]:
    cached = assocdb.open(
        tmp_path / "g", shards=2, cache=CacheConfig(prefix=N + 1, admit_after=1, max_age=3600)
    )
    cached.define_assoc("likes", limit=N + 1)
    cached.bulk_load([(1, "likes", m, m * 10) for m in range(1, 2 * N)])
    plain = assocdb.open(tmp_path / "g", cache=None)
    yield cached, plain
    plain.close()
    cached.close()


def _read_list(cached: Graph, plain: Graph) -> tuple[Cache, tuple[int, int]]:
    """List 1's newest N read through the cache (agreeing with the shard): its cache and key."""
    assert cached.assoc_range(1, "likes", 0, N) == plain.assoc_range(1, "likes", 0, N)
    cache = cached.engine.cache
    assert cache is not None
    return cache, (1, cached.engine.assoc_type("likes").id)


def test_a_prefix_a_delete_left_short_reads_only_its_tail(graphs: tuple[Graph, Graph]) -> None:
    cached, plain = graphs
    assert cached.assoc_range(1, "likes", 0, N) == plain.assoc_range(1, "likes", 0, N)
    cache = cached.engine.cache
    assert cache is not None
    entry = cache._lists[(1, cached.engine.assoc_type("likes").id)]
    assert entry.prefix is not None
    assert len(entry.prefix) == N + N // MARGIN  # what the read needs, and a margin
    for id2 in range(2 * N - 1, 2 * N - 2 - N // MARGIN, -1):  # the newest: one short of N
        cached.assoc_delete(1, "likes", id2)
    assert len(entry.prefix) == N - 1
    got = statements(cached, lambda: cached.assoc_range(1, "likes", 0, N))
    assert len(got) == 1
    assert "LIMIT" in got[0]
    assert "<" in got[0]  # past the prefix's last edge, not the newest
    assert cached.assoc_range(1, "likes", 0, N) == plain.assoc_range(1, "likes", 0, N)
    assert statements(cached, lambda: cached.assoc_range(1, "likes", 0, N)) == []


def test_a_grown_prefix_stays_exact_through_random_writes(graphs: tuple[Graph, Graph]) -> None:
    cached, plain = graphs
    rng = random.Random(7)
    present = set(range(1, 2 * N))
    for step in range(300):
        limit = rng.choice((N, N, N // 2, 10))
        assert cached.assoc_range(1, "likes", 0, limit) == plain.assoc_range(1, "likes", 0, limit)
        for _ in range(rng.randrange(1, 4)):
            op = rng.random()
            if op < 0.5 and present:  # deletes, often of the newest, leave the prefix short
                id2 = max(present) if rng.random() < 0.5 else rng.choice(sorted(present))
                cached.assoc_delete(1, "likes", id2)
                present.discard(id2)
            elif op < 0.8:
                id2 = 10_000 + step
                cached.assoc_add(1, "likes", id2, time=rng.randrange(1, 40 * N))
                present.add(id2)
            elif present:  # an update moving an edge in time
                id2 = rng.choice(sorted(present))
                cached.assoc_add(1, "likes", id2, time=rng.randrange(1, 40 * N))
    assert cached.assoc_range(1, "likes", 0, N) == plain.assoc_range(1, "likes", 0, N)
    cache = cached.engine.cache
    assert cache is not None
    assert cache.bytes == sum(e.nbytes + e.answer_bytes for e in cache._lists.values())


@pytest.mark.parametrize("most", [1000, 100])
def test_a_prefix_lacking_more_than_most_is_filled_again_whole(
    graphs: tuple[Graph, Graph], monkeypatch: pytest.MonkeyPatch, most: int
) -> None:
    cached, plain = graphs
    monkeypatch.setattr(growth, "MOST", most)
    assert cached.assoc_range(1, "likes", 0, 10) == plain.assoc_range(1, "likes", 0, 10)
    got = statements(cached, lambda: cached.assoc_range(1, "likes", 0, N))  # lacks ~N - 50
    assert len(got) == 1
    assert ("<" in got[0]) == (most >= N + N // MARGIN - 50)  # its tail, or all again
    assert cached.assoc_range(1, "likes", 0, N) == plain.assoc_range(1, "likes", 0, N)


def test_a_write_during_the_tail_read_appends_nothing(graphs: tuple[Graph, Graph]) -> None:
    cached, plain = graphs
    cache, key = _read_list(cached, plain)
    cached.assoc_delete(1, "likes", 2 * N - 1)
    entry = cache._lists[key]
    assert entry.prefix is not None
    before = list(entry.prefix)

    def tail(last: tuple[int, int], n: int) -> list[tuple[int, int, int, None]]:
        rows = [(a.id2, a.time, 0, None) for a in plain.assoc_range(1, "likes", 0, 2 * N)]
        cached.assoc_delete(1, "likes", 7)  # a write of the list while it reads
        return [r for r in rows if (r[1], r[0]) < last][:n]

    assert not growth.grow(cache, key, tail, N)
    assert list(entry.prefix) == before  # nothing appended
    assert cached.assoc_range(1, "likes", 0, N) == plain.assoc_range(1, "likes", 0, N)


def test_a_delete_of_the_newest_keeps_the_answer_of_the_newest_n(
    graphs: tuple[Graph, Graph],
) -> None:
    """The fill's margin: the kept answer of the newest N is patched from the prefix's
    next edge, not dropped and decoded again (LinkBench: ~10 ms a read of 10,000)."""
    cached, plain = graphs
    for _ in range(2):
        assert cached.assoc_range(1, "likes", 0, N) == plain.assoc_range(1, "likes", 0, N)
    for id2 in (2 * N - 1, 2 * N - 9):
        cached.assoc_delete(1, "likes", id2)
        cache = cached.engine.cache
        assert cache is not None
        assert statements(cached, lambda: cached.assoc_range(1, "likes", 0, N)) == []
        assert cached.assoc_range(1, "likes", 0, N) == plain.assoc_range(1, "likes", 0, N)
        entry = cache._lists[(1, cached.engine.assoc_type("likes").id)]
        assert (0, N) in entry.answers  # patched, still kept


def test_a_tail_read_that_fails_leaves_no_fill_in_flight(graphs: tuple[Graph, Graph]) -> None:
    cached, plain = graphs
    cache, key = _read_list(cached, plain)
    for id2 in range(2 * N - 1, 2 * N - 2 - N // MARGIN, -1):
        cached.assoc_delete(1, "likes", id2)

    def tail(last: tuple[int, int], n: int) -> list[tuple[int, int, int, None]]:
        raise OSError("disk I/O error")

    with pytest.raises(OSError, match="disk I/O error"):
        growth.grow(cache, key, tail, N + N // MARGIN)
    assert cache._fills == {}
    assert cached.assoc_range(1, "likes", 0, N) == plain.assoc_range(1, "likes", 0, N)
