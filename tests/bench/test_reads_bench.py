"""The reads benchmark (issue 43) runs at a small scale and prints every row."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import reads


def test_reads_bench_prints_every_row(capsys: pytest.CaptureFixture[str]) -> None:
    reads.main(["--edges", "3000", "--runs", "2", "--calls", "40", "--no-kuzu"])
    out = capsys.readouterr().out
    table = out[out.index("\nreads:") :]
    for label in (
        *reads.OPS,
        "bulk load, edges/s",
        "bytes on disk after the load",
        "B per cached edge",
    ):
        assert label in table, label
    header = next(line for line in table.splitlines() if line.startswith("p50 (p99)"))
    for store in ("SQLite by hand", "assocdb, default cache", "assocdb, cache off"):
        assert store in header
    assert "hits " in table  # the cached column's hit rate


def test_reads_bench_cache_options_name_the_cached_column(
    capsys: pytest.CaptureFixture[str],
) -> None:
    options = ["--edges", "1000", "--runs", "1", "--calls", "10", "--no-kuzu"]
    reads.main([*options, "--cache-prefix", "60", "--cache-max-age", "3600"])
    assert "assocdb, cache prefix 60, max_age 3600" in capsys.readouterr().out


def test_reach_steps_agree_with_the_join_and_print_every_step(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench import reach_steps

    reach_steps.main(["--edges", "3000", "--rounds", "1"])  # (it checks answers agree)
    out = capsys.readouterr().out
    for step in ("hand-written count(DISTINCT) join", "select(select(a))", "statements alone"):
        assert step in out, step


def test_miss_steps_classes_every_cached_call(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from bench import miss_steps

    miss_steps.main(["--edges", "3000", "--rounds", "1", "--calls", "60", "--where", str(tmp_path)])
    out = capsys.readouterr().out
    for op in miss_steps.OPS:
        assert f"{op}: cached p50" in out, op
    counted = [int(line.split()[1]) for line in out.splitlines() if line.startswith("  all ")]
    assert counted == [60, 60, 60]  # each op's calls, each classed once besides
