"""`assocdb backup`, `assocdb backup verify` and `assocdb restore` (`cli/backup.py`)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

import assocdb
from assocdb.cli.main import main


def test_backup_verify_restore_and_their_one_line_errors(tmp_path: Path) -> None:
    source, backup, restored = (str(tmp_path / n) for n in ("g", "b", "r"))
    with assocdb.open(source, shards=4) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.enable_feed()
        g.assoc_add(1, "follows", 2)
        run = CliRunner().invoke
        made = run(main, ["backup", source, backup])
        assert made.exit_code == 0, made.output
        assert "backed up 2 edges of 4 shards" in made.output
        g.assoc_add(3, "follows", 2)
        moment = datetime.fromtimestamp(time.time(), UTC).isoformat()
        g.assoc_add(5, "follows", 2)

    checked = run(main, ["backup", "verify", backup])
    assert checked.exit_code == 0, checked.output
    assert "ok (2 edges, 4 shards)" in checked.output
    back = run(main, ["restore", backup, restored, "--to", moment])
    assert back.exit_code == 0, back.output
    with assocdb.open(restored) as r:
        assert r.assoc_count(2, "followed_by") == 2  # 1 and 3; not 5

    for args, message in [
        (["backup", source, backup], "exists: a backup or restore goes to a new directory"),
        (["restore", backup, restored], "exists"),
        (["restore", backup, str(tmp_path / "x"), "--to", "noon"], "ISO 8601"),
        (["restore", backup, str(tmp_path / "x"), "--to", "2001-01-01"], "retained history"),
        # In UTC beyond datetime's years 1-9999 (was a ValueError traceback).
        (["restore", backup, str(tmp_path / "x"), "--to", "9999-12-31T23:59:59-12:00"], "future"),
        (["restore", backup, str(tmp_path / "x"), "--to", "0001-01-01T00:00+14:00"], "history"),
        (["backup", "verify", str(tmp_path / "nothing")], "no backup at"),
    ]:
        refused = run(main, args)
        assert refused.exit_code == 1, args
        assert refused.output.startswith("Error: "), refused.output
        assert message in refused.output
        assert len(refused.output.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_a_backup_onto_a_graph_is_refused_as_existing_and_the_graph_is_unchanged(
    tmp_path: Path,
) -> None:
    """A DEST mistyped as a live graph (here the source itself) is refused in one line
    that says it exists, never with advice to delete it, and the graph is left as it was."""
    source = tmp_path / "g"
    with assocdb.open(source) as g:
        g.define_assoc("follows")
        g.assoc_add(1, "follows", 2)
    before = sorted(p.name for p in source.iterdir())
    result = CliRunner().invoke(main, ["backup", str(source), str(source)])
    assert result.exit_code == 1
    assert result.output.startswith("Error:")
    assert len(result.output.strip().splitlines()) == 1
    assert "exists: a backup or restore goes to a new directory" in result.output
    assert "delete" not in result.output
    assert sorted(p.name for p in source.iterdir()) == before
    with assocdb.open(source) as g:
        assert g.assoc_count(1, "follows") == 1


def test_an_incremental_backup_and_its_one_line_errors(tmp_path: Path) -> None:
    source, other = str(tmp_path / "g"), str(tmp_path / "o")
    base, inc = str(tmp_path / "base"), str(tmp_path / "inc")
    run = CliRunner().invoke
    with assocdb.open(other, shards=4) as o:
        o.enable_feed()
    with assocdb.open(source, shards=4) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.enable_feed()
        g.assoc_add(1, "follows", 2)
        assert run(main, ["backup", source, base]).exit_code == 0
        g.assoc_add(3, "follows", 2)
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "manifest.json").write_bytes(b"{not json")
    for args, message in [
        (["backup", other, inc, "--since", base], "is a backup of another graph"),
        (["backup", source, inc, "--since", str(tmp_path / "corrupt")], "corrupt backup"),
    ]:
        refused = run(main, args)
        assert refused.exit_code == 1, args
        assert refused.output.startswith("Error: "), refused.output
        assert message in refused.output
        assert len(refused.output.strip().splitlines()) == 1
        assert not (tmp_path / "inc").exists()

    made = run(main, ["backup", source, inc, "--since", base])
    assert made.exit_code == 0, made.output
    assert "backed up 4 edges of 4 shards" in made.output
    assert "4 shards caught up through the feed" in made.output
    assert run(main, ["backup", "verify", inc]).exit_code == 0
