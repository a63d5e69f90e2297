"""`bench.write_cpu` writes on a copy of the graph it preloaded, and reports per write."""

from __future__ import annotations

from pathlib import Path

import pytest

from assocdb.storage.sqlite import SQLiteBackend
from bench import write_cpu


def test_writes_on_a_copy_and_prints_cpu_per_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_cpu.main(["--make", str(tmp_path / "g"), "--preload", "50"])
    write_cpu.main(["--graph", str(tmp_path / "g"), "--writes", "8", "--threads", "2"])
    out = capsys.readouterr().out
    assert "2 thread(s)" in out
    assert "CPU, process" in out
    assert "wall" in out


def test_batches_and_the_cpu_of_each_kind_of_shard_statement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = SQLiteBackend._run
    write_cpu.main(["--make", str(tmp_path / "g"), "--preload", "50"])
    graph = ["--graph", str(tmp_path / "g")]
    write_cpu.main([*graph, "--batch", "10", "--writes", "20", "--warm", "10", "--statements"])
    out = capsys.readouterr().out
    assert "batches of 10" in out
    assert "CPU, the writing thread" in out
    for kind in ("BEGIN", "SELECT", "INSERT edges", "INSERT counts", "COMMIT"):
        assert f"  {kind} " in out
    assert SQLiteBackend._run is run  # (the statements are no longer timed)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--graph", "/no/such/graph"], "no such graph"),
        (["--make", "/tmp/unused", "--writes", "0"], "--writes must be at least 1"),
        (["--make", "/tmp/unused", "--batch", "-1"], "--batch must not be negative"),
    ],
)
def test_a_wrong_argument_is_one_error_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit:
        write_cpu.parse(args)
    assert exit.value.code == 2
    assert message in capsys.readouterr().err
