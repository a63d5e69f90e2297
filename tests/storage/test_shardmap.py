"""A graph over a shard map: SQLite member directories, two replicas per shard.

Faults are injected at the members' choke points (`SQLiteBackend.faults`):
a member that fails every statement, or hangs until its timeout. Reads must
never fail while a replica of their shard is healthy; every write must end up
on every replica; the graph must always agree with a model of the writes.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import assocdb
from assocdb import Graph, InvalidRequest, Unavailable
from assocdb.core.ids import shard_of
from assocdb.storage.mysql import MySQLBackend
from assocdb.storage.postgres import PostgresBackend
from assocdb.storage.registry import open_backend, open_shardmap
from assocdb.storage.shardmap import ShardMapBackend
from assocdb.storage.shardmap_config import (
    BackendConfig,
    from_dict,
    load,
    save,
    with_backend,
    with_down,
    with_weight,
)
from assocdb.writes.applier import RetryPolicy
from tests.support import stores
from tests.support.helpers import wait_until
from tests.support.model import Model
from tests.support.shardmaps import MEMBERS, write_map
from tests.support.stores import require
from tests.writes.test_faults import NODES, TYPES, assert_matches, write_randomly

SERVERS = [url for url in os.environ.get("ASSOCDB_TEST_MYSQL_URLS", "").split(",") if url]
REQUIRED = os.environ.get("ASSOCDB_TEST_REQUIRE_SERVICES") == "1"
KINDS = [
    "sqlite",
    pytest.param(
        "mysql",
        marks=pytest.mark.skipif(
            not SERVERS and not REQUIRED, reason="ASSOCDB_TEST_MYSQL_URLS is not set"
        ),
    ),
]
MapMaker = Callable[..., Path]

FAST = RetryPolicy(base=0.005, cap=0.05, max_attempts=3, down_after=2, down_for=0.02, down_max=0.1)
Fault = Callable[[int, str], None]


def open_cluster(make_map: MapMaker, **options: object) -> Graph:
    retry = options.pop("retry", FAST)
    g = assocdb.open(make_map(), retry=retry, **options)  # type: ignore[arg-type]
    g.define_assoc("follows", inverse="followed_by")
    g.define_assoc("friend", symmetric=True)
    g.define_assoc("likes")
    return g


@pytest.fixture(params=KINDS)
def make_map(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MapMaker]:
    """Writes `tmp_path/cluster.toml` over SQLite directories, or over the MySQL servers
    of ASSOCDB_TEST_MYSQL_URLS (their schemas are dropped afterwards)."""
    urls = None
    if request.param == "mysql":
        if not SERVERS:
            pytest.fail("ASSOCDB_TEST_MYSQL_URLS is not set but services are required")
        urls = SERVERS
    made: list[Path] = []

    def make(**options: Any) -> Path:
        made.append(write_map(tmp_path, urls=urls, **options))
        return made[-1]

    yield make
    if urls:
        from assocdb.storage.mysql import MySQLBackend

        for path in made:
            for config in load(path).backends.values():
                MySQLBackend.drop(config.url)


@pytest.fixture(params=["in turn", "at once"])
def graph(make_map: MapMaker, request: pytest.FixtureRequest) -> Iterator[Graph]:
    """A graph on three members; replicas written in turn, or at once (as servers are)."""
    g = open_cluster(make_map)
    cluster(g).parallel_writes = request.param == "at once"
    yield g
    g.close()


def cluster(graph: Graph) -> ShardMapBackend:
    backend = graph.engine.backend
    assert isinstance(backend, ShardMapBackend)
    return backend


def fail(backend: ShardMapBackend, name: str, hang: float = 0.0) -> Callable[[], None]:
    """Make member `name` fail every statement (after `hang` seconds); returns the cure."""

    def fault(shard: int, sql: str) -> None:
        time.sleep(hang)
        raise sqlite3.OperationalError("database is locked (injected)")

    faults = backend.member(name).faults  # type: ignore[attr-defined]
    faults.append(fault)
    return lambda: faults.remove(fault)


def assert_replicas_converged(backend: ShardMapBackend) -> None:
    """Every replica of every shard holds the same edges, objects and exact counts."""
    for shard, replicas in enumerate(backend.map.replicas):
        held = []
        for replica in replicas:
            member = backend.member(replica.backend)
            assert member.recount(shard, False) == []
            held.append(member.export_edges(shard, None, 1_000_000))
        assert all(rows == held[0] for rows in held), f"shard {shard} replicas differ"


def up(backend: ShardMapBackend, name: str) -> bool:
    return next(s.up for s in backend.status() if s.name == name)


def test_writes_reach_every_replica(graph: Graph) -> None:
    model = Model()
    write_randomly(graph, model, 150, seed=1)
    assert_matches(graph, model)
    assert_replicas_converged(cluster(graph))
    assert graph.queue_stats().depth == 0


@pytest.mark.parametrize("hang", [0.0, 0.05])
def test_reads_never_fail_while_one_replica_is_down(graph: Graph, hang: float) -> None:
    model = Model()
    write_randomly(graph, model, 60, seed=2)
    backend = cluster(graph)
    cure = fail(backend, "db2", hang)
    statuses = write_randomly(graph, model, 120, seed=3)
    assert "queued" in statuses  # the shards db2 holds are not fully written
    assert not up(backend, "db2")
    graph.engine.forget()
    for id1 in NODES:  # no read fails (a write queued behind another may not show yet)
        for atype in (*TYPES, "followed_by"):
            graph.assoc_range(id1, atype, limit=100)
            graph.assoc_count(id1, atype)
    cure()
    wait_until(lambda: up(backend, "db2"))
    assert graph.drain(timeout=30)
    assert_matches(graph, model)
    assert_replicas_converged(backend)
    assert graph.queue_stats().bad == 0


def test_a_term_pages_its_list_newest_first_from_a_healthy_replica(graph: Graph) -> None:
    # A query's page reads (time, id2) alone (`scan_keys`), through the map as a list read.
    model = Model()
    write_randomly(graph, model, 150, seed=4)
    assert graph.drain(timeout=30)
    fail(cluster(graph), "db2")
    for id1 in NODES:
        for atype in (*TYPES, "followed_by"):
            listed = [a.id2 for a in graph.assoc_range(id1, atype, limit=1000)]
            pages, cursor = [], None
            while True:
                page = graph.select(id1, atype).page(cursor, limit=3)
                pages.append(page)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            assert [id2 for page in pages for id2 in page.items] == listed
            if len(pages) > 1:  # and back: the last page's way leads to the one before it
                back = graph.select(id1, atype).page(pages[-1].prev_cursor, limit=3)
                assert back.items == pages[-2].items


def test_an_intersection_of_two_nodes_lists_across_the_map_answers_as_its_lists(
    graph: Graph,
) -> None:
    # A mutual of two nodes on shards of different members: the short list read, then
    # probed in the other (`Backend.probe_short` through the map: `probe_short_each`).
    model = Model()
    write_randomly(graph, model, 150, seed=5)
    assert graph.drain(timeout=30)
    fail(cluster(graph), "db2")
    for a in NODES:
        for b in NODES:
            mine = {e.id2 for e in graph.assoc_range(a, "follows", limit=1000)}
            theirs = {e.id2 for e in graph.assoc_range(b, "follows", limit=1000)}
            q = graph.select(a, "follows") & graph.select(b, "follows")
            assert q.page(limit=2).items == sorted(mine & theirs, reverse=True)[:2]


def test_writes_to_a_shard_whose_replicas_are_all_down_wait_in_the_journal(graph: Graph) -> None:
    model = Model()
    write_randomly(graph, model, 30, seed=4)
    backend = cluster(graph)
    cures = [fail(backend, "db1"), fail(backend, "db2")]  # shard 0 lives on db1 and db2 only
    dead = next(n for n in NODES if shard_of(n, graph.shards) == 0)
    result = graph.assoc_add(dead, "likes", 99, time=7)
    assert result.status == "queued"
    model.add(dead, "likes", 99, 7, None, result.updated_at)
    with pytest.raises(Unavailable, match="shard 0"):
        graph.assoc_range(dead, "likes")
    for cure in cures:
        cure()
    assert graph.drain(timeout=30)
    assert_matches(graph, model)
    assert_replicas_converged(backend)


@pytest.mark.parametrize("down", ["db1", "db2"])
def test_a_replica_that_comes_back_behind_is_not_read_until_it_catches_up(
    make_map: MapMaker, down: str
) -> None:
    slow = RetryPolicy(base=60, cap=60, down_after=100)  # no retry happens by itself
    g = open_cluster(make_map, retry=slow)
    backend = cluster(g)
    backend.recovery_hooks.clear()  # nor when the replica is back
    node = next(n for n in NODES if shard_of(n, g.shards) == 0)  # db1 (primary) and db2
    g.assoc_add(node, "likes", 1, time=1)
    for _ in range(2):
        assert g.assoc_count(node, "likes") == 1  # cached from the second miss on
    cure = fail(backend, down)
    assert g.assoc_add(node, "likes", 2, time=2).status == "queued"
    cure()
    wait_until(lambda: up(backend, down))
    for _ in range(30):  # one replica lacks the write until the retry: reads keep to the other
        assert [a.id2 for a in g.assoc_range(node, "likes")] == [2, 1]
        assert g.assoc_count(node, "likes") == 2
        g.engine.forget()
    for _ in range(2):
        assert g.assoc_count(node, "likes") == 2  # cached again
    g.queue_retry()  # lands on the replica that lacked it: the replicas answer differently
    assert g.drain(timeout=10)
    assert_replicas_converged(backend)
    assert g.assoc_count(node, "likes") == 2
    assert [a.id2 for a in g.assoc_range(node, "likes")] == [2, 1]
    g.close()


def test_reads_follow_weights_and_never_touch_a_write_only_replica(tmp_path: Path) -> None:
    path = write_map(tmp_path, shards=1, members=("a", "b"))
    path.write_text(path.read_text().replace('{backend = "b"}', '{backend = "b", weight = 0}'))
    backend = assocdb.storage.registry.open_shardmap(path)
    reads = {"a": 0, "b": 0}
    for name in reads:

        def count(shard: int, sql: str, name: str = name) -> None:
            reads[name] += sql.startswith("SELECT id2")

        backend.member(name).faults.append(count)  # type: ignore[attr-defined]
    for _ in range(50):
        backend.scan_id2(0, 1, 1, [0], None, True, 10)
    assert reads == {"a": 50, "b": 0}
    backend.close()


def test_settings_are_copied_to_every_replica_of_shard_0(graph: Graph) -> None:
    backend = cluster(graph)
    schema = backend.member("db1").get_meta("schema")
    assert schema is not None
    assert backend.member("db2").get_meta("schema") == schema  # shard 0: db1, db2
    cure = fail(backend, "db2")
    with pytest.raises(Unavailable):
        graph.define_assoc("blocks")  # decided by the primary, not yet copied
    cure()
    wait_until(lambda: up(backend, "db2"))
    changed = backend.get_meta("schema")  # a read retries the copy
    assert backend.member("db2").get_meta("schema") == changed != schema


def test_ids_are_allocated_by_the_primary_and_counters_stay_level(graph: Graph) -> None:
    backend = cluster(graph)
    db2 = backend.member("db2")  # the second replica of shard 0
    db2.allocate(0, 1000)  # ahead of the primary (it was primary once, say)
    first = backend.allocate(0, 10)
    assert first > 1000  # never a number db2 may have handed out
    assert backend.member("db1").allocate(0, 1) == db2.allocate(0, 1) == first + 10
    graph.define_object("user")
    ids = [graph.obj_add("user", near=NODES[0]) for _ in range(200)]
    assert len(set(ids)) == 200


def test_the_spec_opens_the_same_cluster(graph: Graph) -> None:
    graph.assoc_add(1, "follows", 2, time=5)
    again = open_backend(cluster(graph).spec())
    assert isinstance(again, ShardMapBackend)
    shard = shard_of(1, graph.shards)
    assert [row.id2 for row in again.edges(shard, 1, graph.schema.assoc_type("follows").id, [2])]
    again.close()


def test_bulk_load_writes_every_replica(graph: Graph) -> None:
    pairs = [(a, "friend", b, 1000 + a * 20 + b) for a in NODES for b in NODES if a < b]
    graph.bulk_load(pairs)
    assert graph.assoc_count(1, "friend") == len(NODES) - 1
    assert_replicas_converged(cluster(graph))


def test_a_drained_backend_gets_no_work(make_map: MapMaker) -> None:
    path = make_map()
    save(with_down(load(path), "db3", True), path)
    g = assocdb.open(path, retry=FAST)
    g.define_assoc("likes")
    backend = cluster(g)
    touched: list[str] = []
    backend.member("db3").faults.append(lambda shard, sql: touched.append(sql))  # type: ignore[attr-defined]
    node = next(n for n in NODES if shard_of(n, 6) == 2)
    assert backend.map.shards_of("db3") == [1, 2, 4, 5]
    assert g.assoc_add(node, "likes", 5).status == "queued"  # shard 2: db3 and db1
    assert [a.id2 for a in g.assoc_range(node, "likes")] == [5]
    backend._probe_due()  # a round of the prober, now: a drained member is not probed
    g.engine.journal.retry_now()
    g.engine.applier._retry_round()  # and the queued write's retry: not on db3 either
    assert touched == []
    g.close()


def test_opening_a_map_checks_the_shard_count(tmp_path: Path) -> None:
    path = write_map(tmp_path)
    with pytest.raises(InvalidRequest, match="places 6 shards, not 8"):
        assocdb.open(path, shards=8)
    g = assocdb.open(path)
    g.close()
    assert (tmp_path / "cluster.journal.db").exists()
    # Members are opened when first needed: here, the replicas of shard 0 (the settings).
    assert {p.name for p in tmp_path.iterdir() if p.is_dir()} >= set(MEMBERS[:2])


def test_writes_keep_landing_on_the_healthy_replica_during_an_outage(graph: Graph) -> None:
    """A write that reached some replicas does not trip the journal's shard breaker."""
    backend = cluster(graph)
    node = next(n for n in NODES if shard_of(n, graph.shards) == 0)  # db1 and db2
    cure = fail(backend, "db2")
    for n in range(1, 30):
        assert graph.assoc_add(node, "likes", 1000 + n, time=n).status == "queued"
        assert graph.assoc_count(node, "likes") == n  # read back at once, from db1
    assert graph.queue_stats().down_shards == []
    cure()
    assert graph.drain(timeout=30)
    assert_replicas_converged(backend)


