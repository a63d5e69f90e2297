"""Backups of a graph on a shard map of several MariaDB servers (`storage/servercut.py`):
one cut across the servers under eight writers."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import assocdb
from tests.api.test_backup import NORMAL, Writers, model_at, stored, type_ids
from tests.storage.test_shardmap import (  # noqa: F401 (make_map is a fixture)
    SERVERS,
    MapMaker,
    make_map,
    open_cluster,
)

pytestmark = pytest.mark.skipif(not SERVERS, reason="ASSOCDB_TEST_MYSQL_URLS is not set")


@pytest.mark.parametrize("make_map", ["mysql"], indirect=True)
def test_eight_writers_through_a_backup_of_three_servers(
    make_map: MapMaker,  # noqa: F811
    tmp_path: Path,
) -> None:
    g = open_cluster(make_map, cache=None)
    follows, followed_by = type_ids(g)
    with Writers(g, stamped=False) as writers:
        writers.wait_for(200)
        manifest = assocdb.backup(g, tmp_path / "backup")
        writers.wait_for(200)
    writes = list(writers.writes())
    g.close()
    assert manifest.source["kind"] == "shardmap"
    assert manifest.positions == [None] * manifest.shards  # (its feed is off)

    backed = stored(tmp_path / "backup", follows)
    for key in {w.key for w in writes}:
        mine = [w for w in writes if w.key == key]
        before = [w for w in mine if w.acked < manifest.cut_began]
        around = [w for w in mine if w.acked >= manifest.cut_began and w.began <= manifest.cut_at]
        allowed = {(w.state, w.updated_at) for w in before[-1:] + around}
        if before:
            assert backed.get(key) in allowed, key
        elif not around:
            assert key not in backed, key
    check = assocdb.verify_backup(tmp_path / "backup")
    assert check.ok, (check.counts[:3], check.hanging[:3])
    inverse = {(b, a): row for (a, b), row in stored(tmp_path / "backup", followed_by).items()}
    assert inverse == backed
    assert any(state == NORMAL for state, _ in backed.values())
    with pytest.raises(assocdb.InvalidRequest, match="change feed was off"):
        assocdb.restore(tmp_path / "backup", tmp_path / "r", to=manifest.cut_at + 1)


@pytest.mark.parametrize("make_map", ["mysql"], indirect=True)
def test_a_backup_of_three_servers_restores_to_five_points_in_time_after_a_lost_primary(
    make_map: MapMaker,  # noqa: F811
    tmp_path: Path,
) -> None:
    g = open_cluster(make_map, cache=None)
    g.enable_feed()
    follows, followed_by = type_ids(g)
    backend = g.engine.backend.replicated()
    assert backend is not None
    with Writers(g, stamped=False) as writers:
        writers.wait_for(200)
        manifest = assocdb.backup(g, tmp_path / "backup")
        writers.wait_for(300)
    assert g.drain(60)
    backend.change_feed().align()  # (checkpoints up to the last write: fewer to replay)
    writes = list(writers.writes())
    g.close()
    assert all(p is not None for p in manifest.positions)

    # db1, the primary of a third of the shards, is lost: the history after the cut is
    # read from the other replica of each of its shards.
    source = Path(manifest.source["path"])
    source.write_text(
        source.read_text().replace("[backends.db1]\n", "[backends.db1]\ndown = true\n")
    )
    rng = random.Random(40)
    last = max(w.updated_at for w in writes)
    points = sorted(rng.randrange(manifest.cut_at, last + 1) for _ in range(5))
    for n, upto in enumerate([*points, last]):
        dest = tmp_path / f"restored{n}"
        assocdb.restore(tmp_path / "backup", dest, to=upto)
        rows = stored(dest, follows)
        assert rows == model_at(writes, upto), upto
        inverse = {(b, a): row for (a, b), row in stored(dest, followed_by).items()}
        assert inverse == rows
        r = assocdb.open(dest)
        try:
            assert r.check_counts() == []
        finally:
            r.close()
