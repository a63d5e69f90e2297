"""How long tier 1 trusts an entry (`cache.validity`): until another process writes
(with a change signal), or `max_age` (without one)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import assocdb
from assocdb import CacheConfig, Graph
from assocdb.cache.validity import Validity
from assocdb.storage.registry import open_location
from assocdb.writes.journal import Journal
from tests.cache.test_cache import FakeClock, clocked
from tests.support.helpers import statements


def test_without_a_signal_an_entry_ages_out() -> None:
    clock = FakeClock()
    validity = Validity(10.0, clock, None, lambda: None)
    assert not validity.aged(clock.now)
    clock.now += 10.0
    assert validity.aged(clock.now - 10.0)
    assert not validity.aged(clock.now - 9.0)


def test_with_a_signal_entries_live_until_another_process_writes() -> None:
    clock, dropped, writes = FakeClock(), [], [False]

    def foreign() -> bool:
        asked.append(clock.now)
        return writes[0]

    asked: list[float] = []
    validity = Validity(10.0, clock, foreign, lambda: dropped.append(clock.now))
    born = clock.now
    clock.now += 1000.0
    assert not validity.aged(born)  # no other writer: as old as it likes
    assert not validity.aged(born)
    assert asked == [clock.now]  # asked once per max_age, not per read
    writes[0] = True
    clock.now += 5.0
    assert not validity.aged(born)  # not asked yet: within max_age of the last time
    clock.now += 5.0
    assert validity.aged(born)
    assert dropped == [clock.now]


def test_an_entry_outlives_max_age_when_no_other_process_writes(tmp_path: Path) -> None:
    clock = FakeClock()
    g = clocked(tmp_path / "g", CacheConfig(max_age=1.0, admit_after=1), clock)
    g.define_assoc("likes")
    g.assoc_add(1, "likes", 2)
    assert [a.id2 for a in g.assoc_range(1, "likes")] == [2]
    assert g.assoc_count(1, "likes") == 1
    clock.now += 3600.0
    assert statements(g, lambda: g.assoc_range(1, "likes")) == []
    assert statements(g, lambda: g.assoc_count(1, "likes")) == []
    g.assoc_add(1, "likes", 3)  # its own writes go through the cache
    assert statements(g, lambda: g.assoc_count(1, "likes")) == []
    assert g.assoc_count(1, "likes") == 2
    g.close()


def _truth(path: Path, id1: int) -> tuple[list[int], int]:
    with assocdb.open(path, cache=None) as plain:
        return [a.id2 for a in plain.assoc_range(id1, "likes", 0, 50)], plain.assoc_count(
            id1, "likes"
        )


Step = tuple[int, bool, int, int, int, bool]  # writer, add?, id1, id2, time, advance?


def _run(root: Path, steps: list[Step]) -> None:
    """Writes through two graphs (as two processes would) on one directory; once
    max_age has passed for a reader, its cache answers what the shards hold
    (within it, a cache may miss the other's writes: its own writes then patch
    what it holds)."""
    clocks = [FakeClock(), FakeClock()]
    graphs: list[Graph] = []
    with assocdb.open(root, shards=2) as setup:
        setup.define_assoc("likes")
    for clock in clocks:
        backend, journal = open_location(root, 2, 2.0, True, None)
        config = CacheConfig(max_age=1.0, admit_after=1, prefix=8)
        graphs.append(Graph(backend, Journal(journal), cache=config, cache_clock=clock))
    try:
        for writer, add, id1, id2, time, advance in steps:
            g = graphs[writer]
            if add:
                g.assoc_add(id1, "likes", id2, time=time)
            else:
                g.assoc_delete(id1, "likes", id2)
            g.assoc_range(id1, "likes", 0, 50)  # (fills, or patches, the writer's entry)
            reader, clock = graphs[1 - writer], clocks[1 - writer]
            reader.assoc_count(id1, "likes")
            if advance:
                clock.now += 1.5  # past max_age: the signal is asked
                for node in range(1, 4):
                    got = [a.id2 for a in reader.assoc_range(node, "likes", 0, 50)]
                    assert (got, reader.assoc_count(node, "likes")) == _truth(root, node)
    finally:
        for g in graphs:
            g.close()


@pytest.mark.parametrize("seed", range(3))
def test_two_caches_on_one_directory_agree_with_the_shards_after_max_age(
    tmp_path: Path, seed: int
) -> None:
    rnd = random.Random(seed)
    steps = [
        (
            rnd.randrange(2),
            rnd.random() < 0.7,
            rnd.randrange(1, 4),
            rnd.randrange(1, 12),
            rnd.randrange(1, 50),
            rnd.random() < 0.3,
        )
        for _ in range(100)
    ]
    _run(tmp_path / "g", steps)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 1),
            st.booleans(),
            st.integers(1, 3),
            st.integers(1, 6),
            st.integers(1, 9),
            st.booleans(),
        ),
        max_size=25,
    )
)
def test_two_caches_agree_with_the_shards_after_max_age_property(
    tmp_path_factory: pytest.TempPathFactory, steps: list[Step]
) -> None:
    _run(tmp_path_factory.mktemp("g") / "g", steps)
