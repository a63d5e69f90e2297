"""`assocdb index …` commands."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

import assocdb
from assocdb.cli.main import main
from tests.support.stores import Stores


def test_define_build_status_query_check_drop(tmp_path: Path) -> None:
    graph = str(tmp_path / "g")
    with assocdb.open(graph, shards=2) as g:
        g.define_object("user")
        for age in range(30):
            g.obj_add("user", {"age": age, "name": f"u{age}"})
    runner = CliRunner()
    defined = runner.invoke(main, ["index", "define", graph, "by_age", "user", "age"])
    assert defined.exit_code == 0, defined.output
    assert "building, 30 objects" in defined.output
    assert "0/30" in runner.invoke(main, ["index", "status", graph]).output
    built = runner.invoke(main, ["index", "build", graph, "by_age"])
    assert built.exit_code == 0, built.output
    assert "ready, 30 of 30 scanned" in built.output
    found = runner.invoke(main, ["index", "query", graph, "by_age", "--low", "5", "--high", "7"])
    assert [line.count('"age"') for line in found.output.splitlines()] == [1, 1, 1]
    checked = runner.invoke(main, ["index", "check", graph, "by_age"])
    assert checked.exit_code == 0
    assert "0 missing, 0 stale and 0 dangling" in checked.output
    bad = runner.invoke(main, ["index", "define", graph, "x", "usr", "age"])
    assert bad.exit_code == 1
    assert "no object type 'usr'" in bad.output
    assert runner.invoke(main, ["index", "drop", graph, "by_age"]).exit_code == 0
    assert runner.invoke(main, ["index", "status", graph]).output.strip() == "no indexes"
    missing = runner.invoke(main, ["index", "build", graph, "by_age"])
    assert missing.exit_code == 1
    assert "no index 'by_age'" in missing.output


def test_query_pages_with_the_printed_cursor_and_build_checks_its_options(tmp_path: Path) -> None:
    graph = str(tmp_path / "g")
    with assocdb.open(graph, shards=2) as g:
        g.define_object("user")
        g.define_index("by_age", "user", ["age"])
        for age in range(5):
            g.obj_add("user", {"age": age})
        g.index_build("by_age")
    runner = CliRunner()
    ages: list[str] = []
    args = ["index", "query", graph, "by_age", "--limit", "2"]
    for _ in range(3):
        out = runner.invoke(main, args).output.splitlines()
        ages += [line for line in out if '"age"' in line]
        if not out[-1].startswith("next: --cursor "):
            break
        args = [*args[:6], "--cursor", out[-1].split()[-1]]
    assert len(ages) == 5
    for option in (["--rate", "0"], ["--rate", "nan"], ["--seconds", "-1"]):
        bad = runner.invoke(main, ["index", "build", graph, "by_age", *option])
        assert bad.exit_code == 1, option
        assert "must be" in bad.output


def test_index_and_timeline_commands_take_a_mysql_url_too(stores: Stores) -> None:
    where, journal = stores.location("cli")
    target = str(where) if stores.kind == "sqlite" else f"{where}&journal={journal}"
    with assocdb.open(where, journal=journal, shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.define_object("user")
        g.obj_add("user", {"age": 7})
        g.assoc_add(2, "follows", 1)
    run = CliRunner().invoke
    outputs = {}
    for args in (
        ["index", "define", target, "by_age", "user", "age"],
        ["index", "build", target, "by_age"],
        ["index", "query", target, "by_age", "7"],
        ["timeline", "setup", target],
        ["timeline", "post", target, "1", "10", "--time", "5"],
        ["timeline", "home", target, "2"],
        ["index", "drop", target, "by_age"],
    ):
        done = run(main, args)
        assert done.exit_code == 0, (args, done.output)
        outputs[" ".join(args[:2])] = done.output
    assert '"age":7' in outputs["index query"]
    assert outputs["timeline home"].split() == ["5", "10", "1"]
