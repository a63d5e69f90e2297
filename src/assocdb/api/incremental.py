"""Incremental backups: a backup seeded from an earlier one of the same graph, caught up.

`backup(SOURCE, DEST, since=PREV)` copies PREV's shard files into DEST (copies, not hard
links: SQLite writes a database file in place, so a link would change PREV as well),
checking each against PREV's manifest on the way, and records every shard as copied at
PREV's cut. The backup then goes on as a resumed one (`api/backup.py`): a new cut, and
each shard caught up from PREV's feed position to it through the source's change feed
(a shard whose feed was trimmed past PREV's cut, or whose shard-map primary changed
since, is copied whole). What is read from the source is the changes since PREV, not
the graph; the result is a full backup in its own right (verify and restore need
nothing of PREV, which may be deleted).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from ..core import backupmanifest as mf
from ..core.errors import InvalidRequest


def check(prev: mf.Manifest, where: Path, source_id: str, shards: int) -> None:
    """InvalidRequest unless the backup `prev` (in `where`) can seed a backup of the graph
    whose id is `source_id`: one of that graph, taken with its feed on (a feed once on
    stays on: it has every change since)."""
    if not prev.source_id or prev.source_id != source_id or prev.shards != shards:
        raise InvalidRequest(
            f"{where} is a backup of another graph: --since takes an earlier backup of SOURCE"
        )
    if any(position is None for position in prev.positions):
        raise InvalidRequest(
            f"{where} was taken with the change feed off, so there is nothing to catch it up "
            "from: back up in full (and turn the feed on: assocdb changes SOURCE --enable)"
        )


def positions(prev: mf.Manifest) -> dict[int, int]:
    """Per shard, the feed position `prev` was cut at (`check` found none missing)."""
    return {shard: p for shard, p in enumerate(prev.positions) if p is not None}


def seed(prev_dir: Path, prev: mf.Manifest, target: Path) -> int:
    """Copy the shard files of the backup in `prev_dir` into the directory `target`, each
    checked against its checksum as it is read; the bytes copied. (Not its journal: its
    jobs are applied in it, and the new cut brings its own.) InvalidRequest naming the
    first damaged file, with what was copied deleted."""
    copied = 0
    for name, want in prev.files.items():
        if not name.startswith("shard-"):
            continue
        source, dest = prev_dir / name, target / name
        if not source.is_file():
            _undo(target)
            raise InvalidRequest(f"corrupt backup {prev_dir}: {name} is missing")
        if _copy_summed(source, dest) != (want.size, want.sha256):
            _undo(target)
            raise InvalidRequest(f"corrupt backup {prev_dir}: {name} does not match its checksum")
        copied += want.size
    return copied


def _copy_summed(source: Path, dest: Path) -> tuple[int, str]:
    """Copy `source` to `dest` (synced); its size and SHA-256, from the one read."""
    digest, size = hashlib.sha256(), 0
    with source.open("rb") as src, dest.open("wb") as dst:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            dst.write(chunk)
            size += len(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    return size, digest.hexdigest()


def _undo(target: Path) -> None:
    """Delete `target` (the new directory `backup` made for the seeded copy)."""
    shutil.rmtree(target, ignore_errors=True)
