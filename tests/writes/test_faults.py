"""Fault injection at the backend's choke point: failing, flaky and hanging shards.

Writes to a failing shard are queued and applied once it recovers; reads of
other shards keep working; the final state equals a model of the writes; bad
jobs appear only for errors that are not about availability.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from assocdb import Graph, Unavailable
from assocdb.core.ids import shard_of
from assocdb.storage.mysql import MySQLBackend
from assocdb.storage.postgres import PostgresBackend
from assocdb.writes.applier import RetryPolicy
from tests.support.model import Model
from tests.support.stores import Stores

FAST = RetryPolicy(base=0.005, cap=0.05, max_attempts=3, down_after=2, down_for=0.02, down_max=0.1)
NODES = range(1, 13)
TYPES = ["follows", "friend", "likes"]
Fault = Callable[[int, str], None]


#: On MySQL: a row-lock wait gives up after 1 s (half the query timeout).
FAST_MYSQL = "query_timeout=2&connect_timeout=5"


@pytest.fixture
def graph(stores: Stores) -> Graph:
    g = stores.open(at=stores.location("g", FAST_MYSQL), shards=4, timeout=0.2, retry=FAST)
    g.define_assoc("follows", inverse="followed_by")
    g.define_assoc("friend", symmetric=True)
    g.define_assoc("likes")
    return g


def inject(graph: Graph, fault: Fault) -> Callable[[], None]:
    faults = graph.engine.backend.faults  # type: ignore[attr-defined]
    faults.append(fault)
    return lambda: faults.remove(fault)


def failing(shard: int, error: type[sqlite3.Error], rate: float = 1.0, seed: int = 1) -> Fault:
    rnd = random.Random(seed)

    def fault(at: int, sql: str) -> None:
        if at == shard and rnd.random() < rate:
            raise error("disk I/O error (injected)")

    return fault


def write_randomly(graph: Graph, model: Model, n: int, seed: int) -> list[str]:
    """n random writes, mirrored into the model; returns their statuses."""
    rnd = random.Random(seed)
    statuses = []
    for _ in range(n):
        id1, id2, atype = rnd.choice(NODES), rnd.choice(NODES), rnd.choice(TYPES)
        if rnd.random() < 0.7:
            time = rnd.choice([None, rnd.randrange(100)])
            data = rnd.choice([None, [rnd.randrange(9)]])
            result = graph.assoc_add(id1, atype, id2, time=time, data=data)
            model.add(id1, atype, id2, time, data, result.updated_at)
        else:
            result = graph.assoc_delete(id1, atype, id2)
            model.delete(id1, atype, id2)
        statuses.append(result.status)
    return statuses


def assert_matches(graph: Graph, model: Model) -> None:
    for id1 in NODES:
        for atype in (*TYPES, "followed_by"):
            got = [(a.id2, a.time, a.data) for a in graph.assoc_range(id1, atype, limit=100)]
            assert got == model.listing(id1, atype), (id1, atype)
            assert graph.assoc_count(id1, atype) == len(got)
    assert graph.check_counts() == []


def test_a_shard_that_fails_every_call(graph: Graph) -> None:
    model = Model()
    write_randomly(graph, model, 40, seed=1)  # some edges exist before the outage
    down = shard_of(3, graph.shards)
    recover = inject(graph, failing(down, sqlite3.OperationalError))
    statuses = write_randomly(graph, model, 120, seed=2)
    assert "queued" in statuses
    assert "applied" in statuses
    stats = graph.queue_stats()
    assert stats.errors > 0
    assert stats.bad == 0
    healthy = next(n for n in NODES if shard_of(n, graph.shards) != down)
    graph.assoc_range(healthy, "likes")  # reads elsewhere keep working
    with pytest.raises(Unavailable):
        graph.assoc_range(3, "likes")
    recover()
    assert graph.drain(timeout=30)
    assert_matches(graph, model)
    assert graph.queue_stats().bad == 0


@pytest.mark.parametrize("seed", [3, 11, 12])
def test_a_shard_that_fails_intermittently(graph: Graph, seed: int) -> None:
    model = Model()
    fault = failing(shard_of(5, graph.shards), sqlite3.OperationalError, rate=0.3, seed=seed)
    recover = inject(graph, fault)
    statuses = write_randomly(graph, model, 150, seed=seed)
    assert statuses.count("queued") > 0
    recover()
    assert graph.drain(timeout=30)
    assert_matches(graph, model)
    assert graph.queue_stats().bad == 0


def test_a_shard_that_hangs_past_its_timeout(graph: Graph, stores: Stores) -> None:
    model = Model()
    write_randomly(graph, model, 20, seed=4)
    hung = shard_of(7, graph.shards)
    release = hold_the_write_lock(graph, hung, stores)  # another process does not let go
    statuses = write_randomly(graph, model, 30, seed=5)
    assert "queued" in statuses
    healthy = next(n for n in NODES if shard_of(n, graph.shards) != hung)
    graph.assoc_count(healthy, "follows")
    release()
    assert graph.drain(timeout=30)
    assert_matches(graph, model)
    assert graph.queue_stats().bad == 0


def hold_the_write_lock(graph: Graph, shard: int, stores: Stores) -> Callable[[], None]:
    """Another client locks the shard against writers; returns the release."""
    spec = graph.engine.backend.spec()
    if stores.kind == "sqlite":
        blocker = sqlite3.connect(
            Path(spec["path"]) / f"shard-{shard:04d}.db", isolation_level=None
        )
        blocker.execute("BEGIN EXCLUSIVE")

        def release() -> None:
            blocker.execute("ROLLBACK")
            blocker.close()

        return release
    other: MySQLBackend | PostgresBackend
    if stores.kind == "mysql":
        other = MySQLBackend.open(spec["url"])
        locks = [f"SELECT * FROM {{s}}.{table} FOR UPDATE" for table in ("edges", "counts")]
    else:  # no gap locks: a table lock that lets readers in, no writer
        other = PostgresBackend.open(spec["url"])
        locks = ["LOCK TABLE {s}.edges, {s}.counts IN EXCLUSIVE MODE"]
    session = other._session()
    conn = session.__enter__()
    other._run(conn, shard, "BEGIN")
    for lock in locks:  # every row and gap: no write gets through
        other._run(conn, shard, other._q(lock, shard))

    def release_mysql() -> None:
        other._run(conn, shard, "ROLLBACK")
        session.__exit__(None, None, None)
        other.close()

    return release_mysql


def test_other_errors_count_towards_bad_jobs_and_can_be_reinjected(graph: Graph) -> None:
    broken = shard_of(2, graph.shards)
    recover = inject(graph, failing(broken, sqlite3.IntegrityError))
    result = graph.assoc_add(2, "likes", 9, time=5)
    assert result.status == "queued"
    graph.assoc_add(next(n for n in NODES if shard_of(n, graph.shards) != broken), "likes", 9)
    assert graph.drain(timeout=10)
    (bad,) = graph.queue_jobs("bad")
    assert bad.attempts == FAST.max_attempts
    assert "IntegrityError" in (bad.error or "")
    assert (bad.operation["kind"], bad.operation["id1"]) == ("EdgeWrite", 2)
    recover()
    assert graph.queue_reinject() == 1
    assert graph.drain(timeout=10)
    assert [a.id2 for a in graph.assoc_range(2, "likes")] == [9]
    assert graph.queue_stats().bad == 0


def test_writes_that_need_the_stored_edge_wait_for_their_shard(graph: Graph) -> None:
    """A re-add during an outage still keeps the edge's time, once resolved after recovery."""
    graph.assoc_add(4, "follows", 5, time=100, data="first")
    recover = inject(graph, failing(shard_of(4, graph.shards), sqlite3.OperationalError))
    assert graph.assoc_add(4, "follows", 5).status == "queued"  # time unknown until shard 4 answers
    (job,) = graph.queue_jobs("error")
    assert job.operation["kind"] == "EdgeWrite"  # journaled unresolved
    recover()
    assert graph.drain(timeout=10)
    (edge,) = graph.assoc_get(4, "follows", [5])
    assert (edge.time, edge.data) == (100, "first")
    (inverse,) = graph.assoc_get(5, "followed_by", [4])
    assert (inverse.time, inverse.updated_at) == (edge.time, edge.updated_at)


