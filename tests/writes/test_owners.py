"""Claims on journal jobs die with their process (`writes/owners.py`, issue 35 item 1).

A process that exits while it holds a job (a long job walking on, a retrier's
claim) must not keep it from every other process for `claim_hold` seconds:
it releases its claims when it exits, and when it cannot (SIGKILL) the next
process sees its owner lock free and takes the job at once. Each scenario is
a real child process; the parent waits for conditions, never for durations.
"""

from __future__ import annotations

import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import assocdb
from assocdb.cli.main import main
from assocdb.writes.applier import RetryPolicy
from assocdb.writes.journal import Journal
from assocdb.writes.owners import Owners

CLAIM_HOLD = RetryPolicy().claim_hold

# The child opens the graph, journals a job and holds it as a long job does while
# its thread walks on (node_archive's: `Journal.progress` with the claim hold), then
# ends as told: returning without close(), raising, SIGKILLed, or waiting on stdin.
CHILD = """
import os, signal, sys
import assocdb
from assocdb.core.ops import EdgeWrite, Rows, Stored
from assocdb.writes.applier import encode

directory, how = sys.argv[1], sys.argv[2]
g = assocdb.open(directory, shards=4)
g.define_assoc("follows")
kind = g.engine.assoc_type("follows")
rows = Rows(edges=EdgeWrite(kind.id, None, 1, 2, 0, 1_000_000, time=7).resolve(Stored()))
journal = g.engine.journal
job = journal.append(encode(rows))
journal.progress(job, encode(rows), hold=g.engine.applier.policy.claim_hold)
print(job, flush=True)
if how == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if how == "raise":
    raise RuntimeError("the script fails after writing")
if how == "wait":
    sys.stdin.read()
"""


def _child(directory: Path, how: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _held_job(child: subprocess.Popen[str]) -> int:
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.strip().isdigit(), child.stderr.read() if child.stderr else line
    return int(line)


def _run_child(directory: Path, how: str) -> tuple[int, int]:
    """Run the child to its end: the job it held, and its return code."""
    with _child(directory, how) as child:
        job = _held_job(child)
        child.communicate(timeout=60)
    return job, child.returncode


def _claimed_by(directory: Path, job: int) -> str | None:
    with sqlite3.connect(directory / "journal.db") as conn:
        row = conn.execute("SELECT claimed_by FROM jobs WHERE id = ?", (job,)).fetchone()
    return None if row is None else row[0]


@pytest.mark.parametrize("how", ["exit", "raise", "kill"])
def test_a_job_held_by_a_process_that_ended_is_taken_at_once(tmp_path: Path, how: str) -> None:
    directory = tmp_path / "g"
    job, returncode = _run_child(directory, how)
    assert returncode == {"exit": 0, "raise": 1, "kill": -signal.SIGKILL}[how]
    if how == "kill":  # no chance to release: the claim stays, its owner lock is free
        assert _claimed_by(directory, job) is not None
    else:  # released at exit (atexit), though close() was never called
        assert _claimed_by(directory, job) is None
    journal = Journal(directory / "journal.db")
    try:  # claimable now, not claim_hold seconds from now
        assert [j.id for j in journal.claim_due(time.time(), 10, CLAIM_HOLD)] == [job]
    finally:
        journal.close()


def test_the_next_process_drains_a_killed_process_s_job(tmp_path: Path) -> None:
    """The README's second run: the job of a process that died is applied, promptly."""
    directory = tmp_path / "g"
    _, returncode = _run_child(directory, "kill")
    assert returncode == -signal.SIGKILL
    with assocdb.open(directory, create=False) as g:
        assert g.drain(timeout=CLAIM_HOLD / 2)  # old code: held for the whole claim_hold
        edge = g.assoc_edge(1, "follows", 2)
        assert edge is not None
        assert edge.time == 7


def test_queue_commands_say_who_holds_a_job_and_retry_takes_a_dead_one(tmp_path: Path) -> None:
    directory = tmp_path / "g"
    runner = CliRunner()
    with _child(directory, "wait") as child:
        job = _held_job(child)
        stats = runner.invoke(main, ["queue", "stats", str(directory)])
        assert stats.exit_code == 0, stats.output
        assert "running          1" in stats.output
        held = f"held             job {job} (running rows) by pid {child.pid} on "
        assert held + socket.gethostname() + " since " in stats.output
        errors = runner.invoke(main, ["queue", "errors", str(directory)])
        assert "no jobs in the error queue (0 new, 1 running: see `assocdb queue stats`)" in (
            errors.output
        )
        # a live process's job is left to it: retry says so instead of waiting it out
        alive = runner.invoke(main, ["queue", "retry", str(directory)])
        assert alive.exit_code == 0, alive.output
        assert "still queued: 1" in alive.output
        assert f"by pid {child.pid} on" in alive.output
        child.kill()
        child.communicate(timeout=60)
    retry = runner.invoke(main, ["queue", "retry", str(directory)])
    assert retry.exit_code == 0, retry.output
    assert retry.output.endswith("the queue is empty\n")


def test_an_owner_is_alive_while_its_lock_is_held(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    first, second = Owners(path), Owners(path)
    assert first.owner != second.owner
    assert second.alive(first.owner)
    assert first.alive(second.owner)
    first.close()
    assert not second.alive(first.owner)
    # a reused pid is another owner: only the token's own lock counts
    host, pid = socket.gethostname(), first.owner.split(":")[-2]
    assert not second.alive(f"{host}:{pid}:000000000000")
    assert second.alive(f"another-host:{pid}:000000000000")  # cannot tell: wait out the hold
    second.close()
