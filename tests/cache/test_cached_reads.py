"""Every cached read: a hit issues no SQL and returns what an uncached read returns,
before and after writes, deletes and state changes, with tier 1 alone and with Redis.

Each read runs three times: the first may fill the list's entry, the second is
answered from the packed prefix (and keeps its answer), the third from the kept
answer (`cache.decoded`). All three must equal the same read on a graph with no
cache, opened on the same directory.
"""

from __future__ import annotations

import gc
import itertools
import os
import sys
import tempfile
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import assocdb
from assocdb import CacheConfig, Graph
from assocdb.api import objects as objects_api
from tests.support.helpers import statements

REDIS = os.environ.get("ASSOCDB_TEST_REDIS_URL")
NO_REDIS = pytest.mark.skipif(not REDIS, reason="no ASSOCDB_TEST_REDIS_URL")
TIERS = [pytest.param(None, id="tier1"), pytest.param(REDIS, id="redis", marks=NO_REDIS)]

Read = Callable[[Graph], object]
encode = msgspec.json.encode


@pytest.fixture(params=TIERS)
def graphs(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Graph, Graph]]:
    cached = assocdb.open(
        tmp_path / "g",
        shards=4,
        cache=CacheConfig(prefix=100, admit_after=1, max_age=3600, redis=request.param),
    )
    cached.define_assoc("follows", inverse="followed_by")
    cached.define_object("user")
    if request.param is not None:
        cached.engine.cache.flush()  # type: ignore[union-attr]  (Redis is shared by tests)
    plain = assocdb.open(tmp_path / "g", cache=None)
    yield cached, plain
    plain.close()
    cached.close()


def reads(plain: Graph, uid: int) -> dict[str, Read]:
    """Every cached read method, on a list of under 100 edges (all of it cached)."""
    first = plain.assoc_page(1, "follows", limit=7)
    reads: dict[str, Read] = {
        "range": lambda g: g.assoc_range(1, "follows", limit=10),
        "range deeper": lambda g: g.assoc_range(1, "follows", pos=5, limit=20),
        "range of the inverse": lambda g: g.assoc_range(105, "followed_by", limit=5),
        # the server's reads: answers kept encoded beside the records
        "range, encoded": lambda g: g._reads.encoded("assoc_range", encode, 1, "follows", 0, 10),
        "range deeper, encoded": lambda g: g._reads.encoded(
            "assoc_range", encode, 1, "follows", 5, 20
        ),
        "first page, encoded": lambda g: g._reads.encoded(
            "assoc_page", encode, 1, "follows", None, 7
        ),
        "empty range": lambda g: g.assoc_range(999, "follows", limit=10),
        "first page": lambda g: g.assoc_page(1, "follows", limit=7),
        "time range": lambda g: g.assoc_time_range(1, "follows", 20, 10),
        "get": lambda g: g.assoc_get(1, "follows", [105, 106, 120, 999]),
        "get in a window": lambda g: g.assoc_get(1, "follows", [105, 120], high=15, low=3),
        "object": lambda g: g.obj_get(uid),
        "no object": lambda g: g.obj_get(uid + 10_000),
    }
    if first.next_cursor is not None:
        cursor = first.next_cursor
        reads["next page"] = lambda g: g.assoc_page(1, "follows", cursor, limit=7)
        reads["next page, encoded"] = lambda g: g._reads.encoded(
            "assoc_page", encode, 1, "follows", cursor, 7
        )
    for state in ("normal", "negative", "archived", "removed"):
        reads[f"count {state}"] = lambda g, s=state: g.assoc_count(1, "follows", s)  # type: ignore[misc]
    return reads


def check(cached: Graph, plain: Graph, uid: int) -> None:
    for name, read in reads(plain, uid).items():
        want = read(plain)
        assert read(cached) == want, name
        for _ in range(2):  # from the packed prefix, then from the kept answer
            got: list[object] = []
            assert statements(cached, lambda read=read, got=got: got.append(read(cached))) == []
            assert got[0] == want, name


