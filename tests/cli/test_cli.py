from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import assocdb
from assocdb.cli.main import main
from tests.support.stores import Stores


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
    from assocdb.writes.applier import RetryPolicy

    fast = RetryPolicy(base=0.001, cap=0.01, max_attempts=2)
    with assocdb.open(tmp_path / "g", shards=2, retry=fast) as g:
        g.define_assoc("likes")

        def broken(shard: int, sql: str) -> None:
            if sql.startswith("INSERT OR REPLACE INTO edges"):
                raise sqlite3.IntegrityError("injected")

        g.engine.backend.faults.append(broken)  # type: ignore[attr-defined]
        g.assoc_add(1, "likes", 2, time=1, data=1)
        assert g.drain(timeout=10)
        g.engine.backend.faults.clear()  # type: ignore[attr-defined]
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
    errors = runner.invoke(main, ["queue", "errors", directory]).output.strip()
    assert errors == "no jobs in the error queue (0 new, 0 running)"
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


def test_init_schema_import_export_and_check(stores: Stores, tmp_path: Path) -> None:
    runner = CliRunner()
    where, journal = stores.location("g")
    graph = str(where) if stores.kind == "sqlite" else f"{where}&journal={journal}"
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
        runner.invoke(main, ["check", graph]).stdout.strip()  # progress goes to stderr
        == "found 0 wrong counts and 0 hanging edges"
    )


def test_import_shifts_ids_of_a_snap_file(tmp_path: Path) -> None:
    runner = CliRunner()
    graph = str(tmp_path / "g")
    schema = tmp_path / "schema.toml"
    schema.write_text('[assoc.follows]\ninverse = "followed_by"\n')
    assert (
        runner.invoke(main, ["init", graph, "--shards", "2", "--schema", str(schema)]).exit_code
        == 0
    )
    snap = tmp_path / "snap.txt"
    snap.write_text("# Directed graph\n# FromNodeId\tToNodeId\n0\t1\n0\t2\n2\t0\n")
    args = ["import", graph, str(snap), "--type", "follows"]
    assert "line 3" in runner.invoke(main, args).output  # node 0 is no assocdb id
    assert "imported 3 edges" in runner.invoke(main, [*args, "--id-offset", "1"]).output
    exported = runner.invoke(main, ["export", graph]).output.splitlines()
    assert exported[:3] == ["1 follows 2 3", "1 follows 3 4", "1 followed_by 3 5"]


def test_an_import_stopped_by_a_bad_line_resumes_where_it_stopped(tmp_path: Path) -> None:
    runner = CliRunner()
    graph = str(tmp_path / "g")
    schema = tmp_path / "schema.toml"
    schema.write_text("[assoc.likes]\n")
    assert (
        runner.invoke(main, ["init", graph, "--shards", "2", "--schema", str(schema)]).exit_code
        == 0
    )
    edges = tmp_path / "edges.txt"
    edges.write_text("1 likes 2\n1 likes 3\n1 likes\n")
    args = ["import", graph, str(edges)]
    first = runner.invoke(main, args)
    assert "line 3" in first.output
    assert "resuming" not in first.output
    again = runner.invoke(main, args)  # the same file: the journal says 2 edges are stored
    assert "resuming: the first 2 edges are stored" in again.output
    assert "line 3" in again.output
    edges.write_text("1 likes 2\n1 likes 3\n1 likes 4\n")  # fixed: another file, a new load
    fixed = runner.invoke(main, args)
    assert "resuming" not in fixed.output
    assert "imported 3 edges" in fixed.output
    assert len(runner.invoke(main, ["export", graph]).output.splitlines()) == 3


@pytest.mark.parametrize("url", ["mysql://root@127.0.0.1:3306/g", "postgresql://h:5432/g"])
def test_a_server_url_without_a_journal_is_a_usage_error(url: str) -> None:
    result = CliRunner().invoke(main, ["check", url])
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


