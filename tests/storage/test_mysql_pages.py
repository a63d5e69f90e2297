"""MySQL/MariaDB reads a page of edges (a shard copy's, a verify's) as one value
(`MySQLBackend.export_table`): the same rows, in key order, as read row by row, also when
the page is too long for one value (big data blobs) and is read row by row instead."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assocdb.core.merge import EdgeTuple
from assocdb.storage import mysql as mysql_engine
from assocdb.storage.mysql import MySQLBackend
from assocdb.storage.sql import SQLBackend
from tests.support.stores import Stores


@pytest.fixture
def mysql(tmp_path: Path) -> Iterator[Stores]:
    stores = Stores("mysql", tmp_path)
    yield stores
    stores.close()


def walk(read: Any, size: int) -> list[tuple[Any, ...]]:
    """Every edge of shard 0, read in pages of `size` with `read(after, size)`."""
    rows: list[tuple[Any, ...]] = []
    after = None
    while True:
        page = read(after, size)
        rows += page
        if len(page) < size:
            return rows
        after = list(page[-1][:3])


@pytest.mark.parametrize("page_bytes", [8 << 20, 2000])
def test_a_page_read_as_one_value_equals_the_rows_read_one_by_one(
    mysql: Stores, monkeypatch: pytest.MonkeyPatch, page_bytes: int
) -> None:
    monkeypatch.setattr(mysql_engine, "_PAGE_BYTES", page_bytes)  # 2000: most pages too long
    url, _ = mysql.location("pages")
    backend = MySQLBackend.open(str(url), 1)
    try:
        rnd = random.Random(page_bytes)
        blobs = [None, b"", b"\x00,; x'", *(rnd.randbytes(rnd.randrange(1, 400)) for _ in range(5))]
        edges: dict[tuple[int, int, int], EdgeTuple] = {}
        for _ in range(900):
            key = (rnd.randrange(1, 60), rnd.randrange(1, 4), rnd.randrange(1, 2**63))
            edges[key] = (*key, rnd.randrange(4), rnd.randrange(2**62), rnd.randrange(1, 2**62),
                          rnd.choice(blobs))  # fmt: skip
        backend.apply(0, list(edges.values()), ())

        def one_value(after: Any, size: int) -> list[tuple[Any, ...]]:
            return backend.export_table(0, "edges", after, size)

        def row_by_row(after: Any, size: int) -> list[tuple[Any, ...]]:
            return SQLBackend.export_table(backend, 0, "edges", after, size)

        expected = walk(row_by_row, 1000)
        assert [row[:3] for row in expected] == sorted(edges)
        for size in (1, 7, 250, 5000):
            assert walk(one_value, size) == expected
    finally:
        backend.close()