def test_every_hit_equals_the_uncached_read_through_writes(graphs: tuple[Graph, Graph]) -> None:
    cached, plain = graphs
    for n in range(1, 31):
        cached.assoc_add(1, "follows", n + 100, time=n, data="s" if n % 3 else None)
    uid = cached.obj_add("user", {"name": "ada"})
    check(cached, plain, uid)
    changes: list[Callable[[], object]] = [
        lambda: cached.assoc_add(1, "follows", 150, time=40),  # a new newest edge
        lambda: cached.assoc_add(1, "follows", 151, time=12, data=7),  # inside the list
        lambda: cached.assoc_delete(1, "follows", 110),
        lambda: cached.assoc_archive(1, "follows", 120),
        lambda: cached.assoc_negate(1, "follows", 106),
        lambda: cached.assoc_add(1, "follows", 120),  # restored
        lambda: cached.assoc_add(1, "follows", 105, time=50),  # moved to the top
        lambda: cached.obj_update(uid, {"name": "ada lovelace"}),
        lambda: cached.obj_delete(uid),
    ]
    for change in changes:
        change()
        check(cached, plain, uid)


def test_node_state_changes_reach_cached_answers(graphs: tuple[Graph, Graph]) -> None:
    cached, plain = graphs
    for n in range(1, 21):
        cached.assoc_add(1, "follows", n + 100, time=n)
    uid = cached.obj_add("user", {})
    check(cached, plain, uid)
    cached.node_archive(1, "follows")
    cached.drain()
    check(cached, plain, uid)
    assert cached.assoc_range(1, "follows") == []
    cached.node_unarchive(1, "follows")
    cached.drain()
    check(cached, plain, uid)
    assert len(cached.assoc_range(1, "follows")) == 20


def test_a_kept_answer_is_the_callers_own_list(graphs: tuple[Graph, Graph]) -> None:
    cached, _ = graphs
    for n in range(1, 6):
        cached.assoc_add(1, "follows", n + 100, time=n)
    for _ in range(3):
        items = cached.assoc_range(1, "follows")
        page = cached.assoc_page(1, "follows")
    items.clear()
    page.items.clear()
    assert len(cached.assoc_range(1, "follows")) == 5
    assert len(cached.assoc_page(1, "follows").items) == 5


def test_kept_answers_stay_within_their_share_and_are_counted(tmp_path: Path) -> None:
    g = assocdb.open(
        tmp_path / "g", shards=2, cache=CacheConfig(max_bytes=200_000, prefix=50, admit_after=1)
    )
    g.define_assoc("likes")
    g.bulk_load([(n, "likes", m, m) for n in range(1, 61) for m in range(1, 41)])
    for _ in range(3):
        for n in range(1, 61):
            g.assoc_range(n, "likes", limit=40)
            g.assoc_page(n, "likes", limit=10)
    g.assoc_add(7, "likes", 1000)  # forgets the answers of list 7
    cache = g.engine.cache
    assert cache is not None
    decoded = cache.decoded
    assert 0 < decoded.bytes <= decoded.budget()
    assert decoded.bytes == sum(e.answer_bytes for e in cache._lists.values())
    assert decoded.count == sum(len(e.answers) for e in cache._lists.values())
    assert cache._lists[(7, 1)].answers == {}
    assert cache.bytes <= cache.config.max_bytes
    assert cache.bytes == sum(e.nbytes + e.answer_bytes for e in cache._lists.values()) + sum(
        v.nbytes for v in cache._objects.values()
    )
    assert sys.getsizeof(decoded._order) < 64 * 1024  # stale items are compacted away
    g.close()


