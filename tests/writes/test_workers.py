"""Bulk-load worker processes (`writes.workers`, `writes.bulkworker`)."""

from __future__ import annotations

from pathlib import Path

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
        writer.write({0: [(1, 1, 2, 0, 5, 6, None)], 1: [(2, 1, 3, 0, 5, 6, None)]})
        writer.wait()
        assert [r.id2 for r in backend.edges(0, 1, 1, [2])] == [2]
    finally:
        writer.close()
        backend.close()
