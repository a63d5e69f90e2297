"""Backups (`api/backup.py`, `api/restore.py`): a consistent cut under live writers,
verify, restore, and restore to points in time compared with a model of the graph."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import assocdb
from assocdb.core.errors import InvalidRequest
from assocdb.writes import pipeline, retrier
from tests.support.stores import Stores

WRITERS = 8
NORMAL, REMOVED = 0, 3  # stored states (core.records.STATE_NAMES)
Key = tuple[int, int]  # (id1, id2) of a follows edge


@dataclass(frozen=True)
class Write:
    key: Key
    state: int
    began: int  # µs, wall clock
    acked: int
    updated_at: int


def now() -> int:
    return time.time_ns() // 1000


class Writers:
    """Eight threads writing follows edges (with their inverses) until stopped; each
    thread owns its id1s, so per key the writes are sequential; id2s are shared, so the
    inverse lists' counts take writes of every thread."""

    def __init__(self, g: assocdb.Graph, stamped: bool) -> None:
        self.g = g
        #: Writers give their own `updated_at` (a queued update or delete is otherwise
        #: stamped when applied, after its result names a stamp).
        self.stamped = stamped
        self.log: list[list[Write]] = [[] for _ in range(WRITERS)]
        self.stop = threading.Event()
        self.wrote = threading.Condition()
        self.total = 0
        self.threads = [threading.Thread(target=self._run, args=(w,)) for w in range(WRITERS)]

    def __enter__(self) -> Writers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()

    def wait_for(self, writes: int) -> None:
        """Until `writes` more writes have been acknowledged."""
        with self.wrote:
            target = self.total + writes
            self.wrote.wait_for(lambda: self.total >= target, timeout=60)

    def _run(self, w: int) -> None:
        rng = random.Random(w)
        keys = [(w * 1000 + i + 1, 900_000 + rng.randrange(40)) for i in range(25)]
        written: set[Key] = set()
        stamp = 0
        while not self.stop.is_set():
            key = rng.choice(keys)
            add = key not in written or rng.random() < 0.6
            began = now()
            stamp = max(stamp + 1, began)
            given = stamp if self.stamped else None
            if add:
                result = self.g.assoc_add(key[0], "follows", key[1], updated_at=given)
            else:
                result = self.g.assoc_delete(key[0], "follows", key[1], updated_at=given)
            acked = now()
            written.add(key)
            write = Write(key, NORMAL if add else REMOVED, began, acked, result.updated_at)
            self.log[w].append(write)
            with self.wrote:
                self.total += 1
                self.wrote.notify_all()

    def writes(self) -> Iterator[Write]:
        for log in self.log:
            yield from log


def stored(root: Path, atype: int) -> dict[Key, tuple[int, int]]:
    """(id1, id2) -> (state, updated_at) of every stored edge of `atype` in the graph
    directory `root`, read from its shard files."""
    rows: dict[Key, tuple[int, int]] = {}
    for file in sorted(root.glob("shard-*.db")):
        conn = sqlite3.connect(f"file:{file}?mode=ro", uri=True)
        try:
            sql = "SELECT id1, id2, state, updated_at FROM edges WHERE atype = ?"
            for id1, id2, state, updated_at in conn.execute(sql, (atype,)):
                rows[(id1, id2)] = (state, updated_at)
        finally:
            conn.close()
    return rows


def model_at(writes: list[Write], upto: int) -> dict[Key, tuple[int, int]]:
    """Per key, the newest write stamped at or before `upto` (the merge rule's winner)."""
    model: dict[Key, tuple[int, int]] = {}
    for write in sorted(writes, key=lambda w: w.updated_at):
        if write.updated_at <= upto:
            model[write.key] = (write.state, write.updated_at)
    return model


def open_source(tmp_path: Path, sync: bool = True) -> assocdb.Graph:
    g = assocdb.open(tmp_path / "graph", shards=8, sync=sync)
    g.define_assoc("follows", inverse="followed_by")
    g.enable_feed()
    return g


