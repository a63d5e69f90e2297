"""Incremental backups (`api/incremental.py`): a backup seeded from an earlier one and
caught up through the change feed equals a fresh backup, and stands on its own."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

import assocdb
from assocdb.core.ids import shard_of
from tests.api.test_backup import Stop, stored
from tests.api.test_backup_resume_servers import (
    change_every_shard,
    contents,
    stop_halfway,
    write_some,
)
from tests.support.stores import Stores


def open_with_feed(stores: Stores, name: str = "source") -> assocdb.Graph:
    g = stores.open(name, shards=8)
    g.define_assoc("follows", inverse="followed_by")
    g.define_object("user")
    g.enable_feed()
    return g


def test_an_incremental_backup_equals_a_fresh_one_and_needs_nothing_of_its_base(
    stores: Stores, tmp_path: Path
) -> None:
    g = open_with_feed(stores)
    write_some(g, 1, 400)
    base = assocdb.backup(g, tmp_path / "base")
    change_every_shard(g)
    made = assocdb.backup(g, tmp_path / "inc", since=tmp_path / "base")
    assocdb.backup(g, tmp_path / "fresh")
    assert made.since == base.cut_at
    assert made.caught_up == 8  # every shard: nothing copied from the source
    assert contents(tmp_path / "inc") == contents(tmp_path / "fresh")
    check = assocdb.verify_backup(tmp_path / "inc")
    assert check.ok, (check.counts[:3], check.hanging[:3])

    # Restored (and rolled forward past a later write) without its base.
    g.assoc_add(7777, "follows", 5001)
    assert g.drain(30)
    upto = time.time_ns() // 1000
    shutil.rmtree(tmp_path / "base")
    done = assocdb.restore(tmp_path / "inc", tmp_path / "r", to=upto)
    assert done.rolled_forward >= 2  # (both legs)
    with assocdb.open(tmp_path / "r") as r:
        assert r.assoc_count(5001, "followed_by") == g.assoc_count(5001, "followed_by")
        assert r.check_inverses() == []


def test_a_feed_trimmed_past_the_base_copies_every_shard_whole(
    stores: Stores, tmp_path: Path
) -> None:
    g = open_with_feed(stores)
    write_some(g, 1, 400)
    assocdb.backup(g, tmp_path / "base")
    change_every_shard(g)
    g.services.feed.trim(seconds=0, rows=0)
    made = assocdb.backup(g, tmp_path / "inc", since=tmp_path / "base")
    assocdb.backup(g, tmp_path / "fresh")
    assert made.caught_up == 0
    assert contents(tmp_path / "inc") == contents(tmp_path / "fresh")
    assert assocdb.verify_backup(tmp_path / "inc").ok


def _manifest(root: Path) -> dict[str, object]:
    body: dict[str, object] = json.loads((root / "manifest.json").read_bytes())
    return body


def test_a_base_that_cannot_seed_the_backup_is_one_clear_error(
    stores: Stores, tmp_path: Path
) -> None:
    g = open_with_feed(stores)
    write_some(g, 1, 50)
    assocdb.backup(g, tmp_path / "base")
    other = open_with_feed(stores, "other")
    other.assoc_add(1, "follows", 2)
    assocdb.backup(other, tmp_path / "of-other")
    unfed = stores.open("unfed", shards=8)
    unfed.define_assoc("follows", inverse="followed_by")
    unfed.assoc_add(1, "follows", 2)
    assocdb.backup(unfed, tmp_path / "unfed-base")
    unfed.enable_feed()

    newer = tmp_path / "newer"
    shutil.copytree(tmp_path / "base", newer)
    (newer / "manifest.json").write_text(json.dumps({**_manifest(newer), "format": 99}))
    garbled = tmp_path / "garbled"
    shutil.copytree(tmp_path / "base", garbled)
    (garbled / "manifest.json").write_bytes(b'{"format": 1, "shards": ')
    damaged = tmp_path / "damaged"
    shutil.copytree(tmp_path / "base", damaged)
    with (damaged / "shard-0003.db").open("r+b") as f:
        f.seek(200)
        f.write(b"\xff" * 8)
    before = g.assoc_count(5001, "followed_by")
    for graph, since, message in [
        (g, tmp_path / "of-other", "is a backup of another graph"),
        (g, newer, "newer than this assocdb reads"),
        (g, garbled, "is damaged"),
        (g, damaged, "shard-0003.db does not match its checksum"),
        (g, tmp_path / "nothing", "no backup at"),
        (unfed, tmp_path / "unfed-base", "taken with the change feed off"),
    ]:
        with pytest.raises(assocdb.AssocdbError, match=message):
            assocdb.backup(graph, tmp_path / "inc", since=since)
        assert not (tmp_path / "inc").exists(), message
    assert g.assoc_count(5001, "followed_by") == before


def half_apply(g: assocdb.Graph, id1: int, id2: int) -> None:
    """A follows edge without its inverse: what another process's job leaves when it
    stops between its legs (its journal is not the backing-up process's)."""
    follows = g.schema.assoc_type("follows").id
    now = time.time_ns() // 1000
    shard = shard_of(id1, g.engine.shards)
    g.engine.backend.apply(shard, [(id1, follows, id2, 0, now // 1000, now, None)], [], [])


@pytest.mark.parametrize("backend_kind", ["mysql", "postgres"])
def test_pairs_left_half_applied_are_completed_in_an_incremental_backup(
    stores: Stores, tmp_path: Path
) -> None:
    g = open_with_feed(stores)
    write_some(g, 1, 100)
    half_apply(g, 9001, 9002)  # before the base: completed in the base
    assocdb.backup(g, tmp_path / "base")
    change_every_shard(g)
    half_apply(g, 9003, 9004)  # since: only the edges the feed changed are checked
    made = assocdb.backup(g, tmp_path / "inc", since=tmp_path / "base")
    assert made.caught_up == 8
    check = assocdb.verify_backup(tmp_path / "inc")
    assert check.ok, check.hanging[:3]
    followed_by = g.schema.assoc_type("followed_by").id
    assert {(9002, 9001), (9004, 9003)} <= stored(tmp_path / "inc", followed_by).keys()


def test_a_stopped_incremental_backup_resumes_with_the_same_command(
    stores: Stores, tmp_path: Path
) -> None:
    g = open_with_feed(stores)
    write_some(g, 1, 400)
    base = assocdb.backup(g, tmp_path / "base")
    change_every_shard(g)
    g.services.feed.trim(seconds=0, rows=0)  # (so that shards are copied: a stop there)
    with pytest.raises(Stop):
        assocdb.backup(g, tmp_path / "inc", since=tmp_path / "base", progress=stop_halfway)
    write_some(g, 2000, 30)
    made = assocdb.backup(g, tmp_path / "inc", since=tmp_path / "base")
    assocdb.backup(g, tmp_path / "fresh")
    assert made.since == base.cut_at
    assert contents(tmp_path / "inc") == contents(tmp_path / "fresh")
    assert assocdb.verify_backup(tmp_path / "inc").ok
