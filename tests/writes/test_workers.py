"""Bulk-load worker processes (`writes.workers`, `writes.bulkworker`)."""

from __future__ import annotations

from array import array
from pathlib import Path

from assocdb.core.bulkrows import PackedRows
from assocdb.storage.sqlite import SQLiteBackend
from assocdb.writes.workers import ShardWriter


def test_bulk_workers_get_the_spec_outside_their_command_line(tmp_path: Path) -> None:
    # A MySQL spec holds the password; a command line is visible to every local user.
    backend = SQLiteBackend.open(tmp_path / "g", 2)
    writer = ShardWriter(backend)
    writer.start_workers(2)
    try:
        for worker in writer._workers:
            assert str(tmp_path) not in " ".join(map(str, worker.args))
        # A shard's packed rows and another's row with data (`core.bulkrows`).
        data = (2, 1, 3, 0, 5, 6, b"[1]")
        writer.write(
            {0: PackedRows(array("q", [1, 1, 2, 5]), 6), 1: PackedRows(array("q"), 6, [data])}
        )
        writer.wait()
        assert [(r.id2, r.time, r.updated_at) for r in backend.edges(0, 1, 1, [2])] == [(2, 5, 6)]
        assert [r.data for r in backend.edges(1, 2, 1, [3])] == [b"[1]"]
    finally:
        writer.close()
        backend.close()
