"""Random graphs, cascading deletions, restores, writes during a cascade and a
reopen mid-cascade, against a plain-dict model (`tests/support/deletion_model.py`)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from assocdb import Graph, InvalidRequest
from assocdb.api import cascade_walk
from tests.support.deletion_model import TYPES, DeletionModel
from tests.support.stores import Stores, examples

WRITE_TYPES = ["follows", "authored", "contains", "likes"]
picks = st.integers(0, 10**6)
datas = st.sampled_from([None, 1, {"k": "v"}])


class DeletionMachine(RuleBasedStateMachine):
    KIND = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="assocdb-del-")
        self.stores = Stores(self.KIND, Path(self.directory))
        directory = Path(self.directory)
        sqlite = (directory, directory / "journal.db")
        self.where = sqlite if self.KIND == "sqlite" else self.stores.location("g")
        self.graph = self._open()
        for name, (inverse, rule_) in TYPES.items():
            self.graph.define_assoc(name, inverse=inverse, on_delete=rule_)  # type: ignore[arg-type]
        self.graph.define_object("thing")
        self.model = DeletionModel()
        self.ids: list[int] = []
        self.time = 0

    def _open(self) -> Graph:
        return self.stores.open("g", at=self.where, shards=3)

    def teardown(self) -> None:
        self.stores.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _pick(self, n: int) -> int:
        return self.ids[n % len(self.ids)]

    # -- writes -------------------------------------------------------------------

    @rule(data=datas)
    def add_object(self, data: Any) -> None:
        id = self.graph.obj_add("thing", {"d": data})
        self.ids.append(id)
        self.model.add_object(id, {"d": data})

    @precondition(lambda self: self.ids)
    @rule(a=picks, atype=st.sampled_from(WRITE_TYPES), b=picks, data=datas)
    def add_edge(self, a: int, atype: str, b: int, data: Any) -> None:
        self._add(self._pick(a), atype, self._pick(b), data)

    def _add(self, id1: int, atype: str, id2: int, data: Any) -> None:
        self.time += 1
        self.graph.assoc_add(id1, atype, id2, time=self.time, data=data)
        self.model.add_edge(id1, atype, id2, self.time, data)

    @precondition(lambda self: self.ids)
    @rule(a=picks, atype=st.sampled_from(WRITE_TYPES), b=picks)
    def delete_edge(self, a: int, atype: str, b: int) -> None:
        id1, id2 = self._pick(a), self._pick(b)
        self.graph.assoc_delete(id1, atype, id2)
        self.model.delete_edge(id1, atype, id2)

    # -- deletions ----------------------------------------------------------------

    @precondition(lambda self: self.ids)
    @rule(a=picks)
    def delete(self, a: int) -> None:
        root = self._pick(a)
        self.graph.obj_delete(root, cascade=True)
        assert self.graph.obj_get(root) is None  # at once
        assert self.graph.deletions.wait(60)
        self.model.cascade(root)

    @precondition(lambda self: len(self.ids) > 1)
    @rule(
        a=picks, writes=st.lists(st.tuples(picks, st.sampled_from(WRITE_TYPES), picks), max_size=4)
    )
    def delete_with_writes_meanwhile(self, a: int, writes: list[tuple[int, str, int]]) -> None:
        """Edges written to and around the object while its cascade runs: those that
        touch it (found through its lists) are removed too."""
        root = self._pick(a)
        self.graph.deletions.pause()
        self.graph.obj_delete(root, cascade=True)
        for x, atype, y in writes:
            self._add(root if x % 2 else self._pick(x), atype, self._pick(y), None)
        self.graph.deletions.resume()
        assert self.graph.deletions.wait(60)
        self.model.cascade(root)

    @precondition(lambda self: self.ids)
    @rule(a=picks)
    def delete_then_reopen(self, a: int) -> None:
        """The job outlives its process: closed mid-cascade, it finishes after reopening."""
        root = self._pick(a)
        self.graph.deletions.pause()
        self.graph.obj_delete(root, cascade=True)
        self.stores.forget(self.graph)
        self.graph.close()
        self.graph = self._open()
        assert self.graph.deletions.wait(60)
        self.model.cascade(root)

    @precondition(lambda self: self.model.latest)
    @rule(a=picks)
    def restore(self, a: int) -> None:
        roots = sorted(self.model.latest)
        root = roots[a % len(roots)]
        if self.model.latest[root].status == "restored":
            with pytest.raises(InvalidRequest, match="restored already"):
                self.graph.obj_restore(root)
            return
        self.graph.obj_restore(root)
        self.model.restore(root)

    # -- the graph equals the model ------------------------------------------------

    @invariant()
    def same_graph(self) -> None:
        g, model = self.graph, self.model
        for id in self.ids:
            obj = g.obj_get(id)
            assert (None if obj is None else obj.data) == model.objects.get(id), id
            for atype in TYPES:
                want = sorted(
                    (
                        (t, id2, d)
                        for (i1, a, id2), (t, d) in model.edges.items()
                        if (i1, a) == (id, atype)
                    ),
                    reverse=True,
                )
                got = [(e.time, e.id2, e.data) for e in g.assoc_range(id, atype, limit=1000)]
                assert got == [(t, i, d) for t, i, d in want], (id, atype)
                assert g.assoc_count(id, atype) == len(want), (id, atype)


DeletionMachine.TestCase.settings = settings(
    max_examples=examples("sqlite", 25), stateful_step_count=20, deadline=None
)
TestDeletions = DeletionMachine.TestCase


class SmallStepsDeletionMachine(DeletionMachine):
    """The same rules with batches of 2 objects and steps of 3 edges, so that a step's
    page ends inside a list, crosses lists and objects, and batches follow each other
    (the defaults, 100 and 500, are larger than these graphs)."""

    def __init__(self) -> None:
        self.patch = pytest.MonkeyPatch()
        self.patch.setattr(cascade_walk, "BATCH_OBJECTS", 2)
        self.patch.setattr(cascade_walk, "STEP_EDGES", 3)
        super().__init__()

    def teardown(self) -> None:
        super().teardown()
        self.patch.undo()


SmallStepsDeletionMachine.TestCase.settings = settings(
    max_examples=examples("sqlite", 25), stateful_step_count=20, deadline=None
)
TestSmallStepsDeletions = SmallStepsDeletionMachine.TestCase


class MySQLDeletionMachine(DeletionMachine):
    """The same rules on MySQL/MariaDB."""

    KIND = "mysql"


class PostgresDeletionMachine(DeletionMachine):
    """The same rules on PostgreSQL."""

    KIND = "postgres"


# Few: each example creates and drops a graph's schemas; the job's code is the same.
for _machine in (MySQLDeletionMachine, PostgresDeletionMachine):
    _machine.TestCase.settings = settings(max_examples=5, stateful_step_count=20, deadline=None)
TestMySQLDeletions = MySQLDeletionMachine.TestCase
TestPostgresDeletions = PostgresDeletionMachine.TestCase
