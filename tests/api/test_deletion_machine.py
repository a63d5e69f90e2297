"""Random graphs, cascading deletions, restores, writes during a cascade and a
reopen mid-cascade, against a plain-dict model (`tests/support/deletion_model.py`):
objects, both directions of every edge, counts, home timelines (users post items
fanned out to their followers) and an index on the objects' `tag`."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from assocdb import Graph, InvalidRequest, WriteResult
from assocdb.api import cascade_walk
from tests.support.deletion_model import TYPES, DeletionModel
from tests.support.stores import Stores, examples

WRITE_TYPES = ["follows", "authored", "contains", "likes"]
TAGS = ["red", "blue"]
ITEMS = 10**12  # items are not objects: ids far above the objects'
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
        self.graph.define_timeline("follows", mode="write")
        self.graph.define_index("thing_by_tag", "thing", ["tag"])
        assert self.graph.index_build("thing_by_tag").state == "ready"
        self.model = DeletionModel()
        self.ids: list[int] = []
        self.time = 0
        self.items = ITEMS

    def _open(self) -> Graph:
        return self.stores.open("g", at=self.where, shards=3)

    def teardown(self) -> None:
        self.stores.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _pick(self, n: int) -> int:
        return self.ids[n % len(self.ids)]

    # -- writes -------------------------------------------------------------------

    @rule(data=datas, tag=st.sampled_from(TAGS))
    def add_object(self, data: Any, tag: str) -> None:
        id = self.graph.obj_add("thing", {"d": data, "tag": tag})
        self.ids.append(id)
        self.model.add_object(id, {"d": data, "tag": tag})

    @precondition(lambda self: self.ids)
    @rule(a=picks, atype=st.sampled_from(WRITE_TYPES), b=picks, data=datas)
    def add_edge(self, a: int, atype: str, b: int, data: Any) -> None:
        self._add(self._pick(a), atype, self._pick(b), data)

    def _add(self, id1: int, atype: str, id2: int, data: Any) -> None:
        self.time += 1
        self._applied(self.graph.assoc_add(id1, atype, id2, time=self.time, data=data))
        self.model.add_edge(id1, atype, id2, self.time, data)

    def _applied(self, result: WriteResult) -> None:
        """Wait for a write the store `queued` (a shard's apply failed, e.g. a busy
        SQLite on a loaded machine: its retry applies it), so that the checks after the
        step read it, as the model does."""
        if result.status != "applied":
            assert self.graph.drain(60)

    @precondition(lambda self: self.ids)
    @rule(a=picks, atype=st.sampled_from(WRITE_TYPES), b=picks)
    def delete_edge(self, a: int, atype: str, b: int) -> None:
        id1, id2 = self._pick(a), self._pick(b)
        self._applied(self.graph.assoc_delete(id1, atype, id2))
        self.model.delete_edge(id1, atype, id2)

    @precondition(lambda self: self.model.objects)
    @rule(a=picks, b=st.none() | picks)
    def post(self, a: int, b: int | None) -> None:
        """A live user posts a new item; its fan-out reaches the followers of now (with
        `b`, one more first: random edges alone seldom make a follower of an author)."""
        authors = sorted(self.model.objects)
        author = authors[a % len(authors)]
        others = [id for id in self.ids if id != author]
        if b is not None and others:  # not the author: hypothesis likes to pick the same
            self._add(others[b % len(others)], "follows", author, None)
        self._post(author)

    def _post(self, author: int) -> None:
        self.items += 1
        self.time += 1
        self.graph.post(author, self.items, time=self.time)
        assert self.graph.drain(60)
        self.model.post(author, self.items, self.time)

    @precondition(lambda self: any(k[1] == "posted" for k in self.model.edges))
    @rule(a=picks)
    def post_delete(self, a: int) -> None:
        posts = sorted(k for k in self.model.edges if k[1] == "posted")
        author, _, item = posts[a % len(posts)]
        self.graph.post_delete(author, item)
        assert self.graph.drain(60)
        self.model.post_delete(author, item)

    # -- deletions ----------------------------------------------------------------

    @precondition(lambda self: self.ids)
    @rule(a=picks)
    def delete(self, a: int) -> None:
        self._delete(self._pick(a))

    @precondition(lambda self: any(self.model.homes.values()))
    @rule(a=picks, undo=st.booleans())
    def delete_a_reader(self, a: int, undo: bool) -> None:
        """A user whose home holds items (random picks seldom find one), maybe restored
        at once (its home comes back)."""
        readers = sorted(id for id, home in self.model.homes.items() if home)
        root = readers[a % len(readers)]
        self._delete(root)
        if undo:
            self._restore(root)

    def _delete(self, root: int) -> None:
        self.graph.obj_delete(root, cascade=True)
        assert self.graph.obj_get(root) is None  # at once
        assert self.graph.deletions.wait(60)
        assert self.graph.drain(60)
        self.model.cascade(root)

    def _standing(self) -> list[int]:
        """Roots still deleted by their latest deletion, which is done."""
        latest = self.model.latest.items()
        return sorted(id for id, r in latest if r.status == "done" and id not in self.model.objects)

    @precondition(lambda self: self._standing())
    @rule(a=picks, b=picks, incoming=st.booleans(), post=st.booleans())
    def delete_again_after_writes(self, a: int, b: int, incoming: bool, post: bool) -> None:
        """A follow written to or by a deleted object (writes to it are taken), maybe an
        item posted to it, then deleting it again: the same deletion takes them in
        (random picks seldom write to a deleted object and delete it again)."""
        roots = self._standing()
        root, other = roots[a % len(roots)], self._pick(b)
        follower, followee = (other, root) if incoming else (root, other)
        self._add(follower, "follows", followee, None)
        if post and other in self.model.objects:
            self._post(other)
        self._delete(root)

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
        assert self.graph.drain(60)
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
        assert self.graph.drain(60)
        self.model.cascade(root)

    @precondition(lambda self: self.model.latest)
    @rule(a=picks)
    def restore(self, a: int) -> None:
        roots = sorted(self.model.latest)
        root = roots[a % len(roots)]
        self._restore(root)

    def _restore(self, root: int) -> None:
        if self.model.latest[root].status == "restored":
            with pytest.raises(InvalidRequest, match="restored already"):
                self.graph.obj_restore(root)
            return
        self.graph.obj_restore(root)
        assert self.graph.drain(60)
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

    @invariant()
    def same_timelines(self) -> None:
        """Every home timeline reads as the model's: a deleted user's items have left
        every home, its own home is empty, a restore brings exactly those back."""
        g = self.graph
        for id in self.ids:
            got = [(i.time, i.item, i.author) for i in g.home_timeline(id, limit=1000).items]
            assert got == self.model.home(id), id
            # what the home list stores, authors no longer followed included (reads hide
            # them; a re-follow shows them again)
            held = {item: (t, author) for t, item, author, _ in g._timelines.home_held(id)}
            assert held == self.model.homes.get(id, {}), id

    @invariant()
    def same_index(self) -> None:
        """The index finds exactly the live objects of each tag, and holds no entry of a
        deleted object (reads re-check the objects, so `index_check` looks at the rows)."""
        for tag in TAGS:
            page = self.graph.index_query("thing_by_tag", eq=(tag,), limit=1000)
            want = sorted(id for id, data in self.model.objects.items() if data["tag"] == tag)
            assert sorted(o.id for o in page.items) == want, tag
        check = self.graph.index_check("thing_by_tag")
        assert (check.missing, check.stale, check.dangling) == (0, 0, 0), check


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


# Few: each example creates and drops a graph's schemas (MySQL: ~9 s an example on a
# loaded machine); the job's code is the same.
for _machine in (MySQLDeletionMachine, PostgresDeletionMachine):
    _machine.TestCase.settings = settings(max_examples=3, stateful_step_count=20, deadline=None)
TestMySQLDeletions = MySQLDeletionMachine.TestCase
TestPostgresDeletions = PostgresDeletionMachine.TestCase


# -- examples the machine found, replayed step by step --------------------------------


def replay(steps: list[tuple[str, tuple[Any, ...]]]) -> None:
    """Run `steps` (rule, arguments) on a fresh machine, checking it after each; the
    rules' picks are positions in the order the objects were added (ids are random),
    and ("post", (n,)) has object n post."""
    machine = DeletionMachine()
    try:
        for name, args in steps:
            if name == "post":
                authors = sorted(machine.model.objects)
                machine.post(authors.index(machine.ids[args[0]]), None)
            else:
                getattr(machine, name)(*args)
            machine.same_graph()
            machine.same_timelines()
            machine.same_index()
    finally:
        machine.teardown()


def test_a_second_deletion_of_a_deleted_reader_keeps_the_first_ones_home() -> None:
    """A reader deleted, following again (a write to a deleted object), fed a new item
    and deleted again: one restore gives back both deletions' home entries (the model
    kept only the second's)."""
    replay(
        [
            ("add_object", (None, "red")),
            ("add_object", (None, "red")),
            ("add_edge", (0, "follows", 1, 1)),
            ("post", (1,)),
            ("delete", (0,)),
            ("add_edge", (0, "follows", 1, None)),
            ("post", (1,)),
            ("delete_a_reader", (0, True)),
        ]
    )


def test_a_restore_gives_back_a_readers_entry_of_its_deep_targets_item() -> None:
    """A reader's home holds an item of someone it no longer follows and has authored
    (a deep target): the item is posted again by a later step of the restore than the
    one giving the home back, which dropped the entry."""
    replay(
        [
            ("add_object", (None, "red")),
            ("add_object", (None, "red")),
            ("add_edge", (0, "follows", 1, None)),
            ("post", (1,)),
            ("delete_edge", (0, "follows", 1)),
            ("add_edge", (0, "authored", 1, None)),
            ("delete_a_reader", (0, True)),
        ]
    )