def test_a_running_graph_takes_drains_and_weights_from_the_edited_map(
    make_map: MapMaker,
) -> None:
    g = open_cluster(make_map)
    backend = cluster(g)
    path = backend.source
    assert path is not None
    save(with_down(load(path), "db3", True), path)
    wait_until(lambda: next(s.drained for s in backend.status() if s.name == "db3"))
    node = next(n for n in NODES if shard_of(n, g.shards) == 2)  # db3 and db1
    assert g.assoc_add(node, "likes", 5, time=1).status == "queued"
    assert [a.id2 for a in g.assoc_range(node, "likes")] == [5]
    save(with_weight(with_down(load(path), "db3", False), [2], "db1", 0), path)
    wait_until(lambda: up(backend, "db3"))
    assert backend.map.replicas[2][1].weight == 0
    assert g.drain(timeout=30)
    assert_replicas_converged(backend)
    # Other changes to a backend are not online changes: refused, and the running map stays.
    data = load(path).as_dict()
    data["backends"]["db3"]["connect_timeout"] = 9.0
    save(from_dict(data, base=backend.map.base), path)
    with pytest.raises(InvalidRequest, match="backend db3's settings changed; only weights"):
        backend.reload()
    assert backend.map.backends["db3"].connect_timeout == 1.0
    g.close()


