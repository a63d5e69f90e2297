"""The floor's B-tree variants (`bench.floor_trees`) do the work they name."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from bench import floor_trees


def _totals(conns: list[sqlite3.Connection]) -> tuple[int, int]:
    edges = sum(c.execute("SELECT count(*) FROM edges").fetchone()[0] for c in conns)
    counted = sum(c.execute("SELECT coalesce(sum(n), 0) FROM counts").fetchone()[0] for c in conns)
    return edges, counted


def test_variants_write_both_legs_and_count_only_when_told(tmp_path: Path) -> None:
    stores = floor_trees.prepare(tmp_path, 500)
    full, nokey = stores["full"], stores["nokey"]
    assert _totals(full) == _totals(nokey) == (1000, 1000)
    assert all(
        not c.execute("SELECT 1 FROM sqlite_schema WHERE name = 'edges_key'").fetchall()
        for c in nokey
    )
    floor_trees.batch(full, random.Random(7), counts=True, read=True)
    assert _totals(full) == (1200, 1200)  # 100 writes, both legs, counted
    floor_trees.batch(nokey, random.Random(7), counts=False, read=False)
    assert _totals(nokey) == (1200, 1000)  # the same rows, no count
    for conn in [*full, *nokey]:
        conn.close()


def test_floor_trees_prints_every_variant(capsys: pytest.CaptureFixture[str]) -> None:
    floor_trees.main(["--preload", "300", "--rounds", "1", "--seconds", "0.05"])
    out = capsys.readouterr().out
    for name in floor_trees.VARIANTS:
        assert name in out, name
