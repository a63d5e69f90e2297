"""The write pipeline: batches share one fsync and one transaction per shard, keep
per-key order, isolate a failing shard, and keep jobs until their shards are durable."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import assocdb
from assocdb import Graph, WriteResult
from assocdb.core.errors import Conflict, KeyTaken, Unavailable
from assocdb.core.ids import shard_of
from assocdb.core.ops import ObjectWrite
from assocdb.storage import sqlite as sqlite_module
from assocdb.storage.backend import map_driver_error
from assocdb.writes import pipeline as pipeline_module
from assocdb.writes.applier import NODE_JOB_PAGE, encode
from assocdb.writes.journal import Failure
from tests.support.helpers import wait_until
from tests.writes.test_journal import FailingConnection


def open_graph(path: Path, shards: int = 4, **options: Any) -> assocdb.Graph:
    g = assocdb.open(path, shards=shards, **options)
    g.define_assoc("follows", inverse="followed_by")
    g.define_object("user")
    return g


def hold_the_first_apply(g: Graph) -> tuple[threading.Event, list[int]]:
    """Hold the graph's first shard transaction at its BEGIN until the event is set;
    the list records the shard of every BEGIN."""
    release = threading.Event()
    begins: list[int] = []

    def hold(shard: int, sql: str) -> None:
        if sql.startswith("BEGIN"):
            begins.append(shard)
            if len(begins) == 1:
                release.wait()

    g.engine.backend.faults.append(hold)
    return release, begins


def test_a_batch_is_one_fsync_and_one_transaction_per_shard(tmp_path: Path) -> None:
    g = open_graph(tmp_path / "g")
    begins: list[int] = []
    g.engine.backend.faults.append(
        lambda shard, sql: sql.startswith("BEGIN") and begins.append(shard)
    )
    commits = g.engine.journal.commits
    with g.batch() as b:
        added = [b.assoc_add(n, "follows", n + 1000) for n in range(1, 201)]
    assert {a.result().status for a in added} == {"applied"}
    assert g.engine.journal.commits == commits + 1  # one fsync for 200 writes
    assert sorted(begins) == list(range(4))  # each shard written once, both legs of all
    assert all(g.assoc_count(n + 1000, "followed_by") == 1 for n in range(1, 201))
    assert g.check_counts() == []
    g.close()


def test_writes_from_many_threads_share_the_shard_transactions(tmp_path: Path) -> None:
    g = open_graph(tmp_path / "g")
    release, begins = hold_the_first_apply(g)
    pipeline, journal = g.engine.pipeline, g.engine.journal
    commits = journal.commits
    threads = [threading.Thread(target=g.assoc_add, args=(n, "follows", 7)) for n in range(1, 21)]
    threads[0].start()
    wait_until(lambda: len(begins) == 1)  # the first write is being applied…
    for thread in threads[1:]:
        thread.start()
    wait_until(lambda: len(pipeline._inbox) == 19)  # …while the others wait to enter
    release.set()
    for thread in threads:
        thread.join()
    assert g.assoc_count(7, "followed_by") == 20
    assert pipeline.batches == 2  # the first write, then the 19 that waited
    assert journal.commits == commits + 2  # one fsync each
    # The first write's two legs, then one transaction per shard for the other 19
    # (written one by one, they would take 38).
    assert len(begins) <= 2 + 4
    g.close()


def test_writers_answered_together_write_again_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a batch that answered two writers, the pipeline gathers: the first of them
    to write again waits for the other instead of going through alone, and their
    writes make one batch (before, writers answered together came back one by one
    and made batches of one and the rest in turn)."""
    monkeypatch.setattr(pipeline_module, "GATHER_SECONDS", 3600.0)  # never the limit here
    g = open_graph(tmp_path / "g")
    release, begins = hold_the_first_apply(g)
    pipeline = g.engine.pipeline
    again = {1: threading.Event(), 2: threading.Event()}
    done = {1: threading.Event(), 2: threading.Event()}

    answered: list[int] = []

    def writer(n: int) -> None:
        g.assoc_add(n, "follows", 7)
        answered.append(n)
        again[n].wait()
        g.assoc_add(n, "follows", 8)
        done[n].set()

    # Daemons, and every event set on the way out: a failed assertion must fail the
    # test, not leave a writer waiting for ever and the test process unable to exit.
    first = threading.Thread(target=g.assoc_add, args=(100, "follows", 7), daemon=True)
    writers = {n: threading.Thread(target=writer, args=(n,), daemon=True) for n in (1, 2)}
    try:
        first.start()
        wait_until(lambda: len(begins) == 1)  # a lone write holds the pipeline…
        for thread in writers.values():
            thread.start()
        wait_until(lambda: len(pipeline._inbox) == 2)  # …while two writers wait together
        release.set()
        first.join()
        wait_until(lambda: len(answered) == 2)
        again[1].set()
        wait_until(lambda: len(pipeline._inbox) == 1)  # waits for the other writer
        assert not done[1].is_set()
        again[2].set()
        for thread in writers.values():
            thread.join()
        assert pipeline.batches == 3  # the lone write, both first writes, both second writes
        assert g.assoc_count(8, "followed_by") == 2
    finally:
        release.set()
        for event in again.values():
            event.set()
        g.close()