def test_metrics_show_members_up_and_down_and_failovers(graph: Graph) -> None:
    from assocdb.serve.metrics import Metrics

    backend = cluster(graph)
    metrics = Metrics(graph)
    cure = fail(backend, "db1", hang=0.0)
    for _ in range(5):
        graph.engine.forget()
        for n in NODES:  # half the reads of db1's shards try it first, and fail over
            graph.assoc_count(n, "likes")
    text = metrics.render().decode()
    assert 'assocdb_backend_up{backend="db1"} 0.0' in text
    assert 'assocdb_backend_up{backend="db2"} 1.0' in text
    assert 'assocdb_backend_downs{backend="db1"} 1.0' in text
    assert "assocdb_read_failovers" in text
    assert backend.failovers >= 1
    cure()


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_random_outages_end_with_converged_replicas_that_match_a_model(
    make_map: MapMaker, seed: int
) -> None:
    """Members fail and recover at random between writes; afterwards nothing is lost or off."""
    rnd = random.Random(seed)
    g = open_cluster(make_map)
    backend = cluster(g)
    backend.parallel_writes = seed % 2 == 1
    model = Model()
    cures: dict[str, Callable[[], None]] = {}
    for step in range(12):
        name = rnd.choice(MEMBERS)
        if name in cures:
            cures.pop(name)()
        elif len(cures) < 2 or rnd.random() < 0.3:  # sometimes every replica of a shard
            cures[name] = fail(backend, name)
        write_randomly(g, model, 15, seed=seed * 100 + step)
        for id1 in NODES:
            with contextlib.suppress(Unavailable):  # only when all its replicas are failing
                g.assoc_range(id1, rnd.choice(TYPES))
    for cure in cures.values():
        cure()
    assert g.drain(timeout=60)
    assert_matches(g, model)
    assert_replicas_converged(backend)
    assert g.queue_stats().bad == 0
    g.close()


