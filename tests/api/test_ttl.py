"""Expiring edges (`define_assoc(ttl=…)`): the schema, reads at the expiry boundary, the
expiry pass under concurrent writes and in the cleaner thread, on every backend."""

from __future__ import annotations

import random
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

import assocdb
from assocdb import Graph, SchemaError
from assocdb.api.open import open_location
from assocdb.cli.main import main
from assocdb.core.clock import HybridClock
from assocdb.core.merge import State
from assocdb.core.schema import Schema
from assocdb.core.ttl import check_ttl, lowest_visible
from assocdb.writes.journal import Journal
from tests.support.helpers import wait_until
from tests.support.stores import Stores

HOUR_MS = 3_600_000


def clocked(stores: Stores, wall: list[int], **options: object) -> Graph:
    """A fresh graph on the backend under test whose wall clock reads `wall[0]` (ns)."""
    where, journal = stores.location("ttl")
    backend, journal_file = open_location(where, 4, 2.0, True, journal)
    clock = HybridClock(lambda: wall[0])
    return Graph(backend, Journal(journal_file), clock=clock, **options)  # type: ignore[arg-type]


# -- the schema ------------------------------------------------------------------------


def test_ttl_is_seconds_or_a_timedelta_and_bad_ones_are_refused() -> None:
    assert check_ttl(None) is None
    assert check_ttl(timedelta(minutes=2)) == 120.0
    assert check_ttl(5) == 5.0
    schema = Schema().define_assoc("seen", inverse="seen_by", ttl=timedelta(days=1))
    assert schema.assoc_type("seen").ttl == schema.assoc_type("seen_by").ttl == 86400.0
    for bad in (0, -1, float("nan"), float("inf"), "10", True, 10**12):
        with pytest.raises(SchemaError, match="ttl must be"):
            Schema().define_assoc("seen", ttl=bad)  # type: ignore[arg-type]
    assert lowest_visible(10_000, 2.0) == 8_001  # an edge at 8,000 ms expired at 10,000


def test_a_redefinition_sets_the_ttl_and_toml_and_json_carry_it() -> None:
    schema = Schema().apply_toml('[assoc.seen]\ninverse = "seen_by"\nttl = 60\n')
    assert schema.assoc_type("seen_by").ttl == 60.0
    assert Schema.from_json(schema.to_json()) == schema
    longer = schema.define_assoc("seen", inverse="seen_by", ttl=120)
    assert longer.assoc_type("seen").ttl == longer.assoc_type("seen_by").ttl == 120.0
    assert longer.define_assoc("seen", inverse="seen_by").assoc_type("seen").ttl is None
    with pytest.raises(SchemaError, match="ttl must be"):
        Schema().apply_toml('[assoc.seen]\nttl = "soon"\n')


def test_the_cli_lists_and_applies_a_ttl(tmp_path: Path) -> None:
    runner = CliRunner()
    schema = tmp_path / "schema.toml"
    schema.write_text('[assoc.seen]\ninverse = "seen_by"\nttl = 86400\n[assoc.tick]\nttl = 0.5\n')
    graph = str(tmp_path / "g")
    assert runner.invoke(main, ["init", graph, "--shards", "2"]).exit_code == 0
    shown = runner.invoke(main, ["schema", graph, str(schema)]).output
    assert '[assoc.seen]\ninverse = "seen_by"\nlimit = 6000\nttl = 86400\n' in shown
    assert "[assoc.tick]\nlimit = 6000\nttl = 0.5\n" in shown
    bad = tmp_path / "bad.toml"
    bad.write_text("[assoc.seen]\nttl = -1\n")
    refused = runner.invoke(main, ["schema", graph, str(bad)])
    assert refused.exit_code != 0
    assert refused.output.startswith("Error: ttl must be")
    with assocdb.open(graph, create=False) as g:
        assert g.schema.assoc_type("seen").ttl == 86400.0  # unchanged