def test_a_gather_gives_up_when_the_writers_do_not_come_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers answered together that write no more hold no one else up for longer
    than the gathering window: a write after it goes through."""
    monkeypatch.setattr(pipeline_module, "GATHER_SECONDS", 0.01)
    g = open_graph(tmp_path / "g")
    with g.batch() as b:  # (one writer: no gathering after it)
        b.assoc_add(1, "follows", 2)
    pipeline = g.engine.pipeline
    threads = [
        threading.Thread(target=g.assoc_add, args=(n, "follows", 9), daemon=True) for n in (3, 4)
    ]
    with pipeline._lock:  # both enter one batch of the pipeline's thread
        pipeline._busy = True
    for thread in threads:
        thread.start()
    wait_until(lambda: len(pipeline._inbox) == 2)
    with pipeline._lock:
        pipeline._busy = False
        pipeline._arrived.notify()
    for thread in threads:
        thread.join()
    late = threading.Thread(target=g.assoc_add, args=(5, "follows", 9), daemon=True)
    late.start()
    wait_until(lambda: not late.is_alive())  # (were the window endless, it would wait)
    assert g.assoc_count(9, "followed_by") == 3
    g.close()


def test_a_batch_keeps_the_order_of_writes_to_one_row(tmp_path: Path) -> None:
    g = open_graph(tmp_path / "g")
    with g.batch() as b:
        b.assoc_add(1, "follows", 2, time=5, data={"v": 1})
        b.assoc_add(1, "follows", 2, data={"v": 2})  # a re-add keeps the time
        b.assoc_add(3, "follows", 4, time=9)
        b.assoc_delete(3, "follows", 4)
        b.assoc_add(3, "follows", 4)  # re-added after a delete: a new time
        uid = b.obj_add("user", {"name": "ada"}, id=77)
        b.obj_update(77, {"bio": "analyst"})
    edge = g.assoc_get(1, "follows", [2])[0]
    assert (edge.time, edge.data) == (5, {"v": 2})
    assert g.assoc_get(3, "follows", [4])[0].time != 9
    assert uid.result() == 77
    assert g.obj_get(77).data == {"name": "ada", "bio": "analyst"}  # type: ignore[union-attr]
    assert g.assoc_count(2, "followed_by") == 1
    assert g.check_counts() == []
    g.close()


def test_a_read_in_a_batch_sees_the_writes_queued_before_it(tmp_path: Path) -> None:
    g = open_graph(tmp_path / "g")
    with g.batch() as b:
        before = b.assoc_count(2, "followed_by")
        b.assoc_add(1, "follows", 2)
        b.assoc_add(3, "follows", 2)
        after = b.assoc_count(2, "followed_by")
        page = b.assoc_page(2, "followed_by", limit=1)
        nobody = b.obj_get(999)
    assert (before.result(), after.result()) == (0, 2)
    assert len(page.result().items) == 1
    assert nobody.result() is None
    with pytest.raises(AttributeError, match="neither"):
        _ = g.batch().bulk_load
    g.close()


def test_a_refused_write_does_not_stop_the_batch(tmp_path: Path) -> None:
    g = open_graph(tmp_path / "g")
    with g.batch() as b:
        ok = b.assoc_add(1, "follows", 2)
        missing = b.assoc_change_type(5, "follows", 6, "followed_by")
        gone = b.obj_update(12345, {"a": 1})
    assert ok.result().status == "applied"
    with pytest.raises(assocdb.NotFound, match="type 'follows'"):
        missing.result()
    with pytest.raises(assocdb.NotFound):
        gone.result()
    assert g.queue_stats().depth == 0
    g.close()


def test_bad_arguments_raise_at_the_call_and_a_failed_block_writes_nothing(
    tmp_path: Path,
) -> None:
    g = open_graph(tmp_path / "g")

    def unknown_type() -> None:
        with g.batch() as b:
            b.assoc_add(1, "follows", 2)
            b.assoc_add(1, "no_such_type", 2)

    def block_fails() -> None:
        with g.batch() as b:
            b.assoc_add(1, "follows", 3)
            raise ZeroDivisionError

    with pytest.raises(assocdb.UnknownType):
        unknown_type()
    with pytest.raises(ZeroDivisionError):
        block_fails()
    assert g.assoc_count(1, "follows") == 0
    pending = g.batch()
    deferred = pending.assoc_add(1, "follows", 4)
    with pytest.raises(assocdb.InvalidRequest, match="not run yet"):
        deferred.result()
    pending.run()
    assert deferred.result().status == "applied"
    with pytest.raises(RuntimeError, match="has been written"):
        pending.assoc_add(1, "follows", 5)
    g.close()


def test_a_failing_shard_queues_only_its_own_legs(tmp_path: Path) -> None:
    g = open_graph(tmp_path / "g", retry=assocdb.RetryPolicy(base=0.01, cap=0.05))
    bad = 1
    failing = threading.Event()
    failing.set()

    def fail_shard(shard: int, sql: str) -> None:
        if shard == bad and failing.is_set() and sql.startswith("BEGIN"):
            raise Unavailable(f"shard {shard} is down (test)")

    g.engine.backend.faults.append(fail_shard)
    pairs = [(n, n + 500) for n in range(1, 41)]
    with g.batch() as b:
        results = [b.assoc_add(a, "follows", c) for a, c in pairs]
    touches_bad = [bad in {shard_of(a, 4), shard_of(c, 4)} for a, c in pairs]
    statuses = [r.result().status for r in results]
    assert statuses == ["queued" if t else "applied" for t in touches_bad]
    for a, _ in pairs:
        if shard_of(a, 4) != bad:
            assert g.assoc_count(a, "follows") == 1  # the healthy leg is there
    failing.clear()
    assert g.drain(timeout=60)
    assert all(g.assoc_count(c, "followed_by") == 1 for _, c in pairs)
    assert g.check_counts() == []
    g.close()


def test_a_power_loss_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """Shards commit without fsync: a power loss takes back their unsynced commits.
    The journal keeps every applied job until a fence has synced its shards, so a
    replay restores them. Simulated: the shard files as of the last fence, the journal
    (fsynced at every commit) as it is."""
    where, lost = tmp_path / "g", tmp_path / "after-power-loss"
    g = open_graph(where)
    with g.batch() as b:
        for n in range(1, 51):
            b.assoc_add(n, "follows", 1000 + n, time=n)
    g.queue_stats()  # fences: all of the above is on the disk
    applier = g.engine.applier
    with applier._fencing:  # no fence from here on: what follows is not synced
        lost.mkdir()
        for file in where.glob("shard-*"):  # the shards as the disk holds them now
            shutil.copy(file, lost / file.name)
        for round_ in range(3):  # batches whose completions ride along later commits
            with g.batch() as b:
                for n in range(1, 51):
                    b.assoc_add(n, "follows", 2000 + 100 * round_ + n, time=n)
        assert applier.unfenced() == 150
        g.engine.journal.flush()  # whatever bookkeeping there is reaches the journal
        for file in where.glob("journal.db*"):  # the journal: synced at every commit
            shutil.copy(file, lost / file.name)
    g.close()
    with assocdb.open(lost) as after:  # the replay restores the lost shard commits
        assert after.drain(timeout=60)
        for n in range(1, 51):
            expected = {1000 + n} | {2000 + 100 * r + n for r in range(3)}
            assert {a.id2 for a in after.assoc_range(n, "follows", limit=10)} == expected
            assert after.assoc_count(n, "follows") == 4
        assert after.check_counts() == []
        assert after.check_inverses() == []


def test_a_submit_chooses_sync_for_its_own_writes(tmp_path: Path) -> None:
    g = open_graph(tmp_path / "g")
    writes = g._writes  # the operations assoc_add submits
    release = threading.Event()
    g.engine.backend.faults.append(lambda shard, sql: sql.startswith("BEGIN") and release.wait())
    background = [writes.add_op(n, "follows", 99) for n in range(1, 4)]
    results = g.engine.submit_many(background, sync=False)  # journaled, not applied yet
    assert [r.status for r in results] == ["queued"] * 3  # type: ignore[union-attr]
    assert g.engine.journal.counts()["new"] >= 3
    release.set()
    assert g.drain(timeout=10)
    assert g.assoc_count(99, "followed_by") == 3
    (result,) = g.engine.submit_many([writes.add_op(5, "follows", 99)], sync=True)
    assert result.status == "applied"  # type: ignore[union-attr]
    assert g.assoc_count(99, "followed_by") == 4
    g.close()
    with assocdb.open(tmp_path / "a", shards=2, sync=False) as lazy:
        lazy.define_assoc("follows", inverse="followed_by")
        (result,) = lazy.engine.submit_many([lazy._writes.add_op(1, "follows", 2)], sync=True)
        assert result.status == "applied"  # type: ignore[union-attr]
        assert lazy.assoc_count(2, "followed_by") == 1


def test_a_power_loss_keeps_the_legs_of_a_write_a_failing_shard_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write whose inverse leg failed is queued with its forward leg recorded as
    done, and that leg's shard commit is not synced by any fence yet. A power loss
    must not take back a leg the journal says is done: the retry would skip it.
    Simulated: each shard's files as of its last `make_durable`, the journal as it is."""
    where, lost = tmp_path / "g", tmp_path / "after-power-loss"
    g = open_graph(where, retry=assocdb.RetryPolicy(base=60.0, cap=60.0))
    a, b = 4, 3
    assert (shard_of(a, 4), shard_of(b, 4)) == (0, 1)
    backend = g.engine.backend
    make_durable = backend.make_durable

    power = threading.Event()  # set: the power is lost, nothing more reaches the disk

    def synced(shards: Any) -> None:  # the disk: what the last sync of each shard held
        make_durable(shards)
        for shard in shards if not power.is_set() else ():
            for file in where.glob(f"shard-{shard:04d}.db*"):
                shutil.copy(file, lost / file.name)

    lost.mkdir()
    monkeypatch.setattr(backend, "make_durable", synced)
    synced(range(4))
    backend.faults.append(
        lambda shard, sql: shard == 1 and sql.startswith("BEGIN") and _raise_unavailable(shard)
    )
    with g.engine.applier._fencing:  # no periodic fence from here on
        assert g.assoc_add(a, "follows", b).status == "queued"
        assert g.assoc_count(a, "follows") == 1  # the forward leg is committed
        g.engine.journal.flush()
        for file in where.glob("journal.db*"):  # the journal: synced at every commit
            shutil.copy(file, lost / file.name)
        power.set()
    g.close()
    with assocdb.open(lost) as after:
        after.queue_retry()
        assert after.drain(timeout=60)
        assert after.assoc_count(b, "followed_by") == 1
        assert after.assoc_count(a, "follows") == 1  # the forward leg survived
        assert after.check_inverses() == []