def test_a_partial_write_reaches_other_processes_caches_through_redis(
    tmp_path: Path, make_map: MapMaker
) -> None:
    from assocdb import CacheConfig
    from tests.support.redis_server import redis_url

    cache = CacheConfig(redis=redis_url(), max_age=3600)
    writer = open_cluster(make_map, cache=cache)
    # Another app server, reading shard 0 from db1 only (so what it reads is known).
    other_map = tmp_path / "other.toml"
    other_map.write_text(
        (tmp_path / "cluster.toml")
        .read_text()
        .replace(
            'replicas = [{backend = "db1"}, {backend = "db2"}]',
            'replicas = [{backend = "db1"}, {backend = "db2", weight = 0}]',
        )
    )
    reader = assocdb.open(other_map, cache=cache)
    node = next(n for n in NODES if shard_of(n, writer.shards) == 0)
    writer.assoc_add(node, "likes", 1, time=1)

    def read_count() -> int:
        tier2 = writer.engine.cache.tier2, reader.engine.cache.tier2  # type: ignore[union-attr]
        assert tier2[1].wait_for(tier2[0].barrier())  # type: ignore[union-attr]
        return reader.assoc_count(node, "likes")

    assert [read_count() for _ in range(3)] == [1, 1, 1]  # cached in the reader
    cure = fail(cluster(writer), "db2")
    assert writer.assoc_add(node, "likes", 2, time=2).status == "queued"  # on db1 only
    assert read_count() == 2  # the writer told every cache to forget the list
    cure()
    assert writer.drain(timeout=30)
    reader.close()
    writer.close()


