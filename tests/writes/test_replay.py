"""Replaying any write log in any order, any number of times, gives the same store.

This is what makes the journal safe: a retried or reordered job converges. The
log here is what the journal holds — planned legs of concrete rows — with
adds, deletes and every state, on types with inverses and symmetric types.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assocdb import Graph
from assocdb.core.merge import State
from assocdb.core.ops import EdgeWrite, Leg, Rows, Stored, legs
from tests.support.helpers import all_edges
from tests.support.stores import Stores, examples

TYPES = ["follows", "friend", "likes"]

writes = st.tuples(
    st.integers(1, 4),  # id1
    st.sampled_from(TYPES),
    st.integers(1, 4),  # id2
    st.sampled_from(list(State)),
    st.integers(0, 3),  # time
    st.integers(1, 5),  # updated_at: few values, so ties happen
    st.sampled_from([None, b"1", b'"x"']),
)


def define(graph: Graph) -> Graph:
    graph.define_assoc("follows", inverse="followed_by")
    graph.define_assoc("friend", symmetric=True)
    graph.define_assoc("likes")
    return graph


def plan(graph: Graph, log: list[tuple[Any, ...]]) -> list[Leg]:
    planned: list[Leg] = []
    for id1, atype, id2, state, time, ua, data in log:
        kind = graph.schema.assoc_type(atype)
        inverse = graph.schema.inverse(kind)
        write = EdgeWrite(kind.id, inverse and inverse.id, id1, id2, state, ua, time, data)
        planned += legs(Rows(edges=write.resolve(Stored())), graph.shards)
    return planned


def visible(graph: Graph) -> dict[tuple[int, str], list[tuple[int, int]]]:
    return {
        (id1, atype): [(a.id2, a.time) for a in graph.assoc_range(id1, atype, limit=100)]
        for id1 in range(1, 5)
        for atype in ("follows", "followed_by", "friend", "likes")
    }


def test_permuted_and_duplicated_logs_converge(backend_kind: str, tmp_path_factory: Any) -> None:
    @settings(
        max_examples=examples(backend_kind, 40),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(log=st.lists(writes, min_size=1, max_size=25), rnd=st.randoms(use_true_random=False))
    def check(log: list[Any], rnd: random.Random) -> None:
        stores = Stores(backend_kind, tmp_path_factory.mktemp("replay"))
        try:
            converge(stores, log, rnd)
        finally:
            stores.close()

    check()


def converge(stores: Stores, log: list[Any], rnd: random.Random) -> None:
    graphs = []
    for n in range(3):
        graph = define(stores.open(f"g{n}", shards=3))
        legs = plan(graph, log)
        if n > 0:  # replay out of order, with some legs twice and in odd batches
            legs = legs + rnd.sample(legs, k=len(legs) // 2)
            rnd.shuffle(legs)
        for leg in legs:
            graph.engine.backend.apply(leg.shard, leg.edges, leg.objects)
        graphs.append(graph)
    first = graphs[0]
    for other in graphs[1:]:
        assert all_edges(other) == all_edges(first)
        assert visible(other) == visible(first)
    for graph in graphs:
        assert graph.check_counts() == []


API_LOG = st.lists(
    st.tuples(
        st.booleans(),
        st.integers(1, 4),
        st.sampled_from(TYPES),
        st.integers(1, 4),
        st.integers(0, 3),
        st.integers(1, 6),
    ),
    min_size=1,
    max_size=20,
)


def test_api_writes_with_explicit_fields_commute(backend_kind: str, tmp_path_factory: Any) -> None:
    """Through the public API: adds with explicit time and data, and deletes, in any order."""

    @settings(
        max_examples=examples(backend_kind, 25),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(log=API_LOG, rnd=st.randoms(use_true_random=False))
    def check(log: list[Any], rnd: random.Random) -> None:
        stores = Stores(backend_kind, tmp_path_factory.mktemp("api"))
        try:
            results = []
            for n in range(2):
                graph = define(stores.open(f"g{n}", shards=2))
                ordered = (
                    list(log) if n == 0 else rnd.sample(log, k=len(log)) + log[: len(log) // 2]
                )
                for add, id1, atype, id2, time, ua in ordered:
                    if add:
                        graph.assoc_add(id1, atype, id2, time=time, data=[time], updated_at=ua)
                    else:
                        graph.assoc_delete(id1, atype, id2, updated_at=ua)
                results.append((all_edges(graph), visible(graph), graph.check_counts()))
            assert results[0] == results[1]
        finally:
            stores.close()

    check()
