"""A home timeline as one packed, capped list: the merge rule for fan-out on write.

Twitter kept each home timeline as a capped list of packed 64-bit ids in
Redis. Here a home timeline is one row per user holding a blob of entries

    (time, item, author, stamp)      four signed 64-bit integers, little-endian

newest first by `(time, item)`, the entry's *key*. `stamp` is
`updated_at * 2 + deleted`: every entry is a last-writer-wins register, so a
delivery and a delete of the same item (a tombstone) may arrive in any order
and the later write wins; on an equal `updated_at` the tombstone wins, then the
author decides, so the order is total.

`merge(blob, writes, cap)` folds writes in: union by key (the higher stamp
wins), then keep the `cap` newest keys, tombstones included. A tombstone takes
a slot like a live entry does; that is what makes the merge commutative,
associative and idempotent even with the cap: an entry trimmed away is
older than `cap` other keys, and merging more writes only adds keys, so it
could never have come back. (If tombstones did not count, "deliver 801
items, then delete one" would keep 799 while "delete, then deliver" keeps
800.) An item keeps one key: a delete carries the time the item was posted
with, so its tombstone lands on the entry it removes.

A cap of 800 entries is 25.6 KB per user. Pure: no I/O.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence

from .cursor import Seek

#: (time, item, author, stamp) with stamp = updated_at * 2 + deleted.
Entry = tuple[int, int, int, int]
TimelineKey = tuple[int, int]  # (time, item)
_WIDTH = 4
_ENTRY_BYTES = _WIDTH * 8
_SWAP = sys.byteorder != "little"  # the blob is little-endian on every machine


def entry(time: int, item: int, author: int, updated_at: int, deleted: bool = False) -> Entry:
    """One timeline write: a delivery, or (`deleted`) a tombstone."""
    return (time, item, author, updated_at * 2 + int(deleted))


def is_deleted(e: Entry) -> bool:
    return bool(e[3] & 1)


def unpack(blob: bytes | None) -> list[Entry]:
    """The entries of a stored blob, newest first."""
    if not blob:
        return []
    values = array("q")
    values.frombytes(blob)
    if _SWAP:
        values.byteswap()
    it = iter(values)
    return list(zip(it, it, it, it, strict=True))


def pack(entries: Iterable[Entry]) -> bytes:
    values = array("q", [v for e in entries for v in e])
    if _SWAP:
        values.byteswap()
    return values.tobytes()


def merge(current: Iterable[Entry], writes: Iterable[Entry], cap: int) -> list[Entry]:
    """The list after `writes`: union by key (highest stamp wins), the `cap` newest keys."""
    best: dict[TimelineKey, Entry] = {}
    for e in (*current, *writes):
        key = (e[0], e[1])
        held = best.get(key)
        if held is None or (e[3], e[2]) > (held[3], held[2]):
            best[key] = e
    newest = sorted(best, reverse=True)[:cap]
    return [best[key] for key in newest]


def merge_blob(blob: bytes | None, writes: Sequence[Entry], cap: int) -> bytes | None:
    """`merge` on a stored blob: the new blob, or None if nothing changed."""
    if len(writes) == 1:
        head = unpack(blob[:_ENTRY_BYTES]) if blob else []
        if not head or writes[0][:2] > head[0][:2]:
            # The common case, a delivery newer than everything held: prepend the
            # bytes, trim (no unpacking: the cache does this per cached follower).
            return pack(writes) + (blob or b"")[: (cap - 1) * _ENTRY_BYTES]
    current = unpack(blob)
    merged = merge(current, writes, cap)
    return None if merged == current else pack(merged)


def visible(entries: Iterable[Entry], seek: Seek) -> Iterator[Entry]:
    """The live entries past the seek, in its direction (newest first when forward)."""
    ordered = list(entries) if seek.forward else list(reversed(list(entries)))
    bound = seek.boundary
    for e in ordered:
        if is_deleted(e):
            continue
        if bound is not None:
            key = (e[0], e[1])
            if seek.forward and not (key < bound or (seek.inclusive and key == bound)):
                continue
            if not seek.forward and not (key > bound or (seek.inclusive and key == bound)):
                continue
        yield e