def test_kept_encoded_answers_are_counted_at_what_they_hold(tmp_path: Path) -> None:
    """A server's encoded answer holds more than its JSON's length: the encoder's
    buffer (up to half as large again), the bytes object, the answer's tuple and its
    tag. The cache counts at least what the answers hold, so they stay within their
    share of max_bytes (small lists, the most common, are the worst case). (A cache of
    8 GiB: its answers' floor holds them all.)"""
    config = CacheConfig(admit_after=1, payback=False, max_age=3600, max_bytes=1 << 33)
    g = assocdb.open(tmp_path / "g", shards=2, cache=config)
    g.define_assoc("likes")
    lists = range(1, 1001)
    g.bulk_load([(n, "likes", m, m) for n in lists for m in range(1, n % 25)])
    for _ in range(2):
        for n in lists:  # fills, then keeps the records answers
            g.assoc_range(n, "likes", 0, 30)
    cache = g.engine.cache
    assert cache is not None
    counted = cache.decoded.bytes
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for n in lists:
            g._reads.encoded("assoc_range", encode, n, "likes", 0, 30)
        gc.collect()
        held = sum(d.size_diff for d in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    counted = cache.decoded.bytes - counted
    assert cache.decoded.count == 2 * len(lists)  # each list's records and encoded answer
    assert counted >= 0.9 * held, (counted, held)
    g.close()


def test_answers_a_write_forgot_are_not_held_beyond_max_bytes(tmp_path: Path) -> None:
    """A list read and written in turn keeps an answer and forgets it each time: what
    it forgot must be freed, not held (uncounted) until the answers are compacted.
    (A cache of 256 MiB: its answers' floor, 256 KiB, takes the page; 60 pages held
    would be ~10 MB.)"""
    max_bytes = 1_000_000
    g = assocdb.open(
        tmp_path / "g", shards=2, cache=CacheConfig(max_bytes=256 << 20, admit_after=1)
    )
    g.define_assoc("likes")
    g.bulk_load([(1, "likes", m, m) for m in range(1, 2001)])
    for _ in range(2):  # fills the list's entry (its newest edges), then keeps the answer
        g.assoc_range(1, "likes", 0, 10)
    cache = g.engine.cache
    assert cache is not None
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for n in range(60):
            g._reads.encoded("assoc_page", encode, 1, "likes", None, 2000)  # kept (~170 KB)
            g.assoc_add(1, "likes", 10_000 + n, time=n)  # forgets it
        gc.collect()
        held = sum(d.size_diff for d in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    assert cache.decoded.count == 1  # the newest 10, patched by each write; no page
    assert held < max_bytes, held
    g.close()


def test_readers_racing_a_writer_never_install_an_answer_from_before_its_write(
    tmp_path: Path,
) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(admit_after=1, max_age=3600))
    g.define_assoc("likes")
    stop = threading.Event()
    failures: list[str] = []

    def read() -> None:
        limits = itertools.cycle(range(1, 40))  # new questions: answers are built all the time
        seen = 0  # the newest edge this reader saw: the list only grows, so never less later
        while not stop.is_set():
            limit = next(limits)
            paged = g.assoc_page(1, "likes", limit=limit)
            for got in (paged.items, g.assoc_range(1, "likes", limit=limit)):
                keys = [(a.time, a.id2) for a in got]
                if keys != sorted(set(keys), reverse=True):
                    failures.append(f"not a list: {keys}")
                newest = keys[0][1] if keys else 0
                if newest < seen:
                    failures.append(f"went back from {seen} to {newest} (limit {limit})")
                seen = max(seen, newest)

    with g, racing(read, stop):  # readers stopped, then the graph closed
        for n in range(1, 301):
            g.assoc_add(1, "likes", n, time=n)
            for limit in (5, 17, 31):
                newest = [a.id2 for a in g.assoc_range(1, "likes", limit=limit)]
                assert newest == list(range(n, max(0, n - limit), -1))  # its own write
                assert g.assoc_page(1, "likes", limit=limit).items[0].id2 == n
            assert g.assoc_count(1, "likes") == n
    assert failures == []


def test_the_cache_says_which_hot_keys_it_holds(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig()) as g:
        g.define_assoc("follows")
        g.define_object("user")
        user = g.obj_add("user", {})
        g.assoc_add(user, "follows", 2)
        cache = g.engine.cache
        assert cache is not None
        atype = g.schema.assoc_type("follows").id
        for _ in range(3):  # the doorkeeper admits a key on a repeated miss
            g.obj_get(user)
            g.assoc_range(user, "follows")
        assert cache.holds(("object", user))
        assert cache.holds(("list", user, atype))
        assert not cache.holds(("object", user + 1))
        assert not cache.holds(("list", 2, atype))
        assert not cache.holds(("home", user))
        cache.invalidate()
        assert not cache.holds(("object", user))


def test_an_object_read_from_the_cache_is_the_callers_own(graphs: tuple[Graph, Graph]) -> None:
    cached, plain = graphs
    flat = cached.obj_add("user", {"name": "ada", "n": 1, "score": 1.5, "ok": True, "x": None})
    nested = cached.obj_add("user", {"tags": ["a"], "profile": {"city": "London"}})
    for uid in (flat, nested):
        want = plain.obj_get(uid)
        assert want is not None
        for _ in range(3):  # the fill, the hit that keeps its answer, hits from the answer
            got = cached.obj_get(uid)
            assert got == want
            assert got is not None
            got.data["name"] = "changed by the caller"
            got.data.pop("n", None)
            for value in got.data.values():
                if isinstance(value, list):
                    value.append("changed by the caller")
                elif isinstance(value, dict):
                    value["city"] = "changed by the caller"
        assert statements(cached, lambda uid=uid: cached.obj_get(uid)) == []
        assert cached.obj_get(uid) == want


def test_neither_the_read_after_a_fill_nor_the_read_after_a_write_decodes_an_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(admit_after=1, max_age=3600))
    g.define_object("user")
    uid = g.obj_add("user", {"name": "ada", "n": 1})
    decoded: list[bytes] = []
    decode = objects_api._json.decode
    monkeypatch.setattr(objects_api._json, "decode", lambda raw: decoded.append(raw) or decode(raw))
    first = g.obj_get(uid)  # the miss: it decodes the row once, for itself and the cache
    assert first is not None
    assert first.data == {"name": "ada", "n": 1}
    assert len(decoded) == 1
    assert g.obj_get(uid) == first
    assert len(decoded) == 1
    g.obj_update(uid, {"n": 2})  # a write gives the entry it puts in place its answer
    decoded.clear()
    assert g.obj_get(uid).data == {"name": "ada", "n": 2}  # type: ignore[union-attr]
    assert g.obj_get(uid).data == {"name": "ada", "n": 2}  # type: ignore[union-attr]
    assert decoded == []
    g.obj_delete(uid)
    assert g.obj_get(uid) is None
    assert decoded == []
    g.close()


