"""Admission that follows whether list fills pay (`cache.payback`): while recent fills
earn fewer than PAYS hits each, a list needs one more miss to be filled (up to MOST);
when they earn twice that, one fewer (down to `CacheConfig.admit_after`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import assocdb
from assocdb import CacheConfig, Graph
from assocdb.cache.admission import Doorkeeper
from assocdb.cache.payback import MOST, PAYS, WINDOW, Payback
from assocdb.core.cachekeys import OBJECT, PREFIX
from tests.support.helpers import statements

LISTS = 3 * WINDOW + 1
EARNS = int(2 * PAYS) + 1  # hits a fill earns: enough to lower admission


def test_fills_without_hits_raise_lists_admission_up_to_most() -> None:
    door = Doorkeeper(2)
    payback = Payback(door)
    for verdict in range(1, MOST + 2):
        for _ in range(WINDOW):
            payback.filled()
        assert door.lists_after == min(MOST, 2 + verdict)
        assert payback.last == 0.0
    assert door.admit_after == 2  # objects and home timelines keep theirs
    assert not door.admits((PREFIX, (1, 1)))  # a list's miss needs MOST now
    assert door.admits((OBJECT, 1)) or door.admits((OBJECT, 1))


def test_fills_that_earn_their_hits_lower_it_back_to_the_configured_admission() -> None:
    door = Doorkeeper(2)
    payback = Payback(door)
    for _ in range(3 * WINDOW):
        payback.filled()
    assert door.lists_after == 5
    for _ in range(6):
        for _ in range(WINDOW):
            stamp = payback.filled()
            for _ in range(EARNS):  # each fill earns its hits at once
                payback.hit(stamp)
    assert door.lists_after == 2  # never below `admit_after`
    assert payback.last >= 2 * PAYS


def test_between_the_two_it_stays() -> None:
    door = Doorkeeper(2)
    payback = Payback(door)
    for _ in range(3):
        for _ in range(WINDOW):
            stamp = payback.filled()
            for _ in range(int(PAYS) + 1):
                payback.hit(stamp)
    assert door.lists_after == 2
    assert PAYS <= payback.last < 2 * PAYS


def test_it_can_be_turned_off() -> None:
    door = Doorkeeper(1)
    payback = Payback(door, enabled=False)
    for _ in range(3 * WINDOW):
        payback.filled()
    assert door.lists_after == 1
    assert payback.verdicts == 3


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[Graph]:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(admit_after=1, max_age=3600))
    g.define_assoc("likes")
    g.bulk_load([(n, "likes", m, m) for n in range(1, LISTS + 1) for m in (1, 2, 3)])
    yield g
    g.close()


def test_lists_read_once_stop_being_filled_and_lists_read_again_bring_fills_back(
    graph: Graph,
) -> None:
    g = graph
    cache = g.engine.cache
    assert cache is not None
    for n in range(1, WINDOW + 1):  # each filled on its first miss, never read again
        g.assoc_range(n, "likes", 0, 10)
    stats = g.cache_stats()
    assert stats is not None
    assert (stats.fills, stats.lists_admit_after, stats.hits_per_fill) == (WINDOW, 2, 0.0)
    n = WINDOW + 1
    assert len(statements(g, lambda: g.assoc_range(n, "likes", 0, 10))) == 1  # passes
    assert (n, 1) not in cache._lists
    g.assoc_range(n, "likes", 0, 10)  # its second miss fills it
    assert (n, 1) in cache._lists
    # Traffic that rereads what it fills: each fill earns EARNS hits.
    for n in range(WINDOW + 2, LISTS + 1):
        for _ in range(2 + EARNS):  # (a pass, the fill, its hits)
            g.assoc_range(n, "likes", 0, 10)
    stats = g.cache_stats()
    assert stats is not None
    assert stats.lists_admit_after == 1
    assert stats.hits_per_fill >= 2 * PAYS