def _raise_unavailable(shard: int) -> None:
    raise Unavailable(f"shard {shard} is down (test)")


def test_a_retry_records_a_leg_done_only_once_its_shard_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Applier.run` (the retrier's and the replay's attempt): a leg it applies while
    another fails is journaled as done only after its shard was synced."""
    g = open_graph(tmp_path / "g", retry=assocdb.RetryPolicy(base=60.0, cap=60.0))
    engine = g.engine
    synced: list[int] = []
    make_durable = engine.backend.make_durable

    def recording(shards: Any) -> None:
        make_durable(shards)
        synced.extend(shards)

    monkeypatch.setattr(engine.backend, "make_durable", recording)
    engine.backend.faults.append(
        lambda shard, sql: shard == 1 and sql.startswith("BEGIN") and _raise_unavailable(shard)
    )
    op, _ = g._writes.add_op(4, "follows", 3)  # legs on shards 0 and 1
    with engine.applier._fencing:  # no periodic fence meanwhile
        job = engine.journal.append(encode(op))
        assert not engine.applier.run(job, op)
        stored = engine.journal.get(job)
        assert stored is not None
        assert stored.state == "error"
        assert stored.done == 0 or 0 in synced  # done only if shard 0 is on the disk
    g.close()


def test_an_attempt_that_cannot_take_the_writer_lock_is_a_failed_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Applier.run` of an object patch journaled unresolved, when the directory's
    writer lock cannot be taken (its file cannot be opened: too many open files):
    the job goes to the error queue like any attempt a shard refused. Before, the
    error left `run`, and the background apply dropped the rest of its batch."""
    g = open_graph(tmp_path / "g", retry=assocdb.RetryPolicy(base=60.0, cap=60.0))
    g.obj_add("user", {"name": "ada"}, id=7)
    engine = g.engine

    @contextmanager
    def cannot_lock() -> Iterator[None]:  # as WriterLock.__enter__ fails
        raise Unavailable("cannot lock .writers.lock for writing: too many open files")
        yield

    monkeypatch.setattr(engine.backend, "exclusive_writes", cannot_lock)
    op, _ = g._objects.update_op(7, {"city": "london"})
    job = engine.journal.append(encode(op))
    assert not engine.applier.run(job, op)
    stored = engine.journal.get(job)
    assert stored is not None
    assert stored.state == "error"
    monkeypatch.undo()
    g.close()


def test_a_write_sees_a_node_state_journaled_before_it_and_not_yet_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edge written into a list resolves against the list's node state: one
    journaled before it (acknowledged) but still being applied is pending, like
    an edge row, and the edge waits for it instead of reading the old state."""
    g = open_graph(tmp_path / "g")
    g.define_assoc("likes")
    holds: dict[int, threading.Event] = {}
    held: list[int] = []

    def hold(shard: int, sql: str) -> None:
        if sql.startswith("BEGIN") and shard in holds:
            held.append(shard)
            holds.pop(shard).wait()

    g.engine.backend.faults.append(hold)
    pipeline = g.engine.pipeline
    node, other, busy = 2, 8, 3
    assert {shard_of(node, 4), shard_of(other, 4), shard_of(busy, 4)} == {0, 1}
    first, second = threading.Event(), threading.Event()
    holds[1] = first  # a lone write carries itself through and is held applying…
    writes = [threading.Thread(target=g.assoc_add, args=(busy, "likes", busy))]
    writes[0].start()
    wait_until(lambda: held == [1])
    holds[0] = second  # …so the archive goes through the pipeline's thread, held applying
    writes.append(threading.Thread(target=g.node_archive, args=(node, "follows")))
    writes[1].start()
    wait_until(lambda: len(pipeline._inbox) == 1)
    first.set()
    wait_until(lambda: held == [1, 0])
    writes.append(threading.Thread(target=g.assoc_add, args=(node, "follows", other)))
    writes[2].start()  # stamped after the archive, which is journaled: it must see it
    wait_until(lambda: len(pipeline._inbox) == 1)  # waiting for the archive to apply
    second.set()
    for write in writes:
        write.join()
    assert g.drain(timeout=60)
    assert g.node_state(node, "follows") == "archived"
    edge = g.assoc_edge(node, "follows", other)
    assert edge is not None
    assert edge.state == "archived"
    assert g.check_counts() == []
    g.close()