def test_queued_writes_are_retried_as_soon_as_a_replica_is_back(make_map: MapMaker) -> None:
    slow = RetryPolicy(base=60, cap=60, down_after=100)  # the error queue's backoff: a minute
    g = open_cluster(make_map, retry=slow)
    backend = cluster(g)
    node = next(n for n in NODES if shard_of(n, g.shards) == 0)
    cure = fail(backend, "db2")
    for n in (2, 3):  # two failures in a row: db2 is marked down (threshold 2)
        assert g.assoc_add(node, "likes", n, time=n).status == "queued"
        g.engine.applier.fence()  # syncing the shards is no probe: db2 still failed
    assert g.queue_stats().errors == 2
    assert not up(backend, "db2")
    cure()
    assert g.drain(timeout=10)  # long before the backoff would have let it retry
    assert_replicas_converged(backend)
    g.close()


def test_reads_are_spread_by_weight(tmp_path: Path) -> None:
    path = write_map(tmp_path, shards=1, members=("a", "b"))
    path.write_text(path.read_text().replace('{backend = "b"}', '{backend = "b", weight = 3}'))
    backend = assocdb.storage.registry.open_shardmap(path)
    backend._random.seed(7)
    reads = {"a": 0, "b": 0}
    for name in reads:

        def count(shard: int, sql: str, name: str = name) -> None:
            reads[name] += sql.startswith("SELECT id2")

        backend.member(name).faults.append(count)  # type: ignore[attr-defined]
    for _ in range(4000):
        backend.scan_id2(0, 1, 1, [0], None, True, 10)
    assert 0.72 < reads["b"] / 4000 < 0.78  # weight 3 of 4
    backend.close()


