"""Replaying the journal twice, or out of order, changes nothing.

A graph records every job body it journals (as finally resolved). Those jobs
are then replayed onto the same store in shuffled order, twice, and onto a
fresh store in another order: every store ends with the same rows and counts.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import assocdb
from assocdb import Graph
from assocdb.storage import registry
from assocdb.storage.backend import SERVER_SCHEMES, Backend
from assocdb.writes.applier import Applier, decode
from assocdb.writes.journal import Journal
from tests.support.helpers import all_edges
from tests.support.stores import Stores, examples

writes = st.lists(
    st.tuples(
        st.sampled_from(["add", "add_keep", "delete", "change", "obj"]),
        st.integers(1, 4),
        st.sampled_from(["follows", "friend", "likes"]),
        st.integers(1, 4),
        st.integers(0, 5),
    ),
    min_size=1,
    max_size=30,
)


class RecordingJournal(Journal):
    """A journal that remembers each job's body, as last resolved."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.bodies: dict[int, bytes] = {}

    def append_many(self, bodies: Sequence[bytes]) -> list[int]:
        jobs = super().append_many(bodies)
        self.bodies.update(zip(jobs, bodies, strict=True))
        return jobs

    def resolved(self, job: int, body: bytes) -> None:
        super().resolved(job, body)
        self.bodies[job] = body


def open_graph(where: str | Path, journal: Journal) -> Graph:
    graph = Graph(open_backend(where, 3), journal)
    graph.define_assoc("follows", inverse="followed_by")
    graph.define_assoc("friend", symmetric=True)
    graph.define_assoc("likes")
    graph.define_assoc("blocks")
    graph.define_object("user")
    return graph


def run(graph: Graph, log: list[Any]) -> None:
    for kind, id1, atype, id2, n in log:
        try:
            if kind == "add":
                graph.assoc_add(id1, atype, id2, time=n, data=n)
            elif kind == "add_keep":
                graph.assoc_add(id1, atype, id2)
            elif kind == "delete":
                graph.assoc_delete(id1, atype, id2)
            elif kind == "change":
                graph.assoc_change_type(id1, atype, id2, "blocks")
            else:
                graph.obj_add("user", {"n": n}, id=id1 * 10 + id2)
        except (assocdb.NotFound, assocdb.Conflict):
            pass  # rejected at entry: nothing was journaled


def state(graph: Graph) -> tuple[Any, ...]:
    objects = [graph.obj_get(i * 10 + j) for i in range(1, 5) for j in range(1, 5)]
    return all_edges(graph), graph.check_counts(), objects


def replay_bodies(graph: Graph, bodies: list[bytes]) -> None:
    applier: Applier = graph.engine.applier
    for n, body in enumerate(bodies):
        assert applier.run(10**9 + n, decode(body))


def open_backend(where: str | Path, shards: int | None = None) -> Backend:
    if isinstance(where, Path):
        return assocdb.storage.sqlite.SQLiteBackend.open(where, shards)
    kind = SERVER_SCHEMES[where.split("://", 1)[0]]
    return registry.open_backend({"kind": kind, "url": where, "shards": shards})


def test_replaying_twice_or_out_of_order_changes_nothing(
    backend_kind: str, tmp_path_factory: Any
) -> None:
    @settings(
        max_examples=examples(backend_kind, 30),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(log=writes, rnd=st.randoms(use_true_random=False))
    def check(log: list[Any], rnd: random.Random) -> None:
        stores = Stores(backend_kind, tmp_path_factory.mktemp("journal"))
        try:
            (a, _), (b, _) = stores.location("a"), stores.location("b")
            journal = RecordingJournal(stores.tmp / "journal.db")
            graph = open_graph(a, journal)
            run(graph, log)
            assert graph.drain(timeout=10)
            expected = state(graph)
            bodies = list(journal.bodies.values())
            for _ in range(2):
                replay_bodies(graph, rnd.sample(bodies, len(bodies)))
                assert state(graph) == expected
            fresh = open_graph(b, Journal(stores.tmp / "journal-b.db"))
            replay_bodies(fresh, rnd.sample(bodies, len(bodies)))
            assert state(fresh) == expected
            graph.close()
            fresh.close()
        finally:
            stores.close()

    check()


def test_a_hanging_inverse_edge_is_completed_on_open(stores: Stores) -> None:
    """Forward leg applied, inverse not, then a crash: the next open finishes the job."""
    where, journal_file = stores.location("g")
    with stores.open(at=(where, journal_file), shards=4) as graph:
        graph.define_assoc("follows", inverse="followed_by")
    journal = Journal(journal_file)
    from assocdb.core.ops import EdgeWrite, Rows, Stored, legs
    from assocdb.writes.applier import encode

    rows = Rows(edges=EdgeWrite(1, 2, 10, 20, 0, 1_000_000, time=7).resolve(Stored()))
    journal.append(encode(rows))
    backend = open_backend(where)
    forward = next(leg for leg in legs(rows, 4) if leg.edges[0][0] == 10)
    backend.apply(forward.shard, forward.edges, forward.objects)  # then the process dies
    backend.close()
    journal._conn.close()
    with stores.open(at=(where, journal_file)) as graph:
        assert [a.id2 for a in graph.assoc_range(20, "followed_by")] == [10]
        assert graph.assoc_count(20, "followed_by") == 1
        assert graph.queue_stats().depth == 0
