"""A user's mistakes on the command line: one `Error:` line, a non-zero exit, nothing
created or changed; read-only commands never create a graph."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import assocdb
from assocdb.cli.main import main


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def one_error_line(result: Result, status: int = 1) -> str:
    assert result.exit_code == status, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = [x for x in result.output.strip().splitlines() if not x.startswith("importing")]
    assert len(lines) == 1, result.output  # (an import's progress bar may stand before it)
    assert lines[0].startswith("Error: "), result.output
    return lines[0]


def snapshot(path: Path) -> dict[str, str]:
    """Every file under `path` with a hash of its bytes (empty if it does not exist)."""
    if not path.exists():
        return {}
    return {
        str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(path.rglob("*"))
        if f.is_file()
    }


@pytest.fixture
def graph_dir(tmp_path: Path) -> Path:
    path = tmp_path / "g"
    with assocdb.open(path, shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.assoc_add(1, "follows", 2, time=5)
    return path


def test_import_of_an_unknown_type_or_a_bad_id_names_the_line(
    graph_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "edges.txt"
    source.write_text("# a comment, as SNAP files have\n\n3 follows 4\r\n3 likes 5\n")
    message = one_error_line(run("import", str(graph_dir), str(source)))
    assert "line 4" in message
    assert "no association type 'likes'" in message
    assert "the 1 edges before it were stored" in message
    source.write_text("3 follows 4\n3 follows x\n")
    assert "line 2" in one_error_line(run("import", str(graph_dir), str(source)))
    source.write_text("3 follows 0\n")
    assert "id2 must be" in one_error_line(run("import", str(graph_dir), str(source)))
    with assocdb.open(graph_dir) as g:
        assert [a.id2 for a in g.assoc_range(3, "follows")] == [4]


def test_import_of_a_truncated_gzip_file_is_one_line_naming_it(
    graph_dir: Path, tmp_path: Path
) -> None:
    whole = gzip.compress(b"".join(b"%d follows %d\n" % (n, n + 1) for n in range(3, 20_000)))
    source = tmp_path / "edges.txt.gz"
    source.write_bytes(whole[: len(whole) // 2])  # click took its EOFError for Ctrl-D: "Aborted!"
    message = one_error_line(run("import", str(graph_dir), str(source)))
    assert f"{source} is not a whole gzip file" in message
    found = re.search(r"the ([\d,]+) edges before it were stored", message)
    assert found is not None, message
    stored = int(found.group(1).replace(",", ""))
    assert 0 < stored < 20_000 - 3
    with assocdb.open(graph_dir, create=False) as g:
        assert g.assoc_count(3, "follows") == 1


def test_import_skips_comments_and_blank_lines_and_takes_crlf(
    graph_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "snap.txt"
    source.write_bytes(b"# Directed graph\r\n# Nodes: 3\r\n\r\n10 11\r\n10 12\r\n")
    result = run("import", str(graph_dir), str(source), "--type", "follows")
    assert result.exit_code == 0, result.output
    assert "imported 2 edges" in result.output
    with assocdb.open(graph_dir) as g:
        assert g.assoc_count(10, "follows") == 2


def test_init_mistakes(graph_dir: Path, tmp_path: Path) -> None:
    before = snapshot(graph_dir)
    assert one_error_line(run("init", str(graph_dir), "--shards", "4")) == (
        f"Error: {graph_dir} holds a graph with 2 shards, not 4; the shard count is fixed "
        f"when a graph is created: run `assocdb init {graph_dir} --shards 2`"
    )
    assert snapshot(graph_dir) == before
    not_toml = tmp_path / "schema.toml"
    not_toml.write_text("this is [not toml")
    fresh = tmp_path / "fresh"
    one_error_line(run("init", str(fresh), "--schema", str(not_toml)))
    assert not fresh.exists()
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    one_error_line(run("init", str(fresh), "--schema", str(binary)))
    assert not fresh.exists()
    one_error_line(run("init", "/proc/assocdb-cannot-be-here"))


def test_schema_conflicts_and_bad_limits(graph_dir: Path, tmp_path: Path) -> None:
    conflicting = tmp_path / "schema.toml"
    conflicting.write_text('[assoc.follows]\ninverse = "follower_of"\n')
    before = snapshot(graph_dir)
    one_error_line(run("schema", str(graph_dir), str(conflicting)))
    usage = run("queue", "errors", str(graph_dir), "--limit", "0")
    assert usage.exit_code == 2  # click's usage error: the usage, then one Error line
    assert usage.output.strip().splitlines()[-1].startswith("Error: Invalid value for '--limit'")
    assert snapshot(graph_dir) == before


def test_timeline_messages_speak_in_commands(graph_dir: Path) -> None:
    message = one_error_line(run("timeline", "home", str(graph_dir), "2"))
    assert "assocdb timeline setup" in message
    assert "g." not in message


@pytest.mark.parametrize("command", ["status", "build", "check", "drop"])
def test_an_unknown_index_is_told_in_commands(graph_dir: Path, command: str) -> None:
    message = one_error_line(run("index", command, str(graph_dir), "nosuch"))
    assert "no index 'nosuch'; define it with `assocdb index define" in message
    assert "define_index()" not in message


@pytest.mark.parametrize(
    "command",
    [
        lambda d: ["export", d],
        lambda d: ["check", d],
        lambda d: ["queue", "stats", d],
        lambda d: ["queue", "errors", d],
        lambda d: ["schema", d],
        lambda d: ["index", "status", d],
        lambda d: ["timeline", "home", d, "1"],
        lambda d: ["import", d, os.devnull],
    ],
)
def test_read_only_commands_never_create_a_graph(
    tmp_path: Path, command: Callable[[str], list[str]]
) -> None:
    empty = tmp_path / "not-a-graph"
    empty.mkdir()
    (empty / "notes.txt").write_text("mine")
    before = snapshot(empty)
    message = one_error_line(run(*command(str(empty))))
    assert message == f"Error: no graph at {empty} (create one with `assocdb init {empty}`)"
    assert snapshot(empty) == before
    assert sorted(p.name for p in empty.iterdir()) == ["notes.txt"]


def test_a_url_assocdb_does_not_know_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    message = one_error_line(run("init", "oracle://scott@127.0.0.1:1521/g"))
    assert "unknown URL scheme 'oracle'" in message
    assert list(tmp_path.iterdir()) == []


def test_an_empty_directory_name_is_one_line_and_creates_nothing_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # "" was the current directory: init made a graph in it
    assert "got ''" in one_error_line(run("init", ""))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("mysql://root@127.0.0.1:notaport/g?journal=j.db", "Port could not be cast"),
        ("postgresql://root@127.0.0.1:99999/g?journal=j.db", "Port out of range"),
        ("mysql://root@[::1/g?journal=j.db", "Invalid IPv6 URL"),
    ],
)
def test_a_server_url_that_does_not_parse_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, complaint: str
) -> None:
    monkeypatch.chdir(tmp_path)  # (urllib's ValueError was a traceback)
    message = one_error_line(run("check", url))
    assert message.startswith("Error: bad ")
    assert complaint in message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("scheme", ["postgresql", "mysql"])
def test_a_server_that_refuses_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    # libpq's message runs over several lines, with a hint; the error is one line.
    monkeypatch.chdir(tmp_path)
    message = one_error_line(run("check", f"{scheme}://nobody@127.0.0.1:1/g?journal=j.db"))
    assert "connecting to 127.0.0.1:1" in message


def test_check_reports_progress_and_a_ready_index_says_so(graph_dir: Path) -> None:
    checked = CliRunner().invoke(main, ["check", str(graph_dir)])
    assert checked.exit_code == 0
    assert "counts, by shard" in checked.stderr
    assert checked.stdout.strip() == "found 0 wrong counts and 0 hanging edges"
    with assocdb.open(graph_dir) as g:
        g.define_object("user")
        g.obj_add("user", {"name": "ada"})
        g.define_index("user_by_name", "user", ["name"])
    assert run("index", "build", str(graph_dir), "user_by_name").exit_code == 0
    again = run("index", "build", str(graph_dir), "user_by_name")
    assert again.exit_code == 0
    assert (
        again.output.strip() == "index user_by_name is ready: every object of its type is indexed"
    )


def test_export_into_a_pipe_closed_early_stops_quietly(tmp_path: Path) -> None:
    # `assocdb export DIR | head` printed "Error: Broken pipe".
    path = tmp_path / "g"
    with assocdb.open(path, shards=2) as g:
        g.define_assoc("follows")
        g.bulk_load((1, "follows", n, n) for n in range(2, 20_000))  # more than a pipe holds
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    command = [sys.executable, "-m", "assocdb", "export", str(path)]
    export = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert export.stdout is not None
    assert export.stderr is not None
    assert export.stdout.readline().startswith(b"1 follows")
    export.stdout.close()
    with export.stderr:
        assert export.stderr.read() == b""
    assert export.wait() == 1


@pytest.mark.parametrize("command", ["serve", "serve-thrift"])
def test_serve_on_a_missing_directory_refuses_and_creates_nothing(
    tmp_path: Path, command: str
) -> None:
    # `assocdb serve nodir11` (a typo) created an empty graph and served it. A process,
    # not CliRunner: were the graph served, its first line says so (and it is stopped).
    pytest.importorskip("thriftpy2" if command == "serve-thrift" else "uvicorn")
    typo = tmp_path / "nodir11"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    served = subprocess.Popen(
        [sys.executable, "-m", "assocdb", command, str(typo), "--port", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert served.stderr is not None
    with served.stderr:
        first = served.stderr.readline()
        if first.startswith("serving"):
            served.terminate()
        rest = served.stderr.read()
    assert served.wait() == 1
    assert first == f"Error: no graph at {typo} (create one with `assocdb init {typo}`)\n"
    assert rest == ""
    assert not typo.exists()


@pytest.mark.parametrize("compressed", [False, True])
def test_import_reads_a_pipe_as_a_stream(graph_dir: Path, compressed: bool) -> None:
    # `assocdb import DIR <(zcat edges.gz)` said "Error: Illegal seek".
    import threading

    lines = b"# from a pipe\n3 follows 4\n3 follows 5\n6 follows 3\n"
    read_end, write_end = os.pipe()

    def feed() -> None:
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(gzip.compress(lines) if compressed else lines)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        source = f"/dev/fd/{read_end}"
        if compressed:  # (a .gz name is how gzip input is told apart)
            os.symlink(source, graph_dir.parent / "edges.gz")
            source = str(graph_dir.parent / "edges.gz")
        result = run("import", str(graph_dir), source)
    finally:
        feeder.join()
        os.close(read_end)
    assert result.exit_code == 0, result.output
    assert result.output == "imported 3 edges\n"
    with assocdb.open(graph_dir) as g:
        assert g.assoc_count(3, "follows") == 2


def test_check_prints_its_summary_first_then_the_first_problems(tmp_path: Path) -> None:
    # 43k hanging edges scrolled by before the summary.
    import sqlite3

    directory = tmp_path / "g"
    with assocdb.open(directory, shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
        for n in range(2, 32):
            g.assoc_add(1, "follows", n, time=n)
    for shard in directory.glob("shard-*.db"):  # the inverse rows are lost
        with sqlite3.connect(shard) as db:
            db.execute("DELETE FROM edges WHERE id1 != 1")
    found = CliRunner().invoke(main, ["check", str(directory)])
    assert found.exit_code == 1
    lines = found.stdout.splitlines()
    assert lines[0] == "found 30 wrong counts and 30 hanging edges"
    assert len(lines) == 1 + 20 + 1
    assert lines[-1] == "… and 40 more (--all lists every one)"
    every = CliRunner().invoke(main, ["check", str(directory), "--all"]).stdout.splitlines()
    assert every[0] == lines[0]
    assert every[1:21] == lines[1:21]
    assert len(every) == 1 + 60
    assert sum(line.startswith("hanging edge 1 -") for line in every) == 30


def test_init_on_a_shard_map_of_another_shard_count_says_which_to_give(tmp_path: Path) -> None:
    from tests.support.shardmaps import write_map

    path = write_map(tmp_path)  # 6 shards; init's default is 16
    assert one_error_line(run("init", str(path))) == (
        f"Error: {path} places 6 shards, not 16; the map fixes the shard count: "
        f"run `assocdb init {path} --shards 6`"
    )
    advised = run("init", str(path), "--shards", "6")
    assert advised.exit_code == 0, advised.output
    assert advised.output == f"{path}: 6 shards, 0 association types\n"


def test_a_negative_number_taken_for_an_option_says_to_put_dashes_before_it(
    graph_dir: Path,
) -> None:
    # `assocdb timeline home DIR -1` said only "No such option '-1'".
    taken = run("timeline", "home", str(graph_dir), "-1")
    assert taken.exit_code == 2
    assert taken.output.splitlines()[-1] == (
        "Error: No such option '-1'. To give the number as an argument, put -- before it: "
        "main timeline home … -- -1"
    )
    one_error_line(run("timeline", "user", str(graph_dir), "--", "-1"))  # the command answers
    unknown = run("timeline", "home", str(graph_dir), "--nope")
    assert "put -- before it" not in unknown.output
