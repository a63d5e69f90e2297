"""The in-process cache: covered reads issue no SQL, writes are read back, fills race safely."""

from __future__ import annotations

import contextlib
import random
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import assocdb
from assocdb import CacheConfig, Graph
from assocdb.cache.entries import DATA_SLOT as _DATA_SLOT
from assocdb.cache.tier1 import Cache, _Fill
from assocdb.core.cachekeys import COUNTS, PREFIX
from assocdb.core.merge import Changes, EdgeRow
from assocdb.storage.registry import open_location
from assocdb.writes.journal import Journal
from tests.support.helpers import statements


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[Graph]:
    g = assocdb.open(tmp_path / "g", shards=4, cache=CacheConfig(prefix=100, admit_after=1))
    g.define_assoc("follows", inverse="followed_by")
    g.define_assoc("likes")
    g.define_object("user")
    yield g
    g.close()


def test_covered_reads_issue_no_sql(graph: Graph) -> None:
    g = graph
    for n in range(1, 31):
        g.assoc_add(1, "follows", n + 100, time=n, data={"n": n} if n % 2 else None)
    uid = g.obj_add("user", {"name": "ada"})
    first = g.assoc_range(1, "follows", limit=10)  # fills
    g.assoc_count(1, "follows")
    g.obj_get(uid)
    assert statements(g, lambda: g.assoc_range(1, "follows", limit=10)) == []
    assert statements(g, lambda: g.assoc_range(1, "follows", pos=5, limit=20)) == []
    assert statements(g, lambda: g.assoc_count(1, "follows")) == []
    assert statements(g, lambda: g.assoc_count(1, "follows", "removed")) == []
    assert statements(g, lambda: g.assoc_time_range(1, "follows", 20, 10)) == []
    g.assoc_get(1, "follows", [101])  # the list's first assoc_get: the shard's (no index yet)
    assert statements(g, lambda: g.assoc_get(1, "follows", [105, 106, 999])) == []
    assert statements(g, lambda: g.obj_get(uid)) == []
    page = g.assoc_page(1, "follows", limit=7)
    assert statements(g, lambda: g.assoc_page(1, "follows", page.next_cursor, limit=7)) == []
    assert g.assoc_range(1, "follows", limit=10) == first
    assert [a.data for a in first[:2]] == [None, {"n": 29}]


def test_a_list_fill_reads_only_the_prefix_and_counts_fill_when_read(graph: Graph) -> None:
    g = graph
    for n in range(1, 8):
        g.assoc_add(1, "follows", n + 100, time=n)
    g.assoc_archive(1, "follows", 103)
    reads = [
        lambda: g.assoc_range(1, "follows", limit=3),
        lambda: g.assoc_page(105, "followed_by"),
        lambda: g.assoc_time_range(106, "followed_by", 10, 0),
    ]
    keys = [(1, "follows"), (105, "followed_by"), (106, "followed_by")]
    for read, key in zip(reads, keys, strict=True):
        assert len(statements(g, read)) == 1  # the fill: the prefix, not the counts
        assert statements(g, read) == []
        assert len(statements(g, lambda key=key: g.assoc_count(*key))) == 1  # a count's fill
        assert statements(g, lambda key=key: g.assoc_count(*key)) == []
    assert g.assoc_count(1, "follows") == 6
    assert g.assoc_count(1, "follows", "archived") == 1
    assert g.assoc_count(105, "followed_by") == 1
    g.assoc_add(1, "follows", 200, time=9)  # the filled counts follow writes
    assert statements(g, lambda: g.assoc_count(1, "follows")) == []
    assert g.assoc_count(1, "follows") == 7


def test_a_count_of_zero_answers_any_range(graph: Graph) -> None:
    graph.assoc_count(5, "likes")  # (on probation: `put_probation`)
    graph.assoc_count(5, "likes")  # the list's entry now
    assert statements(graph, lambda: graph.assoc_range(5, "likes", limit=5000)) == []
    assert statements(graph, lambda: graph.assoc_page(5, "likes")) == []


