"""Shared fixtures: every Graph test runs against every configured backend.

SQLite always runs. MySQL/MariaDB runs when ASSOCDB_TEST_MYSQL_URL is set
(`.ci/run` always sets it); without it those cases skip cleanly.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import assocdb
from assocdb import Graph

OpenGraph = Callable[..., Graph]

BACKENDS = ["sqlite"]


@pytest.fixture(params=BACKENDS)
def open_graph(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenGraph]:
    """A factory of fresh, empty graphs on the backend under test."""
    opened: list[Graph] = []
    counter = itertools.count()

    def make(shards: int = 4) -> Graph:
        graph = assocdb.open(tmp_path / f"graph{next(counter)}", shards=shards)
        opened.append(graph)
        return graph

    yield make
    for graph in opened:
        graph.close()


@pytest.fixture
def graph(open_graph: OpenGraph) -> Graph:
    """A fresh graph with the types most tests use."""
    g = open_graph()
    g.define_assoc("follows", inverse="followed_by")
    g.define_assoc("friend", symmetric=True)
    g.define_assoc("likes", limit=100)
    g.define_assoc("blocks")
    g.define_object("user")
    g.define_object("post")
    return g