def open_on(stores: Stores, sync: bool = True) -> assocdb.Graph:
    """A source graph on the backend under test (SQLite, MariaDB, PostgreSQL)."""
    g = stores.open("source", shards=8, sync=sync)
    g.define_assoc("follows", inverse="followed_by")
    g.enable_feed()
    return g


def type_ids(g: assocdb.Graph) -> tuple[int, int]:
    return g.schema.assoc_type("follows").id, g.schema.assoc_type("followed_by").id


@pytest.mark.parametrize("sync", [True, False], ids=["applied", "queued"])
def test_eight_writers_through_a_backup_then_five_points_in_time(
    stores: Stores, tmp_path: Path, sync: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Jobs leave the journal as soon as they are applied (a fence after every batch):
    # the cut cannot lean on the journal still holding a job it half copied.
    monkeypatch.setattr(pipeline, "FENCE_JOBS", 1)
    monkeypatch.setattr(retrier, "FENCE_JOBS", 1)
    g = open_on(stores, sync)
    follows, followed_by = type_ids(g)
    with Writers(g, stamped=not sync) as writers:
        writers.wait_for(300)
        manifest = assocdb.backup(g, tmp_path / "backup")
        writers.wait_for(300)
    assert g.drain(60)
    writes = list(writers.writes())
    g.close()

    # The cut: acknowledged before it ⇒ in; begun after it ⇒ not in; else either.
    backed = stored(tmp_path / "backup", follows)
    for key in {w.key for w in writes}:
        mine = [w for w in writes if w.key == key]
        before = [w for w in mine if w.acked < manifest.cut_began]
        around = [w for w in mine if w.acked >= manifest.cut_began and w.began <= manifest.cut_at]
        allowed = {(w.state, w.updated_at) for w in before[-1:] + around}
        if not before and not around:
            assert key not in backed
        else:
            assert backed.get(key) in allowed | ({None} if not before else set()), key
    check = assocdb.verify_backup(tmp_path / "backup")
    assert check.ok, (check.counts[:3], check.hanging[:3])
    mirrored = {
        (id2, id1): row for (id1, id2), row in stored(tmp_path / "backup", followed_by).items()
    }
    assert mirrored == backed

    # Five random points in time after the cut, then the last, each compared with the
    # model. Queued writes to one key applied in one batch leave only the newest in the
    # feed (docs/operations.md, "Backups"): there, a point between them shows the state
    # before both; the last point is exact either way.
    rng = random.Random(40)
    last = max(w.updated_at for w in writes)
    points = sorted(rng.randrange(manifest.cut_at, last + 1) for _ in range(5))
    for n, upto in enumerate([*points, last]):
        dest = tmp_path / f"restored{n}"
        done = assocdb.restore(tmp_path / "backup", dest, to=upto)
        assert done.rolled_forward > 0
        rows = stored(dest, follows)
        model = model_at(writes, upto)
        if sync or upto == last:
            assert rows == model, upto
        else:
            assert rows.keys() <= model.keys()
            assert all(
                at <= upto or (state, at) == backed[key] for key, (state, at) in rows.items()
            )
        inverse = {(id2, id1): row for (id1, id2), row in stored(dest, followed_by).items()}
        assert inverse == rows
        r = assocdb.open(dest)
        try:
            assert r.check_counts() == []
            assert r.check_inverses() == []
        finally:
            r.close()


def test_a_restore_as_of_the_cut_is_the_backup(tmp_path: Path) -> None:
    g = open_source(tmp_path)
    for i in range(1, 50):
        g.assoc_add(i, "follows", 1000 + i % 7)
    assocdb.backup(g, tmp_path / "backup")
    g.assoc_add(999, "follows", 1)  # after the cut
    g.close()
    done = assocdb.restore(tmp_path / "backup", tmp_path / "restored")
    assert done.to is None
    assert done.manifest.edges == 98
    r = assocdb.open(tmp_path / "restored")
    try:
        assert r.assoc_count(1001, "followed_by") == 7
        assert r.assoc_count(999, "follows") == 0
        r.assoc_add(999, "follows", 1)  # a restored graph takes writes
        assert r.assoc_count(1, "followed_by") == 1
    finally:
        r.close()


def test_a_backup_from_the_command_line_of_a_directory_in_use(tmp_path: Path) -> None:
    g = open_source(tmp_path)
    g.assoc_add(1, "follows", 2)
    manifest = assocdb.backup(tmp_path / "graph", tmp_path / "backup")  # not through g
    assert manifest.edges == 2
    assert manifest.source["kind"] == "sqlite"
    g.close()


def test_bad_input_is_one_clear_error_and_changes_nothing(tmp_path: Path) -> None:
    g = open_source(tmp_path)
    g.assoc_add(1, "follows", 2)
    assocdb.backup(g, tmp_path / "backup")
    with pytest.raises(InvalidRequest, match="exists"):
        assocdb.backup(g, tmp_path / "backup")
    g.close()
    with pytest.raises(InvalidRequest, match="exists"):
        assocdb.restore(tmp_path / "backup", tmp_path / "graph")
    with pytest.raises(InvalidRequest, match="before the backup's cut"):
        assocdb.restore(tmp_path / "backup", tmp_path / "r", to=1)
    with pytest.raises(InvalidRequest, match="in the future"):
        assocdb.restore(tmp_path / "backup", tmp_path / "r", to=now() + 10**9)
    assert not (tmp_path / "r").exists()

    assert assocdb.verify_backup(tmp_path / "backup").schema
    shard = tmp_path / "backup" / "shard-0001.db"
    body = bytearray(shard.read_bytes())
    body[-100] ^= 0xFF
    shard.write_bytes(bytes(body))
    with pytest.raises(InvalidRequest, match=r"corrupt backup .*shard-0001\.db does not match"):
        assocdb.verify_backup(tmp_path / "backup")
    with pytest.raises(InvalidRequest, match="corrupt backup"):
        assocdb.restore(tmp_path / "backup", tmp_path / "r")

    manifest = tmp_path / "backup" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"format": 1', '"format": 2'))
    with pytest.raises(InvalidRequest, match="newer than this assocdb reads"):
        assocdb.verify_backup(tmp_path / "backup")
    manifest.write_text("{not json")
    with pytest.raises(InvalidRequest, match="damaged"):
        assocdb.verify_backup(tmp_path / "backup")
    assert not (tmp_path / "r").exists()


def test_a_time_whose_history_was_trimmed_or_never_kept_is_refused(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "graph", shards=2)
    g.define_assoc("follows", inverse="followed_by")
    g.assoc_add(1, "follows", 2)
    assocdb.backup(g, tmp_path / "nofeed")
    g.enable_feed()
    assocdb.backup(g, tmp_path / "backup")
    g.assoc_add(3, "follows", 4)
    upto = now()
    with pytest.raises(InvalidRequest, match="change feed was off"):
        assocdb.restore(tmp_path / "nofeed", tmp_path / "r", to=upto)
    g.assoc_add(5, "follows", 6)
    g.services.feed.trim(seconds=0, rows=0)
    with pytest.raises(InvalidRequest, match="outside the retained history"):
        assocdb.restore(tmp_path / "backup", tmp_path / "r", to=upto)
    assert not (tmp_path / "r").exists()
    g.close()


def test_objects_and_node_states_roll_forward(stores: Stores, tmp_path: Path) -> None:
    g = open_on(stores)
    g.define_object("user")
    kept = g.obj_add("user", {"name": "a"})
    g.assoc_add(1, "follows", 2)
    g.assoc_add(3, "follows", 2)
    assocdb.backup(g, tmp_path / "backup")
    g.obj_update(kept, {"name": "b"})
    made = g.obj_add("user", {"name": "c"})
    g.node_archive(2, "followed_by")
    assert g.drain(30)
    upto = now()
    g.obj_delete(made)
    g.close()
    assocdb.restore(tmp_path / "backup", tmp_path / "r", to=upto)
    r = assocdb.open(tmp_path / "r")
    try:
        assert r.obj_get(kept).data == {"name": "b"}
        assert r.obj_get(made).data == {"name": "c"}
        assert r.assoc_count(2, "followed_by") == 0
        assert r.assoc_count(1, "follows") == 0
        assert r.check_counts() == []
        assert r.check_inverses() == []
        assert r.obj_add("user", {"name": "d"}) not in (kept, made)  # ids reserved
    finally:
        r.close()


class Stop(Exception):
    """Stops a backup part way (as a crash or Ctrl-C would)."""


def test_a_stopped_backup_resumes_and_catches_up_what_it_had_copied(tmp_path: Path) -> None:
    g = open_source(tmp_path)
    g.define_object("user")
    g.define_timeline("follows", mode="write")
    kept = g.obj_add("user", {"name": "a"})
    for i in range(1, 400):
        g.assoc_add(i, "follows", 5000 + i % 13)
    g.post(5001, 77)

    def stop_halfway(done: int, total: int) -> None:
        if done > total // 2:
            raise Stop

    with pytest.raises(Stop):
        assocdb.backup(g, tmp_path / "backup", progress=stop_halfway)
    with pytest.raises(InvalidRequest, match="not a finished backup"):
        assocdb.verify_backup(tmp_path / "backup")
    # Changes after the first cut, on shards copied then and on the others.
    for i in range(1, 400, 3):
        g.assoc_delete(i, "follows", 5000 + i % 13)
    g.obj_update(kept, {"name": "b"})
    made = g.obj_add("user", {"name": "c"})
    g.post(5001, 78)
    assert g.drain(30)  # the journal no longer holds them: the feed must carry them
    manifest = assocdb.backup(g, tmp_path / "backup")
    assert manifest.replayed == 0
    assert 0 < manifest.caught_up < manifest.shards
    follows, followed_by = type_ids(g)
    assert stored(tmp_path / "backup", follows) == stored(tmp_path / "graph", follows)
    assert stored(tmp_path / "backup", followed_by) == stored(tmp_path / "graph", followed_by)
    homes = {n: [i.item for i in g.home_timeline(n).items] for n in range(1, 400, 13)}
    g.close()
    assert assocdb.verify_backup(tmp_path / "backup").ok
    assocdb.restore(tmp_path / "backup", tmp_path / "restored")
    r = assocdb.open(tmp_path / "restored")
    try:
        assert r.obj_get(kept).data == {"name": "b"}
        assert r.obj_get(made).data == {"name": "c"}
        assert {n: [i.item for i in r.home_timeline(n).items] for n in range(1, 400, 13)} == homes
        assert r.obj_add("user", {}) not in (kept, made)
    finally:
        r.close()


def test_a_roll_forward_from_another_graph_s_feed_is_refused(tmp_path: Path) -> None:
    g = open_source(tmp_path)
    g.assoc_add(1, "follows", 2)
    assocdb.backup(g, tmp_path / "backup")
    g.assoc_add(3, "follows", 4)
    g.close()
    other = assocdb.open(tmp_path / "other", shards=8)  # as many shards, its own feed
    other.define_assoc("follows", inverse="followed_by")
    other.enable_feed()
    other.assoc_add(7, "follows", 8)
    other.close()
    with pytest.raises(InvalidRequest, match="is not the graph this backup was taken from"):
        assocdb.restore(tmp_path / "backup", tmp_path / "r", to=now(), source=tmp_path / "other")
    assert not (tmp_path / "r").exists()
    assocdb.restore(tmp_path / "backup", tmp_path / "r", to=now(), source=tmp_path / "graph")
