"""Ctrl-C during `assocdb import` and `assocdb demo`: one `Error:` line that says what is
stored and how to go on, and a next run that finishes the work."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import assocdb
from assocdb.api import assoc_writes
from assocdb.cli import main as cli
from assocdb.cli.datasets import EGO_FACEBOOK_FRIENDSHIPS, EGO_FACEBOOK_PEOPLE, ego_facebook
from assocdb.cli.main import main
from tests.cli.test_cli_errors import one_error_line, run, snapshot


def _friend_rows(directory: Path) -> int:
    """Every stored friendship row, each direction counted (what a whole demo has twice)."""
    with assocdb.open(directory, create=False) as g:
        return sum(g.assoc_count(n, "friend") for n in range(1, EGO_FACEBOOK_PEOPLE + 1))


def _stopped_after(edges: int) -> Iterator[tuple[int, int]]:
    """ego-Facebook's first `edges` friendships, then Ctrl-C (as it arrives mid-load)."""
    for n, pair in enumerate(ego_facebook()):
        if n == edges:
            raise KeyboardInterrupt
        yield pair


def test_a_demo_stopped_mid_load_is_finished_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A half-loaded demo graph was taken for a whole one: wrong answers, hanging edges.
    directory = tmp_path / "demo"
    monkeypatch.setattr(assoc_writes, "BULK_BATCH", 20_000)  # rounds stored before the stop
    monkeypatch.setattr(cli, "ego_facebook", lambda: _stopped_after(50_000))
    message = one_error_line(run("demo", str(directory)))
    assert message == (
        "Error: interrupted: the load is not finished, so the demo has no answers yet; "
        f"run `assocdb demo {directory}` again to finish it"
    )
    assert 0 < _friend_rows(directory) < 2 * EGO_FACEBOOK_FRIENDSHIPS
    monkeypatch.undo()
    again = run("demo", str(directory))
    assert again.exit_code == 0, again.output
    assert again.output.startswith(
        "finishing the load an earlier run did not finish\nloaded 88,234 friendships"
    )
    assert "person 1 has 347 friends" in again.output
    assert "16 mutual friends of 1 and 2" in again.output
    assert _friend_rows(directory) == 2 * EGO_FACEBOOK_FRIENDSHIPS
    checked = CliRunner().invoke(main, ["check", str(directory)])
    assert checked.stdout.startswith("found 0 wrong counts and 0 hanging edges"), checked.stdout
    third = run("demo", str(directory))
    assert "loaded" not in third.output
    assert "person 1 has 347 friends" in third.output


