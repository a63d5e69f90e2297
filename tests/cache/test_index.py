"""assoc_get from the cache (`AssocReads._index_from_cache`): a whole small list answers
by id2; a prefix of a longer list is marked once, and its marker goes when the entry
changes (a longer fill that holds the whole list then answers)."""

from __future__ import annotations

from pathlib import Path

import assocdb
from assocdb import CacheConfig
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
    for _ in range(4):  # asked, marked, then answered by the shard each time
        got = g.assoc_get(1, "likes", wanted)
        assert sorted(a.id2 for a in got) == [3, 79]
    assert len(statements(g, lambda: g.assoc_get(1, "likes", wanted))) == 1
    g.assoc_range(1, "likes", 0, 100)  # a longer fill: the whole list now, marker gone
    g.assoc_get(1, "likes", wanted)  # asked
    got = g.assoc_get(1, "likes", wanted)  # the index is built
    assert sorted(a.id2 for a in got) == [3, 79]
    assert statements(g, lambda: g.assoc_get(1, "likes", wanted)) == []
    g.assoc_delete(1, "likes", 79)  # a write: the index goes, the answer stays right
    assert sorted(a.id2 for a in g.assoc_get(1, "likes", wanted)) == [3]
    g.close()
