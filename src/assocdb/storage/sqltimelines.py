"""Home timelines on SQL shards (`core.timeline_list`): their packed blobs read by owner
and deliveries merged into them; the table is added to a graph made before it. The
`SQLBackend` methods of the same names call these."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..core.timeline_list import TimelineEntry, merge_blob
from .dialect import Session
from .sqltext import (
    chunks,
    marks,
)

if TYPE_CHECKING:
    from .sql import SQLBackend


def timelines(b: SQLBackend, shard: int, owners: Sequence[int]) -> dict[int, bytes]:
    # A graph created before home timelines has no table: none written yet.
    return dict(b._unless_missing(lambda: _timelines(b, None, shard, owners), list))


def merge_timelines(
    b: SQLBackend, shard: int, writes: Mapping[int, Sequence[TimelineEntry]], cap: int
) -> int:
    def body(session: Session) -> int:
        stored = dict(_timelines(b, session, shard, list(writes)))
        changed = []
        for owner, entries in writes.items():
            blob = merge_blob(stored.get(owner), entries, cap)
            if blob is not None:
                changed.append((owner, blob))
        b._store(session, shard, b._upsert_timeline, changed)
        return len(changed)

    def again() -> int:  # a graph created before home timelines: add their table
        b._ddl(shard, b.dialect.timelines_ddl)
        return b._in_transaction(shard, body)

    return b._unless_missing(lambda: b._in_transaction(shard, body), again)


def _timelines(
    b: SQLBackend, session: Session | None, shard: int, owners: Sequence[int]
) -> list[tuple[int, bytes]]:
    found: list[tuple[int, bytes]] = []
    for chunk in chunks(sorted(owners)):
        sql = f"SELECT owner, entries FROM {{s}}.timelines WHERE owner IN ({marks(len(chunk))})"
        found += ((owner, bytes(blob)) for owner, blob in b._select(session, shard, sql, chunk))
    return found