def test_shards_commands(tmp_path: Path) -> None:
    import assocdb
    from tests.support.shardmaps import write_map

    path = write_map(tmp_path)
    assocdb.open(path).close()
    runner = CliRunner()
    shown = runner.invoke(main, ["shards", "show", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "db1          up       0,2-3,5" in shown.output
    assert "0            db1:1  db2:1" in shown.output
    assert runner.invoke(main, ["shards", "check", str(path)]).exit_code == 0
    # A backend that cannot be opened fails the check, and shows as down.
    (tmp_path / "db3" / "shard-0000.db").write_bytes(b"not a database" * 100)
    checked = runner.invoke(main, ["shards", "check", str(path)])
    assert checked.exit_code == 1
    assert "db3          FAILED" in checked.output
    assert "1 backend(s) did not answer" in checked.output
    assert "db3          down" in runner.invoke(main, ["shards", "show", str(path)]).output
    # Changes are validated, then written.
    weighted = runner.invoke(main, ["shards", "set-weight", str(path), "0-1", "db2", "4"])
    assert weighted.exit_code == 0, weighted.output
    assert "db1:1  db2:4" in runner.invoke(main, ["shards", "show", str(path)]).output
    refused = runner.invoke(main, ["shards", "set-weight", str(path), "0", "db3", "1"])
    assert refused.exit_code == 1
    assert "holds no replica of shard 0" in refused.output
    assert "down = true" not in path.read_text()
    assert runner.invoke(main, ["shards", "mark-down", str(path), "db3"]).exit_code == 0
    assert "down = true" in path.read_text()
    assert "db3          drained" in runner.invoke(main, ["shards", "show", str(path)]).output
    assert runner.invoke(main, ["shards", "mark-up", str(path), "db3"]).exit_code == 0
    unknown = runner.invoke(main, ["shards", "mark-up", str(path), "db9"])
    assert "unknown backend 'db9'" in unknown.output
    broken = tmp_path / "broken.toml"
    broken.write_text("shards = 4\n")
    bad = runner.invoke(main, ["shards", "show", str(broken)])
    assert bad.exit_code == 1
    assert "missing required field" in bad.output


def test_shards_verify_finds_and_repairs_a_row_one_replica_lost(tmp_path: Path) -> None:
    import sqlite3

    import assocdb
    from assocdb.core.ids import shard_of
    from tests.support.shardmaps import write_map

    path = write_map(tmp_path)
    with assocdb.open(path) as g:
        g.define_assoc("likes")
        for n in range(1, 30):
            g.assoc_add(n, "likes", n + 100, time=n)
        shard = shard_of(7, g.shards)
    runner = CliRunner()
    clean = runner.invoke(main, ["shards", "verify", str(path)])
    assert clean.exit_code == 0, clean.output
    assert "found 0 differences in 6 shards" in clean.output
    second = ["db1", "db2", "db3"][(shard + 1) % 3]  # write_map: shard s on members s, s+1
    with sqlite3.connect(tmp_path / second / f"shard-{shard:04d}.db") as db:
        db.execute("DELETE FROM edges WHERE id1 = 7")
    found = runner.invoke(main, ["shards", "verify", str(path), str(shard)])
    assert found.exit_code == 1
    assert f"shard {shard} edges (7, 1, 107):" in found.output
    assert f"{second:<12} missing" in found.output
    assert "found 1 differences in 1 shards" in found.output
    fixed = runner.invoke(main, ["shards", "verify", str(path), "--repair"])
    assert "repaired 1 differences" in fixed.output
    assert runner.invoke(main, ["shards", "verify", str(path)]).exit_code == 0
    bad = runner.invoke(main, ["shards", "verify", str(path), "9"])
    assert bad.exit_code == 1
    assert "outside shards 0-5" in bad.output


def test_shards_add_backend_add_replica_and_drop_replica(tmp_path: Path) -> None:
    import assocdb
    from assocdb.storage.shardmap_config import load
    from tests.support.shardmaps import write_map

    path = write_map(tmp_path)
    with assocdb.open(path) as g:
        g.define_assoc("likes")
        for n in range(1, 30):
            g.assoc_add(n, "likes", n + 100, time=n)
    runner = CliRunner()
    added = runner.invoke(main, ["shards", "add-backend", str(path), "db4", "--path", "db4"])
    assert added.exit_code == 0, added.output
    both = runner.invoke(main, ["shards", "add-backend", str(path), "db5"])
    assert "give exactly one of --url and --path" in both.output
    copied = runner.invoke(main, ["shards", "add-replica", str(path), "1", "--on", "db4"])
    assert copied.exit_code == 0, copied.output
    assert "shard 1: copied" in copied.output
    assert [r.backend for r in load(path).replicas[1]] == ["db2", "db3", "db4"]
    again = runner.invoke(main, ["shards", "add-replica", str(path), "1", "--on", "db4"])
    assert "shard 1: already on db4, nothing to do" in again.output
    assert runner.invoke(main, ["shards", "verify", str(path), "1"]).exit_code == 0
    dropped = runner.invoke(main, ["shards", "drop-replica", str(path), "1", "db2"])
    assert "shard 1: db2 dropped" in dropped.output
    assert [r.backend for r in load(path).replicas[1]] == ["db3", "db4"]
    moved = runner.invoke(main, ["shards", "move", str(path), "1", "--to", "db1"])
    assert moved.exit_code == 1
    assert "say which one moves (--from)" in moved.output


def _one_error_line(result: Any, *wanted: str) -> None:
    """The command failed with exit status 1 and one `Error:` line (no traceback)."""
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    for text in wanted:
        assert text in errors[0], result.output


def test_shards_cancel_rolls_back_a_copy_not_yet_live(tmp_path: Path) -> None:
    import assocdb
    from assocdb.storage.shardmap_config import (
        BackendConfig,
        MoveRecord,
        load,
        save,
        with_backend,
        with_moves,
        with_replica,
    )
    from tests.support.shardmaps import write_map

    path = write_map(tmp_path)
    assocdb.open(path).close()
    before = load(path).replicas
    smap = with_backend(load(path), "db4", BackendConfig(path="db4"))
    copying = MoveRecord(2, "db4", "copying", "db2")
    added = MoveRecord(3, "db4", "write-only")
    smap = with_replica(with_replica(smap, 2, "db4", 0), 3, "db4", 0)
    save(with_moves(smap, [copying, added]), path)
    runner = CliRunner()
    cancelled = runner.invoke(main, ["shards", "cancel", str(path), "1-3", "--to", "db4"])
    assert cancelled.exit_code == 0, cancelled.output
    assert cancelled.output.splitlines() == [
        "shard 1: no copy under way",
        "shard 2: cancelled",
        "shard 3: cancelled",
    ]
    assert load(path).moves == []
    assert load(path).replicas == before
    again = runner.invoke(main, ["shards", "cancel", str(path), "2", "--to", "db4"])
    assert again.exit_code == 0, again.output
    assert again.output == "shard 2: no copy under way\n"


def test_shards_cancel_refuses_what_it_cannot_cancel_with_one_error_line(tmp_path: Path) -> None:
    from assocdb.storage.shardmap_config import MoveRecord, load, save, with_moves
    from tests.support.shardmaps import write_map

    path = write_map(tmp_path)
    runner = CliRunner()
    before = path.read_text()
    unknown = runner.invoke(main, ["shards", "cancel", str(path), "0-5", "--to", "db9"])
    _one_error_line(unknown, "no backend 'db9'")
    outside = runner.invoke(main, ["shards", "cancel", str(path), "9", "--to", "db1"])
    _one_error_line(outside, "outside shards 0-5")
    assert path.read_text() == before
    live = MoveRecord(1, "db3", "live", "db2")  # shard 1 is on db2 and db3
    save(with_moves(load(path), [live]), path)
    refused = runner.invoke(main, ["shards", "cancel", str(path), "1", "--to", "db3"])
    _one_error_line(refused, "live already")
    assert load(path).moves == [live]
    for name, content in [
        ("torn.toml", b"shards = 6\n[backends.db1\n"),
        ("empty.toml", b""),
        ("binary.toml", b"\xff\xfe\x00shards"),
        ("partial.toml", b"shards = 6\n"),
    ]:
        bad = tmp_path / name
        bad.write_bytes(content)
        result = runner.invoke(main, ["shards", "cancel", str(bad), "0", "--to", "db1"])
        _one_error_line(result, name)
    missing = runner.invoke(
        main, ["shards", "cancel", str(tmp_path / "nope.toml"), "0", "--to", "db1"]
    )
    assert missing.exit_code == 2  # click's usage error: one `Error:` line too
    assert [line for line in missing.output.splitlines() if line.startswith("Error:")] != []
    assert "Traceback" not in missing.output


def test_changes_prints_json_lines_and_commits_a_group(tmp_path: Path) -> None:
    where = tmp_path / "g"
    with assocdb.open(where, shards=2) as g:
        g.define_assoc("likes")
        g.enable_feed()
        g.assoc_add(1, "likes", 2)
    runner = CliRunner()
    first = runner.invoke(main, ["changes", str(where), "--group", "mail"])
    assert first.exit_code == 0, first.output
    lines = [json.loads(line) for line in first.stdout.splitlines()]
    assert [(c["kind"], c["type"], c["id1"], c["id2"]) for c in lines] == [("edge", "likes", 1, 2)]
    again = runner.invoke(main, ["changes", str(where), "--group", "mail"])
    assert again.stdout == ""  # committed


def test_changes_refuses_an_unknown_type_with_one_error_line(tmp_path: Path) -> None:
    where = tmp_path / "g"
    with assocdb.open(where, shards=2) as g:
        g.define_assoc("likes")
        g.enable_feed()
    result = CliRunner().invoke(main, ["changes", str(where), "--type", "lkes"])
    _one_error_line(result, "'lkes'", "did you mean 'likes'")


def test_changes_members_of_a_group_share_the_shards(tmp_path: Path) -> None:
    where = tmp_path / "g"
    with assocdb.open(where, shards=4) as g:
        g.define_assoc("likes")
        g.enable_feed()
        with g.batch() as batch:
            for n in range(1, 41):
                batch.assoc_add(n, "likes", 1)
        for member in ("a", "b"):  # a read joins: both have before either reads on
            g.changes(group="mail", member=member)
    runner = CliRunner()
    command = ["changes", str(where), "--group", "mail", "--member"]
    read = {}
    for member in ("a", "b"):
        result = runner.invoke(main, [*command, member])
        assert result.exit_code == 0, result.output
        read[member] = {(c["shard"], c["position"]) for c in map(json.loads, result.stdout.split())}
    assert read["a"].isdisjoint(read["b"])
    assert len(read["a"] | read["b"]) == 40
    off = runner.invoke(main, ["changes", str(where), "--member", "a"])
    assert off.exit_code == 2
    assert "--member is a member of a --group" in off.output
