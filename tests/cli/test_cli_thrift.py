"""`assocdb serve-thrift`: mistakes are one `Error:` line before anything is served."""

from __future__ import annotations

from pathlib import Path

import pytest

import assocdb
from tests.cli.test_cli_errors import one_error_line, run

pytest.importorskip("thriftpy2")


@pytest.fixture
def directory(tmp_path: Path) -> str:
    with assocdb.open(tmp_path / "g", shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
    return str(tmp_path / "g")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--graph", "follows"], "a graph is N=TYPE"),
        (["--graph", "0=follows"], "graph ids are 1 to"),
        (["--graph", "1=follows", "--graph", "1=follows"], "graph 1 is given twice"),
        (["--graph", "1=folows"], "folows"),
    ],
)
def test_bad_graph_tables(directory: str, options: list[str], message: str) -> None:
    assert message in one_error_line(run("serve-thrift", directory, "--port", "0", *options))


def test_no_authentication_means_loopback_only(directory: str) -> None:
    line = one_error_line(run("serve-thrift", directory, "--host", "0.0.0.0"))
    assert "--insecure" in line
