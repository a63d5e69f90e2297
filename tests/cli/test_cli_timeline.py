"""The `assocdb timeline` commands."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

import assocdb
from assocdb.cli.main import main


def test_timeline_commands(tmp_path: Path) -> None:
    path = str(tmp_path / "g")
    with assocdb.open(path, shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.assoc_add(2, "follows", 1)
    run = CliRunner().invoke
    refused = run(main, ["timeline", "home", path, "2"])
    assert refused.exit_code == 1
    assert "assocdb timeline setup" in refused.output  # the command, not the Python call
    setup = run(main, ["timeline", "setup", path, "--mode", "hybrid", "--cap", "50"])
    assert setup.exit_code == 0, setup.output
    assert '"mode":"hybrid"' in setup.output
    for item in (11, 12, 13):
        posted = run(main, ["timeline", "post", path, "1", str(item), "--time", str(item)])
        assert posted.exit_code == 0, posted.output
    home = run(main, ["timeline", "home", path, "2", "--limit", "2"])
    assert home.exit_code == 0, home.output
    lines = home.output.splitlines()
    assert lines[:2] == ["13\t13\t1", "12\t12\t1"]
    cursor = lines[2].split()[-1]
    rest = run(main, ["timeline", "home", path, "2", "--cursor", cursor])
    assert rest.output.splitlines() == ["11\t11\t1"]
    assert run(main, ["timeline", "delete", path, "1", "12"]).exit_code == 0
    mine = run(main, ["timeline", "user", path, "1"])
    assert mine.output.splitlines() == ["13\t13\t1", "11\t11\t1"]
    read = run(main, ["timeline", "home", path, "2", "--mode", "read"])
    assert read.output.splitlines() == ["13\t13\t1", "11\t11\t1"]
    missing = run(main, ["timeline", "delete", path, "1", "99"])
    assert missing.exit_code == 1
    assert "has not posted" in missing.output