def test_a_missing_object_is_cached_too(graph: Graph) -> None:
    assert graph.obj_get(424242) is None
    assert statements(graph, lambda: graph.obj_get(424242)) == []


def test_reads_beyond_the_prefix_go_to_the_shard(graph: Graph) -> None:
    g = graph
    g.bulk_load([(2, "likes", n, n) for n in range(1, 251)])  # longer than the prefix of 100
    assert [a.id2 for a in g.assoc_range(2, "likes", limit=5)] == [250, 249, 248, 247, 246]
    assert statements(g, lambda: g.assoc_range(2, "likes", pos=40, limit=10)) == []  # 50 filled
    assert len(statements(g, lambda: g.assoc_range(2, "likes", pos=90, limit=10))) == 1  # grows
    assert statements(g, lambda: g.assoc_range(2, "likes", pos=90, limit=10)) == []
    deep = g.assoc_range(2, "likes", pos=95, limit=10)
    assert [a.id2 for a in deep] == list(range(155, 145, -1))
    assert statements(g, lambda: g.assoc_range(2, "likes", pos=95, limit=10))  # not covered
    walked = [a.id2 for p in g.assoc_pages(2, "likes", limit=40) for a in p.items]
    assert walked == list(range(250, 0, -1))


def test_writes_update_cached_lists_in_place(graph: Graph) -> None:
    g = graph
    for n in range(1, 6):
        g.assoc_add(3, "follows", n, time=n * 10)
    g.assoc_range(3, "follows")
    g.assoc_count(3, "follows")
    g.assoc_add(3, "follows", 6, time=25)
    g.assoc_delete(3, "follows", 2)
    g.assoc_archive(3, "follows", 4)
    g.assoc_add(3, "follows", 1)  # a re-add keeps its time
    reads = statements(g, lambda: g.assoc_range(3, "follows"))
    assert reads == []
    assert [(a.id2, a.time) for a in g.assoc_range(3, "follows")] == [
        (5, 50),
        (3, 30),
        (6, 25),
        (1, 10),
    ]
    assert g.assoc_count(3, "follows") == 4
    assert g.assoc_count(3, "follows", "archived") == 1
    assert g.assoc_count(3, "follows", "removed") == 1


def test_a_full_prefix_drops_its_oldest_and_stays_correct(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(prefix=3, admit_after=1))
    g.define_assoc("likes")
    for n in (10, 20, 30):
        g.assoc_add(1, "likes", n, time=n)
    assert [a.id2 for a in g.assoc_range(1, "likes", limit=3)] == [30, 20, 10]  # complete
    g.assoc_add(1, "likes", 40, time=40)  # the prefix is full: 10 falls out
    g.assoc_add(1, "likes", 5, time=5)  # older than the prefix: not cached
    assert [a.id2 for a in g.assoc_range(1, "likes", limit=5)] == [40, 30, 20, 10, 5]
    g.assoc_delete(1, "likes", 30)
    assert [a.id2 for a in g.assoc_range(1, "likes", limit=5)] == [40, 20, 10, 5]
    g.close()


def test_an_old_edge_never_jumps_the_gap_of_an_incomplete_prefix(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(prefix=3, admit_after=1))
    g.define_assoc("likes")
    for n in (10, 20, 30, 40):
        g.assoc_add(1, "likes", n, time=n)
    assert [a.id2 for a in g.assoc_range(1, "likes", limit=3)] == [40, 30, 20]  # 10 is beyond
    g.assoc_delete(1, "likes", 30)  # the prefix has room now: [40, 20]
    g.assoc_add(1, "likes", 5, time=5)  # older than 10, which the prefix does not hold
    assert [a.id2 for a in g.assoc_range(1, "likes", limit=3)] == [40, 20, 10]
    g.close()


