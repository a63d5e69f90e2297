"""The copy step of a shard move (`storage.moves`): a replica's rows to a new copy, fast.

A table is read from the source replica in its key order, in pages (keyset:
each page starts after the last key of the one before), and each page is
written to the copy with the merge rule, in one transaction of multi-row
statements. Reading and writing overlap: while the copy commits page n on a
connection of its own, the next page is read from the source, so a page costs
the slower of the two, not their sum.

Edges (nearly every row of a shard) take `Backend.copy_edges`: the copy's
stored rows of the page's whole key range are read in one locking range scan
(on a new copy, only the live writes made since it joined), merged with the
page, and the changed rows and count deltas stored in key order. A row a live
write put on the copy meanwhile is newer than the copied one and is kept;
counts follow from the rows the merge stores, so they are right when the copy
ends. The other tables (node states, objects, home timelines, index entries)
go through the write path's own merges (`apply`, `merge_timelines`,
`index_apply`).

Pages are committed in order (one writer: the range scan's gap locks of two
pages next to each other would make concurrent writers wait on each other),
so the position saved after a page is a key below which every row is copied;
a copy resumed from it repeats at most the pages after it, which changes
nothing.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

from ..core.compress import unpack
from ..core.merge import EdgeTuple, NodeRow, ObjRow
from ..core.scans import IndexEntry
from ..core.timeline_list import unpack as unpack_timeline
from .backend import Backend
from .sqltext import TABLE_KEYS

#: Rows per page: big enough that a statement's round trip is small beside its rows,
#: small enough that a live write to the page's range waits a fraction of a second.
PAGE = 5000
#: Pages read ahead of the one being written.
AHEAD = 2

Row = tuple[Any, ...]


class Page(NamedTuple):
    table: str
    after: list[Any] | None  # the key before the page's first row (None: the table's start)
    rows: list[Row]

    @property
    def last(self) -> list[Any]:
        """The key of the page's last row (where the next page starts)."""
        return list(self.rows[-1][: key_width(self.table)])


def key_width(table: str) -> int:
    """How many leading columns of an exported row are its key."""
    return len(TABLE_KEYS.get(table, ("ikey", "id")))


def pages(
    read: Callable[[str, Any, int], list[Row]],
    table: str,
    after: list[Any] | None,
    size: int,
    throttle: Throttle,
) -> Iterator[Page]:
    """The pages of `table` after key `after`, read with `read(table, after, size)` as
    fast as `throttle` lets."""
    while True:
        throttle.wait()
        rows = read(table, after, size)
        throttle.count(len(rows))
        if rows:
            page = Page(table, after, rows)
            yield page
            after = page.last
        if len(rows) < size:
            return


def run(
    source: Iterator[Page],
    write: Callable[[Page], None],
    done: Callable[[Page], None],
    ahead: int = AHEAD,
) -> None:
    """Write every page of `source` with `write` on a thread of its own, in order, while
    the next ones are read; `done(page)` is called (on this thread) once a page is
    committed, in order. The first failure stops the copy and is raised here, after the
    write under way has ended."""
    with ThreadPoolExecutor(1, thread_name_prefix="assocdb-copy") as writer:
        pending: deque[tuple[Page, Future[None]]] = deque()
        try:
            for page in source:
                pending.append((page, writer.submit(write, page)))
                while pending and (len(pending) > ahead or pending[0][1].done()):
                    finished, future = pending.popleft()
                    future.result()
                    done(finished)
            while pending:
                finished, future = pending.popleft()
                future.result()
                done(finished)
        finally:
            for _, future in pending:
                future.cancel()


def write_page(target: Backend, shard: int, page: Page, cap: int) -> None:
    """A page of a replica's rows written to the copy under the merge rule."""
    rows, table = page.rows, page.table
    if table == "edges":
        edges: list[EdgeTuple] = [(r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows]
        after = page.after
        target.copy_edges(shard, None if after is None else (after[0], after[1], after[2]), edges)
    elif table == "node_states":
        target.apply(shard, (), (), [NodeRow(r[0], r[1], r[2], r[3]) for r in rows])
    elif table == "objects":
        objects = [ObjRow(r[0], r[1], r[2], r[3], r[4], unpack(bytes(r[5]))) for r in rows]
        target.apply(shard, (), objects)
    elif table == "timelines":
        target.merge_timelines(shard, {r[0]: unpack_timeline(r[1]) for r in rows}, cap)
    else:
        index = int(table.removeprefix("index_"))
        entries: list[IndexEntry] = [
            (index, bytes(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows
        ]
        target.index_apply(shard, entries)


class Throttle:
    """At most `rate` rows a second (None: no limit), counted from when it was made."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.started = time.perf_counter()
        self.rows = 0

    def count(self, rows: int) -> None:
        self.rows += rows

    def wait(self) -> None:
        if self.rate:
            ahead = self.rows / self.rate - (time.perf_counter() - self.started)
            if ahead > 0:
                time.sleep(ahead)
