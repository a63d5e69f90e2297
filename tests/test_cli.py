from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from assocdb._cli import main

from .stores import Stores


def test_demo_loads_ego_facebook_and_answers(stores: Stores) -> None:
    where, journal = stores.location("demo")
    target = str(where) if stores.kind == "sqlite" else f"{where}&journal={journal}"
    runner = CliRunner()
    first = runner.invoke(main, ["demo", target])
    assert first.exit_code == 0, first.output
    assert "loaded 88,234 friendships" in first.output
    assert "person 1 has 347 friends" in first.output
    assert "their 10 newest friends: [348, 347, 346" in first.output
    assert "16 mutual friends of 1 and 2" in first.output
    again = runner.invoke(main, ["demo", target])
    assert again.exit_code == 0
    assert "loaded" not in again.output  # the second run reuses the data
    assert "person 1 has 347 friends" in again.output


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert "assocdb" in result.output


def test_queue_commands(tmp_path: Path) -> None:
    import sqlite3

    import assocdb
    from assocdb._applier import RetryPolicy

    fast = RetryPolicy(base=0.001, cap=0.01, max_attempts=2)
    with assocdb.open(tmp_path / "g", shards=2, retry=fast) as g:
        g.define_assoc("likes")

        def broken(shard: int, sql: str) -> None:
            if sql.startswith("INSERT OR REPLACE INTO edges"):
                raise sqlite3.IntegrityError("injected")

        g._backend.faults.append(broken)  # type: ignore[attr-defined]
        g.assoc_add(1, "likes", 2, time=1, data=1)
        assert g.drain(timeout=10)
        g._backend.faults.clear()  # type: ignore[attr-defined]
    runner = CliRunner()
    directory = str(tmp_path / "g")
    stats = runner.invoke(main, ["queue", "stats", directory])
    assert stats.exit_code == 0, stats.output
    assert "bad              1" in stats.output
    bad = runner.invoke(main, ["queue", "bad", directory])
    assert "IntegrityError: injected" in bad.output
    job_id = bad.output.splitlines()[1].split()[0]
    shown = runner.invoke(main, ["queue", "bad", directory, "--show", job_id])
    assert '"kind": "rows"' in shown.output
    assert runner.invoke(main, ["queue", "errors", directory]).output.strip() == "no jobs"
    assert runner.invoke(main, ["queue", "reinject", directory]).exit_code == 2  # nothing named
    reinjected = runner.invoke(main, ["queue", "reinject", directory, job_id])
    assert "reinjected 1 jobs" in reinjected.output
    retried = runner.invoke(main, ["queue", "retry", directory])
    assert "the queue is empty" in retried.output
    with assocdb.open(directory) as g:
        assert [a.id2 for a in g.assoc_range(1, "likes")] == [2]
        assert g.queue_stats().bad == 0
    missing = runner.invoke(main, ["queue", "bad", directory, "--show", "999"])
    assert missing.exit_code == 1
    assert "no job 999" in missing.output


def test_init_schema_import_export_and_check(tmp_path: Path) -> None:
    runner = CliRunner()
    graph = str(tmp_path / "g")
    schema = tmp_path / "schema.toml"
    schema.write_text(
        '[assoc.follows]\ninverse = "followed_by"\n[assoc.friend]\nsymmetric = true\n'
    )
    assert (
        "4 shards, 3 association types"
        in runner.invoke(main, ["init", graph, "--shards", "4", "--schema", str(schema)]).output
    )
    shown = runner.invoke(main, ["schema", graph]).output
    assert '[assoc.follows]\ninverse = "followed_by"' in shown
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("1 2\n1 3\n\n2 3\n")
    imported = runner.invoke(main, ["import", graph, str(pairs), "--type", "friend"])
    assert "imported 3 edges" in imported.output, imported.output
    lines = tmp_path / "lines.txt"
    lines.write_text("5 follows 6 100\n7 follows 6\n")
    assert runner.invoke(main, ["import", graph, str(lines)]).exit_code == 0
    bad = tmp_path / "bad.txt"
    bad.write_text("5 follows\n")
    failed = runner.invoke(main, ["import", graph, str(bad)])
    assert failed.exit_code == 1
    assert "line 1: expected" in failed.output
    exported = runner.invoke(main, ["export", graph]).output.splitlines()
    assert "5 follows 6 100" in exported
    assert "6 followed_by 5 100" in exported
    assert "3 friend 2 4" in exported  # time = line number (blank lines count)
    assert (
        runner.invoke(main, ["check", graph]).output.strip()
        == "found 0 wrong counts and 0 hanging edges"
    )


def test_a_mysql_url_without_a_journal_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["check", "mysql://root@127.0.0.1:3306/g"])
    assert result.exit_code == 2
    assert "add ?journal=PATH" in result.output


def test_the_printed_schema_recreates_the_schema_indexes_included(tmp_path: Path) -> None:
    runner = CliRunner()
    schema = tmp_path / "schema.toml"
    schema.write_text(
        '[assoc.follows]\ninverse = "followed_by"\nlimit = 100\n[object.user]\n'
        '[index.by_email]\notype = "user"\nproperties = ["email"]\nunique = true\n'
        'shard_on = "email"\n'
        '[index.by_age]\notype = "user"\nproperties = ["age", "city"]\norder = "recency"\n'
    )
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    assert runner.invoke(main, ["init", first, "--schema", str(schema)]).exit_code == 0
    printed = runner.invoke(main, ["schema", first]).output
    assert "[index.by_email]" in printed
    again = tmp_path / "again.toml"
    again.write_text(printed)
    assert runner.invoke(main, ["init", second, "--schema", str(again)]).exit_code == 0
    assert runner.invoke(main, ["schema", second]).output == printed
