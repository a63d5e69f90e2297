"""A graph on a read-only file system (a snapshot, a read-only mount): readable, its
queued writes listed but not applied, new writes refused, nothing written."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import assocdb
from assocdb import Unavailable
from assocdb.cli.main import main
from assocdb.writes.applier import RetryPolicy
from tests.cli.test_cli_errors import snapshot


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(a writable directory, the same directory mounted read-only)."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    source, mount = tmp_path / "source", tmp_path / "ro"
    source.mkdir()
    mount.mkdir()
    bind = subprocess.run(
        ["mount", "--bind", str(source), str(mount)], capture_output=True, check=False
    )
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bind.stderr.decode().strip()}")
    remount = ["mount", "-o", "remount,bind,ro", str(mount)]
    if subprocess.run(remount, capture_output=True, check=False).returncode != 0:
        subprocess.run(["umount", str(mount)], check=False)
        pytest.skip("cannot make the bind mount read-only here")
    yield source, mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def make_graph_with_queued_writes(path: Path) -> None:
    fast = RetryPolicy(base=10.0, cap=10.0)  # the queued write stays queued
    g = assocdb.open(path, shards=2, retry=fast)
    g.define_assoc("follows", inverse="followed_by")
    g.assoc_add(1, "follows", 2, time=5)

    def fail(shard: int, sql: str) -> None:
        if sql.startswith("INSERT"):
            raise sqlite3.OperationalError("disk I/O error (injected)")

    g.engine.backend.faults.append(fail)  # type: ignore[attr-defined]
    assert g.assoc_add(3, "follows", 4, time=6).status == "queued"
    g.engine.backend.faults.remove(fail)  # type: ignore[attr-defined]
    g.close()


def test_a_read_only_graph_is_read_and_never_written(
    read_only: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    source, mount = read_only
    make_graph_with_queued_writes(source / "g")
    before = snapshot(source)
    with caplog.at_level(logging.WARNING), assocdb.open(mount / "g") as g:
        assert [a.id2 for a in g.assoc_range(1, "follows")] == [2]
        assert g.assoc_count(2, "followed_by") == 1
        assert g.queue_stats().errors == 1  # listed, not applied
        with pytest.raises(Unavailable, match="read-only"):
            g.assoc_add(5, "follows", 6)
    assert "journaled writes cannot be applied" in caplog.text
    assert snapshot(source) == before


def test_read_only_commands_work_on_a_read_only_graph(read_only: tuple[Path, Path]) -> None:
    source, mount = read_only
    make_graph_with_queued_writes(source / "g")
    run = CliRunner().invoke
    exported = run(main, ["export", str(mount / "g")])
    assert exported.exit_code == 0, exported.output
    assert "1 follows 2 5" in exported.stdout
    stats = run(main, ["queue", "stats", str(mount / "g")])
    assert stats.exit_code == 0, stats.output
    checked = run(main, ["check", str(mount / "g")])
    assert checked.exit_code == 0, checked.output
    written = run(main, ["import", str(mount / "g"), os.devnull])
    assert written.exit_code in (0, 1)  # nothing to import from /dev/null
    retried = run(main, ["queue", "retry", str(mount / "g")])
    assert retried.exit_code == 1
    assert retried.output.startswith("Error: ")


@pytest.mark.parametrize(
    "command",
    [
        ["import", "{g}", "{edges}"],
        ["queue", "retry", "{g}"],
        ["queue", "reinject", "{g}", "--all"],
        ["schema", "{g}", "{schema}"],
        ["index", "define", "{g}", "by_name", "user", "name"],
        ["timeline", "setup", "{g}"],
    ],
)
def test_a_write_to_a_read_only_graph_says_it_is_read_only(
    read_only: tuple[Path, Path], tmp_path: Path, command: list[str]
) -> None:
    # SQLite's word was "OperationalError: attempt to write a readonly database".
    source, mount = read_only
    make_graph_with_queued_writes(source / "g")
    with assocdb.open(source / "g") as g:
        g.define_object("user")
    edges, schema = tmp_path / "edges.txt", tmp_path / "schema.toml"
    edges.write_text("7 follows 8\n")
    schema.write_text("[assoc.likes]\n")
    before = snapshot(source)
    paths = {"g": str(mount / "g"), "edges": str(edges), "schema": str(schema)}
    result = CliRunner().invoke(main, [part.format(**paths) for part in command])
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[-1].endswith(
        "is on a read-only file system: this graph can be read, not written"
    ), result.output
    assert snapshot(source) == before