def test_the_demo_refuses_a_graph_it_did_not_load(tmp_path: Path) -> None:
    directory = tmp_path / "mine"
    with assocdb.open(directory, shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.assoc_add(1, "follows", 2, time=5)
    before = snapshot(directory)
    message = one_error_line(run("demo", str(directory)))
    assert message == (
        f"Error: {directory} holds a graph that `assocdb demo` did not load: give the demo "
        "a directory of its own (assocdb demo data/demo)"
    )
    assert snapshot(directory) == before


def test_a_whole_demo_graph_from_before_the_demo_marked_its_graphs_is_taken(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "demo"
    with assocdb.open(directory) as g:  # what `assocdb demo` did before it marked its graphs
        g.define_assoc("friend", symmetric=True)
        base = 1_600_000_000_000
        g.bulk_load((a, "friend", b, base + n) for n, (a, b) in enumerate(ego_facebook()))
    result = run("demo", str(directory))
    assert result.exit_code == 0, result.output
    assert "loaded" not in result.output
    assert "16 mutual friends of 1 and 2" in result.output


def test_an_import_stopped_mid_file_says_how_much_is_stored_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "g"
    with assocdb.open(directory, shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
    source = tmp_path / "edges.txt"
    source.write_text("".join(f"{n} {n + 1}\n" for n in range(1, 5001)))
    monkeypatch.setattr(assoc_writes, "BULK_BATCH", 1000)
    edge = cli._edge

    def stopped(line: str, number: int, atype: str | None) -> object:
        if number == 3000:
            raise KeyboardInterrupt  # Ctrl-C while line 3,000 is read
        return edge(line, number, atype)

    monkeypatch.setattr(cli, "_edge", stopped)
    args = ["import", str(directory), str(source), "--type", "follows"]
    message = one_error_line(run(*args))
    stored = message.removeprefix("Error: interrupted: the first ").split(" edges")[0]
    assert message == (
        f"Error: interrupted: the first {stored} edges of {source} are stored; "
        "run the same command again to resume"
    )
    assert 0 < int(stored.replace(",", "")) < 3000
    monkeypatch.setattr(cli, "_edge", edge)
    again = run(*args)
    assert again.exit_code == 0, again.output
    assert f"resuming: the first {stored} edges are stored" in again.output
    assert "imported 5,000 edges" in again.output


def _edge_rows(directory: Path) -> int:
    """Edge rows in the graph's shard files (a shard's tables are made when first used)."""
    total = 0
    for shard in directory.glob("shard-*.db"):
        with (
            sqlite3.connect(f"file:{shard}?mode=ro", uri=True) as db,
            contextlib.suppress(sqlite3.OperationalError),  # no table yet
        ):
            total += db.execute("SELECT count(*) FROM edges").fetchone()[0]
    return total


def test_ctrl_c_during_an_import_from_a_pipe_is_one_line_from_the_importer_only(
    tmp_path: Path,
) -> None:
    """A terminal's Ctrl-C goes to the whole foreground process group: the bulk-load
    workers printed KeyboardInterrupt tracebacks, then the importer "Aborted!"."""
    directory = tmp_path / "g"
    with assocdb.open(directory, shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
    fifo = tmp_path / "edges"
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    command = [sys.executable, "-m", "assocdb", "import", str(directory), str(fifo)]
    importer = subprocess.Popen(
        [*command, "--type", "follows"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a terminal's job is
    )
    writer = None
    while writer is None and importer.poll() is None:  # until the importer opens the pipe
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.01)
    assert writer is not None, importer.communicate()
    os.set_blocking(writer, True)
    # Enough for the workers to start and a round of rows to be stored; the pipe stays
    # open, so the importer waits for more when the signal comes.
    edges = assoc_writes.BULK_PARALLEL + assoc_writes.BULK_BATCH // 2
    try:
        os.write(writer, "".join(f"{n} {n + 1}\n" for n in range(1, edges + 1)).encode())
        while _edge_rows(directory) == 0 and importer.poll() is None:
            time.sleep(0.05)
        os.killpg(importer.pid, signal.SIGINT)  # Ctrl-C: to the whole group
        _, errors = importer.communicate(timeout=120)  # (only a hang's guard)
    finally:
        os.close(writer)
        if importer.poll() is None:
            importer.kill()
    assert errors.decode().splitlines() == [
        f"Error: interrupted: some edges of {fifo} may be stored; a stream cannot resume: "
        "import all of it again (what is stored does not change)"
    ]
    assert importer.returncode == 1
    checked = CliRunner().invoke(main, ["check", str(directory)])
    assert checked.exit_code == 0, checked.output  # whole rounds: no edge without its mirror


def test_an_import_from_standard_input_stopped_says_to_import_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "g"
    with assocdb.open(directory, shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
    edge = cli._edge

    def stopped(line: str, number: int, atype: str | None) -> object:
        if number == 3:
            raise KeyboardInterrupt  # Ctrl-C while line 3 is read
        return edge(line, number, atype)

    monkeypatch.setattr(cli, "_edge", stopped)
    result = CliRunner().invoke(
        main, ["import", str(directory), "-", "--type", "follows"], input="1 2\n2 3\n3 4\n"
    )
    assert one_error_line(result) == (
        "Error: interrupted: some edges of standard input may be stored; a stream cannot "
        "resume: import all of it again (what is stored does not change)"
    )
