"""Reclaiming old copies (`storage.reclaim`) on MariaDB servers: what no map names is
emptied on request; what the map places or a recorded move names never is."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from assocdb import Graph, InvalidRequest
from assocdb.cli.main import main
from assocdb.storage.moves import move_shard
from assocdb.storage.reclaim import named, reclaim
from assocdb.storage.replica_verify import verify_replicas
from assocdb.storage.shardmap_config import MoveRecord, load, update, with_moves
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
    yield g, path, 0, old
    g.close()


def rows_of(g: Graph, backend: str, shard: int) -> int:
    return cluster(g).member(backend).count_rows(shard, "edges")


@pytest.mark.parametrize("make_map", ["mysql"], indirect=True)
def test_an_old_copy_is_listed_then_emptied_and_named_copies_never(
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
    done = reclaim(path, drop=True, settle=0)
    assert done.dropped
    assert rows_of(g, old, shard) == 0
    assert reclaim(path, settle=0).copies == []
    backend = cluster(g)
    backend.reload()  # (settle=0 above did not wait for this process to take the map)
    assert verify_replicas(backend).differences == []  # every copy the map names is whole
    assert g.check_counts() == []


@pytest.mark.parametrize("make_map", ["mysql"], indirect=True)
def test_a_copy_a_recorded_move_names_is_never_reclaimed(
    moved: tuple[Graph, Path, int, str],
) -> None:
    """A move recorded in the map (here: one whose source was dropped meanwhile, at its
    last phase) still names its source: that copy is neither listed nor emptied."""
    g, path, shard, old = moved
    record = MoveRecord(shard, "db4", "live", source=old, weight=1)
    update(path, lambda smap: with_moves(smap, [*smap.moves, record]))
    found = reclaim(path, drop=True, settle=0)
    assert (old, shard) not in [(c.backend, c.shard) for c in found.copies]
    assert rows_of(g, old, shard) > 0


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
