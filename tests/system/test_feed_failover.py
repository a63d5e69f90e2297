"""The change feed of a shard map across a replica failover, under writers: a consumer that
keeps its cursor while the replica it reads fails loses no change, and gets again only
changes of the shards that failed over (at-least-once), on SQLite members and on MariaDB
servers (ASSOCDB_TEST_MYSQL_URLS). A member fails as a server does to the map: every
statement errs until it is marked down; it comes back later and the journal catches it up.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import assocdb
from assocdb import Graph, Unavailable
from assocdb.core import feedalign
from assocdb.core.ids import shard_of
from assocdb.storage.shardmap import ShardMapBackend
from tests.storage.test_shardmap import FAST, fail, make_map, up  # noqa: F401 (a fixture)
from tests.support.helpers import wait_until

MapMaker = Callable[..., Path]
Leg = tuple[str, int, int]  # (type, id1, id2)


class Writers:
    """Threads adding new follows (each edge once) until stopped; the acknowledged ones."""

    def __init__(self, g: Graph, threads: int = 4) -> None:
        self.g, self.acked, self.lock = g, list[tuple[int, int]](), threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(n,)) for n in range(threads)]
        for thread in self.threads:
            thread.start()

    def run(self, worker: int) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            id1, id2 = 1 + (worker * 7919 + n) % 200, 1_000_000 * (worker + 1) + n
            try:
                self.g.assoc_add(id1, "follows", id2)  # applied or queued: acknowledged
            except Unavailable:
                continue  # (not acknowledged: it may or may not be in the feed)
            with self.lock:
                self.acked.append((id1, id2))

    def count(self) -> int:
        with self.lock:
            return len(self.acked)

    def join(self) -> list[tuple[int, int]]:
        self.stop.set()
        for thread in self.threads:
            thread.join()
        return list(self.acked)


class Consumer:
    """Reads pages after its cursor, as a consumer does, remembering every leg and shard."""

    def __init__(self, g: Graph) -> None:
        self.g, self.cursor = g, None
        self.seen: Counter[Leg] = Counter()  # legs (a leg may change more than once)
        self.changes: Counter[tuple[Leg, int]] = Counter()  # (leg, updated_at): the changes
        self.shard_of: dict[Leg, int] = {}

    def read(self) -> int:
        page = self.g.changes(self.cursor, limit=500)
        for c in page.items:
            leg = (c.type, c.id1, c.id2 or 0)
            self.seen[leg] += 1
            self.changes[(leg, c.updated_at)] += 1
            self.shard_of[leg] = c.shard
        self.cursor = page.next_cursor
        return len(page.items)

    def until(self, done: Callable[[], bool]) -> None:
        wait_until(lambda: self.read() >= 0 and done())


def cluster(g: Graph) -> ShardMapBackend:
    backend = g.engine.backend
    assert isinstance(backend, ShardMapBackend)
    return backend


@pytest.fixture
def graph(make_map: MapMaker) -> Iterator[Graph]:  # noqa: F811 (the fixture imported)
    g = assocdb.open(make_map(shards=6), retry=FAST)
    g.define_assoc("follows", inverse="followed_by")
    g.enable_feed()
    cluster(g).parallel_writes = True
    _diverge(g, "db1", 60)
    yield g
    g.close()


def legs(acked: list[tuple[int, int]]) -> set[Leg]:
    return {("follows", a, b) for a, b in acked} | {("followed_by", b, a) for a, b in acked}


def test_a_consumer_loses_nothing_when_the_replica_it_reads_fails_over(graph: Graph) -> None:
    backend, consumer = cluster(graph), Consumer(graph)
    writers = Writers(graph)
    try:
        consumer.until(lambda: writers.count() >= 300)
        before = writers.count()
        feed = backend.change_feed()
        primaries = {s for s, reps in enumerate(backend.map.replicas) if reps[0].backend == "db1"}
        assert primaries  # (db1 is the primary the consumer reads of these shards)
        # Checkpoints are made in the background; wait for one past what was read so far.
        wait_until(lambda: all(_checkpoint(backend, s) > 0 for s in primaries))
        cure = fail(backend, "db1")
        wait_until(lambda: not up(backend, "db1"))
        consumer.until(lambda: writers.count() >= before + 300)
        cure()
        wait_until(lambda: up(backend, "db1"))
    finally:
        acked = writers.join()
    assert graph.drain(timeout=60)
    expected = legs(acked)
    consumer.until(lambda: expected <= set(consumer.seen))  # no acknowledged change lost
    again = {leg for (leg, _), n in consumer.changes.items() if n > 1}
    assert all(consumer.shard_of[leg] in primaries for leg in again), "duplicates elsewhere"
    assert len(again) < len(expected) // 2  # (from the checkpoint on, not the whole feed)
    assert feed.missing == []
    tags = {feedalign.split(_position(graph, consumer.cursor, s))[0] for s in primaries}
    assert feedalign.tag_of("db1") not in tags  # the cursor moved off db1 and stays off


def test_a_failover_right_after_the_writes_loses_nothing(graph: Graph) -> None:
    backend, consumer = cluster(graph), Consumer(graph)
    consumer.until(lambda: len(consumer.seen) > 0 and not consumer.read())  # (caught up)
    for n in range(1, 60):
        graph.assoc_add(n, "follows", 5000 + n)
    consumer.until(lambda: legs([(n, 5000 + n) for n in range(1, 60)]) <= set(consumer.seen))
    cure = fail(backend, "db1")  # (with or without a checkpoint yet: nothing is lost)
    wait_until(lambda: not up(backend, "db1"))
    for n in range(60, 80):
        graph.assoc_add(n, "follows", 5000 + n)
    consumer.until(lambda: legs([(n, 5000 + n) for n in range(1, 80)]) <= set(consumer.seen))
    cure()


def _diverge(g: Graph, name: str, n: int) -> None:
    """Give member `name` `n` records of each of its shards that its peers never record:
    old edges written to it alone, then superseded through the map (like a write that
    landed on one replica and was overtaken before its retry). Replicas number on their
    own anyway; here a position surely means another change on each."""
    backend, follows = cluster(g), g.engine.named(lambda s: s.assoc_type("follows").id)
    for shard, replicas in enumerate(backend.map.replicas):
        if name not in [r.backend for r in replicas]:
            continue
        id1s = [i for i in range(1, 100_000) if shard_of(i, backend.shards) == shard][:n]
        old = [(id1, follows, 7_000_000 + id1, 0, 1, 1, None) for id1 in id1s]
        backend.member(name).apply(shard, old, [])
        for id1 in id1s:
            g.assoc_add(id1, "follows", 7_000_000 + id1)


def _checkpoint(backend: ShardMapBackend, shard: int) -> int:
    """The newest checkpoint's Q on the second replica of `shard` against the first."""
    first, second = (r.backend for r in backend.map.replicas[shard][:2])
    feed = backend.member(second).change_feed()
    assert feed is not None
    found = feed.translate(shard, feedalign.tag_of(first), feedalign.LOCAL)  # type: ignore[attr-defined]
    return 0 if found is None else int(found[1])