# -- reads -------------------------------------------------------------------------------


def test_an_edge_disappears_at_its_expiry_everywhere(stores: Stores) -> None:
    wall = [1_700_000_000_000 * 1_000_000]
    g = clocked(stores, wall, cache=assocdb.CacheConfig())
    g.define_assoc("seen", inverse="seen_by", ttl=10)
    now = wall[0] // 1_000_000
    g.assoc_add(1, "seen", 2, time=now - 9_999)  # expires at now + 1 ms
    g.assoc_add(1, "seen", 3, time=now)
    assert [a.id2 for a in g.assoc_range(1, "seen")] == [3, 2]  # cached, both legs
    assert g.assoc_count(2, "seen_by") == 1
    wall[0] += 1_000_000  # 1 ms: edge 2 expires
    assert [a.id2 for a in g.assoc_range(1, "seen")] == [3]
    assert g.assoc_count(1, "seen") == 1
    assert g.assoc_count(2, "seen_by") == 0
    assert g.assoc_get(1, "seen", [2, 3])[0].id2 == 3
    assert g.assoc_edge(1, "seen", 2) is None
    assert not g.assoc_contains(1, "seen", 2)
    assert g.select(1, "seen").page().items == [3]
    g.assoc_add(4, "seen", 3, time=now)
    g.assoc_add(4, "seen", 5, time=now)
    one, four = g.select(1, "seen"), g.select(4, "seen")  # compounds leave 2 out too
    assert (one | four).count() == assocdb.Count(2, exact=True)
    assert (one & four).count() == assocdb.Count(1, exact=True)
    assert (four - one).count() == assocdb.Count(1, exact=True)
    assert (one | four).page().items == [5, 3]
    # The stored count still holds it until the pass removes both legs.
    assert stores_count(g, 1, "seen") == 2
    # The edge row, and its inverse row unless that was removed with it before it was met.
    assert g.services.expiry.expire() in (1, 2)
    assert stores_count(g, 1, "seen") == 1
    assert stores_count(g, 2, "seen_by") == 0
    assert g.check_counts() == []
    assert g.check_inverses() == []
    g.close()


def stores_count(g: Graph, id1: int, atype: str) -> int:
    kind = g.schema.assoc_type(atype)
    shard = assocdb.core.ids.shard_of(id1, g.shards)
    return g.engine.backend.counts(shard, id1, kind.id).get(State.NORMAL, 0)


def test_a_longer_ttl_shows_what_the_pass_has_not_removed(stores: Stores) -> None:
    wall = [1_700_000_000_000 * 1_000_000]
    g = clocked(stores, wall, cache=assocdb.CacheConfig())
    g.define_assoc("seen", ttl=10)
    now = wall[0] // 1_000_000
    g.assoc_add(1, "seen", 2, time=now - 20_000)
    g.assoc_add(1, "seen", 3, time=now - 15_000)
    assert g.assoc_count(1, "seen") == 0
    g.define_assoc("seen", ttl=17)
    assert [a.id2 for a in g.assoc_range(1, "seen")] == [3]
    g.services.expiry.expire()  # removes 2 only
    g.define_assoc("seen")  # no ttl: nothing expires, what was removed stays removed
    assert [a.id2 for a in g.assoc_range(1, "seen")] == [3]
    assert g.assoc_count(1, "seen") == 1
    g.close()


# -- the expiry pass ---------------------------------------------------------------------


