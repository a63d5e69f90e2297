"""Tier 2: Redis shared by processes. Writes are seen everywhere once invalidations
arrive; a Redis outage costs no errors."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis
from hypothesis import settings

import assocdb
from assocdb import CacheConfig, Client, Graph
from assocdb.cache import redis_tier
from tests.api.test_state_machine import GraphMachine
from tests.http.test_server import make_graph
from tests.support.helpers import wait_until
from tests.support.http_server import ADMIN, WRITER, Server, free_port
from tests.support.redis_server import RedisProcess, redis_url

REDIS = os.environ.get("ASSOCDB_TEST_REDIS_URL")
needs_redis = pytest.mark.skipif(not REDIS, reason="ASSOCDB_TEST_REDIS_URL is not set")


class RedisGraphMachine(GraphMachine):
    """Tier 1 and Redis, one process: the writer always reads its own writes."""

    CACHE = CacheConfig(redis=REDIS)


class TwoProcessesMachine(GraphMachine):
    """Writes through one graph, reads through another one sharing Redis (as another app
    server would): once the writer's invalidations have arrived, never stale."""

    CACHE = CacheConfig(redis=REDIS)

    def __init__(self) -> None:
        super().__init__()
        self.other = assocdb.open(self.directory, cache=self.CACHE)

    def teardown(self) -> None:
        self.other.close()
        super().teardown()

    def reader(self) -> assocdb.Graph:
        writer, reader = self.graph.engine.cache.tier2, self.other.engine.cache.tier2  # type: ignore[union-attr]
        assert reader.wait_for(writer.barrier())  # type: ignore[union-attr]
        return self.other


RedisGraphMachine.TestCase.settings = settings(
    max_examples=30, stateful_step_count=30, deadline=None
)
TwoProcessesMachine.TestCase.settings = settings(
    max_examples=30, stateful_step_count=30, deadline=None
)
TestRedisGraphMachine = needs_redis(RedisGraphMachine.TestCase)
TestTwoProcessesMachine = needs_redis(TwoProcessesMachine.TestCase)


def test_a_fill_older_than_a_write_is_not_stored_in_redis(tmp_path: Path) -> None:
    cache = CacheConfig(redis=redis_url(), admit_after=1)
    filler = assocdb.open(tmp_path / "g", shards=2, cache=cache)
    filler.define_assoc("likes")
    writer = assocdb.open(tmp_path / "g", cache=cache)
    filler.assoc_add(1, "likes", 1, time=1)
    started, release = threading.Event(), threading.Event()

    def slow(shard: int, sql: str) -> None:
        if sql.startswith("SELECT id2, time") and not release.is_set():
            started.set()
            release.wait(5)

    filler.engine.backend.faults.append(slow)  # type: ignore[attr-defined]
    reading = threading.Thread(target=lambda: filler.assoc_range(1, "likes"))
    reading.start()
    started.wait(5)  # the fill read the shard before...
    writer.assoc_add(1, "likes", 2, time=2)  # ...this write
    release.set()
    reading.join()
    filler.engine.backend.faults.clear()  # type: ignore[attr-defined]
    third = assocdb.open(tmp_path / "g", cache=cache)
    assert [a.id2 for a in third.assoc_range(1, "likes")] == [2, 1]  # not the stale fill
    for g in (filler, writer, third):
        g.close()


