"""`bench.fsync_wake` commits in blocks alone and beside a spinning process, and reports both."""

from __future__ import annotations

import pytest

from bench import fsync_wake


def test_it_reports_both_sides(capsys: pytest.CaptureFixture[str]) -> None:
    fsync_wake.main(["--preload", "50", "--blocks", "2", "--writes", "3"])
    out = capsys.readouterr().out
    assert "alone" in out
    assert "beside a spinning process" in out
    assert out.count("p50") == 2