def test_the_pass_under_concurrent_writes_keeps_what_was_rewritten(stores: Stores) -> None:
    """Writers add edges born expired and fresh, delete and re-add them, while expiry
    passes run; at the end every fresh edge is there, no expired one is stored, and
    counts and inverses are exact."""
    g = stores.open("g", shards=4)
    g.define_assoc("seen", inverse="seen_by", ttl=3600)
    final: dict[tuple[int, int], str] = {}  # (id1, id2) -> "fresh" | "old" | "gone"
    lock = threading.Lock()
    stop = threading.Event()

    def writer(first: int) -> None:
        rng = random.Random(first)
        for _ in range(300):
            id1, id2 = rng.randrange(first, first + 5), rng.randrange(1, 30)
            action = rng.choice(["fresh", "old", "old", "gone"])
            if action == "gone":
                g.assoc_delete(id1, "seen", id2)
            else:
                at = None if action == "fresh" else int(time.time() * 1000) - 2 * HOUR_MS
                g.assoc_add(id1, "seen", id2, time=at)
            with lock:
                final[(id1, id2)] = action

    def cleaner() -> None:
        while not stop.is_set():
            g.services.expiry.expire(page=7)

    threads = [threading.Thread(target=writer, args=(first,)) for first in (100, 200, 300)]
    sweeper = threading.Thread(target=cleaner)
    sweeper.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    sweeper.join()
    g.services.expiry.expire()
    fresh = {key for key, action in final.items() if action == "fresh"}
    stored = {
        (e.id1, e.id2)
        for shard in range(g.shards)
        for e in g.engine.backend.export_edges(shard, None, 100_000)
        if e.state == State.NORMAL and e.atype == g.schema.assoc_type("seen").id
    }
    assert stored == fresh
    for id1 in {key[0] for key in final}:
        mine = sorted((k[1] for k in fresh if k[0] == id1), reverse=True)
        assert sorted((a.id2 for a in g.assoc_range(id1, "seen", limit=100)), reverse=True) == mine
        assert g.assoc_count(id1, "seen") == stores_count(g, id1, "seen") == len(mine)
    assert g.check_counts() == []
    assert g.check_inverses() == []


def test_the_cleaner_thread_removes_expired_edges(stores: Stores) -> None:
    g = stores.open("g", shards=2)
    g.define_assoc("seen", inverse="seen_by", ttl=60)
    old = int(time.time() * 1000) - HOUR_MS
    for id2 in range(1, 21):
        g.assoc_add(1, "seen", id2, time=old)
    g.assoc_add(1, "seen", 99)
    assert g.assoc_count(1, "seen") == 1
    assert stores_count(g, 1, "seen") == 21
    g.start_cleaner(interval=0.01)
    inverses = range(1, 21)
    wait_until(lambda: sum(stores_count(g, id2, "seen_by") for id2 in inverses) == 0)
    wait_until(lambda: stores_count(g, 1, "seen") == 1)  # (each leg on its own shard)
    assert [a.id2 for a in g.assoc_range(1, "seen")] == [99]


def test_the_pass_removes_in_the_low_lane(stores: Stores, monkeypatch: pytest.MonkeyPatch) -> None:
    """Background work: its removals give way to client writes (`writes.lanes`)."""
    g = stores.open("g", shards=2)
    g.define_assoc("seen", inverse="seen_by", ttl=60)
    old = int(time.time() * 1000) - HOUR_MS
    for id2 in range(1, 6):
        g.assoc_add(1, "seen", id2, time=old)
    lanes: list[bool] = []
    submit = g.engine.submit_many

    def spied(writes, sync=None, low=False):  # type: ignore[no-untyped-def]
        lanes.append(low)
        return submit(writes, sync, low)

    monkeypatch.setattr(g.engine, "submit_many", spied)
    assert g.services.expiry.expire() == 5
    assert lanes
    assert all(lanes)
    assert stores_count(g, 1, "seen") == 0


def test_types_without_a_ttl_are_never_scanned(stores: Stores) -> None:
    g = stores.open("g", shards=2)
    g.define_assoc("follows", inverse="followed_by")
    g.assoc_add(1, "follows", 2, time=1)
    assert g.services.expiry.expire() == 0
    assert g.assoc_count(1, "follows") == 1


