"""Random writes and queries against a plain-dict model of the graph."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import assocdb
from assocdb import NotFound
from tests.support.model import Model
from tests.support.stores import Stores

nodes = st.integers(1, 5)
write_types = st.sampled_from(["follows", "friend", "likes"])
read_types = st.sampled_from(["follows", "followed_by", "friend", "likes"])
times = st.none() | st.integers(0, 4)
datas = st.sampled_from([None, 1, "a", {"k": [1]}])


class GraphMachine(RuleBasedStateMachine):
    """Writes applied before they return (the default, sync mode)."""

    SYNC = True
    CACHE: assocdb.CacheConfig | None = assocdb.CacheConfig()
    KIND = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="assocdb-sm-")
        self.stores = Stores(self.KIND, Path(self.directory))
        # On SQLite the graph is the directory itself: subclasses open it again there.
        directory = Path(self.directory)
        where = (directory, directory / "journal.db") if self.KIND == "sqlite" else None
        self.graph = self.stores.open("g", at=where, shards=3, sync=self.SYNC, cache=self.CACHE)
        self.graph.define_assoc("follows", inverse="followed_by")
        self.graph.define_assoc("friend", symmetric=True)
        self.graph.define_assoc("likes")
        self.model = Model()

    def teardown(self) -> None:
        self.stores.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- writes --

    @rule(id1=nodes, atype=write_types, id2=nodes, time=times, data=datas)
    def add(self, id1: int, atype: str, id2: int, time: int | None, data: Any) -> None:
        result = self.graph.assoc_add(id1, atype, id2, time=time, data=data)
        self.model.add(id1, atype, id2, time, data, result.updated_at)

    @rule(id1=nodes, atype=write_types, id2=nodes)
    def delete(self, id1: int, atype: str, id2: int) -> None:
        self.graph.assoc_delete(id1, atype, id2)
        self.model.delete(id1, atype, id2)

    @rule(id1=nodes, atype=write_types, id2=nodes, new=write_types)
    def change_type(self, id1: int, atype: str, id2: int, new: str) -> None:
        if atype == new:
            with pytest.raises(assocdb.InvalidRequest):
                self.graph.assoc_change_type(id1, atype, id2, new)
            return
        if self.SYNC:
            expected = self.model.live(id1, atype, id2) is not None
            try:
                self.graph.assoc_change_type(id1, atype, id2, new)
                changed = True
            except NotFound:
                changed = False
            assert changed == expected
        else:  # checked when applied, in order; a refusal becomes a bad job
            assert self.graph.assoc_change_type(id1, atype, id2, new).status == "queued"
        self.model.change_type(id1, atype, id2, new)

    # -- reads --

    def settle(self) -> None:
        """Background writes are read once applied: wait for them."""
        if not self.SYNC:
            assert self.graph.drain(timeout=10)

    def reader(self) -> assocdb.Graph:
        """The graph reads go to (the writer's own, unless a variant says otherwise)."""
        return self.graph

    @rule(id1=nodes, atype=read_types, limit=st.integers(1, 7), pos=st.integers(0, 6))
    def range_and_count(self, id1: int, atype: str, limit: int, pos: int) -> None:
        self.settle()
        expected = self.model.listing(id1, atype)
        got = self.reader().assoc_range(id1, atype, pos=pos, limit=limit)
        assert [(a.id2, a.time, a.data) for a in got] == expected[pos : pos + limit]
        assert self.reader().assoc_count(id1, atype) == len(expected)

    @rule(id1=nodes, atype=read_types, limit=st.integers(1, 4))
    def page_walk(self, id1: int, atype: str, limit: int) -> None:
        self.settle()
        expected = [row[0] for row in self.model.listing(id1, atype)]
        seen, cursor = [], None
        while True:
            page = self.reader().assoc_page(id1, atype, cursor, limit=limit)
            seen += [a.id2 for a in page.items]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == expected

    @rule(
        id1=nodes,
        atype=read_types,
        id2s=st.lists(nodes, max_size=5),
        bounds=st.tuples(times, times),
    )
    def get(
        self, id1: int, atype: str, id2s: list[int], bounds: tuple[int | None, int | None]
    ) -> None:
        self.settle()
        high, low = bounds
        expected = [
            row[0]
            for row in self.model.listing(id1, atype)
            if row[0] in id2s
            and (high is None or row[1] <= high)
            and (low is None or row[1] >= low)
        ]
        got = self.reader().assoc_get(id1, atype, id2s, high=high, low=low)
        assert [a.id2 for a in got] == expected

    @rule(id1=nodes, atype=read_types, high=st.integers(0, 4), low=st.integers(0, 4))
    def time_range(self, id1: int, atype: str, high: int, low: int) -> None:
        self.settle()
        expected = [r[0] for r in self.model.listing(id1, atype) if low <= r[1] <= high]
        got = self.reader().assoc_time_range(id1, atype, high, low, limit=50)
        assert [a.id2 for a in got] == expected

    @invariant()
    def every_list_matches_the_model(self) -> None:
        self.settle()
        for id1 in range(1, 6):
            for atype in ("follows", "followed_by", "friend", "likes"):
                expected = self.model.listing(id1, atype)
                got = self.reader().assoc_range(id1, atype, limit=50)
                assert [(a.id2, a.time, a.data) for a in got] == expected, (id1, atype)
                assert self.reader().assoc_count(id1, atype) == len(expected)
        assert self.graph.check_counts() == []


class AsyncGraphMachine(GraphMachine):
    """Writes acknowledged once journaled and applied in the background (sync=False)."""

    SYNC = False


class UncachedGraphMachine(GraphMachine):
    """No cache: every read from the shards."""

    CACHE = None


class TinyPrefixGraphMachine(GraphMachine):
    """Cached prefixes of 3 edges: lists keep outgrowing them, so every read has to
    decide whether the prefix covers it, and writes insert into full prefixes."""

    CACHE = assocdb.CacheConfig(prefix=3)


GraphMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
AsyncGraphMachine.TestCase.settings = settings(
    max_examples=30, stateful_step_count=30, deadline=None
)
UncachedGraphMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=30, deadline=None
)
TinyPrefixGraphMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None
)


