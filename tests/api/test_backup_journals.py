"""The journals in a SQLite graph's cut (`storage/sqlitecut.py`): the directory's own
journal, which every process opening the graph by default shares, is in the cut even
when the backing-up graph keeps its journal elsewhere."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import assocdb


def test_another_process_s_unfinished_writes_are_in_a_backup_taken_with_its_own_journal(
    tmp_path: Path,
) -> None:
    root = tmp_path / "graph"
    g = assocdb.open(root, shards=2, journal=tmp_path / "own.journal")
    g.define_assoc("follows", inverse="followed_by")
    for i in range(1, 30):  # every shard file made
        g.assoc_add(i, "follows", i + 100)
    # Another process's writes, acknowledged as queued: shard 1 is locked, so they wait
    # in the directory's journal (the error queue) when it closes.
    other = assocdb.open(root, sync=False, timeout=0.1)
    lock = sqlite3.connect(root / "shard-0001.db", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    queued = [(i, 2 + 2 * i) for i in range(3, 9)]
    for id1, id2 in queued:
        assert other.assoc_add(id1, "follows", id2).status == "queued"
    other.close()
    lock.rollback()
    lock.close()
    waiting = sqlite3.connect(root / "journal.db")
    assert waiting.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] > 0
    waiting.close()

    manifest = assocdb.backup(g, tmp_path / "backup")
    g.close()
    assert manifest.replayed > 0
    assert assocdb.verify_backup(tmp_path / "backup").ok
    assocdb.restore(tmp_path / "backup", tmp_path / "restored")
    with assocdb.open(tmp_path / "restored") as r:
        for id1, id2 in queued:
            assert r.assoc_get(id1, "follows", [id2]), (id1, id2)
            assert r.assoc_get(id2, "followed_by", [id1]), (id1, id2)
