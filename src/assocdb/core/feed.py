"""The change feed's cursor and its page rule (pure: no I/O).

Each shard keeps its own feed, numbered by dense positions in commit order
(`storage.sqlfeed`). A feed cursor is the vector of the last position consumed on every
shard, so "after the cursor" is, on each shard, what follows its position. On the wire it
is opaque like a page cursor: url-safe base64 of a version byte and the positions as
unsigned 64-bit integers, with an 8-byte BLAKE2b checksum over them and the shard
count; a mangled cursor, or one of a graph with another shard count, is InvalidCursor.

A page merges the shards' next records by `updated_at` (a k-way merge takes the head of
one shard's run at a time, so each shard's order is kept; across shards the order is
only roughly time order) and stops at `limit`. Each shard is read for a share of the
page (`share`: a page of 10,000 from 16 shards reads 12,500 rows, not 160,000).
What a shard that may hold more holds next is unknown, but not older than the last
record read of it (by the running maximum, below), so the page takes no record newer
than that, from any shard; records as old as it are taken from every shard (a bulk
load's or a node operation's records share one `updated_at`: they fill a page from
every shard, not a shard's share at a time). The next cursor moves each shard to the
last record the page took from it, or read past and filtered out.

`merge` computes that k-way merge without taking one record at a time (a heap step per
record was a third of a consumer's time). A run's `updated_at` may fall back (writers
commit out of their clocks' order), so each record is ranked by its run's running
maximum instead: a heap merge takes a record that falls back right after the one before
it (it is below every other head, which were all above that one), and so does an
ordinary sort by the running maximum, ties by shard, then by place in the run. With
those keys sorted in every run, where the page stops is a key, and how much of each run
comes before it is a bisection; the page's order is one stable sort of the runs laid
end to end, in shard order.
"""

from __future__ import annotations

import struct
from base64 import urlsafe_b64decode, urlsafe_b64encode
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from hashlib import blake2b
from itertools import accumulate, chain, compress, islice
from typing import Generic, NamedTuple, TypeVar

from .errors import InvalidCursor

T = TypeVar("T")
Positions = tuple[int, ...]
#: A stored record: (pos, kind, id1, atype, id2, state, time, updated_at, data); an object
#: is (pos, OBJECT, id, otype, version, state, 0, updated_at, packed data), a node state
#: (pos, NODE, node, atype, 0, state, 0, updated_at, None).
FeedRow = tuple[int, int, int, int, int, int, int, int, bytes | None]
EDGE, OBJECT, NODE = 1, 2, 3  # a record's `kind`

FEED_LIMIT = 1000  # changes per page, by default
_VERSION = 1
_MAC = 8


def start(shards: int) -> Positions:
    """The cursor before every change ever recorded."""
    return (0,) * shards


def encode(positions: Positions) -> str:
    """The opaque token for a vector of per-shard positions."""
    body = struct.pack(f">B{len(positions)}Q", _VERSION, *positions)
    return urlsafe_b64encode(body + _mac(body)).rstrip(b"=").decode("ascii")


def decode(token: object, shards: int) -> Positions:
    """The positions a token stands for, or InvalidCursor."""
    size = 1 + 8 * shards + _MAC
    if not isinstance(token, str) or len(token) > 2 * size:
        raise InvalidCursor(f"a feed cursor is a string returned by changes(); got {token!r:.60}")
    try:
        raw = urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except ValueError:
        raw = b""
    body, mac = raw[:-_MAC], raw[-_MAC:]
    if len(raw) != size or raw[0] != _VERSION or mac != _mac(body):
        raise InvalidCursor(f"not a feed cursor of this graph ({shards} shards): {token!r:.60}")
    return struct.unpack(f">{shards}Q", body[1:])


def deal(members: Sequence[str], shards: int, me: str) -> frozenset[int]:
    """The shards member `me` of a consumer group reads: shard s goes to the (s mod n)-th
    of the `n` live members in name order (every member deals alike from one list)."""
    ranked = sorted(set(members))
    if me not in ranked:
        return frozenset()
    mine = ranked.index(me)
    return frozenset(s for s in range(shards) if s % len(ranked) == mine)


