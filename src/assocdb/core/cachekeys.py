"""The kinds of cache entries: the vocabulary cache keys carry between floors.

A cache key is `(kind, key)`: the tier-1 cache fills, admits and invalidates
by it, the Redis tier names and encodes values by it, a write's leg lists the
keys it changes (`writes.shards`), a shard map names the keys a partial write
leaves stale, and the server's workers pass invalidations by it. Hot keys
(`cache.hotkeys`) count a list as one key, `(LIST, id1, atype)`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class CacheKind(StrEnum):
    """What a cache entry holds, and so what its key is."""

    COUNTS = "counts"  # a list's counts per state; key (id1, atype)
    PREFIX = "prefix"  # a list's newest edges; key (id1, atype)
    OBJECT = "object"  # an object's row, or "no such object"; key its id
    HOME = "home"  # a home timeline's packed blob; key its owner
    LIST = "list"  # a hot key only: a list, both its entries; (LIST, id1, atype)

    # A kind hashes and compares as its string (C speed, and a key decoded from
    # Redis or the workers' ring as a plain string finds the same entry); an
    # Enum's own __hash__ is a Python call on every dict lookup of a key.
    __hash__ = str.__hash__


#: A cache entry's key: `(COUNTS | PREFIX, (id1, atype))`, `(OBJECT, id)`, `(HOME, owner)`.
CacheKey = tuple[CacheKind, Any]

COUNTS = CacheKind.COUNTS
PREFIX = CacheKind.PREFIX
OBJECT = CacheKind.OBJECT
HOME = CacheKind.HOME
LIST = CacheKind.LIST
