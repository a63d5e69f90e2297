"""Online shard moves and added replicas (`storage.moves`), on SQLite directories and MariaDB.

A shard moves while a writer and a reader use the graph (which takes the map's
changes from the file, as every process does); the mover is also killed
(SIGKILL, in a subprocess) at random points and run again. At the end the
moved shard's rows and counts equal a model of the acknowledged writes, no
read during the move missed one, and a verify finds no difference.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import pytest

from assocdb import Graph, InvalidRequest, Unavailable
from assocdb.cli.main import main
from assocdb.core.ids import shard_of
from assocdb.storage import moves
from assocdb.storage.moves import MoveProgress, cancel_move, drop_replica, move_shard
from assocdb.storage.replica_verify import verify_replicas
from assocdb.storage.shardmap import ShardMapBackend
from assocdb.storage.shardmap_config import (
    BackendConfig,
    MoveRecord,
    from_dict,
    load,
    save,
    with_backend,
    with_down,
    with_moves,
    with_replica,
    without_replica,
)
from tests.storage.test_shardmap import (  # noqa: F401 (make_map is a fixture)
    MapMaker,
    cluster,
    fail,
    make_map,
    open_cluster,
)
from tests.support.helpers import wait_until

SETTLE = 1.5  # > the graph's map reload interval (1 s)
ROOT = Path(__file__).resolve().parents[2]


def add_backend(path: Path, name: str) -> None:
    """A new, empty backend in the map: a SQLite directory, or a schema on a server."""
    smap = load(path)
    first = next(iter(smap.backends.values()))
    if first.url is not None:
        url = first.url.rsplit("_", 1)[0] + f"_{name}"
        config = BackendConfig(url=url, query_timeout=first.query_timeout)
    else:
        config = BackendConfig(path=name, query_timeout=first.query_timeout)
    save(with_backend(smap, name, config), path)


@pytest.fixture
def graph(make_map: MapMaker) -> Iterator[Graph]:  # noqa: F811 (the fixture)
    g = open_cluster(make_map, cache=None)  # every read goes to a replica
    yield g
    g.close()


class Load:
    """A writer and a reader thread on one graph: the writer adds edges and remembers the
    acknowledged ones; the reader reads back acknowledged edges and a fixed list."""

    def __init__(self, graph: Graph, fixed: tuple[int, int]) -> None:
        self.graph = graph
        self.acked: list[tuple[int, int]] = []
        self.wrong: list[str] = []
        self.reads = 0
        self.fixed = fixed  # (node, its count of "likes") written before the move
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._write), threading.Thread(target=self._read)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _write(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            id1 = 1 + n % 40
            result = self.graph.assoc_add(id1, "follows", 10_000 + n, time=n)
            if result.status == "applied":
                self.acked.append((id1, 10_000 + n))
            time.sleep(0.002)

    def _read(self) -> None:
        rnd = random.Random(5)
        node, count = self.fixed
        while not self._stop.is_set():
            if self.acked:
                id1, id2 = rnd.choice(self.acked)
                if not self.graph.assoc_contains(id1, "follows", id2):
                    self.wrong.append(f"{id1} follows {id2} missing")
                if not self.graph.assoc_contains(id2, "followed_by", id1):
                    self.wrong.append(f"{id2} followed_by {id1} missing")
            if self.graph.assoc_count(node, "likes") != count:
                self.wrong.append(f"count of {node} likes")
            self.reads += 1


def fill(graph: Graph) -> tuple[int, int]:
    for n in range(1, 41):
        for k in range(n % 7 + 1):
            graph.assoc_add(n, "likes", 500 + k, time=k)
    graph.define_object("user")
    graph.define_index("by_name", "user", ["name"])
    for n in range(30):
        graph.obj_add("user", {"name": f"u{n}"}, id=1000 + n)
    return 7, graph.assoc_count(7, "likes")


def ready_to_move(graph: Graph) -> tuple[tuple[int, int], ShardMapBackend, Path, int]:
    """The graph `fill`ed, on its shard map with a new empty backend db4: what `fill`
    returns, the graph's backend, the map's path, and the shard of the fixed node."""
    fixed = fill(graph)
    backend = cluster(graph)
    path = backend.source
    assert path is not None
    add_backend(path, "db4")
    return fixed, backend, path, shard_of(fixed[0], graph.shards)


def copying_or_exited(mover: subprocess.Popen[bytes], path: Path) -> bool:
    return mover.poll() is not None or any(m.copied for m in load(path).moves)


def assert_final(graph: Graph, load: Load, shard: int) -> None:
    assert load.wrong == []
    assert load.reads > 0
    assert graph.drain(timeout=30)
    for id1, id2 in load.acked:  # nothing acknowledged is lost
        assert graph.assoc_contains(id1, "follows", id2)
        assert graph.assoc_contains(id2, "followed_by", id1)
    node, count = load.fixed
    for n in range(1, 41):
        assert graph.assoc_count(n, "likes") == (count if n == node else n % 7 + 1)
        mine = [id2 for id1, id2 in load.acked if id1 == n]
        assert graph.assoc_count(n, "follows") == len(mine)
    for n in range(30):  # objects and their index entries moved too
        assert graph.obj_get(1000 + n) is not None
        assert [o.id for o in graph.index_query("by_name", [f"u{n}"]).items] == [1000 + n]
    backend = cluster(graph)
    # A member a loaded machine made time out is marked down, and probed until it is
    # back: the checks below read every replica.
    wait_until(lambda: all(member.up for member in backend.status()))
    assert graph.check_counts() == []
    assert verify_replicas(backend).differences == []
    for replica in backend.map.replicas[shard]:
        assert backend.member(replica.backend).recount(shard, False) == []


def test_a_shard_moves_while_a_writer_and_a_reader_run(graph: Graph) -> None:
    fixed, backend, path, shard = ready_to_move(graph)
    old = [r.backend for r in load(path).replicas[shard]]
    with Load(graph, fixed) as running:
        seen: list[MoveProgress] = []
        result = move_shard(
            path, shard, "db4", move=True, remove=old[0], settle=SETTLE, progress=seen.append
        )
        wait_until(lambda: [r.backend for r in backend.map.replicas[shard]] == [old[1], "db4"])
        reads, writes = running.reads, len(running.acked)
        # some reads and writes on the new placement (a count of them, not a time)
        wait_until(lambda: running.reads >= reads + 20 and len(running.acked) >= writes + 20)
    assert result.copied > 0
    assert seen[-1].copied == result.copied
    assert seen[-1].rows_per_second > 0
    assert result.source == old[0]
    assert load(path).moves == []
    assert_final(graph, running, shard)
    again = move_shard(path, shard, "db4", move=True, remove=old[0], settle=SETTLE)
    assert again.already  # running it twice is harmless


def test_add_replica_then_drop_one(graph: Graph) -> None:
    fixed, backend, path, shard = ready_to_move(graph)
    with Load(graph, fixed) as running:
        move_shard(path, shard, "db4", weight=2, settle=SETTLE)
        wait_until(
            lambda: ("db4", 2) in [(r.backend, r.weight) for r in backend.map.replicas[shard]]
        )
        assert len(backend.map.replicas[shard]) == 3
        first = backend.map.replicas[shard][0].backend
        assert drop_replica(path, shard, first, settle=SETTLE)
        wait_until(lambda: first not in [r.backend for r in backend.map.replicas[shard]])
    assert_final(graph, running, shard)
    assert not drop_replica(path, shard, first, settle=0)  # already gone
    last = [r.backend for r in load(path).replicas[shard]]
    drop_replica(path, shard, last[0], settle=0.1)
    with pytest.raises(InvalidRequest, match="only readable replica"):
        drop_replica(path, shard, last[1], settle=0)


def test_bad_requests_are_refused(graph: Graph) -> None:
    path = cluster(graph).source
    assert path is not None
    before = Path(path).read_text()
    with pytest.raises(InvalidRequest, match="unknown backend 'db9'"):
        move_shard(path, 0, "db9", move=True)
    with pytest.raises(InvalidRequest, match="unknown backend 'db9'"):
        drop_replica(path, 0, "db9", settle=0)
    assert Path(path).read_text() == before  # nothing changed
    add_backend(path, "db4")
    with pytest.raises(InvalidRequest, match="say which one moves"):
        move_shard(path, 0, "db4", move=True)
    with pytest.raises(InvalidRequest, match="outside shards"):
        move_shard(path, 99, "db4")
    assert load(path).moves == []


def test_a_mover_killed_at_random_points_resumes_and_loses_nothing(graph: Graph) -> None:
    fixed = fill(graph)
    for n in range(600):  # enough rows that the throttled copy takes a few seconds
        graph.assoc_add(fixed[0], "likes", 100_000 + n, time=n)
    fixed = (fixed[0], graph.assoc_count(fixed[0], "likes"))
    backend = cluster(graph)
    path = backend.source
    assert path is not None
    add_backend(path, "db4")
    shard = shard_of(fixed[0], graph.shards)
    source = backend.map.replicas[shard][1].backend
    command = [sys.executable, "-m", "assocdb", "shards", "move", str(path), str(shard)]
    command += ["--to", "db4", "--from", source, "--rate", "150"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    rnd = random.Random(int(os.environ.get("ASSOCDB_TEST_SEED", "7")))
    kills = 0
    positions: list[int] = []  # rows the map said were copied, at each kill
    log_path = path.parent / "mover.log"
    log = log_path.open("wb")
    with Load(graph, fixed) as running, log:
        # Once as soon as the map says the copy is under way, then at random points.
        for attempt in range(rnd.randint(3, 5)):
            mover = subprocess.Popen(command, env=env, stdout=log, stderr=log)
            try:
                if attempt == 0:
                    # A safety net only: a busy machine is slow, the condition decides.
                    wait_until(partial(copying_or_exited, mover, path), patience=300)
                    assert mover.poll() in (None, 0), log_path.read_text(errors="replace")
                else:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        mover.wait(timeout=rnd.uniform(0.5, 5.0))
                if mover.poll() is not None:
                    break  # it finished first
            finally:
                if mover.poll() is None:
                    mover.send_signal(signal.SIGKILL)
                    mover.wait()
                    kills += 1
            positions += [m.copied for m in load(path).moves]
        finished = subprocess.run(command, env=env, capture_output=True, timeout=120, check=False)
        assert finished.returncode == 0, finished.stderr.decode()
        wait_until(lambda: source not in [r.backend for r in backend.map.replicas[shard]])
    assert kills >= 1
    assert any(positions), "no kill landed after the copy had begun"
    assert load(path).moves == []
    assert "db4" in [r.backend for r in load(path).replicas[shard]]
    assert_final(graph, running, shard)


def test_dropping_the_primary_leaves_a_new_primary_that_hands_out_no_id_twice(
    graph: Graph,
) -> None:
    """The replica promoted when the primary leaves had missed allocations (it failed
    meanwhile); its id counter must not hand those ids out again."""
    backend = cluster(graph)
    path = backend.source
    assert path is not None
    shard = 1
    primary, other = [r.backend for r in load(path).replicas[shard]]
    cure = fail(backend, other)
    handed = backend.allocate(shard, 10)  # from the primary; the other replica failed
    cure()
    assert drop_replica(path, shard, primary, settle=0)
    backend.reload()
    assert [r.backend for r in backend.map.replicas[shard]] == [other]
    assert backend.allocate(shard, 1) >= handed + 10


def test_a_move_leaves_no_replica_behind_on_ids(graph: Graph) -> None:
    backend = cluster(graph)
    path = backend.source
    assert path is not None
    add_backend(path, "db4")
    shard = 1
    primary, other = [r.backend for r in load(path).replicas[shard]]
    cure = fail(backend, other)
    handed = backend.allocate(shard, 10)
    cure()
    # db4 takes the primary's place; the other replica becomes the primary.
    move_shard(path, shard, "db4", move=True, remove=primary, settle=0)
    backend.reload()
    assert [r.backend for r in backend.map.replicas[shard]] == [other, "db4"]
    fail(backend, "db4")  # the new primary alone answers
    assert backend.allocate(shard, 1) >= handed + 10


def test_moving_a_shard_of_one_replica_again_does_nothing(make_map: MapMaker) -> None:  # noqa: F811
    """`assocdb shards move map 0-5 --to db4` run again after it finished (the docs: it
    does nothing) must not ask which replica moves: the only one is on db4 now."""
    path = make_map(replicas=1)
    add_backend(path, "db4")
    shard = 2
    assert not move_shard(path, shard, "db4", move=True, settle=0).already
    assert [r.backend for r in load(path).replicas[shard]] == ["db4"]
    assert move_shard(path, shard, "db4", move=True, settle=0).already


def test_a_move_to_a_broken_backend_is_rolled_back_cleanly(graph: Graph) -> None:
    """A copy that cannot be made (the new server is broken) holds up every write of its
    shard (a write-only replica that fails); cancelling it takes the copy out of the set
    and leaves the shard as it was."""
    fixed = fill(graph)
    backend = cluster(graph)
    path = backend.source
    assert path is not None
    (path.parent / "broken").write_text("a file, not a directory")
    smap = load(path)
    save(with_backend(smap, "db4", BackendConfig(path="broken/db4")), path)
    shard = shard_of(fixed[0], graph.shards)
    before = load(path).replicas[shard]
    with pytest.raises(Unavailable, match="db4"):
        move_shard(path, shard, "db4", move=True, remove=before[0].backend, settle=0)
    wait_until(lambda: "db4" in [r.backend for r in backend.map.replicas[shard]])
    assert graph.assoc_add(fixed[0], "likes", 9, time=1).status == "queued"
    with pytest.raises(InvalidRequest, match="under way"):
        drop_replica(path, shard, "db4", settle=0)
    assert cancel_move(path, shard, "db4")
    assert load(path).moves == []
    assert load(path).replicas[shard] == before
    assert not cancel_move(path, shard, "db4")  # nothing left to cancel
    with pytest.raises(InvalidRequest, match="no backend 'db9'"):
        cancel_move(path, shard, "db9")
    wait_until(lambda: backend.map.replicas[shard] == before)
    assert graph.drain(timeout=30)
    assert graph.assoc_add(fixed[0], "likes", 10, time=2).status == "applied"
    assert graph.assoc_count(fixed[0], "likes") == fixed[1] + 2
    assert verify_replicas(backend).differences == []
    data = load(path).as_dict()  # db4 leaves the map (it is no server to clean up)
    del data["backends"]["db4"]
    save(from_dict(data, base=str(path.parent)), path)


def test_a_copy_resumed_in_an_index_dropped_meanwhile_copies_every_row(graph: Graph) -> None:
    """The copy's position names a table that no longer exists (its index was dropped
    while the mover was stopped): the copy starts over, not from that table's key."""
    _, backend, path, shard = ready_to_move(graph)
    after = msgspec.msgpack.encode([b"u1", 1001]).hex()
    record = MoveRecord(shard, "db4", "copying", None, 1, "index_99", after, 10)
    smap = with_replica(load(path), shard, "db4", 0)
    save(with_moves(smap, [record]), path)
    move_shard(path, shard, "db4", settle=0)
    backend.reload()
    assert verify_replicas(backend, [shard]).differences == []
    member = backend.member("db4")
    assert member.count_rows(shard, "edges") == backend.member(
        load(path).replicas[shard][0].backend
    ).count_rows(shard, "edges")


