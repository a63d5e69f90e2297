"""The write benchmark's floor (`bench.writes.OwnStatements`) does a write's real work."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from bench.writes import OwnStatements


def test_own_statements_store_both_legs_counted_and_journal_each_write(tmp_path: Path) -> None:
    own = OwnStatements(tmp_path / "own")
    assert own.commit(random.Random(1), 50) == 50
    assert own.commit(random.Random(2), 1) == 1
    own.close()
    edges = counted = 0
    for shard in sorted((tmp_path / "own").glob("shard-*.db")):
        conn = sqlite3.connect(shard)
        edges += conn.execute("SELECT count(*) FROM edges").fetchone()[0]
        counted += conn.execute("SELECT coalesce(sum(n), 0) FROM counts").fetchone()[0]
        conn.close()
    journal = sqlite3.connect(tmp_path / "own" / "journal.db")
    jobs = journal.execute("SELECT count(*) FROM jobs").fetchone()[0]
    journal.close()
    assert (edges, counted, jobs) == (102, 102, 51)
