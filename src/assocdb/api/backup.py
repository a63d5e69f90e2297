"""Online backups: one consistent cut of every shard, verified, restorable (to a time).

`backup(source, dest)` takes a cut of the source (`storage/sqlitecut.py`: writers held
for an instant, then every shard and the journal copied from read snapshots), copies
the journal's unfinished jobs with it and applies them into the copy, then writes
`manifest.json` with each file's checksum. The backup is a graph directory: `restore`
copies it to a new place, and with `to=` rolls it forward with the source's change feed
(`restore_feed.py`). `verify(dest)` checks the files against the manifest and then the
graph itself, opened read-only: counts against rows, every edge against its inverse.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import msgspec

from ..core import backupmanifest as mf
from ..core import feedalign
from ..core.errors import InvalidRequest, NotFound
from ..core.records import CountMismatch, HangingEdge
from ..storage import servercut, sqltables
from ..storage.backend import Backend
from ..storage.registry import open_location
from ..storage.sql import SQLBackend
from ..storage.sqlite import SQLiteBackend
from ..storage.sqlitecut import SQLiteCut, take
from ..writes.journal import BAD, Journal
from . import incremental
from .checks import Checks
from .graph import Graph
from .open import open_graph

#: `progress(done, total)` in pages of 4 KiB.
Progress = Callable[[int, int], None]
JOURNAL = "journal.db"
_GRAPH_ID = "graph_id"
#: How long applying the cut's unfinished jobs into the copy may take.
REPLAY_SECONDS = 600.0


class BackupCheck(msgspec.Struct, frozen=True):
    """What `verify` found: nothing wrong when `ok`."""

    manifest: mf.Manifest
    edges: int
    counts: list[CountMismatch]
    hanging: list[HangingEdge]
    #: Whether the stored type definitions are the manifest's.
    schema: bool = True

    @property
    def ok(self) -> bool:
        return not self.counts and not self.hanging and self.schema


def backup(
    source: Graph | str | Path,
    dest: str | Path,
    progress: Progress | None = None,
    since: str | Path | None = None,
) -> mf.Manifest:
    """Back up the graph `source` (an open `Graph` of a directory, or a directory) into the
    new directory `dest`, while it serves writes; return the manifest.

    Every write acknowledged before the backup's cut is in it, none begun after; counts
    and inverse pairs are exact. With `since`, an earlier backup of the same graph (taken
    with its change feed on), `dest` starts as a copy of it, caught up through the feed
    (`api/incremental.py`). Raises InvalidRequest if `dest` exists.

    >>> assocdb.backup("data/graph", "backups/2026-11-28")
    >>> assocdb.backup("data/graph", "backups/2026-11-29", since="backups/2026-11-28")
    """
    target = Path(dest)
    unfinished = _unfinished(target)
    if unfinished is None:
        if (target / _STARTED).exists() and not (target / mf.NAME).exists():
            raise InvalidRequest(
                f"{target} holds a backup stopped before anything in it could be resumed "
                "(or without the change feed): delete it and back up again"
            )
        check_new(target)
    # (A stopped incremental backup resumes like any other: what it seeded is recorded.)
    prev = None if since is None or unfinished is not None else read_manifest(since)
    backend, journal, close = _source(source)
    report = progress or (lambda done, total: None)
    server = not isinstance(backend, SQLiteBackend)
    caught_up = 0
    try:
        spec = _public_spec(backend)
        source_id = graph_id(backend)
        if unfinished is not None and (unfinished.source, unfinished.shards) != (
            spec,
            backend.shards,
        ):
            raise InvalidRequest(
                f"{target} holds an unfinished backup of another graph: delete it first"
            )
        if prev is not None:
            assert since is not None
            unfinished = _seeded(backend, prev, Path(since), source_id, target)
        target.mkdir(parents=True, exist_ok=unfinished is not None)
        (target / _STARTED).touch()
        cut: SQLiteCut | servercut.ServerCut
        if isinstance(backend, SQLiteBackend):
            cut = take(backend, _journals(backend, journal))
        else:
            cut = servercut.take(*_servers(backend), journal)
        try:
            record = unfinished or _Unfinished(spec, backend.shards, {})
            if isinstance(cut, SQLiteCut):
                assert isinstance(backend, SQLiteBackend)
                caught_up = _copy(cut, backend, target, report, record)
            else:
                caught_up = _copy_server(cut, target, report, record)
        finally:
            cut.close()
    finally:
        close()
    new_identity(target, backend.shards)
    # An incremental backup whose every shard was caught up needs the inverses of only
    # the edges the feed changed since PREV checked (PREV's were: `_replay`).
    seeded = prev is not None and caught_up == backend.shards
    touched = cut.touched if seeded and isinstance(cut, servercut.ServerCut) else None
    replayed = _replay(target, repair=server, only=touched)
    _settle(target, backend.shards)
    edges, schema = _summary(target, backend.shards)
    manifest = mf.Manifest(
        format=mf.FORMAT,
        source=spec,
        shards=backend.shards,
        cut_began=cut.began,
        cut_at=cut.at,
        positions=cut.positions,
        held=round(cut.held, 6),
        replayed=replayed,
        caught_up=caught_up,
        edges=edges,
        created_at=time.time_ns() // 1000,
        files=_sums(target),
        schema=schema,
        source_id=source_id,
        since=0 if unfinished is None else unfinished.since,
    )
    _write_durably(target / mf.NAME, mf.encode(manifest))
    (target / _UNFINISHED).unlink(missing_ok=True)  # (a stop before this: caught up again)
    (target / _STARTED).unlink(missing_ok=True)
    return manifest


def read_manifest(backup_dir: str | Path) -> mf.Manifest:
    """The manifest of the backup in `backup_dir`; InvalidRequest if it is not a backup,
    is unfinished, damaged, or of a newer format."""
    root = Path(backup_dir)
    if not root.is_dir():
        raise NotFound(f"no backup at {root}")
    file = root / mf.NAME
    if not file.exists():
        raise InvalidRequest(f"{root} is not a finished backup: it has no {mf.NAME}")
    return mf.decode(file.read_bytes(), str(file))


def check_files(backup_dir: str | Path) -> mf.Manifest:
    """The manifest, once every file it names is there with its size and checksum;
    InvalidRequest naming the first damaged file."""
    root = Path(backup_dir)
    manifest = read_manifest(root)
    for name, want in manifest.files.items():
        file = root / name
        if not file.is_file():
            raise InvalidRequest(f"corrupt backup {root}: {name} is missing")
        if file.stat().st_size != want.size or _sha256(file) != want.sha256:
            raise InvalidRequest(f"corrupt backup {root}: {name} does not match its checksum")
    return manifest


def verify(backup_dir: str | Path) -> BackupCheck:
    """Check the backup in `backup_dir`: its files against the manifest, then, opened
    read-only, every count against the rows, every edge against its inverse and the
    stored type definitions against the manifest's.

    >>> assocdb.verify_backup("backups/2026-11-28").ok
    True
    """
    root = Path(backup_dir)
    manifest = check_files(root)
    backend = SQLiteBackend(root, manifest.shards)
    backend.read_only = True  # reads each file as it is, writes nothing beside it
    g = Graph(backend, Journal(":memory:"), cache=None)
    try:
        counts = g.check_counts()
        hanging = g.check_inverses()
        edges = _edges(backend)
        schema = g.schema.to_json().decode() == manifest.schema
    finally:
        g.close()
    return BackupCheck(manifest, edges, counts, hanging, schema)


def restore_files(
    backup_dir: str | Path, dest: str | Path, progress: Progress | None = None
) -> mf.Manifest:
    """Copy the backup to the new directory `dest` (a graph as of the backup's cut)."""
    root, target = Path(backup_dir), Path(dest)
    manifest = check_files(root)
    check_new(target)
    target.mkdir(parents=True)
    total, done = sum(f.size for f in manifest.files.values()), 0
    for name, file in manifest.files.items():
        shutil.copyfile(root / name, target / name)
        _fsync(target / name)
        done += file.size
        if progress is not None:
            progress(done, total)
    _fsync(target)
    return manifest


def graph_id(backend: Backend) -> str:
    """The graph's id (`Engine._graph_id`), given it now if it has none yet."""
    while (stored := backend.get_meta(_GRAPH_ID)) is None:
        backend.swap_meta(_GRAPH_ID, None, uuid.uuid4().hex.encode())
    return stored.decode()


def new_identity(root: Path, shards: int) -> None:
    """Give the graph directory `root` a graph id of its own: a backup or a restored copy
    is a graph apart from its source, and a shared Redis tier keeps graphs apart by id."""
    backend = SQLiteBackend(root, shards)
    try:
        backend.swap_meta(_GRAPH_ID, backend.get_meta(_GRAPH_ID), uuid.uuid4().hex.encode())
    finally:
        backend.close()


# -- the source ---------------------------------------------------------------


def _source(source: Graph | str | Path) -> tuple[Backend, Path | None, Callable[[], None]]:
    """The source's backend, its journal file and what closes what was opened here."""
    if isinstance(source, Graph):
        backend, journal = source.engine.backend, source.engine.journal.path
        close: Callable[[], None] = lambda: None  # noqa: E731
    elif isinstance(source, (str, Path)):
        opened, where = open_location(source, None, 2.0, False, None)
        backend, journal, close = opened, Path(where), opened.close
    else:
        raise InvalidRequest(f"backup takes a Graph, a directory or a server URL, got {source!r}")
    if not isinstance(backend, SQLBackend) and not _on_servers(backend):
        close()
        raise InvalidRequest(
            "backup copies a graph in a SQLite directory, on a MariaDB or PostgreSQL server, "
            "or on a shard map of such servers; a map of SQLite directories is not backed "
            "up yet (docs/operations.md, Backups)"
        )
    return backend, None if str(journal) == ":memory:" else journal, close


def _journals(backend: SQLiteBackend, journal: Path | None) -> list[Path]:
    """The journals whose writers apply to the directory: its own (`journal.db`, which
    every process opening it by default shares) and the source graph's, if elsewhere.
    (A process given a journal of its own elsewhere is not known here: see the docs.)"""
    shared = backend.path / JOURNAL
    if journal is None or journal.resolve() == shared.resolve():
        return [shared]
    return [journal, shared]


def _on_servers(backend: Backend) -> bool:
    smap = backend.replicated()
    return smap is not None and not smap.local


def _servers(backend: Backend) -> tuple[list[SQLBackend], list[int], list[int] | None]:
    """The servers to snapshot, per shard the one its copy is read from (a shard map's
    primary replica: the one every write reaches first), and per shard the tag of that
    replica in feed positions (`core.feedalign`; None: one server, untagged)."""
    smap = backend.replicated()
    if smap is None:
        assert isinstance(backend, SQLBackend)
        return [backend], [0] * backend.shards, None
    names = [replicas[0].backend for replicas in smap.map.replicas]
    distinct = sorted(set(names))
    servers = [smap.member(name) for name in distinct]
    if not all(isinstance(server, SQLBackend) for server in servers):
        raise InvalidRequest("backup reads a shard map's members as SQL servers")
    placement, tags = [distinct.index(n) for n in names], [feedalign.tag_of(n) for n in names]
    return [cast(SQLBackend, s) for s in servers], placement, tags


def _public_spec(backend: Backend) -> dict[str, Any]:
    """The source's spec without its password (a manifest is not a secret)."""
    smap = backend.replicated()
    if smap is not None:  # (its spec holds every member's URL)
        return {"kind": "shardmap", "path": str(smap.source), "shards": backend.shards}
    spec = backend.spec()
    if "url" in spec:
        url = urlsplit(spec["url"])
        host = url.hostname or ""
        netloc = f"{url.username}@{host}" if url.username else host
        netloc += f":{url.port}" if url.port else ""
        spec["url"] = urlunsplit(url._replace(netloc=netloc))
    return spec


def check_new(target: Path) -> None:
    """InvalidRequest unless `target` is a new directory's place."""
    if target.exists():
        raise InvalidRequest(f"{target} exists: a backup or restore goes to a new directory")
    if not target.parent.is_dir():
        raise InvalidRequest(f"{target.parent} is not a directory")


class _Unfinished(msgspec.Struct):
    """What a backup under way has copied (`.unfinished.json` in its directory): per
    shard, the feed position of the cut its copy was taken at."""

    source: dict[str, Any]
    shards: int
    copied: dict[int, int]
    #: An incremental backup's: the cut of the backup it was seeded from.
    since: int = 0


_UNFINISHED = ".unfinished.json"
#: Marks a directory this module made for a backup (until its manifest is written), so
#: that only such a directory is ever called a stopped backup: any other is just taken.
_STARTED = ".backup-started"


def _unfinished(target: Path) -> _Unfinished | None:
    """The record of the unfinished backup in `target`, if that is what it holds."""
    file = target / _UNFINISHED
    if (target / mf.NAME).exists() or not file.exists():
        return None
    damaged = InvalidRequest(f"{file} is damaged: delete {target} and back up again")
    try:
        record = msgspec.json.decode(file.read_bytes(), type=_Unfinished)
    except msgspec.DecodeError:
        raise damaged from None
    if not all(0 <= shard < record.shards for shard in record.copied):
        raise damaged
    return record


def _seeded(
    backend: Backend, prev: mf.Manifest, where: Path, source_id: str, target: Path
) -> _Unfinished:
    """The new directory `target` seeded from the backup `prev` (in `where`) of the graph
    in `backend`, and its record: every shard copied at `prev`'s cut (`api/incremental`)."""
    incremental.check(prev, where, source_id, backend.shards)
    target.mkdir()
    (target / _STARTED).touch()
    incremental.seed(where, prev, target)
    copied = incremental.positions(prev)
    record = _Unfinished(_public_spec(backend), backend.shards, copied, prev.cut_at)
    _write_durably(target / _UNFINISHED, msgspec.json.encode(record))
    return record


def _copy(
    cut: SQLiteCut, source: SQLiteBackend, target: Path, progress: Progress, record: _Unfinished
) -> int:
    """Copy every shard of the cut into `target`, and the journal; a shard the unfinished
    backup `record` copied at an earlier cut is caught up instead (the feed's records
    since, and what the feed does not carry: `SQLiteCut.catch_up`). How many were."""
    again = {s: p for s, p in record.copied.items() if cut.positions[s] is not None}
    total = sum(cut.pages(s) for s in range(cut.shards) if s not in again)
    done = [0]

    def step(pages: int) -> None:
        done[0] += pages
        progress(done[0], total)

    copy = SQLiteBackend(target, cut.shards) if again else None
    caught_up = 0
    try:
        for shard in range(cut.shards):
            file = target / f"shard-{shard:04d}.db"
            if copy is not None and shard in again:
                if cut.catch_up(source, copy, shard, again[shard]):
                    copy.make_durable([shard])
                    caught_up += 1
                else:  # the feed was trimmed past the earlier cut: copy it again
                    copy.close()  # (its connection to the file being replaced)
                    total += cut.pages(shard)
                    _copy_shard(cut, shard, file, step)
                    copy = SQLiteBackend(target, cut.shards)
            else:
                _copy_shard(cut, shard, file, step)
            position = cut.positions[shard]
            if position is not None:  # resumable only with the feed: it has the changes
                record.copied[shard] = position
                _write_durably(target / _UNFINISHED, msgspec.json.encode(record))
    finally:
        if copy is not None:
            copy.close()
    _copy_journal(cut, target)
    return caught_up


def _copy_shard(cut: SQLiteCut, shard: int, file: Path, step: Callable[[int], None]) -> None:
    part = file.with_name(file.name + ".part")
    part.unlink(missing_ok=True)
    if cut.copy_shard(shard, part, step):
        _fsync(part)
        for stale in ("-wal", "-shm"):  # of a copy an earlier run made
            file.with_name(file.name + stale).unlink(missing_ok=True)
        os.replace(part, file)


def _copy_server(
    cut: servercut.ServerCut, target: Path, progress: Progress, record: _Unfinished
) -> int:
    """Copy every shard of the cut into `target`, and the journal; a shard the unfinished
    backup `record` copied at an earlier cut is caught up instead (its feed records
    since, read on this cut's snapshot: `ServerCut.catch_up`). How many were. A shard
    not recorded as copied may hold part of a stopped run's copy: it is copied anew."""
    again = {s: p for s, p in record.copied.items() if cut.positions[s] is not None}
    done = [0, sum(_rows(cut, s) for s in range(cut.shards) if s not in again)]

    def step(rows: int) -> None:
        done[0] += rows
        progress(min(done[0], done[1]), done[1])

    for shard in range(cut.shards):
        if shard not in again:
            _drop_shard(target, shard)
    copy = SQLiteBackend.open(target, cut.shards)
    caught_up = 0
    try:
        cut.copy_settings(copy)
        for shard in range(cut.shards):
            if shard in again and cut.catch_up(copy, shard, again[shard]):
                caught_up += 1
            else:
                if shard in again:  # the feed cannot catch it up: copy it again
                    copy.close()
                    del record.copied[shard]  # (its copy is about to be partial)
                    _write_durably(target / _UNFINISHED, msgspec.json.encode(record))
                    _drop_shard(target, shard)
                    copy = SQLiteBackend.open(target, cut.shards)
                    cut.copy_settings(copy)
                    done[1] += _rows(cut, shard)
                cut.copy_shard(copy, shard, step)
            copy.make_durable([shard])
            position = cut.positions[shard]
            if position is not None:  # resumable only with the feed: it has the changes
                record.copied[shard] = position
                _write_durably(target / _UNFINISHED, msgspec.json.encode(record))
    finally:
        copy.close()
    _copy_journal(cut, target)
    return caught_up


def _rows(cut: servercut.ServerCut, shard: int) -> int:
    """The rows a copy of the shard reads (for a progress total)."""
    tables = ("edges", "objects", "node_states")
    return sum(sqltables.count_rows(cut.readers[shard], shard, t) for t in tables)


def _drop_shard(target: Path, shard: int) -> None:
    """Delete the shard's files in `target` (what a stopped run copied of it)."""
    file = target / f"shard-{shard:04d}.db"
    for name in (file, file.with_name(file.name + "-wal"), file.with_name(file.name + "-shm")):
        name.unlink(missing_ok=True)


def _copy_journal(cut: SQLiteCut | servercut.ServerCut, target: Path) -> None:
    """The cut's journal, beside the shards, written whole or not at all: a copy stopped
    part way (Ctrl-C, a full disk) left a torn journal.db that every rerun then failed
    on ("database disk image is malformed"). A journal of an earlier run goes too."""
    file = target / JOURNAL
    part = file.with_name(file.name + ".part")
    part.unlink(missing_ok=True)
    for old in (file, file.with_name(file.name + "-wal"), file.with_name(file.name + "-shm")):
        old.unlink(missing_ok=True)
    cut.copy_journal(part)
    if part.exists():
        _fsync(part)
        os.replace(part, file)


def _replay(target: Path, repair: bool, only: list[tuple[int, int, int]] | None = None) -> int:
    """Apply the journal's unfinished jobs of the cut into the copy; how many there were.
    With `repair`, complete the inverse pairs other processes' jobs left half applied
    (a server graph: their journals are not here): every pair, or those of the edges
    `only` (an incremental backup: a pair half applied at the earlier cut was completed
    in the earlier backup, and stays so unless the feed changed one of its edges since)."""
    journal, waiting = target / JOURNAL, 0
    if journal.exists():
        conn = sqlite3.connect(journal)
        try:
            bad = f"SELECT COUNT(*) FROM jobs WHERE state != {BAD}"
            waiting = int(conn.execute(bad).fetchone()[0])
        finally:
            conn.close()
    g = open_graph(target, create=False, cache=None)
    try:
        g.queue_retry()
        if not g.drain(REPLAY_SECONDS):
            raise InvalidRequest(f"the cut's unfinished writes did not apply in {target}")
        if repair:
            Checks(g.engine).check_inverses(repair=True, keys=only)
    finally:
        g.close()
    return waiting


def _settle(target: Path, shards: int) -> None:
    """Fold every WAL into its file, so the backup is its `.db` files alone."""
    for file in sorted(target.glob("*.db")):
        conn = sqlite3.connect(file, isolation_level=None)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode = DELETE")
        finally:
            conn.close()
        _fsync(file)
    for leftover in target.glob("*.db-*"):
        leftover.unlink()
    _fsync(target)


def _summary(target: Path, shards: int) -> tuple[int, str]:
    backend = SQLiteBackend(target, shards)
    backend.read_only = True
    try:
        g = Graph(backend, Journal(":memory:"), cache=None)
        try:
            return _edges(backend), g.schema.to_json().decode()
        finally:
            g.close()
    finally:
        backend.close()


def _edges(backend: SQLiteBackend) -> int:
    return sum(sum(backend.count_totals(s).values()) for s in range(backend.shards))


def _sums(target: Path) -> dict[str, mf.FileSum]:
    return {
        file.name: mf.FileSum(file.stat().st_size, _sha256(file))
        for file in sorted(target.iterdir())
        if file.is_file() and file.name.endswith(".db")
    }


def _sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with file.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _write_durably(file: Path, body: bytes) -> None:
    part = file.with_name(file.name + ".part")
    part.write_bytes(body)
    _fsync(part)
    os.replace(part, file)
    _fsync(file.parent)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