def test_a_copy_onto_a_drained_backend_is_refused(graph: Graph) -> None:
    """A drained backend takes no writes: as a write-only copy it would fail every write
    of the shard (all queued) for the whole copy, and its verify could never pass."""
    backend = cluster(graph)
    path = backend.source
    assert path is not None
    add_backend(path, "db4")
    save(with_down(load(path), "db4", True), path)
    before = path.read_text()
    with pytest.raises(InvalidRequest, match="db4 is marked down"):
        move_shard(path, 1, "db4", weight=1, settle=0)
    assert path.read_text() == before


def test_a_move_finishes_when_a_backend_setting_changes_meanwhile(graph: Graph) -> None:
    """An operator changes a timeout in the map while a shard moves: the change waits for
    a reopen, and the move goes on (it used to stop at its verify, refusing the map)."""
    _, _, path, shard = ready_to_move(graph)
    old = [r.backend for r in load(path).replicas[shard]]

    def change_a_timeout(progress: MoveProgress) -> None:
        data = load(path).as_dict()
        data["backends"]["db3"]["query_timeout"] = 0.3
        save(from_dict(data, base=str(path.parent)), path)

    move_shard(path, shard, "db4", move=True, remove=old[0], settle=0, progress=change_a_timeout)
    assert [r.backend for r in load(path).replicas[shard]] == [old[1], "db4"]
    assert load(path).moves == []


