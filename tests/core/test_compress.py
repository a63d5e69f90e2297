"""Object data is stored zlib-compressed when that pays, and read back transparently."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assocdb import Graph
from assocdb.core.compress import THRESHOLD, pack, unpack
from assocdb.core.ids import shard_of


@given(st.binary(max_size=2000).map(lambda b: b"{" + b))
def test_round_trip(data: bytes) -> None:
    assert unpack(pack(data)) == data


def test_small_or_incompressible_data_is_stored_as_is() -> None:
    small = b'{"a":1}'
    assert pack(small) == small
    noise = b'{"x":"' + bytes(range(256)).hex().encode() + b'"}'  # hex: little to gain
    assert len(noise) > THRESHOLD
    assert unpack(pack(noise)) == noise


def test_sqlite_stores_big_data_compressed_and_reads_old_rows(graph: Graph) -> None:
    if graph.engine.backend.spec()["kind"] != "sqlite":
        pytest.skip("reads the SQLite file directly")
    bio = "lorem ipsum dolor sit amet " * 100
    big = graph.obj_add("user", {"bio": bio})
    small = graph.obj_add("user", {"bio": "short"})
    shard = shard_of(big, graph.shards)
    path = graph.engine.backend.path / f"shard-{shard:04d}.db"  # type: ignore[attr-defined]
    conn = sqlite3.connect(path)
    (stored,) = conn.execute("SELECT data FROM objects WHERE id = ?", (big,)).fetchone()
    assert stored[:1] == b"\x00"
    assert len(stored) < len(bio) // 10
    # A row written before compression existed (plain JSON) still reads.
    conn.execute("UPDATE objects SET data = ? WHERE id = ?", (b'{"bio":"plain"}', big))
    conn.commit()
    conn.close()
    graph.engine.forget()
    assert graph.obj_get(big).data == {"bio": "plain"}  # type: ignore[union-attr]
    assert graph.obj_get(small).data == {"bio": "short"}  # type: ignore[union-attr]
