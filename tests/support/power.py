"""A power cut, simulated for a SQLite graph directory.

SQLite shards commit at synchronous=NORMAL: a commit sits in the WAL, unsynced,
until `SQLiteBackend.make_durable` fsyncs it. The disk here is a second
directory that holds each shard's files as of the last `make_durable` of that
shard (every one, in any process-local backend of the graph: the fence's, a
settings write's, an id reservation's), and the journal (synced at every
commit, `synchronous=FULL`) as it is at the cut. What the graph reopened from
that directory holds is what a power loss at that moment would have left;
SQLite's own syncs (checkpoints) are not copied, so the disk is, if anything,
older than a real one.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from assocdb import Graph
from assocdb.storage.sqlite import SQLiteBackend


class PowerCut:
    """The disk of the graph at `where`, kept in `disk`, from before the graph is opened."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, where: Path, disk: Path) -> None:
        self.where, self.disk = where, disk
        self.off = False  # the power is lost: nothing more reaches the disk
        disk.mkdir()
        sync = SQLiteBackend.make_durable
        power = self

        def synced(backend: SQLiteBackend, shards: Sequence[int]) -> None:
            sync(backend, shards)
            if backend.path == where and not power.off:
                power._copy(backend, shards)

        monkeypatch.setattr(SQLiteBackend, "make_durable", synced)

    def _copy(self, backend: SQLiteBackend, shards: Sequence[int]) -> None:
        for shard in shards:
            with backend._writers[shard]:  # between commits, never halfway through one
                for name in (f"shard-{shard:04d}.db", f"shard-{shard:04d}.db-wal"):
                    if (self.where / name).exists():
                        shutil.copy(self.where / name, self.disk / name)
                    else:
                        (self.disk / name).unlink(missing_ok=True)

    def cut(self, graph: Graph | None = None) -> None:
        """The power goes now: the journal is on the disk as it is, nothing after it."""
        if graph is not None:
            graph.engine.journal.flush()  # whatever bookkeeping there is reaches it
        for file in self.where.glob("journal.db*"):
            shutil.copy(file, self.disk / file.name)
        self.off = True