def test_an_operator_edit_while_ids_are_levelled_is_kept(
    graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A move's last step and drop-replica level the replicas' id counters (a round trip
    to each) between reading the map and writing it back: an operator's edit made then
    (another drain, a weight) used to be overwritten by the map read before it."""
    backend = cluster(graph)
    path = backend.source
    assert path is not None
    add_backend(path, "db4")
    real = moves.level_ids
    edits = iter(["db2", "db3"])

    def level_ids_meanwhile(*args: Any) -> None:
        real(*args)
        name = next(edits)
        assert main.main(["shards", "mark-down", str(path), name], standalone_mode=False) is None

    monkeypatch.setattr(moves, "level_ids", level_ids_meanwhile)
    primary = load(path).replicas[0][0].backend  # db1; shard 0 is on db1 and db2
    move_shard(path, 0, "db4", move=True, remove=primary, settle=0)
    assert load(path).backends["db2"].down
    assert [r.backend for r in load(path).replicas[0]] == ["db2", "db4"]
    assert drop_replica(path, 1, "db2", settle=0)  # shard 1: db2 and db3
    assert load(path).backends["db3"].down
    assert [r.backend for r in load(path).replicas[1]] == ["db3"]


def test_a_mover_whose_copy_is_cancelled_meanwhile_stops_at_its_next_save(graph: Graph) -> None:
    """`assocdb shards cancel` run while the mover still copies (the operator forgot to
    stop it): the cancel holds, and the mover stops saying so at its next save of the
    map, instead of copying and verifying on and failing with a puzzle at the end."""
    _, _, path, shard = ready_to_move(graph)
    before = load(path).replicas[shard]
    phases: list[str] = []

    def cancel_once(progress: MoveProgress) -> None:
        if not phases:
            assert cancel_move(path, shard, "db4")
        phases.append(progress.phase)

    with pytest.raises(InvalidRequest, match="no longer recorded"):
        move_shard(path, shard, "db4", move=True, remove=before[0].backend, settle=0,
                   page=5, progress=cancel_once)  # fmt: skip
    assert load(path).moves == []
    assert load(path).replicas[shard] == before


def test_a_second_mover_of_one_copy_is_refused_while_the_first_runs(graph: Graph) -> None:
    """Two `assocdb shards move` of the same copy (an operator who ran it twice): the
    second is refused at once and changes nothing; before, both copied, verified and
    moved the operation's phases on. Once the first is done, running it again is the
    no-op it always was."""
    _, _, path, shard = ready_to_move(graph)
    source = load(path).replicas[shard][0].backend
    refused: list[str] = []

    def run_a_second_mover(progress: MoveProgress) -> None:
        if not refused:
            with pytest.raises(InvalidRequest, match="another process is making") as caught:
                move_shard(path, shard, "db4", move=True, remove=source, settle=0)
            refused.append(str(caught.value))

    first = move_shard(path, shard, "db4", move=True, remove=source, settle=0, page=5,
                       progress=run_a_second_mover)  # fmt: skip
    assert refused
    assert first.copied > 0
    assert not first.already
    after = [r.backend for r in load(path).replicas[shard]]
    assert "db4" in after
    assert source not in after
    assert load(path).moves == []
    again = move_shard(path, shard, "db4", move=True, remove=source, settle=0)
    assert again.already


def test_a_move_off_a_drained_backend_copies_from_another_replica_and_finishes(
    graph: Graph,
) -> None:
    """The operator drains a backend (`mark-down`: no reads or writes go to it), then moves
    its shards off it. The copy must not be read from it (it misses the writes made since,
    and was drained for a reason), and the move must finish: it used to copy from it
    and then stop at its verify for good ("db1 is down or drained"), the shard's writes
    queued all along."""
    fixed, backend, path, shard = ready_to_move(graph)
    drained, other = [r.backend for r in load(path).replicas[shard]]
    row = backend.member(drained).export_table(shard, "edges", None, 1)[0]
    phantom = (row[0], row[1], 999_999_999, row[3], row[4], row[5], row[6])
    backend.member(drained).bulk_merge(shard, [phantom])  # a row only the drained copy has
    save(with_down(load(path), drained, True), path)
    wait_until(lambda: backend.map.backends[drained].down)
    assert graph.assoc_add(fixed[0], "likes", 4242, time=5).status == "queued"
    move_shard(path, shard, "db4", move=True, remove=drained, settle=SETTLE)
    assert [r.backend for r in load(path).replicas[shard]] == [other, "db4"]
    assert load(path).moves == []
    assert backend.member("db4").edges_at(shard, [phantom[:3]]) == []
    wait_until(lambda: [r.backend for r in backend.map.replicas[shard]] == [other, "db4"])
    assert graph.drain(timeout=30)
    assert graph.assoc_contains(fixed[0], "likes", 4242)
    assert verify_replicas(backend, [shard]).differences == []


def test_a_move_whose_only_readable_copy_is_drained_is_refused(make_map: MapMaker) -> None:  # noqa: F811
    path = make_map(replicas=1)
    add_backend(path, "db4")
    save(with_down(load(path), "db3", True), path)  # shard 2 is on db3 alone
    before = path.read_text()
    with pytest.raises(InvalidRequest, match=r"shard 2: no replica to copy from.*db3"):
        move_shard(path, 2, "db4", move=True, settle=0)
    assert path.read_text() == before


def test_an_operation_is_resumed_only_by_the_command_that_started_it(graph: Graph) -> None:
    """An interrupted `shards move 4 --to db4 --from db2`, then `shards add-replica 4 --on
    db4`: the add-replica used to resume the move and take db2 out of the shard's
    replicas; the other way round, a move resumed an added replica and removed nothing."""
    backend = cluster(graph)
    path = backend.source
    assert path is not None
    add_backend(path, "db4")
    smap = with_replica(load(path), 4, "db4", 0)  # shard 4: db2 and db3
    moving = MoveRecord(4, "db4", "write-only", "db2")
    adding = MoveRecord(5, "db4", "write-only")  # shard 5: db3 and db1
    save(with_moves(with_replica(smap, 5, "db4", 0), [moving, adding]), path)
    before = path.read_text()
    with pytest.raises(InvalidRequest, match="a move of shard 4 from db2 to db4 is under way"):
        move_shard(path, 4, "db4", settle=0)
    with pytest.raises(InvalidRequest, match="a move of shard 4 from db2 to db4 is under way"):
        move_shard(path, 4, "db4", move=True, remove="db3", settle=0)
    with pytest.raises(InvalidRequest, match="an added replica of shard 5 on db4 is under way"):
        move_shard(path, 5, "db4", move=True, remove="db3", settle=0)
    assert path.read_text() == before
    assert move_shard(path, 4, "db4", move=True, settle=0).source == "db2"  # resumed
    assert move_shard(path, 5, "db4", settle=0).source is None
    assert [r.backend for r in load(path).replicas[4]] == ["db3", "db4"]
    assert [r.backend for r in load(path).replicas[5]] == ["db3", "db1", "db4"]
    assert load(path).moves == []


def test_a_move_whose_source_was_dropped_meanwhile_finishes(graph: Graph) -> None:
    """`drop-replica` of the replica a move removes, started just before the move (its
    check saw no move under way) and finished during it: the move used to stop at going
    live for good ("holds no replica"), and only a cancel got the shard out of it."""
    backend = cluster(graph)
    path = backend.source
    assert path is not None
    add_backend(path, "db4")
    shard = 4  # on db2 and db3
    smap = with_replica(load(path), shard, "db4", 0)
    smap = without_replica(smap, shard, "db2")  # the drop's last step, during the move
    save(with_moves(smap, [MoveRecord(shard, "db4", "verifying", "db2")]), path)
    move_shard(path, shard, "db4", move=True, settle=0)
    assert [r.backend for r in load(path).replicas[shard]] == ["db3", "db4"]
    assert load(path).moves == []


def test_a_copy_whose_backend_is_drained_meanwhile_does_not_go_live(graph: Graph) -> None:
    """Drained replicas are left out of a mover's verify, but never the copy itself: one
    drained during the copy would go live unverified."""
    backend = cluster(graph)
    path = backend.source
    assert path is not None
    add_backend(path, "db4")
    shard = 4  # on db2 and db3
    smap = with_replica(load(path), shard, "db4", 0)
    save(with_down(with_moves(smap, [MoveRecord(shard, "db4", "verifying")]), "db4", True), path)
    with pytest.raises(Unavailable, match=r"db4.*drained"):
        move_shard(path, shard, "db4", settle=0)
    assert [m.phase for m in load(path).moves] == ["verifying"]
    assert ("db4", 0) in [(r.backend, r.weight) for r in load(path).replicas[shard]]
