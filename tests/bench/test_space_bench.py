"""The space benchmark (issue 43): its per-tree sums agree with the files and the rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench import space


def _file(path: Path, rows: int) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER NOT NULL) WITHOUT ROWID")
    conn.execute("CREATE INDEX t_b ON t (b)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", ((n, -n) for n in range(rows)))
    conn.commit()
    conn.close()


def test_trees_sum_pages_and_entries_over_files(tmp_path: Path) -> None:
    _file(tmp_path / "one.db", 5000)
    _file(tmp_path / "two.db", 3000)
    found = {tree.name: tree for tree in space.trees([tmp_path / "one.db", tmp_path / "two.db"])}
    assert found["t"].entries == found["t_b"].entries == 8000  # a WITHOUT ROWID table: one each
    pages = sum(tree.size for tree in found.values())
    files = sum(p.stat().st_size for p in tmp_path.glob("*.db"))
    assert pages == files  # every page belongs to a tree (nothing freed yet)
    assert all(0 < tree.fill <= 1 for tree in found.values() if tree.entries)


def test_files_by_kind_splits_wal_from_database(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "g.db")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (a)")
    conn.commit()
    kinds = space.files_by_kind(tmp_path)
    assert kinds["db"] == (tmp_path / "g.db").stat().st_size
    assert kinds["wal"] == (tmp_path / "g.db-wal").stat().st_size > 0
    conn.close()


def test_space_bench_prints_both_stores(capsys: pytest.CaptureFixture[str]) -> None:
    space.main(["--edges", "2000"])
    out = capsys.readouterr().out
    for label in ("SQLite by hand", "assocdb, 16 shards", "edges_key", "edges_out", "target"):
        assert label in out, label