def test_a_fill_older_than_a_bulk_load_is_not_stored_in_redis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bulk load changes rows around the cache and flushes Redis: a fill that read
    # the shard before the load must not store its value after the flush.
    cache = CacheConfig(redis=redis_url(), admit_after=1)
    filler = assocdb.open(tmp_path / "g", shards=2, cache=cache)
    filler.define_assoc("likes")
    loader = assocdb.open(tmp_path / "g", cache=cache)
    filler.assoc_add(1, "likes", 1, time=1)
    tier = filler.engine.cache.tier2  # type: ignore[union-attr]
    offering, release = threading.Event(), threading.Event()
    put = tier.put

    def held_put(key: tuple[str, object], value: object, version: bytes | None) -> None:
        if key[0] == "prefix":
            offering.set()
            release.wait()
        put(key, value, version)

    monkeypatch.setattr(tier, "put", held_put)
    reading = threading.Thread(target=lambda: filler.assoc_range(1, "likes"))
    reading.start()
    offering.wait()  # the fill read the shard before...
    loader.bulk_load([(1, "likes", 2, 2)])  # ...this load, which flushes Redis
    release.set()
    reading.join()
    third = assocdb.open(tmp_path / "g", cache=cache)
    assert [a.id2 for a in third.assoc_range(1, "likes")] == [2, 1]  # not the stale fill
    for g in (filler, loader, third):
        g.close()


def test_a_redis_outage_costs_no_errors(tmp_path: Path) -> None:
    private = RedisProcess(tmp_path)
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(redis=private.url, admit_after=1))
    g.define_assoc("likes")
    g.assoc_add(1, "likes", 2)
    assert g.assoc_count(1, "likes") == 1
    private.kill()
    for n in range(3, 30):  # writes and reads carry on through tier 1 and the shards
        assert g.assoc_add(1, "likes", n).status == "applied"
        assert g.assoc_count(1, "likes") == n - 1
        assert g.obj_get(n) is None
    stats = g.cache_stats()
    assert stats is not None
    assert stats.redis_failures > 0
    g.close()


def test_two_app_servers_sharing_redis(tmp_path: Path) -> None:
    url = redis_url()
    directory = tmp_path / "graph"
    make_graph(directory)
    first = Server(directory, True, "--redis", url)
    second = Server(directory, True, "--redis", url)
    try:
        with Client(first.url, token=WRITER) as a, Client(second.url, token=WRITER) as b:
            assert b.assoc_count(1, "follows") == 0  # cached by the second server
            lags = []
            for n in range(2, 22):
                a.assoc_add(1, "follows", n)
                start = time.perf_counter()
                wait_until(lambda n=n: b.assoc_count(1, "follows") == n - 1)  # type: ignore[misc]
                lags.append(time.perf_counter() - start)
            assert b.assoc_count(1, "follows") == 20  # no write since: answered from the cache
        with Client(second.url, token=ADMIN) as admin:
            stats = admin.cache_stats()
            assert stats is not None
            assert stats.hits > 0
        lags.sort()
        median, worst = lags[10] * 1e3, lags[-1] * 1e3
        print(f"\nvisible on the other server after: median {median:.1f} ms, max {worst:.1f} ms")
    finally:
        first.stop()
        second.stop()


def check_no_stale_reads(writer: Graph, other: Graph, seconds: float, bound: float) -> None:
    """For `seconds`: the writer always reads its write; the other process within `bound`."""
    start = time.monotonic()
    stale_in_other = []
    while time.monotonic() < start + seconds:
        assert writer.assoc_count(1, "likes") == 2  # read-after-write: always
        if other.assoc_count(1, "likes") != 2:
            stale_in_other.append(time.monotonic() - start)
    assert max(stale_in_other, default=0.0) < bound
    assert other.assoc_count(1, "likes") == 2


def two_processes(url: str, where: Path) -> tuple[Graph, Graph]:
    """A writer and another process (each its own tier 1) sharing Redis; count 1 cached."""
    cache = CacheConfig(redis=url, max_age=0.2, admit_after=1)
    writer = assocdb.open(where, shards=2, cache=cache)
    writer.define_assoc("likes")
    other = assocdb.open(where, cache=cache)
    writer.assoc_add(1, "likes", 2)
    assert writer.assoc_count(1, "likes") == 1  # cached in Redis and in both tiers 1
    assert other.assoc_count(1, "likes") == 1
    return writer, other