def test_indexes_and_timelines_reach_every_replica(graph: Graph) -> None:
    backend = cluster(graph)
    graph.define_object("user")
    graph.define_index("by_city", "user", ["city"])
    graph.index_build("by_city")
    graph.define_timeline("follows")
    for reader in (2, 3, 4):
        graph.assoc_add(reader, "follows", 1)
    cure = fail(backend, "db2")
    ids = [graph.obj_add("user", {"city": "Oslo", "n": n}) for n in range(12)]
    for n in range(5):
        graph.post(1, 100 + n, 10 + n)
    # Reads keep working while db2 is down. (Index entries that share a leg with rows
    # of a shard db2 holds are written when that leg is retried: after the outage.)
    found = {o.id for o in graph.index_query("by_city", eq=["Oslo"], limit=100).items}
    assert found <= set(ids)
    cure()
    assert graph.drain(timeout=30)
    for reader in (2, 3, 4):
        assert [i.item for i in graph.home_timeline(reader).items] == [104, 103, 102, 101, 100]
    assert {o.id for o in graph.index_query("by_city", eq=["Oslo"], limit=100).items} == set(ids)
    index = graph.schema.index("by_city").id  # type: ignore[attr-defined]
    for shard, (a, b) in enumerate(backend.map.replicas):
        members = [backend.member(a.backend), backend.member(b.backend)]
        entries = [m.index_export(shard, index, None, 10_000) for m in members]
        assert entries[0] == entries[1]
        homes = [m.timelines(shard, [2, 3, 4]) for m in members]
        assert homes[0] == homes[1]


@pytest.mark.parametrize("cached", [True, False])
def test_a_write_after_a_partly_written_one_is_read_back_at_once(
    make_map: MapMaker, cached: bool
) -> None:
    # The first write lands on one replica of the shard (the other fails): it is
    # queued for the other. The next write of the same row must not wait behind
    # it unapplied: the row it resolves against is on the replica that took
    # the first, which is where reads go. Read back at once, every time.
    slow = RetryPolicy(base=60, cap=60, down_after=100)  # the queue waits: reads must not
    cache = assocdb.CacheConfig() if cached else None
    g = open_cluster(make_map, retry=slow, cache=cache)
    backend = cluster(g)
    node = next(n for n in NODES if shard_of(n, g.shards) == 0)  # on db1 and db2
    g.assoc_add(node, "follows", 7, time=1)
    cure = fail(backend, "db2")
    try:
        for n in range(10):
            added = g.assoc_add(node, "follows", 7, data={"n": n})
            assert added.status == "queued"  # db2 missed it
            assert [a.data for a in g.assoc_range(node, "follows")] == [{"n": n}]
            assert g.assoc_get(7, "followed_by", [node])[0].data == {"n": n}
            assert g.assoc_delete(node, "follows", 7).status == "queued"
            assert g.assoc_range(node, "follows") == []
            assert g.assoc_count(node, "follows") == 0
            assert g.assoc_count(7, "followed_by") == 0
    finally:
        cure()
    wait_until(lambda: up(backend, "db2"))
    g.queue_retry()
    assert g.drain(timeout=30)
    assert_replicas_converged(backend)
    assert g.assoc_count(node, "follows") == 0
    g.close()


