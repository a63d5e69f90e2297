"""Turning the change feed on (storage/sqlfeed.py's `SQLFeed.enable`, `turned_on`): a
graph that was open before `enable_feed` — another process, another server worker —
records every change it applies once `enable_feed` has returned, with no restart and no
thread watching; and a reader waiting in the process that wrote wakes at the commit."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import assocdb
from assocdb import CacheConfig, Graph
from assocdb.api import feed
from assocdb.serve.peers import Peers
from tests.support.stores import Stores


def _two_graphs(stores: Stores) -> tuple[Graph, Graph]:
    """Two graphs on one store, each with its own journal (as two processes have)."""
    where, _ = stores.location("g")
    first = stores.open(at=(where, stores.tmp / "first.db"), shards=3, cache=None)
    first.define_assoc("likes")
    second = stores.open(at=(where, stores.tmp / "second.db"), cache=None)
    return first, second


def _every_change(g: Graph) -> list[tuple[int, int]]:
    seen, cursor = [], None
    while page := g.changes(cursor, limit=500):
        if not page.items:
            return seen
        seen += [(c.id1, c.id2 or 0) for c in page.items]
        cursor = page.next_cursor
    return seen


def test_a_graph_open_before_enable_feed_records_every_write_after_it(stores: Stores) -> None:
    first, second = _two_graphs(stores)
    second.assoc_add(1, "likes", 1)  # before the feed is on: not recorded
    stop, writing, written = threading.Event(), threading.Event(), threading.Event()
    enabled = threading.Event()
    after: list[int] = []

    def write() -> None:
        n = 2
        while not stop.is_set():
            on = enabled.is_set()  # read before the write starts
            second.assoc_add(1 + n % 5, "likes", n)
            if on:
                after.append(n)
            if n == 20:
                writing.set()
            if len(after) == 60:
                written.set()
            n += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert writing.wait(60)  # writing while the feed is turned on
        first.enable_feed()
        enabled.set()
        assert written.wait(60)
    finally:
        stop.set()
        writer.join()
    assert len(after) >= 60
    recorded = {id2 for _, id2 in _every_change(first)}
    assert set(after) <= recorded
    assert 1 not in recorded
    assert _every_change(second) == _every_change(first)  # the other graph reads it too


def test_a_waiting_reader_wakes_when_a_write_of_its_process_commits(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feed, "POLL_SECONDS", 60.0)  # no poll comes in time: only the wake
    g = stores.open("g", shards=3, cache=None)
    g.define_assoc("likes")
    g.enable_feed()
    end = g.changes().next_cursor
    got: list[list[int | None]] = []
    waiting = threading.Event()

    def read() -> None:
        waiting.set()
        got.append([c.id2 for c in g.changes(end, wait=50).items])

    reader = threading.Thread(target=read)
    reader.start()
    assert waiting.wait(30)
    g.assoc_add(1, "likes", 2)
    reader.join(30)
    assert got == [[2]]


def test_a_waiting_reader_wakes_when_its_watched_sequence_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers of one server: a write of one wakes a long poll of the other through
    their ring of invalidations (`serve/peers.py`), not the 50 ms poll."""
    monkeypatch.setattr(feed, "POLL_SECONDS", 60.0)
    ring = str(tmp_path / "ring")
    writes, reads = Peers(ring), Peers(ring)
    one = assocdb.open(tmp_path / "g", shards=3, cache=CacheConfig(), tier2=writes)
    other = assocdb.open(tmp_path / "g", journal=tmp_path / "other.db", cache=None)
    try:
        one.define_assoc("likes")
        one.enable_feed()
        other.services.feed.watch(reads.sequence)
        end = other.changes().next_cursor
        got: list[list[int | None]] = []
        # The worst moment for the write: just after the reader's first read found
        # nothing, before it waits.
        read_page = other.services.feed._page
        first = threading.Event()

        def a_write_after_the_page(*args: object) -> object:
            page = read_page(*args)
            if not first.is_set():
                first.set()
                one.assoc_add(1, "likes", 2)
            return page

        monkeypatch.setattr(other.services.feed, "_page", a_write_after_the_page)
        reader = threading.Thread(
            target=lambda: got.append([c.id2 for c in other.changes(end, wait=50).items])
        )
        reader.start()
        reader.join(30)
        assert got == [[2]]
    finally:
        one.close()  # (and its tier 2, the ring's `writes` end)
        other.close()
        reads.close()
