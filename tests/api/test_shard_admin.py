"""The console's view of the shards and its actions (`api/shard_admin.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

import assocdb
from assocdb import InvalidRequest
from assocdb.api.shard_admin import ShardAdmin
from assocdb.storage import shardmap_config
from tests.support.helpers import wait_until
from tests.support.shardmaps import write_map


def test_a_shard_map_shows_members_replicas_and_read_shares(tmp_path: Path) -> None:
    path = write_map(tmp_path, shards=3, members=("a", "b", "c"), replicas=2)
    with assocdb.open(path) as g:
        admin = ShardAdmin(g.engine)
        view = admin.view()
        assert (view.kind, view.shards, view.engines, view.source) == (
            "shard map",
            3,
            ["sqlite"],
            str(path),
        )
        assert [(m.name, m.state, m.shards) for m in view.members] == [
            ("a", "up", "0,2"),
            ("b", "up", "0-1"),
            ("c", "up", "1-2"),
        ]
        shard0 = view.rows[0].replicas
        assert [(r.backend, r.weight, r.read_share) for r in shard0] == [
            ("a", 1, 0.5),
            ("b", 1, 0.5),
        ]

        admin.set_weight("0", "b", 3)
        shard0 = admin.view().rows[0].replicas
        assert [(r.backend, r.weight, r.read_share) for r in shard0] == [
            ("a", 1, 0.25),
            ("b", 3, 0.75),
        ]
        admin.mark("b", down=True)  # in this process at once, and in the file for the others
        view = admin.view()
        assert next(m.state for m in view.members if m.name == "b") == "drained"
        assert [(r.backend, r.read_share) for r in view.rows[0].replicas] == [
            ("a", 1.0),
            ("b", 0.0),
        ]
        assert shardmap_config.load(path).backends["b"].down
        admin.mark("b", down=False)
        assert not shardmap_config.load(path).backends["b"].down
        wait_until(lambda: all(m.state == "up" for m in admin.view().members), 10)  # a probe passed


def test_bad_actions_are_refused_and_change_nothing(tmp_path: Path) -> None:
    path = write_map(tmp_path, shards=3, members=("a", "b", "c"), replicas=2)
    before = path.read_text()
    with assocdb.open(path) as g:
        admin = ShardAdmin(g.engine)
        with pytest.raises(InvalidRequest, match="unknown backend"):
            admin.mark("zz", down=True)
        with pytest.raises(InvalidRequest, match="no replica of shard 1"):
            admin.set_weight("1", "a", 2)
        with pytest.raises(InvalidRequest, match="weight"):
            admin.set_weight("0", "a", -1)
        with pytest.raises(InvalidRequest):
            admin.set_weight("0-9", "a", 2)  # past the last shard
    assert path.read_text() == before


def test_a_plain_graph_shows_its_shards_and_refuses_changes(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "g", shards=4) as g:
        admin = ShardAdmin(g.engine)
        view = admin.view()
        assert (view.kind, view.shards, view.members, len(view.rows)) == ("sqlite", 4, [], 4)
        assert view.where == str(tmp_path / "g")
        with pytest.raises(InvalidRequest, match="no shard map"):
            admin.mark("a", down=True)


def test_the_view_shows_copies_under_way_and_the_last_verify(tmp_path: Path) -> None:
    path = write_map(tmp_path, shards=3, members=("a", "b", "c"), replicas=2)
    with assocdb.open(path) as g:
        admin = ShardAdmin(g.engine)
        assert admin.view().moves == []
        assert admin.view().verify is None
        g.define_assoc("likes")
        g.assoc_add(1, "likes", 2)
        report = g.verify_replicas()
        verified = admin.view().verify
        assert verified is not None
        assert (verified.shards, verified.rows, verified.differences) == (
            3,
            report.rows,
            0,
        )
        assert not verified.repaired
        move = shardmap_config.MoveRecord(1, "a", "copying", source="b", table="edges", copied=42)
        smap = shardmap_config.with_replica(shardmap_config.load(path), 1, "a", 0)  # the copy
        shardmap_config.save(shardmap_config.with_moves(smap, [move]), path)
        g.engine.backend.reload()  # type: ignore[attr-defined]
        [row] = admin.view().moves
        assert (row.shard, row.target, row.source, row.phase, row.table, row.copied) == (
            1,
            "a",
            "b",
            "copying",
            "edges",
            42,
        )
