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
wins), then trim. A tombstone of an item the list holds (or held: a delivery
of its key met it) takes a slot like a live entry does, so the merge stays
commutative with the cap: an entry trimmed away is older than `cap` other
such keys, and merging more writes only adds keys, so it could never have
come back. (If those did not count, "deliver 801 items, then delete one"
would keep 799 while "delete, then deliver" keeps 800.)

A tombstone of an item the list never received (it was capped out, never
delivered to this follower, or its author is read-fanned) takes no slot:
deletes are fanned out to everyone who ever followed, and such a tombstone
must not push a live item out of the list. It is kept, *loose* (stored with
its author negated), while it is among the `cap` newest keys, so a delivery
of its item that arrives after it (the delete's fan-out overtook the post's)
finds it, and the two make a tombstone that counts. So the list keeps the
`cap` newest counted keys and the loose tombstones among the `cap` newest
keys: at most twice `cap` entries. The merge is commutative except in one
corner: a delivery that arrives after `cap` newer keys have pushed out its
item's loose tombstone shows the deleted item.

An item keeps one key: a delete carries the time the item was posted
with, so its tombstone lands on the entry it removes.

A cap of 800 entries is 25.6 KB per user. Pure: no I/O.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence

from .cursor import Seek

#: (time, item, author, stamp) with stamp = updated_at * 2 + deleted.
TimelineEntry = tuple[int, int, int, int]
Entry = TimelineEntry  # the name older imports use
TimelineKey = tuple[int, int]  # (time, item)
_WIDTH = 4
_ENTRY_BYTES = _WIDTH * 8
_SWAP = sys.byteorder != "little"  # the blob is little-endian on every machine
_AUTHOR_SIGN = 3 * 8 - 1  # the byte of an entry that holds its author's sign bit
_NO_SIGN = bytes(range(128))  # the bytes without it


def entry(
    time: int, item: int, author: int, updated_at: int, deleted: bool = False
) -> TimelineEntry:
    """One timeline write: a delivery, or (`deleted`) a tombstone."""
    return (time, item, author, updated_at * 2 + int(deleted))


def is_deleted(e: TimelineEntry) -> bool:
    return bool(e[3] & 1)


def unpack(blob: bytes | None) -> list[TimelineEntry]:
    """The entries of a stored blob, newest first."""
    if not blob:
        return []
    values = array("q")
    values.frombytes(blob)
    if _SWAP:
        values.byteswap()
    it = iter(values)
    return list(zip(it, it, it, it, strict=True))


def pack(entries: Iterable[TimelineEntry]) -> bytes:
    values = array("q", [v for e in entries for v in e])
    if _SWAP:
        values.byteswap()
    return values.tobytes()


def merge(
    current: Iterable[TimelineEntry], writes: Iterable[TimelineEntry], cap: int
) -> list[TimelineEntry]:
    """The list after `writes`: union by key (highest stamp wins), trimmed (see above)."""
    best: dict[TimelineKey, TimelineEntry] = {}
    for e in (*current, *(_loose(w) if w[3] & 1 else w for w in writes)):
        key = (e[0], e[1])
        held = best.get(key)
        best[key] = e if held is None else _join(held, e)
    newest = sorted(best, reverse=True)
    kept = [key for key in newest if best[key][2] > 0][:cap]
    loose = [key for key in newest[:cap] if best[key][2] < 0]
    if loose:
        kept = sorted(kept + loose, reverse=True)
    return [best[key] for key in kept]


def _loose(tombstone: TimelineEntry) -> TimelineEntry:
    """A tombstone as it arrives: loose until it meets a delivery of its key."""
    return (tombstone[0], tombstone[1], -abs(tombstone[2]), tombstone[3])


def _join(a: TimelineEntry, b: TimelineEntry) -> TimelineEntry:
    """Two entries of one key: the higher `(stamp, author)`, counted if either is
    (a delivery, or a tombstone that met one)."""
    win = a if (a[3], abs(a[2])) >= (b[3], abs(b[2])) else b
    author = abs(win[2]) if a[2] > 0 or b[2] > 0 else -abs(win[2])
    return win if author == win[2] else (win[0], win[1], author, win[3])


def merge_blob(blob: bytes | None, writes: Sequence[TimelineEntry], cap: int) -> bytes | None:
    """`merge` on a stored blob: the new blob, or None if nothing changed."""
    if len(writes) == 1 and not writes[0][3] & 1:
        head = unpack(blob[:_ENTRY_BYTES]) if blob else []
        if not head or writes[0][:2] > head[0][:2]:
            # The common case, a delivery newer than everything held: prepend the
            # bytes, trim (no unpacking: the cache does this per cached follower),
            # unless the trim must spare loose tombstones.
            keep = (cap - 1) * _ENTRY_BYTES
            if not blob or len(blob) <= keep or not _any_loose(blob):
                return pack(writes) + (blob or b"")[:keep]
    current = unpack(blob)
    merged = merge(current, writes, cap)
    return None if merged == current else pack(merged)


def _any_loose(blob: bytes) -> bool:
    """Whether the blob holds a loose tombstone, without unpacking: an author's last
    byte (little-endian) has its sign bit set."""
    return bool(blob[_AUTHOR_SIGN::_ENTRY_BYTES].translate(None, _NO_SIGN))


def visible(entries: Iterable[TimelineEntry], seek: Seek) -> Iterator[TimelineEntry]:
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
