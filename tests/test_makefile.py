"""`make check` and `make test` set themselves up: a C driver that does not build
is one line, not pip's forty lines of compiler errors."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: A python that installs everything but the C driver, which fails as a build does.
FAKE_PYTHON = """#!/bin/sh
case "$*" in
  *mysqlclient*)
    for n in $(seq 40); do echo "error: mysql_config not found (line $n)" >&2; done
    exit 1;;
esac
exit 0
"""


def test_a_driver_that_does_not_build_is_one_line(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    stamp = venv / ".installed-run"
    stamp.touch()
    later = (ROOT / "pyproject.toml").stat().st_mtime + 10
    os.utime(stamp, (later, later))  # set up already: only the dev install runs
    run = subprocess.run(
        ["make", "-C", str(ROOT), f"VENV={venv}", f"{venv}/.installed"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    said = [line for line in (run.stdout + run.stderr).splitlines() if "mysql" in line.lower()]
    assert len(said) == 1, said
    assert said[0].startswith("mysqlclient not built")
    assert "error: mysql_config" in (venv / "mysqlclient.log").read_text()
    assert (venv / ".installed").exists()
