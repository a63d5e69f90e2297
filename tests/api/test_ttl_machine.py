"""Expiring edges against a model: random adds, deletes, clock steps, ttl changes and
expiry passes on a graph whose wall clock the test moves; after every step every read
(lists, pages, gets, time ranges, counts, set queries) equals the model, through a
cached graph (tier 1, and Redis when configured) and an uncached one on the same data."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import assocdb
from assocdb import Graph
from assocdb.api.open import open_location
from assocdb.core.clock import HybridClock
from assocdb.core.ttl import lowest_visible
from assocdb.writes.journal import Journal
from tests.support.redis_server import redis_url
from tests.support.stores import Stores

NODES = range(1, 5)
nodes = st.integers(1, 4)
#: The types written; `seen` has an inverse, `mark` is symmetric.
INVERSE = {"seen": "seen_by", "seen_by": "seen", "mark": "mark"}
write_types = st.sampled_from(["seen", "mark"])
ttls = st.sampled_from([None, 3.0, 10.0])
datas = st.sampled_from([None, 1, "a"])
START_NS = 1_700_000_000_000 * 1_000_000


class WallClock:
    """The graphs' wall clock (`HybridClock(wall_ns=…)`): time passes when the test says."""

    def __init__(self) -> None:
        self.ns = START_NS

    def __call__(self) -> int:
        return self.ns

    @property
    def ms(self) -> int:
        return self.ns // 1_000_000


