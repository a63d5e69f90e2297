"""Deleting a deleted object again, writes to a deleted object, and what a restore
brings back then (api/deletions.py): one deletion per object at a time, and the
examples the deletion machine (`test_deletion_machine.py`) found."""

from __future__ import annotations

import logging
import threading

import pytest

from assocdb import Graph
from assocdb.core.deletion import CascadeJob, Chunk
from assocdb.core.ids import shard_of
from assocdb.core.timeline_list import is_deleted, unpack
from tests.conftest import OpenGraph


def people(open_graph: OpenGraph) -> Graph:
    g = open_graph()
    g.define_assoc("follows", inverse="followed_by", on_delete="shallow")
    g.define_assoc("followed_by", inverse="follows", on_delete="shallow")
    g.define_assoc("authored", inverse="author", on_delete="deep")
    g.define_assoc("author", inverse="authored", on_delete="shallow")
    g.define_object("user")
    g.define_timeline("follows", mode="write")
    return g


def held(g: Graph, user: int) -> list[tuple[int, int]]:
    """(item, author) of the live entries stored in `user`'s home list, read or not."""
    backend = g.engine.backend
    blob = backend.timelines(shard_of(user, backend.shards), [user]).get(user, b"")
    return sorted((e[1], e[2]) for e in unpack(blob) if e[2] > 0 and not is_deleted(e))


def deleted(g: Graph, id: int) -> None:
    g.obj_delete(id, cascade=True)
    assert g.deletions.wait(30)
    assert g.drain(30)


def test_a_restore_gives_back_a_home_entry_whose_item_a_later_step_posts_again(
    open_graph: OpenGraph,
) -> None:
    """ada's home holds bob's item though she unfollowed him; bob is ada's deep target,
    so the deletion records ada's home in its first step and bob's item in a later
    one. The item is posted again before any home is given back, so the entry (kept
    only for items still posted) comes back with it (it was dropped before)."""
    g = people(open_graph)
    ada, bob = g.obj_add("user"), g.obj_add("user")
    g.assoc_add(ada, "follows", bob)
    g.post(bob, 1001, time=1)
    assert g.drain(30)
    g.assoc_delete(ada, "follows", bob)  # the entry stays stored (reads hide it)
    g.assoc_add(ada, "authored", bob)
    assert held(g, ada) == [(1001, bob)]
    deleted(g, ada)
    assert held(g, ada) == []
    assert g.obj_get(bob) is None
    g.obj_restore(ada)
    assert g.drain(30)
    assert held(g, ada) == [(1001, bob)]
    assert [p.id2 for p in g.assoc_range(bob, "posted")] == [1001]


def test_deleting_a_deleted_user_again_adds_to_its_deletion_and_one_restore_undoes_both(
    open_graph: OpenGraph,
) -> None:
    """A follow written by a deleted user (writes to a deleted object are taken) gets
    it a new item; deleting it again sweeps the follow and the entry into the same
    deletion, and its restore gives back both steps' home entries and the follow."""
    g = people(open_graph)
    ada, bob = g.obj_add("user"), g.obj_add("user")
    g.assoc_add(ada, "follows", bob, time=1, data={"n": 1})
    g.post(bob, 1001, time=2)
    assert g.drain(30)
    deleted(g, ada)
    first = g.deletions.of_object(ada)
    g.assoc_add(ada, "follows", bob, time=3)
    g.post(bob, 1002, time=4)
    assert g.drain(30)
    assert held(g, ada) == [(1002, bob)]
    deleted(g, ada)
    again = g.deletions.of_object(ada)
    assert (again.id, again.status) == (first.id, "done")
    assert (again.edges, again.home) == ({"follows": 2}, 2)
    assert held(g, ada) == []
    assert g.assoc_count(bob, "followed_by") == 0
    g.obj_restore(ada)
    assert g.drain(30)
    assert held(g, ada) == [(1001, bob), (1002, bob)]
    # the follow as it was last removed: the later write's time, no data
    [(follow)] = g.assoc_range(ada, "follows")
    assert (follow.id2, follow.time, follow.data) == (bob, 3, None)
    assert [e.id2 for e in g.assoc_range(bob, "followed_by")] == [ada]
    assert g.deletions.of_object(ada).status == "restored"


