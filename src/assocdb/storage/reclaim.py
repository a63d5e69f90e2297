"""Reclaim old copies: the schemas a move (or drop-replica) left behind on a server.

A move ends with the old copy out of the replica set, its rows where they were
(`storage.moves`). On a MySQL/MariaDB backend a shard's copy is the schema
`NAME_s{n}` of the backend's graph NAME; a server gets one for every shard when
the graph is created there (when it joins a map), so the schemas alone say
nothing; the map does. A copy is *old* when its schema exists and

* the map does not place the shard on that backend, and no move the map
  records (pending or in progress) names the backend as the shard's target or
  source — checked under the map's lock, held while the schema is dropped, so
  no move can start on it meanwhile;
* the map has not changed for `settle` seconds: the copy left the map no later
  than the file's last change, and every process using the map takes a change
  within a reload interval (`ShardMapBackend` reloads the file by content every
  second) and finishes a statement begun before within its query timeout. This
  is the same wait the movers use before they trust every process switched
  (twice the reload interval + the slowest query timeout); there is no per-process
  acknowledgement, so a process that cannot read the map file is not covered
  (its writes to a dropped copy then fail, and its journal keeps them).

Only the backends the map names are looked at, each opened as the map opens
it (its graph name and shard count, which its meta schema must confirm), so a
schema of another graph is never a candidate. Reclaiming drops the copy's
schema (`DROP DATABASE`: its rows, tables and id counter), empty or not, so a
server keeps exactly the schemas of the shards the map names, and its graph's
meta schema. Nothing of a dropped copy is needed later: a copy made there
again starts with `make_room` — the move calls it under the map's lock before
the copy joins the replica set — and gets its id counter raised to the
source's (`storage.moves`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import NamedTuple

from ..core.errors import InvalidRequest, Unavailable
from .mysql import MySQLBackend
from .registry import open_shardmap
from .shardmap import RELOAD_EVERY, ShardMapBackend
from .shardmap_config import ShardMap, load, locked
from .sqltext import TABLE_KEYS


class OldCopy(NamedTuple):
    """A copy (schema) of `shard` on `backend` that the map does not name."""

    backend: str
    shard: int
    schema: str
    rows: int  # 0: an empty schema (made when the graph was created there)


class Reclaim(NamedTuple):
    copies: list[OldCopy]  # the old copies found
    skipped: list[str]  # backends not looked at, and why
    waiting: float  # seconds until the map has been unchanged long enough (0: it has)
    dropped: bool  # whether the copies were dropped


def named(smap: ShardMap, shard: int, backend: str) -> bool:
    """Whether the map names `backend`'s copy of `shard`: placed there, or a recorded move
    copies it there or from there."""
    if backend in [r.backend for r in smap.replicas[shard]]:
        return True
    return any(m.shard == shard and backend in (m.target, m.source) for m in smap.moves)


def settle_of(smap: ShardMap) -> float:
    """How long every process is given to take a change of the map (see `storage.moves`)."""
    return 2 * RELOAD_EVERY + max(c.query_timeout for c in smap.backends.values())


def reclaim(path: str | Path, *, drop: bool = False, settle: float | None = None) -> Reclaim:
    """The copies (schemas) on the map's backends that the map does not name; with
    `drop`, drop them — only once the map has been unchanged for `settle` seconds
    (default: `settle_of`), else InvalidRequest saying how long to wait.

        reclaim("cluster.toml")              # a dry run: what would be dropped
        reclaim("cluster.toml", drop=True)
    """
    file = Path(path)
    cluster = open_shardmap(file)
    try:
        # Rows are counted without the map's lock (that may take a while on big copies);
        # the decision to drop is checked again under it, with the map as it is then.
        copies, skipped = _old_copies(cluster, load(file))
        with locked(file):  # no move can start on a copy between the check and the drop
            smap = load(file)
            copies = [c for c in copies if not named(smap, c.shard, c.backend)]
            wait = settle_of(smap) if settle is None else settle
            waiting = max(0.0, wait - (time.time() - os.stat(file).st_mtime))
            if drop and copies and waiting > 0:
                raise InvalidRequest(
                    f"{file} changed {wait - waiting:.1f} s ago; a process may still use a "
                    f"copy it named until {wait:.1f} s have passed: run again in "
                    f"{waiting:.1f} s"
                )
            if drop:
                for copy in copies:
                    member = cluster.member(copy.backend)
                    assert isinstance(member, MySQLBackend)
                    member.drop_shard(copy.shard)
            return Reclaim(copies, skipped, waiting, drop and bool(copies))
    finally:
        cluster.close()


def _old_copies(cluster: ShardMapBackend, smap: ShardMap) -> tuple[list[OldCopy], list[str]]:
    copies: list[OldCopy] = []
    skipped: list[str] = []
    for name in smap.backends:
        if smap.backends[name].down:
            skipped.append(f"{name}: marked down (drained)")
            continue
        try:
            member = cluster.member(name)
        except Unavailable as exc:
            skipped.append(f"{name}: does not answer ({exc})")
            continue
        if not isinstance(member, MySQLBackend):
            skipped.append(f"{name}: not a MySQL/MariaDB server (its copies are left alone)")
            continue
        shards = member.get_meta("shards")
        if shards is None or int(shards) != smap.shards:
            skipped.append(f"{name}: its graph does not say {smap.shards} shards")
            continue
        for shard in member.held_shards():
            if named(smap, shard, name):
                continue
            rows = sum(member.count_rows(shard, table) for table in TABLE_KEYS)
            copies.append(OldCopy(name, shard, f"{member.settings.name}_s{shard}", rows))
    return copies, skipped


def make_room(cluster: ShardMapBackend, smap: ShardMap, backend: str, shard: int) -> None:
    """Make sure `backend` has a schema for `shard` (reclaim may have dropped it): called
    under the map's lock before a copy of the shard joins the replica set there. Only a
    MySQL/MariaDB server is opened for it (reclaim leaves the others alone)."""
    url = smap.backends[backend].url
    if url is None or not url.startswith(("mysql:", "mariadb:")):
        return
    member = cluster.member(backend)
    if isinstance(member, MySQLBackend):
        member.make_shard(shard)
