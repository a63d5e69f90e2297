"""The docs' examples run as written: every `curl` line of the README and of
docs/api.md against `assocdb serve` over the demo graph (what `make run`
serves), and the index example of docs/api.md in process. A `# → …` line
after an example is what it must print (a trailing `…`: what it must start
with)."""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import assocdb
from tests.support.http_server import Server

ROOT = Path(__file__).resolve().parents[1]
ARROW = "# → "


def examples(text: str, start: str) -> list[tuple[str, str | None]]:
    """(line, expected output or None) for each line of `text` that starts with `start`
    inside a fenced code block."""
    found: list[tuple[str, str | None]] = []
    lines = text.splitlines()
    fenced = False
    for n, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif fenced and line.startswith(start):
            after = lines[n + 1] if n + 1 < len(lines) else ""
            found.append((line, after[len(ARROW) :] if after.startswith(ARROW) else None))
    return found


def check_output(output: str, expected: str | None, what: str) -> None:
    if expected is None:
        return
    if expected.endswith("…"):
        assert output.startswith(expected[:-1]), what
    else:
        assert output == expected, what


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("docs") / "demo"
    loaded = subprocess.run(
        [sys.executable, "-m", "assocdb", "demo", str(directory)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert loaded.returncode == 0, loaded.stderr
    running = Server(directory, False)  # as `make run` serves it: no tokens, loopback
    yield running
    running.stop()


@pytest.mark.parametrize(("doc", "at_least"), [("README.md", 2), ("docs/api.md", 7)])
def test_the_curl_examples_run_as_written(demo: Server, doc: str, at_least: int) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    found = examples((ROOT / doc).read_text(), "curl ")
    assert len(found) >= at_least
    for line, expected in found:
        assert "localhost:8080" in line, line
        command = line.replace("localhost:8080", f"localhost:{demo.port}")
        run = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, timeout=60, check=False
        )
        assert run.returncode == 0, (line, run.stderr)
        check_output(run.stdout.rstrip("\n"), expected, line)


def test_the_index_example_returns_what_it_shows(tmp_path: Path) -> None:
    text = (ROOT / "docs/api.md").read_text()
    block = text[text.index('g.define_object("user")\ng.obj_add("user", {"name": "ada"') :]
    block = block[: block.index("```")]
    checked = 0
    with assocdb.open(tmp_path / "graph", shards=4) as g:
        scope: dict[str, object] = {"g": g}
        pending: list[str] = []
        for line in block.splitlines():
            code, arrow, expected = line.partition(ARROW.strip() + " ")
            if not arrow:
                pending.append(line)
                continue
            exec("\n".join(pending), scope)
            pending = []
            assert repr(eval(code, scope)) == expected.strip(), line
            checked += 1
        exec("\n".join(pending), scope)
    assert checked == 3


def test_the_change_feed_examples_print_what_they_show(tmp_path: Path) -> None:
    """docs/api.md's two change feed examples, run in turn on one graph: each `# → ` line
    is what the `print`s of the example before it printed."""
    text = (ROOT / "docs/api.md").read_text()
    blocks = []
    for title in ('### Example: notifications ("Ada followed you")', "### Example: keeping"):
        block = text[text.index(title) :]
        block = block[block.index("```python\n") + len("```python\n") :]
        blocks.append(block[: block.index("```")])
    with assocdb.open(tmp_path / "graph", shards=4) as g:
        scope: dict[str, object] = {"g": g}
        for block in blocks:
            code, expected = [], []
            for line in block.splitlines():
                if line.startswith(ARROW):
                    expected.append(line[len(ARROW) :])
                else:
                    code.append(line)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec("\n".join(code), scope)
            assert out.getvalue().splitlines() == expected
