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
page (`share`: a page of 10,000 from 16 shards reads about 20,000 rows, not 160,000);
the merge stops once it has taken the last record read of a shard that may hold more,
since what that shard holds next is unknown. The next cursor moves each shard to the
last record the page took from it, or read past and filtered out.
"""

from __future__ import annotations

import heapq
import struct
from base64 import urlsafe_b64decode, urlsafe_b64encode
from collections.abc import Callable, Sequence
from hashlib import blake2b
from typing import TypeVar

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
    """How many records to read of each shard for a page of `limit`."""
    return min(limit, max(64, -(-2 * limit // shards)))


def merge(
    runs: Sequence[Sequence[T]],
    position: Callable[[T], int],
    time: Callable[[T], int],
    limit: int,
    keep: Callable[[T], bool] | None,
    after: Positions,
    read: int | None = None,
) -> tuple[list[tuple[int, T]], Positions]:
    """Up to `limit` kept items of the shards' `runs` (each in position order), merged by
    `time` keeping each run's order, each with its shard; and the positions after them
    (an item `keep` refuses is passed over: its position is consumed; None keeps all). A
    run of `read` items may go on: the merge stops after its last one."""
    tagged = [  # (time, shard, n) is unique: the merge never compares the items
        [(time(item), shard, n, item) for n, item in enumerate(run, 1)]
        for shard, run in enumerate(runs)
    ]
    ends = {shard: len(run) for shard, run in enumerate(runs) if len(run) == read}
    taken: list[tuple[int, T]] = []
    moved = list(after)
    for _, shard, n, item in heapq.merge(*tagged):
        if len(taken) >= limit:
            break
        moved[shard] = position(item)
        if keep is None or keep(item):
            taken.append((shard, item))
        if ends.get(shard) == n:
            break
    return taken, tuple(moved)


def _mac(body: bytes) -> bytes:
    return blake2b(body, digest_size=_MAC, person=b"assocdb-feed").digest()
