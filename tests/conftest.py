"""Shared fixtures: every Graph test runs against every configured backend.

SQLite always runs. MySQL/MariaDB runs when ASSOCDB_TEST_MYSQL_URL is set,
PostgreSQL when ASSOCDB_TEST_POSTGRES_URL is (`.ci/run` always sets both);
without them those cases skip cleanly (see `tests/support/stores.py`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from assocdb import Graph
from tests.support.stores import BACKENDS, Stores

OpenGraph = Callable[..., Graph]


@pytest.fixture(params=BACKENDS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    """The backend under test: "sqlite", "mysql" or "postgres" (skipped when not configured)."""
    kind: str = request.param
    return kind


@pytest.fixture
def stores(backend_kind: str, tmp_path: Path) -> Iterator[Stores]:
    """Opens fresh graphs on the backend under test; closes and drops them after the test."""
    opened = Stores(backend_kind, tmp_path)
    yield opened
    opened.close()


@pytest.fixture
def open_graph(stores: Stores) -> OpenGraph:
    """A factory of fresh, empty graphs on the backend under test."""
    counter = itertools.count()

    def make(shards: int = 4, **options: object) -> Graph:
        return stores.open(f"graph{next(counter)}", shards=shards, **options)

    return make


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