def share(limit: int, shards: int) -> int:
    """How many records to read of each shard for a page of `limit`: a quarter more than
    an even share. A page of shards written alike is then nearly always full, and what it
    reads but does not take (read again by the next page) is a fifth of its reading (at
    twice an even share it was half). Whatever the share, a page is short when one shard
    is written more than the others."""
    return min(limit, max(64, -(-5 * limit // (4 * shards))))


class Merged(NamedTuple, Generic[T]):
    """A page merged from the shards' runs (`merge`)."""

    #: Per shard, the items the page takes of its run, in the run's order.
    taken: list[list[T]]
    #: The page's order: indexes into the concatenation of `taken`, shard after shard.
    order: list[int]
    #: The positions after the page: on each shard, the last item taken or passed over.
    moved: Positions

    def pairs(self) -> list[tuple[int, T]]:
        """(shard, item) in the page's order."""
        flat = [(shard, item) for shard, run in enumerate(self.taken) for item in run]
        return [flat[i] for i in self.order]


def merge(
    runs: Sequence[Sequence[T]],
    position: Callable[[T], int],
    time: Callable[[T], int],
    limit: int,
    keep: Callable[[T], bool] | None,
    after: Positions,
    read: int | None = None,
) -> Merged[T]:
    """Up to `limit` kept items of the shards' `runs` (each in position order), merged by
    `time` keeping each run's order (see the module doc), and the positions after them
    (an item `keep` refuses is passed over: its position is consumed; None keeps all). A
    run of `read` items may go on: the merge takes nothing newer than its last one."""
    keys = [list(accumulate(map(time, run), max)) for run in runs]
    ends = [k[-1] for k in keys if k and len(k) == read]
    upto = [bisect_right(k, min(ends)) if ends else len(k) for k in keys]
    flags = None
    if keep is not None:
        flags = [list(map(keep, islice(run, n))) for run, n in zip(runs, upto, strict=True)]
    order, flat = _order(keys, upto, flags)
    if len(order) >= limit:  # the page stops at its `limit`-th item
        last = order[limit - 1]
        upto = _upto(keys, (flat[last], *_place(upto, flags, last)))
        order, flat = _order(keys, upto, flags)
    if flags is None:
        taken = [list(islice(run, n)) for run, n in zip(runs, upto, strict=True)]
    else:
        taken = [
            list(compress(islice(run, n), f)) for run, n, f in zip(runs, upto, flags, strict=True)
        ]
    moved = tuple(
        position(run[n - 1]) if n else at for run, n, at in zip(runs, upto, after, strict=True)
    )
    return Merged(taken, order, moved)


def _order(
    keys: Sequence[list[int]], upto: Sequence[int], flags: Sequence[list[bool]] | None
) -> tuple[list[int], list[int]]:
    """The merge order of the kept items of each run's first `upto`, as indexes into their
    keys laid end to end (a stable sort: ties by shard, then place), and those keys."""
    heads = (islice(k, n) for k, n in zip(keys, upto, strict=True))
    kept = heads if flags is None else map(compress, heads, flags)
    flat = list(chain.from_iterable(kept))
    return sorted(range(len(flat)), key=flat.__getitem__), flat


def _place(upto: Sequence[int], flags: Sequence[list[bool]] | None, index: int) -> tuple[int, int]:
    """(shard, place in its run, from 1) of the `index`-th kept item, shard after shard."""
    for shard, n in enumerate(upto):
        places: Sequence[int] = range(1, n + 1)
        if flags is not None:
            places = list(compress(places, flags[shard]))
        if index < len(places):
            return shard, places[index]
        index -= len(places)
    raise IndexError(index)


def _upto(keys: Sequence[Sequence[int]], last: tuple[int, int, int]) -> list[int]:
    """How many items of each run come up to `last` = (key, shard, place) in the merge."""
    key, shard, place = last
    return [
        place if s == shard else (bisect_right if s < shard else bisect_left)(k, key)
        for s, k in enumerate(keys)
    ]


def _mac(body: bytes) -> bytes:
    return blake2b(body, digest_size=_MAC, person=b"assocdb-feed").digest()
