"""Reclaiming old copies (`storage.reclaim`) on MariaDB servers: the schema of every copy
no map names is dropped on request (no orphan schema is left); what the map places or a
recorded move names never is; a copy made again where one was dropped is whole."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from assocdb import Graph, InvalidRequest
from assocdb.cli.main import main
from assocdb.storage.moves import move_shard
from assocdb.storage.mysql import MySQLBackend
from assocdb.storage.reclaim import named, reclaim
from assocdb.storage.replica_verify import verify_replicas
from assocdb.storage.shardmap_config import MoveRecord, load, update, with_moves, with_replica
from tests.storage.test_moves import add_backend, fill
from tests.storage.test_shardmap import (  # noqa: F401 (make_map is a fixture)
    SERVERS,
    MapMaker,
    cluster,
    make_map,
    open_cluster,
)

pytestmark = pytest.mark.skipif(not SERVERS, reason="ASSOCDB_TEST_MYSQL_URLS is not set")


@pytest.fixture
def moved(make_map: MapMaker) -> Iterator[tuple[Graph, Path, int, str]]:  # noqa: F811
    """A graph whose shard 0 moved from its first replica to a new backend db4: the
    graph, the map, the shard, and the backend holding the old copy."""
    g = open_cluster(make_map, cache=None)
    fill(g)
    path = cluster(g).source
    assert path is not None
    add_backend(path, "db4")
    old = load(path).replicas[0][0].backend
    move_shard(path, 0, "db4", move=True, remove=old, settle=0)
    cluster(g).reload()  # the graph knows db4 now, not once its reload thread looks
    yield g, path, 0, old
    g.close()


def rows_of(g: Graph, backend: str, shard: int) -> int:
    """The shard's edges on `backend` (-1: it holds no schema for the shard)."""
    member = cluster(g).member(backend)
    assert isinstance(member, MySQLBackend)
    if shard not in member.held_shards():
        return -1
    return member.count_rows(shard, "edges")


def orphans(path: Path, g: Graph) -> dict[str, list[int]]:
    """Per backend, the shard schemas it holds that the map does not name."""
    smap = load(path)
    found: dict[str, list[int]] = {}
    for name in smap.backends:
        member = cluster(g).member(name)
        assert isinstance(member, MySQLBackend)
        extra = [s for s in member.held_shards() if not named(smap, s, name)]
        if extra:
            found[name] = extra
    return found


@pytest.mark.parametrize("make_map", ["mysql"], indirect=True)
def test_an_old_copy_is_listed_then_dropped_and_named_copies_never(
    moved: tuple[Graph, Path, int, str],
) -> None:
    g, path, shard, old = moved
    assert rows_of(g, old, shard) > 0
    found = reclaim(path)  # a dry run
    assert (old, shard) in [(c.backend, c.shard) for c in found.copies]
    smap = load(path)
    assert not any(named(smap, c.shard, c.backend) for c in found.copies)
    assert not found.dropped
    assert rows_of(g, old, shard) > 0  # a dry run changes nothing
    with pytest.raises(InvalidRequest, match="changed"):  # less than an hour ago
        reclaim(path, drop=True, settle=3600)
    assert rows_of(g, old, shard) > 0
    assert orphans(path, g)  # the old copy, and the empty schemas each server was made with
    done = reclaim(path, drop=True, settle=0)
    assert done.dropped
    assert rows_of(g, old, shard) == -1  # its schema is gone
    assert orphans(path, g) == {}  # every server keeps only the schemas the map names
    assert reclaim(path, settle=0).copies == []
    backend = cluster(g)
    backend.reload()  # (settle=0 above did not wait for this process to take the map)
    assert verify_replicas(backend).differences == []  # every copy the map names is whole
    assert g.check_counts() == []


@pytest.mark.parametrize("make_map", ["mysql"], indirect=True)
@pytest.mark.parametrize("phase", ["write-only", "copying", "verifying", "live"])
def test_a_copy_a_recorded_move_names_is_never_reclaimed(
    moved: tuple[Graph, Path, int, str], phase: str
) -> None:
    """A move recorded in the map, pending or under way, names its source (here out of
    the replica set already, as after a drop-replica) and its target (in the set with
    weight 0, possibly still empty): neither copy is listed nor dropped."""
    g, path, shard, old = moved
    placed = [r.backend for r in load(path).replicas[shard]]
    target = next(n for n in load(path).backends if n != old and n not in placed)
    assert rows_of(g, target, shard) == 0  # the empty schema its graph was made with
    record = MoveRecord(shard, target, phase, source=old, weight=1)
    # A recorded copy is in the replica set (weight 0 until it is live), as a move adds it.
    update(
        path,
        lambda smap: with_moves(with_replica(smap, shard, target, 0), [*smap.moves, record]),
    )
    found = reclaim(path, drop=True, settle=0)
    listed = [(c.backend, c.shard) for c in found.copies]
    assert (old, shard) not in listed
    assert (target, shard) not in listed
    assert rows_of(g, old, shard) > 0
    assert rows_of(g, target, shard) == 0


@pytest.mark.parametrize("make_map", ["mysql"], indirect=True)
def test_a_copy_made_again_where_one_was_reclaimed_is_whole(
    moved: tuple[Graph, Path, int, str],
) -> None:
    """The shard moves back to the server whose copy (schema) was dropped: the move makes
    the schema again before the copy joins, the copy ends verified, and ids allocated
    after it are new (its id counter was raised to the source's)."""
    g, path, shard, old = moved
    allocated = cluster(g).allocate(shard, 5)
    reclaim(path, drop=True, settle=0)
    assert rows_of(g, old, shard) == -1
    result = move_shard(path, shard, old, move=True, remove="db4", settle=0)
    assert result.differences == 0
    assert rows_of(g, old, shard) > 0
    backend = cluster(g)
    backend.reload()
    names = [r.backend for r in load(path).replicas[shard]]
    assert old in names
    assert "db4" not in names
    assert backend.allocate(shard, 1) >= allocated + 5
    assert verify_replicas(backend).differences == []
    assert g.check_counts() == []


@pytest.mark.parametrize("make_map", ["mysql"], indirect=True)
def test_the_command_is_a_dry_run_unless_told(
    moved: tuple[Graph, Path, int, str], capsys: pytest.CaptureFixture[str]
) -> None:
    g, path, shard, old = moved
    main.main(["shards", "reclaim", str(path)], standalone_mode=False)
    out = capsys.readouterr().out
    assert f"{old}" in out
    assert "a dry run" in out or "the map changed recently" in out
    assert rows_of(g, old, shard) > 0