def test_a_write_rejected_after_the_outage_becomes_a_bad_job(graph: Graph) -> None:
    graph.define_object("user")
    uid = graph.obj_add("user", {"a": 1})
    graph.obj_delete(uid)
    recover = inject(graph, failing(shard_of(uid, graph.shards), sqlite3.OperationalError))
    assert graph.obj_update(uid, {"b": 2}).status == "queued"  # existence unknown during the outage
    recover()
    graph.queue_retry()
    assert graph.drain(timeout=10)  # a bad job is parked: it does not hold up draining
    (bad,) = graph.queue_jobs("bad")
    assert "NotFound" in (bad.error or "")
    assert graph.obj_get(uid) is None


@pytest.mark.parametrize("seed", [21, 22])
def test_async_mode_with_a_flaky_shard_matches_the_model(stores: Stores, seed: int) -> None:
    where = stores.location("g", FAST_MYSQL)
    g = stores.open(at=where, shards=4, sync=False, timeout=0.2, retry=FAST)
    for name, options in (("follows", {"inverse": "followed_by"}), ("friend", {"symmetric": True})):
        g.define_assoc(name, **options)  # type: ignore[arg-type]
    g.define_assoc("likes")
    model = Model()
    recover = inject(g, failing(shard_of(5, g.shards), sqlite3.OperationalError, 0.3, seed))
    assert set(write_randomly(g, model, 150, seed=seed)) == {"queued"}
    recover()
    assert g.drain(timeout=30)
    assert_matches(g, model)