def test_deleting_a_user_again_while_its_cascade_runs_sweeps_what_was_written_to_it(
    open_graph: OpenGraph, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """bob follows ada after the cascade walked her lists and before it ended; deleting
    her again then (a client's retry) walks her lists once more when the walk ends, so
    the follow is removed and recorded by the same deletion (it stayed, dangling). The
    step that was running when she was deleted again keeps the flag and saves (no
    failed step, no retry a second later)."""
    caplog.set_level(logging.WARNING, logger="assocdb.deletions")
    g = people(open_graph)
    ada, bob = g.obj_add("user"), g.obj_add("user")
    post = g.obj_add("user")
    g.assoc_add(ada, "authored", post, time=1)
    walk = g.deletions._walk
    next_batch = walk._next_batch
    reached, go = threading.Event(), threading.Event()

    def held_after_adas_lists(ua: int, job: CascadeJob) -> Chunk | None:
        if job.batch == [ada] and not reached.is_set():
            reached.set()
            assert go.wait(30)
        return next_batch(ua, job)

    monkeypatch.setattr(walk, "_next_batch", held_after_adas_lists)
    g.obj_delete(ada, cascade=True)
    assert reached.wait(30)  # her lists are walked; the job runs on
    g.assoc_add(bob, "follows", ada, time=2)
    assert g.obj_delete(ada, cascade=True).status == "queued"
    go.set()
    assert g.deletions.wait(30)
    assert g.assoc_count(bob, "follows") == 0
    assert g.obj_get(post) is None
    deletion = g.deletions.of_object(ada)
    assert deletion.id == 1
    assert deletion.edges == {"authored": 1, "followed_by": 1}
    assert [d.id for d in g.deletions.all()] == [1]
    g.obj_restore(ada)
    assert [e.id2 for e in g.assoc_range(bob, "follows")] == [ada]
    assert g.obj_get(post) is not None
    assert [r.getMessage() for r in caplog.records] == []


def test_a_late_unlisting_of_a_deletions_first_run_does_not_drop_its_second(
    open_graph: OpenGraph,
) -> None:
    """The runner unlists a job after saving it done; should that come late, after the
    object was deleted again (the same job, running again), the job stays listed and
    runs: before, it was dropped from the active list and, being older than what the
    runners read past (`_low`), never ran, and `wait` returned at once. The late call
    is made by hand, between the re-delete and the runner's work (paused)."""
    g = people(open_graph)
    ada, bob = g.obj_add("user"), g.obj_add("user")
    deleted(g, ada)
    n = g.deletions.of_object(ada).id
    g.assoc_add(bob, "follows", ada, time=2)
    g.deletions.pause()
    g.obj_delete(ada, cascade=True)
    g.deletions._set_active(n, False)  # the first run's, late
    g.deletions.resume()
    assert g.deletions.wait(30)
    assert g.deletions.of_object(ada).status == "done"
    assert g.assoc_count(bob, "follows") == 0


def test_a_deletion_the_runner_finishes_before_its_tombstone_step_stays_done(
    open_graph: OpenGraph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner, awake for an earlier deletion, may take a new job up as soon as its
    record is saved and finish it before `delete` makes its first step. `delete` then
    steps the job as stored: before, it stepped its own copy (no step made) and saved
    the finished job as running again, which no runner picked up (unlisted, older than
    `_low`): `wait` returned at once, the job never ended and was never purged. Seen
    once in CI on a loaded machine; here the runner's work is done by hand, right
    after the record is saved."""
    g = people(open_graph)
    g.define_object("post", owned=True)
    ada = g.obj_add("user")
    post = g.obj_add("post")
    g.assoc_add(ada, "authored", post)
    deletions = g.deletions
    deletions.pause()  # no runner thread: its work is done by hand below
    backend = g.engine.backend
    real_swap = backend.swap_meta

    def swap_then_run(key: str, old: bytes | None, new: bytes) -> bool:
        swapped = real_swap(key, old, new)
        if key == "deletion:1" and old is None:  # the job's record, just saved
            deletions.resume()
            deletions._work()  # the runner: the whole cascade
            deletions._runnable()  # and its next look, which reads past the job
        return swapped

    monkeypatch.setattr(backend, "swap_meta", swap_then_run)
    g.obj_delete(ada, cascade=True)
    monkeypatch.setattr(backend, "swap_meta", real_swap)
    assert deletions.wait(30)
    done = deletions.of_object(ada)
    assert done.status == "done"
    assert done.objects == {"user": 1, "post": 1}
    assert g.obj_get(post) is None
