"""The journal's commit overlapping the shard transactions (`writes.overlap`).

A round's shard transactions are prepared while the journal commits and are
committed only after it returned; if the journal's commit fails they are
rolled back: the write is refused and nothing of it is stored. (A process
killed meanwhile: tests/system/test_crash.py.)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import assocdb
from assocdb import Graph
from assocdb.core.errors import Unavailable
from assocdb.core.ids import shard_of
from tests.writes.test_journal import FailingConnection


def open_graph(path: Path, **options: Any) -> Graph:
    g = assocdb.open(path, shards=4, **options)
    g.define_assoc("follows", inverse="followed_by")
    return g


def failing_journal(g: Graph) -> FailingConnection:
    journal = g.engine.journal
    conn = FailingConnection(journal._conn)
    journal._conn = conn  # type: ignore[assignment]
    return conn


def test_shard_transactions_are_prepared_while_the_journal_commits(tmp_path: Path) -> None:
    """The journal's commit (on the writer's thread) waits here until the helper thread
    has begun a shard transaction and stored its rows (so they overlap); no shard
    commits before the journal's commit returned."""
    g = open_graph(tmp_path / "g")
    assert g.engine.pipeline.overlap.enabled
    conn = failing_journal(g)
    events: list[str] = []
    cond = threading.Condition()

    def shard_statement(shard: int, sql: str) -> None:
        with cond:
            events.append(sql.split(maxsplit=1)[0])
            cond.notify_all()

    def journal_commit() -> None:  # (the writer's thread, as the journal commits)
        with cond:
            events.append("journal COMMIT")
            assert cond.wait_for(lambda: "INSERT" in events, timeout=30)

    g.engine.backend.faults.append(shard_statement)
    conn.before_commit = journal_commit
    a, b = 4, 3
    assert shard_of(a, 4) != shard_of(b, 4)
    assert g.assoc_add(a, "follows", b).status == "applied"
    committed = events.index("journal COMMIT")
    assert "BEGIN" in events
    assert events.index("BEGIN") < events.index("INSERT")
    assert events.count("COMMIT") == 2  # both shards
    assert all(n > committed for n, e in enumerate(events) if e == "COMMIT")
    assert g.assoc_count(b, "followed_by") == 1
    g.close()


def test_a_journal_commit_that_fails_rolls_the_prepared_shards_back(tmp_path: Path) -> None:
    """The journal's COMMIT fails (a full disk): the writes are refused, and the shard
    transactions prepared meanwhile are rolled back: nothing stored, counts and the
    cache unchanged; the shards' write turns are free again for the next write."""
    g = open_graph(tmp_path / "g")
    g.assoc_add(4, "follows", 3)
    assert g.assoc_count(3, "followed_by") == 1  # (cached)
    conn = failing_journal(g)
    statements: list[str] = []
    g.engine.backend.faults.append(lambda shard, sql: statements.append(sql.split(maxsplit=1)[0]))
    conn.failing = ("COMMIT",)
    with pytest.raises(Unavailable):
        g.assoc_add(8, "follows", 3)
    with g.batch() as b:
        added = b.assoc_add(5, "follows", 3)
        deleted = b.assoc_delete(4, "follows", 3)
    for refused in (added, deleted):
        with pytest.raises(Unavailable):
            refused.result()
    assert "BEGIN" in statements  # prepared,
    assert "COMMIT" not in statements  # not committed
    conn.failing = ()
    assert g.assoc_count(3, "followed_by") == 1
    assert [a.id2 for a in g.assoc_range(3, "followed_by")] == [4]
    assert g.assoc_edge(8, "follows", 3) is None
    assert g.assoc_edge(5, "follows", 3) is None
    assert g.check_counts() == []
    assert g.assoc_add(8, "follows", 3).status == "applied"
    assert sorted(a.id2 for a in g.assoc_range(3, "followed_by")) == [4, 8]
    g.close()


steps = st.lists(
    st.tuples(st.booleans(), st.booleans(), st.integers(1, 6), st.integers(1, 6)),
    min_size=1,
    max_size=25,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=steps)
def test_the_store_holds_exactly_the_writes_the_journal_took(
    tmp_path_factory: pytest.TempPathFactory, log: list[tuple[bool, bool, int, int]]
) -> None:
    """Random adds and deletes, each either journaled or refused by a journal whose
    COMMIT fails: the store (both directions, counts) is exactly the model of the
    writes that were acknowledged."""
    g = open_graph(tmp_path_factory.mktemp("overlap") / "g")
    conn = failing_journal(g)
    model: set[tuple[int, int]] = set()
    for fails, add, id1, id2 in log:
        conn.failing = ("COMMIT",) if fails else ()
        try:
            if add:
                g.assoc_add(id1, "follows", id2)
            else:
                g.assoc_delete(id1, "follows", id2)
        except Unavailable:
            assert fails
            continue
        assert not fails
        if add:
            model.add((id1, id2))
        else:
            model.discard((id1, id2))
    conn.failing = ()
    stored = {(n, a.id2) for n in range(1, 7) for a in g.assoc_range(n, "follows")}
    mirrored = {(a.id2, n) for n in range(1, 7) for a in g.assoc_range(n, "followed_by")}
    assert stored == mirrored == model
    assert g.check_counts() == []
    g.close()