def test_a_slow_fill_never_hides_a_newer_write(graph: Graph) -> None:
    g = graph
    g.assoc_add(4, "likes", 1, time=1)
    started, release = threading.Event(), threading.Event()

    def slow_scans(shard: int, sql: str) -> None:
        if sql.startswith("SELECT id2, time") and not release.is_set():
            started.set()
            release.wait(5)

    g.engine.backend.faults.append(slow_scans)  # type: ignore[attr-defined]
    reader = threading.Thread(target=lambda: g.assoc_range(4, "likes"))
    reader.start()
    started.wait(5)  # the fill has read the shard (without the next write)...
    g.assoc_add(4, "likes", 2, time=2)  # ...when a write lands
    release.set()
    reader.join()
    g.engine.backend.faults.clear()  # type: ignore[attr-defined]
    assert [a.id2 for a in g.assoc_range(4, "likes")] == [2, 1]
    assert g.cache_stats().stale_fills == 1  # type: ignore[union-attr]


def test_a_fill_between_a_writes_commit_and_its_apply_is_not_installed(
    graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that fills a list (prefix and counts) or an object after a write has
    committed, but before the write reaches the cache, must not leave the write
    counted twice or an edge listed twice."""
    g = graph
    for n in range(1, 4):
        g.assoc_add(1, "follows", 100 + n, time=n)
    uid = g.obj_add("user", {"name": "ada"})
    cache = g.engine.cache
    assert cache is not None
    cache.invalidate(None)
    apply = cache.apply

    def late_apply(changes: Any) -> None:
        def read() -> None:
            g.assoc_range(1, "follows", limit=10)
            g.assoc_count(1, "follows")
            g.assoc_range(200, "followed_by")
            g.obj_get(uid)

        reader = threading.Thread(target=read)
        reader.start()
        reader.join()
        apply(changes)

    monkeypatch.setattr(cache, "apply", late_apply)
    g.assoc_add(1, "follows", 200, time=9)
    g.obj_update(uid, {"name": "ada lovelace"})
    monkeypatch.undo()
    for _ in range(2):  # filled now (or before), then a hit
        assert [a.id2 for a in g.assoc_range(1, "follows", limit=10)] == [200, 103, 102, 101]
        assert g.assoc_count(1, "follows") == 4
        assert [a.id2 for a in g.assoc_range(200, "followed_by")] == [1]
        assert g.assoc_count(200, "followed_by") == 1
        obj = g.obj_get(uid)
        assert obj is not None
        assert obj.data == {"name": "ada lovelace"}


def test_concurrent_misses_share_one_fill(graph: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    g = graph
    g.bulk_load([(5, "likes", n, n) for n in range(1, 50)])
    scans: list[str] = []
    gate = threading.Event()
    waiting = threading.Semaphore(0)
    real_wait = _Fill.wait

    def slow(shard: int, sql: str) -> None:
        if sql.startswith("SELECT id2, time"):
            scans.append(sql)
            gate.wait()

    def wait(fill: _Fill) -> None:
        waiting.release()
        real_wait(fill)

    monkeypatch.setattr(_Fill, "wait", wait)
    g.engine.backend.faults.append(slow)  # type: ignore[attr-defined]
    readers = [threading.Thread(target=lambda: g.assoc_range(5, "likes")) for _ in range(8)]
    for r in readers:
        r.start()
    for _ in readers[1:]:  # the other seven wait for the first one's fill
        waiting.acquire()
    gate.set()
    for r in readers:
        r.join()
    g.engine.backend.faults.clear()  # type: ignore[attr-defined]
    assert len(scans) == 1


def test_memory_is_bounded(tmp_path: Path) -> None:
    g = assocdb.open(
        tmp_path / "g", shards=2, cache=CacheConfig(max_bytes=40_000, prefix=100, admit_after=1)
    )
    g.define_assoc("likes")
    g.bulk_load([(n, "likes", m, m) for n in range(1, 41) for m in range(1, 61)])
    for n in range(1, 41):
        g.assoc_range(n, "likes", limit=10)
    stats = g.cache_stats()
    assert stats is not None
    assert stats.bytes <= 40_000
    assert stats.evictions > 0
    assert [a.id2 for a in g.assoc_range(1, "likes", limit=3)] == [60, 59, 58]  # evicted, refilled
    g.close()


class FakeClock:
    """The cache's clock (`Graph(cache_clock=…)`): seconds pass when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def clocked(path: Path, config: CacheConfig, clock: FakeClock) -> Graph:
    """`assocdb.open(path, shards=2, cache=config)`, its cache on `clock`."""
    backend, journal = open_location(path, 2, 2.0, True, None)
    return Graph(backend, Journal(journal), cache=config, cache_clock=clock)


def test_other_processes_writes_show_within_max_age(tmp_path: Path) -> None:
    clock = FakeClock()
    ours = clocked(tmp_path / "g", CacheConfig(max_age=0.3, admit_after=1), clock)
    ours.define_assoc("likes")
    theirs = assocdb.open(tmp_path / "g", cache=None)
    assert ours.assoc_count(1, "likes") == 0
    theirs.assoc_add(1, "likes", 2)
    clock.now += 0.2
    assert ours.assoc_count(1, "likes") == 0  # cached, for now
    clock.now += 0.2  # older than max_age: read again
    assert ours.assoc_count(1, "likes") == 1
    ours.close()
    theirs.close()


def test_hot_keys_name_the_key_and_its_shard(graph: Graph) -> None:
    for _ in range(2000):
        graph.assoc_count(77, "likes")
    top = graph.hot_keys(3)
    assert (top[0].kind, top[0].id, top[0].atype) == (
        "list",
        77,
        graph.schema.assoc_type("likes").id,
    )
    assert top[0].shard == assocdb.core.ids.shard_of(77, graph.shards)
    assert top[0].per_second > 0


def test_bulk_loads_and_repairs_drop_the_cache(graph: Graph) -> None:
    graph.assoc_count(9, "likes")
    graph.bulk_load([(9, "likes", 1)])
    assert graph.assoc_count(9, "likes") == 1


def test_the_cache_can_be_turned_off(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "g", cache=None)
    g.define_assoc("likes")
    g.assoc_add(1, "likes", 2)
    assert g.cache_stats() is None
    assert g.hot_keys() == []
    assert statements(g, lambda: g.assoc_count(1, "likes"))  # always the shard
    g.close()


def full_cache(tmp_path: Path) -> Graph:
    """A graph whose small cache is already full of other lists. (Each is read twice:
    with `payback` such fills, never hit, would close fills at the first verdict.)"""
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(max_bytes=60_000, payback=False))
    g.define_assoc("likes")
    g.bulk_load([(1, "likes", n, n) for n in range(1, 2000)])
    g.bulk_load([(id1, "likes", n, n) for id1 in range(10, 200) for n in range(1, 4)])
    for id1 in range(10, 200):
        g.assoc_range(id1, "likes")
        g.assoc_range(id1, "likes")  # the second miss fills
    stats = g.cache_stats()
    assert stats is not None
    assert stats.bytes > 0.9 * 60_000
    return g


