"""SIGKILL a writing process at random moments: nothing acknowledged is lost."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import assocdb

WRITER = Path(__file__).parents[1] / "support" / "crash_writer.py"


def run_and_kill(directory: Path, after: int, *more: str) -> set[tuple[int, int]]:
    """Start the writer, SIGKILL it once it has acknowledged `after` writes; return the
    acknowledged edges (a condition, not a time: a loaded machine only makes it later)."""
    env = {**os.environ, "PYTHONPATH": str(Path(assocdb.__file__).parents[1])}
    child = subprocess.Popen(
        [sys.executable, str(WRITER), str(directory), "8", "100000", *more],
        stdout=subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None
    lines: list[bytes] = []
    for line in child.stdout:
        lines.append(line)
        if len(lines) == after:
            child.send_signal(signal.SIGKILL)
            break
    lines.extend(child.stdout)  # what it printed before the kill landed
    child.wait()
    child.stdout.close()
    acked = set()
    for line in lines:
        if line.endswith(b"\n"):  # a line cut by the kill was not printed: not acknowledged
            id1, id2 = map(int, line.split())
            acked.add((id1, id2))
    return acked


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_acknowledged_writes_survive_sigkill(tmp_path: Path, seed: int) -> None:
    directory = tmp_path / "graph"
    acked = run_and_kill(directory, random.Random(seed).randrange(300, 3000))
    assert len(acked) >= 300
    check_after_crash(directory, acked)


@pytest.mark.parametrize("seed", range(8))
def test_a_crash_inside_a_batchs_shard_transactions_loses_nothing(
    tmp_path: Path, seed: int
) -> None:
    """Killed at a random statement of the shard transactions (of batches of 200, after
    their journal fsync), or between a commit and the fence that syncs it."""
    directory = tmp_path / "graph"
    kill_at = random.Random(seed).randrange(20, 400)
    acked = run_and_kill(directory, 10**9, str(kill_at))  # it kills itself
    check_after_crash(directory, acked)


@pytest.mark.parametrize(
    ("where", "seed"),
    [(where, seed) for where in ("during", "journaled", "unjournaled") for seed in range(3)],
)
def test_a_crash_while_shard_transactions_are_prepared_during_the_journal_fsync(
    tmp_path: Path, where: str, seed: int
) -> None:
    """Killed while a batch's shard transactions are open, prepared during its journal
    commit (`writes.overlap`): at a shard's BEGIN while the journal commits, just after
    the journal's commit returned, or just before it. On reopen the replay makes
    everything right: every acknowledged write is there, the batch in flight is there
    whole if it was journaled and not at all if not, nothing else, counts exact."""
    directory = tmp_path / "graph"
    kill_at = random.Random(seed).randrange(20, 400)
    acked = run_and_kill(directory, 10**9, str(kill_at), where)  # it kills itself
    assert len(acked) % 200 == 0  # whole batches
    start = len(acked)
    flight = {(n // 300 + 1, n % 300 + 1_000) for n in range(start, start + 200)}
    check_after_crash(directory, acked)
    with assocdb.open(directory) as graph:
        stored = {
            (id1, a.id2)
            for id1 in range(1, (start + 200) // 300 + 2)
            for a in graph.assoc_range(id1, "follows", limit=6000)
        }
        mirrored = {
            (a.id2, id2)
            for id2 in range(1_000, 1_300)
            for a in graph.assoc_range(id2, "followed_by", limit=6000)
        }
        assert mirrored == stored
        assert graph.check_inverses() == []
    landed = stored - acked
    if where == "journaled":
        assert landed == flight
    elif where == "unjournaled":
        assert landed == set()  # nothing applied that was not journaled
    else:
        assert landed in (set(), flight)  # the journal's commit decides: all or nothing


def check_after_crash(directory: Path, acked: set[tuple[int, int]]) -> None:
    with assocdb.open(directory) as graph:  # replays what the crash left
        assert graph.drain(timeout=60)
        followers: dict[int, set[int]] = {}
        following: dict[int, set[int]] = {}
        for id1 in {a for a, _ in acked}:
            following[id1] = {a.id2 for a in graph.assoc_range(id1, "follows", limit=6000)}
            assert graph.assoc_count(id1, "follows") == len(following[id1])
        for id2 in {b for _, b in acked}:
            followers[id2] = {a.id2 for a in graph.assoc_range(id2, "followed_by", limit=6000)}
            assert graph.assoc_count(id2, "followed_by") == len(followers[id2])
        missing = {(a, b) for a, b in acked if b not in following[a]}
        hanging = {(a, b) for a, b in acked if a not in followers[b]}
        assert missing == set()
        assert hanging == set()
        assert graph.check_counts() == []
        assert graph.queue_stats().depth == 0


LOADER = Path(__file__).parents[1] / "support" / "crash_loader.py"


@pytest.mark.parametrize("seed", range(3))
def test_a_named_bulk_load_killed_at_random_resumes_and_stores_everything(
    tmp_path: Path, seed: int
) -> None:
    directory, count = tmp_path / "graph", 2_000
    kill_at = random.Random(seed).randrange(250, count)
    env = {**os.environ, "PYTHONPATH": str(Path(assocdb.__file__).parents[1])}
    loader = [sys.executable, str(LOADER), str(directory), str(count), str(kill_at)]
    assert subprocess.run(loader, env=env, check=False).returncode == -signal.SIGKILL
    with assocdb.open(directory) as g:
        [(name, stored)] = g.engine.journal.loads()
        assert name == "crash"
        assert stored % 100 == 0
        assert 100 <= stored < kill_at
        edges = [(n % 97 + 1, "follows", n + 1000, n) for n in range(1, count + 1)]
        assert g.bulk_load(edges, workers=2, name="crash") == count
        assert g.engine.journal.loads() == []
        for id1, _, id2, time in edges:
            forward = g.assoc_edge(id1, "follows", id2)
            assert forward is not None
            assert forward.time == time
            assert g.assoc_contains(id2, "followed_by", id1)
        assert sum(g.assoc_count(n, "follows") for n in range(1, 98)) == count
        assert g.check_counts() == []
        assert g.check_inverses() == []