def test_an_error_after_the_prepared_shards_committed_queues_the_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Something fails after the round's shards committed (the applier's bookkeeping):
    nothing is rolled back twice (the cache's write marks stay balanced), the journaled
    writes are `queued`, not refused, and their retries change nothing."""
    g = open_graph(tmp_path / "g")
    applier = g.engine.applier
    commit_batch = applier.commit_batch

    def committed_then_broken(batch: Any, jobs: Any) -> list[bool]:
        commit_batch(batch, jobs)
        raise RuntimeError("a bug after the commit (test)")

    monkeypatch.setattr(applier, "commit_batch", committed_then_broken)
    assert g.assoc_add(4, "follows", 3).status == "queued"
    monkeypatch.undo()
    assert g.drain(timeout=60)
    assert g.assoc_count(3, "followed_by") == 1
    assert g.assoc_count(4, "follows") == 1
    assert g.check_counts() == []
    assert g.engine.cache is None or not g.engine.cache._writing
    assert g.assoc_add(5, "follows", 3).status == "applied"
    assert g.assoc_count(3, "followed_by") == 2
    g.close()


def _recorded_rows(g: Graph, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The rows every later statement of `g`'s backend stores, as they reach the driver."""
    backend = g.engine.backend
    store, stored = backend._store, []

    def recording(session: Any, shard: int, template: str, rows: Any) -> Any:
        stored.extend(rows)
        return store(session, shard, template, rows)

    monkeypatch.setattr(backend, "_store", recording)
    return stored


@pytest.mark.parametrize("write", ["add", "delete", "archive", "negate"])
def test_a_writes_rows_reach_the_driver_as_plain_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: str
) -> None:
    """The state of an edge write is a plain int, not `State`: SQLite's driver adapts an
    int subclass by failed `__adapt__`/`__conform__` lookups on every parameter."""
    g = open_graph(tmp_path / "g")
    g.assoc_add(1, "follows", 2)
    stored = _recorded_rows(g, monkeypatch)
    getattr(g, f"assoc_{write}")(1, "follows", 2)
    assert stored  # the edges' and the counts' upserts
    plain = (int, bytes, str, type(None))
    assert all(type(value) in plain for row in stored for value in row)
    g.close()


def _social(g: Graph) -> tuple[int, int]:
    g.define_assoc("authored", inverse="author", on_delete="deep")
    g.define_assoc("author", inverse="authored", on_delete="shallow")
    g.define_object("user")
    g.define_object("post", owned=True)
    ada, post = g.obj_add("user"), g.obj_add("post")
    g.assoc_add(ada, "authored", post)
    g.assoc_add(ada, "follows", 2)
    return ada, post


def _cascade(g: Graph) -> Iterator[None]:
    ada, _ = _social(g)
    yield
    g.obj_delete(ada, cascade=True)
    assert g.deletions.wait(30)


def _dangling(g: Graph) -> Iterator[None]:
    _, post = _social(g)
    g.obj_delete(post)  # a plain delete: its edges stay, dangling
    yield
    assert g.deletions.dangling(repair=True).repaired


def _timeline(g: Graph) -> Iterator[None]:
    g.define_timeline("follows")
    g.assoc_add(8, "follows", 7)
    yield
    g.post(7, 1001, time=1000)
    g.post(7, 1002, time=1001)
    g.post_delete(7, 1002)
    assert g.drain(30)


def _nodes(g: Graph) -> Iterator[None]:
    g.assoc_add(1, "follows", 2)
    yield
    g.node_archive(1, "follows", direction="both")
    assert g.drain(30)


def _objects(g: Graph) -> Iterator[None]:
    g.define_object("user")
    yield
    g.obj_delete(g.obj_add("user"))


def _indexed(g: Graph) -> Iterator[None]:
    g.define_object("user")
    g.define_index("user_by_email", "user", ["email"], unique=True)
    yield
    ada = g.obj_add("user", {"email": "ada@example.org"})
    g.obj_update(ada, {"email": "ada@example.net"})
    g.obj_delete(ada)
    assert g.drain(30)


@pytest.mark.parametrize("writer", [_cascade, _dangling, _timeline, _nodes, _objects, _indexed])
def test_other_writers_rows_reach_the_driver_as_plain_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: Any
) -> None:
    """Cascades, dangling repairs, timeline posts, node states and objects store
    plain ints too (not `State`), in every row they write."""
    g = open_graph(tmp_path / "g")
    steps = writer(g)
    next(steps)  # set up, unrecorded
    stored = _recorded_rows(g, monkeypatch)
    next(steps, None)
    assert stored
    plain = (int, bytes, str, type(None))
    assert [row for row in stored if any(type(value) not in plain for value in row)] == []
    g.close()