def _stamped_first_entering_last(
    g: Graph,
    monkeypatch: pytest.MonkeyPatch,
    first: Callable[[], WriteResult],
    second: Callable[[], WriteResult],
) -> tuple[WriteResult, WriteResult]:
    """Run `first` in a thread that is preempted right after the store stamps its write,
    and `second` to its end meanwhile: the earlier-stamped write enters the pipeline
    last, and resolves against the row the later-stamped one wrote."""
    engine = g.engine
    stamp = engine.stamp
    stamped, go = threading.Event(), threading.Event()

    def stamp_then_pause(updated_at: object) -> int:
        ua = stamp(updated_at)
        if threading.current_thread().name == "first":
            stamped.set()
            go.wait()
        return ua

    monkeypatch.setattr(engine, "stamp", stamp_then_pause)
    results: dict[str, WriteResult] = {}
    thread = threading.Thread(target=lambda: results.update(a=first()), name="first")
    thread.start()
    stamped.wait()
    results["b"] = second()
    go.set()
    thread.join()
    return results["a"], results["b"]


def test_two_threads_patching_one_object_keep_both_patches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = open_graph(tmp_path / "g")
    g.obj_add("user", {"name": "ada"}, id=7)
    a, b = _stamped_first_entering_last(
        g,
        monkeypatch,
        lambda: g.obj_update(7, {"city": "london"}),
        lambda: g.obj_update(7, {"bio": "analyst"}),
    )
    assert (a.status, b.status) == ("applied", "applied")
    obj = g.obj_get(7)
    assert obj is not None
    assert obj.data == {"name": "ada", "city": "london", "bio": "analyst"}
    # The late patch landed above the row it patched, and says so.
    assert a.updated_at > b.updated_at
    assert obj.updated_at == a.updated_at
    assert g.obj_update(7, {"n": 1}).updated_at > a.updated_at  # the clock saw it
    g.close()
    reopened = open_graph(tmp_path / "g")
    kept = reopened.obj_get(7)
    assert kept is not None
    assert kept.data == {"name": "ada", "city": "london", "bio": "analyst", "n": 1}
    reopened.close()


def test_a_delete_stamped_before_a_patch_that_enters_after_it_deletes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both were acknowledged as applied: the only order that explains that is patch,
    then delete (a patch of a deleted object is NotFound). The object is gone."""
    g = open_graph(tmp_path / "g")
    g.obj_add("user", {"name": "ada"}, id=7)
    a, b = _stamped_first_entering_last(
        g, monkeypatch, lambda: g.obj_delete(7), lambda: g.obj_update(7, {"bio": "analyst"})
    )
    assert (a.status, b.status) == ("applied", "applied")
    assert g.obj_get(7) is None
    g.close()


def test_a_patch_resolved_when_applied_reports_the_stamp_it_was_raised_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A patch whose row could not be read when it entered is journaled unresolved and
    resolved when it is applied, at once: rebased there, it reports that stamp."""
    g = open_graph(tmp_path / "g")
    g.obj_add("user", {"name": "ada"}, id=7)
    armed: list[bool] = []

    def unreadable_once(shard: int, sql: str) -> None:
        if shard == shard_of(7, 4) and sql.startswith("SELECT") and armed:
            armed.clear()
            raise Unavailable("shard unreadable (test)")

    g.engine.backend.faults.append(unreadable_once)

    def then_arm() -> WriteResult:
        result = g.obj_update(7, {"bio": "analyst"})
        armed.append(True)  # the late patch's read fails, its apply's read works
        return result

    late, _ = _stamped_first_entering_last(
        g, monkeypatch, lambda: g.obj_update(7, {"city": "london"}), then_arm
    )
    obj = g.obj_get(7)
    assert obj is not None
    assert obj.data == {"name": "ada", "city": "london", "bio": "analyst"}
    assert late.status == "applied"
    assert late.updated_at == obj.updated_at
    g.close()


def test_a_write_stamped_by_its_caller_keeps_that_stamp_and_loses_to_a_newer_row(
    tmp_path: Path,
) -> None:
    """`updated_at` given by the caller is the caller's order: no rebase."""
    g = open_graph(tmp_path / "g")
    g.obj_add("user", {"name": "ada"}, id=7)
    newer = g.obj_update(7, {"bio": "analyst"})
    older = g.obj_update(7, {"city": "london"}, updated_at=newer.updated_at - 1)
    assert older.updated_at == newer.updated_at - 1
    assert g.obj_get(7).data == {"name": "ada", "bio": "analyst"}  # type: ignore[union-attr]
    g.close()


