"""Point-in-time restore: a restored backup rolled forward with the source's change feed.

The feed (`sqlfeed.py`) holds, per shard and in commit order, every edge leg, object and
node state an apply changed, as stored after the change, with its `updated_at`. Every
stored row is a last-writer-wins register under the merge rule, so replaying those
records into the restored shards through `Backend.apply` (which keeps counts with the
rows) leaves each row as the newest record stamped at or before TIME made it, whatever
the order: the source as of TIME. Records already in the backup (before its cut, or the
cut's unfinished jobs it applied) change nothing when replayed.

What the feed does not carry is not rolled forward: home timelines and secondary index
entries stay as of the backup (the index cleaner repairs indexes from the objects:
`assocdb index check DIR NAME --repair`). Id reservations are not in the feed either: the
restored shards reserve every id the source has reserved since (`reserve_ids`), so an
object rolled forward is never handed out again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..core.compress import unpack
from ..core.errors import FeedExpired, InvalidRequest
from ..core.merge import EdgeTuple, NodeRow, ObjRow
from . import sqlfeed
from .backend import Backend, ChangeFeed
from .sql import SQLBackend

#: Records read (and applied in one transaction) at a time.
PAGE = 2000


def check_history(source: Backend, positions: Sequence[int | None], when: str) -> None:
    """InvalidRequest unless the source's feed still holds every record after `positions`
    (the backup's cut) on every shard; `when` names the requested time in the message."""
    check_recorded(positions, when)
    if len(positions) != source.shards:
        raise InvalidRequest(
            f"cannot restore to {when}: the source has {source.shards} shards, "
            f"the backup {len(positions)}"
        )
    feed = _feed(source, when)
    for shard, position in enumerate(positions):
        assert position is not None
        try:
            if feed.checks_held:  # (a shard map's positions name their replica)
                feed.read(shard, position, 1)
                continue
            oldest, end = feed.bounds(shard)
        except FeedExpired:
            oldest, end = position + 2, position
        if oldest > position + 1 or end < position:
            raise InvalidRequest(
                f"cannot restore to {when}: outside the retained history (shard {shard}'s "
                f"changes after the backup's cut were trimmed: the feed keeps 7 days and "
                f"10M rows by default); restore a newer backup"
            )


def check_recorded(positions: Sequence[int | None], when: str) -> None:
    """InvalidRequest unless the source's feed was on at the cut on every shard."""
    if any(p is None for p in positions):
        raise InvalidRequest(
            f"cannot restore to {when}: the source's change feed was off at the backup's cut, "
            "so there is no history to roll forward (turn it on with `assocdb changes DIR "
            "--enable`; later backups can then be rolled forward)"
        )


def roll_forward(
    source: Backend,
    target: SQLBackend,
    positions: Sequence[int | None],
    upto: int,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Apply to `target` every record of `source`'s feed after `positions` stamped at or
    before `upto` (µs); return how many were applied (`progress(n)` after each page).
    A shard map's feed is read from each shard's replica at the cut, or from another
    after a failover (`storage.replfeed`: what comes twice changes nothing the second time)."""
    feed, applied = _feed(source, "a time"), 0
    for shard, position in enumerate(positions):
        after = 0 if position is None else position
        while True:
            rows = feed.read(shard, after, PAGE)
            if not rows:
                break
            after = rows[-1][0]
            wanted = [r for r in rows if r[7] <= upto]
            apply_records(target, shard, wanted)
            applied += len(wanted)
            if progress is not None:
                progress(len(wanted))
            if len(rows) < PAGE:
                break
    return applied


def _feed(source: Backend, when: str) -> ChangeFeed:
    feed = source.change_feed()
    if feed is None:
        raise InvalidRequest(f"cannot restore to {when}: the source has no change feed")
    return feed


def apply_records(target: SQLBackend, shard: int, rows: Sequence[sqlfeed.FeedRow]) -> None:
    """Merge feed records (rows as stored after a change) into the shard."""
    edges: list[EdgeTuple] = []
    objects: list[ObjRow] = []
    nodes: list[NodeRow] = []
    for _, kind, id1, atype, id2, state, time, updated_at, data in rows:
        if kind == sqlfeed.EDGE:
            edges.append((id1, atype, id2, state, time, updated_at, data))
        elif kind == sqlfeed.OBJECT:
            objects.append(ObjRow(id1, atype, state, id2, updated_at, unpack(data or b"")))
        else:
            nodes.append(NodeRow(id1, atype, state, updated_at))
    if edges or objects or nodes:
        target.apply(shard, edges, objects, nodes)


def catch_up(
    source: SQLBackend, target: SQLBackend, shard: int, after: int, upto: int, page: int
) -> list[sqlfeed.FeedRow] | None:
    """Merge the shard's feed records after `after` up to `upto` from `source` into
    `target`, `page` at a time; the records merged, or None if the feed no longer holds
    every one (positions are dense: a gap after `after` is a trimmed stretch)."""
    merged: list[sqlfeed.FeedRow] = []
    while after < upto:
        found = sqlfeed.read(source, shard, after, page)
        if not found or found[0][0] != after + 1:
            return None
        rows = [r for r in found if r[0] <= upto]
        apply_records(target, shard, rows)
        merged += rows
        after = rows[-1][0]
    return merged


_OBJECT_SEQ = "SELECT value FROM {s}.seq WHERE name = 'objects'"


def reserve_ids(source: Backend, target: SQLBackend) -> None:
    """Reserve on each `target` shard the object ids `source` reserved beyond it (a
    shard map's are reserved on each shard's primary)."""
    smap = source.replicated()
    for shard in range(target.shards):
        origin = source if smap is None else smap.member(smap.map.replicas[shard][0].backend)
        assert isinstance(origin, SQLBackend)
        want = _sequence(origin, shard) - _sequence(target, shard)
        if want > 0:
            target.allocate(shard, want)


def _sequence(backend: SQLBackend, shard: int) -> int:
    rows = backend._query(shard, backend._q(_OBJECT_SEQ, shard))
    return int(rows[0][0]) if rows else 0