def _position(g: Graph, cursor: str | None, shard: int) -> int:
    from assocdb.core import feed

    assert cursor is not None
    return feed.decode(cursor, g.engine.backend.shards)[shard]


def test_a_shard_whose_replicas_are_all_down_is_behind_and_the_others_flow(graph: Graph) -> None:
    backend, consumer = cluster(graph), Consumer(graph)
    down = {
        s
        for s, reps in enumerate(backend.map.replicas)
        if {r.backend for r in reps} <= {"db1", "db2"}
    }
    assert down
    assert len(down) < backend.shards
    before = [(n, 8_000_000 + n) for n in range(1, 40)]
    for id1, id2 in before:
        graph.assoc_add(id1, "follows", id2)
    consumer.until(lambda: legs(before) <= set(consumer.seen))
    cures = [fail(backend, "db1"), fail(backend, "db2")]
    wait_until(lambda: not up(backend, "db1") and not up(backend, "db2"))
    during = [(n, 8_100_000 + n) for n in range(1, 200)]
    for id1, id2 in during:  # (legs on the down shards are queued: acknowledged)
        graph.assoc_add(id1, "follows", id2)
    # A write with a leg on a down shard waits whole in the journal; the others land.
    landed = [w for w in during if not {shard_of(n, backend.shards) for n in w} & down]
    readable = legs(landed)
    assert readable
    page = graph.changes(consumer.cursor, limit=1000)
    assert set(page.behind) == down  # it says which shards it could not read
    assert {s for s in range(backend.shards) if s not in down} >= {c.shard for c in page.items}
    consumer.until(lambda: readable <= set(consumer.seen))
    for cure in cures:
        cure()
    wait_until(lambda: up(backend, "db1") and up(backend, "db2"))
    assert graph.drain(timeout=60)
    consumer.until(lambda: legs(during) <= set(consumer.seen))  # the held-back shards' too
    assert graph.changes(consumer.cursor).behind == []
