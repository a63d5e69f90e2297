"""The one-file layout's floors (`bench.one_file`) do the work they name, and agree."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench import one_file


def _totals(store: one_file.OneFile) -> tuple[int, int]:
    conn, shards = store.conn, range(one_file.SHARDS)
    edges = sum(conn.execute(f"SELECT count(*) FROM edges_{n}").fetchone()[0] for n in shards)
    counted = sum(
        conn.execute(f"SELECT coalesce(sum(n), 0) FROM counts_{n}").fetchone()[0] for n in shards
    )
    return edges, counted


@pytest.mark.parametrize("journal", [True, False])
def test_one_file_writes_both_legs_counted_in_their_shards_tables(
    tmp_path: Path, journal: bool
) -> None:
    store = one_file.OneFile(tmp_path / "one", journal=journal)
    store.preload(500, random.Random(1))
    assert _totals(store) == (1000, 1000)
    assert store.commit(random.Random(7), 100) == 100
    assert _totals(store) == (1200, 1200)  # 100 writes, both legs, counted
    for n in range(one_file.SHARDS):  # each row in its id1's shard's tables
        ids = store.conn.execute(f"SELECT DISTINCT id1 FROM edges_{n}").fetchall()
        assert all(one_file.shard_of(id1, one_file.SHARDS) == n for (id1,) in ids)
    if journal:
        assert store.journal is not None
        assert store.journal.execute("SELECT count(*) FROM jobs").fetchone()[0] == 100
    else:
        assert store.journal is None
    store.close()


def test_one_file_prints_every_store_and_the_layouts_agree(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # (`compare` asserts that the 16 files' statements, the one file's and the hand-written
    # ones give the same answers before it times them)
    one_file.main(["--edges", "30000", "--preload", "300", "--rounds", "1", "--seconds", "0.05"])
    out = capsys.readouterr().out
    for name in (
        "two files, ids read, bound again",
        "two files, ids as JSON (assocdb)",
        "one file: one join",
        "one file: one statement",
    ):
        assert name in out, name
    for name in ("16 files + journal (assocdb)", "one file + journal", "one file, no journal"):
        assert out.count(name) == 2, name  # a batch of 1, a batch of 100