def test_with_admit_after_1_every_miss_fills(graph: Graph) -> None:
    g = graph
    g.assoc_add(1, "follows", 2)
    assert statements(g, lambda: g.assoc_count(1, "follows"))
    assert statements(g, lambda: g.assoc_count(1, "follows")) == []


def test_an_empty_cache_admits_a_key_on_its_second_miss(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig())  # the default: admit_after 2
    g.define_assoc("likes")
    g.bulk_load([(1, "likes", n, n) for n in range(1, 2000)])
    cache = g.engine.cache
    assert cache is not None
    read = lambda: g.assoc_range(1, "likes", limit=50)  # noqa: E731
    assert len(statements(g, read)) == 1  # read once: just what was asked, no fill
    assert cache.fills == 0
    assert len(statements(g, read)) == 1  # second miss: one fill, one statement
    assert statements(g, read) == []  # cached
    entry = cache._lists[(1, g.schema.assoc_type("likes").id)]
    assert entry.prefix is not None
    assert len(entry.prefix) == 50  # the 50 read, not 1,000
    assert entry.counts is None  # a list's fill reads no counts
    # A count's fill is the statement its uncached read runs: filled on its first miss.
    assert len(statements(g, lambda: g.assoc_count(1, "likes"))) == 1
    assert statements(g, lambda: g.assoc_count(1, "likes")) == []
    assert g.assoc_count(1, "likes") == 1999
    stats = g.cache_stats()
    assert stats is not None
    assert (stats.fills, stats.misses, stats.hits) == (2, 3, 3)
    assert stats.fill_us > 0
    g.close()


