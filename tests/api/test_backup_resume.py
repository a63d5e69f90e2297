"""Resuming a stopped backup (`api/backup.py`) when the stop left something behind: a
torn journal copy, or a feed trimmed past the position a copied shard was taken at."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import assocdb
from assocdb.core.errors import InvalidRequest
from tests.api.test_backup import Stop, open_source, stored, type_ids


def stop_halfway(done: int, total: int) -> None:
    if done > total // 2:
        raise Stop


def test_a_journal_copy_torn_by_a_stop_does_not_block_the_rerun(tmp_path: Path) -> None:
    g = open_source(tmp_path)
    for i in range(1, 400):
        g.assoc_add(i, "follows", 5000 + i % 13)
    with pytest.raises(Stop):
        assocdb.backup(g, tmp_path / "backup", progress=stop_halfway)
    # What a copy of the journal stopped part way (a full disk, Ctrl-C) leaves.
    torn = (tmp_path / "graph" / "journal.db").read_bytes()[:3000]
    (tmp_path / "backup" / "journal.db").write_bytes(torn)
    g.assoc_add(401, "follows", 5001)
    assocdb.backup(g, tmp_path / "backup")
    follows, _ = type_ids(g)
    assert stored(tmp_path / "backup", follows) == stored(tmp_path / "graph", follows)
    g.close()
    assert assocdb.verify_backup(tmp_path / "backup").ok


def test_a_feed_trimmed_past_the_stopped_cut_copies_the_shard_again(tmp_path: Path) -> None:
    g = open_source(tmp_path)
    for i in range(1, 400):
        g.assoc_add(i, "follows", 5000 + i % 13)
    with pytest.raises(Stop):
        assocdb.backup(g, tmp_path / "backup", progress=stop_halfway)
    # Changes on every shard after the first cut, then the feed trimmed past them: the
    # shards copied then cannot be caught up from the feed.
    for i in range(1, 400, 3):
        g.assoc_delete(i, "follows", 5000 + i % 13)
    assert g.drain(30)
    g.services.feed.trim(seconds=0, rows=0)
    manifest = assocdb.backup(g, tmp_path / "backup")
    follows, followed_by = type_ids(g)
    assert stored(tmp_path / "backup", follows) == stored(tmp_path / "graph", follows)
    assert stored(tmp_path / "backup", followed_by) == stored(tmp_path / "graph", followed_by)
    assert manifest.caught_up == 0
    g.close()
    assert assocdb.verify_backup(tmp_path / "backup").ok


@pytest.mark.parametrize(
    "record",
    [
        b"{not json",
        b'{"source": {}, "shards": 8, "copied": {"0": "x"}}',
        b'{"source": SOURCE, "shards": 8, "copied": {"99": 5}}',  # (was an IndexError)
    ],
)
def test_a_damaged_record_of_a_stopped_backup_is_one_clear_error(
    tmp_path: Path, record: bytes
) -> None:
    g = open_source(tmp_path)
    g.assoc_add(1, "follows", 2)
    (tmp_path / "backup").mkdir()
    source = g.engine.backend.spec()
    body = record.replace(b"SOURCE", json.dumps(source).encode())
    (tmp_path / "backup" / ".unfinished.json").write_bytes(body)
    try:
        with pytest.raises(InvalidRequest, match=r"is damaged: delete .* and back up again"):
            assocdb.backup(g, tmp_path / "backup")
    finally:
        g.close()


@pytest.mark.parametrize("rolled", [False, True], ids=["as-of-cut", "to-time"])
def test_a_restore_stopped_part_way_leaves_no_graph_behind(tmp_path: Path, rolled: bool) -> None:
    g = open_source(tmp_path)
    for i in range(1, 100):
        g.assoc_add(i, "follows", 5000 + i % 13)
    assocdb.backup(g, tmp_path / "backup")
    g.close()
    upto = time.time_ns() // 1000 if rolled else None

    def stop_after_one_file(done: int, total: int) -> None:
        raise Stop

    with pytest.raises(Stop):
        assocdb.restore(tmp_path / "backup", tmp_path / "r", to=upto, progress=stop_after_one_file)
    # (A graph there would open, its shards not copied created empty.)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup", "graph"]
    assocdb.restore(tmp_path / "backup", tmp_path / "r", to=upto)
    with assocdb.open(tmp_path / "r") as r:
        assert r.check_inverses() == []
        assert r.assoc_count(5001, "followed_by") == 8


def test_a_stopped_backup_that_cannot_resume_says_so(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "graph", shards=2)  # no feed: nothing to catch up from
    g.define_assoc("follows", inverse="followed_by")
    for i in range(1, 400):
        g.assoc_add(i, "follows", 5000 + i % 13)
    try:
        with pytest.raises(Stop):
            assocdb.backup(g, tmp_path / "backup", progress=stop_halfway)
        with pytest.raises(InvalidRequest, match=r"holds a backup stopped .* delete it"):
            assocdb.backup(g, tmp_path / "backup")
    finally:
        g.close()
