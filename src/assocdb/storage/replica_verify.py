"""Verify and repair the replicas of a shard map's logical shards.

Every replica of a shard should hold the same rows: writes go to all of them
and the journal retries a replica that missed one. This is the check that
they do, for when something went around the write path (a restore from an
old backup, a bug, an operator's hand in one database).

For each shard, each replica's tables (edges, counts, node states, objects,
home timelines, and every secondary index's entries) are compared in two
passes. First by ranges: the table's key space is cut into ranges of `SPAN`
rows (bounds taken from the first replica, `Backend.table_bound`), and each
replica sums up each range on its own server (`Backend.table_summary`: the
row count and the sum of a hash of each row, which does not depend on row
order). Only a range whose summaries differ is read row by row: each
replica's rows of the range in key order, in keyset pages
(`Backend.export_table`), merged like sorted files: a key whose rows differ
between replicas, or that some replica lacks, is a difference. So a verify of
replicas that agree moves a few numbers per range over the network, not the
rows; equal summaries are taken as equal rows (a 32-bit hash summed per
range: a difference could hide only behind a collision). A summary differs
too when a live write lands between two replicas' sums: then that range is
read row by row, no harm done. Mixed engines' sums are never equal (another
hash): such replicas are compared row by row throughout. Before a difference
is reported it is read again from every replica (the first row after the key
before it), so a row a live write was landing on while the pages were read is
not reported once the write has landed everywhere.

Repair uses the merge rule, the same one every write uses: each variant of
a differing row is written to every replica with `apply` (`index_apply`,
`merge_timelines`), so on each replica the newest variant wins and a newer
live write is never overwritten; a replica that already holds the winner does
not change. That is why a repair commutes with live writes, like a journal
replay. The counts of every list a repair touched, or whose count rows
differed, are then recomputed from the edge rows on each replica
(`recount` of those nodes), so a row deleted behind the count's back, or a
count changed by hand, ends with the count its rows say.

The last run's figures are kept in the graph's settings (`LAST_RUN_KEY`), where
the server's metrics read them (`last_run`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from ..core.compress import unpack
from ..core.errors import Unavailable
from ..core.merge import EdgeTuple, NodeRow, ObjRow
from ..core.records import ReplicaDifference, VerifyReport
from ..core.scans import IndexEntry
from ..core.schema import Schema
from ..core.timeline_list import TimelineEntry
from ..core.timeline_list import unpack as unpack_timeline
from .backend import Backend
from .shardmap import ShardMapBackend
from .sqltext import TABLE_KEYS

PAGE = 1000  # rows per keyset page read from each replica
SPAN = 10_000  # rows per range summed up on each replica
LAST_RUN_KEY = "replicas:verify"  # the graph setting that keeps the last run's figures
_SCHEMA_KEY = "schema"  # where the graph keeps its schema (`api.engine`): the index ids
_TIMELINE_KEY = "timeline"  # and its timeline settings (`api.timelines`): their cap
DEFAULT_TIMELINE_CAP = 800

Row = tuple[Any, ...]
Replicas = list[tuple[str, Backend]]


def verify_replicas(
    backend: ShardMapBackend,
    shards: Sequence[int] | None = None,
    *,
    repair: bool = False,
    page: int = PAGE,
    progress: Callable[[int, int], None] | None = None,
    span: int = SPAN,
    skip: Collection[str] = (),
) -> VerifyReport:
    """Compare every replica of each shard (all shards by default); with `repair`, fix
    what differs with the merge rule. `progress(shard, rows)` is called after each shard.
    `span`: rows per range compared by checksums first (0: compare every row).

    Raises Unavailable if a replica of a shard is down (every copy must be read), but
    those named in `skip` (a mover leaves drained replicas out) are not read.

        report = verify_replicas(open_shardmap("cluster.toml"), repair=True)
        print(len(report.differences), "rows differed")
    """
    started = time.perf_counter()
    chosen = list(range(backend.shards)) if shards is None else list(shards)
    tables = tables_of(backend)
    rows = 0
    found: list[ReplicaDifference] = []
    for shard in chosen:
        replicas = backend.replicas(shard, skip)
        read = 0
        if len(replicas) > 1:
            for table in tables:
                differences, n = compare_table(shard, table, replicas, page, span)
                found += differences
                read += n
            if repair:
                mine = [d for d in found if d.shard == shard]
                repair_shard(shard, replicas, mine, timeline_cap(backend))
        rows += read
        if progress is not None:
            progress(shard, read)
    report = VerifyReport(chosen, rows, found, repair, time.perf_counter() - started)
    _record(backend, report)
    return report


def tables_of(backend: Backend) -> list[str]:
    """The tables every shard has, then one per secondary index the schema names."""
    raw = backend.get_meta(_SCHEMA_KEY)
    schema = Schema.from_json(raw) if raw else Schema()
    return [*TABLE_KEYS, *(f"index_{index.id}" for index in schema.indexes)]


def timeline_cap(backend: Backend) -> int:
    """Entries kept per home timeline (the graph's timeline setting, `api.timelines`)."""
    raw = backend.get_meta(_TIMELINE_KEY)
    cap = json.loads(raw).get("cap") if raw else None
    return cap if isinstance(cap, int) and cap > 0 else DEFAULT_TIMELINE_CAP


def compare_table(
    shard: int, table: str, replicas: Replicas, page: int = PAGE, span: int = SPAN
) -> tuple[list[ReplicaDifference], int]:
    """The keys of `table` whose rows differ between the replicas (confirmed by a second
    read), and how many rows were compared (summed up on the servers, or read)."""
    if span <= 0:
        return compare_range(shard, table, replicas, page, None, None)
    found: list[ReplicaDifference] = []
    compared = 0
    after: Row | None = None
    while True:
        upto = replicas[0][1].table_bound(shard, table, after, span)
        summaries = [backend.table_summary(shard, table, after, upto) for _, backend in replicas]
        if all(summary == summaries[0] for summary in summaries):
            compared += sum(rows for _, rows, _ in summaries)
        else:
            differences, n = compare_range(shard, table, replicas, page, after, upto)
            found += differences
            compared += n
        if upto is None:
            return found, compared
        after = upto


def compare_range(
    shard: int,
    table: str,
    replicas: Replicas,
    page: int,
    after: Row | None,
    upto: Row | None,
) -> tuple[list[ReplicaDifference], int]:
    """`compare_table` row by row, for the keys after `after` up to `upto` (None: no bound):
    every replica's rows merged like sorted files."""
    width = len(TABLE_KEYS.get(table, ("ikey", "id")))
    streams = [_rows(backend, shard, table, page, after, upto) for _, backend in replicas]
    heads = [next(stream, None) for stream in streams]
    suspects: list[tuple[Row | None, Row]] = []  # (the key before, the key)
    before: Row | None = after
    read = 0
    while True:
        keys = [head[:width] for head in heads if head is not None]
        if not keys:
            break
        key = min(keys)
        held: list[Row | None] = []
        for n, head in enumerate(heads):
            if head is not None and head[:width] == key:
                held.append(head)
                heads[n] = next(streams[n], None)
                read += 1
            else:
                held.append(None)
        if any(row != held[0] for row in held):
            suspects.append((before, key))
        before = key
    found = []
    for before_key, key in suspects:
        again = {name: _row_at(b, shard, table, before_key, key, width) for name, b in replicas}
        values = list(again.values())
        if any(row != values[0] for row in values):
            found.append(ReplicaDifference(shard, table, key, again))
    return found, read


def _rows(
    backend: Backend,
    shard: int,
    table: str,
    page: int,
    after: Row | None = None,
    upto: Row | None = None,
) -> Iterator[Row]:
    """The rows of the table on one replica after key `after` up to key `upto` (None: no
    bound), in key order, a page at a time."""
    width = len(TABLE_KEYS.get(table, ("ikey", "id")))
    while True:
        rows = backend.export_table(shard, table, after, page)
        for row in rows:
            if upto is not None and tuple(row[:width]) > tuple(upto):
                return
            if not _empty(table, row):
                yield row
        if len(rows) < page:
            return
        after = rows[-1][:width]


def _row_at(
    backend: Backend, shard: int, table: str, after: Row | None, key: Row, width: int
) -> Row | None:
    """The replica's row of `key` now (read as the first row past the key before it)."""
    rows = backend.export_table(shard, table, after, 1)
    if not rows or rows[0][:width] != key or _empty(table, rows[0]):
        return None
    return rows[0]


def _empty(table: str, row: Row) -> bool:
    """A count row of 0, which is as good as none: one replica may keep the row of a list
    whose edges all changed state, another (that got only the final state) never had it."""
    return table == "counts" and row[3] == 0


def repair_shard(
    shard: int,
    replicas: Replicas,
    differences: Sequence[ReplicaDifference],
    cap: int = DEFAULT_TIMELINE_CAP,
) -> None:
    """Write every variant of each differing row to every replica under the merge rule, then
    recount the lists touched (see the module docstring)."""
    variants: dict[str, list[Row]] = {}
    touched: set[int] = set()  # id1s whose counts are recomputed
    for difference in differences:
        rows = {row for row in difference.rows.values() if row is not None}
        variants.setdefault(difference.table, []).extend(rows)
        if difference.table in ("edges", "counts"):
            touched.add(difference.key[0])
    for _, backend in replicas:
        _write_variants(backend, shard, variants, cap)
    if touched:
        for _, backend in replicas:
            backend.recount(shard, True, sorted(touched))


def _write_variants(backend: Backend, shard: int, variants: dict[str, list[Row]], cap: int) -> None:
    edges: list[EdgeTuple] = [
        (r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in variants.get("edges", [])
    ]
    nodes = [NodeRow(r[0], r[1], r[2], r[3]) for r in variants.get("node_states", [])]
    objects = [
        ObjRow(r[0], r[1], r[2], r[3], r[4], unpack(bytes(r[5])))
        for r in variants.get("objects", [])
    ]
    if edges or nodes or objects:
        backend.apply(shard, edges, objects, nodes)
    entries: list[IndexEntry] = []
    for table, rows in variants.items():
        if table.startswith("index_"):
            index = int(table.removeprefix("index_"))
            entries += [_entry(index, row) for row in rows]
    if entries:
        backend.index_apply(shard, entries)
    timelines: dict[int, list[TimelineEntry]] = {}
    for owner, blob in variants.get("timelines", []):
        timelines.setdefault(owner, []).extend(unpack_timeline(blob))
    if timelines:
        backend.merge_timelines(shard, timelines, cap)


def _entry(index: int, row: Row) -> IndexEntry:
    key, id, updated_at, version, state = row
    return (index, bytes(key), int(id), int(updated_at), int(version), int(state))


# -- the last run's figures, for the metrics ---------------------------------------------


def _record(backend: Backend, report: VerifyReport) -> None:
    by_table: dict[str, int] = {}
    for difference in report.differences:
        by_table[difference.table] = by_table.get(difference.table, 0) + 1
    figures = {
        "at": time.time(),
        "shards": len(report.shards),
        "rows": report.rows,
        "differences": len(report.differences),
        "repaired": report.repaired,
        "by_table": by_table,
    }
    value = json.dumps(figures).encode()
    try:
        for _ in range(10):  # another run may record at the same time: the last one wins
            if backend.swap_meta(LAST_RUN_KEY, backend.get_meta(LAST_RUN_KEY), value):
                return
    except Unavailable:
        pass  # figures for the metrics only: the report itself is what the caller gets


def last_run(backend: Backend) -> dict[str, Any] | None:
    """The last verify's figures (`at`, `shards`, `rows`, `differences`, `repaired`,
    `by_table`), or None if the replicas were never verified."""
    raw = backend.get_meta(LAST_RUN_KEY)
    if raw is None:
        return None
    figures: dict[str, Any] = json.loads(raw)
    return figures
