"""Fresh graphs on each backend under test: SQLite always, MySQL/MariaDB and
PostgreSQL when configured.

MySQL runs when ASSOCDB_TEST_MYSQL_URL (a server URL, e.g.
`mysql://root@127.0.0.1:3306/`) is set, PostgreSQL when
ASSOCDB_TEST_POSTGRES_URL (e.g. `postgresql://postgres@127.0.0.1:5432/postgres`,
whose path is the database the test graphs' schemas go in) is; each is
skipped otherwise, and when its server does not answer, unless
ASSOCDB_TEST_REQUIRE_SERVICES=1 (then that fails). Each graph on a server
gets its own random name (so its own schemas) and is dropped when disposed of.

Kind "myrocks" (not in BACKENDS: its own modules run the core tests on it) is a
MySQL graph with `?engine=rocksdb` on ASSOCDB_TEST_MYROCKS_URL, a MariaDB server
that loaded MyRocks (`tests/support/mariadb_instances.sh start 3310`).
"""

from __future__ import annotations

import functools
import os
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

import assocdb
from assocdb import Graph

BACKENDS = ["sqlite", "mysql", "postgres"]
MYSQL_URL = os.environ.get("ASSOCDB_TEST_MYSQL_URL")
POSTGRES_URL = os.environ.get("ASSOCDB_TEST_POSTGRES_URL")
MYROCKS_URL = os.environ.get("ASSOCDB_TEST_MYROCKS_URL")
REQUIRED = os.environ.get("ASSOCDB_TEST_REQUIRE_SERVICES") == "1"


@functools.cache
def _mysql_problem(rocks: bool = False) -> str | None:
    """Why the test MySQL server (`rocks`: with MyRocks) can't be used, or None."""
    url = MYROCKS_URL if rocks else MYSQL_URL
    if not url:
        return f"ASSOCDB_TEST_{'MYROCKS' if rocks else 'MYSQL'}_URL is not set"
    from assocdb.storage.mysqlpool import driver

    parts = urlparse(url)
    try:
        conn = driver().connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 3306,
            user=parts.username or "root",
            password=parts.password or "",
            connect_timeout=2,
        )
        try:
            with conn.cursor() as cursor:
                cursor.execute(
                    "SELECT COUNT(*) FROM information_schema.engines "
                    "WHERE engine = 'ROCKSDB' AND support IN ('YES', 'DEFAULT')"
                )
                (rocksdb,) = cursor.fetchone()
        finally:
            conn.close()
    except Exception as exc:
        return f"MySQL at {url} does not answer: {exc}"
    if rocks and not rocksdb:
        return f"MariaDB at {url} has not loaded MyRocks (mariadb-plugin-rocksdb)"
    return None


@functools.cache
def _postgres_problem() -> str | None:
    """Why the test PostgreSQL server can't be used, or None."""
    if not POSTGRES_URL:
        return "ASSOCDB_TEST_POSTGRES_URL is not set"
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'assocdb[postgres]')"
    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=2).close()
    except Exception as exc:
        return f"PostgreSQL at {POSTGRES_URL} does not answer: {exc}"
    return None


def require(kind: str) -> None:
    """Skip (or fail, when services are required) if `kind` can't run here."""
    if kind == "sqlite":
        return
    problem = _postgres_problem() if kind == "postgres" else _mysql_problem(kind == "myrocks")
    if problem is not None:
        url = {"mysql": MYSQL_URL, "myrocks": MYROCKS_URL}.get(kind, POSTGRES_URL)
        if REQUIRED and url:
            pytest.fail(problem)
        pytest.skip(problem)


def examples(kind: str, n: int) -> int:
    """Hypothesis examples for a test: fewer on a server (each graph is DDL)."""
    return n if kind == "sqlite" else max(5, n // 4)


#: Test graphs wait longer than the 2 s default: the test server shares two
#: cores and one disk with other test runs, and a stalled fsync must not turn
#: an `applied` write into a `queued` one. Timeout tests set their own.
TEST_TIMEOUTS = "query_timeout=10&connect_timeout=5"


def mysql_url(name: str, server: str | None = None, options: str = TEST_TIMEOUTS) -> str:
    """The URL of graph `name` on the test server."""
    base = server or MYSQL_URL
    assert base, "ASSOCDB_TEST_MYSQL_URL is not set"
    parts = urlparse(base)
    return parts._replace(path=f"/{name}", query=options).geturl()


def postgres_url(name: str, options: str = TEST_TIMEOUTS) -> str:
    """The URL of graph `name` on the test PostgreSQL server (in the database the
    server URL names)."""
    assert POSTGRES_URL, "ASSOCDB_TEST_POSTGRES_URL is not set"
    parts = urlparse(POSTGRES_URL)
    database = parts.path.strip("/") or "postgres"
    query = f"{options}&database={database}" if options else f"database={database}"
    return parts._replace(path=f"/{name}", query=query).geturl()


def server_url(kind: str, name: str, options: str = TEST_TIMEOUTS) -> str:
    """The URL of graph `name` on the test server of `kind` ("mysql", "myrocks", "postgres")."""
    if kind == "myrocks":
        return mysql_url(name, MYROCKS_URL, f"{options}&engine=rocksdb".lstrip("&"))
    return mysql_url(name, options=options) if kind == "mysql" else postgres_url(name, options)


def drop(kind: str, name: str) -> None:
    """Drop graph `name` from the test server of `kind`."""
    if kind in ("mysql", "myrocks"):
        from assocdb.storage.mysql import MySQLBackend

        MySQLBackend.drop(server_url(kind, name))
    else:
        from assocdb.storage.postgres import PostgresBackend

        PostgresBackend.drop(postgres_url(name))


class Stores:
    """Opens fresh graphs of one kind under `tmp`, and disposes of them."""

    def __init__(self, kind: str, tmp: Path) -> None:
        require(kind)
        self.kind = kind
        self.tmp = tmp
        self._names: list[str] = []
        self._graphs: list[Graph] = []

    def location(self, name: str, options: str = TEST_TIMEOUTS) -> tuple[str | Path, Path]:
        """Where graph `name` lives, and its journal file (a new place on every call)."""
        if self.kind == "sqlite":
            return self.tmp / name, self.tmp / name / "journal.db"
        unique = f"t{uuid.uuid4().hex[:12]}_{name}"[:40]
        self._names.append(unique)
        (self.tmp / "journals").mkdir(parents=True, exist_ok=True)
        journal = self.tmp / "journals" / f"{unique}.db"
        return server_url(self.kind, unique, options), journal

    def open(self, name: str = "g", **options: Any) -> Graph:
        """A new graph (or, with `at=` from `location`, the graph there again)."""
        where, journal = options.pop("at", None) or self.location(name)
        graph = assocdb.open(where, journal=options.pop("journal", journal), **options)
        self._graphs.append(graph)
        return graph

    def forget(self, graph: Graph) -> None:
        """Leave `graph` out of the closing (a test took it apart itself)."""
        self._graphs.remove(graph)

    def close(self) -> None:
        for graph in self._graphs:
            graph.close()
        self._graphs.clear()
        for name in self._names:
            drop(self.kind, name)
        self._names.clear()
