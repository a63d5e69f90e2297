"""Rebalancing a map (`storage.rebalance`, `assocdb shards rebalance`) on SQLite
directories and MariaDB: the plan runs to the end, and a rebalance SIGKILLed after
its first move resumes from the saved plan and loses nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from assocdb import Graph
from assocdb.cli.main import main
from assocdb.storage.rebalance import make_plan, plan_file, rebalance, saved
from assocdb.storage.replica_verify import verify_replicas
from assocdb.storage.shardmap_config import load, locked
from tests.storage.test_moves import ROOT, add_backend, fill
from tests.storage.test_shardmap import (  # noqa: F401 (make_map is a fixture)
    MapMaker,
    cluster,
    make_map,
    open_cluster,
)
from tests.support.helpers import wait_until


@pytest.fixture
def graph(make_map: MapMaker) -> Iterator[Graph]:  # noqa: F811 (the fixture)
    g = open_cluster(make_map, cache=None)
    for n in range(1, 200):  # rows on every shard
        g.assoc_add(n, "follows", n + 1000, time=n)
    fill(g)
    yield g
    g.close()


def new_server(graph: Graph) -> Path:
    path = cluster(graph).source
    assert path is not None
    add_backend(path, "db4")
    return path


def assert_whole(graph: Graph) -> None:
    backend = cluster(graph)
    backend.reload()
    assert graph.drain(timeout=30)
    for n in range(1, 200):
        assert graph.assoc_contains(n, "follows", n + 1000)
    assert graph.check_counts() == []
    assert verify_replicas(backend).differences == []


@pytest.mark.parametrize("parallel", [1, 2])
def test_a_plan_runs_to_the_end_and_evens_out_the_servers(graph: Graph, parallel: int) -> None:
    path = new_server(graph)
    chosen = make_plan(path, "db4")
    assert len(chosen.steps) >= 2
    assert chosen.seconds(0) > 0
    finished = rebalance(path, chosen, settle=0, parallel=parallel)
    assert finished.remaining == []
    assert not plan_file(path).exists()
    after = load(path)
    for step in chosen.steps:
        assert [r.backend for r in after.replicas[step.shard]].count("db4") == 1
    assert make_plan(path, "db4").steps == []  # balanced: a new plan moves nothing
    assert_whole(graph)


def test_the_dry_run_shows_the_plan_and_moves_nothing(
    graph: Graph, capsys: pytest.CaptureFixture[str]
) -> None:
    path = new_server(graph)
    before = path.read_text()
    main.main(["shards", "rebalance", str(path), "--to", "db4", "--dry-run"],
              standalone_mode=False)  # fmt: skip
    out = capsys.readouterr().out
    assert "db4" in out
    assert "moves to run" in out
    assert path.read_text() == before
    assert not plan_file(path).exists()


def test_a_rebalance_killed_after_its_first_move_resumes_and_loses_nothing(
    graph: Graph,
) -> None:
    path = new_server(graph)
    planned = make_plan(path, "db4").steps
    assert len(planned) >= 2
    command = [sys.executable, "-m", "assocdb", "shards", "rebalance", str(path), "--to", "db4"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    log_path = path.parent / "rebalance.log"
    with log_path.open("wb") as log:
        runner = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        try:

            def first_move_done() -> bool:
                # Under the map's lock the rebalance can neither save its plan nor move a
                # phase on: what is seen is what is killed.
                with locked(path):
                    found = saved(path)
                    if found is None or len(found.remaining) == len(found.steps):
                        assert runner.poll() is None, log_path.read_text(errors="replace")
                        return False
                    assert found.remaining, "the rebalance finished before it was killed"
                    runner.send_signal(signal.SIGKILL)
                    runner.wait()
                    return True

            wait_until(first_move_done, patience=300)  # a safety net: the condition decides
        finally:
            if runner.poll() is None:
                runner.kill()
                runner.wait()
    assert runner.returncode == -signal.SIGKILL
    interrupted = saved(path)
    assert interrupted is not None
    done_before = [s for s in interrupted.steps if s.done]
    assert done_before
    again = subprocess.run(command, env=env, capture_output=True, timeout=300, check=False)
    assert again.returncode == 0, again.stderr.decode()
    out = again.stdout.decode()
    assert f"resuming the saved plan: {len(done_before)} of {len(planned)} moves done" in out
    assert not plan_file(path).exists()
    after = load(path)
    assert after.moves == []
    assert [(s.shard, s.source, s.target) for s in interrupted.steps] == [
        (s.shard, s.source, s.target) for s in planned
    ]
    for step in planned:
        names = [r.backend for r in after.replicas[step.shard]]
        assert "db4" in names
        assert step.source not in names
    assert_whole(graph)
