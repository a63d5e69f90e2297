from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from assocdb._cli import main


def test_demo_loads_ego_facebook_and_answers(tmp_path: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(main, ["demo", str(tmp_path / "demo")])
    assert first.exit_code == 0, first.output
    assert "loaded 88,234 friendships" in first.output
    assert "person 1 has 347 friends" in first.output
    assert "their 10 newest friends: [348, 347, 346" in first.output
    assert "16 mutual friends of 1 and 2" in first.output
    again = runner.invoke(main, ["demo", str(tmp_path / "demo")])
    assert again.exit_code == 0
    assert "loaded" not in again.output  # the second run reuses the data
    assert "person 1 has 347 friends" in again.output


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert "assocdb" in result.output
