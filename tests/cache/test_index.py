"""assoc_get from the cache (`AssocReads._get_from_cache`): a whole small list answers,
probed in its packed prefix (a hot list: by an index kept with its answers); a prefix
of a longer list does not (the shard answers) until a longer fill holds it whole."""

from __future__ import annotations

from pathlib import Path

import assocdb
from assocdb import CacheConfig
from assocdb.core.cachekeys import LIST
from tests.support.helpers import statements


def test_a_prefix_of_a_longer_list_reads_the_shard_until_the_whole_list_is_cached(
    tmp_path: Path,
) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(admit_after=1, max_age=3600))
    g.define_assoc("likes")
    g.bulk_load([(1, "likes", n, n) for n in range(1, 81)])  # 80 edges: longer than 50
    newest = lambda: g.assoc_range(1, "likes", 0, 50)  # noqa: E731
    newest()  # the entry: a prefix of 50
    wanted = [3, 79, 200]
    for _ in range(4):  # answered by the shard each time
        got = g.assoc_get(1, "likes", wanted)
        assert sorted(a.id2 for a in got) == [3, 79]
    assert len(statements(g, lambda: g.assoc_get(1, "likes", wanted))) == 1
    cache = g.engine.cache
    assert cache is not None
    held, cache.held = cache.held, None  # type: ignore[method-assign,assignment]
    # The prefix could not answer: the read goes to the shard without locking the
    # entry (a one-off assoc_get of a long list cost ~6 µs more than uncached).
    assert sorted(a.id2 for a in g.assoc_get(1, "likes", wanted)) == [3, 79]
    cache.held = held  # type: ignore[method-assign]
    g.assoc_range(1, "likes", 0, 100)  # a longer fill: the whole list now
    got = g.assoc_get(1, "likes", wanted)  # probed in the prefix, newest first
    assert [a.id2 for a in got] == [79, 3]
    assert statements(g, lambda: g.assoc_get(1, "likes", wanted)) == []
    g.assoc_delete(1, "likes", 79)  # a write: the index goes, the answer stays right
    assert sorted(a.id2 for a in g.assoc_get(1, "likes", wanted)) == [3]
    g.close()


def test_a_hot_list_answers_from_its_kept_index_and_a_write_keeps_it_right(
    tmp_path: Path,
) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(admit_after=1))
    g.define_assoc("likes")
    g.bulk_load([(1, "likes", n, n, {"n": n} if n == 7 else None) for n in range(1, 31)])
    cache = g.engine.cache
    assert cache is not None
    g.assoc_range(1, "likes", 0, 50)  # the whole list (30 edges)
    key = (1, g.schema.assoc_type("likes").id)
    cache.hot._hot = frozenset({(LIST, *key)})  # (as sampling would find it)
    wanted = [30, 7, 99, 1]
    for _ in range(3):  # the index built once and kept, then a dict lookup
        assert statements(g, lambda: g.assoc_get(1, "likes", wanted)) == []
        got = g.assoc_get(1, "likes", wanted)
        assert [(a.id2, a.data) for a in got] == [(30, None), (7, {"n": 7}), (1, None)]
    assert cache.answer(key, "index") is not None
    g.assoc_add(1, "likes", 99, time=100)  # a write drops the index, the answer stays right
    assert [a.id2 for a in g.assoc_get(1, "likes", wanted)] == [99, 30, 7, 1]
    g.close()