def test_a_write_whose_object_answer_cannot_be_built_still_succeeds(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(admit_after=1, max_age=3600))
    g.define_object("user")
    uid = g.obj_add("user", {"name": "ada"})
    g.obj_get(uid)
    cache = g.engine.cache
    assert cache is not None

    def broken(row: object) -> None:
        raise RuntimeError("a bug in building the answer")

    cache.obj_answer = broken
    g.obj_update(uid, {"name": "ada lovelace"})
    assert g.obj_get(uid).data == {"name": "ada lovelace"}  # type: ignore[union-attr]
    g.close()


def test_an_answer_built_from_a_replaced_object_entry_is_not_kept(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(admit_after=1, max_age=3600))
    g.define_object("user")
    uid = g.obj_add("user", {"name": "ada"})
    g.obj_get(uid)  # fills the entry
    cache = g.engine.cache
    assert cache is not None
    before = cache.cached_obj(uid)  # a reader holds the entry ...
    assert before is not None
    g.obj_update(uid, {"name": "ada lovelace"})  # ... a write replaces it ...
    nbytes = cache.bytes
    cache.keep_obj(uid, before, "built from the old row", 1000)  # ... then the reader keeps
    assert cache.bytes == nbytes
    got = g.obj_get(uid)
    assert got is not None
    assert got.data == {"name": "ada lovelace"}
    assert statements(g, lambda: g.obj_get(uid)) == []
    g.close()