def test_a_reader_waits_for_the_missed_invalidations_another_thread_is_sending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The listener sends the invalidations Redis missed while a reader asks Redis
    # for one of those keys: the reader must wait for the send, not read the old
    # value it deletes (the writer read its old count back, one run in three).
    private = RedisProcess(tmp_path)
    writer, other = two_processes(private.url, tmp_path / "g")
    tier = writer.engine.cache.tier2  # type: ignore[union-attr]
    key = ("counts", (1, writer.schema.assoc_type("likes").id))
    assert tier.get(key)[2]  # Redis holds the count 1
    tier._keep_unsent([key], everything=False)  # as if a write's invalidation missed Redis
    sending, proceed = hold_first_call(monkeypatch, tier, "_send_invalidations")
    reader_waits = threading.Event()
    sender = threading.Thread(target=tier._up)
    sender.start()
    sending.wait()
    lock = tier._sending

    class Watched:
        def __enter__(self) -> None:
            reader_waits.set()
            lock.acquire()

        def __exit__(self, *exc: object) -> None:
            lock.release()

    tier._sending = Watched()
    answers: list[tuple[object, object, bool]] = []
    reader = threading.Thread(target=lambda: answers.append(tier.get(key)))
    reader.start()
    wait_until(lambda: reader_waits.is_set() or not reader.is_alive())
    proceed.set()
    for thread in (sender, reader):
        thread.join()
    assert answers[0][2] is False  # the send deleted the old count before the read
    for g in (writer, other):
        g.close()
    private.kill()


def test_an_invalidation_kept_while_the_missed_ones_are_sent_is_not_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # While the listener sends the invalidations Redis missed, another thread's read
    # fails (Redis is paused again) and a new write of the same key keeps its own
    # invalidation. The send may have reached Redis before that write: its
    # invalidation must still be sent, or Redis serves the value it replaced.
    private = RedisProcess(tmp_path)
    writer, other = two_processes(private.url, tmp_path / "g")
    tier = writer.engine.cache.tier2  # type: ignore[union-attr]
    key = ("counts", (1, writer.schema.assoc_type("likes").id))
    tier._keep_unsent([key], everything=False)  # an earlier write's invalidation missed Redis
    sending, proceed = hold_first_call(monkeypatch, tier, "_send_invalidations")
    sender = threading.Thread(target=tier._up)
    sender.start()
    sending.wait()
    tier._failed(OSError("another thread's read timed out"))
    tier.invalidate([key])  # a new write of the key, while Redis is paused: kept
    proceed.set()
    sender.join()
    other_tier = other.engine.cache.tier2  # type: ignore[union-attr]
    _, version, found = other_tier.get(key)
    assert not found
    other_tier.put(key, {0: 1}, version)  # a fill that read the shard before the new write
    tier._down_until = 0.0  # the pause is over
    assert tier.get(key)[2] is False  # the new write's invalidation was sent first
    for g in (writer, other):
        g.close()
    private.kill()


def test_a_flush_kept_while_a_flush_is_sent_is_not_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A flush (a bulk load changed rows around the cache) kept while Redis is paused
    # during the send of an earlier missed flush: it must be sent as well.
    private = RedisProcess(tmp_path)
    writer, other = two_processes(private.url, tmp_path / "g")
    tier = writer.engine.cache.tier2  # type: ignore[union-attr]
    key = ("counts", (1, writer.schema.assoc_type("likes").id))
    tier._keep_unsent([], everything=True)  # an earlier flush missed Redis
    sending, proceed = hold_first_call(monkeypatch, tier, "_send_flush")
    sender = threading.Thread(target=tier._up)
    sender.start()
    sending.wait()
    tier._failed(OSError("another thread's read timed out"))
    tier.flush()  # a new bulk load's flush, while Redis is paused: kept
    proceed.set()
    sender.join()
    other_tier = other.engine.cache.tier2  # type: ignore[union-attr]
    _, version, found = other_tier.get(key)
    assert not found
    other_tier.put(key, {0: 1}, version)  # a fill that read the shard before the bulk load
    tier._down_until = 0.0  # the pause is over
    assert tier.get(key)[2] is False  # the new flush was sent first
    for g in (writer, other):
        g.close()
    private.kill()


