"""The cache benchmark's parts run against the code as it is (a change to the cache
once broke one that reaches inside it, unseen until the benchmark was run)."""

from __future__ import annotations

from pathlib import Path

import assocdb
from bench import cache as bench_cache


def test_packed_bytes_per_edge_measures_and_accounts() -> None:
    measured, accounted = bench_cache.packed_bytes_per_edge(lists=20, per_list=10)
    assert measured > 0
    assert accounted > 0


def test_reads_after_writes_give_their_rows(tmp_path: Path) -> None:
    celebrity = bench_cache.CELEBRITY
    with assocdb.open(tmp_path / "g", shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.bulk_load((celebrity + n, "follows", celebrity, bench_cache.BASE + n) for n in range(80))
    rows = bench_cache.after_writes(tmp_path / "g", limit=50, writes=3)
    assert [line.split(" vs ")[1][:8] for line in rows] == ["uncached", "rebuilt,"]
    with assocdb.open(tmp_path / "g", cache=None) as g:  # every write went in
        assert g.assoc_count(celebrity, "followed_by") == 80 + 3 * 3 * 3