def test_a_full_cache_admits_a_key_on_its_second_miss(tmp_path: Path) -> None:
    g = full_cache(tmp_path)
    first = statements(g, lambda: g.assoc_range(1, "likes", limit=10))
    assert len(first) == 1  # read once: just the page, no prefix fill
    assert "LIMIT" in first[0]
    assert statements(g, lambda: g.assoc_range(1, "likes", limit=10))  # second miss: fills
    assert statements(g, lambda: g.assoc_range(1, "likes", limit=10)) == []  # cached
    g.close()


def test_an_invalidated_key_is_refilled_on_its_next_miss(tmp_path: Path) -> None:
    g = full_cache(tmp_path)
    g.assoc_count(1, "likes")
    g.assoc_count(1, "likes")  # second miss: cached
    assert statements(g, lambda: g.assoc_count(1, "likes")) == []
    assert g.engine.cache is not None
    likes = g.schema.assoc_type("likes").id
    g.engine.cache.invalidate([("counts", (1, likes))])  # as another process's write does
    assert statements(g, lambda: g.assoc_count(1, "likes"))  # refilled at once
    assert statements(g, lambda: g.assoc_count(1, "likes")) == []
    g.close()


def test_data_read_from_the_cache_is_the_callers_own(graph: Graph) -> None:
    g = graph
    g.assoc_add(1, "follows", 2, data={"tags": ["a"]})
    g.assoc_add(1, "follows", 3, data="plain")
    for _ in range(3):
        first = g.assoc_range(1, "follows")
    assert statements(g, lambda: g.assoc_range(1, "follows")) == []  # cached
    first[1].data["tags"].append("changed by the caller")
    again = g.assoc_range(1, "follows")
    assert [a.data for a in again] == ["plain", {"tags": ["a"]}]


def test_the_cache_counts_its_bytes_exactly_through_writes(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(prefix=20, admit_after=1))
    g.define_assoc("likes")
    rng = random.Random(7)
    for n in range(300):
        if n % 25 == 0:
            g.assoc_range(1, "likes", limit=20)  # (re)fill the prefix
        id2 = rng.randrange(1, 40)
        if rng.random() < 0.3:
            g.assoc_delete(1, "likes", id2)
        else:
            data = rng.choice([None, "x" * rng.randrange(50), {"n": n}, n])
            g.assoc_add(1, "likes", id2, time=rng.randrange(100), data=data)
    cache = g.engine.cache
    assert cache is not None
    for entry in cache._lists.values():
        assert entry.data_bytes == sum(sys.getsizeof(v) + _DATA_SLOT for v in entry.data.values())
        assert entry.nbytes == entry.measure()
    assert cache.bytes == sum(e.nbytes for e in cache._lists.values()) + sum(
        v.nbytes for v in cache._objects.values()
    )
    g.close()


def test_refilling_an_aged_object_does_not_count_it_twice(tmp_path: Path) -> None:
    clock = FakeClock()
    g = clocked(tmp_path / "g", CacheConfig(max_age=0.05, admit_after=1), clock)
    g.define_object("user")
    ids = [g.obj_add("user", {"bio": "x" * 200}) for _ in range(5)]
    for _ in range(3):
        for obj_id in ids:
            assert g.obj_get(obj_id) is not None
        clock.now += 0.1  # every entry ages out; the next reads refill them
    cache = g.engine.cache
    assert cache is not None
    assert cache.bytes == sum(e.nbytes for e in cache._lists.values()) + sum(
        v.nbytes for v in cache._objects.values()
    )
    g.close()


