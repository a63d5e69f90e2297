"""Resuming a stopped backup of a graph on a server (`api/backup.py`,
`storage/servercut.py`): the shards a stopped run copied are caught up through the
change feed to the new cut, the others copied again; the result equals a fresh backup."""

from __future__ import annotations

import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import assocdb
from assocdb.api.backup import read_manifest
from tests.api.test_backup import Stop
from tests.storage.test_shardmap import SERVERS as MAP_SERVERS
from tests.storage.test_shardmap import (
    MapMaker,
    make_map,  # noqa: F401 (a fixture)
    open_cluster,
)
from tests.support.stores import Stores

SERVERS = ["mysql", "postgres"]


@pytest.fixture(params=SERVERS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


def contents(root: Path) -> dict[str, set[tuple[object, ...]]]:
    """Every edge, count, object and node state of the graph directory `root` (a count
    of 0 is no count: a caught-up shard keeps the row of a count that fell to 0)."""
    found: dict[str, set[tuple[object, ...]]] = {}
    for file in sorted(root.glob("shard-*.db")):
        conn = sqlite3.connect(f"file:{file}?mode=ro", uri=True)
        try:
            for table in ("edges", "counts", "objects", "node_states"):
                rows = conn.execute(f"SELECT * FROM {table}").fetchall()
                rows = [r for r in rows if table != "counts" or r[-1] != 0]
                found.setdefault(table, set()).update((file.name, *r) for r in rows)
        finally:
            conn.close()
    return found


def write_some(g: assocdb.Graph, start: int, n: int) -> None:
    for i in range(start, start + n):
        g.assoc_add(i, "follows", 5000 + i % 13)
        if i % 3 == 0:
            g.obj_add("user", {"n": i})


def change_every_shard(g: assocdb.Graph) -> None:
    """Deletes and adds on every shard (both directions), after a stopped run's cut."""
    for i in range(1, 400, 3):
        g.assoc_delete(i, "follows", 5000 + i % 13)
    write_some(g, 1000, 60)
    assert g.drain(30)


def open_server_source(stores: Stores, at: tuple[str | Path, Path] | None = None) -> assocdb.Graph:
    g = stores.open("source", shards=8, at=at) if at else stores.open("source", shards=8)
    g.define_assoc("follows", inverse="followed_by")
    g.define_object("user")
    g.enable_feed()
    return g


def stop_halfway(done: int, total: int) -> None:
    if done > total // 2:
        raise Stop


def test_a_stopped_server_backup_resumes_to_a_fresh_backups_equal(
    stores: Stores, tmp_path: Path
) -> None:
    g = open_server_source(stores)
    write_some(g, 1, 400)
    with pytest.raises(Stop):
        assocdb.backup(g, tmp_path / "backup", progress=stop_halfway)
    copied = json.loads((tmp_path / "backup" / ".unfinished.json").read_bytes())["copied"]
    assert 1 <= len(copied) < 8
    change_every_shard(g)
    manifest = assocdb.backup(g, tmp_path / "backup")
    fresh = assocdb.backup(g, tmp_path / "fresh")
    assert manifest.caught_up == len(copied)
    assert manifest.edges == fresh.edges
    assert contents(tmp_path / "backup") == contents(tmp_path / "fresh")
    check = assocdb.verify_backup(tmp_path / "backup")
    assert check.ok, (check.counts[:3], check.hanging[:3])


def test_a_shard_a_stopped_run_copied_part_of_is_copied_anew(
    stores: Stores, tmp_path: Path
) -> None:
    g = open_server_source(stores)
    write_some(g, 1, 400)
    with pytest.raises(Stop):
        assocdb.backup(g, tmp_path / "backup", progress=stop_halfway)
    copied = json.loads((tmp_path / "backup" / ".unfinished.json").read_bytes())["copied"]
    partial = min(set(range(8)) - {int(s) for s in copied})  # (the one it stopped in)
    # What the source no longer has (purged since the stopped run's cut), in that copy.
    conn = sqlite3.connect(tmp_path / "backup" / f"shard-{partial:04d}.db")
    with conn:
        conn.execute("INSERT INTO objects VALUES (987654321, 1, 0, 1, 1, x'00')")
    conn.close()
    assocdb.backup(g, tmp_path / "backup")
    assocdb.backup(g, tmp_path / "fresh")
    assert contents(tmp_path / "backup") == contents(tmp_path / "fresh")


def test_a_feed_trimmed_past_the_stopped_cut_copies_the_server_shard_again(
    stores: Stores, tmp_path: Path
) -> None:
    g = open_server_source(stores)
    write_some(g, 1, 400)
    with pytest.raises(Stop):
        assocdb.backup(g, tmp_path / "backup", progress=stop_halfway)
    change_every_shard(g)
    g.services.feed.trim(seconds=0, rows=0)
    manifest = assocdb.backup(g, tmp_path / "backup")
    assocdb.backup(g, tmp_path / "fresh")
    assert manifest.caught_up == 0
    assert contents(tmp_path / "backup") == contents(tmp_path / "fresh")
    assert assocdb.verify_backup(tmp_path / "backup").ok


_CHILD = """
import json, sys
from pathlib import Path
import assocdb
from assocdb.api.backup import read_manifest

source, dest, block = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "block"

def progress(done, total):
    record = dest / ".unfinished.json"
    if block and record.exists() and json.loads(record.read_bytes())["copied"]:
        print("copied", flush=True)
        sys.stdin.read()  # until killed

assocdb.backup(source, dest, progress=progress)
print("done", flush=True)
"""


def run_backup(source: str, dest: Path, block: bool) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, source, str(dest), "block" if block else "go"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_a_backup_killed_part_way_resumes_with_the_same_command(
    stores: Stores, tmp_path: Path
) -> None:
    where, journal = stores.location("source")
    g = open_server_source(stores, at=(where, journal))
    write_some(g, 1, 400)
    assert g.drain(30)
    source = f"{where}&journal={tmp_path / 'backup.journal.db'}"
    with run_backup(source, tmp_path / "backup", block=True) as killed:
        try:
            assert killed.stdout is not None
            # (a child that hangs fails the test within 5 minutes, not the whole run)
            assert select.select([killed.stdout], [], [], 300)[0], "the backup hung"
            assert killed.stdout.readline() == "copied\n"  # (blocked there: a shard copied)
        finally:
            killed.send_signal(signal.SIGKILL)
    assert not (tmp_path / "backup" / "manifest.json").exists()
    change_every_shard(g)
    with run_backup(source, tmp_path / "backup", block=False) as again:
        out, _ = again.communicate(timeout=300)
    assert again.returncode == 0
    assert out == "done\n"
    manifest = read_manifest(tmp_path / "backup")
    assert manifest.caught_up >= 1
    assocdb.backup(g, tmp_path / "fresh")
    assert contents(tmp_path / "backup") == contents(tmp_path / "fresh")
    assert assocdb.verify_backup(tmp_path / "backup").ok


@pytest.mark.skipif(not MAP_SERVERS, reason="ASSOCDB_TEST_MYSQL_URLS is not set")
@pytest.mark.parametrize("make_map", ["mysql"], indirect=True)
def test_a_stopped_backup_of_three_servers_resumes(
    make_map: MapMaker,  # noqa: F811
    tmp_path: Path,
) -> None:
    g = open_cluster(make_map, cache=None)
    g.define_object("user")
    g.enable_feed()
    try:
        write_some(g, 1, 400)
        with pytest.raises(Stop):
            assocdb.backup(g, tmp_path / "backup", progress=stop_halfway)
        change_every_shard(g)
        manifest = assocdb.backup(g, tmp_path / "backup")
        assocdb.backup(g, tmp_path / "fresh")
    finally:
        g.close()
    assert manifest.caught_up >= 1
    assert contents(tmp_path / "backup") == contents(tmp_path / "fresh")
    assert assocdb.verify_backup(tmp_path / "backup").ok


@pytest.mark.skipif(not MAP_SERVERS, reason="ASSOCDB_TEST_MYSQL_URLS is not set")
@pytest.mark.parametrize("make_map", ["mysql"], indirect=True)
def test_an_incremental_backup_of_three_servers_equals_a_fresh_one(
    make_map: MapMaker,  # noqa: F811
    tmp_path: Path,
) -> None:
    g = open_cluster(make_map, cache=None)
    g.define_object("user")
    g.enable_feed()
    try:
        write_some(g, 1, 400)
        assocdb.backup(g, tmp_path / "base")
        change_every_shard(g)
        made = assocdb.backup(g, tmp_path / "inc", since=tmp_path / "base")
        assocdb.backup(g, tmp_path / "fresh")
    finally:
        g.close()
    assert made.caught_up == made.shards
    assert contents(tmp_path / "inc") == contents(tmp_path / "fresh")
    assert assocdb.verify_backup(tmp_path / "inc").ok