class MySQLGraphMachine(GraphMachine):
    """The same rules on MySQL/MariaDB (cached)."""

    KIND = "mysql"


class MySQLUncachedGraphMachine(GraphMachine):
    """On MySQL/MariaDB without a cache: every read is SQL."""

    KIND = "mysql"
    CACHE = None


MySQLGraphMachine.TestCase.settings = settings(
    max_examples=15, stateful_step_count=30, deadline=None
)
MySQLUncachedGraphMachine.TestCase.settings = settings(
    max_examples=15, stateful_step_count=30, deadline=None
)


class PostgresGraphMachine(GraphMachine):
    """The same rules on PostgreSQL (cached)."""

    KIND = "postgres"


class PostgresUncachedGraphMachine(GraphMachine):
    """On PostgreSQL without a cache: every read is SQL."""

    KIND = "postgres"
    CACHE = None


# Fewer than MySQL's: each example creates and drops a graph's schemas (catalog
# work and fsyncs), and the rules are the same code as on the other engines.
PostgresGraphMachine.TestCase.settings = settings(
    max_examples=10, stateful_step_count=30, deadline=None
)
PostgresUncachedGraphMachine.TestCase.settings = settings(
    max_examples=10, stateful_step_count=30, deadline=None
)
TestGraphMachine = GraphMachine.TestCase
TestAsyncGraphMachine = AsyncGraphMachine.TestCase
TestUncachedGraphMachine = UncachedGraphMachine.TestCase
TestTinyPrefixGraphMachine = TinyPrefixGraphMachine.TestCase
TestMySQLGraphMachine = MySQLGraphMachine.TestCase
TestMySQLUncachedGraphMachine = MySQLUncachedGraphMachine.TestCase
TestPostgresGraphMachine = PostgresGraphMachine.TestCase
TestPostgresUncachedGraphMachine = PostgresUncachedGraphMachine.TestCase