def test_the_pass_reads_only_expired_rows_of_ttl_types(stores: Stores) -> None:
    """The shard's filtered walk (`export_edges(..., older)`) returns exactly the live rows
    of the types with a ttl whose time is below the bound, page by page in key order:
    never a row of a type without a ttl, a fresh row or a removed one."""
    g = stores.open("g", shards=2)
    g.define_assoc("seen", inverse="seen_by", ttl=3600)
    g.define_assoc("follows", inverse="followed_by")
    old = int(time.time() * 1000) - 2 * HOUR_MS
    for id2 in range(1, 31):
        g.assoc_add(id2 % 4 + 1, "seen", 100 + id2, time=old if id2 % 3 else None)
        g.assoc_add(id2 % 4 + 1, "follows", 100 + id2, time=old)
    g.assoc_delete(2, "seen", 101)  # removed: a tombstone, old, not to be read again
    kinds = g.services.expiry.kinds()
    lows = {id: lowest_visible(int(time.time() * 1000), 3600) for id in kinds}
    everything = [e for s in range(g.shards) for e in g.engine.backend.export_edges(s, None, 999)]
    wanted = sorted(
        (e.id1, e.atype, e.id2)
        for e in everything
        if e.atype in lows and e.state != State.REMOVED and e.time < lows[e.atype]
    )
    read = []
    for shard in range(g.shards):
        after = None
        while rows := g.engine.backend.export_edges(shard, after, 4, lows):
            read += [(e.id1, e.atype, e.id2) for e in rows]
            after = read[-1]
    assert len(wanted) == 2 * 19  # 20 old edges of 30, one deleted: both legs
    assert sorted(read) == wanted
    assert g.services.expiry.expire() == 19
    assert g.check_counts() == []
    assert g.check_inverses() == []
    assert sum(g.assoc_count(n, "follows") for n in range(1, 5)) == 30


def test_the_cli_expires_edges_now(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "g", shards=2) as g:
        g.define_assoc("seen", inverse="seen_by", ttl=60)
        g.assoc_add(1, "seen", 2, time=1)
        g.assoc_add(1, "seen", 3)
    result = CliRunner().invoke(main, ["expire", str(tmp_path / "g")])
    assert result.exit_code == 0
    assert result.output.startswith("removed ")
    with assocdb.open(tmp_path / "g", create=False) as g:
        assert stores_count(g, 1, "seen") == 1
        assert stores_count(g, 2, "seen_by") == 0
    missing = CliRunner().invoke(main, ["expire", str(tmp_path / "none")])
    assert missing.exit_code != 0
    assert "Error: " in missing.output  # click's usage error, no traceback
    assert "Traceback" not in missing.output


@pytest.mark.parametrize("mode", ["write", "read"])
def test_timelines_of_posts_with_a_ttl_drop_expired_items(tmp_path: Path, mode: str) -> None:
    with assocdb.open(tmp_path / "g", shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.define_assoc("posted", ttl=60)
        g.define_timeline("follows", mode=mode)  # type: ignore[arg-type]
        g.assoc_add(1, "follows", 2)
        now = int(time.time() * 1000)
        g.post(2, 500, time=now - HOUR_MS)  # born expired
        g.post(2, 501, time=now)
        assert g.drain(timeout=60)
        assert [i.item for i in g.home_timeline(1).items] == [501]
        assert [i.item for i in g.user_timeline(2).items] == [501]


def test_follows_with_a_ttl_stop_feeding_a_timeline(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "g", shards=2) as g:
        g.define_assoc("follows", inverse="followed_by", ttl=60)
        g.define_timeline("follows", mode="write")
        g.assoc_add(1, "follows", 2, time=int(time.time() * 1000) - HOUR_MS)  # expired
        g.assoc_add(1, "follows", 3)
        g.post(2, 600)
        g.post(3, 601)
        assert g.drain(timeout=60)
        assert [i.item for i in g.home_timeline(1).items] == [601]