def test_a_map_may_mix_engines(tmp_path: Path) -> None:
    """Replicas on SQLite, PostgreSQL and (when configured) MySQL hold the same rows."""
    require("postgres")
    mysql = stores.MYSQL_URL if stores._mysql_problem() is None else None
    urls = [None, stores.postgres_url("{name}", options=""), mysql]
    # Its faults fail at once: no statement need time out (at 0.2 s, on CI's loaded
    # machine, PostgreSQL's first catalog query at open did).
    path = write_map(tmp_path, urls=urls, query_timeout=10.0)
    try:
        g = open_cluster(lambda: path)
        try:
            model = Model()
            write_randomly(g, model, 80, seed=11)
            cure = fail(cluster(g), "db2")  # the PostgreSQL member
            write_randomly(g, model, 40, seed=12)
            cure()
            assert g.drain(timeout=30)
            assert_matches(g, model)
            assert_replicas_converged(cluster(g))
        finally:
            g.close()
    finally:
        for config in load(path).backends.values():
            if config.url and config.url.startswith("postgresql://"):
                PostgresBackend.drop(config.url)
            elif config.url:
                MySQLBackend.drop(config.url)


def test_the_map_is_reloaded_while_a_probe_of_a_down_member_hangs(tmp_path: Path) -> None:
    """A mover waits a reload interval (and a query timeout) for every process to take
    its change of the map; a probe of a hung server must not hold the reload back (with
    a few members hung, the probes alone outlast that wait)."""
    path = write_map(tmp_path)
    backend = open_shardmap(path)
    probing, release = threading.Event(), threading.Event()

    def hang(shard: int, sql: str) -> None:
        probing.set()
        release.wait(timeout=60)

    try:
        backend.member("db2").faults.append(hang)  # type: ignore[attr-defined]
        backend.mark("db2", False)
        wait_until(probing.is_set)  # the prober is stuck in the probe of db2
        save(with_weight(load(path), [1], "db3", 7), path)
        wait_until(lambda: backend.map.replicas[1][1].weight == 7, patience=20)
    finally:
        release.set()
        backend.close()


def test_a_replica_that_cannot_sync_keeps_its_writes_in_the_journal(tmp_path: Path) -> None:
    """The journal forgets an applied write once `make_durable` returns (the fence): a
    member whose sync failed must make it fail, or a power loss takes back a write that
    no journal holds any more (with one replica: lost)."""
    g = assocdb.open(write_map(tmp_path, replicas=1), retry=FAST)
    g.define_assoc("likes")
    backend = cluster(g)
    node = next(n for n in NODES if shard_of(n, g.shards) == 0)
    member = backend.member(backend.map.replicas[0][0].backend)

    def cannot_sync(shards: object) -> None:
        raise Unavailable("cannot sync shard-0000.db-wal: [Errno 5] Input/output error (test)")

    member.make_durable = cannot_sync  # type: ignore[method-assign]
    try:
        with pytest.raises(Unavailable, match="Input/output error"):
            backend.make_durable([0])
        assert g.assoc_add(node, "likes", 5).status == "applied"
        with pytest.raises(Unavailable):
            g.engine.applier.fence()
        assert g.engine.applier.unfenced() == 1  # kept for the next fence (and a replay)
    finally:
        del member.make_durable
        g.close()


def test_a_setting_that_needs_a_reopen_does_not_hold_back_later_changes(
    make_map: MapMaker,
) -> None:
    """A backend's settings change only on a reopen; the replica sets must still change
    at once. A process that refused every later edit kept writing a moved shard to the
    replica the move took out of the set: those acknowledged writes were lost to it."""
    g = open_cluster(make_map)
    backend = cluster(g)
    path = backend.source
    assert path is not None
    data = load(path).as_dict()
    data["backends"]["db3"]["connect_timeout"] = 9.0
    save(from_dict(data, base=backend.map.base), path)
    with pytest.raises(InvalidRequest, match="backend db3's settings changed"):
        backend.reload()
    save(with_weight(load(path), [2], "db1", 0), path)  # shard 2: db3, db1
    wait_until(lambda: backend.map.replicas[2][1].weight == 0, patience=10)
    assert backend.map.backends["db3"].connect_timeout == 1.0  # until a reopen
    g.close()