def test_a_malformed_message_on_the_channel_does_not_stop_the_listener(tmp_path: Path) -> None:
    # Anything may be published on the graph's channel (another version, a typo in
    # redis-cli): the listener skips it and goes on delivering invalidations.
    url = redis_url()
    # Entries live long: only an invalidation drops them.
    cache = CacheConfig(redis=url, admit_after=1)
    writer = assocdb.open(tmp_path / "g", shards=2, cache=cache)
    writer.define_assoc("likes")
    other = assocdb.open(tmp_path / "g", cache=cache)
    writer.assoc_add(1, "likes", 2)
    assert other.assoc_count(1, "likes") == 1
    tier = other.engine.cache.tier2  # type: ignore[union-attr]
    client = redis.Redis.from_url(url)
    for junk in (
        1,
        ["x", ["barrier"]],
        ["x", [1, 2]],
        ["x", [["counts", 1]]],
        ["x", 7],
        ["x", [["object", [1]]]],
        ["x", [["counts", [[1], 2]]]],
    ):
        client.publish(tier._channel, msgspec.msgpack.encode(junk))
    client.close()
    writer.assoc_add(1, "likes", 3)
    assert tier.wait_for(writer.engine.cache.tier2.barrier())  # type: ignore[union-attr]
    assert other.assoc_count(1, "likes") == 2
    for g in (writer, other):
        g.close()


def test_the_listener_sends_missed_invalidations_while_the_channel_is_busy(
    tmp_path: Path,
) -> None:
    # Other processes write all the time: the listener always has a message to
    # read. It must still send this process's missed invalidations once Redis
    # answers, though this process reads and writes nothing more.
    url = redis_url()
    writer, other = two_processes(url, tmp_path / "g")
    tier = writer.engine.cache.tier2  # type: ignore[union-attr]
    key = ("counts", (1, writer.schema.assoc_type("likes").id))
    stop = threading.Event()

    def busy() -> None:
        client = redis.Redis.from_url(url)
        while not stop.is_set():
            client.publish(tier._channel, msgspec.msgpack.encode(["elsewhere", []]))
        client.close()

    publisher = threading.Thread(target=busy)
    publisher.start()
    try:
        tier._keep_unsent([key], everything=False)  # a write's invalidation missed Redis
        wait_until(lambda: not tier._unsent, patience=5.0)
    finally:
        stop.set()
        publisher.join()
    assert other.engine.cache.tier2.get(key)[2] is False  # type: ignore[union-attr]
    for g in (writer, other):
        g.close()


def test_a_flush_deletes_a_page_of_keys_per_round_trip(tmp_path: Path) -> None:
    # Readers wait while a flush Redis missed is sent: a round trip per cached key
    # made them wait ~10 s per 100,000 keys.
    private = RedisProcess(tmp_path)
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(redis=private.url, admit_after=1))
    prefix = g.engine.cache.tier2._prefix  # type: ignore[union-attr]
    client = redis.Redis.from_url(private.url)
    pipe = client.pipeline(transaction=False)
    for n in range(5000):
        pipe.set(f"{prefix}c:{n}:1", b"cached")
    pipe.execute()
    client.config_resetstat()
    g.engine.cache.flush()  # type: ignore[union-attr]
    assert client.keys(prefix + "*") == []
    assert client.info("commandstats")["cmdstat_unlink"]["calls"] <= 10
    client.close()
    g.close()
    private.kill()


def test_after_a_redis_hang_no_process_reads_its_old_values_for_long(tmp_path: Path) -> None:
    private = RedisProcess(tmp_path)
    writer, other = two_processes(private.url, tmp_path / "g")
    private.process.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        assert writer.assoc_add(1, "likes", 3).status == "applied"
        assert time.monotonic() - started < 2.0  # a hung cache costs a timeout, not retries
        assert writer.assoc_count(1, "likes") == 2
    finally:
        private.process.send_signal(signal.SIGCONT)
    check_no_stale_reads(writer, other, seconds=7.0, bound=1.0 + 0.2 + 0.5)
    for g in (writer, other):
        g.close()
    private.kill()