def test_async_mode_acknowledges_after_the_journal(stores: Stores) -> None:
    g = stores.open("g", shards=4, sync=False)
    g.define_assoc("follows", inverse="followed_by")
    results = [g.assoc_add(1, "follows", n, time=n) for n in range(2, 40)]
    assert {r.status for r in results} == {"queued"}
    assert g.drain(timeout=10)
    assert g.assoc_count(1, "follows") == 38
    assert g.assoc_count(20, "followed_by") == 1
    assert g.queue_stats().applied == 38


def test_a_post_without_a_time_is_queued_while_the_authors_shard_is_down(graph: Graph) -> None:
    """Its delivery waits for it, and takes the time it was stored with."""
    graph.define_timeline("follows")
    author = 1
    down = shard_of(author, graph.shards)
    readers = [n for n in range(2, 40) if shard_of(n, graph.shards) != down][:6]
    for reader in readers:
        graph.assoc_add(reader, "follows", author)
    graph.post(author, 100, time=50)
    assert graph.drain(timeout=10)
    recover = inject(graph, failing(down, sqlite3.OperationalError))
    assert graph.post(author, 100).status == "queued"  # a repost: keeps time 50, later
    assert graph.post(author, 101).status == "queued"  # a new post: its time is its stamp's
    for reader in readers:  # the other shards answer; nothing new arrived yet
        assert [i.item for i in graph.home_timeline(reader).items] == [100]
    recover()
    assert graph.drain(timeout=30)
    own = graph.user_timeline(author).items
    assert [(i.item, i.time) for i in own][1:] == [(100, 50)]
    assert own[0].item == 101
    assert own[0].time > 50
    for reader in readers:  # the same items, at the same times, once each
        assert graph.home_timeline(reader).items == own
    assert graph.queue_stats().bad == 0


def test_a_hybrid_post_on_a_down_shard_fails_whole(graph: Graph) -> None:
    """Hybrid mode reads the author's follower count first: an error, and nothing stored."""
    graph.define_timeline("follows", mode="hybrid")
    down = shard_of(1, graph.shards)
    reader = next(n for n in range(2, 40) if shard_of(n, graph.shards) != down)
    graph.assoc_add(reader, "follows", 1)
    recover = inject(graph, failing(down, sqlite3.OperationalError))
    with pytest.raises(Unavailable):
        graph.post(1, 100, time=5)
    recover()
    assert graph.drain(timeout=10)
    assert graph.user_timeline(1).items == []
    graph.post(1, 100, time=5)
    assert graph.drain(timeout=10)
    assert [i.item for i in graph.home_timeline(reader).items] == [100]


def test_a_shard_comes_back_when_writes_keep_coming(graph: Graph) -> None:
    # Every add without a time first reads the stored edge on id1's shard.
    # When the shard's cool-down ends, that read is the caller let through as
    # the probe: it must report back, or under steady load the shard stays down.
    down = shard_of(3, graph.shards)
    recover = inject(graph, failing(down, sqlite3.OperationalError))
    for id2 in range(1, 100):  # failed reads count against the shard too
        assert graph.assoc_add(3, "likes", id2).status == "queued"
        if down in graph.queue_stats().down_shards:
            break
    assert down in graph.queue_stats().down_shards
    recover()
    while down in graph.queue_stats().down_shards:  # the cool-down, at most down_max
        pass
    assert graph.assoc_add(3, "likes", id2 + 1).status == "applied"
    assert down not in graph.queue_stats().down_shards
    assert graph.drain(timeout=30)
    assert graph.assoc_count(3, "likes") == id2 + 1


def test_a_shard_comes_back_when_writes_that_read_nothing_keep_coming(graph: Graph) -> None:
    # A delete reads nothing: it meets the shard's circuit breaker only when its
    # batch is applied. A write turned away during the cool-down is no new failure
    # of the shard: counted as one, each pushes the cool-down on, and under steady
    # load the shard, recovered, would stay marked down (every write queued).
    down = shard_of(3, graph.shards)
    recover = inject(graph, failing(down, sqlite3.OperationalError))
    for id2 in range(1, 100):
        assert graph.assoc_delete(3, "likes", id2).status == "queued"
        if down in graph.queue_stats().down_shards:
            break
    assert down in graph.queue_stats().down_shards
    recover()
    give_up = time.monotonic() + 60  # only turns a hang into a failure
    while graph.assoc_delete(3, "likes", id2 + 1).status == "queued":  # steady load
        assert time.monotonic() < give_up, "the shard never came back"
    assert graph.drain(timeout=30)
