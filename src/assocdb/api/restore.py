"""Restoring a backup to a new directory, as of its cut or of a later time.

`restore(backup, dest)` checks the backup's files against its manifest and copies them;
with `to=TIME` it then rolls the copy forward with the source's change feed up to TIME
(`storage/rollforward.py`), after checking that the feed still holds every change since
the cut. Every check comes before `dest` is made, so a refused restore leaves nothing.
A restored graph is a new graph: it gets a graph id of its own (`backup.new_identity`).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from ..core import backupmanifest as mf
from ..core.errors import InvalidRequest
from ..storage.backend import SERVER_SCHEMES, Backend, is_server_url
from ..storage.registry import open_backend, open_shardmap
from ..storage.rollforward import check_history, check_recorded, reserve_ids, roll_forward
from ..storage.sql import SQLBackend
from ..storage.sqlite import SQLiteBackend
from .backup import Progress, check_files, check_new, new_identity, restore_files


class Restored(msgspec.Struct, frozen=True):
    """What `restore` did: the backup's manifest, and the changes rolled forward."""

    manifest: mf.Manifest
    rolled_forward: int = 0
    to: int | None = None


def restore_backup(
    backup_dir: str | Path,
    dest: str | Path,
    *,
    to: datetime | int | None = None,
    source: str | Path | None = None,
    progress: Progress | None = None,
    rolled: Callable[[int], None] | None = None,
) -> Restored:
    """Restore the backup in `backup_dir` to the new directory `dest`; with `to` (a
    datetime, or µs since the epoch) roll it forward to that time from the change feed
    of `source` (default: the graph the backup was taken from).

    Raises InvalidRequest if `dest` exists, the backup is damaged or of a newer format,
    or `to` is outside the retained history (before the cut, in the future, or trimmed).

    >>> assocdb.restore("backups/2026-11-28", "data/restored", to=datetime(2026, 11, 28, 14, 5))
    """
    manifest = check_files(backup_dir)
    target = Path(dest)
    check_new(target)
    if to is None:
        with _made_whole(target) as work:
            restore_files(backup_dir, work, progress)
            new_identity(work, manifest.shards)
        return Restored(manifest)
    upto = _micros(to)
    when = _show(upto)
    if upto < manifest.cut_at:
        raise InvalidRequest(
            f"cannot restore to {when}: outside the retained history, before the backup's "
            f"cut ({_show(manifest.cut_at)}): restore an older backup"
        )
    if upto > time.time_ns() // 1000:
        raise InvalidRequest(f"cannot restore to {when}: it is in the future")
    check_recorded(manifest.positions, when)
    origin = _open_source(source, manifest, when)
    try:
        if manifest.source_id and origin.get_meta("graph_id") != manifest.source_id.encode():
            raise InvalidRequest(
                f"cannot restore to {when}: {source or 'the source'} is not the graph this "
                "backup was taken from (its change feed is another graph's)"
            )
        check_history(origin, manifest.positions, when)
        with _made_whole(target) as work:
            restore_files(backup_dir, work, progress)
            copy = SQLiteBackend.open(work, create=False)
            try:
                applied = roll_forward(origin, copy, manifest.positions, upto, rolled)
                reserve_ids(origin, copy)
                _copy_schema(origin, copy)
                copy.make_durable(range(copy.shards))
            finally:
                copy.close()
            new_identity(work, manifest.shards)
    finally:
        origin.close()
    return Restored(manifest, applied, upto)


@contextmanager
def _made_whole(target: Path) -> Iterator[Path]:
    """A directory beside `target` to restore into, renamed to `target` once the restore
    is done: a restore stopped part way (Ctrl-C, a full disk, a crash) never leaves a
    graph at `target` that opens with shards missing (they would open empty)."""
    work = target.with_name(f".{target.name}.restoring")
    shutil.rmtree(work, ignore_errors=True)  # of a restore to `target` that was killed
    try:
        yield work
        _fsync_dir(work)
        os.rename(work, target)
        _fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def parse_time(text: str) -> int:
    """µs since the epoch of an ISO 8601 time (`2026-11-28T14:05`, UTC unless it says
    otherwise: `…+01:00`, `…Z`); InvalidRequest for anything else."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidRequest(
            f"--to takes an ISO 8601 time such as 2026-11-28T14:05:00Z, got {text!r}"
        ) from None
    return _micros(moment)


def _micros(to: datetime | int) -> int:
    if isinstance(to, bool) or not isinstance(to, (datetime, int)):
        raise InvalidRequest(f"to must be a datetime or µs since the epoch, got {to!r}")
    if isinstance(to, int):
        return to
    if to.tzinfo is None:
        to = to.replace(tzinfo=UTC)
    delta = to - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _show(micros: int) -> str:
    try:
        return datetime.fromtimestamp(micros / 1e6, UTC).isoformat(timespec="milliseconds")
    except (ValueError, OverflowError, OSError):  # beyond datetime's years 1-9999 in UTC
        return f"{micros:,} µs since the epoch"


def _open_source(source: str | Path | None, manifest: mf.Manifest, when: str) -> Backend:
    """The source graph's backend (whose feed holds the history after the cut): `source`
    (a directory, a server URL or a shard map file), else the one the manifest names."""
    spec = dict(manifest.source)
    if source is not None:
        if is_server_url(source):
            spec.update(url=str(source), kind=SERVER_SCHEMES[str(source).split("://", 1)[0]])
        else:
            kind = "shardmap" if Path(source).is_file() else "sqlite"
            spec = {"kind": kind, "path": str(source), "shards": manifest.shards}
    local = {"sqlite": Path.is_dir, "shardmap": Path.is_file}.get(str(spec.get("kind")))
    if local is not None and not local(Path(spec.get("path", ""))):
        raise InvalidRequest(
            f"cannot restore to {when}: the source graph {spec.get('path')}, whose change feed "
            "holds the history after the cut, is not there (name it with --from)"
        )
    if spec.get("kind") == "shardmap":  # (a map's manifest names its file)
        opened: Backend = open_shardmap(spec["path"], manifest.shards)
    else:
        opened = open_backend(spec, create=False)
    if not isinstance(opened, SQLBackend) and opened.replicated() is None:
        opened.close()
        raise InvalidRequest(f"cannot restore to {when}: the source is not a SQL graph")
    return opened


def _copy_schema(origin: Backend, target: SQLiteBackend) -> None:
    """Types defined after the cut (schema changes are not in the feed; types are only
    ever added, so the source's schema covers every record rolled forward)."""
    key = "schema"
    theirs, ours = origin.get_meta(key), target.get_meta(key)
    if theirs is not None and theirs != ours:
        target.swap_meta(key, ours, theirs)
