"""The pipeline's low lane (`writes.lanes`): background work never shares a batch with
client writes, gives way to them while it has had its share, and is never starved."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import assocdb
from assocdb.core.merge import State
from assocdb.core.ops import EdgeWrite
from assocdb.writes import lanes
from assocdb.writes.lanes import LowLane
from assocdb.writes.pipeline import Pipeline
from tests.support.helpers import wait_until

# -- the bookkeeping --------------------------------------------------------------------


def test_an_empty_lane_holds_no_client_up() -> None:
    lane: LowLane[int] = LowLane()
    lane.ran(5.0, False, now=10.0)  # clients alone: nothing owed
    assert not lane.owed()
    assert lane.share == 0.0
    assert lane.grace(10.0) == 0.0


def test_clients_go_first_until_they_had_the_lanes_time() -> None:
    lane: LowLane[int] = LowLane()
    lane.waiting = list(range(200))
    assert not lane.owed()  # nothing ran yet: a client goes first
    lane.ran(0.002, False, now=1.0)
    assert lane.owed()  # the client had more: a slice next, whoever waits
    assert lane.grace(1.0) == 0.0
    assert lane.take() == list(range(lanes.SLICE))  # in the order they entered
    lane.ran(0.003, True, now=1.003)
    assert not lane.owed()
    lane.ran(0.0005, False, now=1.004)  # share 0.0005: still the clients' turn
    assert not lane.owed()
    assert lane.grace(1.004) == pytest.approx(lanes.GRACE)  # …and time to write again
    assert lane.grace(1.004 + lanes.GRACE) == 0.0


def test_the_share_is_bounded_both_ways() -> None:
    lane: LowLane[int] = LowLane()
    lane.waiting = [1]
    lane.ran(60.0, True, now=60.0)  # a cascade alone for a minute…
    lane.ran(lanes.LIMIT + 0.001, False, now=61.0)  # …is owed nothing afterwards
    assert lane.owed()
    lane.ran(60.0, False, now=121.0)
    assert lane.share == -lanes.LIMIT


# -- in the pipeline --------------------------------------------------------------------


def open_graph(path: Path) -> assocdb.Graph:
    g = assocdb.open(path, shards=4)
    g.define_assoc("follows", inverse="followed_by")
    return g


def removals(g: assocdb.Graph, n: int) -> list[tuple[EdgeWrite, int]]:
    """`n` edges into 1, and the background writes removing them."""
    kind = g.engine.schema.assoc_by_name("follows")
    assert kind is not None
    inverse = g.engine.inverse_id(kind)
    with g.batch() as b:
        for f in range(n):
            b.assoc_add(1000 + f, "follows", 1)
    ua = g.engine.clock.now()
    return [(EdgeWrite(kind.id, inverse, 1000 + f, 1, State.REMOVED, ua), ua) for f in range(n)]


def record_batches(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> list[list[bool]]:
    """Every batch the pipeline carries through, as whether each write is background."""
    seen: list[list[bool]] = []
    run = pipeline._run_batch

    def recorded(batch: list[Any]) -> None:
        seen.append([entry in low for entry in batch])
        run(batch)

    low: set[Any] = set()
    take = pipeline._low.take

    def taken() -> list[Any]:
        got = take()
        low.update(got)
        return got

    monkeypatch.setattr(pipeline, "_run_batch", recorded)
    monkeypatch.setattr(pipeline._low, "take", taken)
    return seen


def test_a_client_write_goes_before_background_work_in_a_batch_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = open_graph(tmp_path / "g")
    work = removals(g, 3 * lanes.SLICE)
    pipeline = g.engine.pipeline
    seen = record_batches(pipeline, monkeypatch)
    with pipeline._lock:  # everything waits until both lanes hold their writes
        pipeline._busy = True
    background = threading.Thread(
        target=g.engine.submit_many, args=(work,), kwargs={"sync": True, "low": True}
    )
    background.start()
    wait_until(lambda: len(pipeline._low.waiting) == len(work))
    client = threading.Thread(target=g.assoc_add, args=(5, "follows", 6))
    client.start()
    wait_until(lambda: len(pipeline._inbox) == 1)
    with pipeline._lock:
        pipeline._busy = False
        pipeline._arrived.notify()
    client.join()
    background.join()
    assert seen[0] == [False]  # the client's write first, alone
    assert all(len(set(batch)) == 1 for batch in seen)  # never mixed
    assert [len(batch) for batch in seen[1:]] == [lanes.SLICE] * 3
    assert g.assoc_count(1, "followed_by") == 0
    assert g.assoc_count(5, "follows") == 1
    g.close()


def test_background_work_is_not_starved_by_a_client_writing_without_pause(
    tmp_path: Path,
) -> None:
    g = open_graph(tmp_path / "g")
    work = removals(g, 20 * lanes.SLICE)
    done = threading.Event()
    writes = [0]

    def client() -> None:
        while not done.is_set():
            writes[0] += 1
            g.assoc_add(10**6 + writes[0], "follows", 7)

    results: list[Any] = []

    def background() -> None:
        results.extend(g.engine.submit_many(work, sync=True, low=True))

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    wait_until(lambda: writes[0] > 5)  # the client writes…
    behind = threading.Thread(target=background, daemon=True)
    behind.start()
    try:
        wait_until(lambda: not behind.is_alive(), patience=60)  # …and this still ends
    finally:
        done.set()
    thread.join()
    assert all(not isinstance(r, BaseException) and r.status == "applied" for r in results)
    assert g.assoc_count(1, "followed_by") == 0
    assert g.assoc_count(7, "followed_by") == writes[0]
    g.close()
