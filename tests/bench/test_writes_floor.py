"""The write benchmark's floor (`bench.writes.OwnStatements`) does a write's real work."""

from __future__ import annotations

import math
import random
import sqlite3
from pathlib import Path

from assocdb.core.ids import shard_of
from bench.writes import NODES, OwnStatements


def test_own_statements_store_both_legs_counted_and_journal_each_write(tmp_path: Path) -> None:
    own = OwnStatements(tmp_path / "own")
    own.fence_seconds = math.inf  # (no job is completed and deleted here)
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


def test_own_statements_read_what_assocdb_reads_and_delete_completed_jobs(
    tmp_path: Path,
) -> None:
    """Before journaling, assocdb reads each write's forward key only (`op.key`,
    `Applier.read_current_many`), not its inverse; and every job it journals is
    deleted again once its shards are fenced (`Journal._write_bookkeeping`, with the
    next journal transaction). The floor runs the same statements, no more, no less."""
    own = OwnStatements(tmp_path / "own")
    own.fence_seconds = 0.0  # a fence before every batch: the earlier jobs are completed
    statements: list[str] = []
    for conn in [*own.shards, own.journal]:
        conn.set_trace_callback(statements.append)
    rnd = random.Random(3)
    while True:  # a write whose two legs are on two shards
        state = rnd.getstate()
        a, b = rnd.randrange(1, NODES), rnd.randrange(1, NODES)
        if shard_of(a, own.SHARDS) != shard_of(b, own.SHARDS):
            break
    rnd.setstate(state)
    own.commit(rnd, 1)
    before_journal = statements[: statements.index("BEGIN IMMEDIATE")]
    edge_reads = [s for s in before_journal if "FROM edges" in s]
    assert len(edge_reads) == 1
    assert f"id1 = {a} AND atype = 1 AND id2 = {b}" in edge_reads[0]
    own.commit(rnd, 1)
    own.close()
    journal = sqlite3.connect(tmp_path / "own" / "journal.db")
    ids = [row[0] for row in journal.execute("SELECT id FROM jobs")]
    journal.close()
    assert ids == [2]  # the first job was completed and deleted with the second's commit


def test_the_same_work_by_hand_writes_both_edges_and_both_counts(tmp_path: Path) -> None:
    """The bare baseline does what a write with an inverse does: the edge, the inverse
    edge and both lists' counts, every write (a preload too)."""
    from bench.writes import Bare

    bare = Bare(tmp_path / "bare.db")
    bare.preload(250, random.Random(1))
    assert bare.commit(random.Random(2), 8) == 8
    edges = bare.conn.execute("SELECT count(*) FROM edges").fetchone()[0]
    counted = bare.conn.execute("SELECT sum(n) FROM counts").fetchone()[0]
    bare.conn.close()
    assert (edges, counted) == (2 * 258, 2 * 258)