def test_a_fill_that_fails_to_install_still_releases_the_readers_waiting_for_it(
    graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = graph
    g.bulk_load([(5, "likes", n, n) for n in range(1, 50)])
    cache = g.engine.cache
    assert cache is not None
    loading, release, waiting = threading.Event(), threading.Event(), threading.Event()

    def slow(shard: int, sql: str) -> None:
        if sql.startswith("SELECT id2, time") and not loading.is_set():
            loading.set()
            release.wait()

    g.engine.backend.faults.append(slow)  # type: ignore[attr-defined]
    real_wait, real_install = _Fill.wait, cache._install
    failures = [RuntimeError("the first install fails")]

    def wait(fill: _Fill) -> None:
        waiting.set()
        real_wait(fill)

    def install(*args: Any) -> None:
        if failures:
            raise failures.pop()
        real_install(*args)

    monkeypatch.setattr(_Fill, "wait", wait)
    monkeypatch.setattr(cache, "_install", install)
    answers: list[object] = []

    def read() -> None:
        try:
            answers.append([a.id2 for a in g.assoc_range(5, "likes", limit=3)])
        except RuntimeError as exc:
            answers.append(exc)

    first = threading.Thread(target=read)
    first.start()
    loading.wait()
    second = threading.Thread(target=read)  # misses too, and waits for the first's fill
    second.start()
    waiting.wait()
    release.set()
    first.join()
    second.join(timeout=120)  # patience only: before the fix it waited for ever
    assert not second.is_alive()
    assert sorted(map(str, answers)) == sorted(["the first install fails", "[49, 48, 47]"])


def test_kept_object_answers_are_counted_and_freed(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(max_bytes=60_000, admit_after=1))
    g.define_object("user")
    rng = random.Random(5)
    ids = [g.obj_add("user", {"bio": "x" * 100, "n": n}) for n in range(200)]
    for n in range(3000):
        uid = rng.choice(ids[:120])  # more than fit: entries are evicted too
        roll = rng.random()
        if roll < 0.1:
            with contextlib.suppress(assocdb.NotFound):  # deleted before
                g.obj_update(uid, {"n": n, "tags": [n]} if n % 2 else {"n": n})
        elif roll < 0.12:
            g.obj_delete(uid)
        else:
            g.obj_get(uid)
    cache = g.engine.cache
    assert cache is not None
    entries = list(cache._objects.values())
    assert any(e.answer_bytes for e in entries)  # answers were kept ...
    assert cache.evictions  # ... and entries evicted
    assert cache.bytes <= cache.config.max_bytes
    assert cache.bytes == sum(e.nbytes for e in cache._lists.values()) + sum(
        e.nbytes for e in entries
    )
    g.close()


def test_an_object_read_again_and_again_outlives_ones_read_once(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(max_bytes=20_000, admit_after=1))
    g.define_object("user")
    hot = g.obj_add("user", {"name": "hot"})
    cache = g.engine.cache
    assert cache is not None
    for n in range(300):  # far more than fit
        g.obj_get(g.obj_add("user", {"n": n}))
        assert statements(g, lambda: g.obj_get(hot)) == [] or n == 0
    assert cache.evictions > 200
    assert cache.holds(("object", hot))
    g.close()


def test_a_growing_prefix_stays_exact_under_concurrent_writes(tmp_path: Path) -> None:
    # Reads that need more and more of a list grow its prefix fill by fill while
    # another thread adds and deletes edges of it: every grown prefix must be the
    # list's newest edges, as a cacheless reader of the same files sees them.
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(prefix=300, admit_after=1))
    g.define_assoc("likes")
    g.bulk_load([(1, "likes", n, n) for n in range(1, 250)])
    cache = g.engine.cache
    assert cache is not None
    key = (1, g.schema.assoc_type("likes").id)
    stop = threading.Event()

    def write() -> None:
        rng, n = random.Random(43), 1000
        while not stop.is_set():
            if rng.random() < 0.6:
                g.assoc_add(1, "likes", n, time=rng.randrange(1, 400))
                n += 1
            else:
                g.assoc_delete(1, "likes", rng.randrange(1, 250))

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for r in range(6):
            cache.invalidate([(PREFIX, key)])  # from a short fill again
            for limit in range(5, 160, 7 + r):
                assert len(g.assoc_range(1, "likes", limit=limit)) == limit
    finally:
        stop.set()
        writer.join()
    plain = assocdb.open(tmp_path / "g", cache=None)
    for limit in (10, 64, 128, 150, 300):
        assert g.assoc_range(1, "likes", limit=limit) == plain.assoc_range(1, "likes", limit=limit)
    assert cache.fills > 6  # the prefix grew
    plain.close()
    g.close()