class TtlModel:
    """The stored live edges (both legs) and the types' ttls; visibility is computed."""

    def __init__(self) -> None:
        self.stored: dict[tuple[int, str, int], tuple[int, Any]] = {}
        self.ttl: dict[str, float | None] = {"seen": 10.0, "mark": 3.0}

    def ttl_of(self, atype: str) -> float | None:
        return self.ttl["seen" if atype == "seen_by" else atype]

    def _put(self, id1: int, atype: str, id2: int, value: tuple[int, Any] | None) -> None:
        for key in ((id1, atype, id2), (id2, INVERSE[atype], id1)):
            if value is None:
                self.stored.pop(key, None)
            else:
                self.stored[key] = value

    def add(self, id1: int, atype: str, id2: int, time: int | None, data: Any, ua: int) -> None:
        current = self.stored.get((id1, atype, id2))
        if self.ttl_of(atype) is None and current is not None:  # kept, as for any type
            time = current[0] if time is None else time
            data = current[1] if data is None else data
        self._put(id1, atype, id2, (ua // 1000 if time is None else time, data))

    def delete(self, id1: int, atype: str, id2: int) -> None:
        self._put(id1, atype, id2, None)

    def low(self, atype: str, now_ms: int) -> int | None:
        ttl = self.ttl_of(atype)
        return None if ttl is None else lowest_visible(now_ms, ttl)

    def expire(self, now_ms: int) -> None:
        for key, (time, _) in list(self.stored.items()):
            low = self.low(key[1], now_ms)
            if low is not None and time < low:
                del self.stored[key]

    def listing(self, id1: int, atype: str, now_ms: int) -> list[tuple[int, int, Any]]:
        """(id2, time, data) of the visible edges, newest first."""
        low = self.low(atype, now_ms)
        rows = [
            (id2, time, data)
            for (a, t, id2), (time, data) in self.stored.items()
            if a == id1 and t == atype and (low is None or time >= low)
        ]
        return sorted(rows, key=lambda r: (r[1], r[0]), reverse=True)


class TtlMachine(RuleBasedStateMachine):
    """Cached prefixes of 3 edges, so lists outgrow them and pages leave them."""

    KIND = "sqlite"

    def cache(self) -> assocdb.CacheConfig:
        return assocdb.CacheConfig(prefix=3)

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="assocdb-ttl-")
        self.stores = Stores(self.KIND, Path(self.directory))
        self.wall = WallClock()
        clock = HybridClock(self.wall)
        where, journal = self.stores.location("g")
        backend, journal_file = open_location(where, 3, 2.0, True, journal)
        self.graph = Graph(backend, Journal(journal_file), clock=clock, cache=self.cache())
        self.graph.define_assoc("seen", inverse="seen_by", ttl=10)
        self.graph.define_assoc("mark", symmetric=True, ttl=3)
        # The same data read with no cache, in its own process's shoes.
        backend2, _ = open_location(where, None, 2.0, False, journal)
        bare_journal = Journal(Path(self.directory) / "bare.db")
        self.bare = Graph(backend2, bare_journal, clock=clock, cache=None)
        self.model = TtlModel()

    def teardown(self) -> None:
        self.graph.close()
        self.bare.close()
        self.stores.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- steps --

    @rule(
        id1=nodes,
        atype=write_types,
        id2=nodes,
        age=st.none() | st.integers(-2, 12),
        data=datas,
    )
    def add(self, id1: int, atype: str, id2: int, age: int | None, data: Any) -> None:
        time = None if age is None else self.wall.ms - age * 1000
        result = self.graph.assoc_add(id1, atype, id2, time=time, data=data)
        self.model.add(id1, atype, id2, time, data, result.updated_at)

    @rule(id1=nodes, atype=write_types, id2=nodes)
    def delete(self, id1: int, atype: str, id2: int) -> None:
        self.graph.assoc_delete(id1, atype, id2)
        self.model.delete(id1, atype, id2)

    @rule(ms=st.sampled_from([1, 999, 1000, 2500, 4000]))
    def advance(self, ms: int) -> None:
        self.wall.ns += ms * 1_000_000

    @rule()
    def expire(self) -> None:
        self.graph.services.expiry.expire(page=4)
        self.model.expire(self.wall.ms)

    @rule(atype=write_types, ttl=ttls)
    def change_ttl(self, atype: str, ttl: float | None) -> None:
        if atype == "seen":
            self.graph.define_assoc("seen", inverse="seen_by", ttl=ttl)
        else:
            self.graph.define_assoc("mark", symmetric=True, ttl=ttl)
        self.model.ttl[atype] = ttl

    # -- every read, after every step --

    @invariant()
    def reads_match_the_model(self) -> None:
        for g in (self.graph, self.bare):
            g.engine.reload_schema()  # the other graph's ttl changes, now (not within 1 s)
            for atype in ("seen", "seen_by", "mark"):
                for id1 in NODES:
                    self.check_list(g, id1, atype)
                self.check_sets(g, atype)

    def check_list(self, g: Graph, id1: int, atype: str) -> None:
        now = self.wall.ms
        expected = self.model.listing(id1, atype, now)
        ids = [r[0] for r in expected]
        where = (g is self.bare, id1, atype)
        got = g.assoc_range(id1, atype, limit=50)
        assert [(a.id2, a.time, a.data) for a in got] == expected, where
        assert [a.id2 for a in g.assoc_range(id1, atype, 1, 2)] == ids[1:3], where
        assert g.assoc_count(id1, atype) == len(expected), where
        assert [a.id2 for a in g.assoc_get(id1, atype, list(NODES))] == ids, where
        window = [r[0] for r in expected if now - 5000 <= r[1] <= now]
        assert [a.id2 for a in g.assoc_time_range(id1, atype, now, now - 5000)] == window
        walked, cursor = [], None
        while True:
            page = g.assoc_page(id1, atype, cursor, limit=2)
            walked += [a.id2 for a in page.items]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert walked == ids, where
        for id2 in (1, 2):
            edge = g.assoc_edge(id1, atype, id2)
            assert (edge is not None and edge.state == "normal") == (id2 in ids), where

    def check_sets(self, g: Graph, atype: str) -> None:
        now = self.wall.ms
        one = {r[0] for r in self.model.listing(1, atype, now)}
        two = {r[0] for r in self.model.listing(2, atype, now)}
        both = g.select(1, atype).intersect(g.select(2, atype))
        assert both.page(limit=50).items == sorted(one & two, reverse=True)
        only = g.select(1, atype).difference(g.select(2, atype))
        assert only.page(limit=50).items == sorted(one - two, reverse=True)
        assert g.select(1, atype).count().value == len(one)
        term = g.select(1, atype).page(limit=50).items
        assert term == [r[0] for r in self.model.listing(1, atype, now)]
        assert g.select(1, atype, id2s=[1, 2, 3]).page(limit=50).items == [
            i for i in term if i in (1, 2, 3)
        ]


class TtlRedisMachine(TtlMachine):
    """Tier 2 in Redis as well: neither tier may answer with an expired edge."""

    def cache(self) -> assocdb.CacheConfig:
        return assocdb.CacheConfig(prefix=3, redis=redis_url())


class MySQLTtlMachine(TtlMachine):
    KIND = "mysql"


class PostgresTtlMachine(TtlMachine):
    KIND = "postgres"


TtlMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
for _server in (TtlRedisMachine, MySQLTtlMachine, PostgresTtlMachine):
    _server.TestCase.settings = settings(max_examples=8, stateful_step_count=20, deadline=None)
TestTtlMachine = TtlMachine.TestCase
TestTtlRedisMachine = TtlRedisMachine.TestCase
TestMySQLTtlMachine = MySQLTtlMachine.TestCase
TestPostgresTtlMachine = PostgresTtlMachine.TestCase
