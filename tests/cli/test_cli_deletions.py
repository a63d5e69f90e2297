"""`assocdb delete`, `restore`, `deletions`, `check --dangling` and the schema's rules."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

import assocdb
from assocdb.cli.main import main

SCHEMA = """
[assoc.authored]
inverse = "author"
on_delete = "deep"

[assoc.author]
inverse = "authored"
on_delete = "shallow"

[assoc.likes]

[object.user]

[object.post]
owned = true
"""


def test_delete_restore_list_and_check(tmp_path: Path) -> None:
    directory = tmp_path / "g"
    (tmp_path / "schema.toml").write_text(SCHEMA)
    assocdb.open(directory).close()
    runner = CliRunner()
    shown = runner.invoke(main, ["schema", str(directory), str(tmp_path / "schema.toml")])
    assert shown.exit_code == 0, shown.output
    assert 'on_delete = "deep"' in shown.output
    assert "[object.post]\nowned = true" in shown.output
    with assocdb.open(directory) as g:
        ada, post, lonely = g.obj_add("user"), g.obj_add("post"), g.obj_add("post")
        g.assoc_add(ada, "authored", post)
        g.assoc_add(ada, "likes", lonely)

    deleted = runner.invoke(main, ["delete", str(directory), str(ada)])
    assert deleted.exit_code == 0, deleted.output
    assert f"deletion 1 of object {ada}: done" in deleted.output
    assert "removed 1 user, 1 post; edges 1 authored, 1 likes" in deleted.output

    checked = runner.invoke(main, ["check", str(directory), "--dangling"])
    assert checked.exit_code == 1
    assert "1 association types declare no on_delete rule" in checked.output
    assert f"orphan post {lonely}" in checked.output

    restored = runner.invoke(main, ["restore", str(directory), str(ada)])
    assert restored.exit_code == 0, restored.output
    assert "restored" in restored.output
    again = runner.invoke(main, ["restore", str(directory), str(ada)])
    assert again.exit_code == 1
    assert again.output.startswith("Error: ")
    assert "restored already" in again.output
    listed = runner.invoke(main, ["deletions", str(directory), "--purge"])
    assert listed.exit_code == 0
    assert "purged" not in listed.output  # still within the window
    assert f"deletion 1 of object {ada}: restored" in listed.output
    with assocdb.open(directory) as g:
        assert g.obj_get(post) is not None
        assert g.assoc_count(ada, "likes") == 1


def test_restore_tells_an_object_from_a_backup_by_its_second_argument(tmp_path: Path) -> None:
    """`restore GRAPH ID` and `restore BACKUP DEST` share a name: a number is an id, and
    the backup's options with an id are one usage line, not a backup attempt."""
    directory = tmp_path / "g"
    assocdb.open(directory).close()
    runner = CliRunner()
    mixed = runner.invoke(main, ["restore", str(directory), "7", "--to", "2026-01-01"])
    assert mixed.exit_code == 2
    assert "--to and --from restore a backup" in mixed.output
    missing = runner.invoke(main, ["restore", str(tmp_path / "nope"), "7"])
    assert missing.exit_code == 2
    assert "Traceback" not in missing.output
    not_an_id = runner.invoke(main, ["restore", str(directory), "abc"])
    assert not_an_id.exit_code == 2
    assert f"{directory} is a graph, not a backup" in not_an_id.output
    assert "give its id, a number (got 'abc')" in not_an_id.output
    assert "Traceback" not in not_an_id.output
    not_a_backup = runner.invoke(main, ["restore", str(tmp_path), str(tmp_path / "new")])
    assert not_a_backup.exit_code == 1
    assert not_a_backup.output.startswith("Error:")
    assert "is not a finished backup" in not_a_backup.output
    assert not (tmp_path / "new").exists()


def test_delete_says_how_many_home_timeline_entries_it_cleared(tmp_path: Path) -> None:
    directory = tmp_path / "g"
    with assocdb.open(directory) as g:
        g.define_assoc("follows", inverse="followed_by", on_delete="shallow")
        g.define_assoc("followed_by", inverse="follows", on_delete="shallow")
        g.define_object("user")
        g.define_timeline("follows", mode="write")
        ada, bob = g.obj_add("user"), g.obj_add("user")
        g.assoc_add(ada, "follows", bob)
        g.post(bob, 1001)
        g.post(bob, 1002)
        assert g.drain(30)
    deleted = CliRunner().invoke(main, ["delete", str(directory), str(ada)])
    assert deleted.exit_code == 0, deleted.output
    assert "; 2 home-timeline entries" in deleted.output
