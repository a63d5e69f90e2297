"""`bench.write_cpu` writes on a copy of the graph it preloaded, and reports per write."""

from __future__ import annotations

from pathlib import Path

import pytest

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