def test_object_readers_racing_a_writer_never_read_back_in_time(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(admit_after=1, max_age=3600))
    g.define_object("user")
    uid = g.obj_add("user", {"n": 0, "tags": [0]})
    stop = threading.Event()
    failures: list[str] = []

    def read() -> None:
        seen = 0  # the writer only counts up: a reader never sees a smaller n later
        while not stop.is_set():
            got = g.obj_get(uid)
            if got is None or got.data["tags"] != [got.data["n"]]:
                failures.append(f"not a written object: {got}")
                continue
            if got.data["n"] < seen:
                failures.append(f"went back from {seen} to {got.data['n']}")
            seen = got.data["n"]
            got.data["tags"].append("changed by the caller")

    with g, racing(read, stop):  # readers stopped, then the graph closed
        for n in range(1, 301):
            g.obj_update(uid, {"n": n, "tags": [n]})
            for _ in range(3):
                assert g.obj_get(uid).data == {"n": n, "tags": [n]}  # type: ignore[union-attr]
    assert failures == []


def test_an_encoded_read_keeps_its_json_and_not_the_records_beside_it(tmp_path: Path) -> None:
    """A server answers a list read from the JSON it kept: keeping the records too took
    the answers' share of the cache twice over, and a working set that fitted as JSON
    churned through it."""
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(admit_after=1, max_age=3600))
    g.define_assoc("likes")
    g.bulk_load([(1, "likes", m, m) for m in range(1, 80)])
    reads = [("assoc_range", (0, 50)), ("assoc_page", (None, 50))]
    for _ in range(3):
        answers = [g._reads.encoded(read, encode, 1, "likes", *args) for read, args in reads]
    cache = g.engine.cache
    assert cache is not None
    assert cache.decoded.count == len(reads)  # one JSON answer each, no records
    assert answers[0] == (encode(g.assoc_range(1, "likes", 0, 50)), 50)
    assert answers[1] == (encode(g.assoc_page(1, "likes", None, 50)), 50)
    g.close()


@contextmanager
def racing(read: Callable[[], None], stop: threading.Event, readers: int = 3) -> Iterator[None]:
    """Within: `readers` threads run `read` until `stop`, switching as often as the
    interpreter allows (inside the windows that matter); stopped and joined after."""
    threads = [threading.Thread(target=read) for _ in range(readers)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join()
        sys.setswitchinterval(interval)


@settings(max_examples=40, deadline=None)
@given(
    times=st.lists(st.integers(0, 30), max_size=40),
    asks=st.lists(
        st.tuples(st.integers(-1, 32), st.integers(-1, 32), st.integers(1, 45)), min_size=1
    ),
)
def test_a_cached_time_range_equals_the_shards(
    times: list[int], asks: list[tuple[int, int, int]]
) -> None:
    """Time ranges read from the packed prefix (a window cut by time, by the limit,
    by the prefix's end) against the same reads with no cache."""
    with tempfile.TemporaryDirectory() as directory:
        cached = assocdb.open(
            Path(directory) / "g", shards=2, cache=CacheConfig(prefix=16, admit_after=1)
        )
        cached.define_assoc("likes")
        plain = assocdb.open(Path(directory) / "g", cache=None)
        with cached, plain:
            for id2, time in enumerate(times, 1):
                cached.assoc_add(1, "likes", id2, time=time, data=id2 % 2 or None)
            for high, low, limit in asks:
                want = plain.assoc_time_range(1, "likes", high, low, limit)
                for _ in range(2):  # the first may fill the prefix
                    assert cached.assoc_time_range(1, "likes", high, low, limit) == want
