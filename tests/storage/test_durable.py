"""SQLite shards made durable (`make_durable`): what the fence syncs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from assocdb.storage import sqlite as sqlite_backend
from assocdb.storage.sqlite import SQLiteBackend


def test_a_new_wal_has_its_name_synced_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # synchronous=NORMAL never syncs a WAL, so SQLite never syncs the directory that
    # names a new one: after a power loss the WAL, with commits the journal has
    # forgotten, could be gone. make_durable syncs the directory for a new WAL.
    synced: list[str] = []
    fsync = os.fsync

    def recording(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        fsync(fd)

    monkeypatch.setattr(sqlite_backend.os, "fsync", recording)
    directory = tmp_path / "g"
    for _ in range(2):  # a graph opened again writes a new WAL
        backend = SQLiteBackend.open(directory, shards=2)
        # Shard 1: shard 0 holds the settings, made durable as the graph is created.
        backend.apply(1, [(1, 1, 2, 0, 5, 5000, None)], [])
        synced.clear()
        backend.make_durable([1])
        assert synced == [str(directory / "shard-0001.db-wal"), str(directory)]
        synced.clear()
        backend.apply(1, [(1, 1, 3, 0, 6, 6000, None)], [])
        backend.make_durable([1])  # the same WAL: its name is on the disk already
        assert synced == [str(directory / "shard-0001.db-wal")]
        backend.close()
