"""A backup's manifest: what it is a copy of, where its cut lies, and each file's checksum.

`manifest.json` is written last, once every file of the backup is on the disk, so a
directory without one is an unfinished backup. Pure: encoding, decoding and the checks a
reader makes before trusting a backup (a newer format, a damaged manifest).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from .errors import InvalidRequest

#: The format this assocdb writes and the newest it reads.
FORMAT = 1
NAME = "manifest.json"


class FileSum(msgspec.Struct, frozen=True):
    size: int
    sha256: str


class Manifest(msgspec.Struct, frozen=True):
    """What `assocdb backup` wrote (docs/operations.md, "Backups")."""

    format: int
    #: The source: `{"kind": "sqlite", "path": …, "shards": n}` (a backend spec).
    source: dict[str, Any]
    shards: int
    #: The cut, in wall-clock µs since the epoch (the clock of `updated_at`): a write
    #: acknowledged before `cut_began` is in the backup, one begun after `cut_at` is not.
    cut_began: int
    cut_at: int
    #: Per shard, the last change-feed position in the cut (None: the feed was off).
    positions: list[int | None]
    #: How long writers were held at the cut (seconds).
    held: float
    #: Unfinished journal jobs at the cut, applied into the backup.
    replayed: int
    #: Shards an interrupted run had copied, caught up to this cut from the feed.
    caught_up: int
    #: Edges (both directions, every state) in the backup, from its counts.
    edges: int
    created_at: int
    files: dict[str, FileSum]
    #: The type definitions, as `Schema.to_json` (for a reader; shard 0 holds them too).
    schema: str = ""
    #: The source's graph id: `restore --to` rolls forward only from that graph's feed.
    source_id: str = ""
    #: An incremental backup: the cut (`cut_at`) of the backup it was seeded from (0: none).
    #: It needs nothing of that backup: every file is its own.
    since: int = 0


def encode(manifest: Manifest) -> bytes:
    return msgspec.json.format(msgspec.json.encode(manifest), indent=2) + b"\n"


def decode(body: bytes, where: str) -> Manifest:
    """The manifest in `body` (read from `where`); InvalidRequest if it is damaged or newer
    than this assocdb reads."""
    try:
        head = msgspec.json.decode(body)
    except msgspec.DecodeError:
        raise InvalidRequest(f"{where} is damaged: not JSON (corrupt backup)") from None
    version = head.get("format") if isinstance(head, dict) else None
    if not isinstance(version, int):
        raise InvalidRequest(f"{where} is damaged: no format version (corrupt backup)")
    if version > FORMAT:
        raise InvalidRequest(
            f"{where} is backup format {version}, newer than this assocdb reads ({FORMAT}): "
            "restore it with a newer assocdb"
        )
    try:
        manifest = msgspec.json.decode(body, type=Manifest)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"{where} is damaged: {exc} (corrupt backup)") from None
    wrong = _inconsistency(manifest)
    if wrong:
        raise InvalidRequest(f"{where} is damaged: {wrong} (corrupt backup)")
    return manifest


_FILE = re.compile(r"shard-(\d{4,})\.db|journal\.db")


def _inconsistency(manifest: Manifest) -> str:
    """What does not add up in a manifest that decodes ("" if nothing): a reader copies
    the files it names, so a name must be one a backup writes (never a path that leads
    out of the backup) and the shard count must agree with the cut's positions."""
    if manifest.shards < 1:
        return f"{manifest.shards} shards"
    if len(manifest.positions) != manifest.shards:
        return f"{len(manifest.positions)} feed positions for {manifest.shards} shards"
    for name, file in manifest.files.items():
        named = _FILE.fullmatch(name)
        if named is None or (named.group(1) and int(named.group(1)) >= manifest.shards):
            return f"it names a file {name!r} that is not one of a backup's"
        if file.size < 0:
            return f"{name} has a negative size"
    return ""