def test_a_backend_taken_out_of_the_map_and_added_again_is_taken(make_map: MapMaker) -> None:
    """`shards add-backend` after the backend was removed from the file (say a move to it
    was cancelled): running processes must keep taking the map's changes."""
    g = open_cluster(make_map)
    backend = cluster(g)
    path = backend.source
    assert path is not None
    with_db4 = with_backend(load(path), "db4", BackendConfig(path="db4"))
    without_db4 = load(path)
    for smap in (with_db4, without_db4, with_db4):
        save(smap, path)
        backend.reload()
        assert set(backend.map.backends) == set(smap.backends)
    save(with_weight(without_db4, [2], "db1", 0), path)  # db4 leaves (no server to clean)
    backend.reload()
    assert backend.map.replicas[2][1].weight == 0
    g.close()


def test_an_edit_of_the_same_size_in_one_tick_of_the_clock_is_taken(make_map: MapMaker) -> None:
    """Two edits of the map within one tick of the file system's clock (a few ms), the
    second of the same size (a weight 1 -> 2): a process that compared mtime and size
    kept the map of the first edit for good."""
    path = make_map()
    g = assocdb.open(path, retry=FAST)
    try:
        backend = cluster(g)
        save(with_down(load(path), "db3", True), path)  # the file as to_toml writes it
        wait_until(lambda: backend.map.backends["db3"].down)
        first = path.stat()
        save(with_weight(load(path), [0], "db2", 2), path)
        assert path.stat().st_size == first.st_size
        os.utime(path, ns=(first.st_atime_ns, first.st_mtime_ns))  # the same tick
        # A safety net only: the map is looked at every second.
        wait_until(lambda: ("db2", 2) in [(r.backend, r.weight) for r in backend.map.replicas[0]],
                   patience=20)  # fmt: skip
    finally:
        g.close()


def test_an_edit_made_while_a_process_opens_the_map_is_taken(make_map: MapMaker) -> None:
    """The map is read, then edited (a drain, a mover's new copy), then the process
    starts watching the file: it used to take the file as it was then for the map it had
    read, and never took that edit."""
    path = make_map()
    smap = load(path)  # what the opener read
    save(with_down(load(path), "db3", True), path)  # the edit, just after
    backend = ShardMapBackend(smap, open_backend, source=path)
    try:
        # A safety net only: the map is looked at every second.
        wait_until(lambda: backend.map.backends["db3"].down, patience=20)
    finally:
        backend.close()


def test_a_unique_key_whose_add_landed_on_one_replica_stays_claimed_until_retried(
    make_map: MapMaker,
) -> None:
    """An add of a unique key lands on one replica of its shard (the other is down):
    its row is stored (`partial`), and later writes of it no longer wait for the
    retry. Its index entries are not: the leg stopped before them. The key stays
    claimed until the retry stores them, so a second add of it is refused."""
    slow = RetryPolicy(base=60, cap=60, down_after=100)  # no retry happens by itself
    g = open_cluster(make_map, retry=slow)
    g.define_object("user")
    g.define_index("email", "user", ["email"], unique=True)
    backend = cluster(g)
    backend.recovery_hooks.clear()  # nor when the replica is back
    first = next(n for n in range(1, 100) if shard_of(n, g.shards) == 0)  # db1 and db2
    cure = fail(backend, "db2")
    assert g.obj_add("user", {"email": "a@x"}, id=first) == first  # on db1 only
    cure()
    wait_until(lambda: up(backend, "db2"))
    with pytest.raises(assocdb.Conflict, match="unique"):
        g.obj_add("user", {"email": "a@x"})
    g.obj_update(first, {"name": "ada"})  # not waiting for the retry (`partial`)
    g.queue_retry()
    assert g.drain(timeout=10)
    assert len(g.engine.applier.pending.claims) == 0
    assert [o.id for o in g.index_query("email", ["a@x"]).items] == [first]
    g.close()
