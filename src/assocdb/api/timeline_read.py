"""Reading a home timeline: sources of items merged into one keyset-paged list.

A home timeline page is the newest `limit` items, past a cursor, of the union
of some *sources*, each a list ordered by `(time, item)`:

* the user's own packed home list (fan-out on write), with deleted entries
  skipped and entries of authors the user no longer follows filtered out
  (checked with one batched lookup of the follow edges of the page's authors);
* an author's own list of posts (fan-out on read), for every followee in read
  mode, for the followed celebrities in hybrid mode.

Each source reads at most `n` rows past the seek, in the seek's direction;
the top `n` of the union is then the top `n` of those, merged with
`heapq.merge` and de-duplicated by key (an item of an author who became a
celebrity can come from both sides). So a page costs one read per source
whichever page it is, and paging by `(time, item)` is stable while new items
arrive (`core.cursor.paginate`).

Fan-out on read groups the followees by shard and reads the shards in
parallel (`Sources.gather`); within a shard, one index range scan per
followee.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from ..core import cursor as _cursor
from ..core.cursor import Seek
from ..core.ids import shard_of
from ..core.scans import ListRow
from ..core.timeline_list import TimelineEntry, visible

#: (time, item, author): a timeline row, ordered by (time, item).
Row = tuple[int, int, int]
Source = Callable[[Seek, int], list[Row]]
#: `scan(author, seek, n)`: up to `n` rows of the author's own list past the seek
#: (from the cache when it holds them, else one index range scan).
ScanPosts = Callable[[int, Seek, int], list[ListRow]]


def merge_rows(lists: Iterable[Sequence[Row]], forward: bool, n: int) -> list[Row]:
    """The first `n` distinct rows of the union of sorted lists (descending when forward)."""
    lists = list(lists)
    if len(lists) == 1:
        return list(lists[0][:n])  # one source never repeats a key
    merged = heapq.merge(*lists, key=lambda r: (r[0], r[1]), reverse=forward)
    out: list[Row] = []
    last = None
    for row in merged:
        key = (row[0], row[1])
        if key != last:
            out.append(row)
            last = key
            if len(out) == n:
                break
    return out


def author_rows(scan: ScanPosts, authors: Sequence[int], seek: Seek, n: int) -> list[Row]:
    """The newest `n` items past `seek` of these authors (who share one shard)."""
    lists = [[(r[1], r[0], author) for r in scan(author, seek, n)] for author in authors]
    return merge_rows(lists, seek.forward, n)


def home_rows(
    entries: Sequence[TimelineEntry], followed: Callable[[set[int]], set[int]], seek: Seek, n: int
) -> list[Row]:
    """The first `n` live entries of a home list past `seek` whose authors are still followed.

    `followed(authors)` answers which of `authors` the user follows; it is asked
    once per batch of entries, about authors not yet known.
    """
    known: dict[int, bool] = {}
    out: list[Row] = []
    live: Iterator[TimelineEntry] = visible(entries, seek)
    while len(out) < n:
        batch = list(itertools.islice(live, n))  # usually all pass: one lookup
        if not batch:
            break
        unknown = {e[2] for e in batch} - known.keys()
        if unknown:
            yes = followed(unknown)
            known.update((a, a in yes) for a in unknown)
        out += [(e[0], e[1], e[2]) for e in batch if known[e[2]]]
    return out[:n]


class Sources:
    """The sources of one home timeline read, gathered in parallel across shards."""

    def __init__(self, pool: ThreadPoolExecutor | None) -> None:
        self.pool = pool
        self.sources: list[Source] = []

    def add(self, source: Source) -> None:
        self.sources.append(source)

    def add_authors(self, scan: ScanPosts, shards: int, authors: Iterable[int]) -> None:
        """Read these authors' own lists: one source per shard."""
        by_shard: dict[int, list[int]] = {}
        for author in authors:
            by_shard.setdefault(shard_of(author, shards), []).append(author)
        for group in by_shard.values():
            self.add(functools.partial(author_rows, scan, group))

    def gather(self, seek: Seek, n: int) -> list[Row]:
        """The first `n` rows past `seek` of the union of every source."""
        if self.pool is None or len(self.sources) < 2:
            lists = [source(seek, n) for source in self.sources]
        else:
            futures = [self.pool.submit(source, seek, n) for source in self.sources]
            lists = [future.result() for future in futures]
        return merge_rows(lists, seek.forward, n)

    def page(
        self, scope: bytes, seek: Seek, limit: int
    ) -> tuple[list[Row], str | None, str | None]:
        return _cursor.paginate(self.gather, lambda r: (r[0], r[1]), scope, seek, limit)
