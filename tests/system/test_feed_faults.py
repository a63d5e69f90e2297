"""The change feed under faults: an app server SIGKILLed under writers (every acknowledged
write is in the feed once the journal has replayed it, exactly once), a consumer killed
in the middle of a page (it reads that page again: at-least-once, nothing skipped), and a
shard down (the queued leg is recorded once the retry applies it)."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import msgspec
import pytest

import assocdb
from assocdb.core.ids import shard_of
from assocdb.writes.applier import RetryPolicy
from tests.support.http_server import Server

FAST = RetryPolicy(base=0.005, cap=0.05, max_attempts=3, down_after=2, down_for=0.02, down_max=0.1)


def _feed_graph(directory: Path) -> None:
    with assocdb.open(directory, shards=8) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.enable_feed()


def _edges(g: assocdb.Graph) -> Counter[tuple[str, int, int]]:
    seen: Counter[tuple[str, int, int]] = Counter()
    cursor = None
    while (page := g.changes(cursor, limit=5000)).items:
        seen.update((c.type, c.id1, c.id2) for c in page.items if c.kind == "edge")
        cursor = page.next_cursor
    return seen


@pytest.mark.parametrize("seed", [1, 2])
def test_every_write_acknowledged_before_the_server_was_killed_is_in_the_feed_once(
    tmp_path: Path, seed: int
) -> None:
    directory = tmp_path / "graph"
    _feed_graph(directory)
    server = Server(directory, False)
    kill_after = random.Random(seed).randrange(100, 400)
    acked: list[tuple[int, int]] = []
    lock, enough = threading.Lock(), threading.Event()

    def write(worker: int) -> None:
        client = assocdb.Client(server.url, timeout=10, retries=0)
        n = worker
        try:
            while True:
                id1, id2 = n % 97 + 1, 1000 + n
                client.assoc_add(id1, "follows", id2)
                with lock:
                    acked.append((id1, id2))
                    if len(acked) >= kill_after:
                        enough.set()
                n += 4
        except assocdb.AssocdbError:
            return  # the server is gone
        finally:
            client.close()

    writers = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for writer in writers:
        writer.start()
    assert enough.wait(120)
    server.kill()
    for writer in writers:
        writer.join()
    server.stop()
    with assocdb.open(directory) as g:  # the journal replays what was not applied
        assert g.drain(timeout=60)
        seen = _edges(g)
    for id1, id2 in acked:
        assert seen[("follows", id1, id2)] == 1
        assert seen[("followed_by", id2, id1)] == 1


def test_a_consumer_killed_in_the_middle_of_a_page_reads_it_again(tmp_path: Path) -> None:
    directory = tmp_path / "graph"
    _feed_graph(directory)
    with assocdb.open(directory) as g:
        with g.batch() as batch:
            for n in range(600):
                batch.assoc_add(n % 50 + 1, "follows", 1000 + n)
        everything = _edges(g)
    command = [sys.executable, "-c", "from assocdb.cli.main import main; main()", "changes"]
    command += [str(directory), "--group", "mail", "--limit", "40"]
    env = {**os.environ, "PYTHONPATH": str(Path(assocdb.__file__).parents[1])}
    child = subprocess.Popen([*command, "--follow"], stdout=subprocess.PIPE, env=env)
    assert child.stdout is not None
    first: list[bytes] = []
    for line in child.stdout:  # killed at its 130th line: in its fourth page, or later
        first.append(line)
        if len(first) == 130:
            child.kill()
            break
    first.extend(child.stdout)  # what it wrote before the kill landed
    child.wait()
    child.stdout.close()
    printed = [line for line in first if line.endswith(b"\n")]  # (a cut line: not printed)
    second = subprocess.run(command, capture_output=True, env=env, check=True).stdout.splitlines()
    read = [_key(line) for line in [*printed, *second]]
    assert Counter(read).keys() == everything.keys()  # nothing skipped
    assert len(second) < len(everything)  # it went on from the group's committed position


def _key(line: bytes) -> tuple[str, int, int]:
    change = msgspec.json.decode(line)
    return change["type"], change["id1"], change["id2"]


def test_a_leg_queued_while_its_shard_was_down_is_recorded_once_applied(
    tmp_path: Path,
) -> None:
    g = assocdb.open(tmp_path / "graph", shards=4, retry=FAST, timeout=0.2, cache=None)
    try:
        g.define_assoc("follows", inverse="followed_by")
        g.enable_feed()
        backend = g.engine.backend
        id2 = next(i for i in range(2, 100) if shard_of(i, 4) != 0)  # (settings: shard 0)
        down = shard_of(id2, 4)
        id1 = next(i for i in range(2, 100) if shard_of(i, 4) not in (0, down))

        def fault(shard: int, sql: str) -> None:
            if shard == down:
                raise sqlite3.OperationalError("disk I/O error (injected)")

        backend.faults.append(fault)  # type: ignore[attr-defined]
        result = g.assoc_add(id1, "follows", id2)
        assert result.status == "queued"
        backend.faults.clear()  # type: ignore[attr-defined]
        assert g.drain(timeout=30)
        assert _edges(g) == {("follows", id1, id2): 1, ("followed_by", id2, id1): 1}
    finally:
        g.close()
