"""Admission that follows whether list fills pay (`cache.payback`): while recent fills
earn less than they and the passing misses cost, list fills close (a miss reads the
shard with no probe and no fill; one in SAMPLE makes its list a ghost, whose later
misses count as the hits its fill would have earned, to keep measuring) and reopen when
those ghosts earn REOPENS x FILL_COST hits each; fills that earn 2 x FILL_COST lower
a list's admission (down to `CacheConfig.admit_after`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import assocdb
from assocdb import CacheConfig, Graph
from assocdb.cache.admission import Doorkeeper
from assocdb.cache.payback import (
    CLOSED_WINDOW,
    FILL_COST,
    LONG,
    MOST,
    PASS_COST,
    READ,
    REOPENS,
    SAMPLE,
    WINDOW,
    Payback,
    weight,
)
from assocdb.core.cachekeys import OBJECT
from tests.support.helpers import statements

LISTS = 3 * WINDOW + 1
EARNS = int(2 * FILL_COST) + 1  # hits a fill earns: enough to lower admission


def test_fills_without_hits_close_list_fills() -> None:
    door = Doorkeeper(2)
    payback = Payback(door)
    for _ in range(WINDOW):
        assert payback.open
        payback.filled()
    assert not payback.open
    assert "0.00 hits a recent fill" in payback.why
    assert payback.last == 0.0
    assert door.lists_after == 2  # admission unchanged: closed fills take no probe
    assert door.admit_after == 2  # objects and home timelines keep theirs
    assert door.admits((OBJECT, 1)) or door.admits((OBJECT, 1))


def test_passing_misses_count_against_fills() -> None:
    door = Doorkeeper(2)
    payback = Payback(door)
    hits = int(FILL_COST) + 1  # pays for the fill, not for many passes besides
    for _ in range(WINDOW):
        stamp = payback.filled()
        for _ in range(hits):
            payback.hit(stamp)
    assert payback.open
    for _ in range(WINDOW):
        payback.passes += int(hits / PASS_COST)  # a probe for each of many passing misses
        stamp = payback.filled()
        for _ in range(hits):
            payback.hit(stamp)
    assert not payback.open


def test_hits_and_fills_weigh_the_rows_they_answer_and_read() -> None:
    """LinkBench: a few long lists take most hits, each saving a read of thousands of
    links; counted one a hit, its fills closed (hits 14-17%, against 57-61% open)."""
    assert weight(READ) == 1.0
    assert weight(1) < 1 < weight(1000)
    assert weight(10_000) > 90
    payback = Payback(Doorkeeper(2))
    for n in range(WINDOW):  # most fills are of short lists, never hit again ...
        stamp = payback.filled(5)
        if n % 8 == 0:  # ... one in 8 is a long list, hit twice, each a read of 2,000
            payback.hit(stamp, 2000)
            payback.hit(stamp, 2000)
    assert payback.open  # 2 hits a fill in 8, counted one each, would have closed them
    assert payback.last > FILL_COST
    for _ in range(2 * WINDOW):  # fills of 500 edges whose hits read 5 of them
        stamp = payback.filled(500)
        for _ in range(int(2 * FILL_COST)):
            payback.hit(stamp, 5)
    assert not payback.open
    assert "in reads of 50 edges" in payback.why


def test_long_fills_are_outside_the_verdict() -> None:
    """A fill of LONG edges or more pays on its first hit (its read costs milliseconds):
    it is neither counted nor stamped, so its hits count for no window either, and
    fills of short lists are judged on their own (LinkBench's hot lists of 10,000
    links swung the verdict both ways)."""
    payback = Payback(Doorkeeper(2))
    for _ in range(3 * WINDOW):
        stamp = payback.filled(LONG)
        assert stamp == 0
        payback.hit(stamp, LONG)  # (a hit of an entry never stamped counts nowhere)
    assert payback.verdicts == 0
    assert payback.new_fills == 0
    assert payback.new_hits == payback.old_hits == 0.0
    for _ in range(WINDOW):  # short fills never hit: closed, whatever the long ones earned
        payback.filled(LONG - 1)
    assert not payback.open


def test_closed_fills_are_sampled_and_reopen_when_the_samples_pay() -> None:
    door = Doorkeeper(2)
    payback = Payback(door)
    for _ in range(WINDOW):
        payback.filled()
    assert not payback.open
    assert sum(payback.sampled() for _ in range(10 * SAMPLE)) == 10
    for _ in range(CLOSED_WINDOW):  # sampled fills that earn a little: still closed
        stamp = payback.filled()
        for _ in range(int(FILL_COST)):
            payback.hit(stamp)
    assert not payback.open
    for _ in range(2):  # (the verdict counts this window and the one before)
        for _ in range(CLOSED_WINDOW):
            stamp = payback.filled()
            for _ in range(int(2 * REOPENS * FILL_COST)):
                payback.hit(stamp)
    assert payback.open
    assert door.lists_after == 3  # reopened a miss more selective than before


def test_a_ghost_counts_as_a_fill_and_its_misses_as_hits_for_two_windows() -> None:
    payback = Payback(Doorkeeper(2))
    for _ in range(WINDOW):
        payback.filled()
    assert not payback.open
    payback.ghost((1, 1))
    payback.ghost((1, 1))  # (sampled again: one ghost, one fill)
    assert payback.ghosts == {(1, 1): payback.current}
    assert payback.new_fills == 1
    payback.ghost_hit((1, 1))
    payback.ghost_hit((2, 1))  # not a ghost: nothing counted
    assert payback.new_hits == 1
    for n in range(2, CLOSED_WINDOW + 1):  # the window's verdict: still closed
        payback.ghost((n, 1))
    assert not payback.open
    assert (1, 1) in payback.ghosts  # the window before still counts its hits
    payback.ghost_hit((1, 1))
    assert payback.old_hits == 2
    for n in range(CLOSED_WINDOW + 1, 2 * CLOSED_WINDOW + 1):  # and the next window's
        payback.ghost((n, 1))
    assert (1, 1) not in payback.ghosts  # two windows old: dropped
    assert len(payback.ghosts) == CLOSED_WINDOW


def test_fills_that_earn_their_hits_lower_admission_back_to_the_configured_one() -> None:
    door = Doorkeeper(2)
    door.lists_after = MOST
    payback = Payback(door)
    for _ in range(MOST + 2):
        for _ in range(WINDOW):
            stamp = payback.filled()
            for _ in range(EARNS):  # each fill earns its hits at once
                payback.hit(stamp)
    assert door.lists_after == 2  # never below `admit_after`
    assert payback.open
    assert payback.last >= 2 * FILL_COST


def test_between_the_two_it_stays() -> None:
    door = Doorkeeper(2)
    door.lists_after = 4
    payback = Payback(door)
    for _ in range(3):
        for _ in range(WINDOW):
            stamp = payback.filled()
            for _ in range(int(FILL_COST) + 1):
                payback.hit(stamp)
    assert door.lists_after == 4
    assert payback.open
    assert FILL_COST <= payback.last < 2 * FILL_COST


def test_it_can_be_turned_off() -> None:
    door = Doorkeeper(1)
    payback = Payback(door, enabled=False)
    for _ in range(3 * WINDOW):
        payback.filled()
    assert door.lists_after == 1
    assert payback.open
    assert payback.verdicts == 3


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[Graph]:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(admit_after=1, max_age=3600))
    g.define_assoc("likes")
    g.bulk_load([(n, "likes", m, m) for n in range(1, LISTS + 1) for m in (1, 2, 3)])
    yield g
    g.close()


def test_lists_read_once_close_fills_and_lists_read_again_reopen_them(graph: Graph) -> None:
    g = graph
    cache = g.engine.cache
    assert cache is not None
    for n in range(1, WINDOW + 1):  # each filled on its first miss, never read again
        g.assoc_range(n, "likes", 0, 10)
    stats = g.cache_stats()
    assert stats is not None
    assert (stats.fills, stats.hits_per_fill, stats.list_fills_open) == (WINDOW, 0.0, False)
    assert "hits a recent fill" in stats.list_fills_why
    # Closed: a miss is the uncached read's one statement, no probe, no entry.
    probed = len(cache.doorkeeper)
    n = WINDOW + 1
    assert len(statements(g, lambda: g.assoc_range(n, "likes", 0, 10))) == 1
    assert (n, 1) not in cache._lists
    assert len(cache.doorkeeper) == probed
    # What is cached still answers, and writes keep it exact, closed or not.
    assert statements(g, lambda: g.assoc_range(1, "likes", 0, 10)) == []
    g.assoc_add(1, "likes", 99, time=100)
    g.assoc_add(n, "likes", 98, time=100)
    g.assoc_delete(2, "likes", 3)
    got: list[list[int]] = []
    assert statements(g, lambda: got.append([a.id2 for a in g.assoc_range(1, "likes")])) == []
    assert got == [[99, 3, 2, 1]]
    assert [a.id2 for a in g.assoc_range(n, "likes")] == [98, 3, 2, 1]
    assert [a.id2 for a in g.assoc_range(2, "likes")] == [2, 1]
    assert g.cache_stats().list_fills_open is False  # type: ignore[union-attr]
    # One miss in SAMPLE makes its list a ghost (nothing filled); traffic that rereads
    # those lists reopens fills.
    lists = iter(range(WINDOW + 2, LISTS + 1))
    cache.payback.skip = SAMPLE  # (the misses above counted down too)
    for _ in range(SAMPLE - 1):
        g.assoc_range(next(lists), "likes", 0, 10)
    assert not cache.payback.ghosts
    sampled = next(lists)
    assert len(statements(g, lambda: g.assoc_range(sampled, "likes", 0, 10))) == 1
    assert (sampled, 1) not in cache._lists
    assert (sampled, 1) in cache.payback.ghosts
    for _ in range(2 * CLOSED_WINDOW):
        cache.payback.skip = 1  # (the next miss is sampled)
        n = next(lists)
        for _ in range(1 + int(2 * REOPENS * FILL_COST)):  # (the sample, its ghost's hits)
            closed = not cache.payback.open
            read = statements(g, lambda n=n: g.assoc_range(n, "likes", 0, 10))
            assert len(read) == 1 or not closed  # closed: each the shard's read, no fill
        assert (n, 1) not in cache._lists or cache.payback.open
    stats = g.cache_stats()
    assert stats is not None
    assert stats.list_fills_open
    assert not cache.payback.ghosts  # (open: none kept)
    assert stats.lists_admit_after == 2  # one miss more selective than before
    n, probed = next(lists), len(cache.doorkeeper)
    g.assoc_range(n, "likes", 0, 10)  # open again: a first miss passes the doorkeeper
    assert (n, 1) not in cache._lists
    assert len(cache.doorkeeper) == probed + 1