def test_an_invalidation_redis_missed_is_sent_when_it_answers_again(tmp_path: Path) -> None:
    # The writer cannot reach Redis (a partition: the other process can) when it
    # writes, so Redis keeps the old count. Redis must not serve it for its ttl.
    private = RedisProcess(tmp_path)
    writer, other = two_processes(private.url, tmp_path / "g")
    tier = writer.engine.cache.tier2  # type: ignore[union-attr]
    reachable = tier._redis
    tier._redis = redis.Redis(port=free_port(), socket_connect_timeout=0.25)  # refused
    try:
        assert writer.assoc_add(1, "likes", 3).status == "applied"
    finally:
        tier._redis = reachable
    check_no_stale_reads(writer, other, seconds=7.0, bound=1.0 + 0.2 + 0.5)
    for g in (writer, other):
        g.close()
    private.kill()


def hold_first_call(
    monkeypatch: pytest.MonkeyPatch, owner: object, name: str
) -> tuple[threading.Event, threading.Event]:
    """Hold the first call of `owner.name` until the second event is set; the first
    event says it has begun (later calls go straight through)."""
    begun, proceed = threading.Event(), threading.Event()
    method = getattr(owner, name)

    def held(*args: Any) -> Any:
        if not begun.is_set():
            begun.set()
            proceed.wait()
        return method(*args)

    monkeypatch.setattr(owner, name, held)
    return begun, proceed


@needs_redis
@pytest.mark.parametrize("small_first", [True, False], ids=["small fills", "large fills"])
def test_processes_with_different_prefixes_share_fills_without_reading_them_as_whole(
    tmp_path: Path, small_first: bool
) -> None:
    """A fill stored by a process that caches 3 edges a list, read by one that caches
    10: 4 rows of a list of 8 are its newest 4, not the whole list (and the other way
    round, 11 rows are more than the small one needs)."""
    small = assocdb.open(
        tmp_path / "g", shards=2, cache=CacheConfig(prefix=3, admit_after=1, redis=REDIS)
    )
    small.define_assoc("likes")
    small.engine.cache.flush()  # type: ignore[union-attr]  (Redis is shared by tests)
    large = assocdb.open(tmp_path / "g", cache=CacheConfig(prefix=10, admit_after=1, redis=REDIS))
    plain = assocdb.open(tmp_path / "g", cache=None)
    with small, large, plain:
        for m in range(1, 9):
            small.assoc_add(1, "likes", m, time=m)
        first, second = (small, large) if small_first else (large, small)
        first.assoc_range(1, "likes", 0, 2)  # fills Redis
        for limit in (2, 5, 10):
            want = plain.assoc_range(1, "likes", 0, limit)
            assert second.assoc_range(1, "likes", 0, limit) == want, limit
            assert first.assoc_range(1, "likes", 0, limit) == want, limit
        # The process caching more read the shard rather than take the shorter fill,
        # and holds the whole list: its reads of all 8 issue no SQL.
        key = (1, large.engine.assoc_type("likes").id)
        entry = large.engine.cache._lists[key]  # type: ignore[union-attr]
        assert entry.complete
        assert len(entry.prefix) == 8


def test_a_list_an_older_version_stored_is_not_taken_for_the_whole_list() -> None:
    key = ("prefix", (1, 1))
    rows = [(3, 30, 30_000, None), (2, 20, 20_000, b'"x"')]
    assert redis_tier._decode(key, msgspec.msgpack.encode(rows)) == (rows, False)
    assert redis_tier._decode(key, redis_tier._encode(key, (rows, True))) == (rows, True)
    assert redis_tier._decode(key, redis_tier._encode(key, ([], False))) == ([], False)