def test_a_row_the_store_refuses_does_not_park_the_writes_batched_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard's transaction holds the rows of every job of the batch with rows there:
    a row it refuses (a driver's DataError) fails them all, but is the error of one
    of them. The others are retried on their own, not parked as bad jobs at once."""
    g = open_graph(tmp_path / "g", retry=assocdb.RetryPolicy(base=0.01, cap=0.05))
    backend = g.engine.backend
    # Every transaction body stores its rows through `_store`: applied, prepared
    # (`storage.prepared`) or opened first (`storage.opened`).
    store = backend._store

    def refusing(session: Any, shard: int, template: str, rows: Any) -> Any:
        if any(len(row) > 2 and row[0] == 1 and row[2] == 2 for row in rows):  # the row 1 -> 2
            raise map_driver_error(sqlite3.DataError("value out of range (test)"), "shard")
        return store(session, shard, template, rows)

    monkeypatch.setattr(backend, "_store", refusing)
    assert shard_of(1, 4) == shard_of(5, 4)  # both rows in one transaction
    with g.batch() as b:
        refused = b.assoc_add(1, "follows", 2)
        innocent = b.assoc_add(5, "follows", 9)
    assert refused.result().status == innocent.result().status == "queued"
    assert g.drain(timeout=60)
    assert g.assoc_count(5, "follows") == 1
    assert g.assoc_count(9, "followed_by") == 1
    assert [job.error is not None for job in g.queue_jobs("bad")] == [True]
    g.close()


def test_a_node_job_being_walked_is_not_handed_to_a_retrier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node job records its progress after each page and walks on: meanwhile no
    retrier (this process's or another's) may claim it and walk the same pages."""
    g = open_graph(tmp_path / "g")
    applier, journal = g.engine.applier, g.engine.journal
    applier._stop.set()  # this process's retrier stops: the test claims in its place
    applier._wake.set()
    applier._threads[0].join()
    g.bulk_load([(1, "follows", 10 + n) for n in range(2 * NODE_JOB_PAGE + 1)])
    walking, go = threading.Event(), threading.Event()
    pages: list[int] = []
    run_page = applier._run_page

    def page(rows: Any) -> None:
        pages.append(len(rows.edges))
        if len(pages) == 2:  # the first page's progress is journaled
            walking.set()
            go.wait()
        run_page(rows)

    monkeypatch.setattr(applier, "_run_page", page)
    g.node_archive(1, "follows")
    walking.wait()
    claimed = journal.claim_due(time.time(), 100, 60.0)  # what a retrier would take
    go.set()
    wait_until(applier.idle)
    assert claimed == []
    assert g.drain(timeout=60)
    assert g.assoc_count(1, "follows") == 0
    assert len(pages) == 3  # each page walked once
    g.close()


# -- errors after a write is journaled: it is acknowledged, never refused ----------


def _full_journal(g: Graph) -> FailingConnection:
    """The graph's journal, made to fail the statements named in `failing` (as on a
    full disk): appends work, bookkeeping does not."""
    journal = g.engine.journal
    conn = FailingConnection(journal._conn)
    journal._conn = conn  # type: ignore[assignment]
    return conn


def test_a_write_whose_failed_leg_the_journal_cannot_record_yet_is_queued(
    tmp_path: Path,
) -> None:
    """A shard fails and the journal cannot record the failure (its disk filled
    after the append): the write is journaled, so it is `queued`, not refused, and
    it is applied once both work again."""
    g = open_graph(tmp_path / "g", retry=assocdb.RetryPolicy(base=0.01, cap=0.05))
    a, b = 4, 3
    assert (shard_of(a, 4), shard_of(b, 4)) == (0, 1)
    down = threading.Event()
    down.set()

    def fail_shard(shard: int, sql: str) -> None:
        if shard == 1 and down.is_set() and sql.startswith("BEGIN"):
            raise Unavailable("shard 1 is down (test)")

    g.engine.backend.faults.append(fail_shard)
    conn = _full_journal(g)
    conn.failing = ("UPDATE",)  # recording the failed attempt
    assert g.assoc_add(a, "follows", b).status == "queued"
    conn.failing = ()
    down.clear()
    assert g.drain(timeout=60)
    assert g.assoc_count(b, "followed_by") == 1
    assert g.check_counts() == []
    g.close()


def test_a_write_the_applier_resolves_while_the_journal_cannot_record_it_is_queued(
    tmp_path: Path,
) -> None:
    """A patch whose shard could not be read is journaled unresolved and resolved when
    applied; the journal must record the resolution first (a replay must not resolve
    it again against the row it wrote). If it cannot, the write is `queued`."""
    g = open_graph(tmp_path / "g", retry=assocdb.RetryPolicy(base=0.01, cap=0.05))
    g.obj_add("user", {"name": "ada"}, id=7)
    conn = _full_journal(g)
    once = [True]

    def unreadable_once(shard: int, sql: str) -> None:
        if shard == shard_of(7, 4) and sql.startswith("SELECT") and once:
            once.clear()
            conn.failing = ("UPDATE",)  # from now on: after the append
            raise Unavailable("shard unreadable (test)")

    g.engine.backend.faults.append(unreadable_once)
    assert g.obj_update(7, {"bio": "analyst"}).status == "queued"
    conn.failing = ()
    assert g.drain(timeout=60)
    assert g.obj_get(7).data == {"name": "ada", "bio": "analyst"}  # type: ignore[union-attr]
    g.close()


def test_an_unexpected_error_applying_a_round_queues_its_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever fails once a round is journaled, its writes are acknowledged: `queued`
    and applied in the background, and the batch's next round still goes through."""
    g = open_graph(tmp_path / "g")
    applier = g.engine.applier
    run_batch, commit_batch = applier.run_batch, applier.commit_batch
    calls: list[int] = []

    def broken_once(jobs: Any) -> list[bool]:
        calls.append(len(jobs))
        if len(calls) == 1:
            raise RuntimeError("a bug (test)")
        return run_batch(jobs)

    def commit_broken_once(batch: Any, jobs: Any) -> list[bool]:  # (prepared: `writes.overlap`)
        calls.append(len(jobs))
        if len(calls) == 1:
            raise RuntimeError("a bug (test)")  # its prepared transactions are rolled back
        return commit_batch(batch, jobs)

    monkeypatch.setattr(applier, "run_batch", broken_once)
    monkeypatch.setattr(applier, "commit_batch", commit_broken_once)
    with g.batch() as b:
        first = b.assoc_add(1, "follows", 2)
        added = b.obj_add("user", {"name": "ada"}, id=77)
        patched = b.obj_update(77, {"bio": "analyst"})  # the next round
    assert first.result().status == "queued"
    assert added.result() == 77
    assert patched.result().status in ("applied", "queued")
    assert g.drain(timeout=60)
    assert g.assoc_count(2, "followed_by") == 1
    assert g.obj_get(77).data == {"name": "ada", "bio": "analyst"}  # type: ignore[union-attr]
    g.close()


def test_a_fence_that_fails_refuses_no_write_of_the_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fencing (syncing the shards of applied jobs) is bookkeeping for the journal:
    if it fails, the retrier fences later. The batch's next round is not refused."""
    g = open_graph(tmp_path / "g")
    monkeypatch.setattr(pipeline_module, "FENCE_JOBS", 1)  # fence after every round
    backend = g.engine.backend
    make_durable = backend.make_durable
    broken = threading.Event()
    broken.set()

    def fsync(shards: Any) -> None:
        if broken.is_set():
            raise Unavailable("fsync failed (test)")
        make_durable(shards)

    monkeypatch.setattr(backend, "make_durable", fsync)
    with g.batch() as b:
        added = b.obj_add("user", {"name": "ada"}, id=77)
        patched = b.obj_update(77, {"bio": "analyst"})  # the next round
    assert added.result() == 77
    assert patched.result().status == "applied"
    broken.clear()
    assert g.drain(timeout=60)
    assert g.obj_get(77).data == {"name": "ada", "bio": "analyst"}  # type: ignore[union-attr]
    g.close()


def test_an_unsynced_write_an_index_refuses_is_refused_alone(tmp_path: Path) -> None:
    """A new object (concrete rows) that a unique index refuses cannot be journaled and
    resolved later: it is refused, even unsynced, and only it."""
    g = open_graph(tmp_path / "g", sync=False)
    g.define_index("by_email", "user", ["email"], unique=True)
    g.obj_add("user", {"email": "ada@example.com"}, id=5)
    assert g.drain(timeout=60)
    with g.batch() as b:
        edge = b.assoc_add(1, "follows", 2)
        twin = b.obj_add("user", {"email": "ada@example.com"})
        other = b.obj_add("user", {"email": "bob@example.com"})
    assert edge.result().status == "queued"
    with pytest.raises(Conflict):
        twin.result()
    assert other.result() > 0
    assert g.drain(timeout=60)
    assert g.assoc_count(2, "followed_by") == 1
    g.close()


def test_an_unsynced_batch_that_frees_a_unique_key_can_take_it_again(tmp_path: Path) -> None:
    """An unsynced batch deletes an object, renames another, then adds objects with the
    keys they held: judged as if applied in order, as on a synced graph. (The deletes
    read rows the first round writes: left to the background, those rows were pending
    when the next round was resolved, the deletes were journaled unresolved with the
    keys they free unclaimed, and the adds were refused.)"""
    g = open_graph(tmp_path / "g", sync=False)
    g.define_index("by_email", "user", ["email"], unique=True)
    with g.batch() as b:
        b.obj_add("user", {"email": "ada@example.com"}, id=5)
        b.obj_add("user", {"email": "bob@example.com"}, id=6)
        deleted = b.obj_delete(5)
        renamed = b.obj_update(6, {"email": "rob@example.com"})
        ada = b.obj_add("user", {"email": "ada@example.com"})
        bob = b.obj_add("user", {"email": "bob@example.com"})
    assert deleted.result().status == "queued"
    assert renamed.result().status == "queued"
    assert ada.result() > 0
    assert bob.result() > 0
    assert g.drain(timeout=60)
    found = g.index_query("by_email", eq=["ada@example.com"])
    assert [obj.id for obj in found.items] == [ada.result()]
    found = g.index_query("by_email", eq=["bob@example.com"])
    assert [obj.id for obj in found.items] == [bob.result()]
    assert len(g.engine.applier.pending.claims) == 0
    g.close()


def test_a_write_whose_unique_key_cannot_be_checked_fails_alone(tmp_path: Path) -> None:
    """A unique index is checked on every shard: with one down, a new object cannot be
    checked and is refused (`Unavailable`), a patch is journaled unresolved (`queued`,
    checked when applied), and the writes batched with them go through."""
    g = open_graph(tmp_path / "g", retry=assocdb.RetryPolicy(base=0.01, cap=0.05))
    g.define_index("by_email", "user", ["email"], unique=True)
    a, b, obj = [n for n in range(1, 40) if shard_of(n, 4) in (0, 1)][:3]
    g.obj_add("user", {"email": "ada@example.com"}, id=obj)
    down = threading.Event()
    down.set()

    def shard_down(shard: int, sql: str) -> None:
        if shard == 2 and down.is_set():
            raise Unavailable("shard 2 is down (test)")

    g.engine.backend.faults.append(shard_down)
    with g.batch() as batch:
        edge = batch.assoc_add(a, "follows", b)
        patched = batch.obj_update(obj, {"email": "ada@example.org"})
        new = batch.obj_add("user", {"email": "bob@example.com"})
    assert edge.result().status == "applied"
    assert patched.result().status == "queued"
    with pytest.raises(Unavailable):
        new.result()
    down.clear()
    assert g.drain(timeout=60)
    assert g.obj_get(obj).data == {"email": "ada@example.org"}  # type: ignore[union-attr]
    assert g.assoc_count(b, "followed_by") == 1
    g.close()


def test_two_writes_of_one_round_cannot_both_take_a_unique_key(tmp_path: Path) -> None:
    """Writes that enter together are checked against the stored index entries, which
    hold neither: the second to take a unique key is refused, as it would be after
    the first; a key of an index that is not unique is shared."""
    g = open_graph(tmp_path / "g")
    g.define_index("by_email", "user", ["email"], unique=True)
    g.define_index("by_city", "user", ["city"])
    g.obj_add("user", {"email": "eve@example.com"}, id=9)
    with g.batch() as b:
        first = b.obj_add("user", {"email": "ada@example.com", "city": "london"})
        second = b.obj_add("user", {"email": "ada@example.com"})
        third = b.obj_add("user", {"email": "bob@example.com", "city": "london"}, id=1000)
        fourth = b.obj_add("user", {"email": "bob@example.com"}, id=1001)
        fifth = b.obj_update(9, {"email": "ada@example.com"})
    assert first.result() > 0
    assert third.result() == 1000
    for refused in (second, fourth, fifth):
        with pytest.raises(Conflict, match="by_email"):
            refused.result()
    found = g.index_query("by_email", eq=["ada@example.com"])
    assert [obj.id for obj in found.items] == [first.result()]
    assert len(g.index_query("by_city", eq=["london"]).items) == 2
    assert g.obj_get(9).data == {"email": "eve@example.com"}  # type: ignore[union-attr]
    g.close()


def _while_another_graph_resolves(
    path: Path,
    monkeypatch: pytest.MonkeyPatch,
    first: Callable[[assocdb.Graph], object],
    second: Callable[[assocdb.Graph], object],
    pause_after: str = "read_current_many",
) -> tuple[object, object]:
    """Two processes (two Graphs on `path`) write at once: `second` starts once `first`
    has read the rows it resolves against (its applier's `pause_after` returned), and
    `first` goes on once `second` is about to take the directory's writer lock (or,
    without one, is done). Their outcomes."""
    first_graph, second_graph = assocdb.open(path), assocdb.open(path)
    applier = first_graph.engine.applier
    read = getattr(applier, pause_after)
    resolving, go, entering = threading.Event(), threading.Event(), threading.Event()

    def read_then_pause(*args: Any) -> Any:
        stored = read(*args)
        if threading.current_thread().name == "first":
            resolving.set()
            go.wait()
        return stored

    monkeypatch.setattr(applier, pause_after, read_then_pause)
    backend = second_graph.engine.backend
    exclusive = getattr(backend, "exclusive_writes", None)

    def entering_lock() -> Any:
        entering.set()
        assert exclusive is not None
        return exclusive()

    monkeypatch.setattr(backend, "exclusive_writes", entering_lock, raising=False)
    results: dict[str, WriteResult | Exception] = {}

    def write(
        name: str, graph: assocdb.Graph, call: Callable[[assocdb.Graph], WriteResult]
    ) -> None:
        try:
            results[name] = call(graph)
        except assocdb.AssocdbError as exc:
            results[name] = exc
        finally:
            entering.set()

    one = threading.Thread(target=write, args=("first", first_graph, first), name="first")
    one.start()
    resolving.wait()
    two = threading.Thread(target=write, args=("second", second_graph, second))
    two.start()
    entering.wait()
    go.set()
    one.join()
    two.join()
    first_graph.close()
    second_graph.close()
    return results["first"], results["second"]


def test_two_graphs_patching_one_object_keep_both_patches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second process waits for the first to apply its patch before it reads the
    object (the directory's writer lock), so both patches survive; before, the later
    stamp overwrote the other's patch, both acknowledged as applied."""
    with open_graph(tmp_path / "g") as g:
        g.obj_add("user", {"name": "ada"}, id=7)
    first, second = _while_another_graph_resolves(
        tmp_path / "g",
        monkeypatch,
        lambda g: g.obj_update(7, {"city": "london"}),
        lambda g: g.obj_update(7, {"bio": "analyst"}),
    )
    assert isinstance(first, WriteResult)
    assert isinstance(second, WriteResult)
    with assocdb.open(tmp_path / "g") as g:
        obj = g.obj_get(7)
        assert obj is not None
        assert obj.data == {"name": "ada", "bio": "analyst", "city": "london"}


def test_an_object_write_behind_a_stuck_process_is_refused_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process stopped while it holds the writer lock (SIGSTOP) made every other
    process's object writes wait for ever; now they are refused (Unavailable) once
    the wait is over, journal nothing, and go through once the holder goes on."""
    monkeypatch.setattr(sqlite_module, "WRITER_LOCK_TIMEOUT", 0.05)
    with open_graph(tmp_path / "g") as stuck, open_graph(tmp_path / "g") as g:
        g.obj_add("user", {"name": "ada"}, id=7)
        journaled = len(g.engine.journal.unfinished())
        with stuck.engine.backend.exclusive_writes():
            with pytest.raises(Unavailable, match=r"for over 0\.05 s"):
                g.obj_update(7, {"city": "london"})
            assert len(g.engine.journal.unfinished()) == journaled
        g.obj_update(7, {"bio": "analyst"})
        obj = g.obj_get(7)
        assert obj is not None
        assert obj.data == {"name": "ada", "bio": "analyst"}


def test_edge_writes_batched_with_an_object_write_behind_a_stuck_process_go_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Edge writes do not take the writer lock: batched with an object write that
    waits for it in vain (a stopped process holds it), only the object write is
    refused; the edge writes are not refused with the lock's error."""
    monkeypatch.setattr(sqlite_module, "WRITER_LOCK_TIMEOUT", 0.05)
    with open_graph(tmp_path / "g") as stuck, open_graph(tmp_path / "g") as g:
        g.obj_add("user", {"name": "ada"}, id=7)
        with stuck.engine.backend.exclusive_writes():
            with g.batch() as b:
                edge = b.assoc_add(1, "follows", 2)
                patch = b.obj_update(7, {"city": "london"})
                other = b.assoc_add(3, "follows", 4)
            with pytest.raises(Unavailable, match=r"for over 0\.05 s"):
                patch.result()
            assert edge.result().status == "applied"
            assert other.result().status == "applied"
        assert g.assoc_count(2, "followed_by") == 1
        assert g.assoc_count(4, "followed_by") == 1
        obj = g.obj_get(7)
        assert obj is not None
        assert obj.data == {"name": "ada"}


def test_a_retry_round_waits_for_a_stuck_writer_lock_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind a stopped process holding the writer lock, a retrier's round of queued
    object writes waited out the timeout for each of them (up to 100 times 30 s, the
    edge retries and the fence held up behind them); now the round's first wait
    that gives up fails the rest of its object writes at once, to be retried."""
    monkeypatch.setattr(sqlite_module, "WRITER_LOCK_TIMEOUT", 0.05)
    with open_graph(tmp_path / "g") as stuck, open_graph(tmp_path / "g") as g:
        applier, journal = g.engine.applier, g.engine.journal
        applier._stop.set()  # this process's retrier stops: the test runs its rounds
        applier._wake.set()
        applier._threads[0].join()
        g.obj_add("user", {"name": "ada"}, id=7)
        stamp = time.time_ns() // 1000
        patches = [b'{"a":1}', b'{"b":2}', b'{"c":3}']
        jobs = journal.append_many(
            [encode(ObjectWrite(7, stamp + n, patch=p, rebase=True)) for n, p in enumerate(patches)]
        )
        for job in jobs:  # queued retries, due now
            journal.fail([Failure(job, 0, "Unavailable", counts=False, next_at=0.0, bad=False)])
        waits: list[bool] = []
        backend = g.engine.backend
        exclusive_writes = backend.exclusive_writes

        def counted() -> Any:
            waits.append(True)
            return exclusive_writes()

        monkeypatch.setattr(backend, "exclusive_writes", counted)
        with stuck.engine.backend.exclusive_writes():
            assert applier._retry_round() == 3
        assert len(waits) == 1  # one wait for the round, not one per job
        assert journal.counts()["error"] == 3  # all three still queued
        assert journal.retry_now() == 3
        assert applier._retry_round() == 3  # the lock is free: all three apply
        obj = g.obj_get(7)
        assert obj is not None
        assert obj.data == {"name": "ada", "a": 1, "b": 2, "c": 3}


def test_two_graphs_taking_one_unique_key_refuse_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One of two processes adding one unique key at once gets it, the other is
    refused, and the index holds the one that got it."""
    with open_graph(tmp_path / "g") as g:
        g.define_index("by_email", "user", ["email"], unique=True)
    first, second = _while_another_graph_resolves(
        tmp_path / "g",
        monkeypatch,
        lambda g: g.obj_add("user", {"email": "ada@example.com"}, id=1),
        lambda g: g.obj_add("user", {"email": "ada@example.com"}, id=2),
    )
    outcomes = {first, second}
    assert len(outcomes & {1, 2}) == 1
    (refused,) = outcomes - {1, 2}
    assert isinstance(refused, KeyTaken)
    with assocdb.open(tmp_path / "g") as g:
        found = g.index_query("by_email", eq=["ada@example.com"])
        assert [obj.id for obj in found.items] == list(outcomes & {1, 2})


def test_two_graphs_adding_new_objects_with_one_unique_key_refuse_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects added without an id are concrete rows (no stored row to read), but their
    unique key is checked against the stored index all the same: one of two processes
    adding one key at once is refused (before, both were told applied and the index
    held the key twice)."""
    with open_graph(tmp_path / "g") as g:
        g.define_index("by_email", "user", ["email"], unique=True)
    first, second = _while_another_graph_resolves(
        tmp_path / "g",
        monkeypatch,
        lambda g: g.obj_add("user", {"email": "ada@example.com"}),
        lambda g: g.obj_add("user", {"email": "ada@example.com"}),
        pause_after="entries",
    )
    added = [r for r in (first, second) if isinstance(r, int)]
    refused = [r for r in (first, second) if not isinstance(r, int)]
    assert len(added) == 1
    assert len(refused) == 1
    assert isinstance(refused[0], KeyTaken)
    with assocdb.open(tmp_path / "g") as g:
        found = g.index_query("by_email", eq=["ada@example.com"])
        assert [obj.id for obj in found.items] == added


def test_an_edge_stamped_after_an_archive_that_enters_after_it_is_archived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both were acknowledged: the archive, stamped by the store, is stamped again as
    it enters, after the edge, so its node job covers the edge. The edge is archived,
    never live in an archived list."""
    g = open_graph(tmp_path / "g")
    g.assoc_add(2, "follows", 5)
    archive, added = _stamped_first_entering_last(
        g, monkeypatch, lambda: g.node_archive(2, "follows"), lambda: g.assoc_add(2, "follows", 8)
    )
    assert archive.updated_at > added.updated_at  # stamped as it entered
    assert g.drain(timeout=60)
    assert g.node_state(2, "follows") == "archived"
    assert g.assoc_edge(2, "follows", 5).state == "archived"  # type: ignore[union-attr]
    assert g.assoc_edge(2, "follows", 8).state == "archived"  # type: ignore[union-attr]
    g.close()


def test_only_batches_keeping_part_of_a_row_take_the_writer_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Object writes and type changes hold the directory's writer lock from their reads
    to their apply; a batch of edge writes does not wait for other processes."""
    g = open_graph(tmp_path / "g")
    g.define_assoc("likes")
    backend = g.engine.backend
    exclusive = backend.exclusive_writes
    taken: list[int] = []

    def counted() -> Any:
        taken.append(1)
        return exclusive()

    monkeypatch.setattr(backend, "exclusive_writes", counted)
    g.assoc_add(1, "follows", 2)
    g.assoc_delete(1, "follows", 2)
    assert taken == []
    g.obj_add("user", {"name": "ada"}, id=7)
    g.obj_update(7, {"city": "london"})
    g.assoc_add(1, "likes", 3)
    g.assoc_change_type(1, "likes", 3, "follows")
    g.obj_add("user", {"name": "bob"})  # a new object's unique keys are checked
    assert len(taken) == 4
    g.close()


def test_answering_a_round_at_once_answers_each_write_once() -> None:
    """`_answer_all` answers a round's writes under one lock per submit call: each
    ticket's writer is woken once all its writes are answered, and a write answered
    already (`queued`, unsynced) keeps its first answer."""
    first, second = pipeline_module._Ticket(3), pipeline_module._Ticket(1)
    entries = [
        pipeline_module._Entry(None, first, True, False),  # type: ignore[arg-type]
        pipeline_module._Entry(None, first, False, False),  # type: ignore[arg-type]
        pipeline_module._Entry(None, second, True, False),  # type: ignore[arg-type]
        pipeline_module._Entry(None, first, True, False),  # type: ignore[arg-type]
    ]
    entries[1].answer("queued")
    pipeline_module._answer_all(entries, "applied")
    assert [e.outcome for e in entries] == ["applied", "queued", "applied", "applied"]
    assert (first.left, second.left) == (0, 0)
    assert first.done.acquire(blocking=False)
    assert second.done.acquire(blocking=False)
    pipeline_module._answer_all(entries, "queued")  # a second answer changes nothing
    assert [e.outcome for e in entries] == ["applied", "queued", "applied", "applied"]
    assert (first.left, second.left) == (0, 0)