@pytest.mark.parametrize(("pos", "limit"), [(0, 50), (10, 30), (0, 200), (60, 10)])
def test_a_fill_answers_from_the_rows_it_read(tmp_path: Path, pos: int, limit: int) -> None:
    """The read that fills a list builds its records from the rows the fill read (no
    data on them) or from the packed prefix (data): both as the shard answers, and the
    answer kept for the next read."""
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig())  # admit_after 2
    plain = assocdb.open(tmp_path / "g", cache=None)
    g.define_assoc("likes")
    g.bulk_load([(1, "likes", n, n) for n in range(1, 120)])  # no data
    g.bulk_load([(2, "likes", n, n, {"n": n} if n % 3 else None) for n in range(1, 120)])
    g.bulk_load([(3, "likes", n, n) for n in range(1, 20)])  # short: filled whole
    for id1 in (1, 2, 3):
        want = plain.assoc_range(id1, "likes", pos, limit)
        assert g.assoc_range(id1, "likes", pos, limit) == want  # first miss
        assert g.assoc_range(id1, "likes", pos, limit) == want  # the fill
        assert statements(g, lambda i=id1: g.assoc_range(i, "likes", pos, limit)) == []
        assert g.assoc_range(id1, "likes", pos, limit) == want
        g.assoc_add(id1, "likes", 500, time=500)  # a write patches or drops what was kept
        assert g.assoc_range(id1, "likes", pos, limit) == plain.assoc_range(
            id1, "likes", pos, limit
        )
    plain.close()
    g.close()


@pytest.mark.parametrize("during", ["write", "unfinished write", "invalidation"])
def test_a_count_fill_a_write_overlaps_is_not_installed(during: str) -> None:
    """A count's fill has no ticket: what a write or an invalidation overlapped is
    read, answered, and not kept (a later read fills again)."""
    cache = Cache(CacheConfig())
    key = (1, 2)

    def load() -> dict[int, int]:
        if during == "invalidation":
            cache.invalidate([(COUNTS, key)])
        else:
            cache.writing([(COUNTS, key)])
            if during == "write":
                cache.written([(COUNTS, key)])
        return {0: 5}

    assert cache.fill_counts(key, load) == [5, 0, 0, 0]
    assert cache.count(key, 0) is None
    assert cache.stats().stale_fills == 1
    if during == "unfinished write":
        assert cache.fill_counts(key, lambda: {0: 6}) == [6, 0, 0, 0]
        assert cache.count(key, 0) is None  # still being written
        cache.written([(COUNTS, key)])
    assert cache.fill_counts(key, lambda: {0: 6, 3: 1}) == [6, 0, 0, 1]
    assert cache.count(key, 0) == 6
    assert cache.count(key, 3) == 1


@pytest.mark.parametrize("fails", [False, True])
def test_apply_with_its_tickets_ends_the_write(fails: bool) -> None:
    """`apply(changes, tickets)` is `apply` then `written` under one lock: the write's
    entries may be filled again afterwards, even when applying the changes raised."""
    cache = Cache(CacheConfig())
    key = (1, 2)
    tickets = [(COUNTS, key), (PREFIX, key)]
    cache.writing(tickets)
    assert cache.fill_counts(key, lambda: {0: 5}) == [5, 0, 0, 0]
    assert cache.count(key, 0) is None  # being written: not kept

    def edges() -> Iterator[tuple[None, EdgeRow]]:
        yield None, EdgeRow(1, 2, 3, 0, 10, 10_000, None)
        if fails:
            raise RuntimeError("a bug applying the changes")

    changes = Changes(list(edges()) if not fails else edges(), [], [])  # type: ignore[arg-type]
    if fails:
        with pytest.raises(RuntimeError):
            cache.apply(changes, tickets)
    else:
        cache.apply(changes, tickets)
    assert cache.fill_counts(key, lambda: {0: 6}) == [6, 0, 0, 0]
    assert cache.count(key, 0) == 6  # the write is over: the fill is kept
